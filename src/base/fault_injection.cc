#include "hxrt/base/fault_injection.h"

#include <atomic>
#include <filesystem>
#include <mutex>
#include <set>

#include <fmt/format.h>

namespace hxrt::fault {
namespace {

struct State {
  std::atomic<uint64_t> fail_at{0};
  std::atomic<bool> keep_failing{false};
  std::atomic<uint32_t> sites{0};
  std::atomic<uint64_t> reached{0};
  std::atomic<uint64_t> injected{0};
  std::mutex mutex;
  std::set<ReachedLocation> locations;  // guarded by mutex
  std::string last_injected;            // guarded by mutex
};

State& state() {
  static State instance;
  return instance;
}

}  // namespace

namespace detail {
std::atomic<bool> g_armed{false};
}  // namespace detail

std::string_view site_name(Site site) {
  switch (site) {
    case Site::kDeviceAlloc: return "device allocation";
    case Site::kHostPinnedAlloc: return "host-pinned allocation";
    case Site::kHostMappedAlloc: return "host-mapped allocation";
    case Site::kHostRegister: return "host registration";
    case Site::kStreamCreate: return "stream creation";
    case Site::kEventCreate: return "event creation";
    case Site::kModuleLoad: return "module build";
    case Site::kFileOpen: return "file open";
    case Site::kFileRead: return "file read";
    case Site::kFileMap: return "file map";
    case Site::kFileWrite: return "file write";
  }
  return "unknown site";
}

uint32_t site_bit(Site site) { return 1u << static_cast<uint32_t>(site); }

bool ReachedLocation::operator<(const ReachedLocation& other) const {
  if (site != other.site) return site < other.site;
  return location < other.location;
}

void arm(const Plan& plan) {
  State& s = state();
  detail::g_armed.store(false);
  s.fail_at.store(plan.fail_at);
  s.keep_failing.store(plan.keep_failing);
  s.sites.store(plan.sites);
  s.reached.store(0);
  s.injected.store(0);
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.last_injected.clear();
  }
  detail::g_armed.store(true, std::memory_order_release);
}

void disarm() { detail::g_armed.store(false, std::memory_order_release); }
bool armed() { return detail::g_armed.load(std::memory_order_acquire); }
uint64_t reached() { return state().reached.load(); }
uint64_t injected() { return state().injected.load(); }

std::string last_injected() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.last_injected;
}

std::vector<ReachedLocation> reached_locations() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return {s.locations.begin(), s.locations.end()};
}

Status detail::check_armed(Site site, std::string_view what, const char* file, int line) {
  State& s = state();
  if ((s.sites.load() & site_bit(site)) == 0) return ok_status();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.locations.insert(ReachedLocation{
        site, fmt::format("{}:{}", std::filesystem::path(file).filename().string(), line)});
  }
  const uint64_t k = s.reached.fetch_add(1) + 1;
  const uint64_t fail_at = s.fail_at.load();
  if (k != fail_at && !(s.keep_failing.load() && k > fail_at)) return ok_status();
  s.injected.fetch_add(1);
  const std::string message = fmt::format("injected fault at {} #{} ({})", site_name(site), k, what);
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.last_injected = message;
  }
  const bool memory = site == Site::kDeviceAlloc || site == Site::kHostPinnedAlloc || site == Site::kHostMappedAlloc;
  return Status(memory ? StatusCode::kOutOfMemory : StatusCode::kUnavailable, message);
}

}  // namespace hxrt::fault
