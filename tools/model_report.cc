#include "model_report.h"

#include <map>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hxrt/formats/gguf.h"
#include "hxrt/llm/model_cache.h"
#include "hxrt/llm/model_family.h"
#include "hxrt/llm/tokenizer.h"
#include "hxrt/llm/tool_calls.h"

namespace hxrt::tools {
namespace {

// The conversation the report renders: a system prompt, a finished exchange and a question awaiting the reply.
std::vector<llm::ChatMessage> example_chat() {
  return {{"system", "You are a helpful assistant."},
          {"user", "What is the capital of France?"},
          {"assistant", "Paris."},
          {"user", "And of Italy?"}};
}

nlohmann::ordered_json token_json(const llm::Tokenizer& tokenizer, llm::TokenId id) {
  if (id == llm::kNoToken) return nullptr;
  Result<std::string_view> text = tokenizer.token_text(id);
  return {{"id", id}, {"text", text.ok() ? std::string(*text) : std::string()}};
}

// Which template is in use and why, as llm::Tokenizer chose it (tokenizer_spec_from_gguf) or as the flag overrides.
std::string template_origin(const formats::GgufFile& file, const ModelReportOptions& options,
                            const llm::TokenizerSpec& spec) {
  if (!options.chat_template.empty()) {
    return llm::builtin_chat_template(options.chat_template).has_value()
               ? fmt::format("built-in '{}' (--chat-template)", options.chat_template)
               : "--chat-template file";
  }
  if (file.find("tokenizer.chat_template") != nullptr) return "the file's own (tokenizer.chat_template)";
  Result<std::string_view> arch = file.get_string("general.architecture");
  return fmt::format("built-in '{}', the default for {} (the file has none)", spec.chat_template,
                     arch.ok() ? *arch : "this architecture");
}

std::string token_text(const nlohmann::ordered_json& token) {
  if (token.is_null()) return "none";
  return fmt::format("{} '{}'", token["id"].get<int>(), token["text"].get<std::string>());
}

}  // namespace

Result<nlohmann::ordered_json> gguf_model_json(const ModelReportOptions& options) {
  HXRT_ASSIGN_OR_RETURN(const std::string path, llm::resolve_model(options.path));
  HXRT_ASSIGN_OR_RETURN(formats::GgufFile file, formats::GgufFile::open(path));
  nlohmann::ordered_json report;
  report["file"] = {{"path", path},
                    {"gguf_version", file.version()},
                    {"bytes", file.file_size()},
                    {"tensors", file.tensors().size()},
                    {"metadata_keys", file.metadata().size()}};
  Result<std::string_view> arch = file.get_string("general.architecture");
  report["architecture"] = arch.ok() ? nlohmann::ordered_json(std::string(*arch)) : nlohmann::ordered_json();
  if (Result<llm::ModelConfig> config = llm::ModelConfig::from_gguf(file); config.ok()) {
    report["config"] = config->to_string();
  } else {
    report["config_error"] = config.status().to_string();
  }
  std::map<std::string, size_t> types;
  for (const formats::GgufTensor& tensor : file.tensors()) ++types[formats::ggml_type_name(tensor.ggml_type)];
  report["tensor_types"] = types;

  HXRT_ASSIGN_OR_RETURN(llm::TokenizerSpec spec, llm::tokenizer_spec_from_gguf(file));
  const std::string origin = template_origin(file, options, spec);
  if (!options.chat_template.empty()) spec.chat_template = options.chat_template;
  HXRT_ASSIGN_OR_RETURN(std::unique_ptr<llm::Tokenizer> tokenizer, llm::Tokenizer::create(std::move(spec)));
  nlohmann::ordered_json end_of_generation = nlohmann::ordered_json::array();
  for (llm::TokenId id = 0; id < tokenizer->vocab_size(); ++id) {
    if (tokenizer->is_eog(id)) end_of_generation.push_back(token_json(*tokenizer, id));
  }
  report["tokenizer"] = {{"model", tokenizer->model() == llm::TokenizerModel::kBpe ? "bpe" : "spm"},
                         {"pre", tokenizer->pre()},
                         {"tokens", tokenizer->vocab_size()},
                         {"add_bos", tokenizer->add_bos()},
                         {"bos", token_json(*tokenizer, tokenizer->bos())},
                         {"eos", token_json(*tokenizer, tokenizer->eos())},
                         {"eot", token_json(*tokenizer, tokenizer->eot())},
                         {"end_of_generation", end_of_generation}};

  nlohmann::ordered_json chat = {{"origin", origin}, {"source", tokenizer->chat_template()}};
  if (Status parsed = tokenizer->chat_template_status(); !parsed.ok()) {
    chat["error"] = parsed.to_string();
  } else if (Result<std::string> rendered = tokenizer->apply_chat_template(example_chat(), true); rendered.ok()) {
    chat["example"] = *rendered;
  } else {
    chat["example_error"] = rendered.status().to_string();
  }
  // How tools reach the model (llm/tool_calls.h): the template's own format, or hxrt's Hermes system turn.
  const llm::ToolCallStyle tools = llm::tool_call_style(*tokenizer);
  chat["tool_calls"] = {{"format", std::string(llm::tool_call_format_name(tools.format))},
                        {"template_renders_tools", tools.template_renders_tools}};
  report["chat_template"] = chat;
  return report;
}

std::string describe_gguf_model(const nlohmann::ordered_json& report) {
  const nlohmann::ordered_json& file = report["file"];
  std::string out = fmt::format("GGUF model {}: version {}, {} tensors, {} metadata keys, {:.1f} MiB\n",
                                file["path"].get<std::string>(), file["gguf_version"].get<uint32_t>(),
                                file["tensors"].get<size_t>(), file["metadata_keys"].get<size_t>(),
                                static_cast<double>(file["bytes"].get<uint64_t>()) / (1024.0 * 1024.0));
  if (report.contains("config")) {
    out += fmt::format("model: {}\n", report["config"].get<std::string>());
  } else {
    out += fmt::format("model: hxrt cannot run it: {}\n", report["config_error"].get<std::string>());
  }
  std::vector<std::string> types;
  for (const auto& [name, count] : report["tensor_types"].items()) {
    types.push_back(fmt::format("{} {}", name, count.get<size_t>()));
  }
  out += fmt::format("tensor types: {}\n", fmt::join(types, ", "));
  const nlohmann::ordered_json& tok = report["tokenizer"];
  std::vector<std::string> eog;
  for (const nlohmann::ordered_json& token : tok["end_of_generation"]) eog.push_back(token_text(token));
  out += fmt::format("tokenizer: {} (pre '{}'), {} tokens; bos {}{}, eos {}, eot {}\n", tok["model"].get<std::string>(),
                     tok["pre"].get<std::string>(), tok["tokens"].get<int>(), token_text(tok["bos"]),
                     tok["add_bos"].get<bool>() ? " (added)" : "", token_text(tok["eos"]), token_text(tok["eot"]));
  out += fmt::format("generation stops at: {}\n", fmt::join(eog, ", "));
  const nlohmann::ordered_json& chat = report["chat_template"];
  out += fmt::format("chat template: {}\n", chat["origin"].get<std::string>());
  out += fmt::format("tool calls: {} format, {}\n", chat["tool_calls"]["format"].get<std::string>(),
                     chat["tool_calls"]["template_renders_tools"].get<bool>()
                         ? "tools rendered by the template"
                         : "the template ignores tools: hxrt lists them in a system turn");
  out += "---- template source ----\n" + chat["source"].get<std::string>();
  if (!out.ends_with('\n')) out += '\n';
  if (chat.contains("error")) {
    out += fmt::format("---- the template does not parse ----\n{}\n", chat["error"].get<std::string>());
  } else if (chat.contains("example_error")) {
    out += fmt::format("---- rendering the example failed ----\n{}\n", chat["example_error"].get<std::string>());
  } else {
    out += "---- rendered example (system, user, assistant, user; add_generation_prompt) ----\n" +
           chat["example"].get<std::string>();
    if (!out.ends_with('\n')) out += '\n';
  }
  return out;
}

}  // namespace hxrt::tools
