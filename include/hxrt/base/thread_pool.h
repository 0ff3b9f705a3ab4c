// ThreadPool: the intra-op worker pool that CPU kernels split their loops over.
//
// One pool is shared by every stream of a CPU device, so two streams running kernels at once share the cores
// instead of oversubscribing them. parallel_for is work-sharing with the caller participating: the calling thread
// takes chunks too, so a parallel_for issued from inside a pool task (nested) or while every worker is busy still
// finishes. Chunks are handed out dynamically from an atomic counter.
//
// Thread-safety: thread-safe; parallel_for may be called from any number of threads at once.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace hxrt {

class ThreadPool {
 public:
  // `num_threads` is the total parallelism including the calling thread; the pool starts num_threads - 1 workers.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

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
  using Trampoline = void (*)(void*, int64_t, int64_t);
  void parallel_for_impl(int64_t n, int64_t grain, void* ctx, Trampoline fn);
  void worker_loop();

  int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> tasks_;  // guarded by mutex_
  bool stopping_ = false;                    // guarded by mutex_
};

}  // namespace hxrt
