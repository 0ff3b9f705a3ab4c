#include "chat_template_flag.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "hxrt/llm/tokenizer.h"

namespace hxrt::tools {

void add_chat_template_option(CLI::App* cmd, std::string* value) {
  cmd->add_option("--chat-template", *value,
                  "chat template to use instead of the model's: a Jinja file, or a built-in name (chatml, qwen, "
                  "llama3, llama2, mistral, gemma, phi3)");
}

Result<std::string> resolve_chat_template_flag(const std::string& value) {
  if (value.empty()) return std::string();
  std::error_code ec;
  if (std::filesystem::is_regular_file(value, ec)) {
    std::ifstream in(value, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in.good() && !in.eof()) return unavailable("--chat-template: cannot read '{}'", value);
    if (text.str().empty()) return invalid_argument("--chat-template: '{}' is empty", value);
    return text.str();
  }
  if (llm::builtin_chat_template(value).has_value()) return value;
  return not_found("--chat-template: '{}' is neither a file nor a built-in template (chatml, qwen, llama3, llama2, "
                   "mistral, gemma, phi3)",
                   value);
}

}  // namespace hxrt::tools
