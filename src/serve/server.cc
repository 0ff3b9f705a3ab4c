#include "hxrt/serve/server.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "serve/metrics.h"
#include "serve/scheduler.h"

namespace hxrt::serve {
namespace {

using nlohmann::json;

constexpr int kMaxStopStrings = 16;
constexpr auto kPollInterval = std::chrono::milliseconds(50);

// A request that cannot be served, with the HTTP status and OpenAI's error object.
struct HttpError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;
  std::string code;
};

json error_body(const HttpError& e) {
  return json{{"error",
               {{"message", e.message},
                {"type", e.type},
                {"param", e.param.empty() ? json(nullptr) : json(e.param)},
                {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
}

HttpError bad_field(const std::string& param, std::string message) {
  return HttpError{.status = 400, .message = std::move(message), .param = param};
}

// What both endpoints read from a request body.
struct Sampling {
  int max_tokens = 16;
  llm::SamplingParams params;
  std::vector<std::string> stops;
  bool stream = false;
  bool include_usage = false;
  bool ignore_eos = false;  // llama-server's extension
};

// Reads the fields common to /v1/completions and /v1/chat/completions; nullopt when they are fine.
std::optional<HttpError> read_sampling(const json& body, int default_max_tokens, Sampling* out) {
  out->max_tokens = default_max_tokens;
  out->params.temperature = 1.0f;  // OpenAI's default
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    if (!body.contains(key) || body[key].is_null()) continue;
    if (!body[key].is_number_integer() || body[key].get<int64_t>() < 0 || body[key].get<int64_t>() > 1 << 20) {
      return bad_field(key, fmt::format("'{}' must be a non-negative integer", key));
    }
    out->max_tokens = body[key].get<int>();
  }
  const auto number = [&](const char* key, double lo, double hi, float* field) -> std::optional<HttpError> {
    if (!body.contains(key) || body[key].is_null()) return std::nullopt;
    if (!body[key].is_number() || body[key].get<double>() < lo || body[key].get<double>() > hi) {
      return bad_field(key, fmt::format("'{}' must be a number in [{}, {}]", key, lo, hi));
    }
    *field = body[key].get<float>();
    return std::nullopt;
  };
  if (auto e = number("temperature", 0.0, 2.0, &out->params.temperature)) return e;
  if (auto e = number("top_p", 0.0, 1.0, &out->params.top_p)) return e;
  if (auto e = number("min_p", 0.0, 1.0, &out->params.min_p)) return e;
  if (auto e = number("repetition_penalty", 0.0, 10.0, &out->params.repetition_penalty)) return e;
  if (body.contains("top_p") && body["top_p"].is_number() && out->params.top_p <= 0.0f) {
    return bad_field("top_p", "'top_p' must be greater than 0");
  }
  if (body.contains("top_k") && !body["top_k"].is_null()) {
    if (!body["top_k"].is_number_integer() || body["top_k"].get<int64_t>() < 0) {
      return bad_field("top_k", "'top_k' must be a non-negative integer");
    }
    out->params.top_k = body["top_k"].get<int>();
  }
  if (body.contains("seed") && !body["seed"].is_null()) {
    if (!body["seed"].is_number_integer()) return bad_field("seed", "'seed' must be an integer");
    out->params.seed = static_cast<uint64_t>(body["seed"].get<int64_t>());
  }
  for (const char* key : {"presence_penalty", "frequency_penalty"}) {
    if (body.contains(key) && !body[key].is_null() && (!body[key].is_number() || body[key].get<double>() != 0.0)) {
      return bad_field(key, fmt::format("'{}' is not supported (use repetition_penalty)", key));
    }
  }
  if (body.contains("n") && !body["n"].is_null() && (!body["n"].is_number_integer() || body["n"].get<int64_t>() != 1)) {
    return bad_field("n", "only n = 1 is supported");
  }
  if (body.contains("stop") && !body["stop"].is_null()) {
    const json& stop = body["stop"];
    if (stop.is_string()) {
      out->stops.push_back(stop.get<std::string>());
    } else if (stop.is_array() && stop.size() <= kMaxStopStrings) {
      for (const json& s : stop) {
        if (!s.is_string()) return bad_field("stop", "'stop' must be a string or an array of strings");
        out->stops.push_back(s.get<std::string>());
      }
    } else {
      return bad_field("stop",
                       fmt::format("'stop' must be a string or an array of at most {} strings", kMaxStopStrings));
    }
    std::erase_if(out->stops, [](const std::string& s) { return s.empty(); });
  }
  if (body.contains("stream") && !body["stream"].is_null()) {
    if (!body["stream"].is_boolean()) return bad_field("stream", "'stream' must be a boolean");
    out->stream = body["stream"].get<bool>();
  }
  if (body.contains("ignore_eos") && !body["ignore_eos"].is_null()) {
    if (!body["ignore_eos"].is_boolean()) return bad_field("ignore_eos", "'ignore_eos' must be a boolean");
    out->ignore_eos = body["ignore_eos"].get<bool>();
  }
  if (body.contains("stream_options") && body["stream_options"].is_object()) {
    const json& o = body["stream_options"];
    out->include_usage =
        o.contains("include_usage") && o["include_usage"].is_boolean() && o["include_usage"].get<bool>();
  }
  Status valid = out->params.validate();
  if (!valid.ok()) return bad_field("", std::string(valid.message()));
  return std::nullopt;
}

std::string finish_reason(JobEnd end) {
  return end == JobEnd::kLength ? "length" : "stop";
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

struct Server::Impl {
  llm::Llm& llm;
  ServerOptions options;
  std::string model_id;
  Metrics metrics;
  std::unique_ptr<Scheduler> scheduler;
  httplib::Server http;
  int port = 0;
  std::atomic<uint64_t> next_id{1};
  std::atomic<bool> shutting_down{false};

  Impl(llm::Llm& l, ServerOptions o) : llm(l), options(std::move(o)) {}

  void reply_error(httplib::Response& res, const std::string& endpoint, const HttpError& e) {
    res.status = e.status;
    res.set_content(error_body(e).dump(), "application/json");
    metrics.request(endpoint, e.status);
  }

  // The prompt of a chat request, through the model's chat template.
  std::optional<HttpError> chat_prompt(const json& body, std::vector<int32_t>* tokens) {
    if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty()) {
      return bad_field("messages", "'messages' must be a non-empty array");
    }
    std::vector<llm::ChatMessage> messages;
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
          if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
              !part["text"].is_string()) {
            return bad_field(param, fmt::format("'{}.content' parts must be text parts", param));
          }
          content += part["text"].get<std::string>();
        }
      } else if (!(m.contains("content") && m["content"].is_null())) {
        return bad_field(param, fmt::format("'{}.content' must be a string or an array of text parts", param));
      }
      messages.push_back({m["role"].get<std::string>(), std::move(content)});
    }
    Result<std::string> prompt = llm.tokenizer().apply_chat_template(messages, true);
    if (!prompt.ok()) return bad_field("messages", std::string(prompt.status().message()));
    Result<std::vector<int32_t>> encoded =
        llm.tokenizer().encode(*prompt, llm::EncodeOptions{.add_special = true, .parse_special = true});
    if (!encoded.ok()) return bad_field("messages", std::string(encoded.status().message()));
    *tokens = std::move(*encoded);
    return std::nullopt;
  }

  std::optional<HttpError> completion_prompt(const json& body, std::vector<int32_t>* tokens) {
    if (!body.contains("prompt")) return bad_field("prompt", "'prompt' is required");
    json prompt = body["prompt"];
    if (prompt.is_array() && prompt.size() == 1 && prompt[0].is_string()) prompt = prompt[0];
    if (prompt.is_string()) {
      Result<std::vector<int32_t>> encoded =
          llm.tokenizer().encode(prompt.get<std::string>(), llm::EncodeOptions{.add_special = true});
      if (!encoded.ok()) return bad_field("prompt", std::string(encoded.status().message()));
      *tokens = std::move(*encoded);
      return std::nullopt;
    }
    if (prompt.is_array() && !prompt.empty()) {  // token ids
      for (const json& t : prompt) {
        if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= llm.tokenizer().vocab_size()) {
          return bad_field("prompt", "'prompt' token ids must be integers in the vocabulary");
        }
        tokens->push_back(t.get<int32_t>());
      }
      return std::nullopt;
    }
    return bad_field("prompt", "'prompt' must be a string, one string in an array, or an array of token ids");
  }

  void handle(const httplib::Request& req, httplib::Response& res, bool chat) {
    const std::string endpoint = chat ? "/v1/chat/completions" : "/v1/completions";
    json body;
    try {
      body = json::parse(req.body);
    } catch (const json::exception& e) {
      return reply_error(res, endpoint, bad_field("", fmt::format("the body is not valid JSON: {}", e.what())));
    }
    if (!body.is_object()) return reply_error(res, endpoint, bad_field("", "the body must be a JSON object"));
    Sampling sampling;
    if (auto e = read_sampling(body, chat ? options.default_max_tokens : 16, &sampling)) {
      return reply_error(res, endpoint, *e);
    }
    auto job = std::make_shared<Job>();
    if (auto e = chat ? chat_prompt(body, &job->prompt) : completion_prompt(body, &job->prompt)) {
      return reply_error(res, endpoint, *e);
    }
    if (job->prompt.empty()) return reply_error(res, endpoint, bad_field("prompt", "the prompt is empty"));
    const int64_t context = llm.engine().config().context_length;
    if (static_cast<int64_t>(job->prompt.size()) + sampling.max_tokens > context) {
      return reply_error(res, endpoint,
                         bad_field("max_tokens", fmt::format("{} prompt tokens + {} max_tokens exceed the model's "
                                                             "context of {} tokens",
                                                             job->prompt.size(), sampling.max_tokens, context)));
    }
    job->max_tokens = sampling.max_tokens;
    job->sampling = sampling.params;
    job->stops = sampling.stops;
    job->ignore_eos = sampling.ignore_eos;
    if (Status submitted = scheduler->submit(job); !submitted.ok()) {
      return reply_error(
          res, endpoint,
          HttpError{.status = 503,
                    .message = std::string(submitted.message()),
                    .type = "server_error",
                    .code = submitted.code() == StatusCode::kUnavailable ? "shutting_down" : "overloaded"});
    }
    const std::string id = fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", next_id.fetch_add(1));
    const int64_t created = unix_now();
    if (sampling.stream) {
      stream(res, endpoint, job, id, created, chat, sampling.include_usage);
    } else {
      complete(res, endpoint, job, id, created, chat);
    }
  }

  json usage(const Job& job) const {
    return json{{"prompt_tokens", job.prompt_tokens},
                {"completion_tokens", job.completion_tokens},
                {"total_tokens", job.prompt_tokens + job.completion_tokens}};
  }

  void complete(httplib::Response& res, const std::string& endpoint, const std::shared_ptr<Job>& job,
                const std::string& id, int64_t created, bool chat) {
    std::string text;
    std::vector<std::string> pieces;
    while (!job->wait_pieces(&pieces, std::chrono::milliseconds(500))) {
    }
    job->wait_pieces(&pieces, std::chrono::milliseconds(0));
    for (const std::string& p : pieces) text += p;
    if (job->end == JobEnd::kError || job->end == JobEnd::kCancelled) {
      const bool overloaded = job->status.code() == StatusCode::kOutOfMemory;
      return reply_error(res, endpoint,
                         HttpError{.status = overloaded ? 503 : 500,
                                   .message = job->status.ok() ? "the request was cancelled" : job->status.to_string(),
                                   .type = "server_error"});
    }
    json choice =
        chat ? json{{"index", 0},
                    {"message", {{"role", "assistant"}, {"content", text}}},
                    {"logprobs", nullptr},
                    {"finish_reason", finish_reason(job->end)}}
             : json{{"index", 0}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", finish_reason(job->end)}};
    const json out = {{"id", id},
                      {"object", chat ? "chat.completion" : "text_completion"},
                      {"created", created},
                      {"model", model_id},
                      {"choices", json::array({choice})},
                      {"usage", usage(*job)}};
    res.set_content(out.dump(), "application/json");
    metrics.request(endpoint, 200);
  }

  // Server-sent events: a chunk per piece of text, a last chunk with the finish reason, [DONE].
  void stream(httplib::Response& res, const std::string& endpoint, const std::shared_ptr<Job>& job,
              const std::string& id, int64_t created, bool chat, bool include_usage) {
    metrics.request(endpoint, 200);
    res.set_header("Cache-Control", "no-cache");
    auto chunk = [this, id, created, chat](json delta_or_text, json finish) {
      json choice = chat ? json{{"index", 0},
                                {"delta", std::move(delta_or_text)},
                                {"logprobs", nullptr},
                                {"finish_reason", std::move(finish)}}
                         : json{{"index", 0},
                                {"text", std::move(delta_or_text)},
                                {"logprobs", nullptr},
                                {"finish_reason", std::move(finish)}};
      const json out = {{"id", id},
                        {"object", chat ? "chat.completion.chunk" : "text_completion"},
                        {"created", created},
                        {"model", model_id},
                        {"choices", json::array({choice})}};
      return "data: " + out.dump() + "\n\n";
    };
    auto started = std::make_shared<bool>(false);
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, job, chunk, started, id, created, chat, include_usage](size_t, httplib::DataSink& sink) {
          const auto send = [&](const std::string& event) {
            if (sink.write(event.data(), event.size())) return true;
            job->cancel = true;  // the client went away
            return false;
          };
          if (!*started) {
            *started = true;
            if (chat && !send(chunk(json{{"role", "assistant"}, {"content", ""}}, nullptr))) return false;
          }
          if (!sink.is_writable()) {
            job->cancel = true;
            return false;
          }
          std::vector<std::string> pieces;
          const bool done = job->wait_pieces(&pieces, kPollInterval);
          for (std::string& piece : pieces) {
            if (!send(chunk(chat ? json{{"content", std::move(piece)}} : json(std::move(piece)), nullptr)))
              return false;
          }
          if (!done) return true;
          if (job->end == JobEnd::kError || job->end == JobEnd::kCancelled) {
            const HttpError e{.status = 500,
                              .message = job->status.ok() ? "the request was cancelled" : job->status.to_string(),
                              .type = "server_error"};
            if (!send("data: " + error_body(e).dump() + "\n\n")) return false;
          } else {
            if (!send(chunk(chat ? json::object() : json(""), finish_reason(job->end)))) return false;
            if (include_usage) {
              const json out = {{"id", id},
                                {"object", chat ? "chat.completion.chunk" : "text_completion"},
                                {"created", created},
                                {"model", model_id},
                                {"choices", json::array()},
                                {"usage", usage(*job)}};
              if (!send("data: " + out.dump() + "\n\n")) return false;
            }
          }
          if (!send("data: [DONE]\n\n")) return false;
          sink.done();
          return true;
        },
        [job](bool success) {
          if (!success) job->cancel = true;
        });
  }
};

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() {
  if (impl_->scheduler) impl_->scheduler->stop();
}

Result<std::unique_ptr<Server>> Server::create(llm::Llm& llm, const ServerOptions& options) {
  if (options.max_queue < 0) return invalid_argument("max_queue {} must be >= 0", options.max_queue);
  auto impl = std::make_unique<Impl>(llm, options);
  Impl* s = impl.get();
  s->model_id = options.model_id.empty() ? std::filesystem::path(llm.model_path()).stem().string() : options.model_id;
  s->scheduler = std::make_unique<Scheduler>(llm, s->metrics, SchedulerOptions{.max_queue = options.max_queue});

  // Every request in flight holds a handler thread while it waits for its text, and idle keep-alive connections
  // hold one each: size the pool for the requests the server admits plus headroom.
  const size_t threads = static_cast<size_t>(llm.engine().options().max_sequences + options.max_queue + 8);
  s->http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s->http.set_keep_alive_timeout(5);
  s->http.set_read_timeout(30);
  s->http.set_write_timeout(30);
  s->http.set_payload_max_length(size_t{16} << 20);
  s->http.set_pre_routing_handler([s](const httplib::Request& req, httplib::Response& res) {
    if (s->options.api_key.empty() || req.path.rfind("/v1/", 0) != 0)
      return httplib::Server::HandlerResponse::Unhandled;
    if (req.get_header_value("Authorization") == "Bearer " + s->options.api_key) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    s->reply_error(res, req.path,
                   HttpError{.status = 401,
                             .message = "Invalid API key: pass it as 'Authorization: Bearer <key>'",
                             .code = "invalid_api_key"});
    return httplib::Server::HandlerResponse::Handled;
  });
  s->http.set_exception_handler([s](const httplib::Request& req, httplib::Response& res, std::exception_ptr) {
    s->reply_error(res, req.path, HttpError{.status = 500, .message = "internal error", .type = "server_error"});
  });
  s->http.set_error_handler([s](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const std::string message =
        res.status == 404 ? fmt::format("no route {} {}", req.method, req.path) : fmt::format("HTTP {}", res.status);
    res.set_content(error_body(HttpError{.status = res.status, .message = message}).dump(), "application/json");
  });
  s->http.Post("/v1/chat/completions",
               [s](const httplib::Request& req, httplib::Response& res) { s->handle(req, res, true); });
  s->http.Post("/v1/completions",
               [s](const httplib::Request& req, httplib::Response& res) { s->handle(req, res, false); });
  s->http.Get("/v1/models", [s](const httplib::Request&, httplib::Response& res) {
    const json out = {
        {"object", "list"},
        {"data",
         json::array({json{{"id", s->model_id}, {"object", "model"}, {"created", unix_now()}, {"owned_by", "hxrt"}}})}};
    res.set_content(out.dump(), "application/json");
    s->metrics.request("/v1/models", 200);
  });
  s->http.Get("/health", [s](const httplib::Request&, httplib::Response& res) {
    const bool draining = s->shutting_down.load();
    res.status = draining ? 503 : 200;
    res.set_content(json{{"status", draining ? "shutting_down" : "ok"}}.dump(), "application/json");
  });
  s->http.Get("/metrics", [s](const httplib::Request&, httplib::Response& res) {
    res.set_content(s->metrics.render(), "text/plain; version=0.0.4");
  });

  if (options.port == 0) {
    s->port = s->http.bind_to_any_port(options.host);
    if (s->port < 0) return unavailable("cannot bind {}: no free port", options.host);
  } else {
    if (!s->http.bind_to_port(options.host, options.port)) {
      return unavailable("cannot bind {}:{} (in use, or not an address of this machine)", options.host, options.port);
    }
    s->port = options.port;
  }
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

int Server::bound_port() const {
  return impl_->port;
}

Status Server::serve() {
  if (!impl_->http.listen_after_bind() && !impl_->shutting_down.load()) {
    return unavailable("the HTTP server on {}:{} stopped unexpectedly", impl_->options.host, impl_->port);
  }
  return ok_status();
}

void Server::shutdown() {
  if (impl_->shutting_down.exchange(true)) return;
  impl_->scheduler->drain();
  impl_->http.stop();
}

}  // namespace hxrt::serve
