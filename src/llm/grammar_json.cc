// The built-in JSON grammars (RFC 8259).
#include <cstdio>
#include <cstdlib>

#include "hxrt/llm/grammar.h"

namespace hxrt::llm {
namespace {

// The rules every JSON grammar shares; the root rule is added in front. `unicode` pairs surrogate escapes (a high
// \uD800-\uDBFF must be followed by a low \uDC00-\uDFFF, and a low one never stands alone), which RFC 8259 leaves to
// readers but strict ones (nlohmann::json among them) require.
constexpr std::string_view kJsonRules = R"gbnf(
value   ::= object | array | string | number | "true" | "false" | "null"
object  ::= "{" ws ( member ( "," ws member )* )? "}"
member  ::= string ws ":" ws value ws
array   ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string  ::= "\"" char* "\""
char    ::= [^"\\\x00-\x1F] | "\\" escape
escape  ::= ["\\/bfnrt] | "u" unicode
unicode ::= [0-9a-cA-Ce-fE-F] hex{3} | [dD] [0-7] hex{2} | [dD] [89abAB] hex{2} "\\u" [dD] [c-fC-F] hex{2}
hex     ::= [0-9a-fA-F]
number  ::= "-"? integer fraction? exponent?
integer ::= "0" | [1-9] [0-9]*
fraction ::= "." [0-9]+
exponent ::= [eE] [-+]? [0-9]+
ws      ::= [ \t\n\r]*
)gbnf";

std::shared_ptr<const Grammar> parse_builtin(std::string_view root_rule) {
  const std::string text = std::string("root ::= ws ") + std::string(root_rule) + " ws\n" + std::string(kJsonRules);
  Result<std::shared_ptr<const Grammar>> grammar = parse_gbnf(text);
  if (!grammar.ok()) {
    std::fprintf(stderr, "hxrt: the built-in JSON grammar does not parse: %s\n", grammar.status().to_string().c_str());
    std::abort();
  }
  return *grammar;
}

}  // namespace

const std::shared_ptr<const Grammar>& json_grammar() {
  static const std::shared_ptr<const Grammar> grammar = parse_builtin("object");
  return grammar;
}

const std::shared_ptr<const Grammar>& json_value_grammar() {
  static const std::shared_ptr<const Grammar> grammar = parse_builtin("value");
  return grammar;
}

}  // namespace hxrt::llm
