// Opens a session on the CPU device through an installed hxrt and allocates from its pool.
#include <cstdio>

#include "hxrt/runtime/session.h"

int main() {
  hxrt::hal::DriverRegistry drivers;
  if (!hxrt::hal::register_builtin_drivers(drivers).ok()) return 1;
  auto session = hxrt::runtime::Session::create(drivers, "cpu");
  if (!session.ok()) {
    std::fprintf(stderr, "%s\n", session.status().to_string().c_str());
    return 1;
  }
  auto block = (*session)->pool().allocate(1 << 20, (*session)->default_stream(), "consumer");
  if (!block.ok() || !(*session)->pool().free(*block).ok()) return 1;
  auto report = (*session)->close();
  std::printf("find_package(hxrt) consumer: %s\n", report.ok() ? report->to_string().c_str() : "teardown failed");
  return report.ok() && report->clean() ? 0 : 1;
}
