// The executor's per-run state, shared by executor.cc (binding, launching, the run) and executor_failures.cc
// (diagnosis, snapshots, check-numerics, continue mode). Private to the runtime library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "hxrt/runtime/executor.h"

namespace hxrt::runtime {

inline constexpr size_t kNoObject = SIZE_MAX;

// What became of each launch in a run (continue mode reads it; stop mode ends at the first failure).
enum class Outcome : uint8_t { kPending, kEnqueued, kDone, kFailed, kSkipped };

// Everything one run owns; launches and views must stay put until the streams have drained.
struct Executor::RunState {
  std::vector<Shape> shapes;                   // per value
  std::vector<hal::BufferView> views;          // per value
  std::vector<memory::Allocation> allocations; // per value: pool-owned intermediates and outputs
  std::vector<int> remaining;                  // per value: consumers not yet launched
  std::vector<ops::KernelLaunch> launches;     // per object
  std::vector<std::unique_ptr<hal::Buffer>> input_buffers;
  std::vector<hal::BufferView> fallback_views; // split plans: inputs and initializers as fallback nodes read them
  uint64_t live_bytes = 0;
  size_t launched = 0;                         // objects enqueued, in plan order
  bool profiling = false;                      // records go to the session's profiler
  bool markers = false;                        // markers_ are recorded around every launch
  bool hold_intermediates = false;             // snapshot or continue mode: nothing is freed before the run ends
  bool use_arena = true;                       // false in continue mode (a relaunch needs its inputs intact)
  std::vector<int64_t> event_producer;         // per plan event: the record of the launch that last recorded it
  std::vector<int64_t> record_of;              // per object: its record in profile.launches, -1 when none
  std::vector<size_t> record_objects;          // per record: its object
  RunProfile profile;
  std::vector<Outcome> outcome;                // per object
  std::optional<NonFiniteOutput> non_finite;   // check_numerics: what the failing launch wrote
  size_t non_finite_object = kNoObject;
};

}  // namespace hxrt::runtime
