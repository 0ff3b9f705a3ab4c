#include "llm/spm.h"

#include <algorithm>
#include <string>

#include "llm/tokenizer_utf8.h"

namespace hxrt::llm::detail {
namespace {

// Heap order: a candidate is "less" (popped later) when its score is lower or, on equal scores, it lies further
// right.
bool candidate_before(const SpmScratch::Candidate& a, const SpmScratch::Candidate& b) {
  return a.score < b.score || (a.score == b.score && a.left > b.left);
}

}  // namespace

SpmEncoder SpmEncoder::build(const Vocab& vocab) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  SpmEncoder encoder;
  for (int b = 0; b < 256; ++b) {
    const std::string hex = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
    TokenId id = vocab.find(hex);
    if (id == kNoToken) id = vocab.find(std::string(1, static_cast<char>(b)));
    encoder.byte_tokens_[static_cast<size_t>(b)] = id;
  }
  return encoder;
}

void SpmEncoder::push_candidate(std::string_view text, int32_t left, int32_t right, const Vocab& vocab,
                                SpmScratch* scratch) const {
  if (left < 0 || right < 0) return;
  const SpmScratch::Symbol& l = scratch->symbols[static_cast<size_t>(left)];
  const SpmScratch::Symbol& r = scratch->symbols[static_cast<size_t>(right)];
  const uint32_t length = l.length + r.length;
  const TokenId id = vocab.find(text.substr(l.offset, length));
  if (id == kNoToken) return;
  scratch->heap.push_back({vocab.scores[static_cast<size_t>(id)], left, right, length});
  std::push_heap(scratch->heap.begin(), scratch->heap.end(), candidate_before);
}

void SpmEncoder::encode(std::string_view text, const Vocab& vocab, TokenId unk, SpmScratch* scratch,
                        std::vector<TokenId>* out) const {
  if (text.empty()) return;
  auto& symbols = scratch->symbols;
  auto& heap = scratch->heap;
  symbols.clear();
  heap.clear();
  for (size_t offset = 0; offset < text.size();) {
    const size_t length = std::min(utf8_sequence_length(static_cast<uint8_t>(text[offset])), text.size() - offset);
    const auto index = static_cast<int32_t>(symbols.size());
    offset += length;
    symbols.push_back({static_cast<uint32_t>(offset - length), static_cast<uint32_t>(length), index - 1,
                       offset == text.size() ? -1 : index + 1});
  }
  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) push_candidate(text, i - 1, i, vocab, scratch);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), candidate_before);
    const SpmScratch::Candidate c = heap.back();
    heap.pop_back();
    SpmScratch::Symbol& left = symbols[static_cast<size_t>(c.left)];
    SpmScratch::Symbol& right = symbols[static_cast<size_t>(c.right)];
    if (left.length == 0 || right.length == 0 || left.length + right.length != c.length) continue;
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = c.left;
    push_candidate(text, left.prev, c.left, vocab, scratch);
    push_candidate(text, c.left, left.next, vocab, scratch);
  }

  for (int32_t i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) {
    const SpmScratch::Symbol& symbol = symbols[static_cast<size_t>(i)];
    const std::string_view piece = text.substr(symbol.offset, symbol.length);
    const TokenId id = vocab.find(piece);
    if (id != kNoToken) {
      out->push_back(id);
      continue;
    }
    for (const char byte : piece) {
      const TokenId byte_id = byte_tokens_[static_cast<uint8_t>(byte)];
      if (byte_id != kNoToken) {
        out->push_back(byte_id);
      } else if (unk != kNoToken) {
        out->push_back(unk);
      }
    }
  }
}

}  // namespace hxrt::llm::detail
