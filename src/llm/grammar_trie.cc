// The vocabulary trie and the token mask: one depth-first walk that advances the matcher's stacks byte by byte and
// drops a whole subtree at the first rejected byte, so shared prefixes are matched once.
#include <algorithm>

#include "llm/grammar_internal.h"

namespace hxrt::llm {

TokenTrie::TokenTrie(std::span<const std::string> token_bytes) {
  // A pointer trie first, then flattened with each node's children sorted by byte.
  struct BuildNode {
    std::vector<std::pair<uint8_t, uint32_t>> children;
    std::vector<int32_t> tokens;
  };
  std::vector<BuildNode> build(1);
  token_offsets_.push_back(0);
  for (size_t id = 0; id < token_bytes.size(); ++id) {
    const std::string& bytes = token_bytes[id];
    token_blob_ += bytes;
    token_offsets_.push_back(static_cast<uint32_t>(token_blob_.size()));
    if (bytes.empty()) continue;
    max_depth_ = std::max(max_depth_, bytes.size());
    uint32_t node = 0;
    for (const char c : bytes) {
      const auto b = static_cast<uint8_t>(c);
      uint32_t child = 0;
      for (const auto& [byte, index] : build[node].children) {
        if (byte == b) child = index;
      }
      if (child == 0) {
        child = static_cast<uint32_t>(build.size());
        build[node].children.emplace_back(b, child);
        build.emplace_back();
      }
      node = child;
    }
    build[node].tokens.push_back(static_cast<int32_t>(id));
  }
  nodes_.resize(build.size());
  for (size_t i = 0; i < build.size(); ++i) {
    std::sort(build[i].children.begin(), build[i].children.end());
    Node& n = nodes_[i];
    n.children_begin = static_cast<uint32_t>(child_bytes_.size());
    for (const auto& [byte, index] : build[i].children) {
      child_bytes_.push_back(byte);
      child_nodes_.push_back(index);
    }
    n.children_end = static_cast<uint32_t>(child_bytes_.size());
    n.tokens_begin = static_cast<uint32_t>(node_tokens_.size());
    node_tokens_.insert(node_tokens_.end(), build[i].tokens.begin(), build[i].tokens.end());
    n.tokens_end = static_cast<uint32_t>(node_tokens_.size());
  }
}

void TokenTrie::allowed_tokens(const GrammarMatcher& matcher, std::vector<uint8_t>& mask) const {
  mask.assign(vocab_size(), 0);
  if (matcher.is_dead()) return;
  const Grammar& grammar = *matcher.grammar();
  detail::GrammarScratch scratch;
  // Level d holds the matcher state after the d bytes of the current prefix: its stacks (those of a shallower level
  // when the last bytes only went into a partial character) and its partial character. buffers[d] is written only
  // while level d - 1 is being expanded, so a level's stacks outlive the walk below it.
  struct Level {
    const detail::GrammarStacks* stacks;
    detail::PartialUtf8 partial;
    uint32_t node;
    uint32_t next_child;
  };
  std::vector<detail::GrammarStacks> buffers(max_depth_ + 1);
  std::vector<Level> levels;
  levels.reserve(max_depth_ + 1);
  levels.push_back({&matcher.stacks_, matcher.partial_, 0, nodes_[0].children_begin});
  while (!levels.empty()) {
    Level& level = levels.back();
    if (level.next_child == nodes_[level.node].children_end) {
      levels.pop_back();
      continue;
    }
    const uint32_t c = level.next_child++;
    detail::PartialUtf8 partial = level.partial;
    const detail::GrammarStacks* stacks = level.stacks;
    char32_t cp = 0;
    switch (detail::utf8_step(child_bytes_[c], &partial, &cp)) {
      case detail::Utf8Step::kReject:
        continue;
      case detail::Utf8Step::kPartial:
        if (!detail::stacks_allow_partial(grammar, *stacks, partial)) continue;
        break;
      case detail::Utf8Step::kCodePoint: {
        detail::GrammarStacks* out = &buffers[levels.size()];
        if (!detail::advance_stacks(grammar, *stacks, cp, out, &scratch)) continue;
        stacks = out;
        break;
      }
    }
    const Node& child = nodes_[child_nodes_[c]];
    for (uint32_t t = child.tokens_begin; t < child.tokens_end; ++t) mask[static_cast<size_t>(node_tokens_[t])] = 1;
    if (child.children_begin != child.children_end) {
      levels.push_back({stacks, partial, child_nodes_[c], child.children_begin});
    }
  }
}

bool TokenTrie::accepts(const GrammarMatcher& matcher, int32_t token) const {
  if (token < 0 || static_cast<size_t>(token) >= vocab_size()) return false;
  const uint32_t begin = token_offsets_[static_cast<size_t>(token)];
  const uint32_t end = token_offsets_[static_cast<size_t>(token) + 1];
  if (begin == end) return false;
  return matcher.can_accept(std::string_view(token_blob_).substr(begin, end - begin));
}

}  // namespace hxrt::llm
