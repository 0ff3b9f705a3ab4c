// JSON Schema → GBNF (llm/json_schema.h): arbitrary bytes in, split at the first NUL byte into a schema and bytes to
// match. The schema converts or fails with a message; what converts must parse as GBNF (the converter's output is
// always a grammar), and its matcher runs over (at most kMaxMatchBytes of) the bytes without breaking
// accept/can_accept agreement.
#include <string>
#include <string_view>

#include "fuzz/fuzz_target.h"
#include "hxrt/llm/grammar.h"
#include "hxrt/llm/json_schema.h"

namespace {
constexpr size_t kMaxMatchBytes = 512;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto [schema, bytes] = split_at_nul(data, size, kMaxMatchBytes);
  hxrt::Result<std::string> gbnf = hxrt::llm::json_schema_to_gbnf(schema);
  if (!gbnf.ok()) {
    HXRT_FUZZ_ASSERT(!gbnf.status().message().empty(), "a failed conversion says nothing");
    return 0;
  }
  hxrt::Result<std::shared_ptr<const hxrt::llm::Grammar>> grammar = hxrt::llm::parse_gbnf(*gbnf);
  // A schema that converts may still exceed the grammar's size bounds (deep or wide schemas); nothing else fails.
  if (!grammar.ok()) {
    const std::string_view why = grammar.status().message();
    HXRT_FUZZ_ASSERT(why.find("more than") != std::string_view::npos || why.find("expanded") != std::string_view::npos ||
                         why.find("too deep") != std::string_view::npos || why.find("the limit is") != std::string_view::npos,
                     "the converter wrote GBNF that does not parse: %s\n%s", grammar.status().to_string().c_str(),
                     gbnf->c_str());
    return 0;
  }
  hxrt::llm::GrammarMatcher matcher(*grammar);
  for (size_t at = 0; at < bytes.size(); ++at) {
    const std::string_view one = bytes.substr(at, 1);
    const bool can = matcher.can_accept(one);
    HXRT_FUZZ_ASSERT(can == matcher.accept(one), "can_accept and accept disagree");
  }
  return 0;
}
