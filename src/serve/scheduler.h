// Scheduler: one thread that owns the LLM engine and drives its continuous batching for the HTTP handlers.
//
// Handlers submit a Job (prompt tokens, sampling, stop strings) and then read its text pieces as the engine makes
// them; a job the client gave up on is cancelled (Job::cancel) and leaves the batch at the next step. Between
// steps the thread admits new jobs into the engine, so a request arriving while others decode joins the next step.
//
// Thread-safety: thread-safe. Jobs are shared between their handler and the scheduler thread; a Job's channel
// (pieces, done, result) is guarded by its mutex; the engine is touched only by the scheduler thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "hxrt/llm/llm.h"
#include "hxrt/llm/text_stream.h"
#include "serve/metrics.h"

namespace hxrt::serve {

using Clock = std::chrono::steady_clock;

enum class JobEnd : uint8_t { kStop, kLength, kCancelled, kError };

// A piece of the answer's text, with the logprobs of the tokens that completed it (when the job asked for them;
// a token whose bytes end inside a character is reported with the piece that completes the character).
struct Piece {
  std::string text;
  std::vector<llm::TokenLogprobs> logprobs;
};

struct Job {
  // Set by the handler before submit.
  std::vector<int32_t> prompt;
  int max_tokens = 16;
  llm::SamplingParams sampling;
  std::vector<std::string> stops;
  bool ignore_eos = false;
  int logprobs = -1;  // Request::logprobs
  std::optional<llm::SpeculativeOptions> speculative;  // Request::speculative
  llm::Pooling pooling = llm::Pooling::kNone;          // an embedding job (Request::pooling): no text
  std::shared_ptr<const llm::Grammar> grammar;         // Request::grammar
  bool echo = false;  // with logprobs >= 0: the prompt tokens' logprobs too (Request::prompt_logprobs)
  std::string echo_text;  // the prompt's text, put in front of the answer

  // Set by the handler at any time: the scheduler cancels the request at its next step.
  std::atomic<bool> cancel{false};

  // The channel, guarded by mutex; cv signals a new piece or the end.
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<Piece> pieces;
  bool done = false;
  JobEnd end = JobEnd::kStop;
  Status status;  // kError only
  int prompt_tokens = 0;
  int cached_prompt_tokens = 0;  // of them, from the prefix cache (set when the engine finishes it)
  int completion_tokens = 0;
  std::vector<float> embedding;  // set before done, for an embedding job
  std::vector<llm::TokenLogprobs> prompt_logprobs;  // set before done, for an echo job with logprobs: prompt[1..]

  // Scheduler-thread state.
  std::unique_ptr<llm::TextStream> stream;
  Clock::time_point submitted{};
  std::optional<Clock::time_point> last_token;
  std::vector<llm::TokenLogprobs> pending_logprobs;  // of tokens whose text is not out yet

  // Waits until a piece is ready, the job ended, or `timeout` passed; moves the pieces into *out. Returns done.
  bool wait_pieces(std::vector<Piece>* out, std::chrono::milliseconds timeout);
};

struct SchedulerOptions {
  int max_queue = 64;  // jobs waiting beyond the engine's running sequences before submit() refuses
};

class Scheduler {
 public:
  // `llm` must outlive the scheduler; its engine is driven only from the scheduler's thread from now on.
  Scheduler(llm::Llm& llm, Metrics& metrics, SchedulerOptions options);
  ~Scheduler();  // stop()s
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a job. Unavailable when the scheduler is draining or stopped, ResourceExhausted (OutOfMemory code)
  // when max_sequences running + max_queue waiting are already in flight; InvalidArgument for a request the engine
  // refuses (the job is then done with that status).
  Status submit(const std::shared_ptr<Job>& job) { return submit(std::vector<std::shared_ptr<Job>>{job}); }
  // The n choices of one request (OpenAI's n), one job each, set up alike (the first's prompt and parameters are
  // used): one engine request with n choices (Note [Forked choices] in llm/engine_outputs.cc), so the prompt is prefilled
  // once; choice c samples with seed + c. Counts n toward the capacity.
  Status submit(std::vector<std::shared_ptr<Job>> choices);
  // Refuses new jobs; the ones in flight run to their end. Returns when none is left.
  void drain();
  // Stops the thread (cancelling what still runs).
  void stop();

 private:
  void loop();
  void finish(const std::shared_ptr<Job>& job, JobEnd end, Status status, int completion_tokens);
  // The engine's callbacks for request `id` (the job of that id): a token's text into its pieces, its logprobs.
  bool on_token(llm::RequestId id, int32_t token);
  void on_logprobs(llm::RequestId id, const llm::TokenLogprobs& logprobs);

  llm::Llm& llm_;
  Metrics& metrics_;
  const SchedulerOptions options_;
  std::mutex mutex_;
  std::condition_variable cv_;                           // new work or stop, for the scheduler thread
  std::condition_variable idle_cv_;                      // in_flight_ reached 0, for drain()
  std::vector<std::vector<std::shared_ptr<Job>>> incoming_;  // guarded by mutex_: one entry per request
  int in_flight_ = 0;                                    // guarded by mutex_: submitted and not yet done
  bool draining_ = false;                                // guarded by mutex_
  bool stopping_ = false;                                // guarded by mutex_
  std::map<llm::RequestId, std::shared_ptr<Job>> jobs_;  // scheduler thread only
  std::thread thread_;
};

}  // namespace hxrt::serve
