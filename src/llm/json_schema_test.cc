// JSON Schema → GBNF (json_schema.h): for each schema, documents that validate are accepted whole (and complete)
// by the converted grammar, and documents that break the schema (a missing required key, a wrong type, an extra
// key, a value outside an enum, too many items) are not; unsupported keywords are errors naming where they are.
#include "hxrt/llm/json_schema.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hxrt/llm/grammar.h"

namespace hxrt::llm {
namespace {

// Whether the grammar of `schema` accepts `document` entirely.
bool accepts(const std::string& schema, const std::string& document) {
  Result<std::string> gbnf = json_schema_to_gbnf(schema);
  EXPECT_TRUE(gbnf.ok()) << gbnf.status().to_string();
  if (!gbnf.ok()) return false;
  Result<std::shared_ptr<const Grammar>> grammar = parse_gbnf(*gbnf);
  EXPECT_TRUE(grammar.ok()) << grammar.status().to_string() << "\n" << *gbnf;
  if (!grammar.ok()) return false;
  GrammarMatcher matcher(*grammar);
  return matcher.accept(document) && matcher.is_complete();
}

TEST(JsonSchemaTest, AcceptsTheDocumentsTheSchemaAcceptsAndNoOthers) {
  struct Case {
    std::string schema;
    std::vector<std::string> valid, invalid;
  };
  const std::vector<Case> cases = {
      {R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
           "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["name", "age"]})",
       {R"({"name": "Ada", "age": 36})", R"({"name":"A\"da","age":-1,"tags":["x","y"]})",
        "{\n  \"name\": \"\\u00e9\",\n  \"age\": 0,\n  \"tags\": []\n}"},
       {R"({"age": 36})", R"({"name": "Ada"})", R"({"name": 1, "age": 2})", R"({"name": "a", "age": 1.5})",
        R"({"name": "a", "age": 1, "extra": 2})", R"({"age": 1, "name": "a"})", R"({"name": "a", "age": 1,})"}},
      {R"({"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "null"}, "c": {"type": "number"}}})",
       {"{}", R"({"a": true})", R"({"b": null})", R"({"c": 2.5e-3})", R"({"a": false, "c": -0.5})",
        R"({"a": true, "b": null, "c": 1})"},
       {R"({"c": 1, "a": true})", R"({"a": "true"})", R"({,})", R"({"c": 01})", "[]"}},
      {R"({"enum": ["red", "green", 3, null]})", {R"("red")", R"("green")", "3", "null"}, {R"("blue")", "4", "true"}},
      {R"({"const": {"k": [1, 2]}})", {R"({"k":[1,2]})"}, {R"({"k": [1, 2]})", R"({"k":[2,1]})"}},
      {R"({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3})",
       {"[1, 2]", "[1,2,3]"}, {"[]", "[1]", "[1, 2, 3, 4]", R"([1, "2"])"}},
      {R"({"type": "string", "minLength": 2, "maxLength": 3})", {R"("ab")", R"("abc")", R"("\n\t")"},
       {R"("a")", R"("abcd")", "3"}},
      {R"({"anyOf": [{"type": "integer"}, {"type": "string"}]})", {"7", R"("seven")"}, {"7.5", "null"}},
      {R"({"type": ["string", "null"]})", {R"("x")", "null"}, {"1"}},
      {R"({"$defs": {"node": {"type": "object", "properties": {"value": {"type": "integer"},
           "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}, "required": ["value", "next"]}},
          "$ref": "#/$defs/node"})",
       {R"({"value": 1, "next": null})", R"({"value": 1, "next": {"value": 2, "next": null}})"},
       {R"({"value": 1})", R"({"value": 1, "next": {"value": 2}})"}},
      {R"({"type": "object"})", {"{}", R"({"any": [1, {"x": null}]})"}, {"[]", R"({"a" 1})"}},
      {"true", {"1", R"({"a": [true]})", R"("s")"}, {"{", "nul"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.schema);
    for (const std::string& d : c.valid) EXPECT_TRUE(accepts(c.schema, d)) << d;
    for (const std::string& d : c.invalid) EXPECT_FALSE(accepts(c.schema, d)) << d;
  }
}

TEST(JsonSchemaTest, UnsupportedKeywordsAndBadSchemasAreNamedErrors) {
  for (const auto& [schema, needle] : std::vector<std::pair<std::string, std::string>>{
           {R"({"type": "string", "pattern": "^a"})", "'pattern' at ''"},
           {R"({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}})",
            "'minimum' at '/properties/n'"},
           {R"({"type": "array", "items": {"not": {}}})", "'not' at '/items'"},
           {R"({"$ref": "http://example.com/s.json"})", "local"},
           {R"({"$ref": "#/$defs/missing"})", "names no definition"},
           {R"({"type": "object", "properties": {"a": {}}, "required": ["b"]})", "not in 'properties'"},
           {R"({"type": "text"})", "unknown type 'text'"},
           {R"({"enum": []})", "non-empty"},
           {"false", "accepts no document"},
           {"{not json", "not valid JSON"},
           {R"({"type": "array", "minItems": 3, "maxItems": 2})", "'maxItems' < 'minItems'"}}) {
    Result<std::string> gbnf = json_schema_to_gbnf(schema);
    ASSERT_FALSE(gbnf.ok()) << schema;
    EXPECT_EQ(gbnf.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(gbnf.status().to_string().find(needle), std::string::npos) << gbnf.status().to_string();
  }
  std::string deep = "true";
  for (int i = 0; i < 70; ++i) deep = R"({"type": "array", "items": )" + deep + "}";
  EXPECT_EQ(json_schema_to_gbnf(deep).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hxrt::llm
