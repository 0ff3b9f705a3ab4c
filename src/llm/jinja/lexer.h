// Template source → tokens, with jinja2's whitespace rules applied to the text between tags.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "llm/jinja/ast.h"

namespace hxrt::llm::jinja {

enum class TokenKind {
  kText,        // text between tags, already whitespace-controlled
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,  // text: the value, escapes resolved
  kInt,
  kFloat,
  kOperator,  // text: one of + - * / // % ** ~ == != < <= > >= = ( ) [ ] { } . , : |
  kEnd,
};

struct Token {
  TokenKind kind;
  std::string text;
  Position where;
};

// Splits `source` into tokens, ending with kEnd. Applies, as jinja2 does with trim_blocks and lstrip_blocks: `-`
// modifiers strip whitespace on that side of a tag, `+` turns lstrip/trim off for it, the newline after a block or
// comment tag is dropped, whitespace before a block or comment tag that starts its line is dropped, comments vanish,
// {% raw %} ... {% endraw %} is text, \r\n and \r read as \n, and one final newline of the source is dropped.
// InvalidArgument "line L, column C: ..." for an unterminated tag, string or comment, or a stray character.
Result<std::vector<Token>> tokenize(std::string_view source);

}  // namespace hxrt::llm::jinja
