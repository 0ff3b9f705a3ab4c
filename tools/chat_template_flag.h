// --chat-template FILE|NAME, shared by `hxrt generate`, `hxrt chat` and `hxrt serve`: a Jinja file overriding the
// model's own chat template, or the name of a built-in one (docs/llm.md, "Chat templates").
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "hxrt/base/status.h"

namespace hxrt::tools {

// Registers --chat-template on `cmd`, storing the argument in `*value`.
void add_chat_template_option(CLI::App* cmd, std::string* value);

// The template the flag names, for LlmOptions::chat_template: an existing file's contents, else a built-in
// template's name as it is; "" for "". NotFound when it is neither; Unavailable when the file cannot be read.
Result<std::string> resolve_chat_template_flag(const std::string& value);

}  // namespace hxrt::tools
