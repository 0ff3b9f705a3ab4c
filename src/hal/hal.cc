// Argument checking shared by every backend: the public, non-virtual halves of the HAL contracts.
#include <chrono>

#include "hxrt/base/check.h"
#include "hxrt/base/fault_injection.h"
#include "hxrt/hal/buffer.h"
#include "hxrt/hal/device.h"
#include "hxrt/hal/event.h"
#include "hxrt/hal/stream.h"
#include "hxrt/hal/types.h"

namespace hxrt::hal {

std::string_view device_kind_name(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kCpu: return "cpu";
    case DeviceKind::kOpenCL: return "opencl";
    case DeviceKind::kCuda: return "cuda";
  }
  return "unknown";
}

std::string device_spec(const DeviceInfo& info) {
  return std::string(device_kind_name(info.kind)) + ":" + std::to_string(info.ordinal);
}

std::string_view memory_kind_name(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kDevice: return "device";
    case MemoryKind::kHostPinned: return "host-pinned";
    case MemoryKind::kHostMapped: return "host-mapped";
  }
  return "unknown";
}

std::string_view event_state_name(EventState state) {
  switch (state) {
    case EventState::kUnrecorded: return "unrecorded";
    case EventState::kPending: return "pending";
    case EventState::kComplete: return "complete";
    case EventState::kFailed: return "failed";
  }
  return "unknown";
}

int64_t host_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Note [One deadline per call]: a public call that blocks takes a timeout (or inherits one from its options) and
// turns it into one Deadline when it starts; each wait inside it gets deadline.remaining(). A call that waits on
// three streams in turn thus returns within its timeout, not within three times it.
Deadline Deadline::after(Duration timeout) {
  if (timeout == kInfinite) return never();
  const Clock::time_point now = Clock::now();
  const Duration clamped = std::max(timeout, Duration::zero());
  if (clamped > Clock::time_point::max() - now) return never();
  return Deadline(now + clamped);
}

Duration Deadline::remaining() const {
  if (infinite()) return kInfinite;
  return std::max(Duration::zero(), std::chrono::duration_cast<Duration>(when_ - Clock::now()));
}

// ---- Buffer ----

Status Buffer::check_range(uint64_t offset, uint64_t bytes, const char* what) const {
  if (offset > size_ || bytes > size_ - offset) {
    return out_of_range("{}: range [{}, {}+{}) is outside the {}-byte buffer", what, offset, offset, bytes, size_);
  }
  return ok_status();
}

Result<void*> Buffer::map(uint64_t offset, uint64_t bytes, MapAccess access) {
  HXRT_RETURN_IF_ERROR(check_range(offset, bytes, "map"));
  return do_map(offset, bytes, access);
}

Status Buffer::unmap(void* host_pointer) {
  if (host_pointer == nullptr) return invalid_argument("unmap of a null pointer");
  return do_unmap(host_pointer);
}

Status Buffer::flush(uint64_t offset, uint64_t bytes) {
  HXRT_RETURN_IF_ERROR(check_range(offset, bytes, "flush"));
  return do_flush(offset, bytes);
}

Status Buffer::invalidate(uint64_t offset, uint64_t bytes) {
  HXRT_RETURN_IF_ERROR(check_range(offset, bytes, "invalidate"));
  return do_invalidate(offset, bytes);
}

BufferView BufferView::subview(uint64_t off, uint64_t bytes) const {
  HXRT_CHECK(off <= size && bytes <= size - off, "subview [{}, +{}) of a {}-byte view", off, bytes, size);
  return BufferView(buffer, offset + off, bytes);
}

// ---- Event ----

Result<Duration> Event::elapsed_since(const Event& start) const {
  if (&start.device() != &device()) return invalid_argument("elapsed_since: events belong to different devices");
  HXRT_ASSIGN_OR_RETURN(const int64_t begin, start.timestamp_ns());
  HXRT_ASSIGN_OR_RETURN(const int64_t end, timestamp_ns());
  return Duration(end - begin);
}

// ---- Stream ----

Status Stream::check_view(const BufferView& view, const char* what) const {
  if (view.buffer == nullptr) return invalid_argument("{}: null buffer", what);
  if (!view.valid()) {
    return out_of_range("{}: view [{}, +{}) is outside the {}-byte buffer", what, view.offset, view.size,
                        view.buffer->size());
  }
  if (&view.buffer->device() != device_ && view.buffer->host_address() == nullptr) {
    return invalid_argument("{}: buffer belongs to device '{}', not to stream '{}''s device '{}'", what,
                            view.buffer->device().info().name, name_, device_->info().name);
  }
  return ok_status();
}

Status Stream::launch(const Kernel& kernel, const LaunchConfig& config, std::span<const KernelArg> args) {
  if (kernel.device_kind() != device_->info().kind) {
    return invalid_argument("kernel '{}' is a {} kernel; stream '{}' is on a {} device", kernel.name(),
                            device_kind_name(kernel.device_kind()), name_, device_kind_name(device_->info().kind));
  }
  for (uint32_t extent : config.grid) {
    if (extent == 0) return invalid_argument("kernel '{}': grid has a zero extent", kernel.name());
  }
  for (uint32_t extent : config.block) {
    if (extent == 0) return invalid_argument("kernel '{}': block has a zero extent", kernel.name());
  }
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].kind() != KernelArg::Kind::kBuffer) continue;
    HXRT_RETURN_IF_ERROR_CTX(check_view(args[i].view(), "launch"), "checking argument {} of kernel '{}'", i,
                             kernel.name());
  }
  return do_launch(kernel, config, args);
}

Status Stream::copy(BufferView dst, BufferView src) {
  HXRT_RETURN_IF_ERROR(check_view(dst, "copy destination"));
  HXRT_RETURN_IF_ERROR(check_view(src, "copy source"));
  if (dst.size != src.size) return invalid_argument("copy: destination has {} bytes, source {}", dst.size, src.size);
  if (dst.size == 0) return ok_status();
  return do_copy(dst, src);
}

Status Stream::copy_from_host(BufferView dst, const void* src) {
  HXRT_RETURN_IF_ERROR(check_view(dst, "copy_from_host destination"));
  if (src == nullptr && dst.size > 0) return invalid_argument("copy_from_host: null host source");
  if (dst.size == 0) return ok_status();
  return do_copy_from_host(dst, src);
}

Status Stream::copy_to_host(void* dst, BufferView src) {
  HXRT_RETURN_IF_ERROR(check_view(src, "copy_to_host source"));
  if (dst == nullptr && src.size > 0) return invalid_argument("copy_to_host: null host destination");
  if (src.size == 0) return ok_status();
  return do_copy_to_host(dst, src);
}

Status Stream::fill(BufferView dst, uint32_t pattern, uint32_t pattern_bytes) {
  HXRT_RETURN_IF_ERROR(check_view(dst, "fill"));
  if (pattern_bytes != 1 && pattern_bytes != 2 && pattern_bytes != 4) {
    return invalid_argument("fill: pattern size must be 1, 2 or 4 bytes, not {}", pattern_bytes);
  }
  if (dst.size % pattern_bytes != 0) {
    return invalid_argument("fill: {} bytes is not a multiple of the {}-byte pattern", dst.size, pattern_bytes);
  }
  if (dst.size == 0) return ok_status();
  return do_fill(dst, pattern, pattern_bytes);
}

Status Stream::host_callback(HostCallback callback) {
  if (!callback) return invalid_argument("host_callback: empty callback");
  return do_host_callback(std::move(callback));
}

Status Stream::host_task(HostTask task, HostCallback on_skip) {
  if (!task) return invalid_argument("host_task: empty task");
  return do_host_task(std::move(task), std::move(on_skip));
}

Status Stream::do_host_task(HostTask /*task*/, HostCallback /*on_skip*/) {
  return unimplemented("stream '{}' runs no host tasks (Note [Host tasks])", name());
}

Status Stream::record(Event& event) {
  if (&event.device() != device_) {
    return invalid_argument("record: event belongs to device '{}', stream '{}' to '{}'", event.device().info().name,
                            name_, device_->info().name);
  }
  return do_record(event);
}

Status Stream::wait(Event& event, Duration timeout) {
  if (timeout < Duration::zero()) return invalid_argument("wait: negative timeout");
  if (event.state() == EventState::kUnrecorded) {
    return failed_precondition("wait on stream '{}': the event was never recorded", name_);
  }
  return do_wait(event, timeout);
}

Status Stream::begin_capture() {
  return unimplemented("stream '{}' cannot capture command lists", name_);
}

Result<std::shared_ptr<const CapturedCommands>> Stream::end_capture(std::vector<std::string> /*labels*/) {
  return failed_precondition("end_capture on stream '{}': not capturing", name_);
}

Status Stream::launch_captured(std::shared_ptr<const CapturedCommands> commands) {
  if (!commands) return invalid_argument("launch_captured on stream '{}': no command list", name_);
  return unimplemented("stream '{}' cannot replay command lists", name_);
}

// ---- Device ----

Result<std::unique_ptr<Buffer>> Device::allocate(uint64_t bytes, MemoryKind kind) {
  if (bytes == 0) return invalid_argument("allocate: zero bytes requested on device '{}'", info_.name);
  if (bytes > info_.max_allocation_bytes) {
    return out_of_memory("allocate: {} bytes exceed the largest single allocation of device '{}' ({} bytes)", bytes,
                         info_.name, info_.max_allocation_bytes);
  }
  const fault::Site site = kind == MemoryKind::kDevice       ? fault::Site::kDeviceAlloc
                           : kind == MemoryKind::kHostPinned ? fault::Site::kHostPinnedAlloc
                                                             : fault::Site::kHostMappedAlloc;
  HXRT_RETURN_IF_ERROR(fault::check(site, [&] {
    return fmt::format("{} bytes of {} memory on device '{}'", bytes, memory_kind_name(kind), info_.name);
  }));
  return do_allocate(bytes, kind);
}

Result<std::unique_ptr<Buffer>> Device::register_host(void* host_pointer, uint64_t bytes) {
  if (host_pointer == nullptr) return invalid_argument("register_host: null pointer");
  if (bytes == 0) return invalid_argument("register_host: zero bytes");
  if (!info_.host_addressable) {
    return unimplemented("register_host: device '{}' cannot address host memory", info_.name);
  }
  HXRT_RETURN_IF_ERROR(fault::check(fault::Site::kHostRegister,
                                    [&] { return fmt::format("{} bytes on device '{}'", bytes, info_.name); }));
  return do_register_host(host_pointer, bytes);
}

Result<std::unique_ptr<Stream>> Device::create_stream(const StreamOptions& options) {
  HXRT_RETURN_IF_ERROR(fault::check(fault::Site::kStreamCreate, [&] {
    return fmt::format("stream '{}' on device '{}'", options.name, info_.name);
  }));
  return do_create_stream(options);
}

Result<std::unique_ptr<Event>> Device::create_event() {
  HXRT_RETURN_IF_ERROR(
      fault::check(fault::Site::kEventCreate, [&] { return fmt::format("an event on device '{}'", info_.name); }));
  return do_create_event();
}

Result<std::unique_ptr<Module>> Device::load_module(const ModuleSource& source) {
  if (source.code.empty() && source.language != ModuleSource::Language::kLibrary) {
    return invalid_argument("load_module '{}': empty source", source.name);
  }
  HXRT_RETURN_IF_ERROR(fault::check(fault::Site::kModuleLoad, [&] {
    return fmt::format("module '{}' on device '{}'", source.name, info_.name);
  }));
  return do_load_module(source);
}

Result<const Module*> Device::shared_module(std::string_view key, const std::function<ModuleSource()>& make,
                                            bool* built) {
  std::lock_guard<std::mutex> lock(shared_modules_mutex_);
  auto it = shared_modules_.find(key);
  if (built != nullptr) *built = it == shared_modules_.end();
  if (it == shared_modules_.end()) {
    HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Module> module, load_module(make()));
    it = shared_modules_.emplace(std::string(key), std::move(module)).first;
  }
  return it->second.get();
}

void Device::release_shared_modules() {
  std::lock_guard<std::mutex> lock(shared_modules_mutex_);
  shared_modules_.clear();
}

}  // namespace hxrt::hal
