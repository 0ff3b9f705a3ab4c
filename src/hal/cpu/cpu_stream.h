// CPU streams: one worker thread per stream draining an in-order command queue.
//
// The worker spins briefly for new work before sleeping (CpuDriverOptions::worker_spin), trading a little CPU for
// launch latency. Commands are executed outside the queue lock; host callbacks too (stream.h's rule that callbacks
// are never called under a queue lock).
//
// Thread-safety: thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "hal/cpu/cpu_event.h"
#include "hxrt/base/thread_pool.h"
#include "hxrt/hal/cpu/cpu_kernel.h"
#include "hxrt/hal/stream.h"

namespace hxrt::hal::cpu {

class CpuStream final : public Stream {
 public:
  CpuStream(Device* device, std::string name, ThreadPool* pool, std::chrono::microseconds spin);
  ~CpuStream() override;

  Status synchronize(Duration timeout) override;
  StreamState query() const override;
  Status status() const override;
  void abort() override;
  Status reset() override;

 protected:
  Status do_launch(const Kernel& kernel, const LaunchConfig& config, std::span<const KernelArg> args) override;
  Status do_copy(BufferView dst, BufferView src) override;
  Status do_copy_from_host(BufferView dst, const void* src) override;
  Status do_copy_to_host(void* dst, BufferView src) override;
  Status do_fill(BufferView dst, uint32_t pattern, uint32_t pattern_bytes) override;
  Status do_host_callback(HostCallback callback) override;
  Status do_record(Event& event) override;
  Status do_wait(Event& event, Duration timeout) override;

 private:
  enum class Op : uint8_t { kLaunch, kCopy, kFill, kCallback, kRecord, kWait };
  struct Command {
    Command() = default;
    explicit Command(Op o) : op(o) {}
    Op op = Op::kLaunch;
    const CpuKernel* kernel = nullptr;      // kLaunch
    LaunchConfig config;                    // kLaunch
    std::vector<KernelArg> args;            // kLaunch
    void* dst = nullptr;                    // kCopy, kFill
    const void* src = nullptr;              // kCopy
    uint64_t bytes = 0;                     // kCopy, kFill
    uint32_t pattern = 0;                   // kFill
    uint32_t pattern_bytes = 0;             // kFill
    HostCallback callback;                  // kCallback
    std::shared_ptr<EventSignal> signal;    // kRecord, kWait
    Duration timeout = kInfinite;           // kWait
  };

  // Appends a command unless the stream has failed (then returns the sticky error). `on_enqueued` runs under the
  // queue lock after the push (used by record to publish the new signal in order).
  Status enqueue(Command command, const std::function<void()>& on_enqueued = {});
  void worker_loop();
  // Runs one command; returns its failure (already carrying context) or OK.
  Status execute(Command& command);
  // Completes a command that is skipped because the stream failed or was aborted.
  void skip(Command& command, const Status& error);
  void fail_locked(Status error);
  Status sticky_error_locked() const;

  ThreadPool* pool_;
  const std::chrono::microseconds spin_;

  mutable std::mutex mutex_;
  std::condition_variable work_cv_;       // worker waits for commands
  std::condition_variable idle_cv_;       // synchronize waits for completion
  std::deque<Command> queue_;             // guarded by mutex_
  Status error_;                          // guarded by mutex_; first failure
  bool worker_sleeping_ = false;          // guarded by mutex_
  bool stopping_ = false;                 // guarded by mutex_
  std::atomic<int> sync_waiters_{0};      // synchronize() callers blocked on idle_cv_
  std::shared_ptr<EventSignal> waiting_on_;  // guarded by mutex_; the signal a kWait is blocked on

  std::atomic<uint64_t> enqueued_{0};
  std::atomic<uint64_t> completed_{0};
  std::atomic<bool> failed_{false};
  std::atomic<bool> cancel_{false};

  std::thread worker_;
};

}  // namespace hxrt::hal::cpu
