// `hxrt serve`: the OpenAI-compatible HTTP server (include/hxrt/serve/server.h, docs/serve.md). SIGTERM and SIGINT
// drain it: new requests get 503, the ones in flight finish, then it exits 0.
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <cstdio>
#include <thread>

#include <fmt/format.h>

#include "chat_template_flag.h"
#include "commands.h"
#include "parallel_flags.h"
#include "hxrt/llm/llm.h"
#include "hxrt/llm/model_cache.h"
#include "hxrt/serve/server.h"

namespace hxrt::tools {
namespace {

struct ServeFlags {
  std::string model;
  std::string device = "cpu";
  std::string chat_template;  // --chat-template FILE|NAME
  int threads = 0;
  int parallel = 4;
  int64_t kv_tokens = 8192;
  int draft_max = 0;  // Note [Speculative decoding]: the requests' default
  bool embeddings = false;         // POST /v1/embeddings (the decoder also outputs hidden states)
  std::string pooling = "mean";    // mean | last
  serve::ServerOptions server;
  int tp = 1;  // --tp: tensor-parallel ranks; rank 0 answers (docs/scale-out.md)
  int pp = 1;  // --pp: pipeline-parallel ranks
};

// SIGTERM and SIGINT write their number into this pipe (all a handler may safely do); a thread reads it and drains
// the server. A handler, not sigwait, because threads that libraries start before the server (PoCL's) would take a
// blocked signal's default action instead.
int g_signal_pipe[2] = {-1, -1};

void on_signal(int signal) {
  const unsigned char byte = static_cast<unsigned char>(signal);
  [[maybe_unused]] const ssize_t written = write(g_signal_pipe[1], &byte, 1);
}

Status run_serve(const ServeFlags& flags) {
  llm::LlmOptions options;
  options.model = flags.model;
  options.device = flags.device;
  options.threads = flags.threads;
  HXRT_ASSIGN_OR_RETURN(options.chat_template, resolve_chat_template_flag(flags.chat_template));
  options.engine.kv_budget_tokens = flags.kv_tokens;
  options.engine.max_sequences = flags.parallel;
  options.engine.speculative.draft_max = flags.draft_max;
  options.engine.embeddings = flags.embeddings;
  options.tensor_parallel = flags.tp;
  options.pipeline_parallel = flags.pp;
  HXRT_ASSIGN_OR_RETURN(std::unique_ptr<llm::Llm> llm, llm::Llm::load(options));
  // The other ranks follow rank 0's steps; only rank 0 listens.
  HXRT_ASSIGN_OR_RETURN(const bool followed, follow_if_follower(*llm));
  if (followed) return ok_status();
  serve::ServerOptions server_options = flags.server;
  server_options.pooling = flags.pooling == "last" ? llm::Pooling::kLast : llm::Pooling::kMean;
  HXRT_ASSIGN_OR_RETURN(std::unique_ptr<serve::Server> server, serve::Server::create(*llm, server_options));

  if (pipe(g_signal_pipe) != 0) return unavailable("cannot make the signal pipe");
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  std::thread waiter([&] {
    unsigned char byte = 0;
    while (read(g_signal_pipe[0], &byte, 1) < 0 && errno == EINTR) {
    }
    if (byte == 0) return;  // serve() ended on its own
    fmt::print(stderr, "hxrt serve: signal {}: draining\n", static_cast<int>(byte));
    server->shutdown();
  });
  // The line scripts and tests wait for (the port is the bound one when --port 0).
  fmt::print("hxrt serve: listening on http://{}:{} (model {}, device {}, {} sequences at once, KV {} tokens)\n",
             flags.server.host, server->bound_port(), llm->model_path(), flags.device, flags.parallel, flags.kv_tokens);
  std::fflush(stdout);
  Status served = server->serve();
  const unsigned char end = 0;
  [[maybe_unused]] const ssize_t written = write(g_signal_pipe[1], &end, 1);
  waiter.join();
  server.reset();
  fmt::print(stderr, "hxrt serve: stopped\n");
  return served;
}

}  // namespace

void add_serve_command(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<ServeFlags>();
  CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server (chat/completions, completions)");
  cmd->add_option("--model,-m", flags->model,
                  "GGUF model file, or a model cache name fetched on first use: " + llm::named_model_list());
  cmd->add_option("--device", flags->device, "device: cpu, opencl, cuda, cpu:0, cuda:1 ...");
  add_chat_template_option(cmd, &flags->chat_template);
  cmd->add_option("--threads,-t", flags->threads, "CPU threads (0 = all cores)")->check(CLI::NonNegativeNumber);
  add_parallel_flags(cmd, &flags->tp, &flags->pp);
  cmd->add_option("--host", flags->server.host, "address to listen on");
  cmd->add_option("--port", flags->server.port, "port (0 = any free port)")->check(CLI::Range(0, 65535));
  cmd->add_option("--parallel", flags->parallel, "sequences decoded at once (continuous batching)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-queue", flags->server.max_queue, "requests waiting beyond --parallel before 503")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--kv-tokens", flags->kv_tokens, "KV cache budget in tokens")->check(CLI::PositiveNumber);
  cmd->add_option("--draft-max", flags->draft_max,
                  "speculative decoding by prompt lookup: draft up to N tokens a step (0 = off; a request's "
                  "\"speculative.n_max\" overrides it)")
      ->check(CLI::Range(0, 64));
  cmd->add_flag("--embeddings", flags->embeddings,
                "serve POST /v1/embeddings: pooled final hidden states, L2-normalized (as llama-server --embeddings)");
  cmd->add_option("--pooling", flags->pooling, "how /v1/embeddings pools a prompt's hidden states: mean or last")
      ->check(CLI::IsMember({"mean", "last"}));
  cmd->add_option("--api-key", flags->server.api_key, "require 'Authorization: Bearer KEY' on /v1/*");
  cmd->add_option("--model-id", flags->server.model_id, "the model id /v1/models lists (default: the file name)");
  cmd->callback([flags, exit_code]() {
    if (Status s = run_serve(*flags); !s.ok()) {
      fmt::print(stderr, "hxrt serve: {}\n", s.to_string());
      *exit_code = 1;
    }
  });
}

}  // namespace hxrt::tools
