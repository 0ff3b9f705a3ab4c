// ThreadPool: the intra-op worker pool that CPU kernels split their loops over.
//
// One pool is shared by every stream of a CPU device, so two streams running kernels at once share the cores
// instead of oversubscribing them. parallel_for is work-sharing with the caller participating: the calling thread
// takes chunks too, so a parallel_for issued from inside a pool task (nested) or while every worker is busy still
// finishes. Chunks are handed out dynamically from an atomic counter.
//
// Note [Spinning pool]: a decode step is ~200 small parallel loops of 5–50 µs each, a few µs apart. Waking a
// sleeping worker through a futex costs about as much as the loop itself on these machines (a 2-thread GEMV was
// slower than a 1-thread one), so an idle worker polls for new work for `spin` before it sleeps, and the caller polls
// for the loop's completion for as long before it blocks. Spinning yields the core between polls' batches, so a
// thread that has real work on the same core (the host thread of the engine) still runs. spin = 0 is the plain
// sleep/wake pool.
//
// Thread-safety: thread-safe; parallel_for may be called from any number of threads at once.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace hxrt {

class ThreadPool {
 public:
  static constexpr std::chrono::microseconds kDefaultSpin{200};

  // `num_threads` is the total parallelism including the calling thread; the pool starts num_threads - 1 workers.
  // `spin`: how long an idle worker polls for work, and a caller for completion, before blocking.
  explicit ThreadPool(int num_threads, std::chrono::microseconds spin = kDefaultSpin);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }
  std::chrono::microseconds spin() const { return spin_; }

  // Calls body(begin, end) for disjoint chunks covering [0, n), each at least `grain` long (except the last), and
  // returns when all have run. body must not throw.
  template <typename Body>
  void parallel_for(int64_t n, int64_t grain, Body&& body) {
    using Fn = std::remove_reference_t<Body>;
    parallel_for_impl(n, grain, &body, [](void* ctx, int64_t begin, int64_t end) {
      (*static_cast<Fn*>(ctx))(begin, end);
    });
  }

  // HXRT_NUM_THREADS when set to a positive integer, else the number of hardware threads.
  static int default_thread_count();

 private:
  struct Job;
  using Trampoline = void (*)(void*, int64_t, int64_t);
  void parallel_for_impl(int64_t n, int64_t grain, void* ctx, Trampoline fn);
  void worker_loop();
  std::shared_ptr<Job> runnable_job_locked() const;

  const int num_threads_;
  const std::chrono::microseconds spin_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::shared_ptr<Job>> jobs_;  // guarded by mutex_: loops that may have chunks left
  int sleeping_ = 0;                        // guarded by mutex_: workers blocked on wake_
  bool stopping_ = false;                   // guarded by mutex_
  std::atomic<uint64_t> posted_{0};         // bumped (under mutex_) by every parallel_for that posts a job
};

}  // namespace hxrt
