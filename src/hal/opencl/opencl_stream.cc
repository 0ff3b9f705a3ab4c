#include "hal/opencl/opencl_stream.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "hal/opencl/opencl_device.h"
#include "hxrt/base/logging.h"

namespace hxrt::hal::opencl {
namespace {

// Bytes of a stream's control buffer: two ints, padded to the usual base alignment.
constexpr size_t kCtlBytes = 128;

std::chrono::steady_clock::time_point deadline_after(Duration timeout) {
  if (timeout == kInfinite) return std::chrono::steady_clock::time_point::max();
  const auto now = std::chrono::steady_clock::now();
  if (timeout > std::chrono::steady_clock::time_point::max() - now) return std::chrono::steady_clock::time_point::max();
  return now + timeout;
}

int64_t to_ms(Duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

// A status word a kernel stored into ctl[1]: a StatusCode value, or anything else as Internal.
StatusCode kernel_status_code(int word) {
  if (word > 0 && word <= static_cast<int>(StatusCode::kInternal)) return static_cast<StatusCode>(word);
  return StatusCode::kInternal;
}

}  // namespace

// Note [OpenCL stream submission]
// OpenCL cannot cancel a command once it is in a cl_command_queue, while the HAL contract says abort() discards
// queued work and interrupts a wait in progress. So commands stay in a host-side queue until their predecessors
// have completed: one submitter thread per stream pops a command, enqueues it on the stream's in-order
// cl_command_queue, waits for its cl_event, checks its execution status, and only then takes the next one. At any
// moment at most one command of a stream is on the device, and it is the only one abort() cannot discard (a kernel
// that takes the control words stops early by polling ctl[0]). The consequences:
//  - Sticky errors: a command whose event ends with a negative status (or whose kernel stored a status into
//    ctl[1], or whose enqueue failed) fails the stream; later commands are skipped on the host — records fail,
//    callbacks get the error — exactly as on the CPU device.
//  - Cross-stream waits are host-side waits on the recording stream's EventSignal, bounded by the wait's timeout
//    and interrupted by abort(), so a failed or aborted record fails the waiter with a chain naming both streams.
//    No clEnqueueBarrierWithWaitList is needed: the waiter submits nothing before the wait returns.
//  - Records enqueue a marker; its CL_PROFILING_COMMAND_END mapped onto the host clock (Note [Device clock] in
//    opencl_device.cc, clamped to the host time at which completion was observed) is the event's timestamp.
//  - Host callbacks run on the submitter thread after the preceding commands completed, outside any lock.
// The price is one host round trip per command (tens of microseconds on PoCL); batching behind a user-event gate
// would hide it but makes "discard queued work" depend on terminating commands with a negative user-event status,
// which OpenCL leaves implementation-defined.

Result<std::unique_ptr<Stream>> OpenClStream::create(OpenClDevice* device, std::string name) {
  cl_int err = CL_SUCCESS;
  const cl_queue_properties properties[] = {CL_QUEUE_PROPERTIES, CL_QUEUE_PROFILING_ENABLE, 0};
  ClQueue queue(clCreateCommandQueueWithProperties(device->context(), device->device_id(), properties, &err));
  if (err != CL_SUCCESS) return cl_status(err, "clCreateCommandQueueWithProperties");
  const int zeros[2] = {0, 0};
  ClMem ctl(clCreateBuffer(device->context(), CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, kCtlBytes, nullptr, &err));
  if (err != CL_SUCCESS) return cl_status(err, "clCreateBuffer (stream control words)");
  int* ctl_host = nullptr;
  if (device->host_unified()) {
    void* mapped = clEnqueueMapBuffer(device->internal_queue(), ctl.get(), CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0,
                                      kCtlBytes, 0, nullptr, nullptr, &err);
    if (err != CL_SUCCESS) return cl_status(err, "clEnqueueMapBuffer (stream control words)");
    ctl_host = static_cast<int*>(mapped);
    std::memcpy(ctl_host, zeros, sizeof(zeros));
  } else {
    HXRT_CL_RETURN_IF_ERROR(
        clEnqueueWriteBuffer(queue.get(), ctl.get(), CL_TRUE, 0, sizeof(zeros), zeros, 0, nullptr, nullptr),
        "clEnqueueWriteBuffer (stream control words)");
  }
  return std::unique_ptr<Stream>(new OpenClStream(device, std::move(name), std::move(queue), std::move(ctl), ctl_host));
}

OpenClStream::OpenClStream(OpenClDevice* device, std::string name, ClQueue queue, ClMem ctl, int* ctl_host)
    : Stream(device, std::move(name)),
      cl_device_(device),
      queue_(std::move(queue)),
      ctl_(std::move(ctl)),
      ctl_host_(ctl_host) {
  submitter_ = std::thread([this] { submitter_loop(); });
}

OpenClStream::~OpenClStream() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_cv_.notify_one();
  submitter_.join();
  clFinish(queue_.get());
  if (ctl_host_ != nullptr) {
    ClEvent unmapped;
    if (clEnqueueUnmapMemObject(cl_device_->internal_queue(), ctl_.get(), ctl_host_, 0, nullptr, unmapped.out()) ==
        CL_SUCCESS) {
      cl_event event = unmapped.get();
      clWaitForEvents(1, &event);
    }
  }
}

void OpenClStream::set_cancel_word(int value) {
  if (ctl_host_ != nullptr) std::atomic_ref<int>(ctl_host_[0]).store(value, std::memory_order_relaxed);
}

Status OpenClStream::sticky_error_locked() const {
  Status error = error_;
  error.with_context(fmt::format("stream '{}' failed earlier and rejects work until reset()", name()));
  return error;
}

void OpenClStream::fail_locked(Status error) {
  if (error_.ok()) error_ = std::move(error);
  failed_.store(true, std::memory_order_release);
}

Status OpenClStream::enqueue(Command command, const std::function<void()>& on_enqueued) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_.load(std::memory_order_relaxed)) return sticky_error_locked();
    if (stopping_) return failed_precondition("stream '{}' is being destroyed", name());
    queue_commands_.push_back(std::move(command));
    enqueued_.fetch_add(1, std::memory_order_release);
    if (on_enqueued) on_enqueued();
  }
  work_cv_.notify_one();
  return ok_status();
}

void OpenClStream::submitter_loop() {
  for (;;) {
    Command command;
    bool skip_it = false;
    Status error;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_cv_.wait(lock, [&] { return !queue_commands_.empty() || stopping_; });
      if (queue_commands_.empty()) return;  // stopping, and everything enqueued has run
      command = std::move(queue_commands_.front());
      queue_commands_.pop_front();
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
    command = Command{};  // release buffers, callback and signal before reporting completion
    completed_.fetch_add(1, std::memory_order_seq_cst);
    if (sync_waiters_.load(std::memory_order_seq_cst) > 0) {
      std::lock_guard<std::mutex> lock(mutex_);
      idle_cv_.notify_all();
    }
  }
}

void OpenClStream::skip(Command& command, const Status& error) {
  Status reason = error.ok() ? aborted("stream '{}' was aborted", name()) : error;
  switch (command.op) {
    case Op::kRecord:
      command.signal->complete(
          std::move(reason).with_context(fmt::format("skipping an event record on failed stream '{}'", name())),
          host_now_ns());
      break;
    case Op::kCallback: command.callback(reason); break;
    default: break;
  }
}

Status OpenClStream::wait_for(const ClEvent& event, std::string_view what) {
  cl_event raw = event.get();
  const cl_int waited = clWaitForEvents(1, &raw);
  cl_int execution = CL_COMPLETE;
  HXRT_CL_RETURN_IF_ERROR(
      clGetEventInfo(raw, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(execution), &execution, nullptr), "clGetEventInfo");
  if (execution < 0) {
    Status status = cl_status(execution, what);
    return std::move(status).with_context(fmt::format("the command ended with a negative execution status"));
  }
  if (waited != CL_SUCCESS) return cl_status(waited, "clWaitForEvents");
  return ok_status();
}

Status OpenClStream::execute(Command& command) {
  Status status;
  switch (command.op) {
    case Op::kLaunch: status = execute_launch(command); break;
    case Op::kCopy: status = execute_copy(command); break;
    case Op::kFill: status = execute_fill(command); break;
    case Op::kCallback: command.callback(ok_status()); break;
    case Op::kRecord: status = execute_record(command); break;
    case Op::kWait: status = execute_wait(command); break;
  }
  return status;
}

Status OpenClStream::execute_launch(Command& command) {
  const OpenClKernel& kernel = *command.kernel;
  const auto context = [&] { return fmt::format("running kernel '{}' on stream '{}'", kernel.name(), name()); };
  if (command.pass_ctl) {
    if (ctl_host_ != nullptr) {
      std::atomic_ref<int>(ctl_host_[1]).store(0, std::memory_order_relaxed);
    } else {
      const int zeros[2] = {0, 0};
      HXRT_RETURN_IF_ERROR_CTX(cl_status(clEnqueueWriteBuffer(queue_.get(), ctl_.get(), CL_FALSE, 0, sizeof(zeros),
                                                              zeros, 0, nullptr, nullptr),
                                         "clEnqueueWriteBuffer (control words)"),
                               "{}", context());
    }
  }
  std::array<size_t, 3> global{};
  std::array<size_t, 3> local{};
  for (size_t d = 0; d < 3; ++d) {
    local[d] = command.config.block[d];
    global[d] = static_cast<size_t>(command.config.grid[d]) * command.config.block[d];
  }
  ClEvent done;
  {
    // clSetKernelArg is not thread-safe per cl_kernel: hold the kernel's lock until the enqueue captured the args.
    std::lock_guard<std::mutex> lock(kernel.launch_mutex());
    for (size_t i = 0; i < command.args.size(); ++i) {
      const Arg& arg = command.args[i];
      const auto index = static_cast<cl_uint>(i);
      cl_int err = CL_SUCCESS;
      if (arg.mem) {
        cl_mem mem = arg.mem.get();
        err = clSetKernelArg(kernel.get(), index, sizeof(cl_mem), &mem);
      } else {
        err = clSetKernelArg(kernel.get(), index, arg.scalar_size, arg.bytes.data());
      }
      if (err != CL_SUCCESS) {
        return cl_status(err, "clSetKernelArg")
            .with_context(fmt::format("setting argument {}", i))
            .with_context(context());
      }
    }
    if (command.pass_ctl) {
      cl_mem ctl = ctl_.get();
      HXRT_RETURN_IF_ERROR_CTX(
          cl_status(clSetKernelArg(kernel.get(), static_cast<cl_uint>(command.args.size()), sizeof(cl_mem), &ctl),
                    "clSetKernelArg (control words)"),
          "{}", context());
    }
    HXRT_RETURN_IF_ERROR_CTX(cl_status(clEnqueueNDRangeKernel(queue_.get(), kernel.get(), 3, nullptr, global.data(),
                                                              local.data(), 0, nullptr, done.out()),
                                       "clEnqueueNDRangeKernel"),
                             "{}", context());
  }
  HXRT_RETURN_IF_ERROR_CTX(wait_for(done, "clEnqueueNDRangeKernel"), "{}", context());
  if (command.pass_ctl) {
    int word = 0;
    if (ctl_host_ != nullptr) {
      word = std::atomic_ref<int>(ctl_host_[1]).load(std::memory_order_relaxed);
    } else {
      HXRT_RETURN_IF_ERROR_CTX(cl_status(clEnqueueReadBuffer(queue_.get(), ctl_.get(), CL_TRUE, sizeof(int),
                                                             sizeof(int), &word, 0, nullptr, nullptr),
                                         "clEnqueueReadBuffer (control words)"),
                               "{}", context());
    }
    if (word != 0) {
      return Status(kernel_status_code(word), fmt::format("kernel '{}' reported status {} ({})", kernel.name(), word,
                                                          status_code_name(kernel_status_code(word))))
          .with_context(context());
    }
  }
  return ok_status();
}

Status OpenClStream::execute_copy(Command& command) {
  const auto context = [&] { return fmt::format("copying {} bytes on stream '{}'", command.bytes, name()); };
  Place& dst = command.dst;
  Place& src = command.src;
  ClEvent done;
  cl_int err = CL_SUCCESS;
  const char* call = "";
  if (dst.mem && src.mem) {
    call = "clEnqueueCopyBuffer";
    err = clEnqueueCopyBuffer(queue_.get(), src.mem.get(), dst.mem.get(), src.offset, dst.offset, command.bytes, 0,
                              nullptr, done.out());
  } else if (dst.mem) {
    call = "clEnqueueWriteBuffer";
    err = clEnqueueWriteBuffer(queue_.get(), dst.mem.get(), CL_FALSE, dst.offset, command.bytes, src.host, 0, nullptr,
                               done.out());
  } else if (src.mem) {
    call = "clEnqueueReadBuffer";
    err = clEnqueueReadBuffer(queue_.get(), src.mem.get(), CL_FALSE, src.offset, command.bytes, dst.host, 0, nullptr,
                              done.out());
  } else {
    std::memmove(dst.host, src.host, command.bytes);
    return ok_status();
  }
  HXRT_RETURN_IF_ERROR_CTX(cl_status(err, call), "{}", context());
  HXRT_RETURN_IF_ERROR_CTX(wait_for(done, call), "{}", context());
  return ok_status();
}

Status OpenClStream::execute_fill(Command& command) {
  const auto context = [&] { return fmt::format("filling {} bytes on stream '{}'", command.bytes, name()); };
  Place& dst = command.dst;
  if (!dst.mem) {  // host memory of another device
    for (uint64_t i = 0; i < command.bytes; i += command.pattern_bytes) {
      std::memcpy(dst.host + i, &command.pattern, command.pattern_bytes);
    }
    return ok_status();
  }
  ClEvent done;
  std::vector<unsigned char> staging;
  cl_int err = CL_SUCCESS;
  if (dst.offset % command.pattern_bytes == 0) {
    err = clEnqueueFillBuffer(queue_.get(), dst.mem.get(), &command.pattern, command.pattern_bytes, dst.offset,
                              command.bytes, 0, nullptr, done.out());
  } else {
    // clEnqueueFillBuffer needs the offset to be a multiple of the pattern size; write the pattern instead.
    staging.resize(command.bytes);
    for (uint64_t i = 0; i < command.bytes; i += command.pattern_bytes) {
      std::memcpy(staging.data() + i, &command.pattern, command.pattern_bytes);
    }
    err = clEnqueueWriteBuffer(queue_.get(), dst.mem.get(), CL_FALSE, dst.offset, command.bytes, staging.data(), 0,
                               nullptr, done.out());
  }
  HXRT_RETURN_IF_ERROR_CTX(cl_status(err, "clEnqueueFillBuffer"), "{}", context());
  HXRT_RETURN_IF_ERROR_CTX(wait_for(done, "clEnqueueFillBuffer"), "{}", context());
  return ok_status();
}

Status OpenClStream::execute_record(Command& command) {
  ClEvent marker;
  Status status =
      cl_status(clEnqueueMarkerWithWaitList(queue_.get(), 0, nullptr, marker.out()), "clEnqueueMarkerWithWaitList");
  if (status.ok()) status = wait_for(marker, "clEnqueueMarkerWithWaitList");
  if (!status.ok()) {
    status.with_context(fmt::format("recording an event on stream '{}'", name()));
    command.signal->complete(status, host_now_ns());
    return status;
  }
  const int64_t observed = host_now_ns();
  int64_t timestamp = observed;
  cl_ulong end = 0;
  if (cl_device_->device_timestamps() &&
      clGetEventProfilingInfo(marker.get(), CL_PROFILING_COMMAND_END, sizeof(end), &end, nullptr) == CL_SUCCESS) {
    timestamp = std::min(cl_device_->device_to_host_ns(end), observed);
  }
  command.signal->complete(ok_status(), timestamp);
  return ok_status();
}

Status OpenClStream::execute_wait(Command& command) {
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
        fmt::format("stream '{}' waiting for an event recorded on stream '{}'", name(), command.signal->stream_name()));
  }
  return ok_status();
}

// ---- enqueue side ----

Result<OpenClStream::Place> OpenClStream::resolve(const BufferView& view, const char* what) const {
  Place place;
  auto* buffer = dynamic_cast<OpenClBuffer*>(view.buffer);
  if (buffer != nullptr && &buffer->device() == &device()) {
    place.mem = ClMem(buffer->mem());
    clRetainMemObject(buffer->mem());
    place.offset = view.offset;
    return place;
  }
  place.host = static_cast<char*>(view.host_address());
  if (place.host == nullptr)
    return invalid_argument("{} on stream '{}': buffer is not usable by this device", what, name());
  return place;
}

Status OpenClStream::do_launch(const Kernel& kernel, const LaunchConfig& config, std::span<const KernelArg> args) {
  const auto* cl_kernel = dynamic_cast<const OpenClKernel*>(&kernel);
  if (cl_kernel == nullptr) return invalid_argument("kernel '{}' is not an OpenCL kernel", kernel.name());
  if (config.shared_bytes != 0) {
    return unimplemented("kernel '{}': LaunchConfig::shared_bytes is not supported on OpenCL; declare __local arrays",
                         kernel.name());
  }
  Command command(Op::kLaunch);
  command.kernel = cl_kernel;
  command.config = config;
  if (cl_kernel->num_args() == args.size() + 1) {
    command.pass_ctl = true;
  } else if (cl_kernel->num_args() != args.size()) {
    return invalid_argument("kernel '{}' takes {} arguments; the launch passes {}", kernel.name(),
                            cl_kernel->num_args(), args.size());
  }
  command.args.resize(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const KernelArg& arg = args[i];
    Arg& out = command.args[i];
    switch (arg.kind()) {
      case KernelArg::Kind::kBuffer: {
        auto* buffer = dynamic_cast<OpenClBuffer*>(arg.view().buffer);
        if (buffer == nullptr || &buffer->device() != &device()) {
          return invalid_argument("kernel '{}' argument {}: not a buffer of OpenCL device '{}'", kernel.name(), i,
                                  device().info().name);
        }
        HXRT_ASSIGN_OR_RETURN(out.mem, buffer->kernel_arg_mem(arg.view().offset, arg.view().size));
        break;
      }
      case KernelArg::Kind::kScalar: {
        const std::span<const std::byte> bytes = arg.scalar_bytes();
        std::copy(bytes.begin(), bytes.end(), out.bytes.begin());
        out.scalar_size = static_cast<uint8_t>(bytes.size());
        break;
      }
      case KernelArg::Kind::kHostPointer:
        return invalid_argument("kernel '{}' argument {}: host pointers cannot be passed to OpenCL kernels",
                                kernel.name(), i);
    }
  }
  return enqueue(std::move(command));
}

Status OpenClStream::do_copy(BufferView dst, BufferView src) {
  Command command(Op::kCopy);
  HXRT_ASSIGN_OR_RETURN(command.dst, resolve(dst, "copy destination"));
  HXRT_ASSIGN_OR_RETURN(command.src, resolve(src, "copy source"));
  command.bytes = dst.size;
  if (command.dst.mem && command.dst.mem.get() == command.src.mem.get() && dst.offset < src.offset + src.size &&
      src.offset < dst.offset + dst.size) {
    return invalid_argument("copy on stream '{}': source and destination overlap in one OpenCL buffer", name());
  }
  return enqueue(std::move(command));
}

Status OpenClStream::do_copy_from_host(BufferView dst, const void* src) {
  Command command(Op::kCopy);
  HXRT_ASSIGN_OR_RETURN(command.dst, resolve(dst, "copy_from_host destination"));
  command.src.host = static_cast<char*>(const_cast<void*>(src));
  command.bytes = dst.size;
  return enqueue(std::move(command));
}

Status OpenClStream::do_copy_to_host(void* dst, BufferView src) {
  Command command(Op::kCopy);
  HXRT_ASSIGN_OR_RETURN(command.src, resolve(src, "copy_to_host source"));
  command.dst.host = static_cast<char*>(dst);
  command.bytes = src.size;
  return enqueue(std::move(command));
}

Status OpenClStream::do_fill(BufferView dst, uint32_t pattern, uint32_t pattern_bytes) {
  Command command(Op::kFill);
  HXRT_ASSIGN_OR_RETURN(command.dst, resolve(dst, "fill"));
  command.bytes = dst.size;
  command.pattern = pattern;
  command.pattern_bytes = pattern_bytes;
  return enqueue(std::move(command));
}

Status OpenClStream::do_host_callback(HostCallback callback) {
  Command command(Op::kCallback);
  command.callback = std::move(callback);
  return enqueue(std::move(command));
}

Status OpenClStream::do_record(Event& event) {
  auto* cl_event = dynamic_cast<OpenClEvent*>(&event);
  if (cl_event == nullptr) return invalid_argument("record on stream '{}': not an OpenCL event", name());
  auto signal = std::make_shared<EventSignal>(name());
  Command command(Op::kRecord);
  command.signal = signal;
  // Published under the queue lock, so a wait enqueued after this record (on any stream) sees it.
  return enqueue(std::move(command), [&] { cl_event->set_current(std::move(signal)); });
}

Status OpenClStream::do_wait(Event& event, Duration timeout) {
  auto* cl_event = dynamic_cast<OpenClEvent*>(&event);
  if (cl_event == nullptr) {
    return unimplemented("stream '{}' (opencl) cannot wait on an event of device '{}'", name(),
                         event.device().info().name);
  }
  std::shared_ptr<EventSignal> signal = cl_event->current();
  if (!signal) return failed_precondition("wait on stream '{}': the event was never recorded", name());
  if (signal->state() == EventState::kComplete) return status();
  Command command(Op::kWait);
  command.signal = std::move(signal);
  command.timeout = timeout;
  return enqueue(std::move(command));
}

// ---- host side ----

Status OpenClStream::synchronize(Duration timeout) {
  if (timeout < Duration::zero()) return invalid_argument("synchronize: negative timeout");
  const uint64_t target = enqueued_.load(std::memory_order_acquire);
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

StreamState OpenClStream::query() const {
  StreamState state;
  const uint64_t done = completed_.load(std::memory_order_acquire);
  const uint64_t queued = enqueued_.load(std::memory_order_acquire);
  state.pending_commands = queued > done ? queued - done : 0;
  state.idle = state.pending_commands == 0;
  state.status = status();
  return state;
}

Status OpenClStream::status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

void OpenClStream::abort() {
  std::shared_ptr<EventSignal> waiting;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    cancel_.store(true, std::memory_order_relaxed);
    set_cancel_word(1);
    fail_locked(aborted("stream '{}' was aborted", name()));
    waiting = waiting_on_;
  }
  if (waiting) waiting->interrupt();
  work_cv_.notify_one();
}

Status OpenClStream::reset() {
  abort();
  Status drained = synchronize(kInfinite);
  drained.ignore();  // the stream is failed by construction here; the error is what reset clears
  std::lock_guard<std::mutex> lock(mutex_);
  error_ = ok_status();
  failed_.store(false, std::memory_order_release);
  cancel_.store(false, std::memory_order_relaxed);
  set_cancel_word(0);
  return ok_status();
}

}  // namespace hxrt::hal::opencl
