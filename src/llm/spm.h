// SentencePiece-style BPE (llama.cpp's llm_tokenizer_spm_session) for "llama" vocabularies with scores.
//
// The input (spaces already replaced by U+2581 "▁") starts as one symbol per UTF-8 character, the length taken
// from the lead byte alone as llama.cpp does. Adjacent symbols whose concatenation is a token are candidates;
// the candidate whose token has the highest score merges first (ties: the leftmost). Symbols that end up not
// being tokens are emitted byte by byte as the byte tokens "<0xNN>" (or, failing that, the token whose text is
// the single byte; failing that, the unknown token, where llama.cpp would throw).
//
// Thread-safety: an SpmEncoder is immutable after build(); encode() may run concurrently with its own scratch.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "hxrt/llm/tokenizer.h"
#include "llm/tokenizer_vocab.h"

namespace hxrt::llm::detail {

struct SpmScratch {
  struct Symbol {
    uint32_t offset;  // in the text
    uint32_t length;  // bytes; 0 once merged into the left neighbour
    int32_t prev;
    int32_t next;
  };
  struct Candidate {
    float score;
    int32_t left;
    int32_t right;
    uint32_t length;  // bytes of left + right when pushed
  };
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
};

class SpmEncoder {
 public:
  static SpmEncoder build(const Vocab& vocab);

  // Appends the tokens of `text` to `out`; `unk` stands in for a byte no token can represent (kNoToken: dropped).
  void encode(std::string_view text, const Vocab& vocab, TokenId unk, SpmScratch* scratch,
              std::vector<TokenId>* out) const;

  // The token for a raw byte ("<0xNN>", else the one-byte text), or kNoToken.
  TokenId byte_token(uint8_t byte) const { return byte_tokens_[byte]; }

 private:
  void push_candidate(std::string_view text, int32_t left, int32_t right, const Vocab& vocab,
                      SpmScratch* scratch) const;

  std::array<TokenId, 256> byte_tokens_{};
};

}  // namespace hxrt::llm::detail
