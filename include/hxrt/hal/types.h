// Plain types shared by the HAL contracts: device kinds, memory kinds, device capabilities, time.
//
// Thread-safety: value types.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hxrt::hal {

enum class DeviceKind : uint8_t { kCpu, kOpenCL, kCuda };
std::string_view device_kind_name(DeviceKind kind);

// Where an allocation lives.
//  kDevice:     device memory; host access only through copies (or map() where the backend supports it).
//  kHostPinned: page-locked host memory the device copies from/to fast (DMA); not addressed by kernels.
//  kHostMapped: host memory the device addresses directly (zero copy); coherence through flush()/invalidate().
// On the CPU device all three are ordinary host memory.
enum class MemoryKind : uint8_t { kDevice, kHostPinned, kHostMapped };
std::string_view memory_kind_name(MemoryKind kind);

// Capabilities a device reports; planners query these instead of keeping per-backend tables.
struct DeviceInfo {
  DeviceKind kind = DeviceKind::kCpu;
  int ordinal = 0;                    // index within its driver
  std::string name;                   // "Intel(R) Xeon(R) ...", "NVIDIA H200"
  std::string vendor;
  std::string driver_version;
  uint64_t memory_bytes = 0;          // total memory the device can allocate
  uint64_t max_allocation_bytes = 0;  // largest single allocation
  uint32_t min_alignment = 64;        // alignment of every allocation, bytes
  bool host_addressable = false;      // kernels can read host memory in place (zero-copy weights)
  bool unified_memory = false;        // device memory is host memory (no copies needed at all)
  int compute_units = 0;              // cores / SMs / compute units
  bool supports_fp16 = false;         // fp16 arithmetic (not only storage)
  bool supports_bf16 = false;
  double timestamp_resolution_ns = 1.0;
  std::vector<std::string> features;  // "avx512f", "cl_khr_fp16", "sm_90", ...
};
// "cpu:0", "opencl:1": the spec DriverRegistry::open and Session::create take for this device.
std::string device_spec(const DeviceInfo& info);

// Durations and timeouts. Timestamps are nanoseconds on the host's steady clock; backends with their own device
// clocks map device time onto it, so every record in one trace shares one clock.
using Duration = std::chrono::nanoseconds;
inline constexpr Duration kInfinite = Duration::max();
int64_t host_now_ns();

// The time a blocking call must return by. A call makes one from its timeout when it starts and every wait inside
// it takes remaining(), so a call with several waits is bounded by its timeout once, not once per wait
// (Note [One deadline per call] in hal.cc). A timeout of kInfinite, or one past the clock's range, never passes.
class Deadline {
 public:
  using Clock = std::chrono::steady_clock;
  static Deadline never() { return Deadline(Clock::time_point::max()); }
  static Deadline after(Duration timeout);
  static Deadline at(Clock::time_point when) { return Deadline(when); }

  bool infinite() const { return when_ == Clock::time_point::max(); }
  bool passed() const { return !infinite() && Clock::now() >= when_; }
  // kInfinite when infinite, else what is left (zero once passed): what to pass to a wait that takes a timeout.
  Duration remaining() const;
  Clock::time_point when() const { return when_; }
  Deadline earliest(Deadline other) const { return other.when_ < when_ ? other : *this; }

 private:
  explicit Deadline(Clock::time_point when) : when_(when) {}
  Clock::time_point when_;
};

}  // namespace hxrt::hal
