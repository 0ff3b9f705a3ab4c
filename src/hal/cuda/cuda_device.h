// The CUDA device, its buffers and its clock (include/hxrt/hal/cuda/cuda_driver.h maps the HAL onto CUDA).
//
// Thread-safety: thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "hal/cuda/cuda_api.h"
#include "hal/memory_counters.h"
#include "hxrt/hal/cuda/cuda_driver.h"
#include "hxrt/hal/device.h"

namespace hxrt::hal::cuda {

class CudaDevice;

// Makes the device's primary context current on the calling thread for the scope (CUDA contexts are per thread).
class ScopedContext {
 public:
  explicit ScopedContext(const CudaDevice& device);
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;
  const Status& status() const { return status_; }

 private:
  Status status_;
};

class CudaBuffer final : public Buffer {
 public:
  enum class Storage : uint8_t { kDevice, kHostAlloc, kRegistered };
  // `device_pointer`: where kernels address the bytes (for host allocations, their device mapping; 0 for pinned
  // memory that is not mapped). `host_address`: the pinned/mapped/registered host bytes, null for device memory.
  CudaBuffer(CudaDevice* device, Storage storage, CUdeviceptr device_pointer, void* host_address, uint64_t size,
             MemoryKind kind);
  ~CudaBuffer() override;

  CUdeviceptr device_pointer() const { return device_pointer_; }
  uint64_t native_handle() const override { return device_pointer_; }

 protected:
  Result<void*> do_map(uint64_t offset, uint64_t size, MapAccess access) override;
  Status do_unmap(void* host_pointer) override;
  Status do_flush(uint64_t offset, uint64_t size) override;
  Status do_invalidate(uint64_t offset, uint64_t size) override;

 private:
  struct Staging {
    uint64_t offset = 0;
    uint64_t size = 0;
    MapAccess access = MapAccess::kRead;
    std::unique_ptr<char[]> bytes;
  };

  CudaDevice* cuda_device_;
  const Storage storage_;
  const CUdeviceptr device_pointer_;
  std::mutex mutex_;
  std::map<char*, Staging> staging_;  // guarded by mutex_; live map() results of device memory
};

class CudaDevice final : public Device {
 public:
  static Result<std::unique_ptr<Device>> open(Driver* driver, const DriverApi& api, DeviceInfo info, CUdevice handle,
                                              const CudaDriverOptions& options);
  ~CudaDevice() override;

  const DriverApi& api() const { return *api_; }
  CUcontext context() const { return context_; }
  const CudaDriverOptions& options() const { return options_; }
  // The compute capability as "sm_90".
  const std::string& arch() const { return arch_; }

  // Maps a CUevent completed after the clock's anchor onto the host steady clock (Note [CUDA clock] in
  // cuda_device.cc).
  Result<int64_t> event_to_host_ns(CUevent event);

  // In-memory cubin cache, keyed by the JIT cache key (cuda_module.cc).
  std::string cached_cubin(const std::string& key) const;
  void cache_cubin(const std::string& key, std::string cubin);

  DeviceMemoryStats memory_stats() const override;
  MemoryCounters& counters() { return counters_; }

 protected:
  Result<std::unique_ptr<Buffer>> do_allocate(uint64_t bytes, MemoryKind kind) override;
  Result<std::unique_ptr<Buffer>> do_register_host(void* host_pointer, uint64_t bytes) override;
  Result<std::unique_ptr<Stream>> do_create_stream(const StreamOptions& options) override;
  Result<std::unique_ptr<Event>> do_create_event() override;
  Result<std::unique_ptr<Module>> do_load_module(const ModuleSource& source) override;

 private:
  CudaDevice(Driver* driver, const DriverApi& api, DeviceInfo info, CUdevice handle, const CudaDriverOptions& options)
      : Device(driver, std::move(info)), api_(&api), handle_(handle), options_(options) {}
  // Records the clock's anchor: a CUevent on an internal stream, and the host time at which it completed.
  Status anchor_clock();

  const DriverApi* api_;
  CUdevice handle_;
  CudaDriverOptions options_;
  CUcontext context_ = nullptr;  // the primary context, retained while the device is open
  std::string arch_;

  std::mutex clock_mutex_;
  CUstream clock_stream_ = nullptr;  // guarded by clock_mutex_
  CUevent anchor_ = nullptr;         // guarded by clock_mutex_
  int64_t anchor_host_ns_ = 0;       // guarded by clock_mutex_

  mutable std::mutex cache_mutex_;
  std::unordered_map<std::string, std::string> cubins_;  // guarded by cache_mutex_

  std::atomic<uint64_t> stream_counter_{0};
  MemoryCounters counters_;
};

// DeviceInfo of CUDA device `ordinal`.
Result<DeviceInfo> describe_cuda_device(const DriverApi& api, int ordinal);

}  // namespace hxrt::hal::cuda
