// Request: the body of POST /v1/chat/completions or /v1/completions, parsed and checked before anything runs.
//
// Every field hxrt serves is read with its type and range checked; a bad one is an HttpError naming it (OpenAI's
// `param`), never an exception or a crash. Fields hxrt does not serve are refused when they would change the result
// (suffix, best_of > 1, the legacy functions) and ignored otherwise (user, metadata, store), as OpenAI's clients
// send some by default. The prompt
// stays text (or token ids) here: the server tokenizes it. Separate from the server so that the parser can be fuzzed
// alone (tests/fuzz/fuzz_serve_request.cc).
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "hxrt/llm/sampler.h"
#include "hxrt/llm/speculative.h"
#include "hxrt/llm/tokenizer.h"

namespace hxrt::serve {

// An answer other than 200, with OpenAI's error object.
struct HttpError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;
  std::string code;
};
// {"error": {"message", "type", "param", "code"}} as JSON text.
std::string error_json(const HttpError& error);

// OpenAI's tool_choice (docs/serve.md, "Tool calls").
enum class ToolChoice { kAuto, kNone, kRequired, kFunction };

struct CompletionRequest {
  bool chat = false;
  std::vector<llm::ChatMessage> messages;  // chat: at least one
  std::string tools_json;                  // chat: the request's `tools` array as JSON ("" for none or empty)
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::string tool_choice_function;        // kFunction: the function's name
  bool parallel_tool_calls = true;         // a forced call may be several
  std::string prompt;                      // completions: text, unless prompt_tokens is set
  std::optional<std::vector<int32_t>> prompt_tokens;
  int max_tokens = 16;
  llm::SamplingParams sampling;            // within SamplingParams::validate's ranges
  std::vector<std::string> stops;          // non-empty strings
  int n = 1;                               // choices, 1..kMaxChoices (Note [Forked choices] in llm/engine_outputs.cc)
  bool stream = false;
  bool include_usage = false;              // stream_options.include_usage
  bool ignore_eos = false;                 // llama-server's extension
  // -1: no logprobs; else every generated token's log-probability and this many alternatives (chat: logprobs
  // true and top_logprobs; completions: logprobs = the count), at most llm::kMaxTopLogprobs.
  int logprobs = -1;
  // llama-server's "speculative.n_max" (and hxrt's "speculative.ngram_min/max"); unset: the server's default.
  std::optional<llm::SpeculativeOptions> speculative;
  // Constrained output: response_format {"type": "json_object"}, or llama-server's "grammar" (GBNF text; the
  // server compiles it, a bad one is a 400 naming "grammar").
  bool json_object = false;
  std::string json_schema;  // response_format json_schema's "schema" (or llama-server's "json_schema"), as JSON text
  std::string json_schema_param;  // the field it came in: "response_format" or "json_schema"
  std::string grammar;
  // Completions' echo: the prompt's text in front of the answer, and with logprobs the prompt tokens' logprobs
  // (the first null), as OpenAI's legacy API and lm-evaluation-harness's loglikelihood requests use it.
  bool echo = false;
};

inline constexpr int kMaxStopStrings = 16;
inline constexpr int kMaxChoices = 16;  // n at most: llm::kMaxChoices (server.cc checks they agree)
inline constexpr int kMaxLogitBias = 300;  // OpenAI's bound
inline constexpr int kMaxTokensLimit = 1 << 20;

// `vocab_size` bounds token-id prompts. `default_max_tokens` applies when the body has none.
std::variant<CompletionRequest, HttpError> parse_request(std::string_view body, bool chat, int default_max_tokens,
                                                         int vocab_size);

// The body of POST /v1/embeddings: `input` as a string, an array of strings, an array of token ids or an array of
// such arrays (at most kMaxEmbeddingInputs, none empty); `encoding_format` "float" (default) or "base64" (the
// openai client's default: little-endian float32 bytes); `dimensions`, when given, must be the model's width
// (checked by the server). `model` and `user` are ignored.
struct EmbeddingRequest {
  std::vector<std::variant<std::string, std::vector<int32_t>>> inputs;
  bool base64 = false;
  std::optional<int64_t> dimensions;
};
inline constexpr int kMaxEmbeddingInputs = 256;
std::variant<EmbeddingRequest, HttpError> parse_embedding_request(std::string_view body, int vocab_size);

// RFC 4648 base64 of `bytes` (with padding).
std::string base64_encode(std::string_view bytes);

}  // namespace hxrt::serve
