// GBNF grammars: arbitrary bytes in, split at the first NUL byte into grammar text and bytes to match. The text
// parses or fails with a message; a grammar that parses runs a matcher over (at most kMaxMatchBytes of) the bytes,
// else the built-in JSON grammar does. Invariants: accept() agrees with can_accept(), a rejected accept() leaves the
// state unchanged, and the token trie's mask of a small vocabulary agrees with can_accept on every token.
#include <algorithm>
#include <string>
#include <utility>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_target.h"
#include "hxrt/llm/grammar.h"

namespace {

constexpr size_t kMaxMatchBytes = 512;  // keeps one input within a few ms

struct Vocabulary {
  explicit Vocabulary(std::vector<std::string> t) : tokens(std::move(t)), trie(tokens) {}
  std::vector<std::string> tokens;
  hxrt::llm::TokenTrie trie;
};

const Vocabulary& vocabulary() {
  static const Vocabulary v({"", "a", "b", "ab", "{", "}", "\"", "\\", " ", "0", "12", "-", "true", "\xC3", "\xA9",
                             "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F", "\xFF", std::string(1, '\0'), "[", "]", ",", ":",
                             "null", "aaaa", "x\n"});
  return v;
}

void check_matcher(hxrt::llm::GrammarMatcher matcher, std::string_view bytes) {
  const std::vector<std::string>& vocab = vocabulary().tokens;
  const hxrt::llm::TokenTrie& tokens = vocabulary().trie;
  std::vector<uint8_t> mask;
  size_t at = 0;
  size_t step = 0;
  while (at < bytes.size()) {
    // Chunk lengths 1..4 taken from the bytes themselves.
    const size_t n = std::min(bytes.size() - at, size_t{1} + static_cast<uint8_t>(bytes[at]) % 4);
    const std::string_view chunk = bytes.substr(at, n);
    const bool can = matcher.can_accept(chunk);
    const bool was_complete = matcher.is_complete();
    const size_t stacks = matcher.stack_count();
    const bool accepted = matcher.accept(chunk);
    HXRT_FUZZ_ASSERT(can == accepted, "can_accept and accept disagree");
    if (!accepted) {
      HXRT_FUZZ_ASSERT(matcher.is_complete() == was_complete && matcher.stack_count() == stacks,
                       "a rejected accept changed the state");
      ++at;  // skip a byte and go on from the same state
      continue;
    }
    at += n;
    if (++step % 16 == 0) {
      tokens.allowed_tokens(matcher, mask);
      for (size_t id = 0; id < vocab.size(); ++id) {
        const bool expected = !vocab[id].empty() && matcher.can_accept(vocab[id]);
        HXRT_FUZZ_ASSERT((mask[id] != 0) == expected, "the trie's mask disagrees with can_accept");
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto [text, bytes] = split_at_nul(data, size, kMaxMatchBytes);
  hxrt::Result<std::shared_ptr<const hxrt::llm::Grammar>> grammar = hxrt::llm::parse_gbnf(text);
  if (!grammar.ok()) {
    HXRT_FUZZ_ASSERT(!grammar.status().message().empty(), "a failed parse says nothing");
    check_matcher(hxrt::llm::GrammarMatcher(hxrt::llm::json_value_grammar()), bytes);
    return 0;
  }
  check_matcher(hxrt::llm::GrammarMatcher(*grammar), bytes);
  return 0;
}
