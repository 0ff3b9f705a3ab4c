#include "hal/cpu/cpu_stream.h"

#include <algorithm>
#include <cstring>

#include "hxrt/base/check.h"
#include "hxrt/base/logging.h"
#include "hxrt/hal/device.h"

namespace hxrt::hal::cpu {
namespace {

// Copies at least this large are split over the intra-op pool.
constexpr uint64_t kParallelCopyBytes = uint64_t{4} << 20;
constexpr int64_t kCopyChunkBytes = int64_t{1} << 20;

std::chrono::steady_clock::time_point deadline_after(Duration timeout) {
  if (timeout == kInfinite) return std::chrono::steady_clock::time_point::max();
  const auto now = std::chrono::steady_clock::now();
  if (timeout > std::chrono::steady_clock::time_point::max() - now) return std::chrono::steady_clock::time_point::max();
  return now + timeout;
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

int64_t to_ms(Duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }

}  // namespace

CpuStream::CpuStream(Device* device, std::string name, ThreadPool* pool, std::chrono::microseconds spin)
    : Stream(device, std::move(name)), pool_(pool), spin_(spin) {
  worker_ = std::thread([this] { worker_loop(); });
}

CpuStream::~CpuStream() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_cv_.notify_one();
  worker_.join();
}

Status CpuStream::sticky_error_locked() const {
  Status error = error_;
  error.with_context(fmt::format("stream '{}' failed earlier and rejects work until reset()", name()));
  return error;
}

Status CpuStream::enqueue(Command command, const std::function<void()>& on_enqueued) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failed_.load(std::memory_order_relaxed)) return sticky_error_locked();
  if (stopping_) return failed_precondition("stream '{}' is being destroyed", name());
  queue_.push_back(std::move(command));
  enqueued_.fetch_add(1, std::memory_order_release);
  if (on_enqueued) on_enqueued();
  if (worker_sleeping_) work_cv_.notify_one();
  return ok_status();
}

void CpuStream::fail_locked(Status error) {
  if (error_.ok()) error_ = std::move(error);
  failed_.store(true, std::memory_order_release);
}

void CpuStream::worker_loop() {
  uint64_t dequeued = 0;
  for (;;) {
    // Spin briefly before sleeping: a launch arriving within the spin window starts without a wake-up.
    if (enqueued_.load(std::memory_order_acquire) == dequeued && spin_.count() > 0) {
      const auto spin_end = std::chrono::steady_clock::now() + spin_;
      while (enqueued_.load(std::memory_order_acquire) == dequeued && std::chrono::steady_clock::now() < spin_end) {
        cpu_relax();
      }
    }
    Command command;
    bool skip_it = false;
    Status error;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      while (queue_.empty() && !stopping_) {
        worker_sleeping_ = true;
        work_cv_.wait(lock);
        worker_sleeping_ = false;
      }
      if (queue_.empty()) return;  // stopping, and everything enqueued has run
      command = std::move(queue_.front());
      queue_.pop_front();
      ++dequeued;
      if (failed_.load(std::memory_order_relaxed) || cancel_.load(std::memory_order_relaxed)) {
        skip_it = true;
        error = error_;
      }
    }
    if (skip_it) {
      skip(command, error);
    } else if (Status status = execute(command); !status.ok()) {
      HXRT_LOG(kDebug, "stream '{}' failed: {}", name(), status.to_string());
      std::lock_guard<std::mutex> lock(mutex_);
      fail_locked(std::move(status));
    }
    command = Command{};  // release the callback and signal before reporting completion
    completed_.fetch_add(1, std::memory_order_seq_cst);
    if (sync_waiters_ > 0) {
      std::lock_guard<std::mutex> lock(mutex_);
      idle_cv_.notify_all();
    }
  }
}

void CpuStream::skip(Command& command, const Status& error) {
  Status reason = error.ok() ? aborted("stream '{}' was aborted", name()) : error;
  switch (command.op) {
    case Op::kRecord:
      command.signal->complete(
          std::move(reason).with_context(fmt::format("skipping an event record on failed stream '{}'", name())),
          host_now_ns());
      break;
    case Op::kCallback:
      command.callback(reason);
      break;
    default:
      break;
  }
}

Status CpuStream::execute(Command& command) {
  switch (command.op) {
    case Op::kLaunch: {
      CpuLaunchContext context(command.config, command.args, *pool_, cancel_);
      Status status = command.kernel->run(context);
      if (!status.ok()) {
        status.with_context(fmt::format("running kernel '{}' on stream '{}'", command.kernel->name(), name()));
      }
      return status;
    }
    case Op::kCopy: {
      auto* dst = static_cast<char*>(command.dst);
      const auto* src = static_cast<const char*>(command.src);
      if (command.bytes >= kParallelCopyBytes) {
        pool_->parallel_for(static_cast<int64_t>(command.bytes), kCopyChunkBytes, [&](int64_t begin, int64_t end) {
          std::memmove(dst + begin, src + begin, static_cast<size_t>(end - begin));
        });
      } else {
        std::memmove(dst, src, command.bytes);
      }
      return ok_status();
    }
    case Op::kFill: {
      auto* dst = static_cast<unsigned char*>(command.dst);
      if (command.pattern_bytes == 1) {
        std::memset(dst, static_cast<int>(command.pattern & 0xFF), command.bytes);
      } else {
        const uint64_t count = command.bytes / command.pattern_bytes;
        for (uint64_t i = 0; i < count; ++i) {
          std::memcpy(dst + i * command.pattern_bytes, &command.pattern, command.pattern_bytes);
        }
      }
      return ok_status();
    }
    case Op::kCallback:
      command.callback(ok_status());
      return ok_status();
    case Op::kRecord:
      command.signal->complete(ok_status(), host_now_ns());
      return ok_status();
    case Op::kWait: {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        waiting_on_ = command.signal;
      }
      const bool done = command.signal->wait_until(deadline_after(command.timeout),
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
            fmt::format("stream '{}' waiting for an event recorded on stream '{}'", name(),
                        command.signal->stream_name()));
      }
      return ok_status();
    }
  }
  return internal_error("unknown stream command");
}

Status CpuStream::do_launch(const Kernel& kernel, const LaunchConfig& config, std::span<const KernelArg> args) {
  const auto* cpu_kernel = dynamic_cast<const CpuKernel*>(&kernel);
  if (cpu_kernel == nullptr) return invalid_argument("kernel '{}' is not a CpuKernel", kernel.name());
  Command command(Op::kLaunch);
  command.kernel = cpu_kernel;
  command.config = config;
  command.args.assign(args.begin(), args.end());
  return enqueue(std::move(command));
}

Status CpuStream::do_copy(BufferView dst, BufferView src) {
  if (dst.host_address() == nullptr || src.host_address() == nullptr) {
    return unimplemented("cpu stream '{}' can only copy between host-addressable buffers", name());
  }
  Command command(Op::kCopy);
  command.dst = dst.host_address();
  command.src = src.host_address();
  command.bytes = dst.size;
  return enqueue(std::move(command));
}

Status CpuStream::do_copy_from_host(BufferView dst, const void* src) {
  Command command(Op::kCopy);
  command.dst = dst.host_address();
  command.src = src;
  command.bytes = dst.size;
  if (command.dst == nullptr) return unimplemented("cpu stream '{}': destination is not host-addressable", name());
  return enqueue(std::move(command));
}

Status CpuStream::do_copy_to_host(void* dst, BufferView src) {
  Command command(Op::kCopy);
  command.dst = dst;
  command.src = src.host_address();
  command.bytes = src.size;
  if (command.src == nullptr) return unimplemented("cpu stream '{}': source is not host-addressable", name());
  return enqueue(std::move(command));
}

Status CpuStream::do_fill(BufferView dst, uint32_t pattern, uint32_t pattern_bytes) {
  Command command(Op::kFill);
  command.dst = dst.host_address();
  command.bytes = dst.size;
  command.pattern = pattern;
  command.pattern_bytes = pattern_bytes;
  if (command.dst == nullptr) return unimplemented("cpu stream '{}': fill target is not host-addressable", name());
  return enqueue(std::move(command));
}

Status CpuStream::do_host_callback(HostCallback callback) {
  Command command(Op::kCallback);
  command.callback = std::move(callback);
  return enqueue(std::move(command));
}

Status CpuStream::do_record(Event& event) {
  auto* cpu_event = dynamic_cast<CpuEvent*>(&event);
  if (cpu_event == nullptr) return invalid_argument("record on stream '{}': not a cpu event", name());
  auto signal = std::make_shared<EventSignal>(name());
  Command command(Op::kRecord);
  command.signal = signal;
  // Publish the new signal under the queue lock, so a wait enqueued after this record (on any stream) sees it.
  return enqueue(std::move(command), [&] { cpu_event->set_current(std::move(signal)); });
}

Status CpuStream::do_wait(Event& event, Duration timeout) {
  auto* cpu_event = dynamic_cast<CpuEvent*>(&event);
  if (cpu_event == nullptr) {
    return unimplemented("stream '{}' (cpu) cannot wait on an event of device '{}'", name(),
                         event.device().info().name);
  }
  std::shared_ptr<EventSignal> signal = cpu_event->current();
  if (!signal) return failed_precondition("wait on stream '{}': the event was never recorded", name());
  if (signal->state() == EventState::kComplete) return status();  // nothing to wait for
  Command command(Op::kWait);
  command.signal = std::move(signal);
  command.timeout = timeout;
  return enqueue(std::move(command));
}

Status CpuStream::synchronize(Duration timeout) {
  if (timeout < Duration::zero()) return invalid_argument("synchronize: negative timeout");
  const uint64_t target = enqueued_.load(std::memory_order_acquire);
  if (completed_.load(std::memory_order_acquire) < target && spin_.count() > 0) {
    const auto spin_end = std::chrono::steady_clock::now() + std::min<Duration>(spin_, timeout);
    while (completed_.load(std::memory_order_acquire) < target && std::chrono::steady_clock::now() < spin_end) {
      cpu_relax();
    }
  }
  std::unique_lock<std::mutex> lock(mutex_);
  if (completed_.load(std::memory_order_acquire) < target) {
    ++sync_waiters_;
    const auto done = [&] { return completed_.load(std::memory_order_seq_cst) >= target; };
    bool finished = true;
    if (timeout == kInfinite) {
      idle_cv_.wait(lock, done);
    } else {
      finished = idle_cv_.wait_until(lock, deadline_after(timeout), done);
    }
    --sync_waiters_;
    if (!finished) {
      return deadline_exceeded("stream '{}' did not finish {} pending command(s) within {} ms", name(),
                               target - completed_.load(), to_ms(timeout));
    }
  }
  if (error_.ok()) return ok_status();
  Status error = error_;
  return std::move(error).with_context(fmt::format("synchronizing stream '{}'", name()));
}

StreamState CpuStream::query() const {
  StreamState state;
  const uint64_t done = completed_.load(std::memory_order_acquire);
  const uint64_t queued = enqueued_.load(std::memory_order_acquire);
  state.pending_commands = queued > done ? queued - done : 0;
  state.idle = state.pending_commands == 0;
  state.status = status();
  return state;
}

Status CpuStream::status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

void CpuStream::abort() {
  std::shared_ptr<EventSignal> waiting;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    cancel_.store(true, std::memory_order_relaxed);
    fail_locked(aborted("stream '{}' was aborted", name()));
    waiting = waiting_on_;
  }
  if (waiting) waiting->interrupt();
  work_cv_.notify_one();
}

Status CpuStream::reset() {
  abort();
  Status drained = synchronize(kInfinite);
  drained.ignore();  // the stream is failed by construction here; the error is what reset clears
  std::lock_guard<std::mutex> lock(mutex_);
  error_ = ok_status();
  failed_.store(false, std::memory_order_release);
  cancel_.store(false, std::memory_order_relaxed);
  return ok_status();
}

}  // namespace hxrt::hal::cpu
