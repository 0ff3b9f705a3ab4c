// The OpenCL device and its buffers (see include/hxrt/hal/opencl/opencl_driver.h for the mapping of the HAL onto
// OpenCL).
//
// Thread-safety: thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "hal/memory_counters.h"
#include "hal/opencl/cl_common.h"
#include "hxrt/hal/device.h"
#include "hxrt/hal/opencl/opencl_driver.h"

namespace hxrt::hal::opencl {

class OpenClDevice;

class OpenClBuffer final : public Buffer {
 public:
  // `host_address`: the persistent mapping (host-mapped/pinned memory on host-unified devices) or the registered
  // host memory; null otherwise.
  OpenClBuffer(OpenClDevice* device, ClMem mem, uint64_t size, MemoryKind kind, void* host_address, bool registered,
               bool persistently_mapped);
  ~OpenClBuffer() override;

  cl_mem mem() const { return mem_.get(); }
  uint64_t native_handle() const override { return reinterpret_cast<uint64_t>(mem_.get()); }
  // A cl_mem covering exactly [offset, offset + size) for a kernel argument: the buffer itself for the whole range,
  // else a sub-buffer (cached per buffer). InvalidArgument when `offset` is not a multiple of min_alignment.
  Result<ClMem> kernel_arg_mem(uint64_t offset, uint64_t size);

 protected:
  Result<void*> do_map(uint64_t offset, uint64_t size, MapAccess access) override;
  Status do_unmap(void* host_pointer) override;
  Status do_flush(uint64_t offset, uint64_t size) override;
  Status do_invalidate(uint64_t offset, uint64_t size) override;

 private:
  struct Mapping {
    uint64_t offset = 0;
    uint64_t size = 0;
    MapAccess access = MapAccess::kRead;
  };
  // Copies between a live mapping and the buffer where the device is not host-unified (Note [Flush and
  // invalidate] in opencl_device.cc).
  Status sync_mappings(uint64_t offset, uint64_t size, bool to_device);

  static constexpr size_t kMaxCachedSubBuffers = 64;

  OpenClDevice* cl_device_;
  ClMem mem_;
  const bool persistently_mapped_;
  std::mutex mutex_;
  std::multimap<char*, Mapping> mappings_;  // guarded by mutex_; live clEnqueueMapBuffer results
  std::deque<std::pair<std::pair<uint64_t, uint64_t>, ClMem>> sub_buffers_;  // guarded by mutex_; (offset, size)
};

class OpenClDevice final : public Device {
 public:
  static Result<std::unique_ptr<Device>> open(Driver* driver, DeviceInfo info, ClDeviceId id,
                                              const OpenClDriverOptions& options);
  ~OpenClDevice() override;

  cl_context context() const { return context_.get(); }
  cl_device_id device_id() const { return id_.device; }
  // An in-order queue for map/unmap and other device-level blocking work.
  cl_command_queue internal_queue() const { return internal_queue_.get(); }
  bool host_unified() const { return info().host_addressable; }
  const OpenClDriverOptions& options() const { return options_; }

  // Maps a CL_PROFILING_COMMAND_* time onto the host steady clock (Note [Device clock] in opencl_device.cc).
  int64_t device_to_host_ns(cl_ulong device_ns) const { return static_cast<int64_t>(device_ns) + clock_offset_ns_; }
  // Half the width of the calibration window: the bound on the error of device_to_host_ns (plus clock drift).
  int64_t clock_error_ns() const { return clock_error_ns_; }
  bool device_timestamps() const { return device_timestamps_; }

  // In-memory program cache, keyed by the JIT cache key (opencl_module.cc).
  ClProgram cached_program(const std::string& key) const;
  void cache_program(const std::string& key, const ClProgram& program);

  DeviceMemoryStats memory_stats() const override;
  MemoryCounters& counters() { return counters_; }

 protected:
  Result<std::unique_ptr<Buffer>> do_allocate(uint64_t bytes, MemoryKind kind) override;
  Result<std::unique_ptr<Buffer>> do_register_host(void* host_pointer, uint64_t bytes) override;
  Result<std::unique_ptr<Stream>> do_create_stream(const StreamOptions& options) override;
  Result<std::unique_ptr<Event>> do_create_event() override;
  Result<std::unique_ptr<Module>> do_load_module(const ModuleSource& source) override;

 private:
  OpenClDevice(Driver* driver, DeviceInfo info, ClDeviceId id, const OpenClDriverOptions& options)
      : Device(driver, std::move(info)), id_(id), options_(options) {}
  Status calibrate_clock();

  ClDeviceId id_;
  OpenClDriverOptions options_;
  ClContext context_;
  ClQueue internal_queue_;
  int64_t clock_offset_ns_ = 0;
  int64_t clock_error_ns_ = 0;
  bool device_timestamps_ = false;

  mutable std::mutex cache_mutex_;
  std::unordered_map<std::string, ClProgram> programs_;  // guarded by cache_mutex_

  std::atomic<uint64_t> stream_counter_{0};
  MemoryCounters counters_;
};

// DeviceInfo of one CL device (ordinal = its index among all devices of all platforms).
DeviceInfo describe_cl_device(ClDeviceId id, int ordinal);

}  // namespace hxrt::hal::opencl
