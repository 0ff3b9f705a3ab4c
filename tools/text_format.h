// Small text formatting helpers shared by the CLI commands.
#pragma once

#include <cstdint>
#include <string>

#include <fmt/format.h>

namespace hxrt::tools {

// "512.0 B", "1.5 KiB", "3.0 MiB".
inline std::string human_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.1f} {}", value, units[unit]);
}

}  // namespace hxrt::tools
