// Engine: runs a decoder graph for many requests at once — continuous batching over a paged KV cache.
//
// The decoder is one ExecutionPlan (decoder.h) run by one Executor; the KV cache's buffers are bound to it as
// state. Each step() serves every running sequence with one forward launch:
//   1. decode sequences contribute their one pending token, sequences still in prefill a chunk of their prompt,
//      and waiting requests are admitted (prefix hits first reuse cached blocks) while the step's token budget
//      (max_batch_tokens), the sequence limit and the KV budget allow;
//   2. KV slots are reserved for every token of the step. When the budget is exhausted the policy is
//      preempt-and-recompute: the most recently admitted sequence gives its blocks back and returns to the head of
//      the queue, to be prefilled again (its prompt plus what it generated) once blocks free up. A sequence that
//      cannot fit even alone fails with ResourceExhausted naming the budget; nothing is ever silently truncated;
//   3. one forward computes the K/V of every token and the logits of each sequence's last token;
//   4. sequences whose prompt is complete sample their next token and finish on EOS, a stop token,
//      max_new_tokens or a callback asking to stop; finished sequences release their blocks (full committed blocks
//      stay cached for prefix hits). The callback gets a token at the next step, while that step's forward runs
//      (Note [Pipelined decode steps] in engine.cc): a request's last token reaches it, and the request finishes,
//      one step() after it was sampled.
// Every kernel is batch invariant (Note [Batch invariance] in kernels/cpu/quant_matmul.h), so a request's tokens
// are bit-identical whether it runs alone or with others, prefilled in one chunk or many.
//
// Thread-safety: thread-compatible: one thread drives submit()/step(); callbacks run on that thread.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hxrt/base/status.h"
#include "hxrt/comm/communicator.h"
#include "hxrt/formats/gguf.h"
#include "hxrt/kv/kv_cache.h"
#include "hxrt/llm/decoder.h"
#include "hxrt/llm/grammar.h"
#include "hxrt/llm/sampler.h"
#include "hxrt/llm/speculative.h"
#include "hxrt/ops/kernel_def.h"
#include "hxrt/ops/registries.h"
#include "hxrt/ops/timing_cache.h"
#include "hxrt/runtime/kernel_tuner.h"
#include "hxrt/runtime/executor.h"
#include "hxrt/runtime/profiler.h"
#include "hxrt/runtime/session.h"

namespace hxrt::llm {

using RequestId = int64_t;

struct EngineOptions {
  DType kv_dtype = DType::kF16;
  int block_size = kv::kDefaultKvBlockSize;
  // The KV budget, explicit: exactly one of the two > 0.
  int64_t kv_budget_tokens = 8192;
  uint64_t kv_budget_bytes = 0;
  int max_batch_tokens = 512;   // tokens per forward (longer prompts are prefilled in chunks)
  int max_sequences = 64;       // running at once
  int max_streams = 1;          // streams the plan may use for independent branches
  std::vector<int32_t> eos_tokens;  // end generation (unless a request ignores EOS)

  // Planning of the decoder graph (runtime::PlanOptions says what each does).
  // The registries bundle to plan with, borrowed (it must outlive the engine): the built-in one with custom
  // kernels or fusions added. Null: the engine makes and owns the built-in bundle (kernels::make_builtin_registries).
  const ops::Registries* registries = nullptr;
  // Kernels added to the engine's own bundle (only with registries == null): custom kernels without a bundle.
  std::vector<ops::KernelDef> extra_kernels;
  // Forced implementations, node name or op type → kernel name (ops::SelectionOptions::forced).
  std::map<std::string, std::string, std::less<>> forced_kernels;
  // Measured arbitration: a tuner on the session's device (must outlive create()), or timings measured before
  // (must outlive create()) with the symbol values they were measured at. Both null: arbitration by priority.
  runtime::KernelTuner* tuner = nullptr;
  const ops::TimingCache* timings = nullptr;
  graph::SymbolBindings timing_dims;
  // Heterogeneous split: a session on a host-addressable device (normally the CPU) that runs the nodes the main
  // device has no kernel for, and the op types in fallback_ops; it must outlive the engine. Null: no split.
  runtime::Session* fallback_session = nullptr;
  std::vector<std::string> fallback_ops;
  bool fuse = true;  // the plan's fusion passes, and grouped projections (DecoderGraphOptions::group_projections)
  // After a forward of at least this many tokens (a prefill), the session's pool gives its cached blocks back to
  // the device: the next steps are decodes whose intermediates are a few hundred KiB, so holding the prefill's
  // tens of MiB would only raise the process's resident memory; the host heap is trimmed too (Note [Trimming after
  // a prefill] in engine.cc). 0 = never.
  int trim_pool_after_tokens = 128;
  // Decode steps replay captured runs (Note [Captured decode steps] in engine.cc) instead of launching every node;
  // at most this many shape buckets are captured (0 = never capture).
  int max_captured_steps = 8;
  // Note [Step traces] in engine.cc: each step adds its phases to this profiler (borrowed; it must outlive the
  // engine and be enabled): the host's (scheduling, delivery to the callbacks, sampling) on the lane "engine (host)"
  // and each forward on its stream's lane, so a trace shows the host work of one step beside the device work of the
  // next. Unlike the session's profiler it leaves decode steps captured. Null: none.
  runtime::Profiler* step_trace = nullptr;
  // Note [Sliding-window cache] in engine.cc: a model with both sliding-window and full-attention layers (Gemma 2
  // and 3) keeps the window layers' K/V in a second cache that gives back what falls out of the window, so their
  // memory stays about window + max_batch_tokens tokens a sequence whatever the context. false: one cache for all.
  bool window_cache = true;
  // Note [Speculative decoding] in engine.cc: prompt-lookup drafts verified in one forward (exact: the same tokens
  // as without). The requests' default; Request::speculative overrides it. draft_max 0: off.
  SpeculativeOptions speculative;
  // The decoder also gives the final hidden states of the rows asked for (DecoderGraphOptions::embeddings), so
  // that requests can ask for pooled embeddings (Request::pooling). Off: requests with pooling are refused.
  bool embeddings = false;
  // Tensor parallelism (Note [Tensor-parallel decoder] in decoder.h, Note [Tensor-parallel engine] in
  // llm/tensor_parallel.cc; docs/scale-out.md): every rank of this communicator makes an Engine over the same file
  // with the same options and its own session; rank 0 (the leader) takes requests, schedules, samples and answers,
  // broadcasting each forward's inputs, and the other ranks call follow(). Null or one rank: none.
  std::shared_ptr<comm::Communicator> tensor_parallel;
  // Pipeline parallelism (Note [Pipeline-parallel engine] in llm/pipeline_parallel.cc): every rank of this
  // communicator makes an Engine as above and runs its stage of the layers; rank 0 leads. Not with tensor_parallel.
  std::shared_ptr<comm::Communicator> pipeline_parallel;
  // Pipeline parallelism: micro-batches a step is split into, at most (one per sequence at most). 0: as many as
  // there are ranks.
  int micro_batches = 0;
};

// How a request's prompt becomes one embedding (Request::pooling): the mean of every prompt token's final hidden
// state, or the last token's; either L2-normalized, as llama.cpp's server and OpenAI's embeddings are.
enum class Pooling : uint8_t { kNone, kMean, kLast };
std::string_view pooling_name(Pooling pooling);

// kCancelled: Engine::cancel(). kDeadline: the request's deadline passed (its status is DeadlineExceeded; the tokens
// generated until then are kept). kError: a failed forward or an unservable request (status says why).
enum class FinishReason : uint8_t { kLength, kEos, kStopToken, kCallback, kCancelled, kDeadline, kError };
std::string_view finish_reason_name(FinishReason reason);

inline constexpr int kMaxChoices = 16;  // Request::n at most

struct Request {
  std::vector<int32_t> prompt;  // at least one token
  // Completions of the prompt (OpenAI's n), 1..kMaxChoices: the prompt is prefilled once and the other n - 1
  // sequences fork from it then (Note [Forked choices] in engine.cc), sharing its KV blocks copy-on-write. They get
  // the request ids submit() returned + 1 .. + n - 1 (each its own RequestResult and on_token/on_logprobs calls
  // with its id) and the seeds sampling.seed + 1 .. + n - 1.
  int n = 1;
  int max_new_tokens = 128;
  SamplingParams sampling;
  std::vector<int32_t> stop_tokens;  // besides the engine's EOS tokens
  bool ignore_eos = false;
  bool return_logits = false;        // keep the logits row of every sampled step (tests, goldens)
  // Score the prompt: RequestResult::prompt_logprobs gets log p(prompt[i + 1] | prompt[0..i]) for every i (the
  // forward computes the logits of every prompt row, none reused from the prefix cache; perplexity, OpenAI's echo +
  // logprobs), and with logprobs >= 0 RequestResult::prompt_top_logprobs those tokens' alternatives too. With
  // max_new_tokens = 0 the request finishes after its prompt without sampling.
  bool prompt_logprobs = false;
  // >= 0: every sampled token's log-probability and this many most likely alternatives (at most kMaxTopLogprobs),
  // in RequestResult::logprobs and through on_logprobs; -1: none.
  int logprobs = -1;
  // Called with each new token's TokenLogprobs (when logprobs >= 0) just before on_token is called with it.
  std::function<void(RequestId, const TokenLogprobs&)> on_logprobs;
  // Called with each new token, at the step after the one that sampled it; return false to stop the request
  // (FinishReason::kCallback). It may cancel() requests; it must not step().
  std::function<bool(RequestId, int32_t token)> on_token;
  // The request finishes with FinishReason::kDeadline at the first step that begins after this time, waiting or
  // running (a step is the granularity: one forward is never cut short for one request's deadline).
  hal::Deadline deadline = hal::Deadline::never();
  // Note [Speculative decoding] in engine.cc; unset: EngineOptions::speculative.
  std::optional<SpeculativeOptions> speculative;
  // Constrained decoding (Note [Grammar-constrained sampling] in engine.cc): every generated token keeps the text a
  // prefix of the grammar's language, and EOS comes only where the grammar may end. Needs the engine's vocabulary
  // (set_vocabulary); null: unconstrained.
  std::shared_ptr<const Grammar> grammar;
  // An embedding of the prompt in RequestResult::embedding (needs EngineOptions::embeddings, max_new_tokens 0 and
  // n 1). Mean pooling computes every prompt row (no prefix-cache reuse for it).
  Pooling pooling = Pooling::kNone;
};

struct RequestResult {
  RequestId id = -1;
  std::vector<int32_t> tokens;  // generated tokens (the stop token included when it ended the request)
  FinishReason finish = FinishReason::kLength;
  Status status;                // not OK only for kError and kDeadline
  int prompt_tokens = 0;
  int cached_prompt_tokens = 0; // reused through prefix sharing at (the last) admission
  int preemptions = 0;
  std::vector<std::vector<float>> logits;  // per sampled step, when return_logits
  // When prompt_logprobs: prompt_tokens - 1 entries, [i] = log p(prompt[i + 1] | prompt[0..i]) (natural log).
  std::vector<double> prompt_logprobs;
  // When prompt_logprobs and logprobs >= 0: the same tokens as TokenLogprobs, with `logprobs` alternatives each.
  std::vector<TokenLogprobs> prompt_top_logprobs;
  std::vector<TokenLogprobs> logprobs;     // when Request::logprobs >= 0: one per generated token
  std::vector<float> embedding;  // Request::pooling: n_embd values, L2-normalized
  int drafted_tokens = 0;   // Note [Speculative decoding]: tokens drafted and verified
  int accepted_tokens = 0;  // of those, accepted (each saved a decode step)
};

struct EngineStats {
  uint64_t steps = 0;
  uint64_t prefill_tokens = 0;   // prompt (and recomputed) tokens run through the model
  uint64_t decode_tokens = 0;    // sampled tokens fed back
  double prefill_seconds = 0.0;  // steps are split between the two in proportion to their tokens
  double decode_seconds = 0.0;
  uint64_t preemptions = 0;
  int max_batch_sequences = 0;
  int max_batch_tokens = 0;
  uint64_t replayed_steps = 0;  // forwards served by a captured run
  uint64_t captured_steps = 0;  // captures made (one per shape bucket)
  // Note [Speculative decoding]: sequences' steps that verified a draft, the tokens drafted and those accepted.
  uint64_t draft_steps = 0;
  uint64_t drafted_tokens = 0;
  uint64_t accepted_tokens = 0;
};

class Engine {
 public:
  // Builds and plans the decoder graph for the session's device and creates the KV cache. The file and session
  // must outlive the engine.
  static Result<std::unique_ptr<Engine>> create(runtime::Session& session, const formats::GgufFile& file,
                                                const EngineOptions& options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request; its id (and the ids after it, for n > 1). InvalidArgument for an empty prompt, a token outside
  // the vocabulary, bad sampling params, n outside 1..kMaxChoices, or a request longer than the model's context.
  Result<RequestId> submit(Request request);
  // Finishes a waiting or running request with FinishReason::kCancelled and gives its KV blocks back (full
  // committed blocks stay cached for prefix hits); its result comes from take_finished(). NotFound when the id is
  // not waiting or running (finished already, or never submitted). A choice of an n > 1 request not forked yet
  // (its prompt still prefilling) cancels the whole request, every choice.
  Status cancel(RequestId id);
  // One scheduler step (see the file comment). A failed forward fails the requests of that batch (their results
  // carry the Status) and returns it; the engine stays usable. `timeout` bounds the step's forward: past it the
  // forward is aborted and fails its batch with DeadlineExceeded.
  Status step(hal::Duration timeout = hal::kInfinite);
  // Steps until no request is waiting or running, within one deadline for the whole call (each step gets what is
  // left). DeadlineExceeded when work remains at the deadline: the requests stay queued or running, and a later
  // call goes on with them.
  Status run_until_idle(hal::Duration timeout = hal::kInfinite);
  bool idle() const { return waiting_.empty() && running_.empty(); }
  int running() const { return static_cast<int>(running_.size()); }
  int waiting() const { return static_cast<int>(waiting_.size()); }
  // Results of the requests that finished since the last call.
  std::vector<RequestResult> take_finished();
  // submit, then step until this request finishes (other requests in flight advance with it). The timeout is
  // also the request's deadline (the earlier of it and Request::deadline): past it, DeadlineExceeded.
  Result<RequestResult> generate(Request request, hal::Duration timeout = hal::kInfinite);

  // The vocabulary as bytes (a TokenTrie over every token's piece; control tokens empty) for grammar requests;
  // Llm::enable_grammars() builds it from the tokenizer. Requests with a grammar are refused without one.
  void set_vocabulary(std::shared_ptr<const TokenTrie> vocabulary) { vocabulary_ = std::move(vocabulary); }
  bool has_vocabulary() const { return vocabulary_ != nullptr; }

  const ModelConfig& config() const { return config_; }
  const EngineOptions& options() const { return options_; }
  const EngineStats& stats() const { return stats_; }
  // The KV cache of the full-attention layers (of every layer without a window cache).
  const kv::KvCache& cache() const { return *cache_; }
  // The sliding-window layers' cache (Note [Sliding-window cache] in engine.cc), or null.
  const kv::KvCache* window_cache() const { return window_cache_.get(); }
  const runtime::ExecutionPlan& plan() const { return executor_->plan(); }

  // Tensor parallelism: whether this engine schedules (no group, or rank 0 of it).
  bool leader() const { return steps_ == nullptr || steps_->rank() == 0; }
  // A follower's loop (ranks > 0): runs the forwards the leader broadcasts until the leader's engine is destroyed
  // (OK), or the group fails (its error, naming the rank that failed). FailedPrecondition on the leader.
  Status follow();

 private:
  struct Sequence;
  struct BatchEntry;
  struct StepOutputs;
  Engine(runtime::Session& session, const formats::GgufFile& file, EngineOptions options);
  Status init();
  Status schedule(std::vector<BatchEntry>& batch);
  bool reserve_or_preempt(Sequence& seq, int n_tokens, std::vector<BatchEntry>& batch, Status* failure);
  void preempt(Sequence& seq);
  // Note [Speculative decoding]: appends a prompt-lookup draft of at most `max_tokens` to a decoding sequence
  // when its controller expects it to pay in a step of about `batch_tokens` tokens and the caches have room for it
  // (a draft never preempts); otherwise keeps the lookup as the sequence's shadow draft.
  void draft(Sequence& seq, int max_tokens, int batch_tokens);
  // Drops a sequence's unverified draft tokens.
  static void drop_draft(Sequence& seq);
  // The steps of step(): the forward's inputs for the batch (setting each entry's output rows), then each entry's
  // share of the outputs (advance: verify_draft, pool_embedding, sample_next).
  Result<runtime::TensorMap> assemble_inputs(std::vector<BatchEntry>& batch, bool decode_only);
  Status advance(const BatchEntry& e, StepOutputs& out);
  Result<int32_t> verify_draft(const BatchEntry& e, const StepOutputs& out);
  void pool_embedding(const BatchEntry& e, const StepOutputs& out);
  Result<int32_t> sample_next(Sequence& seq, std::span<const float> logits);
  // Note [Grammar-constrained sampling]: whether `token` may come next for the sequence's grammar.
  bool grammar_allows(const Sequence& seq, int32_t token) const;
  void finish(Sequence& seq, FinishReason reason, Status status = Status());
  // Note [Forked choices]: starts the n - 1 other choices of `seq`, whose prompt was just computed, sharing its KV
  // blocks; the caller samples their first tokens from the same logits row.
  Result<std::vector<Sequence*>> fork_choices(Sequence& seq);
  void expire_deadlines();
  // Hands the tokens sampled since the last call to on_token and finishes the sequences ending with them
  // (Note [Pipelined decode steps] in engine.cc).
  void deliver();
  // The forward of a step: a replay of the step's shape bucket when it is a decode step that can be captured.
  // Delivers the previous step's tokens meanwhile (or before, when the forward is synchronous).
  Result<runtime::TensorMap> forward(const runtime::TensorMap& inputs, bool decode_only, hal::Duration timeout);
  // Note [Pipeline-parallel engine]: this rank's part of a step's forward; the logits on rank 0, nothing elsewhere.
  Result<runtime::TensorMap> forward_pipeline(const runtime::TensorMap& inputs, hal::Duration timeout);
  // Note [Step traces]: one span of this step on `lane` (host times, ns), when options_.step_trace is set.
  void trace_span(std::string_view lane, std::string_view name, int64_t begin_ns, int64_t end_ns);

  runtime::Session& session_;
  const formats::GgufFile& file_;
  EngineOptions options_;
  ModelConfig config_;
  std::unique_ptr<ops::Registries> own_registries_;  // when options_.registries is null
  const ops::Registries* registries_ = nullptr;
  std::unique_ptr<runtime::Executor> executor_;
  std::unique_ptr<kv::KvCache> cache_;
  std::unique_ptr<kv::KvCache> window_cache_;  // Note [Sliding-window cache]; null without one
  int max_window_ = 0;                          // the widest window of its layers
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;  // admission order
  std::vector<RequestResult> finished_;
  RequestId next_id_ = 0;
  uint64_t admissions_ = 0;
  EngineStats stats_;
  // Captured decode steps by bucket (n_tokens, n_seqs, padded block-table width).
  std::map<std::array<int64_t, 3>, std::unique_ptr<runtime::Executor::Captured>> captured_;
  runtime::RunProfile step_spans_;  // Note [Step traces]: this step's spans, added to the profiler at its end
  StepCostModel step_costs_;         // Note [Speculative decoding]: forward seconds by token count
  std::shared_ptr<const TokenTrie> vocabulary_;  // Note [Grammar-constrained sampling]; null: none set
  std::shared_ptr<comm::Communicator> tp_;        // the tensor-parallel group (more than one rank), or null
  std::string tp_group_;                          // its registered group name (comm::register_group)
  std::shared_ptr<comm::Communicator> pp_;        // the pipeline-parallel group (hidden states), or null
  std::shared_ptr<comm::Communicator> pp_logits_; // the last stage's logits back to rank 0 (split from pp_)
  int first_layer_ = 0;                           // this rank's pipeline stage: layers [first_layer_, end_layer_)
  int end_layer_ = 0;
  // The step messages (Note [Tensor-parallel engine]): split from tp_ or pp_, no timeout (a follower waits as long
  // as the leader has no work). Null without parallelism.
  std::shared_ptr<comm::Communicator> steps_;
  int kv_heads_ = 0;                              // KV heads this rank's caches hold
};

}  // namespace hxrt::llm
