// Byte-level BPE (GPT-2 style), as llama.cpp's llm_tokenizer_bpe_session merges one pre-tokenized word.
//
// Every byte of a word is first one symbol: the token for its character in the GPT-2 byte alphabet
// (byte_to_unicode). Adjacent symbols then merge, always the pair with the lowest merge rank first and, among
// equal ranks, the leftmost, until no adjacent pair has a merge. Symbols live in a doubly linked list and candidate
// pairs in a min-heap keyed (rank, left position); a popped pair whose symbols changed since it was pushed is
// stale and skipped. Merges are looked up by the pair of token ids in a hash map, so a word of n bytes costs
// O(n log n).
//
// Thread-safety: a BpeMerger is immutable after build(); encode_word() may run concurrently with its own scratch.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hxrt/llm/tokenizer.h"
#include "llm/tokenizer_vocab.h"

namespace hxrt::llm::detail {

// The GPT-2 byte alphabet: bytes that are printable Latin-1 map to themselves, the other 68 to U+0100.. in order.
char32_t byte_to_unicode(uint8_t byte);
// The byte a character of the alphabet stands for, or -1 when `cp` is not in it.
int unicode_to_byte(char32_t cp);
// Appends the alphabet form of `bytes` (UTF-8).
void append_byte_level(std::string_view bytes, std::string* out);

// Working memory for encode_word, reused across words to avoid allocations.
struct BpeScratch {
  struct Symbol {
    TokenId id;
    int32_t prev;
    int32_t next;
  };
  struct Candidate {
    int32_t rank;
    int32_t left;
    int32_t right;
    TokenId left_id;
    TokenId right_id;
    TokenId merged;
  };
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
  std::string text;
};

class BpeMerger {
 public:
  struct Stats {
    size_t merges_used = 0;
    size_t merges_dropped = 0;  // malformed, duplicate, or naming/producing text that is not a token
  };

  // Builds the merge table from "left right" strings (rank = index). A merge whose parts or result are not
  // tokens can never produce a token and is dropped (llama.cpp keeps it and then emits per-byte fallbacks).
  static BpeMerger build(const Vocab& vocab, std::span<const std::string> merges, Stats* stats);

  // Appends the tokens of one word (raw UTF-8 bytes) to `out`. With `ignore_merges`, a word whose byte-level
  // form is a token is emitted as that token directly (llama.cpp's ignore_merges pre-tokenizers).
  void encode_word(std::string_view word, bool ignore_merges, const Vocab& vocab, BpeScratch* scratch,
                   std::vector<TokenId>* out) const;

 private:
  struct Merge {
    int32_t rank;
    TokenId merged;
  };
  static uint64_t key(TokenId left, TokenId right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  void push_candidate(int32_t left, BpeScratch* scratch) const;

  std::array<TokenId, 256> byte_tokens_{};  // token of each byte's alphabet character, or kNoToken
  std::unordered_map<uint64_t, Merge> merges_;
};

}  // namespace hxrt::llm::detail
