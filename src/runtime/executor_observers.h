// The observers an Executor run attaches around its launches (Note [Launch observers] in launch_observer.h):
// profiling, check-numerics and the failing node's input snapshot. Private to the runtime library.
//
// Thread-safety: thread-compatible; each belongs to one run of one executor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "hxrt/runtime/executor.h"
#include "launch_observer.h"

namespace hxrt::runtime {

// Profile records (one per launch, replaced on a relaunch), pool events and counters, handed to the session's
// profiler by finish() once the streams have drained.
class Executor::Profiling final : public LaunchObserver {
 public:
  Profiling(Executor& executor, RunState& state);
  void before_launch(size_t object) override;
  void on_pool_event(PoolEventKind kind, graph::ValueId value, std::string_view tag, uint64_t bytes) override;
  void after_launch(size_t object, hal::Stream& stream) override;
  // Reads the markers' device times and adds the run to the session's profiler.
  void finish();

 private:
  LaunchRecord launch_record(size_t object, const hal::Stream& stream) const;

  Executor& executor_;
  RunState& state_;
  RunProfile profile_;
  int64_t enqueue_begin_ns_ = 0;         // of the launch in progress
  std::vector<int64_t> event_producer_;  // per plan event: the record of the launch that last recorded it
  std::vector<int64_t> record_of_;       // per object: its record in profile_.launches, -1 when none
  std::vector<size_t> record_objects_;   // per record: its object
};

// RunOptions::check_numerics: waits for each launch and scans its float outputs; DataLoss (and state.non_finite)
// on NaN/Inf.
class Executor::NumericsCheck final : public LaunchObserver {
 public:
  NumericsCheck(Executor& executor, RunState& state) : executor_(executor), state_(state) {}
  Status after_enqueue(size_t object, hal::Stream& stream) override;

 private:
  Executor& executor_;
  RunState& state_;
  std::vector<std::byte> staging_;
};

// RunOptions::snapshot_dir: writes the failing node's inputs and manifest.json (the run holds its intermediates,
// so they are intact when read back).
class Executor::InputSnapshot final : public LaunchObserver {
 public:
  InputSnapshot(Executor& executor, RunState& state, const RunOptions& options)
      : executor_(executor), state_(state), options_(options) {}
  void on_failure(size_t object, FailureReport& report) override;

 private:
  Executor& executor_;
  RunState& state_;
  const RunOptions& options_;
};

}  // namespace hxrt::runtime
