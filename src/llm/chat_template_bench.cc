// Chat templates: parsing a built-in template once, and rendering a normal chat (system prompt, two exchanges, a
// question; Qwen also with two tool definitions) from the parsed template, as every chat request does.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "hxrt/llm/tokenizer.h"
#include "llm/chat_template.h"

namespace {

const char* const kTemplates[] = {"chatml", "qwen", "llama3", "llama2", "mistral", "gemma", "phi3"};

std::vector<hxrt::llm::ChatMessage> chat() {
  return {{"system", "You are a helpful assistant."},
          {"user", "What is the capital of France?"},
          {"assistant", "Paris."},
          {"user", "And of Italy?"},
          {"assistant", "Rome."},
          {"user", "Which of the two is larger?"}};
}

constexpr const char* kTools =
    R"([{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
"parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
{"type": "function", "function": {"name": "get_time", "description": "The local time in a city",
"parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])";

void BM_Parse(benchmark::State& state) {
  const char* name = kTemplates[state.range(0)];
  state.SetLabel(name);
  for (auto _ : state) {
    hxrt::Result<hxrt::llm::jinja::Template> parsed = hxrt::llm::detail::parse_chat_template(name);
    if (!parsed.ok()) state.SkipWithError(std::string(parsed.status().message()).c_str());
    benchmark::DoNotOptimize(parsed);
  }
}
BENCHMARK(BM_Parse)->DenseRange(0, 6)->Unit(benchmark::kMicrosecond);

void BM_Render(benchmark::State& state) {
  const char* name = kTemplates[state.range(0)];
  const bool tools = state.range(1) != 0;
  state.SetLabel(std::string(name) + (tools ? " +tools" : ""));
  hxrt::Result<hxrt::llm::jinja::Template> parsed = hxrt::llm::detail::parse_chat_template(name);
  if (!parsed.ok()) {
    state.SkipWithError(std::string(parsed.status().message()).c_str());
    return;
  }
  const std::vector<hxrt::llm::ChatMessage> messages = chat();
  hxrt::llm::ChatOptions options;
  if (tools) options.tools_json = kTools;
  size_t bytes = 0;
  for (auto _ : state) {
    hxrt::Result<std::string> text = hxrt::llm::detail::render_chat(*parsed, messages, true, "<s>", "</s>", options);
    if (!text.ok()) {
      state.SkipWithError(std::string(text.status().message()).c_str());
      return;
    }
    bytes = text->size();
    benchmark::DoNotOptimize(text);
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_Render)
    ->ArgsProduct({benchmark::CreateDenseRange(0, 6, 1), {0}})
    ->Args({1, 1})
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
