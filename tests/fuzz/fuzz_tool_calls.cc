// Tool calls (llm/tool_calls.h): arbitrary bytes in, split at the first NUL byte into a request's `tools` JSON and a
// model's answer. The tools validate or fail with a message; valid ones give, for every format, a forcing grammar that
// parses as GBNF (or fails naming why); the answer splits into content and calls in every format, whole and streamed
// in pieces, and every call's arguments are a JSON object.
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz/fuzz_target.h"
#include "hxrt/llm/grammar.h"
#include "hxrt/llm/tool_calls.h"

namespace {
constexpr size_t kMaxAnswerBytes = 4096;

void check_calls(const hxrt::llm::ToolCallAnswer& answer) {
  for (const hxrt::llm::ToolCall& call : answer.calls) {
    const nlohmann::json arguments = nlohmann::json::parse(call.arguments, nullptr, false);
    HXRT_FUZZ_ASSERT(arguments.is_object(), "a call's arguments are not a JSON object: %s", call.arguments.c_str());
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using hxrt::llm::ToolCallFormat;
  const auto [tools, answer] = split_at_nul(data, size, kMaxAnswerBytes);
  for (ToolCallFormat format : {ToolCallFormat::kHermes, ToolCallFormat::kLlama3, ToolCallFormat::kMistral}) {
    if (hxrt::llm::validate_tools(tools).ok()) {
      for (bool parallel : {false, true}) {
        hxrt::Result<std::string> gbnf = hxrt::llm::tool_call_grammar(format, tools, "", parallel);
        if (!gbnf.ok()) {
          HXRT_FUZZ_ASSERT(!gbnf.status().message().empty(), "a failed grammar says nothing");
          continue;
        }
        hxrt::Result<std::shared_ptr<const hxrt::llm::Grammar>> grammar = hxrt::llm::parse_gbnf(*gbnf);
        if (!grammar.ok()) {  // only the grammar's size bounds may refuse what the converter wrote
          const std::string_view why = grammar.status().message();
          HXRT_FUZZ_ASSERT(why.find("more than") != std::string_view::npos ||
                               why.find("expanded") != std::string_view::npos ||
                               why.find("too deep") != std::string_view::npos ||
                               why.find("the limit is") != std::string_view::npos,
                           "the tool grammar does not parse: %s\n%s", grammar.status().to_string().c_str(),
                           gbnf->c_str());
        }
      }
    }
    check_calls(hxrt::llm::parse_tool_calls(format, answer));
    hxrt::llm::ToolCallStream stream(format);
    for (size_t at = 0; at < answer.size(); at += 3) (void)stream.push(answer.substr(at, 3));
    check_calls(stream.finish());
  }
  return 0;
}
