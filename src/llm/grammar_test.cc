// The GBNF engine against references: small grammars against std::regex (or a hand-written recognizer) over every
// string of a small alphabet; the JSON grammars against nlohmann::json on random and mutated documents; the token
// trie's mask against a brute-force loop of can_accept.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <optional>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "hxrt/llm/grammar.h"

namespace hxrt::llm {
namespace {

std::shared_ptr<const Grammar> parse_ok(std::string_view text) {
  Result<std::shared_ptr<const Grammar>> g = parse_gbnf(text);
  EXPECT_TRUE(g.ok()) << text << "\n" << g.status().to_string();
  return g.ok() ? *g : nullptr;
}

std::string error_of(std::string_view text) {
  Result<std::shared_ptr<const Grammar>> g = parse_gbnf(text);
  EXPECT_FALSE(g.ok()) << text;
  return g.ok() ? std::string() : std::string(g.status().message());
}

// Whether the grammar matches all of `text`, fed in one call.
bool matches(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  GrammarMatcher m(g);
  return m.accept(text) && m.is_complete();
}

TEST(GrammarParseTest, ErrorsNameLineAndColumn) {
  struct Case {
    std::string text;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"root ::= \"abc", "line 1, column 10: unterminated string literal"},
      {"root ::= [a-z", "line 1, column 10: unterminated character class"},
      {"root ::= []", "line 1, column 10: an empty character class"},
      {"root ::= [z-a]", "line 1, column 12: a character range whose end is below its start"},
      {"root ::= \"a\" |\n  foo", "line 2, column 3: undefined rule 'foo'"},
      {"foo ::= \"a\"\n", "line 2, column 1: no rule named 'root' (the root)"},
      {"root ::= \"\\q\"", "line 1, column 11: unknown escape '\\q'"},
      {"root ::= \"\xC3\xA9\\q\"", "line 1, column 12: unknown escape '\\q'"},  // columns count code points
      {"root ::= \"\\x4\"", "line 1, column 11: expecting 2 hex digits after '\\x'"},
      {"root ::= \"\\U00110000\"", "line 1, column 11: U+110000 is past U+10FFFF"},
      {"root ::= \"\xC3(\"", "line 1, column 11: invalid UTF-8"},
      {"root ::= \"\xED\xA0\x80\"", "line 1, column 11: invalid UTF-8"},
      {"root ::= x\nx ::= x \"a\" | \"b\"", "line 2, column 1: rule 'x' is left-recursive"},
      {"root ::= e root \"a\" | \"b\"\ne ::= \"c\"?", "line 1, column 1: rule 'root' is left-recursive"},
      {"root ::= (\"\")*", "line 1, column 14: rule 'root_2' is left-recursive"},
      {"root ::= (\"a\" | \"b\"", "line 1, column 20: expecting ')' (the group opened at line 1, column 10)"},
      {"root ::= * \"a\"", "line 1, column 10: expecting an item before '*'"},
      {"root ::= \"a\"{10001}", "line 1, column 14: a repetition count over 10000"},
      {"root ::= \"a\"{3,2}", "line 1, column 13: repetition {3,2} has its maximum below its minimum"},
      {"root ::= \"a\"{2", "line 1, column 15: expecting '}'"},
      {"root \"a\"", "line 1, column 6: expecting '::='"},
      {"root ::= \"a\"\nroot ::= \"b\"", "line 2, column 1: rule 'root' is defined twice"},
      {"root ::= \"a\" ) \"b\"", "line 1, column 14: expecting a newline or the end of the grammar"},
      {"root ::= \"a\"\n@", "line 2, column 1: expecting a rule name"},
      {"root ::= \"a\"\n\"b\"", "line 2, column 1: expecting a rule name"},
  };
  for (const Case& c : cases) EXPECT_EQ(error_of(c.text), c.error) << c.text;
}

TEST(GrammarParseTest, LimitsBoundTheGrammar) {
  EXPECT_EQ(error_of(std::string(Grammar::kMaxTextBytes + 1, ' ')),
            "the grammar is 1048577 bytes; the limit is 1048576");
  EXPECT_EQ(error_of("root ::= " + std::string(300, '(') + "\"a\"" + std::string(300, ')')),
            "line 1, column 267: parentheses nest too deep");
  EXPECT_EQ(error_of("root ::= \"" + std::string(200, 'a') + "\"{10000}"),
            "line 1, column 212: the grammar has more than 1048576 elements once its repetitions are expanded");
  // Large but within bounds: nested repetitions multiply the language, not the grammar.
  const std::shared_ptr<const Grammar> g = parse_ok("root ::= (\"ab\"{100}){100}");
  ASSERT_TRUE(g);
  std::string text;
  for (int i = 0; i < 10000; ++i) text += "ab";
  EXPECT_TRUE(matches(g, text));
  EXPECT_FALSE(matches(g, text.substr(2)));
}

TEST(GrammarParseTest, CompilesAsLlamaCppDoes) {
  // root ::= [a-c] | "x" r  with the class as kChar, kCharRangeUpper.
  const std::shared_ptr<const Grammar> g = parse_ok("root ::= [^a-c_] | \"x\" r\nr ::= .");
  ASSERT_TRUE(g);
  using T = GrammarElementType;
  const std::vector<std::pair<T, uint32_t>> expected = {
      {T::kCharNot, 'a'}, {T::kCharRangeUpper, 'c'}, {T::kCharAlt, '_'}, {T::kAlt, 0}, {T::kChar, 'x'},
      {T::kRuleRef, 1},   {T::kEnd, 0},              {T::kCharAny, 0},  {T::kEnd, 0}};
  ASSERT_EQ(g->elements().size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(g->elements()[i].type, expected[i].first) << i;
    EXPECT_EQ(g->elements()[i].value, expected[i].second) << i;
  }
  EXPECT_EQ(g->rule_count(), 2u);
  EXPECT_EQ(g->rule_name(g->root_rule()), "root");
  EXPECT_EQ(g->alternatives(0).size(), 2u);
  EXPECT_EQ(g->alternatives(0)[1], 4u);
}

// Every string over `alphabet` of length up to `max_length`.
std::vector<std::string> all_strings(std::string_view alphabet, size_t max_length) {
  std::vector<std::string> out = {""};
  for (size_t begin = 0; begin < out.size(); ++begin) {
    if (out[begin].size() == max_length) continue;
    for (const char c : alphabet) out.push_back(out[begin] + c);
  }
  return out;
}

TEST(GrammarMatchTest, SmallGrammarsAgreeWithReferencesOnEveryShortString) {
  struct Case {
    std::string gbnf;
    std::function<bool(const std::string&)> reference;
  };
  const auto regex = [](const char* pattern) {
    return [re = std::regex(pattern)](const std::string& s) { return std::regex_match(s, re); };
  };
  // a^n b^n, which no regex describes.
  const auto balanced = [](const std::string& s) {
    const size_t n = s.size() / 2;
    return s.size() % 2 == 0 && s == std::string(n, 'a') + std::string(n, 'b');
  };
  const std::vector<Case> cases = {
      {"root ::= \"ab\" | \"c\"", regex("ab|c")},
      {"root ::= [a-b]+ \"c\"?", regex("[a-b]+c?")},
      {"root ::= [^a]*", regex("[^a]*")},
      {"root ::= [^a-b\\x2d]", regex("[^a-b-]")},
      {"root ::= (\"a\" | \"bc\"){2,3}", regex("(a|bc){2,3}")},
      {"root ::= \"a\"{0,2} \"b\"{2} \"c\"{1,}", regex("a{0,2}b{2}c{1,}")},
      {"root ::= ( \"a\" \"b\"? )* \"c\"", regex("(ab?)*c")},
      {"root ::= . \"a\" .", regex(".a.")},
      {"root ::= \"abc\"{2,} | \"\"", regex("(abc){2,}|")},
      {"root ::= x\nx ::= (\"a\" x \"b\")?", balanced},
      {"root ::= a-b c # a comment\na-b ::= \"a\" | \"b\"\nc ::= [bc]{1,2}\n", regex("[ab][bc]{1,2}")},
      {"root ::= (\n  \"a\" # first\n  | \"b\" \"c\"\n\n) \"c\"", regex("(a|bc)c")},
      {"root ::= (\"a\" | \"a\" \"a\" | \"a\" \"b\")* \"c\"", regex("(a|aa|ab)*c")},
      {"root ::= (\"\" | \"a\") (\"b\"? \"c\"?) [a]{0,3}", regex("a?b?c?a{0,3}")},
  };
  const std::vector<std::string> strings = all_strings("abc-", 7);
  for (const Case& c : cases) {
    const std::shared_ptr<const Grammar> g = parse_ok(c.gbnf);
    ASSERT_TRUE(g);
    int accepted = 0;
    for (const std::string& s : strings) {
      const bool expected = c.reference(s);
      accepted += expected ? 1 : 0;
      ASSERT_EQ(matches(g, s), expected) << c.gbnf << "\non '" << s << "'";
    }
    EXPECT_GT(accepted, 0) << c.gbnf;
  }
}

TEST(GrammarMatchTest, PrefixesOfMatchesAreAcceptedAndRejectionKeepsTheState) {
  const std::shared_ptr<const Grammar> g = parse_ok("root ::= \"ab\" [0-9]+ (\",\" [0-9]+)*");
  ASSERT_TRUE(g);
  GrammarMatcher m(g);
  EXPECT_FALSE(m.is_complete());
  EXPECT_TRUE(m.accept("a"));
  EXPECT_FALSE(m.accept("bx"));  // "b" would be fine, "x" is not: nothing is consumed
  EXPECT_FALSE(m.can_accept("a"));
  EXPECT_TRUE(m.can_accept("b12"));
  EXPECT_TRUE(m.accept("b1"));
  EXPECT_TRUE(m.is_complete());
  EXPECT_TRUE(m.accept(","));
  EXPECT_FALSE(m.is_complete());
  EXPECT_FALSE(m.accept(",,"));
  EXPECT_TRUE(m.accept("7"));
  EXPECT_TRUE(m.is_complete());
  EXPECT_FALSE(m.is_dead());
  EXPECT_TRUE(m.accept(""));
}

TEST(GrammarMatchTest, Utf8CodePointsSplitAcrossCalls) {
  // Greek lowercase, then the euro sign, then any code point, then an emoji or a CJK character.
  const std::shared_ptr<const Grammar> g = parse_ok("root ::= [\xCE\xB1-\xCF\x89]+ \"\\u20AC\" . [\\U0001F600-\\U0001F64F\xE4\xB8\x80]");
  ASSERT_TRUE(g);
  const std::string text = "\xCE\xB1\xCF\x89\xE2\x82\xAC\xF0\x9F\x98\x80\xF0\x9F\x98\x8A";  // αω€😀😊
  GrammarMatcher m(g);
  for (size_t i = 0; i < text.size(); ++i) {
    ASSERT_TRUE(m.accept(text.substr(i, 1))) << i;
    EXPECT_EQ(m.is_complete(), i + 1 == text.size()) << i;
  }
  EXPECT_TRUE(matches(g, "\xCE\xB1\xE2\x82\xAC" "a" "\xE4\xB8\x80"));
  // A lead byte is accepted only when some completion could match: after "α", [α-ω] allows 0xCE and 0xCF; 0xCD
  // leads only to U+0340..U+037F, which the set does not hold; 0xE2 may still become "€".
  GrammarMatcher n(g);
  ASSERT_TRUE(n.accept("\xCE\xB1"));
  EXPECT_TRUE(n.can_accept("\xCF"));
  EXPECT_FALSE(n.can_accept("\xCD"));
  EXPECT_TRUE(n.can_accept("\xE2\x82"));
  EXPECT_FALSE(n.can_accept("\xE2\x83"));  // U+20C0.. is not the euro sign
  ASSERT_TRUE(n.accept("\xE2"));
  EXPECT_FALSE(n.is_complete());
  ASSERT_TRUE(n.accept("\x82\xAC"));
  // `.` takes any well-formed character, and no malformed one.
  EXPECT_TRUE(n.can_accept("\xF4\x8F\xBF\xBF"));  // U+10FFFF
  EXPECT_FALSE(n.can_accept("\xF4\x90"));         // past U+10FFFF
  EXPECT_FALSE(n.can_accept("\xED\xA0"));         // a surrogate
  EXPECT_FALSE(n.can_accept("\xC0\xAF"));         // overlong
  EXPECT_FALSE(n.can_accept("\xE0\x80"));         // overlong
  EXPECT_FALSE(n.can_accept("\x80"));             // a stray continuation byte
  EXPECT_FALSE(n.can_accept("\xC3" "a"));
  // Negated classes and partial characters: [^é] allows 0xC3 (other completions exist) but not "é" itself.
  const std::shared_ptr<const Grammar> not_e = parse_ok("root ::= [^\xC3\xA9]");
  ASSERT_TRUE(not_e);
  GrammarMatcher k(not_e);
  EXPECT_TRUE(k.can_accept("\xC3"));
  EXPECT_FALSE(k.can_accept("\xC3\xA9"));
  EXPECT_TRUE(k.can_accept("\xC3\xA8"));
  const std::shared_ptr<const Grammar> not_range = parse_ok("root ::= [^\\u0080-\\u07FF]");
  ASSERT_TRUE(not_range);
  EXPECT_FALSE(GrammarMatcher(not_range).can_accept("\xC3"));
  EXPECT_TRUE(GrammarMatcher(not_range).can_accept("\xE0\xA0"));
}

TEST(GrammarMatchTest, AmbiguousGrammarsStayBounded) {
  // Many ways to split a run of a's: the stacks are deduplicated, so their number stays small.
  const std::shared_ptr<const Grammar> g = parse_ok("root ::= (\"a\" | \"a\" \"a\" | \"a\" a3)* \"b\"\na3 ::= \"aa\"");
  ASSERT_TRUE(g);
  GrammarMatcher m(g);
  for (int i = 0; i < 5000; ++i) ASSERT_TRUE(m.accept("a")) << i;
  EXPECT_LE(m.stack_count(), 8u);
  EXPECT_TRUE(m.accept("b"));
  EXPECT_TRUE(m.is_complete());
  // Here the stacks remember every earlier choice, 2^n of them: the matcher refuses to go past kMaxStacks.
  const std::shared_ptr<const Grammar> exp = parse_ok("root ::= x\nx ::= \"a\" x \"b\" | \"a\" x \"c\" | \"\"");
  ASSERT_TRUE(exp);
  GrammarMatcher e(exp);
  int accepted = 0;
  while (accepted < 64 && e.accept("a")) ++accepted;
  EXPECT_GE(accepted, 6);
  EXPECT_LT(accepted, 64);
  EXPECT_LE(e.stack_count(), GrammarMatcher::kMaxStacks);
  EXPECT_TRUE(e.accept("c"));
}

// Random JSON text, written the way RFC 8259 allows (whitespace around every structural character).
class JsonGenerator {
 public:
  explicit JsonGenerator(uint32_t seed) : rng_(seed) {}

  std::string document() { return ws() + object(0) + ws(); }
  std::string any_value() { return ws() + value(0) + ws(); }

 private:
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }

  std::string ws() {
    static constexpr char kSpace[] = {' ', '\t', '\n', '\r'};
    std::string out;
    while (pick(3) == 0) out += kSpace[pick(4)];
    return out;
  }

  static void append_utf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      *out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      *out += static_cast<char>(0xC0 | (cp >> 6));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      *out += static_cast<char>(0xE0 | (cp >> 12));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      *out += static_cast<char>(0xF0 | (cp >> 18));
      *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string hex4(uint32_t v) {
    static constexpr char kLower[] = "0123456789abcdef";
    static constexpr char kUpper[] = "0123456789ABCDEF";
    const char* digits = pick(2) ? kLower : kUpper;
    std::string out;
    for (int shift = 12; shift >= 0; shift -= 4) out += digits[(v >> shift) & 0xF];
    return out;
  }

  std::string string() {
    std::string out = "\"";
    const int length = pick(8);
    for (int i = 0; i < length; ++i) {
      switch (pick(7)) {
        case 0: {
          static constexpr const char* kEscapes[] = {"\\\"", "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r", "\\t"};
          out += kEscapes[pick(8)];
          break;
        }
        case 1: {
          uint32_t cp = static_cast<uint32_t>(pick(0xD800));
          out += "\\u" + hex4(cp);
          break;
        }
        case 2: {  // a surrogate pair
          const auto high = static_cast<uint32_t>(0xD800 + pick(0x400));
          const auto low = static_cast<uint32_t>(0xDC00 + pick(0x400));
          out += "\\u" + hex4(high) + "\\u" + hex4(low);
          break;
        }
        case 3: {  // raw UTF-8 of 2, 3 or 4 bytes
          static constexpr uint32_t kRanges[][2] = {{0x80, 0x7FF}, {0x800, 0xD7FF}, {0xE000, 0xFFFF}, {0x10000, 0x10FFFF}};
          const auto& r = kRanges[pick(4)];
          append_utf8(r[0] + static_cast<uint32_t>(pick(static_cast<int>(r[1] - r[0] + 1))), &out);
          break;
        }
        default: {
          const char c = static_cast<char>(0x20 + pick(0x60));  // printable ASCII and DEL
          if (c == '"' || c == '\\') {
            out += '\\';
          }
          out += c;
        }
      }
    }
    return out + "\"";
  }

  std::string digits(int min, int max) {
    std::string out;
    const int n = min + pick(max - min + 1);
    for (int i = 0; i < n; ++i) out += static_cast<char>('0' + pick(10));
    return out;
  }

  std::string number() {
    std::string out = pick(3) == 0 ? "-" : "";
    out += pick(4) == 0 ? std::string("0") : std::string(1, static_cast<char>('1' + pick(9))) + digits(0, 5);
    if (pick(2)) out += "." + digits(1, 4);
    if (pick(3) == 0) out += std::string(pick(2) ? "e" : "E") + (pick(3) == 0 ? "" : pick(2) ? "+" : "-") + digits(1, 2);
    return out;
  }

  std::string value(int depth) {
    const int kind = depth >= 4 ? 2 + pick(6) : pick(8);
    switch (kind) {
      case 0: return object(depth + 1);
      case 1: return array(depth + 1);
      case 2: case 3: return string();
      case 4: case 5: return number();
      case 6: return pick(2) ? "true" : "false";
      default: return "null";
    }
  }

  std::string object(int depth) {
    std::string out = "{" + ws();
    const int n = pick(5);
    for (int i = 0; i < n; ++i) {
      if (i > 0) out += "," + ws();
      out += string() + ws() + ":" + ws() + value(depth) + ws();
    }
    return out + "}";
  }

  std::string array(int depth) {
    std::string out = "[" + ws();
    const int n = pick(5);
    for (int i = 0; i < n; ++i) {
      if (i > 0) out += "," + ws();
      out += value(depth) + ws();
    }
    return out + "]";
  }

  std::mt19937 rng_;
};

// nlohmann's verdict; nullopt for a number too large for a double, which nlohmann rejects and the grammar (syntax
// only) accepts.
std::optional<bool> reference_accepts(const std::string& text, bool object_only) {
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    return !object_only || j.is_object();
  } catch (const nlohmann::json::exception& e) {
    if (std::string(e.what()).find("number overflow") != std::string::npos) return std::nullopt;
    return false;
  }
}

// Feeds `text` in random chunks of 1 to 8 bytes; whether it was all accepted and complete at the end.
bool matches_in_chunks(const std::shared_ptr<const Grammar>& g, const std::string& text, std::mt19937& rng,
                       size_t complete_from = std::string::npos) {
  GrammarMatcher m(g);
  size_t at = 0;
  while (at < text.size()) {
    const size_t n = std::min(text.size() - at, size_t{1} + rng() % 8);
    if (!m.accept(std::string_view(text).substr(at, n))) return false;
    at += n;
    if (complete_from != std::string::npos) {
      EXPECT_EQ(m.is_complete(), at >= complete_from) << text << " at " << at;
    }
  }
  return m.is_complete();
}

TEST(GrammarJsonTest, AcceptsRandomDocumentsInRandomChunks) {
  std::mt19937 rng(7);
  JsonGenerator gen(11);
  for (int i = 0; i < 300; ++i) {
    const std::string doc = gen.document();
    ASSERT_TRUE(nlohmann::json::accept(doc)) << doc;  // the generator itself
    // Complete exactly from the closing brace on (trailing whitespace may follow).
    const size_t complete_from = doc.find_last_of('}') + 1;
    EXPECT_TRUE(matches_in_chunks(json_grammar(), doc, rng, complete_from)) << doc;
    const std::string value = gen.any_value();
    ASSERT_TRUE(nlohmann::json::accept(value)) << value;
    EXPECT_TRUE(matches_in_chunks(json_value_grammar(), value, rng)) << value;
    EXPECT_EQ(matches(json_grammar(), value), nlohmann::json::parse(value).is_object()) << value;
  }
}

TEST(GrammarJsonTest, MutatedDocumentsAgreeWithNlohmann) {
  std::mt19937 rng(3);
  JsonGenerator gen(5);
  static constexpr char kBytes[] = "{}[]\":,\\ \t\n.-+eE0123456789aflnrstu/\x01\x7f\xC3\xA9\xED\xA0\xFF";
  int rejected = 0, total = 0;
  for (int i = 0; i < 1500; ++i) {
    std::string doc = i % 2 ? gen.document() : gen.any_value();
    const int mutations = 1 + static_cast<int>(rng() % 2);
    for (int k = 0; k < mutations && !doc.empty(); ++k) {
      const size_t at = rng() % doc.size();
      const char byte = kBytes[rng() % (sizeof(kBytes) - 1)];
      switch (rng() % 3) {
        case 0: doc.erase(at, 1); break;
        case 1: doc.insert(doc.begin() + static_cast<std::ptrdiff_t>(at), byte); break;
        default: doc[at] = byte;
      }
    }
    const bool object_only = i % 2 == 1;
    const std::optional<bool> reference = reference_accepts(doc, object_only);
    if (!reference) continue;
    const bool expected = *reference;
    const bool got = matches_in_chunks(object_only ? json_grammar() : json_value_grammar(), doc, rng);
    EXPECT_EQ(got, expected) << (object_only ? "object: " : "value: ") << nlohmann::json(doc).dump();
    rejected += expected ? 0 : 1;
    ++total;
  }
  EXPECT_GT(rejected, total / 3);  // the mutations do break most documents
  EXPECT_LT(rejected, total);
}

TEST(GrammarJsonTest, HandPickedEdges) {
  const auto& g = json_value_grammar();
  for (const char* ok : {"0", "-0", "-0.5e-7", "1E+2", "\"\\ud83d\\ude00\"", "\"\\uD7FF\\uE000\"", "[]", "{}",
                         " [ 1 , { \"a\" : null } ] ", "\"\x7f\"", "\"\xF4\x8F\xBF\xBF\""}) {
    EXPECT_TRUE(matches(g, ok)) << ok;
    EXPECT_TRUE(nlohmann::json::accept(ok)) << ok;
  }
  for (const char* bad : {"01", "-", "1.", ".5", "1e", "+1", "\"\\ud83d\"", "\"\\ude00\"", "\"\\ud83d\\u0041\"",
                          "[1,]", "{\"a\"}", "{,}", "\"\x1f\"", "\"\\x41\"", "tru", "nul", "\"\xC0\xAF\""}) {
    EXPECT_FALSE(matches(g, bad)) << bad;
    EXPECT_FALSE(nlohmann::json::accept(bad)) << bad;
  }
  EXPECT_FALSE(matches(json_grammar(), "[]"));
  EXPECT_TRUE(matches(json_grammar(), "\n{\"k\": [true]}\t"));
}

// Byte strings drawn from JSON's pieces, words, whole and cut UTF-8 characters and malformed bytes.
std::vector<std::string> random_vocabulary(size_t n, uint32_t seed) {
  static const std::vector<std::string> kPieces = {
      "{", "}", "[", "]", "\"", ":", ",", " ", "\n", "\t", "\\", "\\u", "\\n", "0", "1", "9", "-", ".", "e", "+",
      "true", "false", "null", "a", "b", "key", "name", " the", "ing", "x", "D", "d8", "\xC3\xA9", "\xE2\x82\xAC",
      "\xF0\x9F\x98\x80", "\xC3", "\xA9", "\xE2\x82", "\xAC", "\xF0\x9F", "\x98\x80", "\xFF", "\x01", "\xED\xA0"};
  std::mt19937 rng(seed);
  std::vector<std::string> vocab(n);
  for (size_t i = 0; i < n; ++i) {
    if (rng() % 50 == 0) continue;  // a special token: ""
    const size_t pieces = 1 + rng() % 4;
    for (size_t k = 0; k < pieces; ++k) vocab[i] += kPieces[rng() % kPieces.size()];
  }
  return vocab;
}

TEST(TokenTrieTest, MaskEqualsBruteForceAtManyStates) {
  const std::vector<std::string> vocab = random_vocabulary(3000, 21);
  const TokenTrie trie(vocab);
  ASSERT_EQ(trie.vocab_size(), vocab.size());
  JsonGenerator gen(99);
  std::mt19937 rng(1);
  std::vector<uint8_t> mask;
  int states = 0;
  size_t allowed_total = 0;
  for (int d = 0; d < 6; ++d) {
    const std::string doc = gen.document();
    GrammarMatcher m(json_grammar());
    for (size_t at = 0; at <= doc.size(); ++at) {
      if (at > 0) {
        ASSERT_TRUE(m.accept(doc.substr(at - 1, 1)));
      }
      if (rng() % 3 != 0 && at != doc.size()) continue;
      trie.allowed_tokens(m, mask);
      ASSERT_EQ(mask.size(), vocab.size());
      for (size_t id = 0; id < vocab.size(); ++id) {
        const bool expected = !vocab[id].empty() && m.can_accept(vocab[id]);
        ASSERT_EQ(mask[id] != 0, expected) << "token " << nlohmann::json(vocab[id]).dump() << " after "
                                           << nlohmann::json(doc.substr(0, at)).dump();
        ASSERT_EQ(trie.accepts(m, static_cast<int32_t>(id)), expected);
        allowed_total += expected ? 1 : 0;
      }
      ++states;
    }
  }
  EXPECT_GT(states, 100);
  EXPECT_GT(allowed_total, static_cast<size_t>(states));  // not a trivially empty mask
  EXPECT_FALSE(trie.accepts(GrammarMatcher(json_grammar()), -1));
  EXPECT_FALSE(trie.accepts(GrammarMatcher(json_grammar()), static_cast<int32_t>(vocab.size())));
}

// Words with and without a leading space, numbers, punctuation runs and some non-ASCII, as a BPE vocabulary has.
std::vector<std::string> word_vocabulary(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::string> vocab(n);
  for (std::string& t : vocab) {
    const uint32_t kind = rng() % 20;
    if (kind < 14) {
      if (rng() % 2) t += ' ';
      const size_t length = 1 + rng() % 9;
      for (size_t i = 0; i < length; ++i) t += static_cast<char>('a' + rng() % 26);
    } else if (kind < 16) {
      const size_t length = 1 + rng() % 4;
      for (size_t i = 0; i < length; ++i) t += static_cast<char>('0' + rng() % 10);
    } else if (kind < 19) {
      static constexpr char kPunct[] = "{}[]\":,. \n\\-_'!?";
      const size_t length = 1 + rng() % 3;
      for (size_t i = 0; i < length; ++i) t += kPunct[rng() % (sizeof(kPunct) - 1)];
    } else {
      static const char* kUtf8[] = {"\xC3\xA9", "\xE2\x80\x99", "\xE4\xB8\xAD", "\xF0\x9F\x98\x80", "\xC3", "\xA9"};
      t += kUtf8[rng() % 6];
    }
  }
  return vocab;
}

TEST(TokenTrieTest, PrintsMaskTimeFor50kTokens) {
  const std::vector<std::string> vocab = word_vocabulary(50000, 4);
  const auto build_start = std::chrono::steady_clock::now();
  const TokenTrie trie(vocab);
  const double build_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - build_start).count();
  std::printf("[ timing   ] TokenTrie build, 50000 tokens: %.2f ms\n", build_ms);
  struct Position {
    const char* name;
    const char* prefix;
  };
  for (const Position& p : {Position{"inside a JSON string", "{\"name\": \"some te"},
                            Position{"at an object key", "{\"a\": 1, "}}) {
    GrammarMatcher m(json_grammar());
    ASSERT_TRUE(m.accept(p.prefix));
    std::vector<uint8_t> mask;
    std::vector<double> ms;
    for (int run = 0; run < 5; ++run) {
      const auto start = std::chrono::steady_clock::now();
      trie.allowed_tokens(m, mask);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(ms.begin(), ms.end());
    const auto allowed = std::count(mask.begin(), mask.end(), uint8_t{1});
    std::printf("[ timing   ] allowed_tokens %s: median %.2f ms over 5 runs, %ld of 50000 allowed\n", p.name, ms[2],
                static_cast<long>(allowed));
    EXPECT_GT(allowed, 0);
  }
}

}  // namespace
}  // namespace hxrt::llm
