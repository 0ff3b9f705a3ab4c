// The recognizer: llama.cpp's pushdown stacks, advanced one code point at a time, with UTF-8 decoding in front so
// that it consumes bytes.
//
// Note [Bounded steps]: a step expands every stack whose top is a rule reference into one stack per alternative,
// until each top is a character set. Without left recursion (parse_gbnf rejects it) every expansion ends. Two sets
// keep the work polynomial on ambiguous grammars: the result set drops duplicate stacks, and `visited` drops a
// rule-reference stack already expanded in this step (`a ::= b | b` would otherwise double the work per level).
// What is left is bounded by the matcher's kMaxStacks and kMaxStackElements; a step past them is rejected.
#include <algorithm>
#include <cstring>

#include "llm/grammar_internal.h"

namespace hxrt::llm {
namespace detail {
namespace {

using Type = GrammarElementType;

constexpr size_t kSmallSet = 16;           // up to this many stacks, duplicates are found by a linear scan
constexpr size_t kMaxVisited = 1 << 14;   // rule-reference stacks expanded in one step
constexpr size_t kMaxVisitedElements = GrammarMatcher::kMaxStackElements * 4;  // summed over those stacks

uint64_t hash_stack(std::span<const uint32_t> stack) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ stack.size();
  for (const uint32_t v : stack) {
    h ^= v;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 32;
  }
  return h;
}

bool is_end_of_sequence(const GrammarElement& e) { return e.type == Type::kEnd || e.type == Type::kAlt; }

// Whether the character set starting at `set` holds `cp`.
bool match_char(const GrammarElement* set, uint32_t cp) {
  if (set->type == Type::kCharAny) return true;
  const bool positive = set->type == Type::kChar;
  bool found = false;
  do {
    if (set[1].type == Type::kCharRangeUpper) {
      found = found || (set->value <= cp && cp <= set[1].value);
      set += 2;
    } else {
      found = found || set->value == cp;
      set += 1;
    }
  } while (set->type == Type::kCharAlt);
  return found == positive;
}

// Whether the set holds some code point in [lo, hi]. The least such point, if any, is lo or where one of the
// set's ranges begins (a positive set) or ends (a negated one), so those are the only candidates.
bool match_char_in_range(const GrammarElement* set, uint32_t lo, uint32_t hi) {
  if (set->type == Type::kCharAny || match_char(set, lo)) return true;
  const GrammarElement* e = set;
  do {
    const uint32_t first = e->value;
    const uint32_t last = e[1].type == Type::kCharRangeUpper ? e[1].value : first;
    e += e[1].type == Type::kCharRangeUpper ? 2 : 1;
    if (first >= lo && first <= hi && match_char(set, first)) return true;
    if (last + 1 >= lo && last + 1 <= hi && match_char(set, last + 1)) return true;
  } while (e->type == Type::kCharAlt);
  return false;
}

// The position after the character set starting at `pos`.
uint32_t skip_char_set(std::span<const GrammarElement> el, uint32_t pos) {
  if (el[pos].type == Type::kCharAny) return pos + 1;
  do {
    pos += el[pos + 1].type == Type::kCharRangeUpper ? 2 : 1;
  } while (el[pos].type == Type::kCharAlt);
  return pos;
}

bool within_limits(const GrammarStacks& stacks) {
  return stacks.size() <= GrammarMatcher::kMaxStacks && stacks.total_elements() <= GrammarMatcher::kMaxStackElements;
}

// Expands scratch->current (Note [Bounded steps]) into *out.
bool expand(const Grammar& grammar, GrammarStacks* out, GrammarScratch* s) {
  const std::span<const GrammarElement> el = grammar.elements();
  s->work.assign(s->current.begin(), s->current.end());
  s->work_ends.assign(1, static_cast<uint32_t>(s->work.size()));
  while (!s->work_ends.empty()) {
    const uint32_t end = s->work_ends.back();
    s->work_ends.pop_back();
    const uint32_t begin = s->work_ends.empty() ? 0 : s->work_ends.back();
    s->current.assign(s->work.begin() + begin, s->work.begin() + end);
    s->work.resize(begin);
    if (s->current.empty() || el[s->current.back()].type != Type::kRuleRef) {
      out->insert(s->current);
      if (!within_limits(*out)) return false;
      continue;
    }
    if (!s->visited.insert(s->current)) continue;
    if (s->visited.size() > kMaxVisited || s->visited.total_elements() > kMaxVisitedElements) return false;
    const uint32_t top = s->current.back();
    s->current.pop_back();
    if (!is_end_of_sequence(el[top + 1])) s->current.push_back(top + 1);
    for (const uint32_t alt : grammar.alternatives(el[top].value)) {
      s->work.insert(s->work.end(), s->current.begin(), s->current.end());
      if (!is_end_of_sequence(el[alt])) s->work.push_back(alt);
      s->work_ends.push_back(static_cast<uint32_t>(s->work.size()));
    }
    if (s->work.size() > GrammarMatcher::kMaxStackElements * 4) return false;
  }
  return true;
}

}  // namespace

bool GrammarStacks::has_empty_stack() const {
  for (size_t i = 0; i < size(); ++i) {
    if (offsets_[i] == offsets_[i + 1]) return true;
  }
  return false;
}

void GrammarStacks::clear() {
  data_.clear();
  offsets_.assign(1, 0);
  hashes_.clear();
  table_.clear();
}

bool GrammarStacks::find(std::span<const uint32_t> stack, uint64_t hash) const {
  const auto equal = [&](size_t i) {
    const std::span<const uint32_t> other = this->stack(i);
    return hashes_[i] == hash && other.size() == stack.size() &&
           std::equal(other.begin(), other.end(), stack.begin());
  };
  if (table_.empty()) {
    for (size_t i = 0; i < size(); ++i) {
      if (equal(i)) return true;
    }
    return false;
  }
  const size_t mask = table_.size() - 1;
  for (size_t slot = hash & mask; table_[slot] != 0; slot = (slot + 1) & mask) {
    if (equal(table_[slot] - 1)) return true;
  }
  return false;
}

void GrammarStacks::rebuild_table() {
  size_t capacity = 64;
  while (capacity < size() * 4) capacity *= 2;
  table_.assign(capacity, 0);
  const size_t mask = capacity - 1;
  for (size_t i = 0; i < size(); ++i) {
    size_t slot = hashes_[i] & mask;
    while (table_[slot] != 0) slot = (slot + 1) & mask;
    table_[slot] = static_cast<uint32_t>(i + 1);
  }
}

bool GrammarStacks::insert(std::span<const uint32_t> stack) {
  const uint64_t hash = hash_stack(stack);
  if (find(stack, hash)) return false;
  data_.insert(data_.end(), stack.begin(), stack.end());
  offsets_.push_back(static_cast<uint32_t>(data_.size()));
  hashes_.push_back(hash);
  if (size() > kSmallSet && (table_.empty() || size() * 2 > table_.size())) {
    rebuild_table();
  } else if (!table_.empty()) {
    const size_t mask = table_.size() - 1;
    size_t slot = hash & mask;
    while (table_[slot] != 0) slot = (slot + 1) & mask;
    table_[slot] = static_cast<uint32_t>(size());
  }
  return true;
}

Utf8Step utf8_step(uint8_t byte, PartialUtf8* partial, char32_t* cp) {
  if (partial->remaining > 0) {
    if (byte < partial->next_lo || byte > partial->next_hi) return Utf8Step::kReject;
    partial->value = (partial->value << 6) | (byte & 0x3Fu);
    partial->next_lo = 0x80;
    partial->next_hi = 0xBF;
    if (--partial->remaining > 0) return Utf8Step::kPartial;
    *cp = partial->value;
    *partial = PartialUtf8();
    return Utf8Step::kCodePoint;
  }
  if (byte < 0x80) {
    *cp = byte;
    return Utf8Step::kCodePoint;
  }
  // RFC 3629's table of well-formed sequences: the lead byte fixes the length and the second byte's range.
  uint8_t lo = 0x80, hi = 0xBF;
  if (byte >= 0xC2 && byte <= 0xDF) {
    partial->remaining = 1;
  } else if (byte >= 0xE0 && byte <= 0xEF) {
    partial->remaining = 2;
    if (byte == 0xE0) lo = 0xA0;
    if (byte == 0xED) hi = 0x9F;
  } else if (byte >= 0xF0 && byte <= 0xF4) {
    partial->remaining = 3;
    if (byte == 0xF0) lo = 0x90;
    if (byte == 0xF4) hi = 0x8F;
  } else {
    return Utf8Step::kReject;
  }
  partial->value = byte & (0x3Fu >> partial->remaining);
  partial->next_lo = lo;
  partial->next_hi = hi;
  return Utf8Step::kPartial;
}

bool initial_stacks(const Grammar& grammar, GrammarStacks* out, GrammarScratch* scratch) {
  out->clear();
  scratch->visited.clear();
  const std::span<const GrammarElement> el = grammar.elements();
  for (const uint32_t alt : grammar.alternatives(grammar.root_rule())) {
    scratch->current.clear();
    if (!is_end_of_sequence(el[alt])) scratch->current.push_back(alt);
    if (!expand(grammar, out, scratch)) {
      out->clear();
      return false;
    }
  }
  return true;
}

bool stacks_allow_partial(const Grammar& grammar, const GrammarStacks& stacks, const PartialUtf8& partial) {
  // Every completion of the character lies in [lo, hi].
  const unsigned rest = 6u * (partial.remaining - 1u);
  const uint32_t lo = ((partial.value << 6) | (partial.next_lo & 0x3Fu)) << rest;
  const uint32_t hi = (((partial.value << 6) | (partial.next_hi & 0x3Fu)) << rest) | ((1u << rest) - 1u);
  const GrammarElement* el = grammar.elements().data();
  for (size_t i = 0; i < stacks.size(); ++i) {
    const std::span<const uint32_t> stack = stacks.stack(i);
    if (!stack.empty() && match_char_in_range(el + stack.back(), lo, hi)) return true;
  }
  return false;
}

bool advance_stacks(const Grammar& grammar, const GrammarStacks& in, char32_t cp, GrammarStacks* out,
                    GrammarScratch* scratch) {
  out->clear();
  scratch->visited.clear();
  const std::span<const GrammarElement> el = grammar.elements();
  for (size_t i = 0; i < in.size(); ++i) {
    const std::span<const uint32_t> stack = in.stack(i);
    if (stack.empty() || !match_char(&el[stack.back()], cp)) continue;
    scratch->current.assign(stack.begin(), stack.end() - 1);
    const uint32_t next = skip_char_set(el, stack.back());
    if (!is_end_of_sequence(el[next])) scratch->current.push_back(next);
    if (!expand(grammar, out, scratch)) return false;
  }
  return out->size() > 0;
}

}  // namespace detail

namespace {

// Runs `bytes` from (stacks, partial). On success *result is the index of the buffer that holds the final stacks,
// or -1 when no character was completed and they are `stacks` itself.
bool run_bytes(const Grammar& grammar, const detail::GrammarStacks& stacks, detail::PartialUtf8* partial,
               std::string_view bytes, detail::GrammarStacks (&buffers)[2], int* result) {
  detail::GrammarScratch scratch;
  const detail::GrammarStacks* current = &stacks;
  int next = 0;
  *result = -1;
  for (const char c : bytes) {
    char32_t cp = 0;
    switch (detail::utf8_step(static_cast<uint8_t>(c), partial, &cp)) {
      case detail::Utf8Step::kReject:
        return false;
      case detail::Utf8Step::kPartial:
        if (!detail::stacks_allow_partial(grammar, *current, *partial)) return false;
        break;
      case detail::Utf8Step::kCodePoint:
        if (!detail::advance_stacks(grammar, *current, cp, &buffers[next], &scratch)) return false;
        current = &buffers[next];
        *result = next;
        next ^= 1;
        break;
    }
  }
  return true;
}

}  // namespace

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  detail::GrammarScratch scratch;
  detail::initial_stacks(*grammar_, &stacks_, &scratch);
}

bool GrammarMatcher::accept(std::string_view bytes) {
  detail::PartialUtf8 partial = partial_;
  detail::GrammarStacks buffers[2];
  int result = -1;
  if (!run_bytes(*grammar_, stacks_, &partial, bytes, buffers, &result)) return false;
  if (result >= 0) stacks_ = std::move(buffers[result]);
  partial_ = partial;
  return true;
}

bool GrammarMatcher::can_accept(std::string_view bytes) const {
  detail::PartialUtf8 partial = partial_;
  detail::GrammarStacks buffers[2];
  int result = -1;
  return run_bytes(*grammar_, stacks_, &partial, bytes, buffers, &result);
}

bool GrammarMatcher::is_complete() const { return partial_.remaining == 0 && stacks_.has_empty_stack(); }

}  // namespace hxrt::llm
