// UTF-8 helpers shared by the tokenizer's parts (internal to src/llm).
//
// decode_utf8_lenient() reproduces llama.cpp's unicode_cpts_from_utf8(): a lead byte announces the sequence length
// (overlong forms and surrogates are accepted as llama.cpp accepts them), and every byte that does not start a
// complete sequence becomes U+FFFD and is skipped alone. One deliberate difference: a 4-byte sequence above
// U+10FFFF, on which llama.cpp throws while re-encoding, is treated as an invalid byte here.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hxrt::llm::detail {

inline constexpr char32_t kReplacementChar = 0xFFFD;

// Length of the sequence announced by `lead` (llama.cpp's unicode_len_utf8: 1 for ASCII and stray continuation
// bytes, 2/3/4 by the high nibble).
inline size_t utf8_sequence_length(uint8_t lead) {
  static constexpr uint8_t kLengths[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLengths[lead >> 4];
}

std::vector<char32_t> decode_utf8_lenient(std::string_view text);

// Appends the UTF-8 form of `cp` (cp <= 0x10FFFF; surrogates are written as 3-byte sequences, like llama.cpp).
void append_utf8(char32_t cp, std::string* out);

// Length of the longest prefix of `bytes` that is well-formed UTF-8 (RFC 3629: no overlongs, no surrogates).
size_t valid_utf8_prefix(std::string_view bytes);

// True when `tail` (at most 3 bytes) is the start of a well-formed UTF-8 sequence that more bytes could complete.
bool is_incomplete_utf8(std::string_view tail);

}  // namespace hxrt::llm::detail
