#include "hxrt/llm/tool_calls.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hxrt/llm/json_schema.h"

namespace hxrt::llm {
namespace {

using json = nlohmann::ordered_json;  // keys keep their order: properties, a call's name before its arguments

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kMistralTag = "[TOOL_CALLS]";
// The tool of tool_call_style's probe: a name no template prints unless it renders the tools.
constexpr std::string_view kProbeName = "hxrt_tool_probe_5e1c";

std::string_view trim(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

// OpenAI's function names: 1 to 64 of [a-zA-Z0-9_-] (so a name is safe inside a GBNF literal and a JSON string).
bool valid_function_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

// A call object {"name": string, <key>: object (or a string holding one)} as a ToolCall; nullopt otherwise.
std::optional<ToolCall> call_from(const json& j, std::initializer_list<const char*> argument_keys) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  for (const char* key : argument_keys) {
    if (!j.contains(key)) continue;
    json arguments = j[key];
    if (arguments.is_string()) arguments = json::parse(arguments.get<std::string>(), nullptr, false);
    if (!arguments.is_object()) return std::nullopt;
    return ToolCall{.name = j["name"].get<std::string>(), .arguments = arguments.dump()};
  }
  return std::nullopt;
}

json parse_json(std::string_view text) { return json::parse(text.begin(), text.end(), nullptr, false); }

ToolCallAnswer parse_hermes(std::string_view text) {
  ToolCallAnswer answer;
  std::string content;
  size_t at = 0;
  while (at < text.size()) {
    const size_t open = text.find(kOpen, at);
    if (open == std::string_view::npos) break;
    const size_t body = open + kOpen.size();
    const size_t close = text.find(kClose, body);  // a last block cut before its end tag still counts
    const size_t end = close == std::string_view::npos ? text.size() : close + kClose.size();
    std::optional<ToolCall> call =
        call_from(parse_json(text.substr(body, (close == std::string_view::npos ? text.size() : close) - body)),
                  {"arguments", "parameters"});
    if (call) {
      content += text.substr(at, open - at);
      answer.calls.push_back(std::move(*call));
    } else {
      content += text.substr(at, end - at);
    }
    at = end;
  }
  content += text.substr(at);
  answer.content = std::string(trim(content));
  return answer;
}

ToolCallAnswer parse_llama3(std::string_view text) {
  std::string_view body = trim(text);
  if (body.starts_with(kPythonTag)) body = trim(body.substr(kPythonTag.size()));
  if (std::optional<ToolCall> call = call_from(parse_json(body), {"parameters", "arguments"})) {
    return ToolCallAnswer{.calls = {std::move(*call)}};
  }
  return ToolCallAnswer{.content = std::string(trim(text))};
}

ToolCallAnswer parse_mistral(std::string_view text) {
  std::string_view body = trim(text);
  if (body.starts_with(kMistralTag)) body = trim(body.substr(kMistralTag.size()));
  const json calls = parse_json(body);
  ToolCallAnswer answer;
  if (calls.is_array() && !calls.empty()) {
    for (const json& c : calls) {
      std::optional<ToolCall> call = call_from(c, {"arguments", "parameters"});
      if (!call) return ToolCallAnswer{.content = std::string(trim(text))};  // all calls or none
      answer.calls.push_back(std::move(*call));
    }
    return answer;
  }
  return ToolCallAnswer{.content = std::string(trim(text))};
}

// The length of the longest suffix of `text` that is a proper prefix of `marker` (text that may still become it).
size_t partial_marker(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n) {
    if (marker.starts_with(text.substr(text.size() - n))) return n;
  }
  return 0;
}

// hxrt's system turn for a template that does not render tools (Hermes format: parse_hermes reads the answer).
std::string tool_prompt(const json& tools) {
  std::string out =
      "You can call functions to answer. Their signatures, one JSON object a line, are inside <tools></tools>:\n"
      "<tools>\n";
  for (const json& tool : tools) out += tool.dump() + "\n";
  out +=
      "</tools>\n"
      "To call one, answer with a JSON object naming it and giving its arguments, inside <tool_call></tool_call>:\n"
      "<tool_call>\n{\"name\": <function name>, \"arguments\": <arguments object>}\n</tool_call>\n"
      "Results come back inside <tool_response></tool_response>.";
  return out;
}

std::string hermes_block(const std::string& name, const std::string& arguments) {
  return fmt::format("{}\n{{\"name\": {}, \"arguments\": {}}}\n{}", kOpen, json(name).dump(), arguments, kClose);
}

}  // namespace

std::string_view tool_call_format_name(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes: return "hermes";
    case ToolCallFormat::kLlama3: return "llama3";
    case ToolCallFormat::kMistral: return "mistral";
  }
  return "?";
}

ToolCallStyle tool_call_style(const Tokenizer& tokenizer) {
  const std::vector<ChatMessage> chat = {ChatMessage{.role = "user", .content = "hello"}};
  const std::string tools = json::array({json{{"type", "function"},
                                              {"function", {{"name", kProbeName},
                                                            {"description", "probe"},
                                                            {"parameters", {{"type", "object"},
                                                                            {"properties", json::object()}}}}}}})
                                .dump();
  const Result<std::string> rendered = tokenizer.apply_chat_template(chat, true, {.tools_json = tools});
  ToolCallStyle style;
  style.template_renders_tools = rendered.ok() && rendered->find(kProbeName) != std::string::npos;
  if (!style.template_renders_tools) return style;
  const std::string& source = tokenizer.chat_template();
  if (source.find(kMistralTag) != std::string::npos) {
    style.format = ToolCallFormat::kMistral;
  } else if (source.find(kOpen) == std::string::npos && source.find("<|start_header_id|>") != std::string::npos) {
    style.format = ToolCallFormat::kLlama3;
  }
  return style;
}

Status validate_tools(std::string_view tools_json) {
  const json tools = parse_json(tools_json);
  if (!tools.is_array()) return invalid_argument("'tools' must be an array of tool definitions");
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    if (!t.is_object() || !t.contains("type") || t["type"] != "function" || !t.contains("function") ||
        !t["function"].is_object()) {
      return invalid_argument("tools[{}] must be {{\"type\": \"function\", \"function\": {{...}}}}", i);
    }
    const json& f = t["function"];
    if (!f.contains("name") || !f["name"].is_string() || !valid_function_name(f["name"].get<std::string>())) {
      return invalid_argument("tools[{}].function.name must be 1 to 64 letters, digits, '_' or '-'", i);
    }
    if (f.contains("description") && !f["description"].is_string() && !f["description"].is_null()) {
      return invalid_argument("tools[{}].function.description must be a string", i);
    }
    if (f.contains("parameters") && !f["parameters"].is_object() && !f["parameters"].is_null()) {
      return invalid_argument("tools[{}].function.parameters must be a JSON Schema object", i);
    }
  }
  return ok_status();
}

Result<std::string> apply_chat_template_with_tools(const Tokenizer& tokenizer, const ToolCallStyle& style,
                                                   std::span<const ChatMessage> messages, std::string_view tools_json) {
  if (style.template_renders_tools) {
    return tokenizer.apply_chat_template(messages, true, {.tools_json = std::string(tools_json)});
  }
  // Note the rewrite (header): tools in a system turn, calls and results as text any template prints.
  std::vector<ChatMessage> chat;
  if (!tools_json.empty()) {
    const json tools = parse_json(tools_json);
    if (!tools.is_array()) return invalid_argument("tools is not a JSON array");
    if (!tools.empty()) {
      std::string prompt = tool_prompt(tools);
      if (!messages.empty() && messages.front().role == "system") {
        prompt = messages.front().content + "\n\n" + prompt;
        messages = messages.subspan(1);
      }
      chat.push_back(ChatMessage{.role = "system", .content = std::move(prompt)});
    }
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "tool") {
      std::string text = fmt::format("<tool_response>\n{}\n</tool_response>", m.content);
      if (!chat.empty() && chat.back().role == "user" && i > 0 && messages[i - 1].role == "tool") {
        chat.back().content += "\n" + text;  // consecutive results: one user turn
      } else {
        chat.push_back(ChatMessage{.role = "user", .content = std::move(text)});
      }
      continue;
    }
    ChatMessage copy{.role = m.role, .content = m.content, .name = m.name};
    if (!m.tool_calls_json.empty()) {
      const json calls = parse_json(m.tool_calls_json);
      if (!calls.is_array()) return invalid_argument("messages[{}].tool_calls is not a JSON array", i);
      for (const json& c : calls) {
        if (!c.is_object() || !c.contains("function") || !c["function"].is_object() ||
            !c["function"].contains("name") || !c["function"]["name"].is_string()) {
          return invalid_argument("messages[{}].tool_calls holds a call without function.name", i);
        }
        const json& f = c["function"];
        std::string arguments = "{}";
        if (f.contains("arguments")) {
          arguments = f["arguments"].is_string() ? f["arguments"].get<std::string>() : f["arguments"].dump();
        }
        if (!copy.content.empty()) copy.content += "\n";
        copy.content += hermes_block(f["name"].get<std::string>(), arguments);
      }
    }
    chat.push_back(std::move(copy));
  }
  return tokenizer.apply_chat_template(chat, true);
}

ToolCallAnswer parse_tool_calls(ToolCallFormat format, std::string_view text) {
  switch (format) {
    case ToolCallFormat::kHermes: return parse_hermes(text);
    case ToolCallFormat::kLlama3: return parse_llama3(text);
    case ToolCallFormat::kMistral: return parse_mistral(text);
  }
  return ToolCallAnswer{.content = std::string(text)};
}

std::string ToolCallStream::push(std::string_view text) {
  if (in_call_) {
    held_ += text;
    return "";
  }
  if (decided_) return std::string(text);
  held_ += text;
  if (format_ == ToolCallFormat::kHermes) {
    if (const size_t open = held_.find(kOpen); open != std::string::npos) {
      std::string out = held_.substr(0, open);
      held_.erase(0, open);
      in_call_ = true;
      return out;
    }
    const size_t keep = partial_marker(held_, kOpen);
    std::string out = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
  }
  // kLlama3 / kMistral: the answer's start decides; whitespace decides nothing yet.
  const std::string_view start = trim(held_);
  if (start.empty()) return "";
  const std::string_view tag = format_ == ToolCallFormat::kLlama3 ? kPythonTag : kMistralTag;
  const char bracket = format_ == ToolCallFormat::kLlama3 ? '{' : '[';
  if (start.front() == bracket || start.starts_with(tag)) {
    in_call_ = true;
    return "";
  }
  if (tag.starts_with(start)) return "";  // may still become the tag
  decided_ = true;
  return std::exchange(held_, std::string());
}

ToolCallAnswer ToolCallStream::finish() {
  if (!in_call_) return ToolCallAnswer{.content = std::exchange(held_, std::string())};
  return parse_tool_calls(format_, std::exchange(held_, std::string()));
}

Result<std::string> tool_call_grammar(ToolCallFormat format, std::string_view tools_json,
                                      std::string_view function_name, bool parallel) {
  HXRT_RETURN_IF_ERROR(validate_tools(tools_json));
  const json tools = parse_json(tools_json);
  const char* argument_key = format == ToolCallFormat::kLlama3 ? "parameters" : "arguments";
  json alternatives = json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& f = tools[i]["function"];
    const std::string name = f["name"].get<std::string>();
    if (!function_name.empty() && name != function_name) continue;
    const json parameters = f.contains("parameters") && f["parameters"].is_object()
                                ? f["parameters"]
                                : json{{"type", "object"}, {"properties", json::object()}};
    if (Result<std::string> alone = json_schema_to_gbnf(parameters.dump()); !alone.ok()) {
      return invalid_argument("tools[{}].function.parameters ('{}') cannot constrain a call: {}", i, name,
                              alone.status().message());
    }
    alternatives.push_back(json{{"type", "object"},
                                {"properties", {{"name", {{"const", name}}}, {argument_key, parameters}}},
                                {"required", {"name", argument_key}}});
  }
  if (alternatives.empty()) {
    if (function_name.empty()) return invalid_argument("'tools' is empty: no function can be called");
    return invalid_argument("tool_choice names function '{}', which 'tools' does not define", function_name);
  }
  const json schema = alternatives.size() == 1 ? alternatives[0] : json{{"anyOf", alternatives}};
  HXRT_ASSIGN_OR_RETURN(std::string call, json_schema_to_gbnf(schema.dump()));
  // json_schema_to_gbnf's root becomes rule "tool-call" (its other rules are r<N>, d<N> and the j* primitives).
  constexpr std::string_view kRoot = "root ::= ";
  if (!call.starts_with(kRoot)) return internal_error("json_schema_to_gbnf's output does not start with its root");
  call.replace(0, kRoot.size(), "tool-call ::= ");
  const int more = parallel ? kMaxParallelToolCalls - 1 : 0;
  std::string root;
  switch (format) {
    case ToolCallFormat::kHermes:
      root = "root ::= one-call";
      if (more > 0) root += fmt::format(" ( \"\\n\" one-call ){{0,{}}}", more);
      root += "\none-call ::= \"<tool_call>\\n\" tool-call \"\\n</tool_call>\"\n";
      break;
    case ToolCallFormat::kLlama3:  // one call a message (the template's rule)
      root = "root ::= tool-call\n";
      break;
    case ToolCallFormat::kMistral:  // the [TOOL_CALLS] control token renders as no text: the array alone
      root = "root ::= \"[\" tool-call";
      if (more > 0) root += fmt::format(" ( \",\" tool-call ){{0,{}}}", more);
      root += " \"]\"\n";
      break;
  }
  return root + call;
}

}  // namespace hxrt::llm
