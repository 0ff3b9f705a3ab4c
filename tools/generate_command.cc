// `hxrt generate` and `hxrt chat`: text generation with a GGUF model through the LLM engine, streaming tokens as
// they come. Without --model the default model (SmolLM2-135M-Instruct Q4_1) is fetched into the model cache on
// first use (docs/cli.md, "generate").
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "chat_template_flag.h"
#include "commands.h"
#include "hxrt/llm/llm.h"
#include "hxrt/llm/model_cache.h"
#include "profile_report.h"
#include "parallel_flags.h"

namespace hxrt::tools {
namespace {

struct GenerateFlags {
  std::string model;
  std::string prompt;
  std::string system;
  std::string chat_template;  // --chat-template FILE|NAME
  bool chat = false;
  int n_predict = 128;
  float temperature = 0.0f;
  int top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint64_t seed = 0;
  int threads = 0;
  std::string device = "cpu";
  int64_t kv_tokens = 4096;
  bool swa_full = false;  // one cache for every layer (no sliding-window cache), as llama.cpp's --swa-full
  std::vector<std::string> stop;
  bool ignore_eos = false;
  llm::SpeculativeOptions speculative;  // --draft-max, --draft-ngram-min/max (Note [Speculative decoding])
  std::string grammar;                  // --grammar GBNF text
  std::string grammar_file;             // --grammar-file FILE (GBNF)
  bool quiet = false;  // no streaming, only the stats line (benchmarks)
  bool show_tokens = false;  // print the prompt's token ids and pieces to stderr
  int parallel = 1;          // concurrent copies of the request (aggregate throughput)
  int prompt_tokens = 0;     // > 0: repeat/cut the tokenized prompt to exactly this many tokens (benchmarks)
  bool json = false;         // a JSON stats line on stdout (bench/ scripts parse it)
  std::string profile;       // --profile: Chrome trace of every forward, summary on stderr (docs/profiling.md)
  // --trace-steps: the engine's steps (host phases and forwards, Note [Step traces]) as a Chrome trace, or as the
  // HTML timeline when the path ends in .html
  std::string trace_steps;
  std::shared_ptr<runtime::Profiler> step_trace;
  int tp = 1;  // --tp: tensor-parallel ranks (docs/scale-out.md)
  int pp = 1;  // --pp: pipeline-parallel ranks
};

Result<std::unique_ptr<llm::Llm>> load(const GenerateFlags& flags) {
  llm::LlmOptions options;
  options.model = flags.model;
  options.device = flags.device;
  options.threads = flags.threads;
  HXRT_ASSIGN_OR_RETURN(options.chat_template, resolve_chat_template_flag(flags.chat_template));
  options.engine.kv_budget_tokens = flags.kv_tokens;
  // The requests this command runs at once: sizes the sliding-window cache (Note [Sliding-window cache]).
  options.engine.max_sequences = std::max(1, flags.parallel);
  options.engine.window_cache = !flags.swa_full;
  options.engine.speculative = flags.speculative;
  options.engine.step_trace = flags.step_trace.get();
  options.tensor_parallel = flags.tp;
  options.pipeline_parallel = flags.pp;
  return llm::Llm::load(options);
}

llm::SamplingParams sampling_of(const GenerateFlags& flags) {
  return llm::SamplingParams{.temperature = flags.temperature,
                             .top_k = flags.top_k,
                             .top_p = flags.top_p,
                             .min_p = flags.min_p,
                             .repetition_penalty = flags.repeat_penalty,
                             .presence_penalty = flags.presence_penalty,
                             .frequency_penalty = flags.frequency_penalty,
                             .seed = flags.seed};
}

// --grammar / --grammar-file: the GBNF grammar generation follows (llama.cpp's flags), or null.
Result<std::shared_ptr<const llm::Grammar>> grammar_of(const GenerateFlags& flags) {
  if (!flags.grammar.empty() && !flags.grammar_file.empty()) {
    return invalid_argument("--grammar and --grammar-file are exclusive");
  }
  std::string text = flags.grammar;
  if (!flags.grammar_file.empty()) {
    std::ifstream in(flags.grammar_file, std::ios::binary);
    if (!in) return not_found("cannot read the grammar file {}", flags.grammar_file);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  if (text.empty()) return std::shared_ptr<const llm::Grammar>();
  Result<std::shared_ptr<const llm::Grammar>> grammar = llm::parse_gbnf(text);
  if (!grammar.ok()) {
    return std::move(grammar).take_status().with_context(
        flags.grammar_file.empty() ? std::string("reading --grammar") : fmt::format("reading {}", flags.grammar_file));
  }
  return grammar;
}

// Generates a reply to `prompt_tokens`, streaming text to stdout; stops at EOS, a stop string or n_predict.
Result<std::string> stream_reply(llm::Llm& loaded, const GenerateFlags& flags, std::vector<int32_t> prompt_tokens) {
  llm::GenerateOptions options;
  options.max_tokens = flags.n_predict;
  options.sampling = sampling_of(flags);
  options.stop = flags.stop;
  options.ignore_eos = flags.ignore_eos;
  HXRT_ASSIGN_OR_RETURN(options.grammar, grammar_of(flags));
  if (!flags.quiet) {
    options.on_text = [](std::string_view piece) {
      fmt::print("{}", piece);
      std::fflush(stdout);
      return true;
    };
  }
  HXRT_ASSIGN_OR_RETURN(llm::Generation generation, loaded.generate_tokens(std::move(prompt_tokens), options));
  return std::move(generation.text);
}

void print_stats(const llm::Engine& engine, const GenerateFlags& flags, double wall_seconds) {
  const llm::EngineStats& s = engine.stats();
  auto rate = [](uint64_t tokens, double seconds) { return seconds > 0 ? static_cast<double>(tokens) / seconds : 0.0; };
  fmt::print(stderr, "\n[{}] prefill: {} tokens, {:.1f} tokens/s | decode: {} tokens, {:.1f} tokens/s\n", flags.device,
             s.prefill_tokens, rate(s.prefill_tokens, s.prefill_seconds), s.decode_tokens,
             rate(s.decode_tokens, s.decode_seconds));
  if (s.draft_steps > 0) {
    fmt::print(stderr, "[{}] speculative: {} drafts, {} of {} tokens accepted ({:.0f}%), {:.2f} tokens per decode step\n",
               flags.device, s.draft_steps, s.accepted_tokens, s.drafted_tokens,
               100.0 * static_cast<double>(s.accepted_tokens) / static_cast<double>(s.drafted_tokens),
               static_cast<double>(s.decode_tokens) /
                   static_cast<double>(std::max<uint64_t>(1, s.decode_tokens - s.accepted_tokens)));
  }
  if (flags.json) {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    fmt::print(
        "{{\"device\": \"{}\", \"parallel\": {}, \"prefill_tokens\": {}, \"prefill_tokens_per_s\": {:.3f}, "
        "\"decode_tokens\": {}, \"decode_tokens_per_s\": {:.3f}, \"generated_tokens_per_s\": {:.3f}, "
        "\"wall_s\": {:.4f}, \"steps\": {}, \"replayed_steps\": {}, \"captured_steps\": {}, "
        "\"max_batch_sequences\": {}, \"draft_steps\": {}, \"drafted_tokens\": {}, \"accepted_tokens\": {}, "
        "\"peak_rss_kib\": {}}}\n",
        flags.device, flags.parallel, s.prefill_tokens, rate(s.prefill_tokens, s.prefill_seconds), s.decode_tokens,
        rate(s.decode_tokens, s.decode_seconds),
        rate(s.decode_tokens + static_cast<uint64_t>(flags.parallel), wall_seconds), wall_seconds, s.steps,
        s.replayed_steps, s.captured_steps, s.max_batch_sequences, s.draft_steps, s.drafted_tokens, s.accepted_tokens,
        usage.ru_maxrss);
  }
}

// --parallel N: N copies of the request at once (seeds seed .. seed+N-1), nothing streamed.
Status run_parallel(llm::Llm& loaded, const GenerateFlags& flags, const std::vector<int32_t>& tokens) {
  for (int i = 0; i < flags.parallel; ++i) {
    llm::Request request;
    request.prompt = tokens;
    request.max_new_tokens = flags.n_predict;
    request.sampling = sampling_of(flags);
    request.sampling.seed = flags.seed + static_cast<uint64_t>(i);
    request.ignore_eos = flags.ignore_eos;
    HXRT_RETURN_IF_ERROR(loaded.engine().submit(std::move(request)).status());
  }
  HXRT_RETURN_IF_ERROR(loaded.engine().run_until_idle());
  for (const llm::RequestResult& r : loaded.engine().take_finished()) {
    if (r.finish == llm::FinishReason::kError) return r.status;
  }
  return ok_status();
}

Status run_generate(GenerateFlags& flags) {
  if (flags.prompt.empty()) return invalid_argument("--prompt is empty");
  if (!flags.trace_steps.empty()) {
    flags.step_trace = std::make_shared<runtime::Profiler>("hxrt generate: engine steps");
    flags.step_trace->set_enabled(true);
  }
  HXRT_ASSIGN_OR_RETURN(std::unique_ptr<llm::Llm> loaded, load(flags));
  HXRT_ASSIGN_OR_RETURN(const bool followed, follow_if_follower(*loaded));
  if (followed) return ok_status();
  std::string prompt = flags.prompt;
  if (flags.chat) {
    std::vector<llm::ChatMessage> messages;
    if (!flags.system.empty()) messages.push_back({"system", flags.system});
    messages.push_back({"user", flags.prompt});
    HXRT_ASSIGN_OR_RETURN(prompt, loaded->tokenizer().apply_chat_template(messages, true));
  }
  HXRT_ASSIGN_OR_RETURN(std::vector<int32_t> tokens, flags.chat ? loaded->tokenizer().encode_chat(prompt)
                                                                : loaded->tokenizer().encode(prompt));
  if (flags.prompt_tokens > 0) {
    std::vector<int32_t> sized;
    while (static_cast<int>(sized.size()) < flags.prompt_tokens) {
      const size_t take = std::min(tokens.size(), static_cast<size_t>(flags.prompt_tokens) - sized.size());
      sized.insert(sized.end(), tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(take));
    }
    tokens = std::move(sized);
  }
  if (flags.show_tokens) {
    for (int32_t id : tokens) {
      Result<std::string_view> piece = loaded->tokenizer().token_text(id);
      fmt::print(stderr, "{} '{}'\n", id, piece.ok() ? *piece : "?");
    }
  }
  if (!flags.profile.empty()) loaded->session().profiler().set_enabled(true);
  const auto start = std::chrono::steady_clock::now();
  if (flags.parallel > 1) {
    HXRT_RETURN_IF_ERROR(run_parallel(*loaded, flags, tokens));
  } else {
    if (!flags.chat && !flags.quiet) fmt::print("{}", flags.prompt);
    HXRT_RETURN_IF_ERROR(stream_reply(*loaded, flags, std::move(tokens)).status());
    if (!flags.quiet) fmt::print("\n");
  }
  print_stats(loaded->engine(), flags, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  if (!flags.profile.empty())
    HXRT_RETURN_IF_ERROR(report_profile(loaded->session().profiler(), flags.profile, 15, stderr));
  if (flags.step_trace != nullptr) {
    const bool html = flags.trace_steps.ends_with(".html");
    // Spans only: no host enqueue marks (a span's host time is its box), pool counters or pool events.
    runtime::TraceOptions options{.enqueue_track = false, .counters = false, .flows = false, .pool_events = false};
    HXRT_RETURN_IF_ERROR(html ? flags.step_trace->write_timeline_html(flags.trace_steps, options)
                              : flags.step_trace->write_chrome_trace(flags.trace_steps, options));
    fmt::print(stderr, "engine steps ({} spans) written to {}\n", flags.step_trace->records().size(), flags.trace_steps);
  }
  return ok_status();
}

// An interactive chat: the whole conversation is re-encoded each turn; the KV cache's prefix sharing makes the
// earlier turns free (their full blocks are cached).
Status run_chat(const GenerateFlags& flags) {
  HXRT_ASSIGN_OR_RETURN(std::unique_ptr<llm::Llm> loaded, load(flags));
  HXRT_ASSIGN_OR_RETURN(const bool followed, follow_if_follower(*loaded));
  if (followed) return ok_status();
  std::vector<llm::ChatMessage> messages;
  if (!flags.system.empty()) messages.push_back({"system", flags.system});
  fmt::print(stderr, "hxrt chat: type a message, an empty line or EOF ends the session\n");
  std::string line;
  while (true) {
    fmt::print("> ");
    std::fflush(stdout);
    if (!std::getline(std::cin, line) || line.empty()) break;
    messages.push_back({"user", line});
    HXRT_ASSIGN_OR_RETURN(std::string prompt, loaded->tokenizer().apply_chat_template(messages, true));
    HXRT_ASSIGN_OR_RETURN(
        std::vector<int32_t> tokens,
        loaded->tokenizer().encode_chat(prompt));
    HXRT_ASSIGN_OR_RETURN(std::string reply, stream_reply(*loaded, flags, std::move(tokens)));
    fmt::print("\n");
    messages.push_back({"assistant", reply});
  }
  print_stats(loaded->engine(), flags, 0.0);
  return ok_status();
}

void add_generation_options(CLI::App* cmd, GenerateFlags* flags) {
  cmd->add_option("--model,-m", flags->model, "GGUF model file, or a model cache name fetched on first use: " + llm::named_model_list());
  cmd->add_option("--system", flags->system, "system message (chat template)");
  add_chat_template_option(cmd, &flags->chat_template);
  cmd->add_option("-n,--n-predict", flags->n_predict, "tokens to generate at most")->check(CLI::NonNegativeNumber);
  cmd->add_option("--temp", flags->temperature, "sampling temperature; 0 = greedy")->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-k", flags->top_k, "top-k filter (0 = off)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-p", flags->top_p, "nucleus filter (1 = off)");
  cmd->add_option("--min-p", flags->min_p, "min-p filter (0 = off)");
  cmd->add_option("--repeat-penalty", flags->repeat_penalty, "repetition penalty over the last 64 tokens (1 = off)");
  cmd->add_option("--presence-penalty", flags->presence_penalty,
                  "presence penalty over the last 64 tokens, subtracted once from a seen token's logit (0 = off)")
      ->check(CLI::Range(-2.0, 2.0));
  cmd->add_option("--frequency-penalty", flags->frequency_penalty,
                  "frequency penalty over the last 64 tokens, subtracted per occurrence (0 = off)")
      ->check(CLI::Range(-2.0, 2.0));
  cmd->add_option("--seed", flags->seed, "sampling seed");
  cmd->add_option("--threads,-t", flags->threads, "CPU threads (0 = all cores)")->check(CLI::NonNegativeNumber);
  add_parallel_flags(cmd, &flags->tp, &flags->pp);
  cmd->add_option("--device", flags->device, "device: cpu, opencl, cuda, cpu:0, cuda:1 ...");
  cmd->add_option("--kv-tokens", flags->kv_tokens, "KV cache budget in tokens")->check(CLI::PositiveNumber);
  cmd->add_flag("--swa-full", flags->swa_full,
                "keep the sliding-window layers' K/V for the whole context too (one cache for every layer)");
  cmd->add_option("--stop", flags->stop, "stop string (repeatable)");
  cmd->add_flag("--ignore-eos", flags->ignore_eos, "keep generating past end-of-generation tokens");
  cmd->add_option("--grammar", flags->grammar, "constrain the output to this GBNF grammar (llama.cpp's syntax)");
  cmd->add_option("--grammar-file", flags->grammar_file, "constrain the output to the GBNF grammar in FILE");
  cmd->add_option("--draft-max", flags->speculative.draft_max,
                  "speculative decoding: draft up to N tokens a step by prompt lookup and verify them in one forward "
                  "(the same output; 0 = off)")
      ->check(CLI::Range(0, 64));
  cmd->add_flag("--draft-fixed", [flags](int64_t) { flags->speculative.adaptive = false; },
                "draft as many tokens as the lookup finds (up to --draft-max) instead of what measured costs favour");
  cmd->add_option("--draft-ngram-min", flags->speculative.ngram_min, "prompt lookup: the shortest suffix matched")
      ->check(CLI::Range(1, 16));
  cmd->add_option("--draft-ngram-max", flags->speculative.ngram_max, "prompt lookup: the longest suffix, tried first")
      ->check(CLI::Range(1, 16));
}

}  // namespace

void add_generate_command(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<GenerateFlags>();
  CLI::App* cmd = app.add_subcommand("generate", "generate text with a GGUF model, streaming tokens");
  cmd->add_option("--prompt,-p", flags->prompt, "prompt text")->required();
  cmd->add_flag("--chat", flags->chat, "wrap the prompt in the model's chat template");
  cmd->add_flag("--quiet,-q", flags->quiet, "print only the speed line");
  cmd->add_flag("--show-tokens", flags->show_tokens, "print the prompt's token ids and texts to stderr");
  cmd->add_option("--parallel", flags->parallel, "run N copies of the request concurrently (throughput)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", flags->json, "print a JSON line of statistics on stdout");
  cmd->add_option("--profile", flags->profile, "profile every forward: write a Chrome trace here, summary to stderr");
  cmd->add_option("--trace-steps", flags->trace_steps,
                  "write the engine's steps (host phases beside forwards) as a Chrome trace, or an HTML timeline "
                  "(.html)");
  cmd->add_option("--prompt-tokens", flags->prompt_tokens, "repeat or cut the prompt to exactly N tokens (benchmarks)")
      ->check(CLI::NonNegativeNumber);
  add_generation_options(cmd, flags.get());
  cmd->callback([flags, exit_code]() {
    if (Status s = run_generate(*flags); !s.ok()) {
      fmt::print(stderr, "hxrt generate: {}\n", s.to_string());
      *exit_code = 1;
    }
  });
}

void add_chat_command(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<GenerateFlags>();
  flags->temperature = 0.7f;
  CLI::App* cmd = app.add_subcommand("chat", "interactive chat with a GGUF model");
  add_generation_options(cmd, flags.get());
  cmd->callback([flags, exit_code]() {
    if (Status s = run_chat(*flags); !s.ok()) {
      fmt::print(stderr, "hxrt chat: {}\n", s.to_string());
      *exit_code = 1;
    }
  });
}

}  // namespace hxrt::tools
