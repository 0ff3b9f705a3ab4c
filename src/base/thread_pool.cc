#include "hxrt/base/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>

#include "hxrt/base/check.h"

namespace hxrt {
namespace {

// Chunks per thread: more than one evens out imbalance between chunks and between busy and idle threads.
constexpr int64_t kChunksPerThread = 4;

// State of one parallel_for, shared with helper tasks that may start after the call has returned (they then find
// no chunk left and exit without touching the body).
struct Job {
  void* ctx;
  void (*fn)(void*, int64_t, int64_t);
  int64_t n;
  int64_t chunk;
  int64_t chunks;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  std::mutex mutex;
  std::condition_variable finished;

  // Runs chunks until none is left; returns how many this thread ran.
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

}  // namespace

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)) {
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

void ThreadPool::worker_loop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping and drained
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
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
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (int64_t i = 0; i < helpers; ++i) tasks_.emplace_back([job] { job->run_chunks(); });
  }
  if (helpers == 1) {
    wake_.notify_one();
  } else {
    wake_.notify_all();
  }
  job->run_chunks();
  if (job->done.load(std::memory_order_acquire) == job->chunks) return;
  std::unique_lock<std::mutex> lock(job->mutex);
  job->finished.wait(lock, [&] { return job->done.load(std::memory_order_acquire) == job->chunks; });
}

}  // namespace hxrt
