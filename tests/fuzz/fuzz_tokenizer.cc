// Tokenizer: arbitrary bytes in. The first byte picks the options, the rest is the text:
//   bit 0: the real model's tokenizer (when HXRT_TEST_MODEL names its GGUF) instead of a byte-level BPE toy vocabulary
//   bit 1: parse_special, bit 2: add_special.
// Invariants: encode never fails; every id it returns is in the vocabulary; with the toy vocabulary (byte-level,
// smollm pre-tokenizer, no clean-up rules) decode(encode(text)) == text for valid UTF-8 text; the same bytes read
// as token ids decode to text or OutOfRange, and a StreamingDecoder fed those ids prints what decode() returns when
// that is valid UTF-8.
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fuzz/fuzz_target.h"
#include "hxrt/formats/gguf.h"
#include "hxrt/llm/tokenizer.h"
#include "llm/bpe.h"
#include "llm/tokenizer_utf8.h"

namespace {

using hxrt::llm::TokenId;
using hxrt::llm::Tokenizer;

std::string byte_level(std::string_view raw) {
  std::string out;
  hxrt::llm::detail::append_byte_level(raw, &out);
  return out;
}

bool valid_utf8(std::string_view text) { return hxrt::llm::detail::valid_utf8_prefix(text) == text.size(); }

std::unique_ptr<Tokenizer> make_toy() {
  hxrt::llm::TokenizerSpec spec;
  spec.model = hxrt::llm::TokenizerModel::kBpe;
  spec.pre = "smollm";  // as the default model; no clean-up of " ," on decode, so text round-trips exactly
  spec.tokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  spec.token_types.assign(3, hxrt::llm::TokenType::kControl);
  for (int b = 0; b < 256; ++b) {
    spec.tokens.push_back(byte_level(std::string(1, static_cast<char>(b))));
    spec.token_types.push_back(hxrt::llm::TokenType::kNormal);
  }
  // Each merge's parts are tokens by the time it is added (the byte tokens, or an earlier merge's result).
  const char* merges[][2] = {{"t", "h"}, {"th", "e"}, {" ", "t"}, {"h", "e"}, {" t", "he"}, {"i", "n"},
                             {"e", "r"}, {"a", "n"}, {" ", "a"}, {"o", "n"}, {"\xc3", "\xa9"}, {"\xe2", "\x80"},
                             {"\xe2\x80", "\x99"}};
  for (const auto& [left, right] : merges) {
    spec.merges.push_back(byte_level(left) + " " + byte_level(right));
    const std::string merged = byte_level(std::string(left) + right);
    if (std::find(spec.tokens.begin(), spec.tokens.end(), merged) == spec.tokens.end()) {
      spec.tokens.push_back(merged);
      spec.token_types.push_back(hxrt::llm::TokenType::kNormal);
    }
  }
  spec.bos = 0;
  spec.eos = 0;
  auto tokenizer = Tokenizer::create(std::move(spec));
  HXRT_FUZZ_ASSERT(tokenizer.ok(), "toy vocabulary: %s", tokenizer.status().to_string().c_str());
  return std::move(tokenizer).value();
}

std::unique_ptr<Tokenizer> make_real() {
  const char* path = std::getenv("HXRT_TEST_MODEL");
  if (path == nullptr || *path == '\0') return nullptr;
  auto file = hxrt::formats::GgufFile::open(path);
  if (!file.ok()) return nullptr;
  auto spec = hxrt::llm::tokenizer_spec_from_gguf(*file);
  if (!spec.ok()) return nullptr;
  auto tokenizer = Tokenizer::create(std::move(spec).value());
  return tokenizer.ok() ? std::move(tokenizer).value() : nullptr;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::unique_ptr<Tokenizer> toy = make_toy();
  static const std::unique_ptr<Tokenizer> real = make_real();
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const bool use_real = (flags & 1) != 0 && real != nullptr;
  const Tokenizer& tokenizer = use_real ? *real : *toy;
  const int32_t vocab = tokenizer.vocab_size();

  hxrt::llm::EncodeOptions options;
  options.parse_special = (flags & 2) != 0;
  options.add_special = (flags & 4) != 0;
  hxrt::Result<std::vector<TokenId>> ids = tokenizer.encode(text, options);
  HXRT_FUZZ_ASSERT(ids.ok(), "encode failed: %s", ids.status().to_string().c_str());
  for (const TokenId id : *ids) HXRT_FUZZ_ASSERT(id >= 0 && id < vocab, "id %d outside the vocabulary", id);
  hxrt::Result<std::string> decoded = tokenizer.decode(*ids);
  HXRT_FUZZ_ASSERT(decoded.ok(), "decode of encoded ids failed: %s", decoded.status().to_string().c_str());
  if (!use_real && !options.parse_special && !options.add_special && valid_utf8(text)) {
    HXRT_FUZZ_ASSERT(*decoded == text, "round trip changed the text (%zu bytes in, %zu out)", text.size(),
                     decoded->size());
  }

  // The same bytes as token ids (two bytes each, a few beyond the vocabulary).
  std::vector<TokenId> raw_ids;
  for (size_t i = 0; i + 1 < text.size(); i += 2) {
    const int value = static_cast<uint8_t>(text[i]) | (static_cast<uint8_t>(text[i + 1]) << 8);
    raw_ids.push_back(static_cast<TokenId>(value % (vocab + 8)));
  }
  hxrt::Result<std::string> raw_text = tokenizer.decode(raw_ids);
  bool in_range = true;
  for (const TokenId id : raw_ids) in_range = in_range && id < vocab;
  HXRT_FUZZ_ASSERT(raw_text.ok() == in_range, "decode: %s", raw_text.status().to_string().c_str());
  if (!in_range) return 0;
  hxrt::llm::StreamingDecoder stream(tokenizer);
  std::string streamed;
  for (const TokenId id : raw_ids) {
    hxrt::Result<std::string> piece = stream.push(id);
    HXRT_FUZZ_ASSERT(piece.ok(), "streaming push: %s", piece.status().to_string().c_str());
    streamed += *piece;
  }
  streamed += stream.finish();
  if (!use_real && valid_utf8(*raw_text)) {
    HXRT_FUZZ_ASSERT(streamed == *raw_text, "streamed text differs from decode()");
  }
  return 0;
}
