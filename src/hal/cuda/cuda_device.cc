// The CUDA driver, device and buffers.
#include "hal/cuda/cuda_device.h"

#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "hal/cuda/cuda_drivers.h"
#include "hal/cuda/cuda_module.h"
#include "hal/cuda/cuda_stream.h"
#include "hal/signal_event.h"

namespace hxrt::hal::cuda {
namespace {

constexpr uint32_t kAlignment = 256;  // cuMemAlloc returns 256-byte aligned memory (and the allocator's blocks keep it)
constexpr unsigned kHostAllocFlags = CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE;
constexpr float kReanchorMs = 10'000.0f;  // Note [CUDA clock]

int attribute(const DriverApi& api, CUdevice device, CUdevice_attribute what) {
  int value = 0;
  if (api.device_get_attribute(&value, what, device) != CUDA_SUCCESS) return 0;
  return value;
}

}  // namespace

ScopedContext::ScopedContext(const CudaDevice& device) {
  status_ = cu_status(device.api().ctx_set_current(device.context()), "cuCtxSetCurrent");
}

// ---- CudaBuffer ----

CudaBuffer::CudaBuffer(CudaDevice* device, Storage storage, CUdeviceptr device_pointer, void* host_address,
                       uint64_t size, MemoryKind kind)
    : Buffer(device, size, kind, host_address, storage == Storage::kRegistered),
      cuda_device_(device),
      storage_(storage),
      device_pointer_(device_pointer) {
  cuda_device_->counters().on_created(size, storage == Storage::kRegistered);
}

CudaBuffer::~CudaBuffer() {
  const DriverApi& api = cuda_device_->api();
  ScopedContext context(*cuda_device_);
  switch (storage_) {
    case Storage::kDevice: api.mem_free(device_pointer_); break;
    case Storage::kHostAlloc: api.mem_free_host(host_address()); break;
    case Storage::kRegistered: api.mem_host_unregister(host_address()); break;
  }
  cuda_device_->counters().on_destroyed(size(), is_registered_host());
}

// Note [Mapping device memory]
// Device memory has no host address, so map() copies the range into a host staging allocation (a blocking copy, after
// whatever the streams have finished: the caller synchronises first, as for any map) and unmap() of a writable
// mapping copies it back. flush() and invalidate() copy live mappings that overlap their range. Pinned, mapped and
// registered memory is addressed in place and is coherent, so for it all four are trivial.
Result<void*> CudaBuffer::do_map(uint64_t offset, uint64_t bytes, MapAccess access) {
  if (host_address() != nullptr) return static_cast<void*>(static_cast<char*>(host_address()) + offset);
  if (bytes == 0) return invalid_argument("map: zero-byte range of a CUDA device buffer");
  Staging staging{offset, bytes, access, std::make_unique<char[]>(bytes)};
  {  // also for kWrite: unmap writes the whole range back, so bytes the caller leaves alone keep their value
    ScopedContext context(*cuda_device_);
    HXRT_RETURN_IF_ERROR(context.status());
    HXRT_CU_RETURN_IF_ERROR(cuda_device_->api().memcpy_dtoh(staging.bytes.get(), device_pointer_ + offset, bytes),
                            "cuMemcpyDtoH (map)");
  }
  char* pointer = staging.bytes.get();
  std::lock_guard<std::mutex> lock(mutex_);
  staging_.emplace(pointer, std::move(staging));
  return static_cast<void*>(pointer);
}

Status CudaBuffer::do_unmap(void* host_pointer) {
  auto* p = static_cast<char*>(host_pointer);
  if (host_address() != nullptr) {
    auto* begin = static_cast<char*>(host_address());
    if (p < begin || p >= begin + size()) return invalid_argument("unmap: pointer is not inside this buffer");
    return ok_status();
  }
  Staging staging;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = staging_.find(p);
    if (it == staging_.end()) return invalid_argument("unmap: pointer was not returned by map() of this buffer");
    staging = std::move(it->second);
    staging_.erase(it);
  }
  if (staging.access == MapAccess::kRead) return ok_status();
  ScopedContext context(*cuda_device_);
  HXRT_RETURN_IF_ERROR(context.status());
  HXRT_CU_RETURN_IF_ERROR(
      cuda_device_->api().memcpy_htod(device_pointer_ + staging.offset, staging.bytes.get(), staging.size),
      "cuMemcpyHtoD (unmap)");
  return ok_status();
}

Status CudaBuffer::do_flush(uint64_t offset, uint64_t bytes) {
  if (host_address() != nullptr || bytes == 0) return ok_status();
  ScopedContext context(*cuda_device_);
  HXRT_RETURN_IF_ERROR(context.status());
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [pointer, staging] : staging_) {
    if (staging.offset >= offset + bytes || offset >= staging.offset + staging.size) continue;
    HXRT_CU_RETURN_IF_ERROR(cuda_device_->api().memcpy_htod(device_pointer_ + staging.offset, pointer, staging.size),
                            "cuMemcpyHtoD (flush)");
  }
  return ok_status();
}

Status CudaBuffer::do_invalidate(uint64_t offset, uint64_t bytes) {
  if (host_address() != nullptr || bytes == 0) return ok_status();
  ScopedContext context(*cuda_device_);
  HXRT_RETURN_IF_ERROR(context.status());
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [pointer, staging] : staging_) {
    if (staging.offset >= offset + bytes || offset >= staging.offset + staging.size) continue;
    HXRT_CU_RETURN_IF_ERROR(cuda_device_->api().memcpy_dtoh(pointer, device_pointer_ + staging.offset, staging.size),
                            "cuMemcpyDtoH (invalidate)");
  }
  return ok_status();
}

// ---- CudaDevice ----

Result<DeviceInfo> describe_cuda_device(const DriverApi& api, int ordinal) {
  CUdevice device = 0;
  HXRT_CU_RETURN_IF_ERROR(api.device_get(&device, ordinal), "cuDeviceGet");
  char name[256] = {};
  HXRT_CU_RETURN_IF_ERROR(api.device_get_name(name, sizeof(name) - 1, device), "cuDeviceGetName");
  size_t memory = 0;
  HXRT_CU_RETURN_IF_ERROR(api.device_total_mem(&memory, device), "cuDeviceTotalMem");
  int driver = 0;
  api.driver_get_version(&driver);
  const int major = attribute(api, device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  const int minor = attribute(api, device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  DeviceInfo info;
  info.kind = DeviceKind::kCuda;
  info.ordinal = ordinal;
  info.name = name;
  info.vendor = "NVIDIA";
  info.driver_version = fmt::format("{}.{}", driver / 1000, (driver % 1000) / 10);
  info.memory_bytes = memory;
  info.max_allocation_bytes = memory;
  info.min_alignment = kAlignment;
  info.host_addressable = false;  // see cuda_driver.h: weights go to device memory
  info.unified_memory = attribute(api, device, CU_DEVICE_ATTRIBUTE_INTEGRATED) != 0;
  info.compute_units = attribute(api, device, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  info.supports_fp16 = major * 10 + minor >= 53;
  info.supports_bf16 = major >= 8;
  info.timestamp_resolution_ns = 500.0;  // cuEventElapsedTime's documented resolution (~0.5 µs)
  info.features.push_back(fmt::format("sm_{}{}", major, minor));
  if (major >= 7) info.features.emplace_back("tensor_cores");
  if (attribute(api, device, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY) != 0) info.features.emplace_back("managed_memory");
  if (attribute(api, device, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY) != 0) info.features.emplace_back("map_host_memory");
  info.features.push_back(fmt::format("l2_bytes={}", attribute(api, device, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)));
  info.features.push_back(
      fmt::format("memory_bus_bits={}", attribute(api, device, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)));
  info.features.push_back(fmt::format("memory_clock_khz={}", attribute(api, device, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)));
  return info;
}

Result<std::unique_ptr<Device>> CudaDevice::open(Driver* driver, const DriverApi& api, DeviceInfo info,
                                                 CUdevice handle, const CudaDriverOptions& options) {
  auto device = std::unique_ptr<CudaDevice>(new CudaDevice(driver, api, std::move(info), handle, options));
  HXRT_CU_RETURN_IF_ERROR(api.primary_ctx_retain(&device->context_, handle), "cuDevicePrimaryCtxRetain");
  const int major = attribute(api, handle, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  const int minor = attribute(api, handle, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  device->arch_ = fmt::format("sm_{}{}", major, minor);
  {
    std::lock_guard<std::mutex> lock(device->clock_mutex_);
    HXRT_RETURN_IF_ERROR_CTX(device->anchor_clock(), "anchoring the clock of cuda device '{}'", device->info().name);
  }
  return std::unique_ptr<Device>(std::move(device));
}

CudaDevice::~CudaDevice() {
  release_shared_modules();
  {
    ScopedContext context(*this);
    if (anchor_ != nullptr) api_->event_destroy(anchor_);
    if (clock_stream_ != nullptr) api_->stream_destroy(clock_stream_);
  }
  if (context_ != nullptr) api_->primary_ctx_release(handle_);
}

// Note [CUDA clock]
// CUDA events give only differences (cuEventElapsedTime, a float of milliseconds, ~0.5 µs resolution). The device
// records an anchor event on its own idle stream, which completes it at once, and takes the midpoint of host readings
// before the record and after its completion as its host time; an event's timestamp is then the anchor's host time
// plus the event's time since the anchor. The error is half that window (the same for every event, so durations are
// exact), and a float
// of milliseconds loses precision far from the anchor, so the anchor is renewed once an event is over 10 s away.
Status CudaDevice::anchor_clock() {
  ScopedContext context(*this);
  HXRT_RETURN_IF_ERROR(context.status());
  if (clock_stream_ == nullptr) {
    HXRT_CU_RETURN_IF_ERROR(api_->stream_create(&clock_stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  }
  if (anchor_ == nullptr) HXRT_CU_RETURN_IF_ERROR(api_->event_create(&anchor_, CU_EVENT_DEFAULT), "cuEventCreate");
  const int64_t before = host_now_ns();
  HXRT_CU_RETURN_IF_ERROR(api_->event_record(anchor_, clock_stream_), "cuEventRecord (clock anchor)");
  HXRT_CU_RETURN_IF_ERROR(api_->event_synchronize(anchor_), "cuEventSynchronize (clock anchor)");
  // The idle clock stream completes the anchor as soon as it is recorded: between the two readings.
  anchor_host_ns_ = before + (host_now_ns() - before) / 2;
  return ok_status();
}

Result<int64_t> CudaDevice::event_to_host_ns(CUevent event) {
  HXRT_CU_RETURN_IF_ERROR(api_->event_synchronize(event), "cuEventSynchronize");
  std::lock_guard<std::mutex> lock(clock_mutex_);
  float ms = 0.0f;
  HXRT_CU_RETURN_IF_ERROR(api_->event_elapsed_time(&ms, anchor_, event), "cuEventElapsedTime");
  if (std::fabs(ms) > kReanchorMs) {
    HXRT_RETURN_IF_ERROR(anchor_clock());
    HXRT_CU_RETURN_IF_ERROR(api_->event_elapsed_time(&ms, anchor_, event), "cuEventElapsedTime");
  }
  return anchor_host_ns_ + static_cast<int64_t>(std::llround(static_cast<double>(ms) * 1e6));
}

std::string CudaDevice::cached_cubin(const std::string& key) const {
  std::lock_guard<std::mutex> lock(cache_mutex_);
  auto it = cubins_.find(key);
  return it == cubins_.end() ? std::string() : it->second;
}

void CudaDevice::cache_cubin(const std::string& key, std::string cubin) {
  std::lock_guard<std::mutex> lock(cache_mutex_);
  cubins_.emplace(key, std::move(cubin));
}

DeviceMemoryStats CudaDevice::memory_stats() const { return counters_.stats(); }

Result<std::unique_ptr<Buffer>> CudaDevice::do_allocate(uint64_t bytes, MemoryKind kind) {
  if (bytes > info().max_allocation_bytes) {
    return out_of_memory("cuda device '{}': {} bytes exceed the device's {} bytes", info().name, bytes,
                         info().max_allocation_bytes);
  }
  ScopedContext context(*this);
  HXRT_RETURN_IF_ERROR(context.status());
  if (kind == MemoryKind::kDevice) {
    CUdeviceptr pointer = 0;
    if (const CUresult r = api_->mem_alloc(&pointer, bytes); r != CUDA_SUCCESS) {
      return cu_status(r, "cuMemAlloc").with_context(fmt::format("allocating {} bytes on cuda device '{}'", bytes, info().name));
    }
    return std::unique_ptr<Buffer>(
        std::make_unique<CudaBuffer>(this, CudaBuffer::Storage::kDevice, pointer, nullptr, bytes, kind));
  }
  void* host = nullptr;
  if (const CUresult r = api_->mem_host_alloc(&host, bytes, kHostAllocFlags); r != CUDA_SUCCESS) {
    return cu_status(r, "cuMemHostAlloc").with_context(fmt::format("allocating {} bytes of {} memory", bytes, memory_kind_name(kind)));
  }
  CUdeviceptr pointer = 0;
  if (const CUresult r = api_->mem_host_get_device_pointer(&pointer, host, 0); r != CUDA_SUCCESS) {
    api_->mem_free_host(host);
    return cu_status(r, "cuMemHostGetDevicePointer");
  }
  return std::unique_ptr<Buffer>(
      std::make_unique<CudaBuffer>(this, CudaBuffer::Storage::kHostAlloc, pointer, host, bytes, kind));
}

Result<std::unique_ptr<Buffer>> CudaDevice::do_register_host(void* /*host_pointer*/, uint64_t /*bytes*/) {
  return unimplemented("register_host: cuda device '{}' keeps host memory off its kernels' path (host_addressable is "
                       "false); allocate MemoryKind::kHostMapped for zero-copy buffers",
                       info().name);
}

Result<std::unique_ptr<Stream>> CudaDevice::do_create_stream(const StreamOptions& options) {
  std::string name = options.name.empty() ? fmt::format("stream{}", stream_counter_.fetch_add(1)) : options.name;
  return CudaStream::create(this, std::move(name));
}

Result<std::unique_ptr<Event>> CudaDevice::do_create_event() {
  return std::unique_ptr<Event>(std::make_unique<SignalEvent>(this));
}

Result<std::unique_ptr<Module>> CudaDevice::do_load_module(const ModuleSource& source) {
  return load_cuda_module(*this, source);
}

// ---- the driver ----

namespace {

class CudaDriver final : public Driver {
 public:
  explicit CudaDriver(const CudaDriverOptions& options) : options_(options) {
    if (const char* sync = std::getenv("HXRT_CUDA_SYNC"); sync != nullptr && std::strcmp(sync, "1") == 0) {
      options_.synchronous = true;
    }
  }
  std::string_view name() const override { return "cuda"; }
  DeviceKind kind() const override { return DeviceKind::kCuda; }

  Status available() const override {
    HXRT_ASSIGN_OR_RETURN(const DriverApi* api, driver_api());
    int count = 0;
    HXRT_CU_RETURN_IF_ERROR(api->device_get_count(&count), "cuDeviceGetCount");
    if (count == 0) return unavailable("cuda: the CUDA driver is installed but reports no GPU");
    return ok_status();
  }

  Result<std::vector<DeviceInfo>> enumerate() override {
    HXRT_RETURN_IF_ERROR(available());
    HXRT_ASSIGN_OR_RETURN(const DriverApi* api, driver_api());
    int count = 0;
    HXRT_CU_RETURN_IF_ERROR(api->device_get_count(&count), "cuDeviceGetCount");
    std::vector<DeviceInfo> devices;
    for (int i = 0; i < count; ++i) {
      HXRT_ASSIGN_OR_RETURN(DeviceInfo info, describe_cuda_device(*api, i));
      devices.push_back(std::move(info));
    }
    return devices;
  }

  Result<std::unique_ptr<Device>> open_device(int ordinal) override {
    HXRT_RETURN_IF_ERROR(available());
    HXRT_ASSIGN_OR_RETURN(const DriverApi* api, driver_api());
    int count = 0;
    HXRT_CU_RETURN_IF_ERROR(api->device_get_count(&count), "cuDeviceGetCount");
    if (ordinal < 0 || ordinal >= count) {
      return not_found("cuda:{}: there are {} CUDA device(s) (cuda:0 .. cuda:{})", ordinal, count, count - 1);
    }
    CUdevice handle = 0;
    HXRT_CU_RETURN_IF_ERROR(api->device_get(&handle, ordinal), "cuDeviceGet");
    HXRT_ASSIGN_OR_RETURN(DeviceInfo info, describe_cuda_device(*api, ordinal));
    return CudaDevice::open(this, *api, std::move(info), handle, options_);
  }

 private:
  CudaDriverOptions options_;
};

}  // namespace
}  // namespace hxrt::hal::cuda

namespace hxrt::hal::cuda {

std::unique_ptr<Driver> make_hardware_driver(const CudaDriverOptions& options) {
  return std::make_unique<CudaDriver>(options);
}

}  // namespace hxrt::hal::cuda
