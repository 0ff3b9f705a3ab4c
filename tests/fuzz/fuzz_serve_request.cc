// The server's request parser (src/serve/request.h): arbitrary bytes as the body of POST /v1/chat/completions
// (first byte odd) or /v1/completions. Parsing answers a request or an HttpError, never crashes or throws; what it
// accepts is within range (max_tokens, sampling, non-empty stop strings, messages for a chat, a prompt for a
// completion, token ids inside the vocabulary); every error has a message and a 4xx status and renders as JSON.
#include <string>
#include <variant>

#include "fuzz/fuzz_target.h"
#include "serve/request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  constexpr int kVocab = 1000;
  const bool chat = (data[0] & 1) != 0;
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::variant<hxrt::serve::CompletionRequest, hxrt::serve::HttpError> parsed =
      hxrt::serve::parse_request(body, chat, 256, kVocab);
  if (const auto* e = std::get_if<hxrt::serve::HttpError>(&parsed)) {
    HXRT_FUZZ_ASSERT(e->status >= 400 && e->status < 500, "status %d", e->status);
    HXRT_FUZZ_ASSERT(!e->message.empty(), "an error without a message");
    HXRT_FUZZ_ASSERT(hxrt::serve::error_json(*e).find("\"error\"") != std::string::npos, "error JSON");
    return 0;
  }
  const auto& r = std::get<hxrt::serve::CompletionRequest>(parsed);
  HXRT_FUZZ_ASSERT(r.chat == chat, "endpoint");
  HXRT_FUZZ_ASSERT(r.max_tokens >= 0 && r.max_tokens <= hxrt::serve::kMaxTokensLimit, "max_tokens %d", r.max_tokens);
  const hxrt::llm::SamplingParams& s = r.sampling;
  HXRT_FUZZ_ASSERT(s.temperature >= 0.0f && s.temperature <= 2.0f, "temperature %f", s.temperature);
  HXRT_FUZZ_ASSERT(s.top_p > 0.0f && s.top_p <= 1.0f, "top_p %f", s.top_p);
  HXRT_FUZZ_ASSERT(s.min_p >= 0.0f && s.min_p <= 1.0f, "min_p %f", s.min_p);
  HXRT_FUZZ_ASSERT(s.repetition_penalty > 0.0f, "repetition_penalty %f", s.repetition_penalty);
  HXRT_FUZZ_ASSERT(s.top_k >= 0, "top_k %d", s.top_k);
  HXRT_FUZZ_ASSERT(r.stops.size() <= hxrt::serve::kMaxStopStrings, "%zu stop strings", r.stops.size());
  for (const std::string& stop : r.stops) HXRT_FUZZ_ASSERT(!stop.empty(), "an empty stop string");
  if (chat) {
    HXRT_FUZZ_ASSERT(!r.messages.empty(), "a chat without messages");
  } else if (r.prompt_tokens) {
    HXRT_FUZZ_ASSERT(!r.prompt_tokens->empty(), "an empty token prompt");
    for (int32_t t : *r.prompt_tokens) HXRT_FUZZ_ASSERT(t >= 0 && t < kVocab, "token %d", t);
  } else {
    HXRT_FUZZ_ASSERT(!r.prompt.empty(), "an empty prompt");
  }
  return 0;
}
