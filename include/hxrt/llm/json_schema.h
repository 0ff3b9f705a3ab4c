// JSON Schema → GBNF: the grammar of the JSON documents a schema accepts, for constrained decoding (OpenAI's
// response_format json_schema, llama-server's json_schema; llm/grammar.h parses the result).
//
// Supported: `type` (a name or a list of them: object, array, string, number, integer, boolean, null), `properties`
// with `required` (keys come in the schema's order; an optional key may be left out; no other keys are produced,
// which every schema allows unless it requires them through a keyword below), `items`, `minItems`, `maxItems`,
// `minLength`, `maxLength`, `enum`, `const`, `anyOf` / `oneOf` (as alternatives), a one-element `allOf`, local
// `$ref`s into `$defs` / `definitions` (recursion included), and the annotations that constrain nothing (`title`,
// `description`, `default`, `examples`, `$schema`, `$id`, `additionalProperties`, `strict`, `format`). A keyword
// that would constrain the document in a way the grammar cannot follow (`pattern`, `minimum`, `maximum`,
// `multipleOf`, `uniqueItems`, `not`, `if`, `patternProperties`, `minProperties`, `dependentRequired`, ...) is
// InvalidArgument naming it and where it is, so output that ends by itself always validates.
//
// Thread-safety: a pure function.
#pragma once

#include <string>
#include <string_view>

#include "hxrt/base/status.h"

namespace hxrt::llm {

// The GBNF text (root rule "root") for `schema`, a JSON Schema document as text. InvalidArgument for text that is
// not JSON, for an unsupported keyword (named with its JSON pointer), a bad $ref, or a schema nesting deeper than 64.
Result<std::string> json_schema_to_gbnf(std::string_view schema);

}  // namespace hxrt::llm
