// Server: an OpenAI-compatible HTTP server over the LLM engine (`hxrt serve`; docs/serve.md).
//
//   POST /v1/chat/completions, POST /v1/completions   stream: true → server-sent events, OpenAI's chunk format,
//                                                      then "data: [DONE]"; false → one JSON object
//   GET  /v1/models, /health, /metrics (Prometheus text)
//
// Every request joins the engine's continuous batching (one scheduler thread drives the engine; HTTP handler
// threads wait on their request's text). A streaming client that disconnects cancels its sequence at the next
// token; a non-streaming one is detected while it waits (whitespace before the JSON body probes the connection).
// Bad JSON or fields → 400 with OpenAI's error object; a wrong API key → 401; more requests in flight than
// `parallel` running + `max_queue` waiting → 503; shutdown() drains: new requests get 503, the ones in flight finish.
//
// The HTTP parsing is cpp-httplib's (Debian's libcpp-httplib-dev).
//
// Thread-safety: thread-safe; shutdown() may be called from any thread (a signal-handling one).
#pragma once

#include <memory>
#include <string>

#include "hxrt/base/status.h"
#include "hxrt/llm/llm.h"

namespace hxrt::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;               // 0: any free port (bound_port() tells which)
  int max_queue = 64;            // requests waiting beyond the engine's max_sequences before 503
  std::string api_key;           // non-empty: /v1/* requires "Authorization: Bearer <api_key>"
  std::string model_id;          // the id /v1/models lists; "": the model file's name without .gguf
  int default_max_tokens = 256;  // chat completions without max_tokens (completions default to 16, as OpenAI)
  // POST /v1/embeddings pools the final hidden states so (the engine needs EngineOptions::embeddings; without it
  // the endpoint answers 501).
  llm::Pooling pooling = llm::Pooling::kMean;
};

class Server {
 public:
  // `llm` must outlive the server; its engine is driven only by the server from now on. Binds the socket:
  // Unavailable when the address is taken.
  static Result<std::unique_ptr<Server>> create(llm::Llm& llm, const ServerOptions& options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int bound_port() const;
  // Serves until shutdown(); returns its status.
  Status serve();
  // Stops taking requests (503), lets the ones in flight finish, then makes serve() return.
  void shutdown();

 private:
  struct Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hxrt::serve
