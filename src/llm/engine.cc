#include "hxrt/llm/engine.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <future>
#include <limits>
#include <optional>
#include <span>
#include <thread>

#include <fmt/format.h>

#include "hxrt/kernels/builtin_registries.h"
#include "llm/engine_internal.h"
#include "llm/pipeline_parallel.h"
#include "llm/tensor_parallel.h"

namespace hxrt::llm {

using engine_detail::kHostLane;
using engine_detail::now_ns;

std::string_view pooling_name(Pooling pooling) {
  switch (pooling) {
    case Pooling::kNone: return "none";
    case Pooling::kMean: return "mean";
    case Pooling::kLast: return "last";
  }
  return "?";
}

std::string_view finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength: return "length";
    case FinishReason::kEos: return "eos";
    case FinishReason::kStopToken: return "stop_token";
    case FinishReason::kCallback: return "callback";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kDeadline: return "deadline";
    case FinishReason::kError: return "error";
  }
  return "?";
}

Result<std::unique_ptr<Engine>> Engine::create(runtime::Session& session, const formats::GgufFile& file,
                                               const EngineOptions& options) {
  if (options.max_batch_tokens <= 0 || options.max_sequences <= 0) {
    return invalid_argument("engine: max_batch_tokens {} and max_sequences {} must be positive", options.max_batch_tokens,
                            options.max_sequences);
  }
  HXRT_RETURN_IF_ERROR_CTX(options.speculative.validate(), "EngineOptions::speculative");
  std::unique_ptr<Engine> engine(new Engine(session, file, options));
  HXRT_RETURN_IF_ERROR_CTX(engine->init(), "creating the LLM engine");
  return engine;
}

Engine::Engine(runtime::Session& session, const formats::GgufFile& file, EngineOptions options)
    : session_(session), file_(file), options_(std::move(options)), step_costs_(options_.max_batch_tokens) {}

Engine::~Engine() {
  session_.default_stream().synchronize().ignore();
  if (steps_ != nullptr && leader()) {
    // The followers leave their loop (Note [Tensor-parallel engine]), told to stop, or told why not.
    Status failed = tp_ != nullptr ? tp_->status() : pp_->status();
    if (failed.ok() && pp_logits_ != nullptr) failed = pp_logits_->status();
    if (!failed.ok()) {
      steps_->abort(failed);
    } else {
      tp::send_stop(*steps_).ignore();
    }
  }
  if (tp_ != nullptr) comm::unregister_group(tp_group_);
}

Status Engine::follow() {
  if (leader()) return failed_precondition("follow(): this engine is the tensor-parallel leader (rank 0), not a follower");
  for (;;) {
    HXRT_ASSIGN_OR_RETURN(std::optional<tp::Step> step, tp::receive_step(*steps_));
    if (!step.has_value()) return ok_status();
    Result<runtime::TensorMap> outputs = forward(step->inputs, step->decode_only, hal::kInfinite);
    if (!outputs.ok()) {
      return std::move(outputs).take_status().with_context(
          fmt::format("{}-parallel follower rank {} running the leader's step", tp_ != nullptr ? "tensor" : "pipeline",
                      steps_->rank()));
    }
    ++stats_.steps;
  }
}

Status Engine::init() {
  HXRT_ASSIGN_OR_RETURN(config_, ModelConfig::from_gguf(file_));
  registries_ = options_.registries;
  if (registries_ == nullptr) {
    HXRT_ASSIGN_OR_RETURN(own_registries_, kernels::make_builtin_registries());
    for (ops::KernelDef& def : options_.extra_kernels) {
      HXRT_RETURN_IF_ERROR_CTX(own_registries_->kernels.add(std::move(def)), "adding EngineOptions::extra_kernels");
    }
    options_.extra_kernels.clear();
    registries_ = own_registries_.get();
  } else if (!options_.extra_kernels.empty()) {
    return invalid_argument("EngineOptions: extra_kernels go into the engine's own bundle; with a registries bundle "
                            "given, add them to that bundle");
  }
  DecoderGraphOptions graph_options{.kv_dtype = options_.kv_dtype, .block_size = options_.block_size};
  // A sequence can grow to the model's context or the KV budget, whichever is less.
  graph_options.context = options_.kv_budget_bytes == 0 && options_.kv_budget_tokens > 0
                              ? static_cast<int>(std::min<int64_t>(config_.context_length, options_.kv_budget_tokens))
                              : config_.context_length;
  // Grouped projections where the device has a kernel for them (a capability query, not a list of devices).
  for (const ops::KernelDef* def : registries_->kernels.kernels_for("MatMulQGroup", "hxrt")) {
    graph_options.group_projections = graph_options.group_projections || def->device == session_.device().info().kind;
  }
  graph_options.group_projections = graph_options.group_projections && options_.fuse;
  graph_options.window_cache = options_.window_cache && has_mixed_windows(config_);
  graph_options.embeddings = options_.embeddings;
  kv_heads_ = config_.n_kv_heads;
  if (options_.tensor_parallel != nullptr && options_.tensor_parallel->size() > 1) {
    // Note [Tensor-parallel engine]: this rank's share of the graph, its collectives on a group of its own.
    tp_ = options_.tensor_parallel;
    HXRT_ASSIGN_OR_RETURN(const TensorParallelShard shard, tensor_parallel_shard(config_, tp_->rank(), tp_->size()));
    kv_heads_ = shard.n_kv_heads;
    tp_group_ = fmt::format("engine.tp.{}", static_cast<const void*>(this));
    HXRT_RETURN_IF_ERROR(comm::register_group(tp_group_, tp_));
    // The step messages go on a communicator of their own without a deadline: a follower waits as long as the
    // leader has no work (a server between requests).
    HXRT_ASSIGN_OR_RETURN(steps_, tp_->split(0, tp_->rank(), tp_group_ + ".steps"));
    steps_->set_timeout(hal::kInfinite);
    graph_options.tp_rank = tp_->rank();
    graph_options.tp_size = tp_->size();
    graph_options.tp_group = tp_group_;
  }
  if (options_.pipeline_parallel != nullptr && options_.pipeline_parallel->size() > 1) {
    // Note [Pipeline-parallel engine]: this rank's layers; the hidden states go to the next rank on pp_, the last
    // stage's logits back to rank 0 on a communicator of their own, the step messages on a third.
    if (tp_ != nullptr) return unimplemented("tensor and pipeline parallelism together (each alone works)");
    pp_ = options_.pipeline_parallel;
    HXRT_ASSIGN_OR_RETURN(const pp::Stage stage, pp::pipeline_stage(config_, pp_->rank(), pp_->size()));
    first_layer_ = stage.first_layer;
    end_layer_ = stage.end_layer;
    graph_options.first_layer = stage.first_layer;
    graph_options.end_layer = stage.end_layer;
    graph_options.window_cache = false;  // a stage's layers share one cache
    if (options_.embeddings) return unimplemented("pooled embeddings under pipeline parallelism");
    HXRT_ASSIGN_OR_RETURN(pp_logits_, pp_->split(0, pp_->rank(), "pipeline.logits"));
    HXRT_ASSIGN_OR_RETURN(steps_, pp_->split(0, pp_->rank(), "pipeline.steps"));
    steps_->set_timeout(hal::kInfinite);
  }
  HXRT_ASSIGN_OR_RETURN(graph::Graph graph, build_decoder_graph(file_, config_, graph_options));
  runtime::PlanOptions plan_options;
  plan_options.max_streams = options_.max_streams;
  plan_options.fuse = options_.fuse;
  plan_options.selection.forced = options_.forced_kernels;
  plan_options.selection.timings = options_.timings;
  plan_options.selection.bucket_dims = options_.timing_dims;
  plan_options.tuner = options_.tuner;
  if (options_.fallback_session != nullptr) plan_options.fallback_device = &options_.fallback_session->device().info();
  plan_options.fallback_ops = options_.fallback_ops;
  HXRT_ASSIGN_OR_RETURN(std::unique_ptr<runtime::ExecutionPlan> plan,
                        runtime::ExecutionPlan::build(std::move(graph), session_.device().info(),
                                                      runtime::PlanContext::of(*registries_), plan_options));
  runtime::Session* fallback = plan->fallback_device() != nullptr ? options_.fallback_session : nullptr;
  HXRT_ASSIGN_OR_RETURN(executor_, runtime::Executor::create(session_, std::shared_ptr<const runtime::ExecutionPlan>(std::move(plan)),
                                                             fallback));
  // Note [Sliding-window cache]
  // A sliding-window layer reads only the last `window` positions of a sequence. With the window layers' K/V in a
  // cache of their own, the blocks that fall out of the widest window go back after every step
  // (BlockManager::release_before), so that cache needs about window + a prefill chunk of tokens per sequence,
  // however long the sequences grow, and the full-attention layers' cache holds only those layers (Gemma 3: 3 of
  // 18 layers at 32K context instead of 18). As llama.cpp's iSWA cache, sized the same way. Both caches take the
  // same reservations in the same order, so a sequence's tables have the same length in both (holes where the
  // window cache gave blocks back); a sequence is admitted, preempted and finished in both at once. Prefix hits
  // need both: the window cache keeps released full blocks reclaimable, and the shorter hit of the two is used.
  kv::KvCacheConfig cache_config;
  cache_config.n_kv_heads = kv_heads_;
  cache_config.head_dim = config_.head_dim;
  cache_config.block_size = options_.block_size;
  cache_config.dtype = options_.kv_dtype;
  cache_config.n_layers = pp_ != nullptr ? end_layer_ - first_layer_ : config_.n_layers;
  cache_config.budget_tokens = options_.kv_budget_bytes > 0 ? 0 : options_.kv_budget_tokens;
  cache_config.budget_bytes = options_.kv_budget_bytes;
  if (graph_options.window_cache) {
    int n_window_layers = 0;
    for (const LayerConfig& layer : config_.layers) {
      n_window_layers += layer.window > 0 ? 1 : 0;
      max_window_ = std::max(max_window_, layer.window);
    }
    kv::KvCacheConfig window_config = cache_config;
    window_config.n_layers = n_window_layers;
    const int64_t demand = static_cast<int64_t>(options_.max_sequences) * (max_window_ + 2 * options_.block_size) +
                           options_.max_batch_tokens;
    window_config.budget_bytes = 0;
    window_config.budget_tokens = options_.kv_budget_bytes > 0 ? demand : std::min(demand, options_.kv_budget_tokens);
    if (options_.kv_budget_bytes > 0) {  // a bytes budget covers both caches: the window cache's share first
      HXRT_ASSIGN_OR_RETURN(const kv::KvCacheLayout layout, kv::kv_cache_layout(window_config));
      const uint64_t share = std::min<uint64_t>(static_cast<uint64_t>(layout.num_blocks) * layout.bytes_per_block,
                                                options_.kv_budget_bytes / 2);
      window_config.budget_bytes = share;
      window_config.budget_tokens = 0;
      cache_config.budget_bytes = options_.kv_budget_bytes - share;
    }
    cache_config.n_layers = config_.n_layers - n_window_layers;
    HXRT_ASSIGN_OR_RETURN(window_cache_, kv::KvCache::create(session_.device(), window_config));
  }
  HXRT_ASSIGN_OR_RETURN(cache_, kv::KvCache::create(session_.device(), cache_config));
  const auto bind = [&](const kv::KvCache& cache, const char* k, const char* v) {
    const Shape shape{cache.config().n_layers, cache.num_blocks(), options_.block_size, kv_heads_, config_.head_dim};
    HXRT_RETURN_IF_ERROR(executor_->bind_state(k, options_.kv_dtype, shape, hal::BufferView(cache.k_buffer())));
    return executor_->bind_state(v, options_.kv_dtype, shape, hal::BufferView(cache.v_buffer()));
  };
  HXRT_RETURN_IF_ERROR(bind(*cache_, decoder::kKCache, decoder::kVCache));
  if (window_cache_) HXRT_RETURN_IF_ERROR(bind(*window_cache_, decoder::kKCacheLocal, decoder::kVCacheLocal));
  return ok_status();
}

Result<RequestId> Engine::submit(Request request) {
  if (request.prompt.empty()) return invalid_argument("request: the prompt is empty");
  for (size_t i = 0; i < request.prompt.size(); ++i) {
    if (request.prompt[i] < 0 || request.prompt[i] >= config_.vocab_size) {
      return invalid_argument("request: prompt token {} = {} is outside the vocabulary of {}", i, request.prompt[i],
                              config_.vocab_size);
    }
  }
  if (request.max_new_tokens < 0) return invalid_argument("request: max_new_tokens {} must be >= 0", request.max_new_tokens);
  if (request.n < 1 || request.n > std::min(kMaxChoices, options_.max_sequences)) {
    return invalid_argument("request: n {} must be in [1, {}] (at most max_sequences)", request.n,
                            std::min(kMaxChoices, options_.max_sequences));
  }
  if (request.logprobs < -1 || request.logprobs > kMaxTopLogprobs) {
    return invalid_argument("request: logprobs {} must be -1 (none) or in [0, {}]", request.logprobs, kMaxTopLogprobs);
  }
  HXRT_RETURN_IF_ERROR(request.sampling.validate());
  if (request.speculative) HXRT_RETURN_IF_ERROR_CTX(request.speculative->validate(), "request");
  if (request.grammar && vocabulary_ == nullptr) {
    return invalid_argument("request: a grammar needs the engine's vocabulary (Engine::set_vocabulary, "
                            "Llm::enable_grammars)");
  }
  if (request.pooling != Pooling::kNone) {
    if (!options_.embeddings) {
      return invalid_argument("request: pooling {} needs an engine created with EngineOptions::embeddings",
                              pooling_name(request.pooling));
    }
    if (request.max_new_tokens != 0 || request.n != 1) {
      return invalid_argument("request: an embedding request generates nothing (max_new_tokens {} and n {} must be 0 "
                              "and 1)", request.max_new_tokens, request.n);
    }
  }
  for (const auto& [token, bias] : request.sampling.logit_bias) {
    if (token >= config_.vocab_size) {
      return invalid_argument("request: logit_bias token {} is outside the vocabulary of {}", token, config_.vocab_size);
    }
  }
  const int64_t total = static_cast<int64_t>(request.prompt.size()) + request.max_new_tokens;
  if (total > config_.context_length) {
    return invalid_argument("request: {} prompt + {} new tokens exceed the model's context of {}", request.prompt.size(),
                            request.max_new_tokens, config_.context_length);
  }
  auto seq = std::make_unique<Sequence>(std::move(request));
  seq->id = next_id_;
  seq->forks = seq->request.n - 1;
  next_id_ += seq->request.n;
  seq->result.id = seq->id;
  seq->result.prompt_tokens = static_cast<int>(seq->tokens.size());
  seq->speculative = seq->request.speculative.value_or(options_.speculative);
  seq->drafter = DraftController(seq->speculative.draft_max, seq->speculative.adaptive);
  const RequestId id = seq->id;
  if (seq->request.prompt_logprobs) {
    seq->result.prompt_logprobs.assign(seq->tokens.size() - 1, std::numeric_limits<double>::quiet_NaN());
    if (seq->request.logprobs >= 0) seq->result.prompt_top_logprobs.resize(seq->tokens.size() - 1);
  }
  if (seq->request.max_new_tokens == 0 && !seq->request.prompt_logprobs && seq->request.pooling == Pooling::kNone) {
    for (int c = 0; c < seq->request.n; ++c) {
      RequestResult result = seq->result;
      result.id = id + c;
      result.finish = FinishReason::kLength;
      finished_.push_back(std::move(result));
    }
    return id;
  }
  waiting_.push_back(std::move(seq));
  return id;
}

// Records the result and drops the sequence from the running or waiting list that holds it (destroying it).
void Engine::finish(Sequence& seq, FinishReason reason, Status status) {
  if (cache_->contains(seq.id)) cache_->release(seq.id).ignore();
  if (window_cache_ && window_cache_->contains(seq.id)) window_cache_->release(seq.id).ignore();
  seq.result.finish = reason;
  seq.result.status = std::move(status);
  // Choices never forked (Note [Forked choices]) end with it, their prompt's logprobs included.
  for (int c = 1; c <= seq.forks; ++c) {
    RequestResult result = seq.result;
    result.id = seq.id + c;
    result.tokens.clear();
    result.logits.clear();
    result.logprobs.clear();
    finished_.push_back(std::move(result));
  }
  seq.forks = 0;
  finished_.push_back(std::move(seq.result));
  const auto is_seq = [&](const auto& s) { return s.get() == &seq; };
  if (auto it = std::find_if(running_.begin(), running_.end(), is_seq); it != running_.end()) {
    running_.erase(it);
  } else if (auto w = std::find_if(waiting_.begin(), waiting_.end(), is_seq); w != waiting_.end()) {
    waiting_.erase(w);
  }
}

Status Engine::cancel(RequestId id) {
  const auto has_id = [&](const auto& s) { return s->id <= id && id <= s->id + s->forks; };
  Sequence* seq = nullptr;
  if (auto it = std::find_if(running_.begin(), running_.end(), has_id); it != running_.end()) seq = it->get();
  if (auto it = std::find_if(waiting_.begin(), waiting_.end(), has_id); it != waiting_.end()) seq = it->get();
  if (seq == nullptr) return not_found("cancel: request {} is not waiting or running", id);
  if (seq->in_flight) {  // a callback cancelling a sequence of the forward in flight: it finishes after the forward
    seq->ending = FinishReason::kCancelled;
    return ok_status();
  }
  finish(*seq, FinishReason::kCancelled);
  return ok_status();
}

// Requests whose deadline has passed finish before the step is scheduled, so they take no budget in it.
void Engine::expire_deadlines() {
  const auto expired = [](const Sequence& seq) { return seq.request.deadline.passed(); };
  const auto status = [](const Sequence& seq) {
    return deadline_exceeded("request {} passed its deadline ({} of {} new tokens generated)", seq.id,
                             seq.result.tokens.size(), seq.request.max_new_tokens);
  };
  std::vector<Sequence*> late;
  for (const auto& s : waiting_) {
    if (expired(*s)) late.push_back(s.get());
  }
  for (const auto& s : running_) {
    if (expired(*s)) late.push_back(s.get());
  }
  for (Sequence* seq : late) finish(*seq, FinishReason::kDeadline, status(*seq));
}

// Preempt-and-recompute: the sequence gives back every block and waits at the head of the queue; its prompt and
// generated tokens are prefilled again on readmission (prefix hits may bring back its full blocks for free).
void Engine::preempt(Sequence& seq) {
  drop_draft(seq);
  seq.embedding.clear();  // its prompt's rows are computed again
  seq.embedded_rows = 0;
  cache_->release(seq.id).ignore();
  if (window_cache_) window_cache_->release(seq.id).ignore();
  seq.computed = 0;
  ++seq.result.preemptions;
  ++stats_.preemptions;
  auto it = std::find_if(running_.begin(), running_.end(), [&](const auto& s) { return s.get() == &seq; });
  waiting_.push_front(std::move(*it));
  running_.erase(it);
}

// Reserves slots for `n_tokens` of `seq`, preempting newer sequences when the KV budget is exhausted. Returns
// false when `seq` itself was preempted or failed (then *failure says why when it failed).
bool Engine::reserve_or_preempt(Sequence& seq, int n_tokens, std::vector<BatchEntry>& batch, Status* failure) {
  std::vector<int32_t> slots(static_cast<size_t>(n_tokens));
  const std::span<const int32_t> chunk(seq.tokens.data() + seq.computed, static_cast<size_t>(n_tokens));
  while (true) {
    // Both caches or neither (Note [Sliding-window cache]): the window cache is asked first, as it can only
    // refuse, never change anything, when it lacks blocks.
    bool room = true;
    if (window_cache_) {
      Result<bool> fits = window_cache_->can_reserve(seq.id, n_tokens);
      if (!fits.ok()) {
        *failure = std::move(fits).take_status();
        return false;
      }
      room = *fits;
    }
    // A copy-on-write of a shared partial block (Note [Forked choices]) goes on the stream the forward runs on,
    // ahead of the forward that writes the copy and reads it.
    hal::Stream& stream = executor_->stream();
    Result<kv::Reservation> reservation = room ? cache_->reserve(seq.id, chunk, slots, stream) : kv::Reservation{};
    if (!reservation.ok()) {
      *failure = std::move(reservation).take_status();
      return false;
    }
    if (room && reservation->ok() && window_cache_) {
      Result<kv::Reservation> window = window_cache_->reserve(seq.id, chunk, slots, stream);
      if (!window.ok() || !window->ok()) {  // checked above: only a failed stream gets here
        *failure = window.ok() ? internal_error("window cache exhausted after can_reserve") : window.status();
        return false;
      }
    }
    if (room && reservation->ok()) return true;
    // Exhausted: preempt the newest running sequence other than this one.
    Sequence* victim = nullptr;
    for (const auto& s : running_) {
      if (s.get() != &seq && !s->ending && (victim == nullptr || s->admission > victim->admission)) victim = s.get();
    }
    if (victim == nullptr || victim->admission < seq.admission) {
      if (running_.size() == 1) {
        *failure = out_of_memory(
            "the KV cache budget of {} blocks × {} tokens cannot hold request {} ({} tokens)", cache_->num_blocks(),
            cache_->block_size(), seq.id, seq.tokens.size());
        return false;
      }
      preempt(seq);  // older sequences keep their blocks; this one waits
      return false;
    }
    std::erase_if(batch, [&](const BatchEntry& e) { return e.seq == victim; });
    preempt(*victim);
  }
}

// Note [Pipelined decode steps]
// A step samples its sequences' next tokens as soon as its forward returns, since the next forward needs them, but
// hands them to on_token (detokenising, streaming, stop strings: the host's share of a token) only in the next step,
// after that step's forward has been enqueued: on a device that runs the forward on its own threads or hardware (a
// captured decode step is one command of the stream, Note [Captured decode steps]), the host work of step t runs
// while the device works on step t + 1. Sampling stays between the two forwards (step t + 1 reads its tokens).
// What the reasons for finishing become:
//   - EOS, a stop token and max_new_tokens are known at sampling: the sequence is `ending` and is not scheduled
//     again; it finishes once its last token is delivered, at the next step (with nothing else to run, that step
//     only delivers);
//   - a callback returning false (or cancel() from inside a callback) is known at delivery, when the sequence may
//     already be in the forward in flight: that forward's work for it is dropped (its sampled token too) and it
//     finishes when the forward returns. The request stops one forward later than it asked, and nothing else
//     changes: its tokens are those of an undelayed run.
// Tokens and logits are the same as without the pipeline; a step's forward that runs synchronously (prefill, runs
// that cannot be captured) delivers before it instead, so callbacks are never a forward late.
void Engine::deliver() {
  std::vector<RequestId> ids;
  for (const auto& s : running_) ids.push_back(s->id);
  for (const auto& s : waiting_) ids.push_back(s->id);  // preempted with a token still to deliver
  for (const RequestId id : ids) {
    // A callback may cancel other requests: look each sequence up again.
    const auto has_id = [&](const auto& s) { return s->id == id; };
    Sequence* seq = nullptr;
    if (auto it = std::find_if(running_.begin(), running_.end(), has_id); it != running_.end()) seq = it->get();
    if (auto it = std::find_if(waiting_.begin(), waiting_.end(), has_id); it != waiting_.end()) seq = it->get();
    if (seq == nullptr) continue;
    while (seq->delivered < seq->result.tokens.size() && seq->ending != FinishReason::kCallback &&
           seq->ending != FinishReason::kCancelled) {
      const size_t index = seq->delivered++;
      const int32_t token = seq->result.tokens[index];
      if (seq->request.on_logprobs && index < seq->result.logprobs.size()) {
        seq->request.on_logprobs(seq->id, seq->result.logprobs[index]);
      }
      if (seq->request.on_token && !seq->request.on_token(seq->id, token)) {
        // EOS and stop tokens name the reason even when the callback also asks to stop (as when undelayed).
        if (seq->ending != FinishReason::kEos && seq->ending != FinishReason::kStopToken) {
          seq->ending = FinishReason::kCallback;
        }
        seq->result.tokens.resize(seq->delivered);
        if (seq->result.logprobs.size() > seq->delivered) seq->result.logprobs.resize(seq->delivered);
      }
    }
    if (seq->ending && !seq->in_flight && seq->delivered == seq->result.tokens.size()) finish(*seq, *seq->ending);
  }
}

Status Engine::schedule(std::vector<BatchEntry>& batch) {
  int budget = options_.max_batch_tokens;
  // Running sequences first (oldest first): decodes take one token, prefills a chunk.
  std::vector<Sequence*> order;
  for (const auto& s : running_) {
    if (!s->ending) order.push_back(s.get());  // finishing once its last tokens are delivered
  }
  std::sort(order.begin(), order.end(), [](const Sequence* a, const Sequence* b) { return a->admission < b->admission; });
  int64_t planned = 0;  // the step's tokens without drafts (Note [Speculative decoding])
  for (const Sequence* seq : order) planned += seq->pending();
  const int batch_tokens = static_cast<int>(std::min<int64_t>(planned, budget));
  for (Sequence* seq : order) {
    if (budget == 0) break;
    if (std::find_if(running_.begin(), running_.end(), [&](const auto& s) { return s.get() == seq; }) == running_.end()) {
      continue;  // preempted while scheduling an older sequence
    }
    draft(*seq, budget - 1, batch_tokens);
    const int n = std::min(seq->pending(), budget);
    Status failure;
    if (!reserve_or_preempt(*seq, n, batch, &failure)) {
      if (!failure.ok()) finish(*seq, FinishReason::kError, std::move(failure));
      continue;
    }
    batch.push_back(BatchEntry{seq, seq->computed, n, seq->drafted});
    budget -= n;
  }
  // Admit waiting requests while the budgets allow.
  while (budget > 0 && !waiting_.empty() && static_cast<int>(running_.size()) < options_.max_sequences) {
    Sequence& seq = *waiting_.front();
    // (The window cache holds a chunk and a window of each sequence, never a whole prompt: its reservations are
    // checked chunk by chunk in reserve_or_preempt.)
    if (!cache_->can_add(seq.tokens)) {
      if (!running_.empty()) break;  // wait for blocks to free up
      finish(seq, FinishReason::kError,
             out_of_memory("the KV cache budget of {} blocks × {} tokens cannot hold request {} ({} tokens)",
                                cache_->num_blocks(), cache_->block_size(), seq.id, seq.tokens.size()));
      continue;
    }
    HXRT_ASSIGN_OR_RETURN(int32_t cached, cache_->add_sequence(seq.id, seq.tokens));
    // Every prompt row's hidden state or logits is wanted: nothing is reused from the prefix cache (decided before
    // the window cache gives back what precedes its window, below which it cannot truncate).
    if (seq.request.pooling == Pooling::kMean || seq.request.prompt_logprobs) cached = 0;
    if (window_cache_) {  // the shorter prefix hit of the two caches (Note [Sliding-window cache])
      HXRT_ASSIGN_OR_RETURN(const int32_t window_cached, window_cache_->add_sequence(seq.id, seq.tokens));
      cached = std::min(cached, window_cached);
      HXRT_RETURN_IF_ERROR(window_cache_->truncate(seq.id, cached));
      HXRT_RETURN_IF_ERROR(window_cache_->release_before(seq.id, std::max(0, cached - max_window_ + 1)));
    }
    HXRT_RETURN_IF_ERROR(cache_->truncate(seq.id, cached));
    seq.computed = cached;
    seq.result.cached_prompt_tokens = cached;
    seq.admission = ++admissions_;
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
    const int n = std::min(seq.pending(), budget);
    Status failure;
    if (!reserve_or_preempt(seq, n, batch, &failure)) {
      if (!failure.ok()) finish(seq, FinishReason::kError, std::move(failure));
      break;
    }
    batch.push_back(BatchEntry{&seq, seq.computed, n});
    budget -= n;
  }
  return ok_status();
}

// Note [Speculative decoding]
// A decoding sequence with speculation on (SpeculativeOptions, per request) may append a draft to its tokens when
// it is scheduled: up to k tokens that followed the latest earlier occurrence of its last n tokens
// (prompt_lookup_draft in speculative.h), at most the step's budget left and max_new_tokens - generated - 1, and
// only when both caches have room (a draft never preempts). k is its DraftController's choice: the length that
// maximizes expected tokens per second given the sequence's acceptance rate and the forward times the engine
// measured by token count (StepCostModel: every forward is recorded, a prefill's included), so where verifying
// k tokens costs nearly k decode steps (compute-bound quantized dot products) only text that copies well drafts.
// A sequence that does not draft keeps its lookup as a shadow draft and compares it with the tokens it samples,
// which keeps its acceptance rate current at no cost. Its batch entry is
// then the pending token and the draft, 1 + k rows whose logits are all computed (the rows of a chunk, as for a
// scored prompt), and the step verifies them in order: row j's token is sampled exactly as a decode step would
// sample it (the same sampler, the history up to it, one draw per emitted token), and the next row is used only
// when that token equals draft token j. The first mismatch (or EOS, a stop token, max_new_tokens) ends the
// sequence's step; if every draft token matched, the last row gives one more. So a step emits accepted + 1
// tokens, each sampled from the logits plain decoding would compute: every kernel is batch invariant, so a row of
// a 1 + k chunk has the bits of a one-token step, and greedy output, logits and seeded sampling are bit for bit
// those of decoding without a draft. The K/V of the rejected tail is dropped by truncating both caches to the
// accepted length before the commit (nothing uncommitted is ever registered for prefix hits), and the draft's
// tokens leave `tokens`. A step with a draft is not a captured decode bucket (its forward runs as a prefill chunk
// does); a step without one is, so a sequence whose text does not repeat costs only the lookup.
void Engine::draft(Sequence& seq, int max_tokens, int batch_tokens) {
  // Decoding: its prompt done, one sampled token pending.
  if (!seq.speculative.enabled() || seq.pending() != 1 || seq.result.tokens.empty() || seq.drafted != 0) return;
  const int remaining = seq.request.max_new_tokens - static_cast<int>(seq.result.tokens.size());
  const int limit = std::min({seq.speculative.draft_max, max_tokens, remaining - 1});
  if (limit <= 0) return;
  std::vector<int32_t> tokens =
      prompt_lookup_draft(seq.tokens, seq.speculative.ngram_min, seq.speculative.ngram_max, limit);
  const int k = seq.drafter.choose_k(step_costs_, batch_tokens, static_cast<int>(tokens.size()));
  const auto fits = [&](const kv::KvCache& cache) {
    Result<bool> room = cache.can_reserve(seq.id, k + 1);
    return room.ok() && *room;
  };
  if (k == 0 || !fits(*cache_) || (window_cache_ && !fits(*window_cache_))) {
    if (seq.shadow_next >= seq.shadow.size()) {  // the last shadow draft is used up: watch this one
      seq.shadow = std::move(tokens);
      seq.shadow_next = 0;
    }
    return;
  }
  seq.shadow.clear();
  seq.shadow_next = 0;
  seq.tokens.insert(seq.tokens.end(), tokens.begin(), tokens.begin() + k);
  seq.drafted = k;
}

void Engine::drop_draft(Sequence& seq) {
  seq.tokens.resize(seq.tokens.size() - static_cast<size_t>(seq.drafted));
  seq.drafted = 0;
}

// Note [Step traces]
// With EngineOptions::step_trace set, a step records its phases as spans of one profiler run: on the lane
// "engine (host)" scheduling (with the inputs' assembly), delivery to the callbacks and sampling, at host times;
// on the lane of the plan's stream the forward, at the times the stream reached and left it (host callbacks
// enqueued around a replay; the host's times around a synchronous run). The session's profiler would record every
// launch, but it turns capture off; this one leaves the steps as they run unprofiled, so its trace (Perfetto, or
// the HTML timeline) shows what Note [Pipelined decode steps] does: step t's delivery beside step t + 1's forward.
void Engine::trace_span(std::string_view lane, std::string_view name, int64_t begin_ns, int64_t end_ns) {
  if (options_.step_trace == nullptr) return;
  runtime::LaunchRecord record;
  record.graph = executor_->plan().graph().name();
  record.node_name = fmt::format("{} (step {})", name, stats_.steps);
  record.op_type = std::string(name);
  record.kernel = std::string(name);
  record.stream = std::string(lane);
  record.enqueue_begin_ns = begin_ns;
  record.enqueue_end_ns = begin_ns;
  record.device_begin_ns = begin_ns;
  record.device_end_ns = end_ns;
  step_spans_.launches.push_back(std::move(record));
}

// Inputs: one row per token; block tables padded with -1 (never read: PagedAttention reads blocks of positions it
// attends to only). Sets each entry's logits and embeddings rows.
Result<runtime::TensorMap> Engine::assemble_inputs(std::vector<BatchEntry>& batch, bool decode_only) {
  int64_t n_tokens = 0;
  size_t max_blocks = 1;
  std::vector<std::span<const int32_t>> seq_tables, window_tables;  // valid until the caches change
  for (const BatchEntry& e : batch) {
    n_tokens += e.count;
    HXRT_ASSIGN_OR_RETURN(std::span<const int32_t> table, cache_->block_table(e.seq->id));
    max_blocks = std::max(max_blocks, table.size());
    seq_tables.push_back(table);
    if (window_cache_) {
      HXRT_ASSIGN_OR_RETURN(std::span<const int32_t> window, window_cache_->block_table(e.seq->id));
      window_tables.push_back(window);
    }
  }
  // Decode steps pad the block tables to a power of two of blocks, so one capture serves 16·2^k positions.
  if (decode_only && options_.max_captured_steps > 0) max_blocks = std::bit_ceil(std::max<size_t>(max_blocks, 4));
  std::vector<int32_t> tokens, positions, token_seq, logit_rows, embed_rows;
  std::vector<int32_t> tables(batch.size() * max_blocks, -1);
  std::vector<int32_t> local_tables(window_cache_ ? batch.size() * max_blocks : 0, -1);
  for (size_t i = 0; i < batch.size(); ++i) {
    BatchEntry& e = batch[i];
    // Logits rows: the last token's (sampling), or every row of a scored prompt chunk or a draft (the last last).
    const bool every_row = e.seq->request.prompt_logprobs || e.drafted > 0;
    for (int32_t j = 0; j < e.count; ++j) {
      tokens.push_back(e.seq->tokens[static_cast<size_t>(e.start + j)]);
      positions.push_back(e.start + j);
      token_seq.push_back(static_cast<int32_t>(i));
      if (every_row && j + 1 < e.count) logit_rows.push_back(static_cast<int32_t>(tokens.size()) - 1);
    }
    logit_rows.push_back(static_cast<int32_t>(tokens.size()) - 1);
    e.last_logit_row = static_cast<int64_t>(logit_rows.size()) - 1;
    // Embeddings: every row of a mean-pooled prompt chunk, the last prompt row of a last-pooled one.
    const Pooling pooling = e.seq->request.pooling;
    const bool ends_prompt = e.start + e.count == e.seq->result.prompt_tokens;
    if (pooling == Pooling::kMean || (pooling == Pooling::kLast && ends_prompt)) {
      e.first_embed_row = static_cast<int64_t>(embed_rows.size());
      for (int32_t j = pooling == Pooling::kMean ? 0 : e.count - 1; j < e.count; ++j) {
        embed_rows.push_back(static_cast<int32_t>(tokens.size()) - e.count + j);
      }
    }
    std::copy(seq_tables[i].begin(), seq_tables[i].end(), tables.begin() + static_cast<std::ptrdiff_t>(i * max_blocks));
    if (window_cache_) {
      std::copy(window_tables[i].begin(), window_tables[i].end(),
                local_tables.begin() + static_cast<std::ptrdiff_t>(i * max_blocks));
    }
  }
  const Shape table_shape{static_cast<int64_t>(batch.size()), static_cast<int64_t>(max_blocks)};
  runtime::TensorMap inputs;
  inputs.emplace(decoder::kTokens, HostTensor::i32(Shape{n_tokens}, tokens));
  inputs.emplace(decoder::kPositions, HostTensor::i32(Shape{n_tokens}, positions));
  inputs.emplace(decoder::kTokenSeq, HostTensor::i32(Shape{n_tokens}, token_seq));
  inputs.emplace(decoder::kBlockTables, HostTensor::i32(table_shape, tables));
  inputs.emplace(decoder::kLogitRows, HostTensor::i32(Shape{static_cast<int64_t>(logit_rows.size())}, logit_rows));
  if (options_.embeddings) {
    if (embed_rows.empty()) embed_rows.push_back(0);  // a step without embedding requests: one row, unused
    inputs.emplace(decoder::kEmbedRows, HostTensor::i32(Shape{static_cast<int64_t>(embed_rows.size())}, embed_rows));
  }
  if (window_cache_) inputs.emplace(decoder::kBlockTablesLocal, HostTensor::i32(table_shape, local_tables));
  return inputs;
}

Status Engine::step(hal::Duration timeout) {
  const hal::Deadline deadline = hal::Deadline::after(timeout);
  const int64_t step_begin = now_ns();
  const auto flush_trace = [&] {
    if (options_.step_trace == nullptr || step_spans_.launches.empty()) return;
    step_spans_.host_thread = std::this_thread::get_id();
    options_.step_trace->add_run(std::exchange(step_spans_, {}));
  };
  expire_deadlines();
  std::vector<BatchEntry> batch;
  HXRT_RETURN_IF_ERROR(schedule(batch));
  if (batch.empty()) {
    const int64_t begin = now_ns();
    deliver();
    trace_span(kHostLane, "deliver", begin, now_ns());
    flush_trace();
    return ok_status();
  }
  const auto start = std::chrono::steady_clock::now();
  int64_t n_tokens = 0;
  bool decode_only = true;
  for (const BatchEntry& e : batch) {
    n_tokens += e.count;
    decode_only = decode_only && e.count == 1 && !e.seq->request.prompt_logprobs;
  }
  HXRT_ASSIGN_OR_RETURN(const runtime::TensorMap inputs, assemble_inputs(batch, decode_only));
  for (const BatchEntry& e : batch) e.seq->in_flight = true;
  trace_span(kHostLane, "schedule", step_begin, now_ns());
  const int64_t forward_begin = now_ns();
  Result<runtime::TensorMap> outputs = forward(inputs, decode_only, deadline.remaining());
  const int64_t sample_begin = now_ns();
  if (outputs.ok()) {
    step_costs_.record(static_cast<int>(n_tokens), 1e-9 * static_cast<double>(sample_begin - forward_begin));
  }
  for (const BatchEntry& e : batch) e.seq->in_flight = false;
  if (!outputs.ok()) {
    flush_trace();
    Status status = std::move(outputs).take_status().with_context(
        fmt::format("engine step {} ({} sequences, {} tokens)", stats_.steps, batch.size(), n_tokens));
    for (const BatchEntry& e : batch) finish(*e.seq, FinishReason::kError, status);
    return status;
  }
  StepOutputs out;
  out.take_logits(std::move(outputs->at(decoder::kLogits)));
  if (options_.embeddings) out.embeddings = outputs->at(decoder::kEmbeddings).to_f32();  // (embed rows, n_embd)
  if (options_.trim_pool_after_tokens > 0 && n_tokens >= options_.trim_pool_after_tokens) {
    // Note [Trimming after a prefill]: the pool's cached blocks go back to the device, and the host heap's free
    // memory (the prefill's host-side tensors, freed to malloc) back to the system: glibc keeps freed heap
    // memory otherwise, and resident memory would stay at the prefill's peak through all the decode steps after
    // it (16 sequences of SmolLM2: 221 MiB peak instead of 207).
    session_.pool().release_cached();
#if defined(__GLIBC__)
    malloc_trim(0);
#endif
  }
  // A sequence that cannot go on (its grammar allows no token, its cache refused a commit) fails alone.
  for (BatchEntry& e : batch) {
    if (Status advanced = advance(e, out); !advanced.ok()) finish(*e.seq, FinishReason::kError, std::move(advanced));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double total = static_cast<double>(out.prefill + out.decode);
  stats_.prefill_tokens += out.prefill;
  stats_.decode_tokens += out.decode;
  stats_.prefill_seconds += seconds * static_cast<double>(out.prefill) / total;
  stats_.decode_seconds += seconds * static_cast<double>(out.decode) / total;
  trace_span(kHostLane, "sample", sample_begin, now_ns());
  flush_trace();
  ++stats_.steps;
  stats_.max_batch_sequences = std::max(stats_.max_batch_sequences, static_cast<int>(batch.size()));
  stats_.max_batch_tokens = std::max(stats_.max_batch_tokens, static_cast<int>(n_tokens));
  return ok_status();
}

// Note [Captured decode steps]
// A decode step's graph is the same every time for a given (tokens, sequences, block-table width): the engine
// captures it once per such bucket (Note [Captured runs] in hxrt/runtime/executor.h) and replays it, so the host
// does no per-node work. Block tables are padded to a power of two of blocks (PagedAttention reads only the blocks
// of positions it attends to), so a sequence growing by 16·2^k tokens changes bucket log2 times, not every block.
// At most max_captured_steps buckets are kept (then the smallest bucket is dropped). Prefill steps, steps with a
// timeout (a replay is not aborted at a deadline), profiled sessions and plans that cannot be captured run normally.
Result<runtime::TensorMap> Engine::forward(const runtime::TensorMap& inputs, bool decode_only, hal::Duration timeout) {
  // Note [Tensor-parallel engine]: the followers run the same forward.
  if (steps_ != nullptr && leader()) HXRT_RETURN_IF_ERROR(tp::send_step(*steps_, inputs, decode_only));
  if (pp_ != nullptr) {
    deliver();
    return forward_pipeline(inputs, timeout);
  }
  const bool capturable =
      decode_only && options_.max_captured_steps > 0 && timeout == hal::kInfinite && !session_.profiler().enabled();
  const std::string lane = executor_->stream().name();
  // A synchronous forward: the callbacks first (they would otherwise wait for it).
  const auto run_synchronously = [&]() -> Result<runtime::TensorMap> {
    int64_t begin = now_ns();
    deliver();
    trace_span(kHostLane, "deliver", begin, now_ns());
    runtime::RunOptions run_options;
    run_options.timeout = timeout;
    begin = now_ns();
    Result<runtime::TensorMap> outputs = executor_->run(inputs, run_options);
    trace_span(lane, decode_only ? "decode forward" : "forward", begin, now_ns());
    return outputs;
  };
  if (!capturable) return run_synchronously();
  const std::array<int64_t, 3> bucket = {inputs.at(decoder::kTokens).shape.dim(0),
                                         inputs.at(decoder::kBlockTables).shape.dim(0),
                                         inputs.at(decoder::kBlockTables).shape.dim(1)};
  auto it = captured_.find(bucket);
  if (it == captured_.end()) {
    Result<std::unique_ptr<runtime::Executor::Captured>> captured = executor_->capture(inputs);
    if (!captured.ok()) {
      if (captured.status().code() == StatusCode::kUnimplemented) return run_synchronously();
      deliver();
      return std::move(captured).take_status();
    }
    if (static_cast<int>(captured_.size()) >= options_.max_captured_steps) captured_.erase(captured_.begin());
    it = captured_.emplace(bucket, std::move(captured).value()).first;
    ++stats_.captured_steps;
  }
  // Note [Pipelined decode steps]: the previous step's tokens go to their callbacks while this one runs.
  // The stream stamps when it reaches and leaves the replay (Note [Step traces]).
  auto stamps = std::make_shared<std::array<std::atomic<int64_t>, 2>>();
  const auto stamp = [&](int i) {
    if (options_.step_trace == nullptr) return;
    executor_->stream().host_callback([stamps, i](const Status&) { (*stamps)[i] = now_ns(); }).ignore();
  };
  stamp(0);
  Result<std::unique_ptr<runtime::Executor::Pending>> pending = executor_->begin_replay(*it->second, inputs);
  stamp(1);
  const int64_t deliver_begin = now_ns();
  deliver();
  trace_span(kHostLane, "deliver", deliver_begin, now_ns());
  if (!pending.ok()) return std::move(pending).take_status();
  Result<runtime::TensorMap> outputs = executor_->finish_replay(**pending);
  if (outputs.ok()) {
    ++stats_.replayed_steps;
    trace_span(lane, "decode step (replay)", (*stamps)[0], (*stamps)[1]);
  }
  return outputs;
}

Result<runtime::TensorMap> Engine::forward_pipeline(const runtime::TensorMap& inputs, hal::Duration timeout) {
  const int rank = pp_->rank();
  const int last = pp_->size() - 1;
  const int parts = options_.micro_batches > 0 ? options_.micro_batches : pp_->size();
  HXRT_ASSIGN_OR_RETURN(std::vector<llm::step::MicroBatch> micro_batches, llm::step::split_micro_batches(inputs, parts));
  const int64_t n_embd = config_.n_embd;
  const int64_t vocab = config_.vocab_size;
  int64_t n_outputs = 0;
  for (const llm::step::MicroBatch& mb : micro_batches) n_outputs += mb.n_outputs;
  // Rank 0 takes the last stage's logits on a thread of its own (Note [Pipeline-parallel engine]).
  std::vector<float> logits;
  std::future<Status> received;
  if (rank == 0) {
    logits.resize(static_cast<size_t>(n_outputs * vocab));
    received = std::async(std::launch::async, [&]() -> Status {
      int64_t row = 0;
      for (const llm::step::MicroBatch& mb : micro_batches) {
        HXRT_RETURN_IF_ERROR(pp_logits_->recv(logits.data() + row * vocab, static_cast<size_t>(mb.n_outputs * vocab),
                                              DType::kF32, last));
        row += mb.n_outputs;
      }
      return ok_status();
    });
  }
  const auto run_stages = [&]() -> Status {
    runtime::RunOptions run_options;
    run_options.timeout = timeout;
    for (size_t i = 0; i < micro_batches.size(); ++i) {
      llm::step::MicroBatch& mb = micro_batches[i];
      const std::string what = fmt::format("pipeline stage {} (layers {}..{}), micro-batch {} of {}", rank,
                                           first_layer_, end_layer_ - 1, i + 1, micro_batches.size());
      if (rank > 0) {
        // Received straight into the stage's input tensor.
        HostTensor& hidden = mb.inputs[decoder::kHiddenIn];
        hidden.dtype = DType::kF32;
        hidden.shape = Shape{mb.n_tokens, n_embd};
        hidden.bytes.resize(static_cast<size_t>(mb.n_tokens * n_embd) * sizeof(float));
        HXRT_RETURN_IF_ERROR_CTX(
            pp_->recv(hidden.bytes.data(), static_cast<size_t>(mb.n_tokens * n_embd), DType::kF32, rank - 1), "{}",
            what);
      }
      Result<runtime::TensorMap> out = executor_->run(mb.inputs, run_options);
      if (!out.ok()) return std::move(out).take_status().with_context(what);
      const HostTensor& result = out->at(rank < last ? decoder::kHiddenOut : decoder::kLogits);
      comm::Communicator& to = rank < last ? *pp_ : *pp_logits_;
      HXRT_RETURN_IF_ERROR_CTX(
          to.send(result.bytes.data(), result.bytes.size() / sizeof(float), DType::kF32, rank < last ? rank + 1 : 0),
          "{}", what);
    }
    return ok_status();
  };
  Status stages = run_stages();
  if (!stages.ok()) {
    // The ranks waiting on this one hear why (a failed run never reached its send).
    pp_->abort(stages);
    pp_logits_->abort(stages);
  }
  if (rank == 0) {
    Status got = received.get();
    HXRT_RETURN_IF_ERROR(stages);
    HXRT_RETURN_IF_ERROR(got);
    runtime::TensorMap outputs;
    outputs.emplace(decoder::kLogits, HostTensor::f32(Shape{n_outputs, vocab}, logits));
    return outputs;
  }
  HXRT_RETURN_IF_ERROR(stages);
  return runtime::TensorMap{};
}

Status Engine::run_until_idle(hal::Duration timeout) {
  const hal::Deadline deadline = hal::Deadline::after(timeout);
  while (!idle()) {
    if (deadline.passed()) {
      return deadline_exceeded("the engine did not finish its {} waiting and {} running request(s) within {} ms",
                               waiting_.size(), running_.size(),
                               std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count());
    }
    HXRT_RETURN_IF_ERROR(step(deadline.remaining()));
  }
  return ok_status();
}

std::vector<RequestResult> Engine::take_finished() { return std::exchange(finished_, {}); }

Result<RequestResult> Engine::generate(Request request, hal::Duration timeout) {
  const hal::Deadline deadline = hal::Deadline::after(timeout);
  request.deadline = request.deadline.earliest(deadline);
  HXRT_ASSIGN_OR_RETURN(const RequestId id, submit(std::move(request)));
  const auto in_flight = [&] {
    return std::any_of(waiting_.begin(), waiting_.end(), [&](const auto& s) { return s->id == id; }) ||
           std::any_of(running_.begin(), running_.end(), [&](const auto& s) { return s->id == id; });
  };
  Status status;
  while (status.ok() && in_flight()) {
    // A step that begins past the deadline finishes the request with kDeadline (expire_deadlines) and runs the
    // others without a bound; only the forward of a step that began in time is bounded.
    status = step(deadline.passed() ? hal::kInfinite : deadline.remaining());
  }
  // Results of other requests finished on the way stay for take_finished().
  auto it = std::find_if(finished_.begin(), finished_.end(), [&](const RequestResult& r) { return r.id == id; });
  if (it == finished_.end()) {
    if (!status.ok()) return status;
    return internal_error("request {} did not finish", id);
  }
  RequestResult result = std::move(*it);
  finished_.erase(it);
  if (result.finish == FinishReason::kError || result.finish == FinishReason::kDeadline) return result.status;
  return result;
}

}  // namespace hxrt::llm
