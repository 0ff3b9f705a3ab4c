// Executor: what happens when a launch fails — draining and diagnosing (diagnostics.h) and continue mode (Note
// [Continue mode]). Input snapshots and check-numerics are observers (executor_observers.cc).
#include <algorithm>
#include <functional>

#include <fmt/ranges.h>

#include "diagnostics_builder.h"
#include "executor_run_state.h"

namespace hxrt::runtime {

hal::Duration Executor::time_left() const { return run_deadline_.remaining(); }

// Note [Runs past their deadline]
// A run whose deadline passes returns at the deadline, even when a stream is stalled on a long command (its own
// kernel, or another party's command on a shared stream). quiesce() aborts the busy streams: their queued commands
// are skipped without running (launches touch nothing; records fail; callbacks get the error). The command that is
// running cannot be stopped unless it polls the cancellation flag, so a stream still running one is not reset here
// (reset waits for it) but left in unsettled_, and everything that command may still use stays alive: pool blocks
// are stream-ordered (a later allocation on the stream runs after it; Note [Stream-ordered reuse]), the executor's
// own events, tilings and arena live with the executor, and the run's input buffers, its copies of the caller's
// inputs (a run with a deadline never reads the caller's memory in place, which the caller may free once the run
// returned), its output tensors and its KernelLaunch records (a CPU kernel reads its own through a host pointer
// while it runs) move to left_*. The next run first settles: it waits for those streams within its
// own deadline (DeadlineExceeded naming the stream while one still runs), resets them and frees the leftovers; the
// destructor does the same without a bound. So a late run costs its caller nothing past the deadline, nothing is freed
// under a command, and the stream is usable again once its command ends.
void Executor::quiesce() {
  // Only a run whose deadline passed leaves streams busy with its own launches; streams shared with another
  // executor's run are never aborted otherwise.
  const bool late = time_left() == hal::Duration::zero();
  if (late) {
    for (hal::Stream* stream : streams_) {
      if (!stream->query().idle) stream->abort();
    }
  }
  for (hal::Stream* stream : streams_) {
    if (stream->status().ok()) continue;
    if (late && !stream->query().idle) {
      if (std::find(unsettled_.begin(), unsettled_.end(), stream) == unsettled_.end()) unsettled_.push_back(stream);
      continue;
    }
    stream->reset().ignore();
  }
}

Status Executor::settle() {
  while (!unsettled_.empty()) {
    hal::Stream* stream = unsettled_.back();
    stream->synchronize(time_left()).ignore();  // the aborted stream's sticky error is expected
    if (!stream->query().idle) {
      return deadline_exceeded("stream '{}' still runs a command that an earlier run left when its deadline passed",
                               stream->name());
    }
    stream->reset().ignore();
    unsettled_.pop_back();
  }
  left_buffers_.clear();
  left_copies_.clear();
  left_outputs_.clear();
  left_launches_.clear();
  return ok_status();
}

void Executor::drain_after_failure(const RunOptions& /*options*/) {
  for (hal::Stream* stream : streams_) stream->synchronize(time_left()).ignore();
  for (hal::Stream* stream : streams_) {
    if (!stream->status().ok()) stream->reset().ignore();
  }
}

Status Executor::diagnose(Status status, size_t object, std::string_view stage, RunState& state,
                          const RunOptions& /*options*/, int stream_hint) {
  // Drain first: the failure's effects (failed events, skipped commands) must be final before they are read.
  std::vector<Status> stream_errors;
  for (hal::Stream* stream : streams_) {
    stream->synchronize(time_left()).ignore();
    stream_errors.push_back(stream->status());
  }
  diagnostics::RunView view{plan_.get(), state.shapes, state.launches, state.launched, {}};
  for (hal::Stream* stream : streams_) view.stream_names.push_back(stream->name());
  FailureReport report;
  if (object != kNoObject) {
    report = diagnostics::describe_launch(view, object, std::string(stage), FailureLocation::kExact);
  } else {
    // The root failed stream is the one whose error went through the fewest hops (Note in diagnostics.h).
    int root = -1;
    for (size_t s = 0; s < stream_errors.size(); ++s) {
      if (stream_errors[s].ok()) continue;
      if (root < 0 || stream_errors[s].context().size() < stream_errors[static_cast<size_t>(root)].context().size()) {
        root = static_cast<int>(s);
      }
    }
    if (root >= 0) status = stream_errors[static_cast<size_t>(root)];
    const int stream = root >= 0 ? root : std::max(stream_hint, 0);
    const auto plan_event = [&](int e) { return events_[static_cast<size_t>(e)]->state(); };
    std::function<hal::EventState(size_t)> marker;
    if (state.markers) marker = [&](size_t i) { return markers_[2 * i + 1]->state(); };
    const diagnostics::Location where =
        diagnostics::locate(*plan_, state.launched, stream, status, plan_event, marker);
    if (where.location == FailureLocation::kStream) {
      report = diagnostics::describe_stream(view, stream, std::string(stage));
    } else {
      report = diagnostics::describe_launch(view, where.object, std::string(stage), where.location);
      for (size_t other : where.candidates) {
        report.candidates.push_back(fmt::format("'{}'", plan_->graph().node(plan_->objects()[other].node).name));
      }
      object = where.object;
    }
  }
  for (hal::Stream* stream : streams_) {
    if (!stream->status().ok()) stream->reset().ignore();
  }
  if (object != kNoObject && object == state.non_finite_object) report.non_finite = state.non_finite;
  report.error = status.to_string();
  if (object != kNoObject) {
    for (LaunchObserver* observer : state.observers) observer->on_failure(object, report);
  }
  failures_.assign(1, report);
  return std::move(status).with_context(report.to_string());
}

// Note [Continue mode]
// Launches are enqueued in plan order, in passes. Within a pass, a launch whose input comes from a failed or skipped
// launch is skipped; one whose stream has already failed is left for the next pass; one that fails while being
// enqueued (sizing, allocation, tiling, launch, check-numerics) fails alone and the pass goes on. At the end of the
// pass every stream is drained. Each launch enqueued in the pass is then read from its markers: end marker complete
// → done; start marker complete but not the end one → its kernel failed (exact); neither → the stream had failed
// before reaching it (a failed kernel earlier on it, or a wait on another stream's failed event), so it is pending
// again. A launch whose stream failed while it was being enqueued is read the same way from the markers that were
// enqueued (its kernel was, its end marker was not: only the start marker). Failed streams are reset and the next
// pass enqueues the pending launches. Every pass that leaves launches
// pending has found at least one failure, so the passes end; if a stream failed and no launch can be blamed (a
// timeout, a failed copy), the run ends as in stop mode. Intermediates are held until the run ends and the arena
// is not used, so a relaunched node finds its inputs as they were.
Status Executor::run_continuing(RunState& state, const RunOptions& options) {
  const graph::Graph& g = plan_->graph();
  const std::vector<ExecutionObject>& objects = plan_->objects();
  std::vector<size_t> producer_object(static_cast<size_t>(g.num_values()), kNoObject);
  for (size_t i = 0; i < objects.size(); ++i) {
    for (graph::ValueId out : objects[i].outputs) producer_object[static_cast<size_t>(out)] = i;
  }
  std::vector<size_t> blame(objects.size(), kNoObject);  // skipped launch → the failed launch it depends on
  std::vector<Status> errors;                             // per entry of failures_
  std::vector<size_t> failed_objects;                     // per entry of failures_
  diagnostics::RunView view{plan_.get(), state.shapes, state.launches, 0, {}};
  for (hal::Stream* stream : streams_) view.stream_names.push_back(stream->name());
  // Marks launch `i` skipped (blaming the failed launch behind it) when an input comes from a failed or skipped one.
  const auto skip_if_input_failed = [&](size_t i) {
    for (graph::ValueId in : objects[i].inputs) {
      const size_t producer = in == graph::kNoValue ? kNoObject : producer_object[static_cast<size_t>(in)];
      if (producer == kNoObject) continue;
      if (state.outcome[producer] == Outcome::kFailed || state.outcome[producer] == Outcome::kSkipped) {
        state.outcome[i] = Outcome::kSkipped;
        blame[i] = state.outcome[producer] == Outcome::kFailed ? producer : blame[producer];
        return true;
      }
    }
    return false;
  };
  const auto add_failure = [&](size_t i, std::string_view stage, Status status) {
    state.outcome[i] = Outcome::kFailed;
    view.launched = state.launched;
    FailureReport report = diagnostics::describe_launch(view, i, std::string(stage), FailureLocation::kExact);
    if (i == state.non_finite_object) report.non_finite = state.non_finite;
    report.error = status.to_string();
    failures_.push_back(std::move(report));
    errors.push_back(std::move(status));
    failed_objects.push_back(i);
  };

  bool pending = true;
  while (pending) {
    const size_t failures_before = failures_.size();
    std::vector<size_t> enqueued;  // with both markers
    std::vector<size_t> started;   // with only the start marker
    for (size_t i = 0; i < objects.size(); ++i) {
      if (state.outcome[i] != Outcome::kPending || skip_if_input_failed(i)) continue;
      hal::Stream& stream = *streams_[static_cast<size_t>(objects[i].stream)];
      if (!stream.status().ok()) continue;  // found when the pass drains; relaunched in the next pass
      LaunchResult launched = launch_object(i, state);
      if (launched.ok()) {
        state.outcome[i] = Outcome::kEnqueued;
        enqueued.push_back(i);
      } else if (stream.status().ok()) {
        add_failure(i, launch_step_name(launched.step), std::move(launched.status));
      } else if (launched.step == LaunchStep::kRecordEnd) {
        // Its kernel was enqueued and its stream failed before the end marker was: only the kernel ran after the
        // start marker, so the start marker decides (the end marker still holds an earlier run's state).
        started.push_back(i);
        state.outcome[i] = Outcome::kEnqueued;
      } else if (launched.step == LaunchStep::kRecordCompletion || launched.step == LaunchStep::kCheckOutputs ||
                 launched.step == LaunchStep::kReleaseInputs) {
        enqueued.push_back(i);  // both markers were enqueued: they say whether this launch failed
        state.outcome[i] = Outcome::kEnqueued;
      }  // else its stream failed before its kernel was enqueued: it stays pending
    }
    std::vector<Status> stream_errors;
    for (hal::Stream* stream : streams_) {
      Status synced = stream->synchronize(time_left());
      if (synced.code() == StatusCode::kDeadlineExceeded) {
        return diagnose(std::move(synced), kNoObject, "running", state, options);
      }
      stream_errors.push_back(stream->status());
    }
    pending = false;
    for (size_t i : enqueued) {
      if (markers_[2 * i + 1]->state() == hal::EventState::kComplete) {
        state.outcome[i] = Outcome::kDone;
      } else if (markers_[2 * i]->state() == hal::EventState::kComplete) {
        add_failure(i, "running", stream_errors[static_cast<size_t>(objects[i].stream)]);
      } else {
        state.outcome[i] = Outcome::kPending;
        pending = true;
      }
    }
    for (size_t i : started) {
      if (markers_[2 * i]->state() == hal::EventState::kComplete) {
        add_failure(i, "running", stream_errors[static_cast<size_t>(objects[i].stream)]);
      } else {
        state.outcome[i] = Outcome::kPending;
      }
    }
    for (size_t i = 0; i < objects.size(); ++i) pending = pending || state.outcome[i] == Outcome::kPending;
    const bool streams_failed =
        std::any_of(stream_errors.begin(), stream_errors.end(), [](const Status& s) { return !s.ok(); });
    if (streams_failed && failures_.size() == failures_before) {
      failures_.clear();
      return diagnose(internal_error("a stream failed and no launch could be named"), kNoObject, "running", state,
                      options);
    }
    for (hal::Stream* stream : streams_) {
      if (!stream->status().ok()) stream->reset().ignore();
    }
  }
  if (failures_.empty()) return ok_status();

  // Sort the failures into plan order. A launch that failed at enqueue because of an input a failed launch never
  // wrote (its failure surfaced later, at the drain) is a dependent: it is skipped, not a failure of its own.
  // Then pin each skipped launch on the failure it depends on.
  std::vector<size_t> order(failures_.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return failed_objects[a] < failed_objects[b]; });
  std::vector<FailureReport> reports;
  std::vector<Status> sorted_errors;
  std::vector<size_t> sorted_objects;
  for (size_t k : order) {
    if (skip_if_input_failed(failed_objects[k])) continue;
    reports.push_back(std::move(failures_[k]));
    sorted_errors.push_back(std::move(errors[k]));
    sorted_objects.push_back(failed_objects[k]);
  }
  size_t skipped = 0;
  for (size_t i = 0; i < objects.size(); ++i) {
    if (state.outcome[i] != Outcome::kSkipped) continue;
    ++skipped;
    const auto it = std::find(sorted_objects.begin(), sorted_objects.end(), blame[i]);
    if (it == sorted_objects.end()) continue;
    const graph::Node& node = g.node(objects[i].node);
    reports[static_cast<size_t>(it - sorted_objects.begin())].skipped.push_back(
        fmt::format("'{}' ({})", node.name, node.op_type));
  }
  for (LaunchObserver* observer : state.observers) observer->on_failure(sorted_objects.front(), reports.front());
  failures_ = std::move(reports);
  Status combined(sorted_errors.front().code(),
                  fmt::format("{} of {} launches of graph '{}' failed and {} were skipped (continue mode)",
                              failures_.size(), objects.size(), g.name(), skipped));
  for (size_t k = 0; k < failures_.size(); ++k) {
    std::string error = sorted_errors[k].to_string();
    for (size_t at = error.find('\n'); at != std::string::npos; at = error.find('\n', at + 1)) error.insert(at + 1, "    ");
    combined.with_context(fmt::format("failure {} of {}: {}\n    error: {}", k + 1, failures_.size(),
                                      failures_[k].to_string(), error));
  }
  return combined;
}

}  // namespace hxrt::runtime
