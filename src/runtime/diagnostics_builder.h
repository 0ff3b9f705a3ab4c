// How the Executor turns a failed run into a FailureReport (include/hxrt/runtime/diagnostics.h): reading the plan
// and what the run had computed, and pinning a stream's sticky error on one launch.
//
// Thread-safety: reentrant functions over values the caller keeps unchanged during the call.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "hxrt/hal/event.h"
#include "hxrt/ops/kernel_def.h"
#include "hxrt/runtime/diagnostics.h"
#include "hxrt/runtime/execution_plan.h"

namespace hxrt::runtime::diagnostics {

inline constexpr size_t kRingSize = 8;           // launches shown per stream
inline constexpr int kProducerDepth = 3;         // levels of the producer chain
inline constexpr size_t kMaxProducerLines = 16;  // lines of the producer chain

// What the builder reads of a run. Spans may be shorter than the plan's counts (a run that failed early).
struct RunView {
  const ExecutionPlan* plan = nullptr;
  std::span<const Shape> shapes;                // per value
  std::span<const ops::KernelLaunch> launches;  // per object; tiling is null where not computed
  size_t launched = 0;                          // objects enqueued, in plan order
  std::vector<std::string> stream_names;        // per plan stream
};

// The report for `object`; the ring holds the launches enqueued on its stream before it.
FailureReport describe_launch(const RunView& run, size_t object, std::string stage, FailureLocation location);
// The report when no launch could be named: the stream and its ring.
FailureReport describe_stream(const RunView& run, int stream, std::string stage);

struct Location {
  FailureLocation location = FailureLocation::kStream;
  size_t object = 0;               // valid unless kStream
  std::vector<size_t> candidates;  // kAmbiguous: the others
};

// Pins the error of plan stream `stream` on one of the first `launched` objects. `plan_event(e)` is the state of
// the plan's event e; `marker(i)`, when set, the state of the event recorded right after object i.
Location locate(const ExecutionPlan& plan, size_t launched, int stream, const Status& error,
                const std::function<hal::EventState(int)>& plan_event,
                const std::function<hal::EventState(size_t)>& marker);

}  // namespace hxrt::runtime::diagnostics
