#include "llm/bpe.h"

#include <algorithm>

#include "llm/tokenizer_utf8.h"

namespace hxrt::llm::detail {
namespace {

constexpr TokenId kMerged = -2;                // id of a symbol that was merged into its left neighbour
constexpr char32_t kAlphabetEnd = 0x100 + 68;  // the remapped bytes take U+0100..U+0143

struct ByteAlphabet {
  std::array<char32_t, 256> to_unicode{};
  std::array<int16_t, kAlphabetEnd> to_byte{};
};

const ByteAlphabet& alphabet() {
  static const ByteAlphabet kAlphabet = [] {
    ByteAlphabet a;
    a.to_byte.fill(-1);
    char32_t next_remapped = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const char32_t cp = printable ? static_cast<char32_t>(b) : next_remapped++;
      a.to_unicode[static_cast<size_t>(b)] = cp;
      a.to_byte[cp] = static_cast<int16_t>(b);
    }
    return a;
  }();
  return kAlphabet;
}

bool candidate_after(const BpeScratch::Candidate& a, const BpeScratch::Candidate& b) {
  return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
}

}  // namespace

char32_t byte_to_unicode(uint8_t byte) {
  return alphabet().to_unicode[byte];
}

int unicode_to_byte(char32_t cp) {
  return cp < kAlphabetEnd ? alphabet().to_byte[cp] : -1;
}

void append_byte_level(std::string_view bytes, std::string* out) {
  for (const char c : bytes) append_utf8(byte_to_unicode(static_cast<uint8_t>(c)), out);
}

BpeMerger BpeMerger::build(const Vocab& vocab, std::span<const std::string> merges, Stats* stats) {
  BpeMerger merger;
  for (int b = 0; b < 256; ++b) {
    std::string text;
    append_utf8(byte_to_unicode(static_cast<uint8_t>(b)), &text);
    merger.byte_tokens_[static_cast<size_t>(b)] = vocab.find(text);
  }
  merger.merges_.reserve(merges.size());
  Stats local;
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string_view merge = merges[rank];
    // llama.cpp splits at the first space after the first byte.
    const size_t space = merge.find(' ', 1);
    if (space == std::string_view::npos) {
      ++local.merges_dropped;
      continue;
    }
    const std::string_view left = merge.substr(0, space);
    const std::string_view right = merge.substr(space + 1);
    joined.assign(left);
    joined.append(right);
    const TokenId left_id = vocab.find(left);
    const TokenId right_id = vocab.find(right);
    const TokenId merged_id = vocab.find(joined);
    if (left_id == kNoToken || right_id == kNoToken || merged_id == kNoToken ||
        !merger.merges_.emplace(key(left_id, right_id), Merge{static_cast<int32_t>(rank), merged_id}).second) {
      ++local.merges_dropped;
      continue;
    }
    ++local.merges_used;
  }
  if (stats != nullptr) *stats = local;
  return merger;
}

void BpeMerger::push_candidate(int32_t left, BpeScratch* scratch) const {
  const int32_t right = scratch->symbols[static_cast<size_t>(left)].next;
  if (right < 0) return;
  const TokenId left_id = scratch->symbols[static_cast<size_t>(left)].id;
  const TokenId right_id = scratch->symbols[static_cast<size_t>(right)].id;
  if (left_id < 0 || right_id < 0) return;
  const auto it = merges_.find(key(left_id, right_id));
  if (it == merges_.end()) return;
  scratch->heap.push_back({it->second.rank, left, right, left_id, right_id, it->second.merged});
  std::push_heap(scratch->heap.begin(), scratch->heap.end(), candidate_after);
}

void BpeMerger::encode_word(std::string_view word, bool ignore_merges, const Vocab& vocab, BpeScratch* scratch,
                            std::vector<TokenId>* out) const {
  if (word.empty()) return;
  if (ignore_merges) {
    scratch->text.clear();
    append_byte_level(word, &scratch->text);
    const TokenId whole = vocab.find(scratch->text);
    if (whole != kNoToken) {
      out->push_back(whole);
      return;
    }
  }

  auto& symbols = scratch->symbols;
  auto& heap = scratch->heap;
  symbols.clear();
  heap.clear();
  const auto n = static_cast<int32_t>(word.size());
  for (int32_t i = 0; i < n; ++i) {
    symbols.push_back(
        {byte_tokens_[static_cast<uint8_t>(word[static_cast<size_t>(i)])], i - 1, i + 1 < n ? i + 1 : -1});
  }
  for (int32_t i = 0; i + 1 < n; ++i) push_candidate(i, scratch);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), candidate_after);
    const BpeScratch::Candidate c = heap.back();
    heap.pop_back();
    BpeScratch::Symbol& left = symbols[static_cast<size_t>(c.left)];
    BpeScratch::Symbol& right = symbols[static_cast<size_t>(c.right)];
    // Stale: one side merged with something else since the pair was pushed.
    if (left.id != c.left_id || right.id != c.right_id || left.next != c.right) continue;
    left.id = c.merged;
    left.next = right.next;
    if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = c.left;
    right.id = kMerged;
    if (left.prev >= 0) push_candidate(left.prev, scratch);
    push_candidate(c.left, scratch);
  }

  // Symbol 0 is never merged away (merges fold the right symbol into the left one).
  for (int32_t i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) {
    // A byte whose alphabet character is not a token is dropped, as llama.cpp drops it.
    if (symbols[static_cast<size_t>(i)].id >= 0) out->push_back(symbols[static_cast<size_t>(i)].id);
  }
}

}  // namespace hxrt::llm::detail
