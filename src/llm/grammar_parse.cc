// GBNF text to a Grammar: a recursive-descent parser that follows llama.cpp's grammar-parser, then the checks that
// make recognition finite (every rule defined, no left recursion).
#include <algorithm>
#include <string>
#include <unordered_map>
#include <utility>

#include "hxrt/llm/grammar.h"

namespace hxrt::llm {

using Type = GrammarElementType;

// Builds a Grammar from the text; a friend of Grammar.
class GrammarBuilder {
 public:
  explicit GrammarBuilder(std::string_view text) : text_(text) {}

  Result<std::shared_ptr<const Grammar>> run(std::string_view root) {
    if (text_.size() > Grammar::kMaxTextBytes) {
      return invalid_argument("the grammar is {} bytes; the limit is {}", text_.size(), Grammar::kMaxTextBytes);
    }
    skip_space(true);
    while (pos_ < text_.size()) HXRT_RETURN_IF_ERROR(parse_rule());
    HXRT_RETURN_IF_ERROR(check_defined());
    const auto it = ids_.find(std::string(root));
    if (it == ids_.end() || !rules_[it->second].defined) {
      return error_at(text_.size(), fmt::format("no rule named '{}' (the root)", root));
    }
    std::shared_ptr<Grammar> grammar(new Grammar());
    flatten(grammar.get());
    grammar->root_ = it->second;
    HXRT_RETURN_IF_ERROR(check_left_recursion(*grammar));
    return std::shared_ptr<const Grammar>(std::move(grammar));
  }

 private:
  struct Rule {
    std::string name;
    std::vector<GrammarElement> elements;
    bool defined = false;
    size_t defined_at = 0;                  // offset of its definition (of the group or repetition, if generated)
    size_t first_use = std::string::npos;  // offset of its first reference
  };

  static bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
  }
  static bool is_digit(char c) { return c >= '0' && c <= '9'; }
  static bool is_end_of_sequence(const GrammarElement& e) { return e.type == Type::kEnd || e.type == Type::kAlt; }

  bool at(char c) const { return pos_ < text_.size() && text_[pos_] == c; }

  // "line L, column C" of a byte offset; columns count code points.
  std::string where(size_t offset) const {
    offset = std::min(offset, text_.size());
    size_t line = 1, column = 1;
    for (size_t i = 0; i < offset; ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else if ((static_cast<uint8_t>(text_[i]) & 0xC0) != 0x80) {
        ++column;
      }
    }
    return fmt::format("line {}, column {}", line, column);
  }

  Status error_at(size_t offset, std::string_view what) const {
    return invalid_argument("{}: {}", where(offset), what);
  }

  // Spaces, tabs and `#` comments; line ends too where `newline_ok`.
  void skip_space(bool newline_ok) {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\r' && text_[pos_] != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || (newline_ok && (c == '\r' || c == '\n'))) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  std::string_view parse_name() {
    const size_t begin = pos_;
    while (pos_ < text_.size() && is_name_char(text_[pos_])) ++pos_;
    return text_.substr(begin, pos_ - begin);
  }

  Result<uint32_t> add_rule(std::string name, size_t offset) {
    if (rules_.size() >= Grammar::kMaxRules) {
      return error_at(offset, fmt::format("more than {} rules (repetitions and groups count)", Grammar::kMaxRules));
    }
    rules_.push_back({std::move(name), {}, false, offset, std::string::npos});
    return static_cast<uint32_t>(rules_.size() - 1);
  }

  Result<uint32_t> symbol(std::string_view name, size_t offset) {
    const auto it = ids_.find(std::string(name));
    if (it != ids_.end()) return it->second;
    HXRT_ASSIGN_OR_RETURN(const uint32_t id, add_rule(std::string(name), offset));
    ids_.emplace(std::string(name), id);
    return id;
  }

  Result<uint32_t> generated_rule(uint32_t parent, size_t offset) {
    return add_rule(fmt::format("{}_{}", rules_[parent].name, rules_.size()), offset);
  }

  Status define(uint32_t rule, std::vector<GrammarElement> elements) {
    element_count_ += elements.size();
    if (element_count_ > Grammar::kMaxElements) {
      return error_at(rules_[rule].defined_at, fmt::format("the grammar has more than {} elements once its "
                                                           "repetitions are expanded", Grammar::kMaxElements));
    }
    rules_[rule].elements = std::move(elements);
    rules_[rule].defined = true;
    return ok_status();
  }

  Status parse_rule() {
    const size_t begin = pos_;
    const std::string_view name = parse_name();
    if (name.empty()) return error_at(pos_, "expecting a rule name");
    skip_space(false);
    if (text_.substr(pos_, 3) != "::=") return error_at(pos_, "expecting '::='");
    pos_ += 3;
    skip_space(true);
    HXRT_ASSIGN_OR_RETURN(const uint32_t rule, symbol(name, begin));
    if (rules_[rule].defined) return error_at(begin, fmt::format("rule '{}' is defined twice", name));
    rules_[rule].defined_at = begin;
    std::vector<GrammarElement> elements;
    HXRT_RETURN_IF_ERROR(parse_alternatives(rule, &elements, /*depth=*/0));
    HXRT_RETURN_IF_ERROR(define(rule, std::move(elements)));
    if (at('\r')) ++pos_;
    if (at('\n')) {
      ++pos_;
    } else if (pos_ < text_.size()) {
      return error_at(pos_, "expecting a newline or the end of the grammar");
    }
    skip_space(true);
    return ok_status();
  }

  // Appends the alternatives (each ended by kAlt, the last by kEnd) to *out.
  Status parse_alternatives(uint32_t rule, std::vector<GrammarElement>* out, int depth) {
    if (depth > Grammar::kMaxNesting) return error_at(pos_, "parentheses nest too deep");
    HXRT_RETURN_IF_ERROR(parse_sequence(rule, out, depth));
    while (at('|')) {
      out->push_back({Type::kAlt, 0});
      ++pos_;
      skip_space(true);
      HXRT_RETURN_IF_ERROR(parse_sequence(rule, out, depth));
    }
    out->push_back({Type::kEnd, 0});
    return ok_status();
  }

  Status parse_sequence(uint32_t rule, std::vector<GrammarElement>* out, int depth) {
    const bool nested = depth > 0;
    const size_t sequence_start = out->size();
    size_t last_symbol = out->size();  // where the symbol a repetition applies to begins
    while (pos_ < text_.size()) {
      const size_t symbol_at = pos_;
      const char c = text_[pos_];
      if (c == '"') {
        last_symbol = out->size();
        HXRT_RETURN_IF_ERROR(parse_literal(out));
      } else if (c == '[') {
        last_symbol = out->size();
        HXRT_RETURN_IF_ERROR(parse_class(out));
      } else if (c == '.') {
        last_symbol = out->size();
        out->push_back({Type::kCharAny, 0});
        ++pos_;
      } else if (is_name_char(c)) {
        last_symbol = out->size();
        const std::string_view name = parse_name();
        HXRT_ASSIGN_OR_RETURN(const uint32_t ref, symbol(name, symbol_at));
        if (rules_[ref].first_use == std::string::npos) rules_[ref].first_use = symbol_at;
        out->push_back({Type::kRuleRef, ref});
      } else if (c == '(') {
        last_symbol = out->size();
        ++pos_;
        skip_space(true);
        HXRT_ASSIGN_OR_RETURN(const uint32_t group, generated_rule(rule, symbol_at));
        std::vector<GrammarElement> group_elements;
        HXRT_RETURN_IF_ERROR(parse_alternatives(rule, &group_elements, depth + 1));
        HXRT_RETURN_IF_ERROR(define(group, std::move(group_elements)));
        if (!at(')')) return error_at(pos_, "expecting ')' (the group opened at " + where(symbol_at) + ")");
        ++pos_;
        out->push_back({Type::kRuleRef, group});
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (last_symbol == out->size() || last_symbol < sequence_start) {
          return error_at(pos_, fmt::format("expecting an item before '{}'", c));
        }
        uint32_t min = 0, max = kUnbounded;
        if (c == '{') {
          HXRT_RETURN_IF_ERROR(parse_braces(nested, &min, &max));
        } else {
          min = c == '+' ? 1 : 0;
          max = c == '?' ? 1 : kUnbounded;
          ++pos_;
        }
        HXRT_RETURN_IF_ERROR(repeat(rule, last_symbol, min, max, symbol_at, out));
      } else {
        break;
      }
      skip_space(nested);
    }
    return ok_status();
  }

  static constexpr uint32_t kUnbounded = UINT32_MAX;

  Result<uint32_t> parse_count() {
    if (!(pos_ < text_.size() && is_digit(text_[pos_]))) return error_at(pos_, "expecting a number");
    const size_t begin = pos_;
    uint64_t n = 0;
    while (pos_ < text_.size() && is_digit(text_[pos_])) {
      n = n * 10 + static_cast<uint64_t>(text_[pos_] - '0');
      if (n > Grammar::kMaxRepetition) {
        return error_at(begin, fmt::format("a repetition count over {}", Grammar::kMaxRepetition));
      }
      ++pos_;
    }
    return static_cast<uint32_t>(n);
  }

  // `{m}`, `{m,}` or `{m,n}`.
  Status parse_braces(bool nested, uint32_t* min, uint32_t* max) {
    const size_t open = pos_;
    ++pos_;
    skip_space(nested);
    HXRT_ASSIGN_OR_RETURN(*min, parse_count());
    skip_space(nested);
    *max = *min;
    if (at(',')) {
      ++pos_;
      skip_space(nested);
      *max = kUnbounded;
      if (pos_ < text_.size() && is_digit(text_[pos_])) {
        HXRT_ASSIGN_OR_RETURN(*max, parse_count());
        skip_space(nested);
      }
    }
    if (!at('}')) return error_at(pos_, "expecting '}'");
    ++pos_;
    if (*max < *min) return error_at(open, fmt::format("repetition {{{},{}}} has its maximum below its minimum", *min, *max));
    return ok_status();
  }

  // Rewrites out[from..] (one symbol, S) as S{min,max}: min copies of S, then a rule `R ::= S R | ""` when max is
  // unbounded, else a chain of max - min optional copies (`R1 ::= S | ""`, `Rk ::= S Rk-1 | ""`).
  Status repeat(uint32_t rule, size_t from, uint32_t min, uint32_t max, size_t offset,
                std::vector<GrammarElement>* out) {
    const std::vector<GrammarElement> item(out->begin() + static_cast<std::ptrdiff_t>(from), out->end());
    out->resize(from);
    const uint64_t optional = max == kUnbounded ? 1 : max - min;
    const uint64_t added = uint64_t{min} * item.size() + optional * (item.size() + 3);
    if (element_count_ + out->size() + added > Grammar::kMaxElements) {
      return error_at(offset, fmt::format("the grammar has more than {} elements once its repetitions are "
                                          "expanded", Grammar::kMaxElements));
    }
    for (uint32_t i = 0; i < min; ++i) out->insert(out->end(), item.begin(), item.end());
    if (max == kUnbounded) {
      HXRT_ASSIGN_OR_RETURN(const uint32_t r, generated_rule(rule, offset));
      std::vector<GrammarElement> body = item;
      body.push_back({Type::kRuleRef, r});
      body.push_back({Type::kAlt, 0});
      body.push_back({Type::kEnd, 0});
      HXRT_RETURN_IF_ERROR(define(r, std::move(body)));
      out->push_back({Type::kRuleRef, r});
      return ok_status();
    }
    uint32_t previous = kUnbounded;
    for (uint32_t i = min; i < max; ++i) {
      HXRT_ASSIGN_OR_RETURN(const uint32_t r, generated_rule(rule, offset));
      std::vector<GrammarElement> body = item;
      if (previous != kUnbounded) body.push_back({Type::kRuleRef, previous});
      body.push_back({Type::kAlt, 0});
      body.push_back({Type::kEnd, 0});
      HXRT_RETURN_IF_ERROR(define(r, std::move(body)));
      previous = r;
    }
    if (previous != kUnbounded) out->push_back({Type::kRuleRef, previous});
    return ok_status();
  }

  static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // One character of a literal or a class: an escape or one UTF-8 encoded code point.
  Result<uint32_t> parse_char() {
    const size_t begin = pos_;
    const auto byte = [this](size_t i) { return static_cast<uint8_t>(text_[i]); };
    if (text_[pos_] == '\\') {
      if (pos_ + 1 >= text_.size()) return error_at(begin, "unterminated escape");
      const char e = text_[pos_ + 1];
      pos_ += 2;
      switch (e) {
        case 'n': return uint32_t{'\n'};
        case 'r': return uint32_t{'\r'};
        case 't': return uint32_t{'\t'};
        case '\\': case '"': case '[': case ']': return uint32_t{static_cast<uint8_t>(e)};
        case 'x': case 'u': case 'U': {
          const size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t value = 0;
          for (size_t i = 0; i < digits; ++i) {
            const int h = pos_ < text_.size() ? hex_value(text_[pos_]) : -1;
            if (h < 0) return error_at(begin, fmt::format("expecting {} hex digits after '\\{}'", digits, e));
            value = value * 16 + static_cast<uint32_t>(h);
            ++pos_;
          }
          if (value > 0x10FFFF) return error_at(begin, fmt::format("U+{:X} is past U+10FFFF", value));
          return value;
        }
        default:
          return error_at(begin, fmt::format("unknown escape '\\{}'", e));
      }
    }
    const uint8_t lead = byte(pos_);
    const size_t length = lead < 0x80 ? 1 : lead >= 0xC2 && lead <= 0xDF ? 2 : lead >= 0xE0 && lead <= 0xEF ? 3
                        : lead >= 0xF0 && lead <= 0xF4 ? 4 : 0;
    if (length == 0 || pos_ + length > text_.size()) return error_at(begin, "invalid UTF-8");
    uint32_t value = length == 1 ? lead : lead & (0x7F >> length);
    for (size_t i = 1; i < length; ++i) {
      const uint8_t b = byte(pos_ + i);
      if ((b & 0xC0) != 0x80) return error_at(begin, "invalid UTF-8");
      value = (value << 6) | (b & 0x3F);
    }
    static constexpr uint32_t kMinForLength[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (value < kMinForLength[length] || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) {
      return error_at(begin, "invalid UTF-8");
    }
    pos_ += length;
    return value;
  }

  Status parse_literal(std::vector<GrammarElement>* out) {
    const size_t open = pos_;
    ++pos_;
    while (!at('"')) {
      if (pos_ >= text_.size()) return error_at(open, "unterminated string literal");
      HXRT_ASSIGN_OR_RETURN(const uint32_t cp, parse_char());
      out->push_back({Type::kChar, cp});
    }
    ++pos_;
    return ok_status();
  }

  Status parse_class(std::vector<GrammarElement>* out) {
    const size_t open = pos_;
    ++pos_;
    Type start = Type::kChar;
    if (at('^')) {
      start = Type::kCharNot;
      ++pos_;
    }
    const size_t first = out->size();
    while (!at(']')) {
      if (pos_ >= text_.size()) return error_at(open, "unterminated character class");
      HXRT_ASSIGN_OR_RETURN(const uint32_t lo, parse_char());
      out->push_back({out->size() == first ? start : Type::kCharAlt, lo});
      if (at('-') && pos_ + 1 < text_.size() && text_[pos_ + 1] != ']') {
        const size_t range_at = pos_;
        ++pos_;
        HXRT_ASSIGN_OR_RETURN(const uint32_t hi, parse_char());
        if (hi < lo) return error_at(range_at, "a character range whose end is below its start");
        out->push_back({Type::kCharRangeUpper, hi});
      }
    }
    if (out->size() == first) return error_at(open, "an empty character class");
    ++pos_;
    return ok_status();
  }

  Status check_defined() const {
    size_t first = std::string::npos;
    std::string_view name;
    for (const Rule& r : rules_) {
      if (!r.defined && r.first_use < first) {
        first = r.first_use;
        name = r.name;
      }
    }
    if (first == std::string::npos) return ok_status();
    return error_at(first, fmt::format("undefined rule '{}'", name));
  }

  void flatten(Grammar* g) {
    g->rule_alts_.push_back(0);
    for (Rule& r : rules_) {
      const auto base = static_cast<uint32_t>(g->elements_.size());
      bool alt_begins = true;
      for (size_t i = 0; i < r.elements.size(); ++i) {
        if (alt_begins) g->alt_starts_.push_back(base + static_cast<uint32_t>(i));
        alt_begins = r.elements[i].type == Type::kAlt;
      }
      g->elements_.insert(g->elements_.end(), r.elements.begin(), r.elements.end());
      g->rule_alts_.push_back(static_cast<uint32_t>(g->alt_starts_.size()));
      g->rule_names_.push_back(std::move(r.name));
      r.elements = {};
    }
  }

  // A rule is left-recursive when it reaches itself through the first element of an alternative, or through
  // elements after ones that can match nothing. One depth-first walk over those edges finds the rules that can
  // match nothing and any such cycle (a back edge); iterative, so that a long chain of rules cannot overflow the
  // native stack.
  Status check_left_recursion(const Grammar& g) const {
    enum : uint8_t { kUnvisited, kActive, kDone };
    const std::span<const GrammarElement> el = g.elements();
    std::vector<uint8_t> mark(rules_.size(), kUnvisited);
    std::vector<uint8_t> nullable(rules_.size(), 0);
    struct Frame {
      uint32_t rule;
      uint32_t alt;  // index into g.alternatives(rule)
      uint32_t pos;  // element position within the alternative
      bool nullable;
    };
    std::vector<Frame> frames;
    for (uint32_t start = 0; start < rules_.size(); ++start) {
      if (mark[start] != kUnvisited) continue;
      mark[start] = kActive;
      frames.push_back({start, 0, g.alternatives(start)[0], false});
      while (!frames.empty()) {
        Frame& f = frames.back();
        const std::span<const uint32_t> alts = g.alternatives(f.rule);
        if (f.alt == alts.size()) {
          nullable[f.rule] = f.nullable ? 1 : 0;
          mark[f.rule] = kDone;
          const bool child_nullable = f.nullable;
          frames.pop_back();
          if (!frames.empty()) {
            Frame& parent = frames.back();
            if (child_nullable) {
              ++parent.pos;
            } else {
              next_alternative(g, &parent);
            }
          }
          continue;
        }
        const GrammarElement& e = el[f.pos];
        if (is_end_of_sequence(e)) {
          f.nullable = true;
          next_alternative(g, &f);
        } else if (e.type != Type::kRuleRef) {
          next_alternative(g, &f);
        } else if (mark[e.value] == kActive) {
          return error_at(rules_[e.value].defined_at,
                          fmt::format("rule '{}' is left-recursive", g.rule_name(e.value)));
        } else if (mark[e.value] == kDone) {
          if (nullable[e.value]) {
            ++f.pos;
          } else {
            next_alternative(g, &f);
          }
        } else {
          mark[e.value] = kActive;
          frames.push_back({e.value, 0, g.alternatives(e.value)[0], false});
        }
      }
    }
    return ok_status();
  }

  template <typename Frame>
  static void next_alternative(const Grammar& g, Frame* f) {
    ++f->alt;
    const std::span<const uint32_t> alts = g.alternatives(f->rule);
    if (f->alt < alts.size()) f->pos = alts[f->alt];
  }

  std::string_view text_;
  size_t pos_ = 0;
  std::vector<Rule> rules_;
  std::unordered_map<std::string, uint32_t> ids_;
  size_t element_count_ = 0;
};

Result<std::shared_ptr<const Grammar>> parse_gbnf(std::string_view text, std::string_view root) {
  return GrammarBuilder(text).run(root);
}

}  // namespace hxrt::llm
