// The recognizer's steps, shared by GrammarMatcher (grammar_match.cc) and TokenTrie (grammar_trie.cc); internal to
// src/llm.
//
// Thread-safety: pure functions over the caller's buffers.
#pragma once

#include <cstdint>
#include <vector>

#include "hxrt/llm/grammar.h"

namespace hxrt::llm::detail {

// Buffers one step reuses, so that a warm step allocates nothing.
struct GrammarScratch {
  GrammarStacks visited;          // stacks with a rule reference on top, already expanded in this step
  std::vector<uint32_t> current;  // the stack being expanded
  std::vector<uint32_t> work;     // stacks still to expand, one after the other
  std::vector<uint32_t> work_ends;
};

enum class Utf8Step : uint8_t {
  kReject,     // not well-formed UTF-8
  kPartial,    // the character goes on: *partial is updated
  kCodePoint,  // the character is complete: *cp holds it, *partial is reset
};

// Feeds one byte to the UTF-8 decoder.
Utf8Step utf8_step(uint8_t byte, PartialUtf8* partial, char32_t* cp);

// The initial stacks of `grammar`'s root rule; false when they exceed the matcher's limits.
bool initial_stacks(const Grammar& grammar, GrammarStacks* out, GrammarScratch* scratch);

// Whether some stack's top could match some completion of `partial` (partial.remaining > 0).
bool stacks_allow_partial(const Grammar& grammar, const GrammarStacks& stacks, const PartialUtf8& partial);

// The stacks after code point `cp`: every stack whose top matches it, advanced past the character and expanded
// until each top is a character set. False when none is left or the result exceeds the matcher's limits.
bool advance_stacks(const Grammar& grammar, const GrammarStacks& in, char32_t cp, GrammarStacks* out,
                    GrammarScratch* scratch);

}  // namespace hxrt::llm::detail
