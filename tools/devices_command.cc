#include <cstdio>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "hxrt/hal/driver.h"
#include "text_format.h"

namespace hxrt::tools {
namespace {

int run_devices(bool json) {
  hal::DriverRegistry registry;
  if (Status s = hal::register_builtin_drivers(registry); !s.ok()) {
    fmt::print(stderr, "hxrt: {}\n", s.to_string());
    return 1;
  }
  nlohmann::json json_drivers = nlohmann::json::array();
  for (hal::Driver* driver : registry.drivers()) {
    Status available = driver->available();
    Result<std::vector<hal::DeviceInfo>> devices =
        available.ok() ? driver->enumerate() : Result<std::vector<hal::DeviceInfo>>(available);
    const std::string status = devices.ok() ? "available" : devices.status().to_string();
    nlohmann::json json_driver = {{"driver", driver->name()}, {"status", status}, {"devices", nlohmann::json::array()}};
    if (!json) fmt::print("driver {}: {}\n", driver->name(), status);
    for (const hal::DeviceInfo& info : devices.ok() ? *devices : std::vector<hal::DeviceInfo>{}) {
      json_driver["devices"].push_back({{"id", fmt::format("{}:{}", driver->name(), info.ordinal)},
                                        {"name", info.name},
                                        {"vendor", info.vendor},
                                        {"driver_version", info.driver_version},
                                        {"memory_bytes", info.memory_bytes},
                                        {"max_allocation_bytes", info.max_allocation_bytes},
                                        {"min_alignment", info.min_alignment},
                                        {"host_addressable", info.host_addressable},
                                        {"unified_memory", info.unified_memory},
                                        {"compute_units", info.compute_units},
                                        {"fp16", info.supports_fp16},
                                        {"bf16", info.supports_bf16},
                                        {"timestamp_resolution_ns", info.timestamp_resolution_ns},
                                        {"features", info.features}});
      if (json) continue;
      fmt::print("  {}:{}  {}\n", driver->name(), info.ordinal, info.name);
      fmt::print("    memory {} (max allocation {}), alignment {} B, {} compute units\n",
                 human_bytes(info.memory_bytes), human_bytes(info.max_allocation_bytes), info.min_alignment,
                 info.compute_units);
      fmt::print("    host-addressable {}, unified memory {}, fp16 {}, bf16 {}, timestamps {} ns\n",
                 info.host_addressable ? "yes" : "no", info.unified_memory ? "yes" : "no",
                 info.supports_fp16 ? "yes" : "no", info.supports_bf16 ? "yes" : "no", info.timestamp_resolution_ns);
      if (!info.features.empty()) fmt::print("    features: {}\n", fmt::join(info.features, " "));
    }
    json_drivers.push_back(std::move(json_driver));
  }
  if (json) fmt::print("{}\n", json_drivers.dump(2));
  return 0;
}

}  // namespace

void add_devices_command(CLI::App& app, int* exit_code) {
  CLI::App* command = app.add_subcommand("devices", "List drivers and devices with their capabilities");
  auto json = std::make_shared<bool>(false);
  command->add_flag("--json", *json, "Print JSON instead of text");
  command->callback([json, exit_code] { *exit_code = run_devices(*json); });
}

}  // namespace hxrt::tools
