#include "serve/request.h"

#include <charconv>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace hxrt::serve {
namespace {

using json = nlohmann::ordered_json;  // schemas and tools keep their keys' order (properties are generated in it)

HttpError bad_field(const std::string& param, std::string message) {
  return HttpError{.status = 400, .message = std::move(message), .param = param};
}

bool present(const json& body, const char* key) { return body.contains(key) && !body[key].is_null(); }

// A number field within [lo, hi] (finite); nullopt when it is fine or absent.
std::optional<HttpError> read_number(const json& body, const char* key, double lo, double hi, float* field) {
  if (!present(body, key)) return std::nullopt;
  if (!body[key].is_number() || !std::isfinite(body[key].get<double>()) || body[key].get<double>() < lo ||
      body[key].get<double>() > hi) {
    return bad_field(key, fmt::format("'{}' must be a number in [{}, {}]", key, lo, hi));
  }
  *field = body[key].get<float>();
  return std::nullopt;
}

// Fields that would change the output and that hxrt does not honour: a 400 naming each, never ignored.
std::optional<HttpError> refuse_unserved(const json& body) {
  if (present(body, "response_format")) {
    const json& f = body["response_format"];
    const bool schema = f.is_object() && f.contains("type") && f["type"] == "json_schema";
    if (!f.is_object() || !f.contains("type") ||
        (f["type"] != "text" && f["type"] != "json_object" && !schema) ||
        (schema && (!f.contains("json_schema") || !f["json_schema"].is_object() ||
                    !f["json_schema"].contains("schema")))) {
      return bad_field("response_format",
                       "'response_format' must be {\"type\": \"text\"}, {\"type\": \"json_object\"} or "
                       "{\"type\": \"json_schema\", \"json_schema\": {\"name\": ..., \"schema\": {...}}}");
    }
  }
  if (present(body, "suffix") && !(body["suffix"].is_string() && body["suffix"].get<std::string>().empty())) {
    return bad_field("suffix", "'suffix' is not supported");
  }
  if (present(body, "best_of") && (!body["best_of"].is_number_integer() || body["best_of"].get<int64_t>() != 1)) {
    return bad_field("best_of", "only best_of = 1 is supported");
  }
  for (const char* key : {"functions", "function_call", "audio", "web_search_options"}) {
    if (present(body, key)) return bad_field(key, fmt::format("'{}' is not supported", key));
  }
  if (present(body, "modalities") && body["modalities"] != json::array({"text"})) {
    return bad_field("modalities", "only 'modalities': [\"text\"] is supported");
  }
  return std::nullopt;
}

// logit_bias: {"token id": bias in [-100, 100]}, ids within the vocabulary, at most kMaxLogitBias entries.
std::optional<HttpError> read_logit_bias(const json& body, int vocab_size, CompletionRequest* out) {
  if (!present(body, "logit_bias")) return std::nullopt;
  const json& bias = body["logit_bias"];
  if (!bias.is_object() || bias.size() > static_cast<size_t>(kMaxLogitBias)) {
    return bad_field("logit_bias", fmt::format("'logit_bias' must be an object of at most {} token ids", kMaxLogitBias));
  }
  for (const auto& [key, value] : bias.items()) {
    int64_t token = -1;
    const auto [end, error] = std::from_chars(key.data(), key.data() + key.size(), token);
    if (error != std::errc() || end != key.data() + key.size() || token < 0 || token >= vocab_size) {
      return bad_field("logit_bias", fmt::format("'logit_bias' key '{}' is not a token id in [0, {})", key, vocab_size));
    }
    if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < -100.0 ||
        value.get<double>() > 100.0) {
      return bad_field("logit_bias", fmt::format("'logit_bias' of token {} must be a number in [-100, 100]", key));
    }
    out->sampling.logit_bias.emplace_back(static_cast<int32_t>(token), value.get<float>());
  }
  return std::nullopt;
}

// logprobs: chat's boolean `logprobs` with `top_logprobs`, or completions' integer `logprobs`.
std::optional<HttpError> read_logprobs(const json& body, bool chat, CompletionRequest* out) {
  const int top_max = llm::kMaxTopLogprobs;
  if (chat) {
    bool wanted = false;
    if (present(body, "logprobs")) {
      if (!body["logprobs"].is_boolean()) return bad_field("logprobs", "'logprobs' must be a boolean");
      wanted = body["logprobs"].get<bool>();
    }
    int top = 0;
    if (present(body, "top_logprobs")) {
      const json& t = body["top_logprobs"];
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > top_max) {
        return bad_field("top_logprobs", fmt::format("'top_logprobs' must be an integer in [0, {}]", top_max));
      }
      if (!wanted) return bad_field("top_logprobs", "'top_logprobs' needs 'logprobs': true");
      top = t.get<int>();
    }
    out->logprobs = wanted ? top : -1;
    return std::nullopt;
  }
  if (present(body, "logprobs")) {
    const json& l = body["logprobs"];
    if (!l.is_number_integer() || l.get<int64_t>() < 0 || l.get<int64_t>() > top_max) {
      return bad_field("logprobs", fmt::format("'logprobs' must be an integer in [0, {}]", top_max));
    }
    out->logprobs = l.get<int>();
  }
  return std::nullopt;
}

std::optional<HttpError> read_sampling(const json& body, CompletionRequest* out) {
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    if (!present(body, key)) continue;
    if (!body[key].is_number_integer() || body[key].get<int64_t>() < 0 || body[key].get<int64_t>() > kMaxTokensLimit) {
      return bad_field(key, fmt::format("'{}' must be an integer in [0, {}]", key, kMaxTokensLimit));
    }
    out->max_tokens = body[key].get<int>();
  }
  out->sampling.temperature = 1.0f;  // OpenAI's default
  if (auto e = read_number(body, "temperature", 0.0, 2.0, &out->sampling.temperature)) return e;
  if (auto e = read_number(body, "top_p", 0.0, 1.0, &out->sampling.top_p)) return e;
  if (out->sampling.top_p <= 0.0f) return bad_field("top_p", "'top_p' must be greater than 0");
  if (auto e = read_number(body, "min_p", 0.0, 1.0, &out->sampling.min_p)) return e;
  if (auto e = read_number(body, "repetition_penalty", 0.01, 10.0, &out->sampling.repetition_penalty)) return e;
  if (present(body, "top_k")) {
    if (!body["top_k"].is_number_integer() || body["top_k"].get<int64_t>() < 0 || body["top_k"].get<int64_t>() > 1 << 20) {
      return bad_field("top_k", "'top_k' must be a non-negative integer");
    }
    out->sampling.top_k = body["top_k"].get<int>();
  }
  if (present(body, "seed")) {
    if (!body["seed"].is_number_integer()) return bad_field("seed", "'seed' must be an integer");
    out->sampling.seed = body["seed"].is_number_unsigned() ? body["seed"].get<uint64_t>()
                                                          : static_cast<uint64_t>(body["seed"].get<int64_t>());
  }
  if (auto e = read_number(body, "presence_penalty", -2.0, 2.0, &out->sampling.presence_penalty)) return e;
  if (auto e = read_number(body, "frequency_penalty", -2.0, 2.0, &out->sampling.frequency_penalty)) return e;
  if (present(body, "n")) {
    if (!body["n"].is_number_integer() || body["n"].get<int64_t>() < 1 || body["n"].get<int64_t>() > kMaxChoices) {
      return bad_field("n", fmt::format("'n' must be an integer in [1, {}]", kMaxChoices));
    }
    out->n = body["n"].get<int>();
  }
  if (auto e = refuse_unserved(body)) return e;
  if (present(body, "stop")) {
    const json& stop = body["stop"];
    if (stop.is_string()) {
      out->stops.push_back(stop.get<std::string>());
    } else if (stop.is_array() && stop.size() <= kMaxStopStrings) {
      for (const json& s : stop) {
        if (!s.is_string()) return bad_field("stop", "'stop' must be a string or an array of strings");
        out->stops.push_back(s.get<std::string>());
      }
    } else {
      return bad_field("stop", fmt::format("'stop' must be a string or an array of at most {} strings", kMaxStopStrings));
    }
    std::erase_if(out->stops, [](const std::string& s) { return s.empty(); });
  }
  for (auto [key, field] : {std::pair{"stream", &out->stream}, std::pair{"ignore_eos", &out->ignore_eos}}) {
    if (!present(body, key)) continue;
    if (!body[key].is_boolean()) return bad_field(key, fmt::format("'{}' must be a boolean", key));
    *field = body[key].get<bool>();
  }
  if (present(body, "stream_options")) {
    const json& o = body["stream_options"];
    if (!o.is_object()) return bad_field("stream_options", "'stream_options' must be an object");
    if (present(o, "include_usage")) {
      if (!o["include_usage"].is_boolean()) return bad_field("stream_options", "'include_usage' must be a boolean");
      out->include_usage = o["include_usage"].get<bool>();
    }
  }
  return std::nullopt;  // within SamplingParams::validate's ranges by the checks above
}

// Speculative decoding per request, with llama-server's key: "speculative.n_max" (draft tokens a step, 0 = off), and
// hxrt's "speculative.ngram_min" / "speculative.ngram_max" (the prompt-lookup suffix lengths).
std::optional<HttpError> read_speculative(const json& body, CompletionRequest* out) {
  llm::SpeculativeOptions options;
  bool any = false;
  for (const auto& [key, field, low, high] : {std::tuple{"speculative.n_max", &options.draft_max, 0, 64},
                                              std::tuple{"speculative.ngram_min", &options.ngram_min, 1, 16},
                                              std::tuple{"speculative.ngram_max", &options.ngram_max, 1, 16}}) {
    if (!present(body, key)) continue;
    const json& v = body[key];
    if (!v.is_number_integer() || v.get<int64_t>() < low || v.get<int64_t>() > high) {
      return bad_field(key, fmt::format("'{}' must be an integer in [{}, {}]", key, low, high));
    }
    *field = v.get<int>();
    any = true;
  }
  if (!any) return std::nullopt;
  if (options.ngram_min > options.ngram_max) {
    return bad_field("speculative.ngram_min", "'speculative.ngram_min' must not exceed 'speculative.ngram_max'");
  }
  out->speculative = options;
  return std::nullopt;
}

// response_format {"type": "json_object"} and llama-server's "grammar" (GBNF text, compiled by the server).
std::optional<HttpError> read_grammar(const json& body, CompletionRequest* out) {
  const json* format = present(body, "response_format") ? &body["response_format"] : nullptr;
  out->json_object = format != nullptr && (*format)["type"] == "json_object";
  if (format != nullptr && (*format)["type"] == "json_schema") {
    out->json_schema = (*format)["json_schema"]["schema"].dump();
    out->json_schema_param = "response_format";
  }
  if (present(body, "json_schema")) {  // llama-server's field: the schema itself
    if (!body["json_schema"].is_object() && !body["json_schema"].is_boolean()) {
      return bad_field("json_schema", "'json_schema' must be a JSON Schema object");
    }
    if (out->json_object || !out->json_schema.empty()) {
      return bad_field("json_schema", "'json_schema' and a json response_format are exclusive");
    }
    out->json_schema = body["json_schema"].dump();
    out->json_schema_param = "json_schema";
  }
  if (!present(body, "grammar")) return std::nullopt;
  if (!body["grammar"].is_string()) return bad_field("grammar", "'grammar' must be GBNF text");
  if (out->json_object || !out->json_schema.empty()) {
    return bad_field("grammar", "'grammar' and a JSON response_format or json_schema are exclusive");
  }
  out->grammar = body["grammar"].get<std::string>();
  return std::nullopt;
}

// tool_choice: "auto" (the default), "none", "required" or {"type": "function", "function": {"name": ...}} (the
// server checks the name against `tools`); parallel_tool_calls: a boolean. Chat only; a forced call needs tools and
// is a grammar of its own, so it excludes response_format's and "grammar".
std::optional<HttpError> read_tool_choice(const json& body, CompletionRequest* out) {
  if (present(body, "parallel_tool_calls")) {
    if (!body["parallel_tool_calls"].is_boolean()) {
      return bad_field("parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
    }
    out->parallel_tool_calls = body["parallel_tool_calls"].get<bool>();
  }
  if (!present(body, "tool_choice")) return std::nullopt;
  const json& c = body["tool_choice"];
  if (c.is_string() && (c == "auto" || c == "none" || c == "required")) {
    out->tool_choice = c == "auto" ? ToolChoice::kAuto : c == "none" ? ToolChoice::kNone : ToolChoice::kRequired;
  } else if (c.is_object() && c.contains("type") && c["type"] == "function" && c.contains("function") &&
             c["function"].is_object() && c["function"].contains("name") && c["function"]["name"].is_string()) {
    out->tool_choice = ToolChoice::kFunction;
    out->tool_choice_function = c["function"]["name"].get<std::string>();
  } else {
    return bad_field("tool_choice",
                     "'tool_choice' must be \"auto\", \"none\", \"required\" or "
                     "{\"type\": \"function\", \"function\": {\"name\": ...}}");
  }
  const bool forced = out->tool_choice == ToolChoice::kRequired || out->tool_choice == ToolChoice::kFunction;
  if (forced && out->tools_json.empty()) return bad_field("tool_choice", "a forced 'tool_choice' needs 'tools'");
  if (forced && (out->json_object || !out->json_schema.empty() || !out->grammar.empty())) {
    return bad_field("tool_choice",
                     "a forced 'tool_choice' and a JSON response_format, json_schema or grammar are exclusive");
  }
  return std::nullopt;
}

std::optional<HttpError> read_messages(const json& body, CompletionRequest* out) {
  if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty()) {
    return bad_field("messages", "'messages' must be a non-empty array");
  }
  for (size_t i = 0; i < body["messages"].size(); ++i) {
    const json& m = body["messages"][i];
    const std::string param = fmt::format("messages[{}]", i);
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      return bad_field(param, fmt::format("'{}' must be an object with a string 'role'", param));
    }
    std::string content;
    if (m.contains("content") && m["content"].is_string()) {
      content = m["content"].get<std::string>();
    } else if (m.contains("content") && m["content"].is_array()) {
      for (const json& part : m["content"]) {  // [{"type": "text", "text": "..."}]
        if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") ||
            !part["text"].is_string()) {
          return bad_field(param, fmt::format("'{}.content' parts must be text parts", param));
        }
        content += part["text"].get<std::string>();
      }
    } else if (m.contains("content") && !m["content"].is_null()) {
      return bad_field(param, fmt::format("'{}.content' must be a string or an array of text parts", param));
    }
    std::string role = m["role"].get<std::string>();
    if (role == "developer") role = "system";  // OpenAI's newer name for the system turn; templates know "system"
    if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
      return bad_field(param + ".role", fmt::format("'{}.role' must be \"system\", \"developer\", \"user\", "
                                                    "\"assistant\" or \"tool\", not \"{}\"", param, role));
    }
    llm::ChatMessage message{.role = std::move(role), .content = std::move(content)};
    if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
      if (!m["tool_calls"].is_array()) return bad_field(param, fmt::format("'{}.tool_calls' must be an array", param));
      message.tool_calls_json = m["tool_calls"].dump();
    }
    for (const auto& [key, field] : {std::pair{"tool_call_id", &message.tool_call_id}, std::pair{"name", &message.name}}) {
      if (!m.contains(key) || m[key].is_null()) continue;
      if (!m[key].is_string()) return bad_field(param, fmt::format("'{}.{}' must be a string", param, key));
      *field = m[key].get<std::string>();
    }
    out->messages.push_back(std::move(message));
  }
  if (body.contains("tools") && !body["tools"].is_null()) {
    if (!body["tools"].is_array()) return bad_field("tools", "'tools' must be an array of tool definitions");
    if (!body["tools"].empty()) out->tools_json = body["tools"].dump();
  }
  return read_tool_choice(body, out);
}

std::optional<HttpError> read_prompt(const json& body, int vocab_size, CompletionRequest* out) {
  if (!body.contains("prompt")) return bad_field("prompt", "'prompt' is required");
  const json* prompt = &body["prompt"];
  if (prompt->is_array() && prompt->size() == 1 && (*prompt)[0].is_string()) prompt = &(*prompt)[0];
  if (prompt->is_string()) {
    out->prompt = prompt->get<std::string>();
    if (out->prompt.empty()) return bad_field("prompt", "'prompt' is empty");
    return std::nullopt;
  }
  if (prompt->is_array() && !prompt->empty()) {  // token ids
    std::vector<int32_t> tokens;
    for (const json& t : *prompt) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= vocab_size) {
        return bad_field("prompt", fmt::format("'prompt' token ids must be integers in [0, {})", vocab_size));
      }
      tokens.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
    out->prompt_tokens = std::move(tokens);
    return std::nullopt;
  }
  return bad_field("prompt", "'prompt' must be a string, one string in an array, or an array of token ids");
}

}  // namespace

std::string error_json(const HttpError& e) {
  return json{{"error",
               {{"message", e.message},
                {"type", e.type},
                {"param", e.param.empty() ? json(nullptr) : json(e.param)},
                {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}}
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

std::variant<CompletionRequest, HttpError> parse_request(std::string_view body, bool chat, int default_max_tokens,
                                                         int vocab_size) {
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return bad_field("", "the body is not valid JSON");
  if (!parsed.is_object()) return bad_field("", "the body must be a JSON object");
  CompletionRequest request;
  request.chat = chat;
  request.max_tokens = default_max_tokens;
  try {
    if (auto e = read_sampling(parsed, &request)) return *e;
    if (auto e = read_logprobs(parsed, chat, &request)) return *e;
    if (auto e = read_logit_bias(parsed, vocab_size, &request)) return *e;
    if (auto e = read_speculative(parsed, &request)) return *e;
    if (auto e = read_grammar(parsed, &request)) return *e;
    if (present(parsed, "echo")) {  // completions: the prompt in front of the text (and its logprobs)
      if (!parsed["echo"].is_boolean() || (chat && parsed["echo"].get<bool>())) {
        return bad_field("echo", chat ? "'echo' is a completions field" : "'echo' must be a boolean");
      }
      request.echo = parsed["echo"].get<bool>();
    }
    if (auto e = chat ? read_messages(parsed, &request) : read_prompt(parsed, vocab_size, &request)) return *e;
  } catch (const json::exception& e) {  // a value that passed its type check but not a conversion
    return bad_field("", fmt::format("a field has a value hxrt cannot read: {}", e.what()));
  }
  return request;
}

std::variant<EmbeddingRequest, HttpError> parse_embedding_request(std::string_view body, int vocab_size) {
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return bad_field("", "the body is not valid JSON");
  if (!parsed.is_object()) return bad_field("", "the body must be a JSON object");
  EmbeddingRequest request;
  if (!present(parsed, "input")) return bad_field("input", "'input' is required");
  const json& input = parsed["input"];
  const auto token_ids = [&](const json& array) -> std::optional<std::vector<int32_t>> {
    std::vector<int32_t> tokens;
    for (const json& t : array) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= vocab_size) return std::nullopt;
      tokens.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
    return tokens;
  };
  const std::string bad_input =
      fmt::format("'input' must be a non-empty string, an array of at most {} non-empty strings, an array of token ids "
                  "in [0, {}), or an array of such arrays", kMaxEmbeddingInputs, vocab_size);
  if (input.is_string()) {
    request.inputs.emplace_back(input.get<std::string>());
  } else if (input.is_array() && !input.empty() && input.size() <= kMaxEmbeddingInputs) {
    if (input[0].is_number()) {  // one prompt of token ids
      std::optional<std::vector<int32_t>> tokens = token_ids(input);
      if (!tokens) return bad_field("input", bad_input);
      request.inputs.emplace_back(std::move(*tokens));
    } else {
      for (const json& item : input) {
        if (item.is_string()) {
          request.inputs.emplace_back(item.get<std::string>());
        } else if (item.is_array()) {
          std::optional<std::vector<int32_t>> tokens = token_ids(item);
          if (!tokens) return bad_field("input", bad_input);
          request.inputs.emplace_back(std::move(*tokens));
        } else {
          return bad_field("input", bad_input);
        }
      }
    }
  } else {
    return bad_field("input", bad_input);
  }
  for (const auto& item : request.inputs) {
    const bool empty = std::visit([](const auto& v) { return v.empty(); }, item);
    if (empty) return bad_field("input", bad_input);
  }
  if (present(parsed, "encoding_format")) {
    const json& format = parsed["encoding_format"];
    if (!format.is_string() || (format != "float" && format != "base64")) {
      return bad_field("encoding_format", "'encoding_format' must be \"float\" or \"base64\"");
    }
    request.base64 = format == "base64";
  }
  if (present(parsed, "dimensions")) {
    if (!parsed["dimensions"].is_number_integer()) return bad_field("dimensions", "'dimensions' must be an integer");
    request.dimensions = parsed["dimensions"].get<int64_t>();
  }
  return request;
}

std::string base64_encode(std::string_view bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t v = 0;
    for (size_t j = 0; j < 3; ++j) {
      v = v << 8 | (j < n ? static_cast<uint8_t>(bytes[i + j]) : 0u);
    }
    for (size_t j = 0; j < 4; ++j) out.push_back(j <= n ? kAlphabet[(v >> (18 - 6 * j)) & 63] : '=');
  }
  return out;
}

}  // namespace hxrt::serve
