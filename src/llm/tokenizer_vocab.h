// The vocabulary tables the tokenizer's parts share (internal to src/llm).
//
// Thread-safety: immutable after construction.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hxrt/llm/tokenizer.h"

namespace hxrt::llm::detail {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
};

struct Vocab {
  std::vector<std::string> texts;                                             // by id
  std::vector<TokenType> types;                                               // by id
  std::vector<float> scores;                                                  // by id (0 when the spec has none)
  std::unordered_map<std::string, TokenId, StringHash, std::equal_to<>> ids;  // text → id

  int32_t size() const { return static_cast<int32_t>(texts.size()); }
  bool contains(TokenId id) const { return id >= 0 && id < size(); }
  TokenId find(std::string_view text) const {
    const auto it = ids.find(text);
    return it == ids.end() ? kNoToken : it->second;
  }
};

}  // namespace hxrt::llm::detail
