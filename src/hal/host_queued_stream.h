// HostQueuedStream: the one implementation of the Stream contract (hxrt/hal/stream.h) for drivers whose commands
// wait in a host-side queue drained by one worker thread per stream — today the cpu driver (the worker runs the
// command itself) and the opencl driver (the worker submits it to a cl_command_queue and waits for it).
//
// Everything the contract says about ordering, sticky errors, skipping, abort/reset, synchronize, event record and
// cross-stream waits lives here, once (Note [Host-queued streams] in host_queued_stream.cc). A driver specialises
// only what differs: checking and resolving a command when it is enqueued (prepare), running a launch, a copy or
// a fill (execute_*), the timestamp of a record, and what abort must tell a running kernel (on_cancel).
//
// A driver's stream calls start() at the end of its constructor and stop() first thing in its destructor: the
// worker calls the driver's hooks, so it must not outlive the driver's part of the object.
//
// Thread-safety: thread-safe; commands enqueued by one thread keep their order. The hooks run on the worker thread,
// never under the queue lock, one command at a time.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "hal/signal_event.h"
#include "hxrt/hal/stream.h"

namespace hxrt::hal {

struct HostQueuedStreamOptions {
  // How long the worker spins for new work before sleeping, and synchronize() for completion before blocking:
  // a little CPU for lower launch latency. Zero: never spin.
  std::chrono::microseconds spin{0};
  // The driver's launch, copy and fill hooks only submit work to a device queue and return before it ran; the worker
  // calls await_device() before it counts them complete (Note [Asynchronous submission] in host_queued_stream.cc).
  bool asynchronous = false;
};

class HostQueuedStream : public Stream {
 public:
  ~HostQueuedStream() override;

  Status synchronize(Duration timeout) final;
  StreamState query() const final;
  Status status() const final;
  void abort() final;
  Status reset() final;

  // Note [Captured command lists] (stream.h).
  Status begin_capture() final;
  Result<std::shared_ptr<const CapturedCommands>> end_capture(std::vector<std::string> labels) final;
  bool capturing() const final;
  Status launch_captured(std::shared_ptr<const CapturedCommands> commands) final;

 protected:
  enum class CommandKind : uint8_t { kLaunch, kCopy, kFill, kCallback, kHostTask, kRecord, kWait, kReplay };
  struct CapturedList;

  // Driver data resolved when a command is enqueued (OpenCL: cl_mem handles of the arguments).
  class DriverPayload {
   public:
    virtual ~DriverPayload() = default;
  };

  // One side of a copy or fill: a checked view, or host memory (view.buffer == nullptr).
  struct Place {
    BufferView view;
    void* host = nullptr;
    // The host address of this side, or null when the memory is not host-addressable.
    void* host_address() const { return view.buffer != nullptr ? view.host_address() : host; }
  };

  struct Command {
    Command() = default;
    explicit Command(CommandKind k) : kind(k) {}
    CommandKind kind = CommandKind::kLaunch;
    const Kernel* kernel = nullptr;        // kLaunch
    LaunchConfig config;                   // kLaunch
    std::vector<KernelArg> args;           // kLaunch
    Place dst;                             // kCopy, kFill
    Place src;                             // kCopy
    uint64_t bytes = 0;                    // kCopy, kFill
    uint32_t pattern = 0;                  // kFill
    uint32_t pattern_bytes = 0;            // kFill
    HostCallback callback;                 // kCallback; kHostTask: on_skip (may be empty)
    HostTask task;                         // kHostTask
    std::shared_ptr<EventSignal> signal;   // kRecord, kWait
    Duration timeout = kInfinite;          // kWait
    std::unique_ptr<DriverPayload> payload;  // set by prepare()
    std::shared_ptr<const CapturedList> replay;  // kReplay
  };

  HostQueuedStream(Device* device, std::string name, HostQueuedStreamOptions options);

  void start();
  void stop();

  // ---- driver hooks ----
  // Called when a launch, copy or fill is enqueued, on the enqueuing thread: reject what this device cannot run
  // (the error is returned by the enqueue call; the stream stays healthy) and resolve what the worker will need.
  virtual Status prepare(Command& command) = 0;
  virtual Status execute_launch(Command& command) = 0;
  // Defaults: host memory on both sides (memmove; a repeated pattern).
  virtual Status execute_copy(Command& command);
  virtual Status execute_fill(Command& command);
  // The device timestamp of a record, once the commands before it completed. Default: the host clock now.
  virtual Result<int64_t> execute_record();
  // Called under the queue lock when abort() raises the cancellation flag (true) and when reset() lowers it.
  virtual void on_cancel(bool /*cancelled*/) {}
  // Asynchronous drivers only: blocks until every command submitted so far has finished on the device, and returns
  // the first failure among them (Note [Asynchronous submission]). Default: OK.
  virtual Status await_device() { return ok_status(); }

  // The flag abort() raises, for kernels that poll it.
  const std::atomic<bool>& cancel_flag() const { return cancel_; }

  // Writes `bytes` of `pattern` (1, 2 or 4 bytes, little-endian repetition) to host memory.
  static void fill_host(void* dst, uint64_t bytes, uint32_t pattern, uint32_t pattern_bytes);

 private:
  Status do_launch(const Kernel& kernel, const LaunchConfig& config, std::span<const KernelArg> args) final;
  Status do_copy(BufferView dst, BufferView src) final;
  Status do_copy_from_host(BufferView dst, const void* src) final;
  Status do_copy_to_host(void* dst, BufferView src) final;
  Status do_fill(BufferView dst, uint32_t pattern, uint32_t pattern_bytes) final;
  Status do_host_callback(HostCallback callback) final;
  Status do_host_task(HostTask task, HostCallback on_skip) final;
  Status do_record(Event& event) final;
  Status do_wait(Event& event, Duration timeout) final;

  // Appends a command unless the stream has failed (then returns the sticky error). `on_enqueued` runs under the
  // queue lock after the push (record publishes its new signal there, in order).
  Status enqueue(Command command, const std::function<void()>& on_enqueued = {});
  void worker_loop();
  // Runs one command; returns its failure (with context) or OK.
  Status execute(Command& command);
  Status execute_wait(Command& command);
  Status execute_replay(const CapturedList& list);
  Status record_now(Command& command);
  // Asynchronous drivers: awaits the device, fails the stream if that fails, and counts the commands submitted since
  // the last call complete. Nothing to do when none are outstanding.
  void settle_submitted();
  // Counts `n` more commands complete and wakes synchronize() callers whose target is reached.
  void count_completed(uint64_t n);
  // Completes a command that is skipped because the stream failed or was aborted.
  void skip(Command& command, const Status& error);
  void fail_locked(Status error);
  Status sticky_error_locked() const;
  // Spins while !done(), for at most min(spin, limit).
  template <typename Done>
  void spin_until(Done done, Duration limit) const;

  const std::chrono::microseconds spin_;
  const bool asynchronous_;
  uint64_t submitted_uncounted_ = 0;  // worker only: asynchronous commands run but not yet counted complete

  mutable std::mutex mutex_;
  std::condition_variable work_cv_;          // the worker waits for commands
  std::condition_variable idle_cv_;          // synchronize() waits for completion
  std::vector<Command> queue_;               // guarded by mutex_; the worker takes it whole
  Status error_;                             // guarded by mutex_; the first failure
  bool worker_sleeping_ = false;             // guarded by mutex_
  bool stopping_ = false;                    // guarded by mutex_
  std::shared_ptr<EventSignal> waiting_on_;  // guarded by mutex_; the signal a kWait is blocked on
  std::vector<uint64_t> sync_targets_;       // guarded by mutex_; what each synchronize() blocked on idle_cv_ awaits
  // The smallest of sync_targets_ (UINT64_MAX when none): the worker wakes the waiters only once completed_ reaches
  // it, not after every command (a decode step is ~600 commands).
  std::atomic<uint64_t> wake_at_{UINT64_MAX};

  bool capturing_ = false;         // guarded by mutex_
  std::vector<Command> captured_;  // guarded by mutex_; what the capture in progress recorded

  std::atomic<uint64_t> enqueued_{0};
  std::atomic<uint64_t> completed_{0};
  std::atomic<bool> failed_{false};
  std::atomic<bool> cancel_{false};

  std::thread worker_;
};

}  // namespace hxrt::hal
