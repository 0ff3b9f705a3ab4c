// Executor: runs an ExecutionPlan on a Session with concrete inputs.
//
// Each run binds the inputs' concrete dims to the graph's symbols (checking static dims and the plan's deferred
// dim equalities), evaluates every value's shape, looks each kernel's tiling up in a cache keyed by (kernel,
// shape bucket) — computing it on a miss, never re-planning — and launches every ExecutionObject on its stream
// with event waits on cross-stream edges. Intermediates live in the plan's arena (static plans) or come from the
// session pool and return to it, stream-ordered, after the launch the plan names (ExecutionObject::release_after).
// Weights are uploaded once per executor, or used in place (zero copy) where the device addresses host memory.
// Outputs are downloaded and belong to the caller.
//
// Observability (docs/design/architecture.md, "The path of one request", step 6): a profiled run
// (RunOptions::profile, or the session's profiler enabled) brackets every launch with events and hands the session's
// Profiler one record per launch (profiler.h). A failed run returns a Status naming the failing launch, its
// attributes, tiling, inputs and producers, and keeps the same report as a value (diagnostics.h); it can also
// snapshot the failing node's inputs (RunOptions::snapshot_dir). RunOptions::check_numerics fails the run at the
// first launch whose float output holds NaN or Inf. Profiling, check-numerics and snapshots are observers a run
// attaches around its launches (Note [Launch observers] in src/runtime/launch_observer.h); a run without them pays
// one branch per launch for them.
//
// Failure modes (Note [Continue mode] in executor.cc): kStop (default) ends the run at the first failure. kContinue
// keeps every launch that does not depend on a failure running: the streams are drained, launches that a failed
// stream discarded are enqueued again on the reset streams, and nodes depending on a failed one are skipped. The
// run then fails with one Status listing every failure (failures() has the reports). Either way, failed streams are
// reset and every block returns to the pool, so the executor and the session can run again.
//
// Thread-safety: thread-compatible: one run at a time per executor (create one executor per concurrent caller).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "hxrt/base/host_tensor.h"
#include "hxrt/base/status.h"
#include "hxrt/graph/dim.h"
#include "hxrt/memory/caching_allocator.h"
#include "hxrt/runtime/diagnostics.h"
#include "hxrt/runtime/execution_plan.h"
#include "hxrt/runtime/profiler.h"
#include "hxrt/runtime/session.h"

namespace hxrt::runtime {

using TensorMap = std::map<std::string, HostTensor, std::less<>>;

enum class FailureMode : uint8_t {
  kStop,      // the first failure ends the run
  kContinue,  // independent launches keep running; dependents of a failure are skipped; all failures reported
};

struct RunOptions {
  hal::Duration timeout = hal::kInfinite;
  // Profile this run into session.profiler() even when the profiler is disabled.
  bool profile = false;
  // Record an event after every launch, so a kernel error found at synchronize names exactly the launch that
  // failed (diagnostics.h, FailureLocation). Implied by profile and snapshot_dir.
  bool locate_failures = false;
  // On a failure, write the failing node's inputs and manifest.json here. Intermediates are then held until the
  // run ends (not released after their last consumer), so the inputs are still intact when read back.
  std::string snapshot_dir;
  // Writes each snapshot tensor; null writes raw bytes (write_raw_tensor). Tools pass a .npy writer.
  SnapshotTensorWriter snapshot_writer;
  // After every launch, wait for it and scan its f32/f16/bf16 outputs for NaN and Inf (on the host; outputs of
  // devices the host cannot address are copied there first). The first launch in plan order with one fails with
  // DataLoss and a report naming the output, the counts and the first bad index (FailureReport::non_finite).
  // Each launch then waits for the previous one on its stream: a debugging mode, not a fast one.
  bool check_numerics = false;
  // kContinue implies locate_failures, keeps intermediates until the run ends and does not use the plan's arena
  // (a relaunched node must find its inputs intact); the snapshot, when asked, is of the first failure.
  FailureMode failure_mode = FailureMode::kStop;
};

struct ExecutorStats {
  uint64_t runs = 0;
  uint64_t launches = 0;
  uint64_t captures = 0;  // Note [Captured runs]: capture() calls that succeeded
  uint64_t replays = 0;   // replay() calls that succeeded (not counted in runs)
  uint64_t tiling_cache_hits = 0;
  uint64_t tiling_cache_misses = 0;
  uint64_t tiling_cache_clears = 0;  // times the cache outgrew kTilingCacheCapacity and was emptied between runs
  uint64_t peak_intermediate_bytes = 0;  // largest bytes of intermediates live at once in a run (pool mode)
};

class Executor {
 public:
  // Tilings cached per (kernel, shapes, params) before the cache is emptied at the start of the next run. A decoder
  // whose steps see ever new batch shapes would otherwise grow it without bound (an entry per node per shape).
  static constexpr size_t kTilingCacheCapacity = 4096;

  // The session and plan must outlive the executor. Uploads (or maps) the weights. A plan with a heterogeneous
  // split (plan->fallback_device()) also needs a session on a device of the fallback's kind, which then runs the
  // fallback nodes on its streams and holds their tensors in its pool (Note [Split runs] in executor.cc).
  static Result<std::unique_ptr<Executor>> create(Session& session, std::shared_ptr<const ExecutionPlan> plan,
                                                  Session* fallback = nullptr);
  // The same with one session per device index of the plan (sessions[kMainDevice] runs the plan's device; the
  // others, host-addressable, its fallbacks). Sessions past plan->num_devices() are not used and may be null.
  static Result<std::unique_ptr<Executor>> create(std::span<Session* const> sessions,
                                                  std::shared_ptr<const ExecutionPlan> plan);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Runs with inputs by graph input name; returns every graph output by name. Errors name the input and axis
  // (bad bindings) or the node (failures). Inputs bound as state are not passed here.
  Result<TensorMap> run(const TensorMap& inputs, const RunOptions& options = {});

  // Note [Captured runs]
  // capture() binds `inputs` (as run() does), places every tensor at an address it keeps, and records the plan's
  // launches once into a captured command list of the plan's stream (Note [Captured command lists], hal/stream.h)
  // instead of running them. replay() then runs the same launches on new input values of the same shapes: the
  // inputs are copied into the capture's buffers, the list is enqueued as one command, the outputs are copied out.
  // Per launch, nothing happens on the host: no binding, placement, tiling lookup, queue operation or release. A
  // failure inside a replay names the node (its position in the list and its kernel), fails that replay only, and
  // leaves the executor and the capture usable. Shapes are fixed per capture (the bucket): other shapes need another
  // capture. The capture holds its peak of live intermediates, in a pool of its own, for its lifetime (Note [Capture
  // memory] in executor_capture.cc), and reads state inputs (bind_state) at the addresses bound when it was made.
  // Unimplemented — use run() — when the plan cannot be captured: several streams or a heterogeneous split, or
  // profiling on the session (a replay records no per-launch timestamps). The executor must outlive its captures;
  // one replay or run at a time.
  class Captured;
  Result<std::unique_ptr<Captured>> capture(const TensorMap& inputs);
  Result<TensorMap> replay(Captured& captured, const TensorMap& inputs);

  // Note [Pipelined replays]
  // replay() in two halves, so the caller's host work overlaps the device's: begin_replay() checks and enqueues
  // everything replay() does (input copies, the list, output copies) and returns at once; finish_replay() waits for
  // the stream and returns the outputs. Between the two the caller may do anything but run, capture or replay on
  // this executor. The Pending keeps its own copy of `inputs` (the stream reads them later), so the caller's may
  // go at once. A failure is reported by whichever half sees it; a Pending destroyed unfinished waits for its
  // stream first.
  class Pending;
  Result<std::unique_ptr<Pending>> begin_replay(Captured& captured, const TensorMap& inputs);
  Result<TensorMap> finish_replay(Pending& pending);

  // Binds graph input `name` to device memory used in place by every later run, for state that lives across runs
  // (the KV cache: ops such as PagedAttention write into it, Note [KV cache state inputs] in ops/schemas/llm.cc).
  // `shape` binds the input's symbols like a passed tensor would. The caller owns the memory and keeps it alive
  // (and unchanged in size) while bound; binding again replaces the previous binding.
  Status bind_state(std::string_view name, DType dtype, Shape shape, hal::BufferView view);

  const ExecutionPlan& plan() const { return *plan_; }
  // The stream of the plan's stream index s (0 <= s < plan().num_streams()); captured runs use stream 0.
  hal::Stream& stream(int s = 0) const { return *streams_[static_cast<size_t>(s)]; }
  const ExecutorStats& stats() const { return stats_; }
  // The symbol values of the last run.
  const graph::SymbolBindings& last_bindings() const { return bindings_; }
  // What the last run's (first) failure was (null when it succeeded or failed binding its inputs).
  const FailureReport* last_failure() const { return failures_.empty() ? nullptr : &failures_.front(); }
  // Every failure of the last run, in plan order of the failed launches (several only in continue mode).
  const std::vector<FailureReport>& failures() const { return failures_; }

 private:
  struct RunState;
  struct LaunchResult;
  // The observers a run attaches (Note [Launch observers] in launch_observer.h; executor_observers.cc).
  class Profiling;
  class NumericsCheck;
  class InputSnapshot;
  Executor(std::vector<Session*> sessions, std::shared_ptr<const ExecutionPlan> plan)
      : session_(*sessions.front()), sessions_(std::move(sessions)), plan_(std::move(plan)) {}
  // The session of a device index of the plan.
  Session& session_of(int device) const { return *sessions_[static_cast<size_t>(device)]; }
  // The pool a value's bytes come from.
  // The pool a run's value comes from: the capture's own (Note [Capture memory]) or its device's session's.
  memory::CachingAllocator& pool_for(graph::ValueId value, const RunState& state) const;
  memory::CachingAllocator& pool_of(graph::ValueId value) const {
    return session_of(plan_->values()[static_cast<size_t>(value)].device).pool();
  }
  Status prepare();
  Status bind(const TensorMap& inputs, RunState& state);
  Result<const ops::Tiling*> tiling_for(size_t object, const ops::KernelLaunch& launch);
  Result<const ops::Tiling*> tiling_by_key(const ExecutionObject& object, const ops::KernelLaunch& launch);
  Status ensure_markers();
  // Enqueues object `object` as the named steps of LaunchStep, telling the run's observers; a failure names its
  // step. The steps:
  LaunchResult launch_object(size_t object, RunState& state);
  LaunchResult place_outputs(size_t object, RunState& state, hal::Stream& stream);
  Status bind_launch(size_t object, RunState& state);  // the KernelLaunch and its tiling
  LaunchResult enqueue(size_t object, RunState& state, hal::Stream& stream);
  Status release_inputs(size_t object, RunState& state, hal::Stream& stream);
  void notify_pool_event(RunState& state, PoolEventKind kind, graph::ValueId value, std::string_view tag,
                         uint64_t bytes);
  // The pool tag of a value's block: the producer node's name, or "output:<name>" for a graph output.
  std::string pool_tag(graph::ValueId value) const;
  // Continue mode: the passes of Note [Continue mode]; returns the combined Status (OK when nothing failed).
  Status run_continuing(RunState& state, const RunOptions& options);
  // Drains the streams after a failure, builds the report for object `object` (or, when SIZE_MAX, pins the failure
  // of the failed streams on a launch; `stream_hint` names the stream that reported it), lets the observers add to
  // it (the input snapshot), resets failed streams and returns `status` with the report as context.
  Status diagnose(Status status, size_t object, std::string_view stage, RunState& state, const RunOptions& options,
                  int stream_hint = -1);
  void drain_after_failure(const RunOptions& options);
  // Note [One deadline per run]: what is left of the running run's RunOptions::timeout (kInfinite without one).
  hal::Duration time_left() const;
  // After a failure, before the run's memory is released: when the run's deadline has passed, streams still busy
  // are aborted; every failed or aborted stream is reset, which waits for the command it is running to end —
  // except, past the deadline, a stream still running a command: it is left for settle() (Note [Runs past their
  // deadline]).
  void quiesce();
  // Before a run: waits (within the run's deadline) for the streams an earlier late run left running, resets them
  // and frees what that run left; DeadlineExceeded naming the stream when one is still running.
  Status settle();

  hal::Deadline run_deadline_ = hal::Deadline::never();
  // Note [Runs past their deadline]: streams a late run left running a command (aborted, not reset), and what that
  // command may still read or write: the run's input buffers and copies, its output tensors.
  std::vector<hal::Stream*> unsettled_;
  std::vector<std::unique_ptr<hal::Buffer>> left_buffers_;
  std::vector<std::vector<std::byte>> left_copies_;
  std::vector<TensorMap> left_outputs_;
  std::vector<std::vector<ops::KernelLaunch>> left_launches_;
  Session& session_;               // sessions_[kMainDevice]
  std::vector<Session*> sessions_;  // per device index of the plan (one entry unless the plan is split)
  std::shared_ptr<const ExecutionPlan> plan_;
  std::vector<hal::Stream*> streams_;
  std::vector<hal::Event*> events_;
  std::vector<Session*> event_sessions_;                           // per event: the session that made it
  std::vector<std::unique_ptr<hal::Buffer>> weight_buffers_;       // uploaded or registered weights
  std::unordered_map<graph::ValueId, hal::BufferView> weights_;    // initializer → device memory
  // Split plans, per device index (kMainDevice's entries unused): initializers registered on a fallback device,
  // and which inputs and initializers its nodes read. Values that cross devices are held until the run ends
  // (Note [Split runs]).
  std::vector<std::unordered_map<graph::ValueId, hal::BufferView>> host_weights_;
  std::vector<std::vector<bool>> read_on_;
  std::vector<bool> crosses_devices_;
  struct StateBinding {
    DType dtype;
    Shape shape;
    hal::BufferView view;
  };
  std::unordered_map<graph::ValueId, StateBinding> states_;        // graph input → bound state
  memory::Allocation arena_;
  std::unordered_map<std::string, std::unique_ptr<ops::Tiling>> tiling_cache_;
  // Per object: the shapes of its last launch (inputs, then outputs) and the tiling they got (into tiling_cache_,
  // cleared with it).
  struct LastTiling {
    std::vector<Shape> shapes;
    const ops::Tiling* tiling = nullptr;
  };
  std::vector<LastTiling> last_tilings_;
  graph::SymbolBindings bindings_;
  // The last bindings whose dim checks passed and the value shapes they resolve to (Note [Bound shapes]).
  graph::SymbolBindings resolved_bindings_;
  std::vector<Shape> resolved_shapes_;
  ExecutorStats stats_;
  // Events recorded before (2i) and after (2i+1) object i in profiled or locating runs; made on first use.
  std::vector<std::unique_ptr<hal::Event>> markers_;
  std::vector<FailureReport> failures_;
};

// A replay in flight (Note [Pipelined replays]); made by Executor::begin_replay, ended by Executor::finish_replay.
class Executor::Pending {
 public:
  ~Pending();
  Pending(const Pending&) = delete;
  Pending& operator=(const Pending&) = delete;

 private:
  friend class Executor;
  Pending() = default;
  Executor* owner_ = nullptr;
  Captured* captured_ = nullptr;
  TensorMap inputs_;   // what the stream's input copies read
  TensorMap outputs_;  // filled by the stream's copies
  bool finished_ = false;
};

// A captured run of an executor (Note [Captured runs]); made by Executor::capture, replayed by Executor::replay.
class Executor::Captured {
 public:
  ~Captured();
  Captured(const Captured&) = delete;
  Captured& operator=(const Captured&) = delete;
  size_t launches() const { return launches_; }
  const graph::SymbolBindings& bindings() const { return bindings_; }

 private:
  friend class Executor;
  Captured() = default;
  const Executor* owner_ = nullptr;
  std::unique_ptr<RunState> state_;
  std::shared_ptr<const hal::CapturedCommands> commands_;
  std::vector<std::unique_ptr<ops::Tiling>> tilings_;  // copies the launches point at (the cache may be cleared)
  std::vector<std::pair<graph::ValueId, hal::BufferView>> state_views_;  // bound state at capture, checked at replay
  std::unique_ptr<memory::CachingAllocator> pool_;  // Note [Capture memory] (~Captured resets state_ first)
  graph::SymbolBindings bindings_;
  size_t launches_ = 0;
};

}  // namespace hxrt::runtime
