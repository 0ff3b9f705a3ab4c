#include "llm/jinja/lexer.h"

#include <algorithm>
#include <cstdint>

#include "llm/tokenizer_utf8.h"

namespace hxrt::llm::jinja {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();  // jinja2's keep_trailing_newline=False
  return out;
}

void rstrip_all(std::string* text) {
  while (!text->empty() && is_space(text->back())) text->pop_back();
}

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  Result<std::vector<Token>> run() {
    size_t pos = 0;
    bool strip_next = false;  // the previous tag ended with `-`
    while (pos < src_.size()) {
      const size_t open = find_tag(pos);
      std::string text = src_.substr(pos, open - pos);
      if (strip_next) {
        text.erase(0, std::find_if(text.begin(), text.end(), [](char c) { return !is_space(c); }) - text.begin());
        strip_next = false;
      }
      if (open == src_.size()) {
        emit_text(std::move(text), pos);
        break;
      }
      const char kind = src_[open + 1];
      const char modifier = open + 2 < src_.size() ? src_[open + 2] : '\0';
      if (modifier == '-') {
        rstrip_all(&text);
      } else if (modifier != '+' && kind != '{') {
        lstrip_block(&text, pos);
      }
      emit_text(std::move(text), pos);
      size_t inner = open + 2 + ((modifier == '-' || modifier == '+') ? 1 : 0);
      if (kind == '#') {
        HXRT_ASSIGN_OR_RETURN(pos, skip_comment(open, inner, &strip_next));
      } else if (kind == '%' && is_raw(inner)) {
        HXRT_ASSIGN_OR_RETURN(pos, read_raw(open, inner, &strip_next));
      } else {
        HXRT_ASSIGN_OR_RETURN(pos, read_tag(open, inner, kind == '%', &strip_next));
      }
    }
    tokens_.push_back({TokenKind::kEnd, "", where(src_.size())});
    return std::move(tokens_);
  }

 private:
  Position where(size_t offset) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    const size_t line = static_cast<size_t>(it - line_starts_.begin());
    return {static_cast<int>(line), static_cast<int>(offset - line_starts_[line - 1] + 1)};
  }

  Status error_at(size_t offset, std::string_view what) const {
    const Position p = where(offset);
    return invalid_argument("line {}, column {}: {}", p.line, p.column, what);
  }

  size_t find_tag(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return src_.size();
  }

  void emit_text(std::string text, size_t at) {
    if (!text.empty()) tokens_.push_back({TokenKind::kText, std::move(text), where(at)});
  }

  // lstrip_blocks: spaces and tabs between the start of the line and a block or comment tag are dropped.
  void lstrip_block(std::string* text, size_t text_start) const {
    const size_t newline = text->rfind('\n');
    const size_t line_start = newline == std::string::npos ? 0 : newline + 1;
    const bool at_line_start =
        newline != std::string::npos || text_start == 0 || src_[text_start - 1] == '\n';
    if (!at_line_start || line_start == text->size()) return;
    for (size_t i = line_start; i < text->size(); ++i) {
      if (!is_space((*text)[i])) return;
    }
    text->resize(line_start);
  }

  // After a block or comment tag: `-` strips what follows; otherwise trim_blocks drops one newline.
  size_t after_block_end(size_t end, char modifier, bool* strip_next) const {
    if (modifier == '-') {
      *strip_next = true;
    } else if (modifier != '+' && end < src_.size() && src_[end] == '\n') {
      return end + 1;
    }
    return end;
  }

  Result<size_t> skip_comment(size_t open, size_t inner, bool* strip_next) {
    const size_t close = src_.find("#}", inner);
    if (close == std::string::npos) return error_at(open, "comment is not closed ('#}' missing)");
    const char modifier = close > inner ? src_[close - 1] : '\0';
    return after_block_end(close + 2, modifier, strip_next);
  }

  // `{% raw %}` (with optional modifiers): the text up to `{% endraw %}` is output as written.
  bool is_raw(size_t inner) const {
    size_t i = inner;
    while (i < src_.size() && is_space(src_[i])) ++i;
    if (src_.compare(i, 3, "raw") != 0 || (i + 3 < src_.size() && is_name_char(src_[i + 3]))) return false;
    i += 3;
    while (i < src_.size() && is_space(src_[i])) ++i;
    if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) ++i;
    return src_.compare(i, 2, "%}") == 0;
  }

  Result<size_t> read_raw(size_t open, size_t inner, bool* strip_next) {
    const size_t open_end = src_.find("%}", inner);
    const char open_modifier = src_[open_end - 1];
    size_t body_start = open_end + 2;
    if (open_modifier == '-') {
      while (body_start < src_.size() && is_space(src_[body_start])) ++body_start;
    }
    for (size_t i = body_start; i + 1 < src_.size(); ++i) {
      if (src_[i] != '{' || src_[i + 1] != '%') continue;
      size_t j = i + 2;
      const char modifier = j < src_.size() ? src_[j] : '\0';
      if (modifier == '-' || modifier == '+') ++j;
      while (j < src_.size() && is_space(src_[j])) ++j;
      if (src_.compare(j, 6, "endraw") != 0) continue;
      j += 6;
      while (j < src_.size() && is_space(src_[j])) ++j;
      const char close_modifier = j < src_.size() ? src_[j] : '\0';
      if (close_modifier == '-' || close_modifier == '+') ++j;
      if (src_.compare(j, 2, "%}") != 0) continue;
      std::string text = src_.substr(body_start, i - body_start);
      if (modifier == '-') rstrip_all(&text);
      emit_text(std::move(text), body_start);
      return after_block_end(j + 2, close_modifier, strip_next);
    }
    return error_at(open, "'raw' block is not closed ('{% endraw %}' missing)");
  }

  Result<size_t> read_tag(size_t open, size_t pos, bool block, bool* strip_next) {
    tokens_.push_back({block ? TokenKind::kBlockBegin : TokenKind::kVarBegin, "", where(open)});
    const char closer = block ? '%' : '}';
    int depth = 0;  // open brackets: a `}}` inside a dict literal does not end the tag
    while (true) {
      while (pos < src_.size() && is_space(src_[pos])) ++pos;
      if (pos >= src_.size()) {
        return error_at(open, block ? "block tag is not closed ('%}' missing)" : "expression is not closed ('}}' missing)");
      }
      const char c = src_[pos];
      if (depth == 0) {
        const bool modified = (c == '-' || c == '+') && pos + 2 < src_.size() &&
                              src_[pos + 1] == closer && src_[pos + 2] == '}';
        if (modified || (c == closer && pos + 1 < src_.size() && src_[pos + 1] == '}')) {
          const size_t end = pos + (modified ? 3 : 2);
          tokens_.push_back({block ? TokenKind::kBlockEnd : TokenKind::kVarEnd, "", where(pos)});
          const char modifier = modified ? c : '\0';
          if (block) return after_block_end(end, modifier, strip_next);
          if (modifier == '-') *strip_next = true;
          return end;
        }
      }
      HXRT_ASSIGN_OR_RETURN(pos, read_token(pos, &depth));
    }
  }

  Result<size_t> read_token(size_t pos, int* depth) {
    const char c = src_[pos];
    if (is_name_start(c)) {
      size_t end = pos;
      while (end < src_.size() && is_name_char(src_[end])) ++end;
      tokens_.push_back({TokenKind::kName, src_.substr(pos, end - pos), where(pos)});
      return end;
    }
    if (is_digit(c)) return read_number(pos);
    if (c == '\'' || c == '"') return read_string(pos);
    static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
    for (std::string_view op : kTwo) {
      if (src_.compare(pos, 2, op) == 0) {
        tokens_.push_back({TokenKind::kOperator, std::string(op), where(pos)});
        return pos + 2;
      }
    }
    static constexpr std::string_view kOne = "+-*/%~<>=()[]{}.,:|";
    if (kOne.find(c) == std::string_view::npos) {
      return error_at(pos, fmt::format("unexpected character '{}'", c));
    }
    if (c == '(' || c == '[' || c == '{') ++*depth;
    if ((c == ')' || c == ']' || c == '}') && *depth > 0) --*depth;
    tokens_.push_back({TokenKind::kOperator, std::string(1, c), where(pos)});
    return pos + 1;
  }

  Result<size_t> read_number(size_t pos) {
    size_t end = pos;
    auto digits = [&] {
      while (end < src_.size() && (is_digit(src_[end]) || (src_[end] == '_' && end + 1 < src_.size() &&
                                                           is_digit(src_[end + 1])))) {
        ++end;
      }
    };
    digits();
    bool is_float = false;
    if (end + 1 < src_.size() && src_[end] == '.' && is_digit(src_[end + 1])) {
      is_float = true;
      ++end;
      digits();
    }
    if (end < src_.size() && (src_[end] == 'e' || src_[end] == 'E')) {
      size_t e = end + 1;
      if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
      if (e < src_.size() && is_digit(src_[e])) {
        is_float = true;
        end = e;
        digits();
      }
    }
    std::string text = src_.substr(pos, end - pos);
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    tokens_.push_back({is_float ? TokenKind::kFloat : TokenKind::kInt, std::move(text), where(pos)});
    return end;
  }

  Result<size_t> read_string(size_t pos) {
    const char quote = src_[pos];
    std::string value;
    for (size_t i = pos + 1; i < src_.size(); ++i) {
      const char c = src_[i];
      if (c == quote) {
        tokens_.push_back({TokenKind::kString, std::move(value), where(pos)});
        return i + 1;
      }
      if (c != '\\' || i + 1 >= src_.size()) {
        value.push_back(c);
        continue;
      }
      const char e = src_[++i];
      switch (e) {
        case 'n': value.push_back('\n'); break;
        case 't': value.push_back('\t'); break;
        case 'r': value.push_back('\r'); break;
        case '0': value.push_back('\0'); break;
        case 'b': value.push_back('\b'); break;
        case 'f': value.push_back('\f'); break;
        case 'v': value.push_back('\v'); break;
        case 'a': value.push_back('\a'); break;
        case '\\': case '\'': case '"': value.push_back(e); break;
        case '\n': break;  // a backslash-newline continues the literal
        case 'x': case 'u': case 'U': {
          const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (i + n >= src_.size()) return error_at(i, "truncated escape in string literal");
          uint32_t cp = 0;
          for (size_t k = 1; k <= n; ++k) {
            const char h = src_[i + k];
            const int d = is_digit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                                                : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
            if (d < 0) return error_at(i, "bad hexadecimal escape in string literal");
            cp = cp * 16 + static_cast<uint32_t>(d);
          }
          if (cp > 0x10FFFF) return error_at(i, "escape is not a Unicode code point");
          detail::append_utf8(cp, &value);
          i += n;
          break;
        }
        default:  // Python keeps unknown escapes as written
          value.push_back('\\');
          value.push_back(e);
      }
    }
    return error_at(pos, "string literal is not terminated");
  }

  std::string src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
};

}  // namespace

Result<std::vector<Token>> tokenize(std::string_view source) { return Lexer(normalize_newlines(source)).run(); }

}  // namespace hxrt::llm::jinja
