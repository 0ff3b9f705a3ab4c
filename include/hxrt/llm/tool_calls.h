// Tool calls (OpenAI's `tools` / `tool_calls`) in the text a chat model reads and writes.
//
// A chat template either renders `tools` itself (Qwen, Llama 3.x, Mistral, Hermes: the probe in
// tool_call_style() finds out by rendering) or ignores them (SmolLM2's ChatML, Gemma, Phi-3). For the first kind the
// model's own format is used: Hermes `<tool_call>{"name", "arguments"}</tool_call>` blocks, Llama 3's bare
// `{"name", "parameters"}` object, Mistral's `[TOOL_CALLS] [{"name", "arguments"}, ...]`. For the second, hxrt tells
// the model about the tools in a system turn of its own in the Hermes format (as llama.cpp's generic handler does) and
// rewrites earlier calls and tool results into text the template can print, so tools are never silently dropped.
//
// The answer is split into content and calls by parse_tool_calls (ToolCallStream while streaming, which holds back
// text from the point where a call may begin). tool_call_grammar gives the GBNF that forces a call (tool_choice
// "required" or a named function) with arguments that follow each function's JSON Schema (llm/json_schema.h).
//
// Thread-safety: pure functions; ToolCallStream is thread-compatible.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hxrt/base/status.h"
#include "hxrt/llm/tokenizer.h"

namespace hxrt::llm {

enum class ToolCallFormat {
  kHermes,   // <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>, one block a call (Qwen 2/2.5/3, Hermes)
  kLlama3,   // the answer is one {"name": ..., "parameters": {...}} object, after <|python_tag|> or not (Llama 3.x)
  kMistral,  // [TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...] (the marker is a control token: it may be absent)
};
std::string_view tool_call_format_name(ToolCallFormat format);

struct ToolCallStyle {
  ToolCallFormat format = ToolCallFormat::kHermes;
  // The template renders `tools`; false: hxrt's system turn describes them (Hermes format).
  bool template_renders_tools = false;
};

// Probes `tokenizer`'s chat template: renders a chat with one tool and looks for its name in the text; the format
// comes from the markers in the template's source. A template that does not render is treated as one without tools.
ToolCallStyle tool_call_style(const Tokenizer& tokenizer);

// The prompt of a chat with tools (`tools_json`: the request's `tools` array; "" for none): the template renders
// them, or (style.template_renders_tools false) hxrt's system turn lists them, assistant turns' tool_calls become
// <tool_call> blocks in their content and "tool" turns become user turns of <tool_response> blocks.
Result<std::string> apply_chat_template_with_tools(const Tokenizer& tokenizer, const ToolCallStyle& style,
                                                   std::span<const ChatMessage> messages, std::string_view tools_json);

struct ToolCall {
  std::string name;
  std::string arguments;  // the arguments object as compact JSON text (OpenAI's `function.arguments`)
};

struct ToolCallAnswer {
  std::string content;  // the text outside the calls (trimmed of the whitespace around them)
  std::vector<ToolCall> calls;
};

// Splits a finished answer. A block that is not a call (not JSON, no string "name", arguments not an object) stays
// in the content, so nothing the model wrote is lost.
ToolCallAnswer parse_tool_calls(ToolCallFormat format, std::string_view text);

// Streaming: push() gives out the content that can no longer be part of a call; once a call may have begun, the
// rest is held, and finish() parses it (its content is what was held that is not a call).
class ToolCallStream {
 public:
  explicit ToolCallStream(ToolCallFormat format) : format_(format) {}
  ToolCallStream(const ToolCallStream&) = delete;
  ToolCallStream& operator=(const ToolCallStream&) = delete;
  ToolCallStream(ToolCallStream&&) = default;  // a server keeps one per choice in a vector
  ToolCallStream& operator=(ToolCallStream&&) = default;
  std::string push(std::string_view text);
  ToolCallAnswer finish();

 private:
  ToolCallFormat format_;
  std::string held_;          // text not given out yet
  bool in_call_ = false;      // a call's opening was seen: everything from there on is held until finish()
  bool decided_ = false;      // kLlama3 / kMistral: the answer's start showed it is content, not calls
};

// The GBNF (root "root") that makes the answer a call in `format`: of the function named `function_name`, or of
// any of `tools_json`'s functions when it is empty ("required"); `parallel`: one or more calls (at most
// kMaxParallelToolCalls), else exactly one. Each function's `parameters` become the arguments' JSON Schema.
// InvalidArgument naming the tool for a malformed definition, an unknown function_name, or parameters the grammar
// cannot hold the arguments to.
inline constexpr int kMaxParallelToolCalls = 8;
Result<std::string> tool_call_grammar(ToolCallFormat format, std::string_view tools_json,
                                      std::string_view function_name, bool parallel);

// Checks a `tools` array as OpenAI defines it: objects of "type": "function" with a "function" object holding a
// non-empty string "name" and, optionally, "description" (string) and "parameters" (object). InvalidArgument naming
// the first bad entry.
Status validate_tools(std::string_view tools_json);

}  // namespace hxrt::llm
