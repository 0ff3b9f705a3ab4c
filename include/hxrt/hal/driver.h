// Driver: a device kind's entry point (cpu, opencl, cuda), and DriverRegistry: the set of drivers a program uses.
//
// A driver whose library or hardware is absent still registers; available() then says Unavailable and why, and
// enumerate()/open_device() return that Status. Nothing else fails. The registry is an ordinary object the program
// creates and passes around (no global singleton); register_builtin_drivers() adds the drivers compiled into this
// build.
//
// Thread-safety: Driver is thread-safe. DriverRegistry is thread-compatible: fill it, then share it read-only.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "hxrt/base/status.h"
#include "hxrt/hal/device.h"
#include "hxrt/hal/types.h"

namespace hxrt::hal {

class Driver {
 public:
  virtual ~Driver() = default;
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  virtual std::string_view name() const = 0;  // "cpu", "opencl", "cuda"
  virtual DeviceKind kind() const = 0;
  // OK, or Unavailable saying what is missing.
  virtual Status available() const = 0;
  virtual Result<std::vector<DeviceInfo>> enumerate() = 0;
  virtual Result<std::unique_ptr<Device>> open_device(int ordinal) = 0;

 protected:
  Driver() = default;
};

class DriverRegistry {
 public:
  DriverRegistry() = default;
  DriverRegistry(const DriverRegistry&) = delete;
  DriverRegistry& operator=(const DriverRegistry&) = delete;

  // AlreadyExists when a driver of that name is registered.
  Status add(std::unique_ptr<Driver> driver);
  // NotFound lists the registered names.
  Result<Driver*> find(std::string_view name) const;
  std::vector<Driver*> drivers() const;
  // Every device of every available driver, in registration order; a driver whose library is absent, or whose
  // enumeration fails, contributes none (its status is the driver's available()).
  std::vector<DeviceInfo> available_devices() const;
  // Opens "cpu", "cpu:0", "opencl:1", ...
  Result<std::unique_ptr<Device>> open(std::string_view spec) const;

 private:
  std::vector<std::unique_ptr<Driver>> drivers_;
};

// Adds every driver of this build: cpu, opencl and cuda (the last two report Unavailable where their library or
// hardware is absent). Adding a device kind adds one line here. `cpu_threads`: the CPU driver's intra-op threads
// (0 = every core).
Status register_builtin_drivers(DriverRegistry& registry, int cpu_threads = 0);

}  // namespace hxrt::hal
