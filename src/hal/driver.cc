#include "hxrt/hal/driver.h"

#include <charconv>
#include <string>

#include <fmt/ranges.h>

#include "hxrt/hal/cpu/cpu_driver.h"
#include "hxrt/hal/cuda/cuda_driver.h"
#include "hxrt/hal/opencl/opencl_driver.h"

namespace hxrt::hal {

Status DriverRegistry::add(std::unique_ptr<Driver> driver) {
  if (!driver) return invalid_argument("DriverRegistry::add: null driver");
  for (const auto& existing : drivers_) {
    if (existing->name() == driver->name()) return already_exists("driver '{}' is already registered", driver->name());
  }
  drivers_.push_back(std::move(driver));
  return ok_status();
}

Result<Driver*> DriverRegistry::find(std::string_view name) const {
  std::vector<std::string_view> names;
  for (const auto& driver : drivers_) {
    if (driver->name() == name) return driver.get();
    names.push_back(driver->name());
  }
  return not_found("no driver '{}' (registered: {})", name, fmt::join(names, ", "));
}

std::vector<Driver*> DriverRegistry::drivers() const {
  std::vector<Driver*> out;
  out.reserve(drivers_.size());
  for (const auto& driver : drivers_) out.push_back(driver.get());
  return out;
}

std::vector<DeviceInfo> DriverRegistry::available_devices() const {
  std::vector<DeviceInfo> devices;
  for (const auto& driver : drivers_) {
    if (!driver->available().ok()) continue;
    Result<std::vector<DeviceInfo>> found = driver->enumerate();
    if (found.ok()) devices.insert(devices.end(), found->begin(), found->end());
  }
  return devices;
}

Result<std::unique_ptr<Device>> DriverRegistry::open(std::string_view spec) const {
  std::string_view name = spec;
  int ordinal = 0;
  if (const size_t colon = spec.find(':'); colon != std::string_view::npos) {
    name = spec.substr(0, colon);
    const std::string_view number = spec.substr(colon + 1);
    const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), ordinal);
    if (error != std::errc() || end != number.data() + number.size() || ordinal < 0) {
      return invalid_argument("device '{}': expected DRIVER or DRIVER:ORDINAL, e.g. cpu:0", spec);
    }
  }
  HXRT_ASSIGN_OR_RETURN(Driver * driver, find(name));
  HXRT_RETURN_IF_ERROR(driver->available());
  return driver->open_device(ordinal);
}

Status register_builtin_drivers(DriverRegistry& registry, int cpu_threads) {
  HXRT_RETURN_IF_ERROR(registry.add(make_cpu_driver(CpuDriverOptions{.num_threads = cpu_threads})));
  HXRT_RETURN_IF_ERROR(registry.add(make_opencl_driver()));
  HXRT_RETURN_IF_ERROR(registry.add(make_cuda_driver()));
  return ok_status();
}

}  // namespace hxrt::hal
