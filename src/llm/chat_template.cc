// Chat templates without a Jinja engine: the template is recognised by its markers and rendered natively.
//
// ChatML ("<|im_start|>{role}\n{content}<|im_end|>\n") is what llama.cpp's llm_chat_apply_template produces for
// LLM_CHAT_TEMPLATE_CHATML, detected the same way (the template contains "<|im_start|>"). Models such as SmolLM2
// and Qwen2.5 add a default system turn when the conversation does not open with one; their templates hold that
// turn as one string literal, which is found here (inside {{ }} / {% %} tags only) and inserted the way the
// template does: before the first message when it is not a system message, never for an empty conversation.
#include <string>
#include <string_view>
#include <vector>

#include "hxrt/llm/tokenizer.h"

namespace hxrt::llm {
namespace {

constexpr std::string_view kImStart = "<|im_start|>";
constexpr std::string_view kImEnd = "<|im_end|>";

// Reads a Jinja string literal starting at `*pos` (on the quote); appends its value to `out`. Returns false when it
// is not terminated.
bool read_string_literal(std::string_view text, size_t* pos, std::string* out) {
  const char quote = text[*pos];
  for (size_t i = *pos + 1; i < text.size(); ++i) {
    const char c = text[i];
    if (c == quote) {
      *pos = i + 1;
      return true;
    }
    if (c == '\\' && i + 1 < text.size()) {
      const char e = text[++i];
      switch (e) {
        case 'n': out->push_back('\n'); break;
        case 't': out->push_back('\t'); break;
        case 'r': out->push_back('\r'); break;
        default: out->push_back(e); break;  // \\ \' \" and anything else stand for themselves
      }
      continue;
    }
    out->push_back(c);
  }
  return false;
}

// Every string literal inside the template's {{ ... }} and {% ... %} tags, in order.
std::vector<std::string> string_literals(std::string_view tmpl) {
  std::vector<std::string> literals;
  size_t pos = 0;
  while (pos + 1 < tmpl.size()) {
    const size_t open = tmpl.find('{', pos);
    if (open == std::string_view::npos || open + 1 >= tmpl.size()) break;
    const char kind = tmpl[open + 1];
    if (kind == '#') {
      const size_t close = tmpl.find("#}", open + 2);
      if (close == std::string_view::npos) break;
      pos = close + 2;
      continue;
    }
    if (kind != '{' && kind != '%') {
      pos = open + 1;
      continue;
    }
    const std::string_view close = kind == '{' ? "}}" : "%}";
    size_t i = open + 2;
    while (i < tmpl.size() && tmpl.substr(i, 2) != close) {
      if (tmpl[i] == '\'' || tmpl[i] == '"') {
        std::string value;
        if (!read_string_literal(tmpl, &i, &value)) return literals;
        literals.push_back(std::move(value));
      } else {
        ++i;
      }
    }
    pos = i + 2;
  }
  return literals;
}

std::string chatml_default_system_turn(std::string_view tmpl) {
  const std::string opening = std::string(kImStart) + "system\n";
  const std::string closing = std::string(kImEnd) + "\n";
  for (std::string& literal : string_literals(tmpl)) {
    if (literal.size() >= opening.size() + closing.size() && literal.starts_with(opening) &&
        literal.ends_with(closing) && literal.find(kImStart, opening.size()) == std::string::npos) {
      return std::move(literal);
    }
  }
  return {};
}

std::string render_chatml(std::string_view default_system_turn, std::span<const ChatMessage> messages,
                          bool add_generation_prompt) {
  std::string out;
  if (!messages.empty() && !default_system_turn.empty() && messages.front().role != "system") {
    out += default_system_turn;
  }
  for (const ChatMessage& message : messages) {
    out += kImStart;
    out += message.role;
    out += '\n';
    out += message.content;
    out += kImEnd;
    out += '\n';
  }
  if (add_generation_prompt) {
    out += kImStart;
    out += "assistant\n";
  }
  return out;
}

}  // namespace

Result<std::string> apply_chat_template(std::string_view chat_template, std::span<const ChatMessage> messages,
                                        bool add_generation_prompt) {
  if (chat_template == "chatml") return render_chatml({}, messages, add_generation_prompt);
  if (chat_template.find(kImStart) != std::string_view::npos) {
    return render_chatml(chatml_default_system_turn(chat_template), messages, add_generation_prompt);
  }
  if (chat_template.empty()) return unimplemented("the model has no chat template");
  constexpr size_t kShown = 80;
  return unimplemented(
      "chat template not supported (only ChatML templates, containing \"<|im_start|>\", are rendered): '{}{}'",
      chat_template.substr(0, kShown), chat_template.size() > kShown ? "..." : "");
}

}  // namespace hxrt::llm
