// Chat templates inside the llm layer: resolving a template (Jinja source or a built-in name) and rendering a chat.
#pragma once

#include <span>
#include <string_view>

#include "hxrt/llm/jinja.h"
#include "hxrt/llm/tokenizer.h"

namespace hxrt::llm::detail {

// Parses `chat_template`: Jinja source, or the name of a built-in template.
Result<jinja::Template> parse_chat_template(std::string_view chat_template);

// Renders `messages` (as the dicts transformers passes: role, content, tool_calls, tool_call_id, name) with
// add_generation_prompt, bos_token, eos_token and, when options.tools_json is set, tools.
Result<std::string> render_chat(const jinja::Template& chat_template, std::span<const ChatMessage> messages,
                                bool add_generation_prompt, std::string_view bos_token, std::string_view eos_token,
                                const ChatOptions& options);

}  // namespace hxrt::llm::detail
