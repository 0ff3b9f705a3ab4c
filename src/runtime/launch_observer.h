// What the executor tells the observers of a run around each launch. Private to the runtime library.
//
// Note [Launch observers]
// A launch is a fixed sequence of steps (LaunchStep). Everything a run may do besides running the graph — profile
// records and pool events (the profiler), the NaN/Inf scan (check-numerics), the input snapshot of a failing node —
// is an observer the executor calls at fixed points of that sequence; a run attaches the ones its RunOptions ask
// for. A run with none attached pays one branch per call point. The calls, for each launch:
//   before_launch    before its outputs are placed;
//   on_pool_event    for each pool block this run allocates or frees (outputs placed, inputs released);
//   after_enqueue    once its kernel and completion event are enqueued; an error fails the launch at step
//                    kCheckOutputs (the launch is enqueued, its inputs are not released);
//   after_launch     once its inputs are released: the launch is done as far as the host is concerned.
// And once per failure report with a named launch, on_failure (after the streams have drained) may add to it.
//
// Thread-safety: thread-compatible; called from the thread that runs the executor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "hxrt/base/status.h"
#include "hxrt/graph/graph.h"
#include "hxrt/hal/stream.h"
#include "hxrt/runtime/diagnostics.h"
#include "hxrt/runtime/profiler.h"

namespace hxrt::runtime {

// The steps of one launch, in order; a failed launch names the step it failed in (FailureReport::stage).
enum class LaunchStep : uint8_t {
  kSizeOutputs,        // storage bytes of each output for this run's shapes
  kAllocateOutputs,    // arena slice, Reshape alias or pool block (the plan decides which)
  kTiling,             // the kernel's tiling for these shapes (cached)
  kWaitInputs,         // event waits on cross-stream inputs
  kRecordStart,        // start marker (profiled, locating or continue-mode runs)
  kKernel,             // the kernel itself
  kRecordEnd,          // end marker
  kRecordCompletion,   // the plan event another stream waits for
  kCheckOutputs,       // observers' after_enqueue (check-numerics)
  kReleaseInputs,      // stream-ordered release of the intermediates the plan releases here
};

// The verb phrase a failure report gives a step ("allocating the outputs of" node 'x').
std::string_view launch_step_name(LaunchStep step);

class LaunchObserver {
 public:
  LaunchObserver() = default;
  LaunchObserver(const LaunchObserver&) = delete;
  LaunchObserver& operator=(const LaunchObserver&) = delete;
  virtual ~LaunchObserver() = default;

  virtual void before_launch(size_t /*object*/) {}
  virtual void on_pool_event(PoolEventKind /*kind*/, graph::ValueId /*value*/, std::string_view /*tag*/,
                             uint64_t /*bytes*/) {}
  virtual Status after_enqueue(size_t /*object*/, hal::Stream& /*stream*/) { return ok_status(); }
  virtual void after_launch(size_t /*object*/, hal::Stream& /*stream*/) {}
  virtual void on_failure(size_t /*object*/, FailureReport& /*report*/) {}
};

}  // namespace hxrt::runtime
