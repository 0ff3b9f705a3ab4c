// Stream: an in-order asynchronous queue of device work.
//
// Commands (launch, copy, fill, host callback, event record, event wait) run in the order enqueued; enqueueing
// returns at once. Streams of one device run concurrently; order between streams comes only from events.
//
// Errors are sticky: the first command that fails puts the stream in the failed state with that Status (plus a
// context line naming the command). Commands still queued are skipped — events they would record fail with the
// same error, host callbacks are called with it — and every later enqueue, synchronize and status() reports it
// until reset(). abort() discards queued work (status Aborted) and interrupts a wait in progress; a kernel already
// running finishes, or stops early if it polls its cancellation flag. Nothing blocks forever: every wait takes a
// timeout, and destroying a stream waits for its work to finish (call abort() first to discard it).
//
// Lifetimes: buffers, kernels, events and host memory named by a command must stay valid until it has run.
//
// The public methods validate their arguments (views in range, sizes equal, objects of this device), so backends
// (the do_* hooks) receive checked calls. Thread-safety: thread-safe; commands enqueued by one thread keep their
// order.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "hxrt/base/status.h"
#include "hxrt/hal/buffer.h"
#include "hxrt/hal/event.h"
#include "hxrt/hal/kernel.h"
#include "hxrt/hal/types.h"

namespace hxrt::hal {

class Device;

struct StreamOptions {
  std::string name;  // shown in traces and errors; defaults to "stream<N>"
};

// query(): whether all enqueued work has finished, and the sticky status.
struct StreamState {
  bool idle = true;
  uint64_t pending_commands = 0;
  Status status;
};

// Called on a stream's thread after the preceding commands ran, with OK or the stream's error. Must not block on
// the same stream.
using HostCallback = std::function<void(const Status&)>;

// Note [Host tasks]
// A host task is host work that is part of the stream's order and can fail: a collective over MPI, a host-side
// reduction. It runs on the stream's thread after the preceding commands completed (as a host callback does), and
// its non-OK return fails the stream as a failed launch would. It may take long, so it polls `cancelled()` (raised
// by abort()) and returns Aborted when it is. A stream that failed or was aborted before the task's turn skips it and
// calls its `on_skip` (if any) with the error instead: a collective tells its peers there that this rank will not
// come. Unlike host callbacks, host tasks can be captured and replayed (they name no event).
struct HostTaskContext {
  const std::atomic<bool>* cancel = nullptr;
  bool cancelled() const { return cancel != nullptr && cancel->load(std::memory_order_relaxed); }
};
using HostTask = std::function<Status(const HostTaskContext&)>;

// Note [Captured command lists]
// A stream can record work once and replay it many times, as CUDA graphs and ACL model-run task lists do: between
// begin_capture() and end_capture() the stream's launches, copies, fills and host callbacks are checked as usual
// (a bad one fails its enqueue) and recorded in order instead of running, and so are host tasks (Note [Host tasks]);
// records, waits and host callbacks cannot be captured (Unimplemented: cross-stream order and host work belong to the replaying caller).
// launch_captured() enqueues the whole list as one command, which runs the recorded commands in order on the stream —
// one queue operation instead of one per command, with no enqueue-side work per command. The first failing command
// fails the stream as a launch would, its error saying which command of the list it was. What the commands name
// (buffers, kernels, host memory, launch arguments) must stay valid, and unchanged in address, as long as the list may
// be replayed: a replay's parameters are the contents of that memory. A list replays only on the stream that captured
// it.
class CapturedCommands {
 public:
  virtual ~CapturedCommands() = default;
  virtual size_t size() const = 0;
};

class Stream {
 public:
  virtual ~Stream() = default;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  Device& device() const { return *device_; }
  const std::string& name() const { return name_; }

  Status launch(const Kernel& kernel, const LaunchConfig& config, std::span<const KernelArg> args);
  // Device-to-device copy; dst.size must equal src.size. Buffers of this device, or host-addressable buffers.
  Status copy(BufferView dst, BufferView src);
  // Host memory must stay valid (src) or untouched (dst) until the command ran.
  Status copy_from_host(BufferView dst, const void* src);
  Status copy_to_host(void* dst, BufferView src);
  // Fills dst with a repeated 1, 2 or 4-byte pattern; dst.size must be a multiple of pattern_bytes.
  Status fill(BufferView dst, uint32_t pattern, uint32_t pattern_bytes);
  Status host_callback(HostCallback callback);
  // Note [Host tasks]. `on_skip` is optional. Unimplemented on a stream whose driver has no host thread.
  Status host_task(HostTask task, HostCallback on_skip = {});
  Status record(Event& event);
  // Later commands of this stream run only after `event`'s latest record (as of this call) completes. If that
  // record fails, this stream fails with its error. If it does not complete within `timeout` of the wait starting
  // on the device, this stream fails with DeadlineExceeded. FailedPrecondition for an event never recorded.
  Status wait(Event& event, Duration timeout = kInfinite);

  // Note [Captured command lists]. Default: Unimplemented (the stream cannot capture; run the work directly).
  virtual Status begin_capture();
  // Ends the capture and returns what was recorded (an empty list when nothing was). `labels`, when there is one
  // per recorded command (else they are dropped), name the commands: a replay's failure says which one failed.
  // FailedPrecondition when not capturing.
  virtual Result<std::shared_ptr<const CapturedCommands>> end_capture(std::vector<std::string> labels = {});
  virtual bool capturing() const { return false; }
  virtual Status launch_captured(std::shared_ptr<const CapturedCommands> commands);

  // Blocks until all enqueued work ran; returns the sticky status, or DeadlineExceeded (work keeps running).
  virtual Status synchronize(Duration timeout = kInfinite) = 0;
  virtual StreamState query() const = 0;
  virtual Status status() const = 0;
  // Discards queued work and interrupts a wait in progress; the stream is failed with Aborted until reset().
  virtual void abort() = 0;
  // Discards queued work, waits for a running command to finish, and clears the sticky error.
  virtual Status reset() = 0;

 protected:
  Stream(Device* device, std::string name) : device_(device), name_(std::move(name)) {}

  virtual Status do_launch(const Kernel& kernel, const LaunchConfig& config, std::span<const KernelArg> args) = 0;
  virtual Status do_copy(BufferView dst, BufferView src) = 0;
  virtual Status do_copy_from_host(BufferView dst, const void* src) = 0;
  virtual Status do_copy_to_host(void* dst, BufferView src) = 0;
  virtual Status do_fill(BufferView dst, uint32_t pattern, uint32_t pattern_bytes) = 0;
  virtual Status do_host_callback(HostCallback callback) = 0;
  virtual Status do_host_task(HostTask task, HostCallback on_skip);
  virtual Status do_record(Event& event) = 0;
  virtual Status do_wait(Event& event, Duration timeout) = 0;

 private:
  Status check_view(const BufferView& view, const char* what) const;

  Device* device_;
  std::string name_;
};

}  // namespace hxrt::hal
