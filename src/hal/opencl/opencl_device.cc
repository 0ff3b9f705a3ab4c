// The OpenCL driver, device and buffers.
#include "hal/opencl/opencl_device.h"

#include <algorithm>
#include <sstream>

#include "hal/signal_event.h"
#include "hal/opencl/opencl_module.h"
#include "hal/opencl/opencl_stream.h"

namespace hxrt::hal::opencl {
namespace {

cl_map_flags map_flags(MapAccess access) {
  switch (access) {
    case MapAccess::kRead: return CL_MAP_READ;
    case MapAccess::kWrite: return CL_MAP_WRITE;
    case MapAccess::kReadWrite: return CL_MAP_READ | CL_MAP_WRITE;
  }
  return CL_MAP_READ | CL_MAP_WRITE;
}

// Blocking map of [offset, offset + size) of `mem` on `queue`.
Result<void*> map_blocking(cl_command_queue queue, cl_mem mem, cl_map_flags flags, uint64_t offset, uint64_t size) {
  cl_int err = CL_SUCCESS;
  void* pointer = clEnqueueMapBuffer(queue, mem, CL_TRUE, flags, offset, size, 0, nullptr, nullptr, &err);
  if (err != CL_SUCCESS) return cl_status(err, "clEnqueueMapBuffer");
  return pointer;
}

Status unmap_blocking(cl_command_queue queue, cl_mem mem, void* pointer) {
  ClEvent done;
  HXRT_CL_RETURN_IF_ERROR(clEnqueueUnmapMemObject(queue, mem, pointer, 0, nullptr, done.out()),
                          "clEnqueueUnmapMemObject");
  cl_event event = done.get();
  HXRT_CL_RETURN_IF_ERROR(clWaitForEvents(1, &event), "clWaitForEvents (unmap)");
  return ok_status();
}

}  // namespace

// ---- OpenClBuffer ----

OpenClBuffer::OpenClBuffer(OpenClDevice* device, ClMem mem, uint64_t size, MemoryKind kind, void* host_address,
                           bool registered, bool persistently_mapped)
    : Buffer(device, size, kind, host_address, registered),
      cl_device_(device),
      mem_(std::move(mem)),
      persistently_mapped_(persistently_mapped) {
  cl_device_->counters().on_created(size, registered);
}

OpenClBuffer::~OpenClBuffer() {
  sub_buffers_.clear();
  if (persistently_mapped_) unmap_blocking(cl_device_->internal_queue(), mem_.get(), host_address()).ignore();
  for (auto& [pointer, mapping] : mappings_) unmap_blocking(cl_device_->internal_queue(), mem_.get(), pointer).ignore();
  mem_.reset();
  cl_device_->counters().on_destroyed(size(), is_registered_host());
}

Result<ClMem> OpenClBuffer::kernel_arg_mem(uint64_t offset, uint64_t bytes) {
  if ((offset == 0 && bytes == size()) || bytes == 0) return mem_;
  const uint32_t alignment = cl_device_->info().min_alignment;
  if (offset % alignment != 0) {
    return invalid_argument(
        "opencl kernel argument: view offset {} is not a multiple of the device's base alignment {} (views passed "
        "to OpenCL kernels become sub-buffers)",
        offset, alignment);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [range, sub] : sub_buffers_) {
    if (range.first == offset && range.second == bytes) return sub;
  }
  cl_buffer_region region{offset, bytes};
  cl_int err = CL_SUCCESS;
  ClMem sub(clCreateSubBuffer(mem_.get(), 0, CL_BUFFER_CREATE_TYPE_REGION, &region, &err));
  if (err != CL_SUCCESS) return cl_status(err, "clCreateSubBuffer");
  // Evicting releases only our reference: commands already enqueued with the sub-buffer retain it.
  if (sub_buffers_.size() >= kMaxCachedSubBuffers) sub_buffers_.pop_front();
  sub_buffers_.emplace_back(std::make_pair(offset, bytes), sub);
  return sub;
}

Result<void*> OpenClBuffer::do_map(uint64_t offset, uint64_t bytes, MapAccess access) {
  if (persistently_mapped_) return static_cast<void*>(static_cast<char*>(host_address()) + offset);
  if (bytes == 0) return invalid_argument("map: zero-byte range of an OpenCL buffer");
  HXRT_ASSIGN_OR_RETURN(void* pointer,
                        map_blocking(cl_device_->internal_queue(), mem_.get(), map_flags(access), offset, bytes));
  std::lock_guard<std::mutex> lock(mutex_);
  mappings_.emplace(static_cast<char*>(pointer), Mapping{offset, bytes, access});
  return pointer;
}

Status OpenClBuffer::do_unmap(void* host_pointer) {
  auto* p = static_cast<char*>(host_pointer);
  if (persistently_mapped_) {
    auto* begin = static_cast<char*>(host_address());
    if (p < begin || p >= begin + size()) return invalid_argument("unmap: pointer is not inside this buffer");
    return ok_status();
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = mappings_.find(p);
    if (it == mappings_.end()) return invalid_argument("unmap: pointer was not returned by map() of this buffer");
    mappings_.erase(it);
  }
  return unmap_blocking(cl_device_->internal_queue(), mem_.get(), host_pointer);
}

// Note [Flush and invalidate]
// - Persistent mappings exist only on host-unified devices, where the mapping is the storage: nothing to do.
// - Registered host memory (CL_MEM_USE_HOST_PTR): the spec's synchronisation points are map and unmap, so flush
//   maps the range with CL_MAP_WRITE_INVALIDATE_REGION and unmaps it (host bytes → device), and invalidate maps it
//   for reading and unmaps it (device bytes → host memory). On host-unified devices both are cheap.
// - Live map() results of other buffers: on host-unified devices the mapping aliases the storage; elsewhere flush
//   writes the mapped bytes back with clEnqueueWriteBuffer and invalidate reads them with clEnqueueReadBuffer.
Status OpenClBuffer::do_flush(uint64_t offset, uint64_t bytes) {
  if (persistently_mapped_ || bytes == 0) return ok_status();
  if (is_registered_host()) {
    HXRT_ASSIGN_OR_RETURN(void* pointer, map_blocking(cl_device_->internal_queue(), mem_.get(),
                                                      CL_MAP_WRITE_INVALIDATE_REGION, offset, bytes));
    return unmap_blocking(cl_device_->internal_queue(), mem_.get(), pointer);
  }
  return sync_mappings(offset, bytes, /*to_device=*/true);
}

Status OpenClBuffer::do_invalidate(uint64_t offset, uint64_t bytes) {
  if (persistently_mapped_ || bytes == 0) return ok_status();
  if (is_registered_host()) {
    HXRT_ASSIGN_OR_RETURN(void* pointer,
                          map_blocking(cl_device_->internal_queue(), mem_.get(), CL_MAP_READ, offset, bytes));
    return unmap_blocking(cl_device_->internal_queue(), mem_.get(), pointer);
  }
  return sync_mappings(offset, bytes, /*to_device=*/false);
}

Status OpenClBuffer::sync_mappings(uint64_t offset, uint64_t bytes, bool to_device) {
  if (cl_device_->host_unified()) return ok_status();
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [pointer, mapping] : mappings_) {
    const uint64_t begin = std::max(offset, mapping.offset);
    const uint64_t end = std::min(offset + bytes, mapping.offset + mapping.size);
    if (begin >= end) continue;
    char* host = pointer + (begin - mapping.offset);
    if (to_device) {
      HXRT_CL_RETURN_IF_ERROR(clEnqueueWriteBuffer(cl_device_->internal_queue(), mem_.get(), CL_TRUE, begin,
                                                   end - begin, host, 0, nullptr, nullptr),
                              "clEnqueueWriteBuffer (flush)");
    } else {
      HXRT_CL_RETURN_IF_ERROR(clEnqueueReadBuffer(cl_device_->internal_queue(), mem_.get(), CL_TRUE, begin, end - begin,
                                                  host, 0, nullptr, nullptr),
                              "clEnqueueReadBuffer (invalidate)");
    }
  }
  return ok_status();
}

// ---- OpenClDevice ----

Result<std::unique_ptr<Device>> OpenClDevice::open(Driver* driver, DeviceInfo info, ClDeviceId id,
                                                   const OpenClDriverOptions& options) {
  std::unique_ptr<OpenClDevice> device(new OpenClDevice(driver, std::move(info), id, options));
  cl_int err = CL_SUCCESS;
  const cl_context_properties properties[] = {CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(id.platform),
                                              0};
  device->context_ = ClContext(clCreateContext(properties, 1, &id.device, nullptr, nullptr, &err));
  if (err != CL_SUCCESS) return cl_status(err, "clCreateContext");
  const cl_queue_properties queue_properties[] = {CL_QUEUE_PROPERTIES, CL_QUEUE_PROFILING_ENABLE, 0};
  device->internal_queue_ =
      ClQueue(clCreateCommandQueueWithProperties(device->context(), id.device, queue_properties, &err));
  if (err != CL_SUCCESS) return cl_status(err, "clCreateCommandQueueWithProperties");
  HXRT_RETURN_IF_ERROR_CTX(device->calibrate_clock(), "calibrating the clock of OpenCL device '{}'",
                           device->info().name);
  return std::unique_ptr<Device>(std::move(device));
}

OpenClDevice::~OpenClDevice() {
  release_shared_modules();  // their programs and kernels belong to context_
  if (internal_queue_) clFinish(internal_queue_.get());
}

// Note [Device clock]
// Event timestamps are CL_PROFILING_COMMAND_END of a marker, in the device's clock. At open we enqueue a marker on
// an idle queue between two host_now_ns() readings h0 and h1 taken around clFinish: the marker's end happened in
// [h0, h1], so offset = (h0 + h1) / 2 - end maps it with an error of at most (h1 - h0) / 2. The best try is kept:
// up to kTries, stopping at the first window under kGoodWindowNs (typically the first few on an idle PoCL; a busy
// machine, where the host thread is descheduled around clFinish, needs more); clock_error_ns() reports the bound.
// Drift is not corrected.
Status OpenClDevice::calibrate_clock() {
  constexpr int kTries = 64;
  constexpr int64_t kGoodWindowNs = 50'000;
  int64_t best_window = -1;
  for (int i = 0; i < kTries && !(best_window >= 0 && best_window < kGoodWindowNs); ++i) {
    ClEvent marker;
    const int64_t h0 = host_now_ns();
    HXRT_CL_RETURN_IF_ERROR(clEnqueueMarkerWithWaitList(internal_queue(), 0, nullptr, marker.out()),
                            "clEnqueueMarkerWithWaitList");
    HXRT_CL_RETURN_IF_ERROR(clFinish(internal_queue()), "clFinish");
    const int64_t h1 = host_now_ns();
    cl_ulong end = 0;
    if (clGetEventProfilingInfo(marker.get(), CL_PROFILING_COMMAND_END, sizeof(end), &end, nullptr) != CL_SUCCESS ||
        end == 0) {
      device_timestamps_ = false;  // events then take the host time at which completion was observed
      return ok_status();
    }
    if (best_window < 0 || h1 - h0 < best_window) {
      best_window = h1 - h0;
      clock_offset_ns_ = h0 + (h1 - h0) / 2 - static_cast<int64_t>(end);
      clock_error_ns_ = (h1 - h0) / 2 + 1;
    }
  }
  device_timestamps_ = true;
  return ok_status();
}

ClProgram OpenClDevice::cached_program(const std::string& key) const {
  std::lock_guard<std::mutex> lock(cache_mutex_);
  auto it = programs_.find(key);
  return it == programs_.end() ? ClProgram() : it->second;
}

void OpenClDevice::cache_program(const std::string& key, const ClProgram& program) {
  std::lock_guard<std::mutex> lock(cache_mutex_);
  programs_.emplace(key, program);
}

DeviceMemoryStats OpenClDevice::memory_stats() const { return counters_.stats(); }

Result<std::unique_ptr<Buffer>> OpenClDevice::do_allocate(uint64_t bytes, MemoryKind kind) {
  const bool host_memory = kind != MemoryKind::kDevice;
  const cl_mem_flags flags = CL_MEM_READ_WRITE | (host_memory ? CL_MEM_ALLOC_HOST_PTR : 0);
  cl_int err = CL_SUCCESS;
  ClMem mem(clCreateBuffer(context(), flags, bytes, nullptr, &err));
  if (err != CL_SUCCESS) {
    const DeviceMemoryStats stats = counters_.stats();
    return cl_status(err, "clCreateBuffer")
        .with_context(fmt::format("allocating {} bytes of {} memory on '{}' ({} live buffers, {} bytes held)", bytes,
                                  memory_kind_name(kind), info().name, stats.live_buffers, stats.allocated_bytes));
  }
  void* host = nullptr;
  if (host_memory && host_unified()) {
    // Mapped for the buffer's life: on a host-unified device the mapping is the storage (zero copy).
    HXRT_ASSIGN_OR_RETURN(host, map_blocking(internal_queue(), mem.get(), CL_MAP_READ | CL_MAP_WRITE, 0, bytes));
  }
  return std::unique_ptr<Buffer>(
      std::make_unique<OpenClBuffer>(this, std::move(mem), bytes, kind, host, false, host != nullptr));
}

Result<std::unique_ptr<Buffer>> OpenClDevice::do_register_host(void* host_pointer, uint64_t bytes) {
  cl_int err = CL_SUCCESS;
  ClMem mem(clCreateBuffer(context(), CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, bytes, host_pointer, &err));
  if (err != CL_SUCCESS) return cl_status(err, "clCreateBuffer (CL_MEM_USE_HOST_PTR)");
  return std::unique_ptr<Buffer>(
      std::make_unique<OpenClBuffer>(this, std::move(mem), bytes, MemoryKind::kHostMapped, host_pointer, true, false));
}

Result<std::unique_ptr<Stream>> OpenClDevice::do_create_stream(const StreamOptions& options) {
  const uint64_t index = stream_counter_.fetch_add(1, std::memory_order_relaxed);
  std::string name = options.name.empty() ? fmt::format("stream{}", index) : options.name;
  return OpenClStream::create(this, std::move(name));
}

Result<std::unique_ptr<Event>> OpenClDevice::do_create_event() {
  return std::unique_ptr<Event>(std::make_unique<SignalEvent>(this));
}

Result<std::unique_ptr<Module>> OpenClDevice::do_load_module(const ModuleSource& source) {
  return load_opencl_module(*this, source);
}

// ---- describe_cl_device and the driver ----

DeviceInfo describe_cl_device(ClDeviceId id, int ordinal) {
  DeviceInfo info;
  info.kind = DeviceKind::kOpenCL;
  info.ordinal = ordinal;
  info.name = device_info_string(id.device, CL_DEVICE_NAME);
  info.vendor = device_info_string(id.device, CL_DEVICE_VENDOR);
  info.driver_version = device_info_string(id.device, CL_DRIVER_VERSION);
  info.memory_bytes = device_info<cl_ulong>(id.device, CL_DEVICE_GLOBAL_MEM_SIZE);
  info.max_allocation_bytes =
      std::min<uint64_t>(device_info<cl_ulong>(id.device, CL_DEVICE_MAX_MEM_ALLOC_SIZE), info.memory_bytes);
  info.min_alignment = std::max<uint32_t>(1, device_info<cl_uint>(id.device, CL_DEVICE_MEM_BASE_ADDR_ALIGN) / 8);
  info.host_addressable = device_info<cl_bool>(id.device, CL_DEVICE_HOST_UNIFIED_MEMORY) == CL_TRUE;
  info.unified_memory = false;
  info.compute_units = static_cast<int>(device_info<cl_uint>(id.device, CL_DEVICE_MAX_COMPUTE_UNITS));
  const size_t resolution = device_info<size_t>(id.device, CL_DEVICE_PROFILING_TIMER_RESOLUTION);
  info.timestamp_resolution_ns = resolution > 0 ? static_cast<double>(resolution) : 1.0;
  std::istringstream extensions(device_info_string(id.device, CL_DEVICE_EXTENSIONS));
  for (std::string extension; extensions >> extension;) info.features.push_back(extension);
  const auto has = [&](std::string_view name) {
    return std::find(info.features.begin(), info.features.end(), name) != info.features.end();
  };
  info.supports_fp16 = has("cl_khr_fp16");
  info.supports_bf16 = false;
  return info;
}

namespace {

class OpenClDriver final : public Driver {
 public:
  explicit OpenClDriver(const OpenClDriverOptions& options) : options_(options) {}

  std::string_view name() const override { return "opencl"; }
  DeviceKind kind() const override { return DeviceKind::kOpenCL; }
  Status available() const override { return enumerate_cl_devices().status(); }

  Result<std::vector<DeviceInfo>> enumerate() override {
    HXRT_ASSIGN_OR_RETURN(const std::vector<ClDeviceId> ids, enumerate_cl_devices());
    std::vector<DeviceInfo> infos;
    for (size_t i = 0; i < ids.size(); ++i) infos.push_back(describe_cl_device(ids[i], static_cast<int>(i)));
    return infos;
  }

  Result<std::unique_ptr<Device>> open_device(int ordinal) override {
    HXRT_ASSIGN_OR_RETURN(const std::vector<ClDeviceId> ids, enumerate_cl_devices());
    if (ordinal < 0 || static_cast<size_t>(ordinal) >= ids.size()) {
      return not_found("opencl driver has {} device(s); there is no ordinal {}", ids.size(), ordinal);
    }
    const ClDeviceId id = ids[static_cast<size_t>(ordinal)];
    return OpenClDevice::open(this, describe_cl_device(id, ordinal), id, options_);
  }

 private:
  OpenClDriverOptions options_;
};

}  // namespace
}  // namespace hxrt::hal::opencl

namespace hxrt::hal {
std::unique_ptr<Driver> make_opencl_driver(const OpenClDriverOptions& options) {
  return std::make_unique<opencl::OpenClDriver>(options);
}
}  // namespace hxrt::hal
