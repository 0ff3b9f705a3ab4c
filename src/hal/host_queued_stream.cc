#include "hal/host_queued_stream.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "hxrt/base/check.h"
#include "hxrt/base/logging.h"
#include "hxrt/base/spin.h"
#include "hxrt/hal/device.h"

namespace hxrt::hal {
namespace {

int64_t to_ms(Duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }

// Asynchronous drivers: submitted commands are awaited at least this often while the queue never runs dry.
constexpr uint64_t kMaxUnsettled = 256;

}  // namespace

// Note [Host-queued streams]
// Commands wait in a host-side queue until the commands before them have completed; one worker thread per stream
// takes the queued commands (all of them at once, one lock per batch) and runs them one by one through the
// driver's execute_* hooks (each returns only when its command is done on the device, except on an asynchronous
// driver: Note [Asynchronous submission]). So at any moment at most one command of a stream is running, and it
// is the only one abort() cannot discard (a kernel that polls the cancellation flag stops early). From this:
//  - Sticky errors: the first command that fails (or whose enqueue-time prepare() passed but whose execution
//    failed) fails the stream; later commands are skipped on the host — records fail with the error, callbacks
//    are called with it — and every later enqueue and synchronize reports it until reset().
//  - Cross-stream waits are host-side waits on the recording stream's EventSignal, bounded by the wait's timeout
//    and interrupted by abort(), so a failed or aborted record fails the waiter with a chain naming both streams.
//    Any two host-queued streams can wait on each other's events, whatever their devices (the heterogeneous split
//    relies on this).
//  - Completion is counted, not polled: synchronize() waits until the number of completed commands reaches the
//    number enqueued when it was called; the worker notifies only when a synchronize() is waiting.
//  - The worker sleeps on a condition variable when the queue is empty, after spinning for `spin` (the CPU device
//    trades a little CPU for launch latency); an enqueue wakes it only if it is asleep.
//  - Host callbacks and the driver's hooks run on the worker, never under the queue lock (stream.h's rule).

// Note [Asynchronous submission]
// A GPU queue runs thousands of small kernels a second only if the host does not wait for each one, so an
// asynchronous driver (cuda) has its launch, copy, fill and replay hooks submit the work to its device queue and
// return at once. The worker then counts those commands complete only after await_device() says the device
// finished them, which it calls:
//  - before anything that must observe them done: an event record (its timestamp and its waiters), a host callback,
//    a cross-stream wait, and a command skipped because the stream failed;
//  - when the queue is empty after a batch, so that synchronize() returns only once the device is idle, and, while
//    the queue stays full, once a synchronize() waits for submitted work or every kMaxUnsettled commands.
// A failure await_device() reports (a kernel that stored an error code, a device fault) fails the stream as a
// synchronous command's failure would; it cannot name which of the commands since the last await failed, so the
// driver's message names the last one and says how many there were (a driver option makes every launch await, for
// exact attribution). abort() discards what has not been submitted; work already submitted runs to its end, or stops
// early where kernels poll the cancellation word.

HostQueuedStream::HostQueuedStream(Device* device, std::string name, HostQueuedStreamOptions options)
    : Stream(device, std::move(name)), spin_(options.spin), asynchronous_(options.asynchronous) {}

HostQueuedStream::~HostQueuedStream() {
  HXRT_CHECK(!worker_.joinable(), "stream '{}': the driver's destructor must call stop()", name());
}

void HostQueuedStream::start() {
  HXRT_CHECK(!worker_.joinable(), "stream '{}' started twice", name());
  worker_ = std::thread([this] { worker_loop(); });
}

void HostQueuedStream::stop() {
  if (!worker_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_cv_.notify_one();
  worker_.join();
}

Status HostQueuedStream::sticky_error_locked() const {
  Status error = error_;
  error.with_context(fmt::format("stream '{}' failed earlier and rejects work until reset()", name()));
  return error;
}

void HostQueuedStream::fail_locked(Status error) {
  if (error_.ok()) error_ = std::move(error);
  failed_.store(true, std::memory_order_release);
}

// A captured list: commands recorded by one stream, replayed by it (Note [Captured command lists]).
struct HostQueuedStream::CapturedList final : CapturedCommands {
  const HostQueuedStream* owner = nullptr;
  std::vector<Command> commands;
  std::vector<std::string> labels;  // empty, or one per command
  size_t size() const override { return commands.size(); }
};

Status HostQueuedStream::enqueue(Command command, const std::function<void()>& on_enqueued) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failed_.load(std::memory_order_relaxed)) return sticky_error_locked();
  if (stopping_) return failed_precondition("stream '{}' is being destroyed", name());
  if (capturing_) {
    switch (command.kind) {
      case CommandKind::kRecord:
      case CommandKind::kWait:
      case CommandKind::kCallback:
      case CommandKind::kReplay:
        return unimplemented(
            "stream '{}' is capturing: event records, waits, host callbacks and replays cannot be "
            "captured (Note [Captured command lists])",
            name());
      default: captured_.push_back(std::move(command)); return ok_status();
    }
  }
  queue_.push_back(std::move(command));
  enqueued_.fetch_add(1, std::memory_order_release);
  if (on_enqueued) on_enqueued();
  if (worker_sleeping_) work_cv_.notify_one();
  return ok_status();
}

template <typename Done>
void HostQueuedStream::spin_until(Done done, Duration limit) const {
  if (spin_.count() <= 0 || done()) return;
  const auto end = std::chrono::steady_clock::now() + std::min<Duration>(spin_, limit);
  while (!done() && std::chrono::steady_clock::now() < end) cpu_relax();
}

void HostQueuedStream::worker_loop() {
  uint64_t dequeued = 0;
  std::vector<Command> batch;  // swapped with queue_, so both keep their capacity: no allocation per command
  for (;;) {
    // A command arriving within the spin window starts without a wake-up.
    spin_until([&] { return enqueued_.load(std::memory_order_acquire) != dequeued; }, spin_);
    {
      std::unique_lock<std::mutex> lock(mutex_);
      while (queue_.empty() && !stopping_) {
        worker_sleeping_ = true;
        work_cv_.wait(lock);
        worker_sleeping_ = false;
      }
      if (queue_.empty()) return;  // stopping, and everything enqueued has run
      batch.swap(queue_);
    }
    for (Command& command : batch) {
      ++dequeued;
      const bool submits = asynchronous_ && (command.kind == CommandKind::kLaunch || command.kind == CommandKind::kCopy ||
                                             command.kind == CommandKind::kFill || command.kind == CommandKind::kReplay);
      // A command that must observe earlier submissions done waits for them first; a failure found there skips it.
      if (!submits) settle_submitted();
      // Checked per command, so an abort() or a failure skips the rest of the batch too.
      if (failed_.load(std::memory_order_acquire) || cancel_.load(std::memory_order_relaxed)) {
        settle_submitted();
        Status error;
        {
          std::lock_guard<std::mutex> lock(mutex_);
          error = error_;
        }
        skip(command, error);
      } else if (Status status = execute(command); !status.ok()) {
        HXRT_LOG(kDebug, "stream '{}' failed: {}", name(), status.to_string());
        std::lock_guard<std::mutex> lock(mutex_);
        fail_locked(std::move(status));
      }
      command = Command{};  // release buffers, callback and signal before reporting completion
      if (submits && !failed_.load(std::memory_order_acquire)) {
        ++submitted_uncounted_;  // counted once the device finished it
      } else {
        settle_submitted();  // earlier submissions first: completion is counted in order
        count_completed(1);
      }
    }
    batch.clear();
    if (submitted_uncounted_ > 0) {
      bool more = false;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        more = !queue_.empty();
      }
      // Settled when the queue ran dry, when a synchronize() waits for commands already submitted, and every
      // kMaxUnsettled commands, so that a producer that keeps the queue full delays neither waiters nor errors.
      const bool awaited = wake_at_.load(std::memory_order_seq_cst) <=
                           completed_.load(std::memory_order_acquire) + submitted_uncounted_;
      if (!more || awaited || submitted_uncounted_ >= kMaxUnsettled) settle_submitted();
    }
  }
}

void HostQueuedStream::settle_submitted() {
  if (submitted_uncounted_ == 0) return;
  if (Status status = await_device(); !status.ok()) {
    HXRT_LOG(kDebug, "stream '{}' failed: {}", name(), status.to_string());
    std::lock_guard<std::mutex> lock(mutex_);
    fail_locked(std::move(status));
  }
  count_completed(std::exchange(submitted_uncounted_, 0));
}

void HostQueuedStream::count_completed(uint64_t n) {
  if (n == 0) return;
  const uint64_t completed = completed_.fetch_add(n, std::memory_order_seq_cst) + n;
  if (completed >= wake_at_.load(std::memory_order_seq_cst)) {
    std::lock_guard<std::mutex> lock(mutex_);
    idle_cv_.notify_all();
  }
}

void HostQueuedStream::skip(Command& command, const Status& error) {
  Status reason = error.ok() ? aborted("stream '{}' was aborted", name()) : error;
  switch (command.kind) {
    case CommandKind::kRecord:
      command.signal->complete(
          std::move(reason).with_context(fmt::format("skipping an event record on failed stream '{}'", name())),
          host_now_ns());
      break;
    case CommandKind::kCallback: command.callback(reason); break;
    case CommandKind::kHostTask:
      if (command.callback) command.callback(reason);
      break;
    default: break;
  }
}

Status HostQueuedStream::execute(Command& command) {
  switch (command.kind) {
    case CommandKind::kLaunch: return execute_launch(command);
    case CommandKind::kCopy: return execute_copy(command);
    case CommandKind::kFill: return execute_fill(command);
    case CommandKind::kCallback: command.callback(ok_status()); return ok_status();
    case CommandKind::kHostTask: {
      Status status = command.task(HostTaskContext{&cancel_});
      if (!status.ok()) return std::move(status).with_context(fmt::format("host task on stream '{}'", name()));
      return ok_status();
    }
    case CommandKind::kRecord: return record_now(command);
    case CommandKind::kWait: return execute_wait(command);
    case CommandKind::kReplay: return execute_replay(*command.replay);
  }
  return internal_error("stream '{}': unknown command", name());
}

Status HostQueuedStream::execute_replay(const CapturedList& list) {
  const size_t n = list.commands.size();
  // The host tasks the failure skips hear of it, as those of a failed stream's queue do (Note [Host tasks]).
  auto skip_rest = [&](size_t first, const Status& error) {
    for (size_t j = first; j < n; ++j) {
      const Command& command = list.commands[j];
      if (command.kind == CommandKind::kHostTask && command.callback) command.callback(error);
    }
  };
  for (size_t k = 0; k < n; ++k) {
    if (cancel_.load(std::memory_order_relaxed)) {
      Status error = aborted("stream '{}' was aborted during a replay, before command {} of {}", name(), k + 1, n);
      skip_rest(k, error);
      return error;
    }
    // Replaying reads a command, never consumes it (launch arguments, views and payloads stay as captured).
    if (Status status = execute(const_cast<Command&>(list.commands[k])); !status.ok()) {
      status = std::move(status).with_context(
          fmt::format("command {} of {}{} of a captured list replayed on stream '{}'", k + 1, n,
                      list.labels.empty() ? std::string() : fmt::format(" ({})", list.labels[k]), name()));
      skip_rest(k + 1, status);
      return status;
    }
  }
  return ok_status();
}

Status HostQueuedStream::begin_capture() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failed_.load(std::memory_order_relaxed)) return sticky_error_locked();
  if (capturing_) return failed_precondition("begin_capture on stream '{}': already capturing", name());
  capturing_ = true;
  captured_.clear();
  return ok_status();
}

Result<std::shared_ptr<const CapturedCommands>> HostQueuedStream::end_capture(std::vector<std::string> labels) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!capturing_) return failed_precondition("end_capture on stream '{}': not capturing", name());
  capturing_ = false;
  auto list = std::make_shared<CapturedList>();
  list->owner = this;
  list->commands = std::exchange(captured_, {});
  if (labels.size() == list->commands.size()) list->labels = std::move(labels);
  return std::shared_ptr<const CapturedCommands>(std::move(list));
}

bool HostQueuedStream::capturing() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return capturing_;
}

Status HostQueuedStream::launch_captured(std::shared_ptr<const CapturedCommands> commands) {
  auto list = std::dynamic_pointer_cast<const CapturedList>(commands);
  if (list == nullptr || list->owner != this) {
    return invalid_argument("launch_captured on stream '{}': the list was captured by another stream", name());
  }
  Command command(CommandKind::kReplay);
  command.replay = std::move(list);
  return enqueue(std::move(command));
}

Status HostQueuedStream::record_now(Command& command) {
  Result<int64_t> timestamp = execute_record();
  if (!timestamp.ok()) {
    Status status = std::move(timestamp).status();
    status.with_context(fmt::format("recording an event on stream '{}'", name()));
    command.signal->complete(status, host_now_ns());
    return status;
  }
  command.signal->complete(ok_status(), *timestamp);
  return ok_status();
}

Status HostQueuedStream::execute_wait(Command& command) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    waiting_on_ = command.signal;
  }
  const bool done = command.signal->wait_until(Deadline::after(command.timeout).when(),
                                               [this] { return cancel_.load(std::memory_order_relaxed); });
  {
    std::lock_guard<std::mutex> lock(mutex_);
    waiting_on_.reset();
  }
  if (!done) {
    if (cancel_.load(std::memory_order_relaxed)) {
      return aborted("stream '{}' was aborted while waiting for an event recorded on stream '{}'", name(),
                     command.signal->stream_name());
    }
    return deadline_exceeded("stream '{}' waited {} ms for an event recorded on stream '{}'", name(),
                             to_ms(command.timeout), command.signal->stream_name());
  }
  if (command.signal->state() == EventState::kFailed) {
    return command.signal->status().with_context(
        fmt::format("stream '{}' waiting for an event recorded on stream '{}'", name(), command.signal->stream_name()));
  }
  return ok_status();
}

// ---- default hooks: host memory ----

void HostQueuedStream::fill_host(void* dst, uint64_t bytes, uint32_t pattern, uint32_t pattern_bytes) {
  auto* out = static_cast<unsigned char*>(dst);
  if (pattern_bytes == 1) {
    std::memset(out, static_cast<int>(pattern & 0xFF), bytes);
    return;
  }
  for (uint64_t i = 0; i + pattern_bytes <= bytes; i += pattern_bytes) std::memcpy(out + i, &pattern, pattern_bytes);
}

Status HostQueuedStream::execute_copy(Command& command) {
  void* dst = command.dst.host_address();
  const void* src = command.src.host_address();
  if (dst == nullptr || src == nullptr) {
    return internal_error("stream '{}': copy between memory the driver did not resolve", name());
  }
  std::memmove(dst, src, command.bytes);
  return ok_status();
}

Status HostQueuedStream::execute_fill(Command& command) {
  void* dst = command.dst.host_address();
  if (dst == nullptr) return internal_error("stream '{}': fill of memory the driver did not resolve", name());
  fill_host(dst, command.bytes, command.pattern, command.pattern_bytes);
  return ok_status();
}

Result<int64_t> HostQueuedStream::execute_record() { return host_now_ns(); }

// ---- enqueue side ----

Status HostQueuedStream::do_launch(const Kernel& kernel, const LaunchConfig& config, std::span<const KernelArg> args) {
  Command command(CommandKind::kLaunch);
  command.kernel = &kernel;
  command.config = config;
  command.args.assign(args.begin(), args.end());
  HXRT_RETURN_IF_ERROR(prepare(command));
  return enqueue(std::move(command));
}

Status HostQueuedStream::do_copy(BufferView dst, BufferView src) {
  Command command(CommandKind::kCopy);
  command.dst.view = dst;
  command.src.view = src;
  command.bytes = dst.size;
  HXRT_RETURN_IF_ERROR(prepare(command));
  return enqueue(std::move(command));
}

Status HostQueuedStream::do_copy_from_host(BufferView dst, const void* src) {
  Command command(CommandKind::kCopy);
  command.dst.view = dst;
  command.src.host = const_cast<void*>(src);  // only ever read
  command.bytes = dst.size;
  HXRT_RETURN_IF_ERROR(prepare(command));
  return enqueue(std::move(command));
}

Status HostQueuedStream::do_copy_to_host(void* dst, BufferView src) {
  Command command(CommandKind::kCopy);
  command.dst.host = dst;
  command.src.view = src;
  command.bytes = src.size;
  HXRT_RETURN_IF_ERROR(prepare(command));
  return enqueue(std::move(command));
}

Status HostQueuedStream::do_fill(BufferView dst, uint32_t pattern, uint32_t pattern_bytes) {
  Command command(CommandKind::kFill);
  command.dst.view = dst;
  command.bytes = dst.size;
  command.pattern = pattern;
  command.pattern_bytes = pattern_bytes;
  HXRT_RETURN_IF_ERROR(prepare(command));
  return enqueue(std::move(command));
}

Status HostQueuedStream::do_host_callback(HostCallback callback) {
  Command command(CommandKind::kCallback);
  command.callback = std::move(callback);
  return enqueue(std::move(command));
}

Status HostQueuedStream::do_host_task(HostTask task, HostCallback on_skip) {
  Command command(CommandKind::kHostTask);
  command.task = std::move(task);
  command.callback = std::move(on_skip);
  return enqueue(std::move(command));
}

Status HostQueuedStream::do_record(Event& event) {
  auto* signal_event = dynamic_cast<SignalEvent*>(&event);
  if (signal_event == nullptr) {
    return invalid_argument("record on stream '{}': the event of device '{}' is not host-signalled", name(),
                            event.device().info().name);
  }
  auto signal = std::make_shared<EventSignal>(name());
  Command command(CommandKind::kRecord);
  command.signal = signal;
  // Published under the queue lock, so a wait enqueued after this record (on any stream) sees it.
  return enqueue(std::move(command), [&] { signal_event->set_current(std::move(signal)); });
}

Status HostQueuedStream::do_wait(Event& event, Duration timeout) {
  auto* signal_event = dynamic_cast<SignalEvent*>(&event);
  if (signal_event == nullptr) {
    return unimplemented("stream '{}' ({}) cannot wait on an event of device '{}'", name(),
                         device_kind_name(device().info().kind), event.device().info().name);
  }
  std::shared_ptr<EventSignal> signal = signal_event->current();
  if (!signal) return failed_precondition("wait on stream '{}': the event was never recorded", name());
  if (signal->state() == EventState::kComplete) return status();  // nothing to wait for
  Command command(CommandKind::kWait);
  command.signal = std::move(signal);
  command.timeout = timeout;
  return enqueue(std::move(command));
}

// ---- host side ----

Status HostQueuedStream::synchronize(Duration timeout) {
  if (timeout < Duration::zero()) return invalid_argument("synchronize: negative timeout");
  const Deadline deadline = Deadline::after(timeout);
  const uint64_t target = enqueued_.load(std::memory_order_acquire);
  spin_until([&] { return completed_.load(std::memory_order_acquire) >= target; }, timeout);
  std::unique_lock<std::mutex> lock(mutex_);
  if (completed_.load(std::memory_order_acquire) < target) {
    // Published before the predicate reads completed_ (both seq_cst): either the worker sees this target after its
    // increment, or the predicate sees the increment.
    sync_targets_.push_back(target);
    wake_at_.store(*std::min_element(sync_targets_.begin(), sync_targets_.end()), std::memory_order_seq_cst);
    const auto done = [&] { return completed_.load(std::memory_order_seq_cst) >= target; };
    bool finished = true;
    if (timeout == kInfinite) {
      idle_cv_.wait(lock, done);
    } else {
      finished = idle_cv_.wait_until(lock, deadline.when(), done);
    }
    sync_targets_.erase(std::find(sync_targets_.begin(), sync_targets_.end(), target));
    wake_at_.store(sync_targets_.empty() ? UINT64_MAX : *std::min_element(sync_targets_.begin(), sync_targets_.end()),
                   std::memory_order_seq_cst);
    if (!finished) {
      return deadline_exceeded("stream '{}' did not finish {} pending command(s) within {} ms", name(),
                               target - completed_.load(), to_ms(timeout));
    }
  }
  if (error_.ok()) return ok_status();
  Status error = error_;
  return std::move(error).with_context(fmt::format("synchronizing stream '{}'", name()));
}

StreamState HostQueuedStream::query() const {
  StreamState state;
  const uint64_t done = completed_.load(std::memory_order_acquire);
  const uint64_t queued = enqueued_.load(std::memory_order_acquire);
  state.pending_commands = queued > done ? queued - done : 0;
  state.idle = state.pending_commands == 0;
  state.status = status();
  return state;
}

Status HostQueuedStream::status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

void HostQueuedStream::abort() {
  std::shared_ptr<EventSignal> waiting;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    cancel_.store(true, std::memory_order_relaxed);
    on_cancel(true);
    fail_locked(aborted("stream '{}' was aborted", name()));
    waiting = waiting_on_;
  }
  if (waiting) waiting->interrupt();
  work_cv_.notify_one();
}

Status HostQueuedStream::reset() {
  abort();
  Status drained = synchronize(kInfinite);
  drained.ignore();  // the stream is failed by construction here; the error is what reset clears
  std::lock_guard<std::mutex> lock(mutex_);
  error_ = ok_status();
  failed_.store(false, std::memory_order_release);
  cancel_.store(false, std::memory_order_relaxed);
  on_cancel(false);
  return ok_status();
}

}  // namespace hxrt::hal
