// Fault injection: a test hook at every site where hxrt acquires a resource that can run out or fail outside its
// control (as SQLite tests out-of-memory): device and host memory, host registration, streams, events, module
// (JIT program) builds, file opens, reads, maps and writes. A test arms it to fail the k-th site reached (counting
// from arm()), or every site from the k-th on, optionally only sites of some kinds; the site then returns
// OutOfMemory (memory) or Unavailable (everything else) with a message that starts "injected fault at <site>"
// and names the resource, and the calling code must turn that into a clean error path.
//
// Disarmed, a site costs one relaxed atomic load. The hook is process-wide on purpose: sites sit deep in drivers
// and file readers that no test can reach with an injected object. Tests that arm it must not run concurrently with
// other work in the process (ctest runs each test in its own process).
//
// Thread-safety: thread-safe; sites may be reached from any thread (stream workers included).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hxrt/base/status.h"

namespace hxrt::fault {

enum class Site : uint8_t {
  kDeviceAlloc,      // Device::allocate, MemoryKind::kDevice
  kHostPinnedAlloc,  // Device::allocate, MemoryKind::kHostPinned
  kHostMappedAlloc,  // Device::allocate, MemoryKind::kHostMapped
  kHostRegister,     // Device::register_host
  kStreamCreate,     // Device::create_stream
  kEventCreate,      // Device::create_event
  kModuleLoad,       // Device::load_module (OpenCL program build)
  kFileOpen,         // opening a file to read or write
  kFileRead,         // reading a file's bytes
  kFileMap,          // mapping a file
  kFileWrite,        // writing a file
};
inline constexpr int kNumSites = 11;
std::string_view site_name(Site site);
uint32_t site_bit(Site site);
inline constexpr uint32_t kAllSites = (1u << kNumSites) - 1;

struct Plan {
  uint64_t fail_at = 1;         // the k-th site reached after arm() fails (1 = the first)
  bool keep_failing = false;    // and every selected site after it
  uint32_t sites = kAllSites;   // which kinds of site count and fail (site_bit masks)
};

// Arms the hook (resetting the counters and the record of reached sites); disarm() turns it off.
void arm(const Plan& plan);
void disarm();
bool armed();
// Selected sites reached since arm(), and faults injected.
uint64_t reached();
uint64_t injected();
// The message of the last fault injected since arm() ("" when none).
std::string last_injected();

// A code location that was reached while armed: the site's kind and where it is.
struct ReachedLocation {
  Site site;
  std::string location;  // "file.cc:123"
  bool operator<(const ReachedLocation& other) const;
};
// Every distinct location reached while armed since the process started (across arm() calls).
std::vector<ReachedLocation> reached_locations();

namespace detail {
extern std::atomic<bool> g_armed;
Status check_armed(Site site, std::string_view what, const char* file, int line);
}  // namespace detail

// At a site: OK, or the injected failure. `describe()` returns what the resource is ("4096 bytes of device memory
// on device 'cpu'"); it is called only while the hook is armed. `file` and `line` default to the caller's
// (__builtin_FILE/LINE: std::source_location is missing from clang 14 with libstdc++, which the fuzz build uses).
template <typename Describe>
Status check(Site site, Describe&& describe, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  if (!detail::g_armed.load(std::memory_order_relaxed)) return ok_status();
  return detail::check_armed(site, describe(), file, line);
}

}  // namespace hxrt::fault
