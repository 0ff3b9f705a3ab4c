// `hxrt inspect --model FILE.gguf`: what hxrt makes of a GGUF model without running it — the file, the family and
// its configuration (layers, heads, windows, softcaps), the tensor types, the tokenizer and its end-of-generation
// tokens, and the chat template in use (the file's own, its family's default, or --chat-template) with its source
// and an example conversation rendered by it — as text or JSON.
//
// Thread-safety: the functions are reentrant; they only read their arguments.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "hxrt/base/status.h"

namespace hxrt::tools {

struct ModelReportOptions {
  std::string path;           // the GGUF file
  std::string chat_template;  // resolved --chat-template (Jinja source or a built-in name); "" for the model's
};

// The report as JSON ("file", "architecture", "config" or "config_error", "tensor_types", "tokenizer",
// "chat_template"). Fails only when the file is not a GGUF file or its tokenizer cannot be read; a model hxrt
// cannot run still reports, with the reason in "config_error".
Result<nlohmann::ordered_json> gguf_model_json(const ModelReportOptions& options);
// The same report as text; ends with a newline.
std::string describe_gguf_model(const nlohmann::ordered_json& report);

}  // namespace hxrt::tools
