// What a driver counts of its device's memory for Device::memory_stats(): bytes and buffers made by allocate()
// (with the peak), and registrations of host memory (register_host), which hold no device bytes but are resources
// a session must see released.
//
// Thread-safety: thread-safe (relaxed atomics: the numbers are statistics, not synchronisation).
#pragma once

#include <atomic>
#include <cstdint>

#include "hxrt/hal/device.h"

namespace hxrt::hal {

class MemoryCounters {
 public:
  void on_created(uint64_t bytes, bool registered) {
    if (registered) {
      registered_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    const uint64_t now = allocated_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    uint64_t peak = peak_.load(std::memory_order_relaxed);
    while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
    live_.fetch_add(1, std::memory_order_relaxed);
  }
  void on_destroyed(uint64_t bytes, bool registered) {
    if (registered) {
      registered_.fetch_sub(1, std::memory_order_relaxed);
      return;
    }
    allocated_.fetch_sub(bytes, std::memory_order_relaxed);
    live_.fetch_sub(1, std::memory_order_relaxed);
  }
  DeviceMemoryStats stats() const {
    DeviceMemoryStats stats;
    stats.allocated_bytes = allocated_.load(std::memory_order_relaxed);
    stats.peak_allocated_bytes = peak_.load(std::memory_order_relaxed);
    stats.live_buffers = live_.load(std::memory_order_relaxed);
    stats.registered_buffers = registered_.load(std::memory_order_relaxed);
    return stats;
  }

 private:
  std::atomic<uint64_t> allocated_{0};
  std::atomic<uint64_t> peak_{0};
  std::atomic<uint64_t> live_{0};
  std::atomic<uint64_t> registered_{0};
};

}  // namespace hxrt::hal
