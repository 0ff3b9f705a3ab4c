#include "hal/cuda/cuda_stream.h"

#include <cstring>

#include <fmt/format.h>

#include "hal/cuda/cuda_device.h"

namespace hxrt::hal::cuda {

// Note [CUDA stream submission]
// A CUDA stream is an in-order device queue, but the HAL contract needs things it does not give: commands discarded by
// abort(), sticky errors that skip later commands, cross-stream waits with timeouts that abort interrupts, and events
// any stream of any device can wait on. So a CUDA stream is a host-queued stream like the OpenCL one, with one
// difference that matters on a GPU: its worker does not wait for each command. Launches, copies and fills are
// submitted to the CUstream as they come (Note [Asynchronous submission] in host_queued_stream.cc), so the device runs
// back to back while the host enqueues; the worker synchronises the CUstream only before event records, host callbacks
// and cross-stream waits, and when it runs out of work. Then it also reads the stream's kernel status word: a kernel
// that found bad input stores a StatusCode into ctl[1] and returns, and the stream fails with that code. Because many
// commands may run between two such points, the message names the last kernel and how many ran; with
// CudaDriverOptions::synchronous every launch is awaited and the failing kernel is named exactly.
//
// Kernels that take the control words are the ones that can fail (they validate indices) or stop early (abort), so a
// launch of one is awaited before the next command is submitted: a failure then fails the stream before anything
// after it reached the device (later commands are skipped, as the contract says), names that kernel (and, in a
// replayed list, its index), and abort() discards everything behind a kernel it interrupted. Plain kernels cannot
// fail, so submitting them ahead costs nothing but this: those already submitted when abort() comes still run.
//
// Event records are where profiles come from: the worker records a CUevent, waits for it, and maps its time onto the
// host clock (Note [CUDA clock] in cuda_device.cc). A profiled run therefore waits at every op boundary, as any
// per-op GPU profile does; an unprofiled run (no records inside a step) does not.

Result<std::unique_ptr<Stream>> CudaStream::create(CudaDevice* device, std::string name) {
  const DriverApi& api = device->api();
  ScopedContext context(*device);
  HXRT_RETURN_IF_ERROR(context.status());
  CUstream stream = nullptr;
  HXRT_CU_RETURN_IF_ERROR(api.stream_create(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  CUevent event = nullptr;
  if (const CUresult r = api.event_create(&event, CU_EVENT_DEFAULT); r != CUDA_SUCCESS) {
    api.stream_destroy(stream);
    return cu_status(r, "cuEventCreate");
  }
  void* ctl = nullptr;
  CUdeviceptr ctl_device = 0;
  CUresult r = api.mem_host_alloc(&ctl, 2 * sizeof(int32_t), CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
  if (r == CUDA_SUCCESS) r = api.mem_host_get_device_pointer(&ctl_device, ctl, 0);
  if (r != CUDA_SUCCESS) {
    if (ctl != nullptr) api.mem_free_host(ctl);
    api.event_destroy(event);
    api.stream_destroy(stream);
    return cu_status(r, "cuMemHostAlloc (stream control words)");
  }
  std::memset(ctl, 0, 2 * sizeof(int32_t));
  auto out = std::unique_ptr<CudaStream>(
      new CudaStream(device, std::move(name), stream, event, static_cast<volatile int32_t*>(ctl), ctl_device));
  out->start();
  return std::unique_ptr<Stream>(std::move(out));
}

CudaStream::CudaStream(CudaDevice* device, std::string name, CUstream stream, CUevent record_event,
                       volatile int32_t* ctl, CUdeviceptr ctl_device)
    : HostQueuedStream(device, std::move(name), HostQueuedStreamOptions{.asynchronous = true}),
      cuda_device_(device),
      stream_(stream),
      record_event_(record_event),
      ctl_(ctl),
      ctl_device_(ctl_device) {}

CudaStream::~CudaStream() {
  stop();
  const DriverApi& api = cuda_device_->api();
  ScopedContext context(*cuda_device_);
  api.stream_synchronize(stream_);
  if (cublas_ != nullptr) {
    if (Result<const CublasApi*> blas = cublas_api(); blas.ok()) (*blas)->destroy(cublas_);
  }
  api.event_destroy(record_event_);
  api.stream_destroy(stream_);
  api.mem_free_host(const_cast<int32_t*>(ctl_));
}

Status CudaStream::make_current() {
  HXRT_CU_RETURN_IF_ERROR(cuda_device_->api().ctx_set_current(cuda_device_->context()), "cuCtxSetCurrent");
  return ok_status();
}

Result<cublasHandle_t> CudaStream::cublas_handle() {
  if (cublas_ != nullptr) return cublas_;
  HXRT_ASSIGN_OR_RETURN(const CublasApi* blas, cublas_api());
  HXRT_RETURN_IF_ERROR(make_current());
  cublasHandle_t handle = nullptr;
  if (const cublasStatus_t s = blas->create(&handle); s != CUBLAS_STATUS_SUCCESS) {
    return internal_error("cublasCreate on stream '{}' failed: {}", name(), blas->get_status_string(s));
  }
  if (const cublasStatus_t s = blas->set_stream(handle, reinterpret_cast<cudaStream_t>(stream_));
      s != CUBLAS_STATUS_SUCCESS) {
    blas->destroy(handle);
    return internal_error("cublasSetStream on stream '{}' failed: {}", name(), blas->get_status_string(s));
  }
  cublas_ = handle;
  return cublas_;
}

Result<CudaStream::CuPlace> CudaStream::resolve(const Place& place, const char* what) const {
  CuPlace out;
  if (place.view.buffer == nullptr) {
    out.host = static_cast<char*>(place.host);
    return out;
  }
  auto* buffer = dynamic_cast<CudaBuffer*>(place.view.buffer);
  if (buffer == nullptr || &buffer->device() != &device()) {
    // Another device's host-addressable memory (the CPU side of a split plan) is host memory to this stream.
    if (void* host = place.view.host_address(); host != nullptr) {
      out.host = static_cast<char*>(host);
      return out;
    }
    return invalid_argument("{} on cuda stream '{}': the buffer belongs to device '{}' and is not host-addressable",
                            what, name(), place.view.buffer->device().info().name);
  }
  if (buffer->device_pointer() != 0) {
    out.device = buffer->device_pointer() + place.view.offset;
  } else {
    out.host = static_cast<char*>(buffer->host_address()) + place.view.offset;
  }
  return out;
}

Status CudaStream::prepare(Command& command) {
  switch (command.kind) {
    case CommandKind::kLaunch: return prepare_launch(command);
    case CommandKind::kCopy: {
      auto payload = std::make_unique<CopyPayload>();
      HXRT_ASSIGN_OR_RETURN(payload->dst, resolve(command.dst, "copy"));
      HXRT_ASSIGN_OR_RETURN(payload->src, resolve(command.src, "copy"));
      command.payload = std::move(payload);
      return ok_status();
    }
    case CommandKind::kFill: {
      auto payload = std::make_unique<CopyPayload>();
      HXRT_ASSIGN_OR_RETURN(payload->dst, resolve(command.dst, "fill"));
      if (payload->dst.device % command.pattern_bytes != 0) {
        return invalid_argument("fill on cuda stream '{}': a {}-byte pattern needs a {}-byte aligned destination", name(),
                                command.pattern_bytes, command.pattern_bytes);
      }
      command.payload = std::move(payload);
      return ok_status();
    }
    default: return ok_status();
  }
}

Status CudaStream::prepare_launch(Command& command) {
  auto payload = std::make_unique<LaunchPayload>();
  if (const auto* library = dynamic_cast<const CudaLibraryKernel*>(command.kernel); library != nullptr) {
    HXRT_RETURN_IF_ERROR(library->check(command.args));
    for (const KernelArg& arg : command.args) {
      if (arg.kind() != KernelArg::Kind::kBuffer) continue;
      HXRT_ASSIGN_OR_RETURN(const CuPlace place, resolve(Place{arg.view()}, library->name().c_str()));
      if (place.device == 0) {
        return invalid_argument("{}: a buffer argument has no device address (host memory of another device)",
                                library->name());
      }
    }
    payload->library = library;
    command.payload = std::move(payload);
    return ok_status();
  }
  const auto* kernel = dynamic_cast<const CudaKernel*>(command.kernel);
  if (kernel == nullptr) {
    return invalid_argument("cuda stream '{}' cannot launch kernel '{}' of a {} device", name(), command.kernel->name(),
                            device_kind_name(command.kernel->device_kind()));
  }
  const LaunchConfig& config = command.config;
  const uint64_t threads = uint64_t{config.block[0]} * config.block[1] * config.block[2];
  if (threads == 0 || threads > 1024 || config.grid[0] == 0 || config.grid[1] == 0 || config.grid[2] == 0 ||
      config.grid[1] > 65535 || config.grid[2] > 65535) {
    return invalid_argument("kernel '{}': launch grid ({}, {}, {}) of blocks ({}, {}, {}) is outside CUDA's limits",
                            kernel->name(), config.grid[0], config.grid[1], config.grid[2], config.block[0],
                            config.block[1], config.block[2]);
  }
  const size_t passed = command.args.size();
  const int declared = kernel->param_count();
  // Where the driver cannot count parameters (before CUDA 12.4), the control words are always appended: cuLaunchKernel
  // reads only as many entries as the kernel declares.
  const bool pass_ctl = declared < 0 || static_cast<size_t>(declared) == passed + 1;
  if (declared >= 0 && !pass_ctl && static_cast<size_t>(declared) != passed) {
    return invalid_argument("kernel '{}' declares {} parameters, the launch passes {}", kernel->name(), declared, passed);
  }
  payload->kernel = kernel;
  payload->pass_ctl = pass_ctl && declared >= 0;
  payload->values.resize(passed + (pass_ctl ? 1 : 0));
  payload->params.resize(payload->values.size());
  for (size_t i = 0; i < passed; ++i) {
    const KernelArg& arg = command.args[i];
    auto& value = payload->values[i];
    switch (arg.kind()) {
      case KernelArg::Kind::kBuffer: {
        HXRT_ASSIGN_OR_RETURN(const CuPlace place, resolve(Place{arg.view()}, kernel->name().c_str()));
        if (place.device == 0) {
          return invalid_argument("kernel '{}' argument {}: the buffer has no device address", kernel->name(), i);
        }
        std::memcpy(value.data(), &place.device, sizeof(place.device));
        break;
      }
      case KernelArg::Kind::kScalar: {
        const std::span<const std::byte> bytes = arg.scalar_bytes();
        std::memcpy(value.data(), bytes.data(), bytes.size());
        break;
      }
      case KernelArg::Kind::kHostPointer:
        return invalid_argument("kernel '{}' argument {}: host pointers are for CPU kernels only", kernel->name(), i);
    }
    payload->params[i] = value.data();
  }
  if (pass_ctl) {
    std::memcpy(payload->values.back().data(), &ctl_device_, sizeof(ctl_device_));
    payload->params.back() = payload->values.back().data();
  }
  command.payload = std::move(payload);
  return ok_status();
}

Status CudaStream::execute_launch(Command& command) {
  auto* payload = static_cast<LaunchPayload*>(command.payload.get());
  HXRT_RETURN_IF_ERROR(make_current());
  ++launches_since_await_;
  last_launch_ = command.kernel;
  if (payload->library != nullptr) {
    HXRT_RETURN_IF_ERROR(payload->library->run(*this, command.args));
  } else {
    const LaunchConfig& c = command.config;
    const CUresult r =
        cuda_device_->api().launch_kernel(payload->kernel->function(), c.grid[0], c.grid[1], c.grid[2], c.block[0],
                                          c.block[1], c.block[2], c.shared_bytes, stream_, payload->params.data(), nullptr);
    if (r != CUDA_SUCCESS) return cu_status(r, fmt::format("cuLaunchKernel of '{}'", command.kernel->name()));
  }
  if (cuda_device_->options().synchronous || payload->pass_ctl) return await_device();
  return ok_status();
}

Status CudaStream::execute_copy(Command& command) {
  const auto* payload = static_cast<const CopyPayload*>(command.payload.get());
  HXRT_RETURN_IF_ERROR(make_current());
  const DriverApi& api = cuda_device_->api();
  const CuPlace& dst = payload->dst;
  const CuPlace& src = payload->src;
  const size_t bytes = command.bytes;
  if (bytes == 0) return ok_status();
  CUresult r = CUDA_SUCCESS;
  if (dst.device != 0 && src.device != 0) {
    r = api.memcpy_dtod_async(dst.device, src.device, bytes, stream_);
  } else if (dst.device != 0) {
    r = api.memcpy_htod_async(dst.device, src.host, bytes, stream_);
  } else if (src.device != 0) {
    r = api.memcpy_dtoh_async(dst.host, src.device, bytes, stream_);
  } else {
    // Host to host: after the device work before it (a kernel may have written the source through a mapping).
    HXRT_CU_RETURN_IF_ERROR(api.stream_synchronize(stream_), "cuStreamSynchronize");
    std::memmove(dst.host, src.host, bytes);
  }
  if (r != CUDA_SUCCESS) return cu_status(r, fmt::format("copy of {} bytes on cuda stream '{}'", bytes, name()));
  return ok_status();
}

Status CudaStream::execute_fill(Command& command) {
  const auto* payload = static_cast<const CopyPayload*>(command.payload.get());
  HXRT_RETURN_IF_ERROR(make_current());
  const DriverApi& api = cuda_device_->api();
  if (payload->dst.device == 0) {
    HXRT_CU_RETURN_IF_ERROR(api.stream_synchronize(stream_), "cuStreamSynchronize");
    fill_host(payload->dst.host, command.bytes, command.pattern, command.pattern_bytes);
    return ok_status();
  }
  CUresult r = CUDA_SUCCESS;
  switch (command.pattern_bytes) {
    case 1: r = api.memset_d8_async(payload->dst.device, static_cast<unsigned char>(command.pattern), command.bytes, stream_); break;
    case 2: r = api.memset_d16_async(payload->dst.device, static_cast<unsigned short>(command.pattern), command.bytes / 2, stream_); break;
    default: r = api.memset_d32_async(payload->dst.device, command.pattern, command.bytes / 4, stream_); break;
  }
  if (r != CUDA_SUCCESS) return cu_status(r, fmt::format("fill of {} bytes on cuda stream '{}'", command.bytes, name()));
  return ok_status();
}

Result<int64_t> CudaStream::execute_record() {
  HXRT_RETURN_IF_ERROR(make_current());
  HXRT_CU_RETURN_IF_ERROR(cuda_device_->api().event_record(record_event_, stream_), "cuEventRecord");
  return cuda_device_->event_to_host_ns(record_event_);
}

void CudaStream::on_cancel(bool cancelled) {
  ctl_[0] = cancelled ? 1 : 0;
  if (!cancelled) ctl_[1] = 0;
}

Status CudaStream::await_device() {
  HXRT_RETURN_IF_ERROR(make_current());
  const uint64_t launches = std::exchange(launches_since_await_, 0);
  const Kernel* last_kernel = std::exchange(last_launch_, nullptr);
  const std::string last = last_kernel != nullptr ? last_kernel->name() : std::string("(none)");
  const auto which = [&] {
    return launches <= 1 ? fmt::format("kernel '{}'", last)
                         : fmt::format("one of the {} kernels submitted since the last synchronisation point (the last "
                                       "was '{}'; CudaDriverOptions::synchronous or HXRT_CUDA_SYNC=1 names it exactly)",
                                       launches, last);
  };
  if (const CUresult r = cuda_device_->api().stream_synchronize(stream_); r != CUDA_SUCCESS) {
    return cu_status(r, fmt::format("cuStreamSynchronize on cuda stream '{}'", name()))
        .with_context(fmt::format("after {}", which()));
  }
  const int32_t code = ctl_[1];
  if (code == 0) return ok_status();
  ctl_[1] = 0;
  if (code < 1 || code > static_cast<int32_t>(StatusCode::kInternal)) {
    return internal_error("{} stored status word {} on cuda stream '{}' (not a StatusCode)", which(), code, name());
  }
  return Status(static_cast<StatusCode>(code),
                fmt::format("{} on cuda stream '{}' reported {}", which(), name(),
                            status_code_name(static_cast<StatusCode>(code))));
}

}  // namespace hxrt::hal::cuda
