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

// A status word a kernel stored into ctl[1]: a StatusCode value, or anything else as Internal.
StatusCode kernel_status_code(int word) {
  if (word > 0 && word <= static_cast<int>(StatusCode::kInternal)) return static_cast<StatusCode>(word);
  return StatusCode::kInternal;
}

}  // namespace

// Note [OpenCL stream submission]
// OpenCL cannot cancel a command once it is in a cl_command_queue, while the HAL contract says abort() discards
// queued work and interrupts a wait in progress. So an OpenCL stream is a host-queued stream (Note [Host-queued
// streams] in hal/host_queued_stream.cc): its worker enqueues one command on the stream's in-order cl_command_queue,
// waits for its cl_event and checks its execution status before taking the next. At any moment at most one command
// of a stream is on the device, and it is the only one abort() cannot discard (a kernel that takes the control
// words stops early by polling ctl[0]). What is OpenCL's own:
//  - A command whose event ends with a negative status, whose kernel stored a status into ctl[1], or whose
//    enqueue failed, fails the stream (sticky, as on every host-queued stream).
//  - Cross-stream waits submit nothing: the waiter's worker blocks on the recording stream's signal, so no
//    clEnqueueBarrierWithWaitList is needed.
//  - Records enqueue a marker; its CL_PROFILING_COMMAND_END mapped onto the host clock (Note [Device clock] in
//    opencl_device.cc, clamped to the host time at which completion was observed) is the event's timestamp.
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
    : HostQueuedStream(device, std::move(name), HostQueuedStreamOptions{}),
      cl_device_(device),
      queue_(std::move(queue)),
      ctl_(std::move(ctl)),
      ctl_host_(ctl_host) {
  start();
}

OpenClStream::~OpenClStream() {
  stop();
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

void OpenClStream::on_cancel(bool cancelled) {
  if (ctl_host_ != nullptr) std::atomic_ref<int>(ctl_host_[0]).store(cancelled ? 1 : 0, std::memory_order_relaxed);
}

// ---- enqueue side ----

Result<OpenClStream::ClPlace> OpenClStream::resolve(const Place& place, const char* what) const {
  ClPlace resolved;
  if (place.view.buffer == nullptr) {
    resolved.host = static_cast<char*>(place.host);
    return resolved;
  }
  auto* buffer = dynamic_cast<OpenClBuffer*>(place.view.buffer);
  if (buffer != nullptr && &buffer->device() == &device()) {
    resolved.mem = ClMem(buffer->mem());
    clRetainMemObject(buffer->mem());
    resolved.offset = place.view.offset;
    return resolved;
  }
  resolved.host = static_cast<char*>(place.view.host_address());
  if (resolved.host == nullptr) {
    return invalid_argument("{} on stream '{}': buffer is not usable by this device", what, name());
  }
  return resolved;
}

Status OpenClStream::prepare(Command& command) {
  switch (command.kind) {
    case CommandKind::kLaunch: return prepare_launch(command);
    case CommandKind::kCopy: {
      auto payload = std::make_unique<CopyPayload>();
      HXRT_ASSIGN_OR_RETURN(payload->dst, resolve(command.dst, "copy destination"));
      HXRT_ASSIGN_OR_RETURN(payload->src, resolve(command.src, "copy source"));
      if (payload->dst.mem && payload->dst.mem.get() == payload->src.mem.get() &&
          command.dst.view.offset < command.src.view.offset + command.src.view.size &&
          command.src.view.offset < command.dst.view.offset + command.dst.view.size) {
        return invalid_argument("copy on stream '{}': source and destination overlap in one OpenCL buffer", name());
      }
      command.payload = std::move(payload);
      return ok_status();
    }
    case CommandKind::kFill: {
      auto payload = std::make_unique<CopyPayload>();
      HXRT_ASSIGN_OR_RETURN(payload->dst, resolve(command.dst, "fill"));
      command.payload = std::move(payload);
      return ok_status();
    }
    default: return ok_status();
  }
}

Status OpenClStream::prepare_launch(Command& command) {
  const Kernel& kernel = *command.kernel;
  const auto* cl_kernel = dynamic_cast<const OpenClKernel*>(&kernel);
  if (cl_kernel == nullptr) return invalid_argument("kernel '{}' is not an OpenCL kernel", kernel.name());
  if (command.config.shared_bytes != 0) {
    return unimplemented("kernel '{}': LaunchConfig::shared_bytes is not supported on OpenCL; declare __local arrays",
                         kernel.name());
  }
  const std::vector<KernelArg>& args = command.args;
  auto payload = std::make_unique<LaunchPayload>();
  if (cl_kernel->num_args() == args.size() + 1) {
    payload->pass_ctl = true;
  } else if (cl_kernel->num_args() != args.size()) {
    return invalid_argument("kernel '{}' takes {} arguments; the launch passes {}", kernel.name(),
                            cl_kernel->num_args(), args.size());
  }
  payload->args.resize(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const KernelArg& arg = args[i];
    Arg& out = payload->args[i];
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
  command.args.clear();  // resolved into the payload
  command.payload = std::move(payload);
  return ok_status();
}

// ---- worker side ----

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

Status OpenClStream::execute_launch(Command& command) {
  const auto& kernel = static_cast<const OpenClKernel&>(*command.kernel);  // checked by prepare()
  auto& payload = static_cast<LaunchPayload&>(*command.payload);
  const auto context = [&] { return fmt::format("running kernel '{}' on stream '{}'", kernel.name(), name()); };
  if (payload.pass_ctl) {
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
    for (size_t i = 0; i < payload.args.size(); ++i) {
      const Arg& arg = payload.args[i];
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
    if (payload.pass_ctl) {
      cl_mem ctl = ctl_.get();
      HXRT_RETURN_IF_ERROR_CTX(
          cl_status(clSetKernelArg(kernel.get(), static_cast<cl_uint>(payload.args.size()), sizeof(cl_mem), &ctl),
                    "clSetKernelArg (control words)"),
          "{}", context());
    }
    HXRT_RETURN_IF_ERROR_CTX(cl_status(clEnqueueNDRangeKernel(queue_.get(), kernel.get(), 3, nullptr, global.data(),
                                                              local.data(), 0, nullptr, done.out()),
                                       "clEnqueueNDRangeKernel"),
                             "{}", context());
  }
  HXRT_RETURN_IF_ERROR_CTX(wait_for(done, "clEnqueueNDRangeKernel"), "{}", context());
  if (payload.pass_ctl) {
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
  auto& payload = static_cast<CopyPayload&>(*command.payload);
  ClPlace& dst = payload.dst;
  ClPlace& src = payload.src;
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
  ClPlace& dst = static_cast<CopyPayload&>(*command.payload).dst;
  if (!dst.mem) {  // host memory of another device
    fill_host(dst.host, command.bytes, command.pattern, command.pattern_bytes);
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
    fill_host(staging.data(), command.bytes, command.pattern, command.pattern_bytes);
    err = clEnqueueWriteBuffer(queue_.get(), dst.mem.get(), CL_FALSE, dst.offset, command.bytes, staging.data(), 0,
                               nullptr, done.out());
  }
  HXRT_RETURN_IF_ERROR_CTX(cl_status(err, "clEnqueueFillBuffer"), "{}", context());
  HXRT_RETURN_IF_ERROR_CTX(wait_for(done, "clEnqueueFillBuffer"), "{}", context());
  return ok_status();
}

Result<int64_t> OpenClStream::execute_record() {
  ClEvent marker;
  HXRT_RETURN_IF_ERROR(
      cl_status(clEnqueueMarkerWithWaitList(queue_.get(), 0, nullptr, marker.out()), "clEnqueueMarkerWithWaitList"));
  HXRT_RETURN_IF_ERROR(wait_for(marker, "clEnqueueMarkerWithWaitList"));
  const int64_t observed = host_now_ns();
  cl_ulong end = 0;
  if (cl_device_->device_timestamps() &&
      clGetEventProfilingInfo(marker.get(), CL_PROFILING_COMMAND_END, sizeof(end), &end, nullptr) == CL_SUCCESS) {
    return std::min(cl_device_->device_to_host_ns(end), observed);
  }
  return observed;
}

}  // namespace hxrt::hal::opencl
