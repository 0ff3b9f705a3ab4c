#include "serve/scheduler.h"

#include <fmt/format.h>

namespace hxrt::serve {

bool Job::wait_pieces(std::vector<Piece>* out, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex);
  cv.wait_for(lock, timeout, [&] { return done || !pieces.empty(); });
  while (!pieces.empty()) {
    out->push_back(std::move(pieces.front()));
    pieces.pop_front();
  }
  return done;
}

Scheduler::Scheduler(llm::Llm& llm, Metrics& metrics, SchedulerOptions options)
    : llm_(llm), metrics_(metrics), options_(options), thread_([this] { loop(); }) {}

Scheduler::~Scheduler() {
  stop();
}

Status Scheduler::submit(std::vector<std::shared_ptr<Job>> choices) {
  if (choices.empty()) return invalid_argument("a request needs at least one choice");
  std::lock_guard<std::mutex> lock(mutex_);
  if (draining_ || stopping_) return unavailable("the server is shutting down");
  const int capacity = llm_.engine().options().max_sequences + options_.max_queue;
  const int n = static_cast<int>(choices.size());
  if (in_flight_ + n > capacity) {
    return out_of_memory("the server is at capacity: {} requests in flight ({} decoding at once + {} queued)",
                         in_flight_, llm_.engine().options().max_sequences, options_.max_queue);
  }
  for (const std::shared_ptr<Job>& job : choices) job->submitted = Clock::now();
  in_flight_ += n;
  incoming_.push_back(std::move(choices));
  cv_.notify_one();
  return ok_status();
}

void Scheduler::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  draining_ = true;
  idle_cv_.wait(lock, [&] { return in_flight_ == 0; });
}

void Scheduler::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    cv_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
}

void Scheduler::finish(const std::shared_ptr<Job>& job, JobEnd end, Status status, int completion_tokens) {
  {
    std::lock_guard<std::mutex> lock(job->mutex);
    job->done = true;
    job->end = end;
    job->status = std::move(status);
    job->completion_tokens = completion_tokens;
    job->cv.notify_all();
  }
  metrics_.tokens(job->prompt_tokens, completion_tokens, job->cached_prompt_tokens);
  std::lock_guard<std::mutex> lock(mutex_);
  if (--in_flight_ == 0) idle_cv_.notify_all();
}

void Scheduler::on_logprobs(llm::RequestId id, const llm::TokenLogprobs& logprobs) {
  if (auto it = jobs_.find(id); it != jobs_.end()) it->second->pending_logprobs.push_back(logprobs);
}

bool Scheduler::on_token(llm::RequestId id, int32_t token) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return false;
  Job* raw = it->second.get();
  if (raw->cancel.load(std::memory_order_relaxed)) return false;
  const Clock::time_point now = Clock::now();
  if (!raw->last_token) {
    metrics_.time_to_first_token(std::chrono::duration<double>(now - raw->submitted).count());
  } else {
    metrics_.inter_token_latency(std::chrono::duration<double>(now - *raw->last_token).count());
  }
  raw->last_token = now;
  if (llm_.tokenizer().is_eog(token) && !raw->ignore_eos) {  // the engine ends the request; EOS is not text
    raw->pending_logprobs.clear();
    return true;
  }
  Result<std::string> piece = raw->stream->push(token);
  if (!piece.ok()) return false;
  if (!piece->empty()) {
    std::lock_guard<std::mutex> lock(raw->mutex);
    raw->pieces.push_back(Piece{.text = std::move(*piece), .logprobs = std::move(raw->pending_logprobs)});
    raw->pending_logprobs.clear();
    raw->cv.notify_all();
  }
  if (raw->stream->stopped()) raw->pending_logprobs.clear();  // tokens inside the stop string: no text
  return !raw->stream->stopped();
}

void Scheduler::loop() {
  llm::Engine& engine = llm_.engine();
  const llm::Tokenizer& tokenizer = llm_.tokenizer();
  while (true) {
    std::vector<std::vector<std::shared_ptr<Job>>> incoming;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || !incoming_.empty() || !engine.idle(); });
      if (stopping_) break;
      incoming.swap(incoming_);
    }
    // Admit: the engine queues them; its scheduler batches them with what already runs.
    for (const std::vector<std::shared_ptr<Job>>& choices : incoming) {
      const std::shared_ptr<Job>& job = choices.front();
      for (const std::shared_ptr<Job>& choice : choices) {
        choice->stream = std::make_unique<llm::TextStream>(tokenizer, choice->stops);
        choice->prompt_tokens = static_cast<int>(job->prompt.size());
      }
      llm::Request request;
      request.prompt = job->prompt;
      request.n = static_cast<int>(choices.size());
      request.max_new_tokens = job->max_tokens;
      request.sampling = job->sampling;
      request.ignore_eos = job->ignore_eos;
      request.logprobs = job->logprobs;
      request.speculative = job->speculative;
      request.pooling = job->pooling;
      request.grammar = job->grammar;
      request.prompt_logprobs = job->echo && job->logprobs >= 0;
      // The engine's vocabulary trie, built once, on this thread (the one that drives the engine).
      if (job->grammar) {
        if (Status enabled = llm_.enable_grammars(); !enabled.ok()) {
          for (const std::shared_ptr<Job>& choice : choices) finish(choice, JobEnd::kError, enabled, 0);
          continue;
        }
      }
      if (job->logprobs >= 0) {
        request.on_logprobs = [this](llm::RequestId id, const llm::TokenLogprobs& lp) { on_logprobs(id, lp); };
      }
      request.on_token = [this](llm::RequestId id, int32_t token) { return on_token(id, token); };
      Result<llm::RequestId> id = engine.submit(std::move(request));
      if (!id.ok()) {
        for (const std::shared_ptr<Job>& choice : choices) finish(choice, JobEnd::kError, id.status(), 0);
        continue;
      }
      for (size_t c = 0; c < choices.size(); ++c) jobs_.emplace(*id + static_cast<llm::RequestId>(c), choices[c]);
    }
    // Cancellations from handlers whose clients went away.
    for (const auto& [id, job] : jobs_) {
      if (job->cancel.load(std::memory_order_relaxed)) engine.cancel(id).ignore();
    }
    if (!engine.idle()) {
      Status step = engine.step();
      (void)step;  // a failed forward fails its requests; their results carry the Status
    }
    for (llm::RequestResult& result : engine.take_finished()) {
      auto it = jobs_.find(result.id);
      if (it == jobs_.end()) continue;
      std::shared_ptr<Job> job = std::move(it->second);
      jobs_.erase(it);
      const bool stopped_by_string = job->stream->stopped();
      JobEnd end = JobEnd::kStop;
      switch (result.finish) {
        case llm::FinishReason::kLength: end = JobEnd::kLength; break;
        case llm::FinishReason::kEos:
        case llm::FinishReason::kStopToken: end = JobEnd::kStop; break;
        case llm::FinishReason::kCallback: end = stopped_by_string ? JobEnd::kStop : JobEnd::kCancelled; break;
        case llm::FinishReason::kCancelled:
        case llm::FinishReason::kDeadline: end = JobEnd::kCancelled; break;
        case llm::FinishReason::kError: end = JobEnd::kError; break;
      }
      if (end == JobEnd::kStop || end == JobEnd::kLength) {
        std::string rest = job->stream->finish();
        if (!rest.empty() || !job->pending_logprobs.empty()) {
          std::lock_guard<std::mutex> lock(job->mutex);
          job->pieces.push_back(Piece{.text = std::move(rest), .logprobs = std::move(job->pending_logprobs)});
        }
      }
      job->embedding = std::move(result.embedding);  // read by the handler once the job is done
      job->prompt_logprobs = std::move(result.prompt_top_logprobs);
      job->cached_prompt_tokens = result.cached_prompt_tokens;
      finish(job, end, result.status, static_cast<int>(result.tokens.size()));
    }
    const kv::KvCacheStats kv = engine.cache().stats();
    metrics_.set_gauges(Gauges{.running = engine.running(),
                               .waiting = engine.waiting(),
                               .kv_blocks_used = kv.used_blocks,
                               .kv_blocks_free = kv.free_blocks,
                               .kv_blocks_reclaimable = kv.reclaimable_blocks,
                               .preemptions = engine.stats().preemptions});
  }
  // Stopping: whatever still runs is cancelled and its handler told.
  for (const auto& [id, job] : jobs_) {
    engine.cancel(id).ignore();
    finish(job, JobEnd::kCancelled, aborted("the server stopped"), 0);
  }
  jobs_.clear();
  engine.take_finished();
  std::vector<std::vector<std::shared_ptr<Job>>> left;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    left.swap(incoming_);
  }
  for (const std::vector<std::shared_ptr<Job>>& choices : left) {
    for (const std::shared_ptr<Job>& job : choices) finish(job, JobEnd::kCancelled, aborted("the server stopped"), 0);
  }
}

}  // namespace hxrt::serve
