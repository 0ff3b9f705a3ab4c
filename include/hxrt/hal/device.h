// Device: one opened device of a driver. Creates buffers, streams, events and JIT modules.
//
// Ownership: everything created is returned as a unique_ptr owned by the caller and must be destroyed before the
// Device. Sessions (runtime/) own a Device and everything made from it, and tear it down in order. The one
// exception is shared_module(): those modules belong to the device, so a kernel library that outlives devices (a
// registries bundle's OpenCL kernels) holds no object a device made.
//
// Thread-safety: thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "hxrt/base/status.h"
#include "hxrt/hal/buffer.h"
#include "hxrt/hal/event.h"
#include "hxrt/hal/kernel.h"
#include "hxrt/hal/stream.h"
#include "hxrt/hal/types.h"

namespace hxrt::hal {

class Driver;

struct DeviceMemoryStats {
  uint64_t allocated_bytes = 0;  // bytes held in live Buffers made by allocate()
  uint64_t peak_allocated_bytes = 0;
  uint64_t live_buffers = 0;        // Buffers made by allocate() and not yet destroyed
  uint64_t registered_buffers = 0;  // Buffers made by register_host() and not yet destroyed
};

class Device {
 public:
  virtual ~Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const DeviceInfo& info() const { return info_; }
  Driver& driver() const { return *driver_; }

  // A new buffer of `bytes` (> 0) bytes aligned to info().min_alignment. InvalidArgument for 0; OutOfMemory when
  // the request exceeds max_allocation_bytes or the device cannot serve it (the message says which).
  Result<std::unique_ptr<Buffer>> allocate(uint64_t bytes, MemoryKind kind);
  // Wraps caller-owned host memory as a device-visible buffer without copying (zero copy). Unimplemented where the
  // device cannot address host memory; the caller keeps ownership and must outlive the buffer.
  Result<std::unique_ptr<Buffer>> register_host(void* host_pointer, uint64_t bytes);
  Result<std::unique_ptr<Stream>> create_stream(const StreamOptions& options = {});
  Result<std::unique_ptr<Event>> create_event();
  // Compiles a JIT module; Unimplemented on devices without a compiler (cpu).
  Result<std::unique_ptr<Module>> load_module(const ModuleSource& source);
  // The module known by `key` on this device: built from make() with load_module() on the first request, then kept
  // by the device until it is destroyed. `key` must identify the source and options (the caller's short name for
  // them: a hit costs one map lookup, no source is built). `built`, when given, says whether this call built it.
  // Concurrent first requests for one key build it once (the call holds the device's module lock meanwhile).
  Result<const Module*> shared_module(std::string_view key, const std::function<ModuleSource()>& make,
                                      bool* built = nullptr);

  virtual DeviceMemoryStats memory_stats() const = 0;

 protected:
  Device(Driver* driver, DeviceInfo info) : driver_(driver), info_(std::move(info)) {}

  virtual Result<std::unique_ptr<Buffer>> do_allocate(uint64_t bytes, MemoryKind kind) = 0;
  virtual Result<std::unique_ptr<Buffer>> do_register_host(void* host_pointer, uint64_t bytes) = 0;
  virtual Result<std::unique_ptr<Stream>> do_create_stream(const StreamOptions& options) = 0;
  virtual Result<std::unique_ptr<Event>> do_create_event() = 0;
  virtual Result<std::unique_ptr<Module>> do_load_module(const ModuleSource& source) = 0;
  // Destroys the shared modules now. A driver whose modules refer to its own members calls it first in its
  // destructor, since the base class's members are destroyed only after the derived class's.
  void release_shared_modules();

 private:
  Driver* driver_;
  DeviceInfo info_;
  std::mutex shared_modules_mutex_;
  std::map<std::string, std::unique_ptr<Module>, std::less<>> shared_modules_;  // by shared_modules_mutex_
};

}  // namespace hxrt::hal
