// The executor's per-run state, shared by executor.cc (binding, launching, the run), executor_failures.cc
// (diagnosis, continue mode) and executor_observers.cc (profiling, check-numerics, snapshots). Private to the
// runtime library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "executor_observers.h"
#include "hxrt/runtime/executor.h"
#include "launch_observer.h"

namespace hxrt::runtime {

inline constexpr size_t kNoObject = SIZE_MAX;

// What became of each launch in a run (continue mode reads it; stop mode ends at the first failure).
enum class Outcome : uint8_t { kPending, kEnqueued, kDone, kFailed, kSkipped };

// The result of one launch: OK, or the error and the step it failed in.
struct Executor::LaunchResult {
  Status status;
  LaunchStep step = LaunchStep::kReleaseInputs;
  bool ok() const { return status.ok(); }
  static LaunchResult failed(LaunchStep step, Status status) { return LaunchResult{std::move(status), step}; }
};

// Everything one run owns; launches and views must stay put until the streams have drained.
struct Executor::RunState {
  std::vector<Shape> shapes;                   // per value
  std::vector<hal::BufferView> views;          // per value
  std::vector<memory::Allocation> allocations; // per value: pool-owned intermediates and outputs
  std::vector<ops::KernelLaunch> launches;     // per object
  std::vector<std::unique_ptr<hal::Buffer>> input_buffers;
  // A run with a deadline reads its inputs from copies of its own (Note [Runs past their deadline]).
  std::vector<std::vector<std::byte>> input_copies;
  // Split plans, per device index (kMainDevice's entry empty): inputs and initializers as that device's nodes read
  // them, per value.
  std::vector<std::vector<hal::BufferView>> host_views;
  uint64_t live_bytes = 0;
  size_t launched = 0;                         // objects enqueued, in plan order
  bool markers = false;                        // markers_ are recorded around every launch
  bool hold_intermediates = false;             // snapshot or continue mode: nothing is freed before the run ends
  memory::CachingAllocator* pool = nullptr;    // a capture's own pool (Note [Capture memory]); null: the sessions'
  bool use_arena = true;                       // false in continue mode (a relaunch needs its inputs intact)
  std::vector<Outcome> outcome;                // per object
  std::optional<NonFiniteOutput> non_finite;   // check_numerics: what the failing launch wrote
  size_t non_finite_object = kNoObject;
  // Note [Launch observers]: the ones this run attached, and the list the executor calls (empty: none).
  std::unique_ptr<Profiling> profiling;
  std::unique_ptr<NumericsCheck> numerics;
  std::unique_ptr<InputSnapshot> snapshot;
  std::vector<LaunchObserver*> observers;
};

}  // namespace hxrt::runtime
