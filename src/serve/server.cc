#include "hxrt/serve/server.h"

#include <httplib.h>

#include <atomic>
#include <bit>
#include <chrono>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hxrt/llm/json_schema.h"
#include "hxrt/llm/tool_calls.h"
#include "serve/metrics.h"
#include "serve/request.h"
#include "serve/scheduler.h"

namespace hxrt::serve {
namespace {

using nlohmann::json;

constexpr auto kPollInterval = std::chrono::milliseconds(50);
static_assert(kMaxChoices == llm::kMaxChoices, "the server's n bound is the engine's");

// The error of a job that ended in kError or kCancelled: 503 when the KV budget could not hold it, else 500.
HttpError job_failure(const Job& job) {
  return HttpError{.status = job.status.code() == StatusCode::kOutOfMemory ? 503 : 500,
                   .message = job.status.ok() ? "the request was cancelled" : job.status.to_string(),
                   .type = "server_error"};
}

std::string finish_reason(JobEnd end) {
  return end == JobEnd::kLength ? "length" : "stop";
}

// A finished answer with tool calls: "tool_calls", unless max_tokens cut it.
std::string finish_reason(JobEnd end, const std::vector<llm::ToolCall>& calls) {
  return calls.empty() || end == JobEnd::kLength ? finish_reason(end) : "tool_calls";
}

// OpenAI's tool_calls entries; `stream`: with their index, as a delta carries them.
json tool_calls_json(const std::vector<llm::ToolCall>& calls, const std::string& id_prefix, bool stream) {
  json out = json::array();
  for (size_t k = 0; k < calls.size(); ++k) {
    json call = {{"id", fmt::format("{}_{}", id_prefix, k)},
                 {"type", "function"},
                 {"function", {{"name", calls[k].name}, {"arguments", calls[k].arguments}}}};
    if (stream) call["index"] = k;
    out.push_back(std::move(call));
  }
  return out;
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

struct Server::Impl {
  llm::Llm& llm;
  ServerOptions options;
  std::string model_id;
  llm::ToolCallStyle tool_style;  // how the model's chat template takes tools (llm/tool_calls.h)
  Metrics metrics;
  std::unique_ptr<Scheduler> scheduler;
  httplib::Server http;
  int port = 0;
  std::atomic<uint64_t> next_id{1};
  std::atomic<bool> shutting_down{false};

  Impl(llm::Llm& l, ServerOptions o) : llm(l), options(std::move(o)) {}

  void reply_error(httplib::Response& res, const std::string& endpoint, const HttpError& e) {
    res.status = e.status;
    res.set_content(error_json(e), "application/json");
    metrics.request(endpoint, e.status);
  }

  // The request's prompt in tokens: chat messages through the model's chat template, or the completion's text.
  std::optional<HttpError> tokenize(const CompletionRequest& request, std::vector<int32_t>* tokens) {
    if (request.prompt_tokens) {
      *tokens = *request.prompt_tokens;
      return std::nullopt;
    }
    std::string text = request.prompt;
    if (request.chat) {
      // tool_choice "none" with a template that does not render tools: no system turn inviting calls.
      const bool tools = request.tool_choice != ToolChoice::kNone || tool_style.template_renders_tools;
      Result<std::string> rendered = llm::apply_chat_template_with_tools(
          llm.tokenizer(), tool_style, request.messages, tools ? request.tools_json : std::string());
      if (!rendered.ok()) return HttpError{.message = std::string(rendered.status().message()), .param = "messages"};
      text = std::move(*rendered);
    }
    Result<std::vector<int32_t>> encoded =
        request.chat ? llm.tokenizer().encode_chat(text) : llm.tokenizer().encode(text);
    if (!encoded.ok()) {
      return HttpError{.message = std::string(encoded.status().message()), .param = request.chat ? "messages" : "prompt"};
    }
    *tokens = std::move(*encoded);
    return std::nullopt;
  }

  // Compiles a request's grammar (GBNF text, or the error of making it) into the job's; a failure is a 400 naming
  // the field it came in.
  static std::optional<HttpError> compile_grammar(Result<std::string> gbnf, const std::string& param, Job* job) {
    Result<std::shared_ptr<const llm::Grammar>> grammar =
        gbnf.ok() ? llm::parse_gbnf(*gbnf) : Result<std::shared_ptr<const llm::Grammar>>(gbnf.status());
    if (!grammar.ok()) {
      return HttpError{.message = fmt::format("'{}' cannot constrain the output: {}", param, grammar.status().message()),
                       .param = param};
    }
    job->grammar = std::move(grammar).value();
    return std::nullopt;
  }

  void handle(const httplib::Request& req, httplib::Response& res, bool chat) {
    const std::string endpoint = chat ? "/v1/chat/completions" : "/v1/completions";
    std::variant<CompletionRequest, HttpError> parsed =
        parse_request(req.body, chat, chat ? options.default_max_tokens : 16, llm.tokenizer().vocab_size());
    if (const HttpError* e = std::get_if<HttpError>(&parsed)) return reply_error(res, endpoint, *e);
    const CompletionRequest& request = std::get<CompletionRequest>(parsed);
    auto job = std::make_shared<Job>();
    if (auto e = tokenize(request, &job->prompt)) return reply_error(res, endpoint, *e);
    if (request.n > llm.engine().options().max_sequences) {
      return reply_error(res, endpoint,
                         HttpError{.message = fmt::format("n = {} exceeds the sequences the server decodes at once ({})",
                                                          request.n, llm.engine().options().max_sequences),
                                   .param = "n"});
    }
    if (job->prompt.empty()) return reply_error(res, endpoint, HttpError{.message = "the prompt is empty", .param = "prompt"});
    const int64_t context = llm.engine().config().context_length;
    if (static_cast<int64_t>(job->prompt.size()) + request.max_tokens > context) {
      return reply_error(res, endpoint,
                         HttpError{.message = fmt::format("{} prompt tokens + {} max_tokens exceed the model's context "
                                                          "of {} tokens",
                                                          job->prompt.size(), request.max_tokens, context),
                                   .param = "max_tokens"});
    }
    job->max_tokens = request.max_tokens;
    job->sampling = request.sampling;
    job->stops = request.stops;
    job->ignore_eos = request.ignore_eos;
    job->logprobs = request.logprobs;
    job->speculative = request.speculative;
    if (request.echo) {
      if (request.stream && request.logprobs >= 0) {
        return reply_error(res, endpoint,
                           HttpError{.message = "'echo' with 'logprobs' is served without streaming", .param = "echo"});
      }
      job->echo = true;
      if (request.prompt_tokens) {
        Result<std::string> text = llm.tokenizer().decode(job->prompt);
        if (!text.ok()) return reply_error(res, endpoint, HttpError{.message = std::string(text.status().message()), .param = "prompt"});
        job->echo_text = std::move(*text);
      } else {
        job->echo_text = request.prompt;
      }
    }
    if (request.json_object) job->grammar = llm::json_grammar();
    // Tool calls (docs/serve.md): parsed from the answer unless tool_choice is "none"; forced by a grammar when it
    // is "required" or names a function.
    std::optional<llm::ToolCallFormat> tool_format;
    if (!request.tools_json.empty()) {
      if (Status valid = llm::validate_tools(request.tools_json); !valid.ok()) {
        return reply_error(res, endpoint, HttpError{.message = std::string(valid.message()), .param = "tools"});
      }
      if (request.tool_choice != ToolChoice::kNone) tool_format = tool_style.format;
      if (request.tool_choice == ToolChoice::kRequired || request.tool_choice == ToolChoice::kFunction) {
        const std::string param = request.tool_choice == ToolChoice::kFunction ? "tool_choice" : "tools";
        if (auto e = compile_grammar(llm::tool_call_grammar(tool_style.format, request.tools_json,
                                                            request.tool_choice_function, request.parallel_tool_calls),
                                     param, job.get())) {
          return reply_error(res, endpoint, *e);
        }
      }
    }
    if (!request.grammar.empty() || !request.json_schema.empty()) {
      // A JSON schema becomes GBNF first (json_schema.h); either way a bad one is a 400 naming the field it came in.
      const bool schema = !request.json_schema.empty();
      const std::string param = schema ? request.json_schema_param : "grammar";
      Result<std::string> gbnf =
          schema ? llm::json_schema_to_gbnf(request.json_schema) : Result<std::string>(request.grammar);
      if (auto e = compile_grammar(std::move(gbnf), param, job.get())) return reply_error(res, endpoint, *e);
    }
    // Note [Forked choices] (llm/engine_outputs.cc): n choices, one job each, one engine request.
    std::vector<std::shared_ptr<Job>> choices = {job};
    for (int c = 1; c < request.n; ++c) {
      auto choice = std::make_shared<Job>();
      choice->prompt = job->prompt;
      choice->max_tokens = job->max_tokens;
      choice->sampling = job->sampling;
      choice->stops = job->stops;
      choice->ignore_eos = job->ignore_eos;
      choice->logprobs = job->logprobs;
      choice->speculative = job->speculative;
      choice->grammar = job->grammar;
      choice->echo = job->echo;
      choice->echo_text = job->echo_text;
      choices.push_back(std::move(choice));
    }
    if (Status submitted = scheduler->submit(choices); !submitted.ok()) {
      return reply_error(res, endpoint,
                         HttpError{.status = 503, .message = std::string(submitted.message()), .type = "server_error",
                                   .code = submitted.code() == StatusCode::kUnavailable ? "shutting_down" : "overloaded"});
    }
    const std::string id = fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", next_id.fetch_add(1));
    const int64_t created = unix_now();
    if (request.stream) {
      stream(res, endpoint, std::move(choices), id, created, chat, request.include_usage, tool_format);
    } else {
      complete(res, endpoint, choices, id, created, chat, tool_format);
    }
  }

  // A token's text as OpenAI reports it: the piece (invalid UTF-8 replaced when dumped) and its bytes.
  json token_entry(const llm::TokenLogprob& t) const {
    const Result<std::string_view> bytes_of = llm.tokenizer().token_to_piece(t.token);
    const std::string piece(bytes_of.ok() ? *bytes_of : std::string_view());
    json bytes = json::array();
    for (unsigned char c : piece) bytes.push_back(static_cast<int>(c));
    return json{{"token", piece}, {"logprob", t.logprob}, {"bytes", std::move(bytes)}};
  }

  // The `logprobs` of a choice for these tokens (null when the request asked for none). Chat: {"content": [...]};
  // completions: the legacy {tokens, token_logprobs, top_logprobs, text_offset}, offsets in bytes from `offset`.
  json logprobs_json(const Job& job, bool chat, const std::vector<llm::TokenLogprobs>& tokens, size_t offset) const {
    if (job.logprobs < 0) return nullptr;
    if (chat) {
      json content = json::array();
      for (const llm::TokenLogprobs& lp : tokens) {
        json entry = token_entry(lp.sampled);
        json top = json::array();
        for (const llm::TokenLogprob& t : lp.top) top.push_back(token_entry(t));
        entry["top_logprobs"] = std::move(top);
        content.push_back(std::move(entry));
      }
      return json{{"content", std::move(content)}};
    }
    json out = {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()},
                {"text_offset", json::array()}};
    for (const llm::TokenLogprobs& lp : tokens) {
      const json sampled = token_entry(lp.sampled);
      out["tokens"].push_back(sampled["token"]);
      out["token_logprobs"].push_back(lp.sampled.logprob);
      json top = json::object();
      for (const llm::TokenLogprob& t : lp.top) top[token_entry(t)["token"].get<std::string>()] = t.logprob;
      out["top_logprobs"].push_back(std::move(top));
      out["text_offset"].push_back(offset);
      offset += sampled["bytes"].size();
    }
    return out;
  }

  // Completions' echo with logprobs: the prompt's tokens in the legacy arrays (the first one's logprob and
  // alternatives null, as OpenAI's), then the answer's from `logprobs` at offsets after the echoed text.
  json echo_logprobs_json(const Job& job, const std::vector<llm::TokenLogprobs>& logprobs) const {
    json out = {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()},
                {"text_offset", json::array()}};
    size_t offset = 0;
    for (size_t i = 0; i < job.prompt.size(); ++i) {
      const bool scored = i > 0 && i - 1 < job.prompt_logprobs.size();
      const json entry = token_entry(llm::TokenLogprob{.token = job.prompt[i]});
      out["tokens"].push_back(entry["token"]);
      out["token_logprobs"].push_back(scored ? json(job.prompt_logprobs[i - 1].sampled.logprob) : json(nullptr));
      json top = json::object();
      for (const llm::TokenLogprob& t : scored ? job.prompt_logprobs[i - 1].top : std::vector<llm::TokenLogprob>{}) {
        top[token_entry(t)["token"].get<std::string>()] = t.logprob;
      }
      out["top_logprobs"].push_back(scored ? std::move(top) : json(nullptr));
      out["text_offset"].push_back(offset);
      offset += entry["bytes"].size();
    }
    const json answer = logprobs_json(job, false, logprobs, job.echo_text.size());
    for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"}) {
      for (const json& v : answer[key]) out[key].push_back(v);
    }
    return out;
  }

  static std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

  // The prompt counted once, the completion tokens of every choice.
  static json usage(const std::vector<std::shared_ptr<Job>>& choices) {
    int completion = 0;
    for (const std::shared_ptr<Job>& job : choices) completion += job->completion_tokens;
    const int prompt = choices.front()->prompt_tokens;
    return json{{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}};
  }

  void complete(httplib::Response& res, const std::string& endpoint, const std::vector<std::shared_ptr<Job>>& choices,
                const std::string& id, int64_t created, bool chat, std::optional<llm::ToolCallFormat> tool_format) {
    json out_choices = json::array();
    for (size_t c = 0; c < choices.size(); ++c) {
      const Job& job = *choices[c];
      std::vector<Piece> pieces;
      while (!choices[c]->wait_pieces(&pieces, std::chrono::milliseconds(500))) {
      }
      choices[c]->wait_pieces(&pieces, std::chrono::milliseconds(0));
      std::string text;
      std::vector<llm::TokenLogprobs> logprobs;
      for (Piece& p : pieces) {
        text += p.text;
        for (llm::TokenLogprobs& lp : p.logprobs) logprobs.push_back(std::move(lp));
      }
      if (job.end == JobEnd::kError || job.end == JobEnd::kCancelled) {
        for (const std::shared_ptr<Job>& other : choices) other->cancel = true;
        return reply_error(res, endpoint, job_failure(job));
      }
      json logprobs_out = job.echo && job.logprobs >= 0 ? echo_logprobs_json(job, logprobs)
                                                        : logprobs_json(job, chat, logprobs, 0);
      if (chat) {
        json message = {{"role", "assistant"}, {"content", text}};
        std::vector<llm::ToolCall> calls;
        if (tool_format) {
          llm::ToolCallAnswer answer = llm::parse_tool_calls(*tool_format, text);
          calls = std::move(answer.calls);
          message["content"] = answer.content.empty() && !calls.empty() ? json(nullptr) : json(answer.content);
          if (!calls.empty()) message["tool_calls"] = tool_calls_json(calls, fmt::format("call_{}_{}", id, c), false);
        }
        out_choices.push_back(json{{"index", c},
                                   {"message", std::move(message)},
                                   {"logprobs", std::move(logprobs_out)},
                                   {"finish_reason", finish_reason(job.end, calls)}});
        continue;
      }
      out_choices.push_back(json{{"index", c},
                                 {"text", job.echo_text + text},
                                 {"logprobs", std::move(logprobs_out)},
                                 {"finish_reason", finish_reason(job.end)}});
    }
    const json out = {{"id", id},
                      {"object", chat ? "chat.completion" : "text_completion"},
                      {"created", created},
                      {"model", model_id},
                      {"choices", std::move(out_choices)},
                      {"usage", usage(choices)}};
    res.set_content(dump(out), "application/json");
    metrics.request(endpoint, 200);
  }

  // POST /v1/embeddings: each input one engine request pooling its prompt's final hidden states (ServerOptions::
  // pooling, L2-normalized), all submitted at once so the engine batches them.
  void embed(const httplib::Request& req, httplib::Response& res) {
    const std::string endpoint = "/v1/embeddings";
    if (!llm.engine().options().embeddings) {
      return reply_error(res, endpoint,
                         HttpError{.status = 501,
                                   .message = "this server computes no embeddings: start it with --embeddings",
                                   .type = "invalid_request_error"});
    }
    std::variant<EmbeddingRequest, HttpError> parsed = parse_embedding_request(req.body, llm.tokenizer().vocab_size());
    if (const HttpError* e = std::get_if<HttpError>(&parsed)) return reply_error(res, endpoint, *e);
    const EmbeddingRequest& request = std::get<EmbeddingRequest>(parsed);
    const int64_t width = llm.engine().config().n_embd;
    if (request.dimensions && *request.dimensions != width) {
      return reply_error(res, endpoint,
                         HttpError{.message = fmt::format("'dimensions' must be the model's width, {}", width),
                                   .param = "dimensions"});
    }
    const int64_t context = llm.engine().config().context_length;
    std::vector<std::shared_ptr<Job>> jobs;
    for (size_t i = 0; i < request.inputs.size(); ++i) {
      auto job = std::make_shared<Job>();
      job->max_tokens = 0;
      job->pooling = options.pooling;
      if (const auto* text = std::get_if<std::string>(&request.inputs[i])) {
        Result<std::vector<int32_t>> encoded = llm.tokenizer().encode(*text);
        if (!encoded.ok()) {
          return reply_error(res, endpoint, HttpError{.message = std::string(encoded.status().message()), .param = "input"});
        }
        job->prompt = std::move(*encoded);
      } else {
        job->prompt = std::get<std::vector<int32_t>>(request.inputs[i]);
      }
      if (job->prompt.empty() || static_cast<int64_t>(job->prompt.size()) > context) {
        return reply_error(res, endpoint,
                           HttpError{.message = fmt::format("input {} has {} tokens; the model takes 1 to {}", i,
                                                            job->prompt.size(), context),
                                     .param = "input"});
      }
      jobs.push_back(std::move(job));
    }
    for (const std::shared_ptr<Job>& job : jobs) {
      if (Status submitted = scheduler->submit(job); !submitted.ok()) {
        for (const std::shared_ptr<Job>& other : jobs) other->cancel = true;
        return reply_error(res, endpoint,
                           HttpError{.status = 503, .message = std::string(submitted.message()), .type = "server_error",
                                     .code = submitted.code() == StatusCode::kUnavailable ? "shutting_down" : "overloaded"});
      }
    }
    json data = json::array();
    int prompt_tokens = 0;
    for (size_t i = 0; i < jobs.size(); ++i) {
      std::vector<Piece> pieces;
      while (!jobs[i]->wait_pieces(&pieces, std::chrono::milliseconds(500))) {
      }
      if (jobs[i]->end == JobEnd::kError || jobs[i]->end == JobEnd::kCancelled ||
          static_cast<int64_t>(jobs[i]->embedding.size()) != width) {
        for (const std::shared_ptr<Job>& other : jobs) other->cancel = true;
        return reply_error(res, endpoint, job_failure(*jobs[i]));
      }
      prompt_tokens += jobs[i]->prompt_tokens;
      const std::vector<float>& values = jobs[i]->embedding;
      static_assert(std::endian::native == std::endian::little, "base64 embeddings are little-endian float32 bytes");
      json embedding = request.base64
                           ? json(base64_encode(std::string_view(reinterpret_cast<const char*>(values.data()),
                                                                 values.size() * sizeof(float))))
                           : json(values);
      data.push_back(json{{"object", "embedding"}, {"index", i}, {"embedding", std::move(embedding)}});
    }
    const json out = {{"object", "list"},
                      {"data", std::move(data)},
                      {"model", model_id},
                      {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
    res.set_content(dump(out), "application/json");
    metrics.request(endpoint, 200);
  }

  // Server-sent events: a chunk per piece of text (of choice `index`), a chunk with each choice's finish reason,
  // [DONE] once every choice has ended.
  void stream(httplib::Response& res, const std::string& endpoint, std::vector<std::shared_ptr<Job>> choices,
              const std::string& id, int64_t created, bool chat, bool include_usage,
              std::optional<llm::ToolCallFormat> tool_format) {
    metrics.request(endpoint, 200);
    res.set_header("Cache-Control", "no-cache");
    auto chunk = [this, id, created, chat](size_t index, json delta_or_text, json finish, json logprobs = nullptr) {
      json choice = chat ? json{{"index", index},
                                {"delta", std::move(delta_or_text)},
                                {"logprobs", std::move(logprobs)},
                                {"finish_reason", std::move(finish)}}
                         : json{{"index", index},
                                {"text", std::move(delta_or_text)},
                                {"logprobs", std::move(logprobs)},
                                {"finish_reason", std::move(finish)}};
      const json out = {{"id", id},
                        {"object", chat ? "chat.completion.chunk" : "text_completion"},
                        {"created", created},
                        {"model", model_id},
                        {"choices", json::array({choice})}};
      return "data: " + dump(out) + "\n\n";
    };
    struct State {
      std::vector<std::shared_ptr<Job>> choices;
      bool started = false;
      std::vector<size_t> text_bytes;  // completions' text_offset: bytes streamed so far, per choice
      std::vector<bool> ended;         // the choice's finish chunk was sent
      // With tools: each choice's content goes through a ToolCallStream, which holds back a possible call; the
      // logprobs of held text go out with the next chunk (content or the calls).
      std::vector<std::optional<llm::ToolCallStream>> tool_streams;
      std::vector<std::vector<llm::TokenLogprobs>> held_logprobs;
    };
    auto state = std::make_shared<State>();
    state->text_bytes.assign(choices.size(), 0);
    state->ended.assign(choices.size(), false);
    state->tool_streams.resize(choices.size());
    state->held_logprobs.resize(choices.size());
    if (tool_format) {
      for (std::optional<llm::ToolCallStream>& t : state->tool_streams) t.emplace(*tool_format);
    }
    state->choices = std::move(choices);
    const auto cancel_all = [state] {
      for (const std::shared_ptr<Job>& job : state->choices) job->cancel = true;
    };
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, state, cancel_all, chunk, id, created, chat, include_usage](size_t, httplib::DataSink& sink) {
          const auto send = [&](const std::string& event) {
            if (sink.write(event.data(), event.size())) return true;
            cancel_all();  // the client went away
            return false;
          };
          if (!state->started) {
            state->started = true;
            for (size_t c = 0; c < state->choices.size(); ++c) {  // completions' echo: the prompt's text first
              if (!state->choices[c]->echo) continue;
              state->text_bytes[c] = state->choices[c]->echo_text.size();
              if (!send(chunk(c, json(state->choices[c]->echo_text), nullptr))) return false;
            }
            for (size_t c = 0; c < state->choices.size() && chat; ++c) {
              if (!send(chunk(c, json{{"role", "assistant"}, {"content", ""}}, nullptr))) return false;
            }
          }
          if (!sink.is_writable()) {
            cancel_all();
            return false;
          }
          bool all_done = true;
          for (size_t c = 0; c < state->choices.size(); ++c) {
            if (state->ended[c]) continue;
            Job& job = *state->choices[c];
            std::vector<Piece> pieces;
            // One wait at a time: the first open choice waits for text, the others only take what they have.
            const bool done = job.wait_pieces(&pieces, all_done ? kPollInterval : std::chrono::milliseconds(0));
            for (Piece& piece : pieces) {
              if (state->tool_streams[c]) {
                for (llm::TokenLogprobs& lp : piece.logprobs) state->held_logprobs[c].push_back(std::move(lp));
                piece.text = state->tool_streams[c]->push(piece.text);
                if (piece.text.empty()) continue;
                piece.logprobs = std::exchange(state->held_logprobs[c], {});
              }
              json logprobs = logprobs_json(job, chat, piece.logprobs, state->text_bytes[c]);
              state->text_bytes[c] += piece.text.size();
              json text = chat ? json{{"content", std::move(piece.text)}} : json(std::move(piece.text));
              if (!send(chunk(c, std::move(text), nullptr, std::move(logprobs)))) return false;
            }
            if (!done) {
              all_done = false;
              continue;
            }
            if (job.end == JobEnd::kError || job.end == JobEnd::kCancelled) {
              cancel_all();
              if (!send("data: " + error_json(job_failure(job)) + "\n\n")) return false;
              if (!send("data: [DONE]\n\n")) return false;
              sink.done();
              return true;
            }
            std::vector<llm::ToolCall> calls;
            if (state->tool_streams[c]) {
              llm::ToolCallAnswer answer = state->tool_streams[c]->finish();
              calls = std::move(answer.calls);
              json held = logprobs_json(job, chat, std::exchange(state->held_logprobs[c], {}), 0);
              const bool held_any = !held.is_null() && !held["content"].empty();
              if (!answer.content.empty() || (held_any && calls.empty())) {
                json text = {{"content", std::move(answer.content)}};
                if (!send(chunk(c, std::move(text), nullptr, std::exchange(held, nullptr)))) return false;
              }
              if (!calls.empty()) {
                json delta = {{"tool_calls", tool_calls_json(calls, fmt::format("call_{}_{}", id, c), true)}};
                if (!send(chunk(c, std::move(delta), nullptr, std::move(held)))) return false;
              }
            }
            if (!send(chunk(c, chat ? json::object() : json(""), finish_reason(job.end, calls)))) return false;
            state->ended[c] = true;
          }
          if (!all_done) return true;
          if (include_usage) {
            const json out = {{"id", id},
                              {"object", chat ? "chat.completion.chunk" : "text_completion"},
                              {"created", created},
                              {"model", model_id},
                              {"choices", json::array()},
                              {"usage", usage(state->choices)}};
            if (!send("data: " + out.dump() + "\n\n")) return false;
          }
          if (!send("data: [DONE]\n\n")) return false;
          sink.done();
          return true;
        },
        [cancel_all](bool success) {
          if (!success) cancel_all();
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
  s->tool_style = llm::tool_call_style(llm.tokenizer());
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
  // What the HTTP library answers itself (no route, a body over its limits): OpenAI's error object, counted in
  // /metrics under the route (or "other" for a path that is none, so that the labels stay few).
  s->http.set_error_handler([s](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string message = fmt::format("HTTP {}", res.status);
    if (res.status == 404) message = fmt::format("no route {} {}", req.method, req.path);
    if (res.status == 413) {
      message = "the request body is too large (at most 16 MiB; a form-urlencoded body, as `curl -d` sends without "
                "a Content-Type, at most 8 KiB: send 'Content-Type: application/json')";
    }
    res.set_content(error_json(HttpError{.status = res.status, .message = message}), "application/json");
    const bool route = req.path == "/v1/chat/completions" || req.path == "/v1/completions" ||
                       req.path == "/v1/embeddings" || req.path == "/v1/models";
    s->metrics.request(route ? req.path : "other", res.status);
  });
  s->http.Post("/v1/chat/completions",
               [s](const httplib::Request& req, httplib::Response& res) { s->handle(req, res, true); });
  s->http.Post("/v1/completions",
               [s](const httplib::Request& req, httplib::Response& res) { s->handle(req, res, false); });
  s->http.Post("/v1/embeddings", [s](const httplib::Request& req, httplib::Response& res) { s->embed(req, res); });
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
