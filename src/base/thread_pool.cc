#include "hxrt/base/thread_pool.h"

#include <algorithm>
#include <cstdlib>

#include "hxrt/base/check.h"
#include "hxrt/base/spin.h"

namespace hxrt {
namespace {

// Chunks per thread: more than one evens out imbalance between chunks and between busy and idle threads.
constexpr int64_t kChunksPerThread = 4;
// Polls between clock reads and yields while spinning (Note [Spinning pool]).
constexpr int kPollsPerCheck = 64;

// Polls done() for at most `spin`; true when it became true.
template <typename Done>
bool spin_until(Done done, std::chrono::microseconds spin) {
  if (spin.count() <= 0) return done();
  const auto end = std::chrono::steady_clock::now() + spin;
  for (;;) {
    for (int i = 0; i < kPollsPerCheck; ++i) {
      if (done()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= end) return done();
    std::this_thread::yield();
  }
}

}  // namespace

// State of one parallel_for, shared with workers that may pick it up after the call has returned (they then find
// no chunk left and drop it without touching the body).
struct ThreadPool::Job {
  void* ctx;
  Trampoline fn;
  int64_t n;
  int64_t chunk;
  int64_t chunks;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  std::mutex mutex;
  std::condition_variable finished;

  bool has_chunks() const { return next.load(std::memory_order_relaxed) < chunks; }
  bool complete() const { return done.load(std::memory_order_acquire) == chunks; }

  // Runs chunks until none is left.
  void run_chunks() {
    int64_t ran = 0;
    for (;;) {
      const int64_t index = next.fetch_add(1, std::memory_order_relaxed);
      if (index >= chunks) break;
      const int64_t begin = index * chunk;
      fn(ctx, begin, std::min(n, begin + chunk));
      ++ran;
    }
    if (ran > 0 && done.fetch_add(ran, std::memory_order_acq_rel) + ran == chunks) {
      std::lock_guard<std::mutex> lock(mutex);
      finished.notify_all();
    }
  }
};

ThreadPool::ThreadPool(int num_threads, std::chrono::microseconds spin)
    : num_threads_(std::max(1, num_threads)), spin_(std::max(std::chrono::microseconds{0}, spin)) {
  workers_.reserve(static_cast<size_t>(num_threads_ - 1));
  for (int i = 0; i + 1 < num_threads_; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

int ThreadPool::default_thread_count() {
  if (const char* env = std::getenv("HXRT_NUM_THREADS")) {
    char* end = nullptr;
    const long value = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && value > 0 && value <= 4096) return static_cast<int>(value);
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

std::shared_ptr<ThreadPool::Job> ThreadPool::runnable_job_locked() const {
  for (const std::shared_ptr<Job>& job : jobs_) {
    if (job->has_chunks()) return job;
  }
  return nullptr;
}

void ThreadPool::worker_loop() {
  for (;;) {
    // Read before looking for a job: a job posted after the look changes it, so the spin below sees it.
    const uint64_t seen = posted_.load(std::memory_order_acquire);
    std::shared_ptr<Job> job;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job = runnable_job_locked();
      if (job == nullptr && stopping_) return;
    }
    if (job != nullptr) {
      job->run_chunks();
      continue;
    }
    if (spin_until([&] { return posted_.load(std::memory_order_acquire) != seen; }, spin_)) continue;
    std::unique_lock<std::mutex> lock(mutex_);
    ++sleeping_;
    wake_.wait(lock, [&] { return stopping_ || runnable_job_locked() != nullptr; });
    --sleeping_;
  }
}

void ThreadPool::parallel_for_impl(int64_t n, int64_t grain, void* ctx, Trampoline fn) {
  HXRT_CHECK(n >= 0 && grain >= 0, "parallel_for(n={}, grain={})", n, grain);
  if (n == 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t max_chunks = std::min<int64_t>((n + grain - 1) / grain, num_threads_ * kChunksPerThread);
  if (max_chunks <= 1 || workers_.empty()) {
    fn(ctx, 0, n);
    return;
  }
  auto job = std::make_shared<Job>();
  job->ctx = ctx;
  job->fn = fn;
  job->n = n;
  job->chunk = (n + max_chunks - 1) / max_chunks;
  job->chunks = (n + job->chunk - 1) / job->chunk;
  const int64_t helpers = std::min<int64_t>(job->chunks - 1, static_cast<int64_t>(workers_.size()));
  int64_t to_wake = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(job);
    posted_.fetch_add(1, std::memory_order_release);
    to_wake = std::min<int64_t>(helpers, sleeping_);
  }
  for (int64_t i = 0; i < to_wake; ++i) wake_.notify_one();
  job->run_chunks();
  {
    // Every chunk is claimed now: no worker needs to find this job any more.
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.erase(std::find(jobs_.begin(), jobs_.end(), job));
  }
  if (spin_until([&] { return job->complete(); }, spin_)) return;
  std::unique_lock<std::mutex> lock(job->mutex);
  job->finished.wait(lock, [&] { return job->complete(); });
}

}  // namespace hxrt
