// Captured runs (Note [Captured runs] in hxrt/runtime/executor.h): the plan's launches recorded once into a
// captured command list of its stream, replayed with new input values.
#include <fmt/format.h>

#include "executor_run_state.h"
#include "hxrt/hal/device.h"

namespace hxrt::runtime {

Executor::Captured::~Captured() {
  if (state_ == nullptr || owner_ == nullptr) return;
  // The list names this memory: nothing of it may still be queued.
  for (hal::Stream* stream : owner_->streams_) stream->synchronize().ignore();
  for (size_t v = 0; v < state_->allocations.size(); ++v) {
    if (state_->allocations[v]) owner_->pool_for(static_cast<graph::ValueId>(v), *state_).free(state_->allocations[v]).ignore();
  }
  state_.reset();  // before pool_, whose blocks its views name
}

Result<std::unique_ptr<Executor::Captured>> Executor::capture(const TensorMap& inputs) {
  const graph::Graph& g = plan_->graph();
  const std::vector<ExecutionObject>& objects = plan_->objects();
  if (sessions_.size() > 1) {
    return unimplemented("graph '{}' is split across devices: its runs cannot be captured", g.name());
  }
  run_deadline_ = hal::Deadline::never();  // captures and replays have no deadline; a late run's streams settle first
  HXRT_RETURN_IF_ERROR(settle());
  for (const ExecutionObject& object : objects) {
    if (object.stream != 0 || !object.wait_events.empty() || object.record_event >= 0) {
      return unimplemented(
          "graph '{}' runs on several streams (node '{}' is on stream {}): its runs cannot be captured", g.name(),
          g.node(object.node).name, object.stream);
    }
  }
  if (session_.profiler().enabled()) {
    return unimplemented("the session profiles every run: a captured run records no per-launch timestamps");
  }
  std::unique_ptr<Captured> captured(new Captured());
  captured->owner_ = this;
  captured->state_ = std::make_unique<RunState>();
  RunState& state = *captured->state_;
  HXRT_RETURN_IF_ERROR_CTX(bind(inputs, state), "binding the inputs of graph '{}' for a capture", g.name());
  captured->bindings_ = bindings_;
  state.views.resize(static_cast<size_t>(g.num_values()));
  state.allocations.resize(static_cast<size_t>(g.num_values()));
  state.launches.resize(objects.size());
  state.outcome.assign(objects.size(), Outcome::kPending);
  // Note [Capture memory]
  // Every address a captured list names must stay the capture's for its lifetime, but it need not be a different
  // address per value: the capture takes its intermediates and outputs from a pool of its own, freeing each
  // intermediate after its last consumer as a run does, so later values of the same capture reuse its block
  // (stream-ordered: the list runs in recording order). The pool is never handed to anything else, so a replay
  // finds every block as the capture left it, and the capture holds its peak of live values rather than the sum of
  // them all (a 16-sequence decode step of SmolLM2: 3.5 MiB instead of ~20). Segments are small: a capture's pool
  // serves only its own few sizes.
  captured->pool_ = std::make_unique<memory::CachingAllocator>(
      session_.device(), memory::CachingAllocatorOptions{.small_size = 256 * memory::kKiB,
                                                         .small_segment_size = memory::kMiB,
                                                         .large_segment_threshold = 256 * memory::kKiB,
                                                         .segment_granularity = 64 * memory::kKiB});
  state.pool = captured->pool_.get();
  hal::Stream& stream = *streams_[0];
  hal::Device& device = session_.device();

  // Inputs live in buffers of the capture, refilled by every replay.
  for (graph::ValueId id : g.inputs()) {
    if (auto bound = states_.find(id); bound != states_.end()) {
      state.views[static_cast<size_t>(id)] = bound->second.view;
      captured->state_views_.emplace_back(id, bound->second.view);
      continue;
    }
    const HostTensor& tensor = inputs.find(g.value(id).name)->second;
    HXRT_ASSIGN_OR_RETURN(std::unique_ptr<hal::Buffer> buffer,
                          device.allocate(std::max<uint64_t>(tensor.bytes.size(), 1), hal::MemoryKind::kDevice));
    const hal::BufferView view(buffer.get(), 0, tensor.bytes.size());
    if (!tensor.bytes.empty()) HXRT_RETURN_IF_ERROR(stream.copy_from_host(view, tensor.bytes.data()));
    state.views[static_cast<size_t>(id)] = view;
    state.input_buffers.push_back(std::move(buffer));
  }
  for (const auto& [id, view] : weights_) state.views[static_cast<size_t>(id)] = view;
  HXRT_RETURN_IF_ERROR(stream.synchronize());

  HXRT_RETURN_IF_ERROR_CTX(stream.begin_capture(), "capturing graph '{}'", g.name());
  std::vector<std::string> labels;
  labels.reserve(objects.size());
  for (size_t i = 0; i < objects.size(); ++i) {
    if (LaunchResult launched = launch_object(i, state); !launched.ok()) {
      stream.end_capture().status().ignore();
      return std::move(launched.status)
          .with_context(fmt::format("{} node '{}' while capturing graph '{}'", launch_step_name(launched.step),
                                    g.node(objects[i].node).name, g.name()));
    }
    labels.push_back(fmt::format("node '{}' ({}, kernel {})", g.node(objects[i].node).name,
                                 g.node(objects[i].node).op_type, objects[i].kernel->name));
  }
  HXRT_ASSIGN_OR_RETURN(captured->commands_, stream.end_capture(std::move(labels)));
  // The launches point at tilings in the executor's cache, which a later run may empty: the capture keeps copies.
  for (ops::KernelLaunch& launch : state.launches) {
    if (launch.tiling == nullptr) continue;
    captured->tilings_.push_back(std::make_unique<ops::Tiling>(*launch.tiling));
    launch.tiling = captured->tilings_.back().get();
  }
  captured->launches_ = objects.size();
  ++stats_.captures;
  return captured;
}

Executor::Pending::~Pending() {
  if (owner_ != nullptr && !finished_ && !owner_->streams_[0]->synchronize().ok()) {
    owner_->drain_after_failure(RunOptions{});
  }
}

Result<TensorMap> Executor::replay(Captured& captured, const TensorMap& inputs) {
  HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Pending> pending, begin_replay(captured, inputs));
  return finish_replay(*pending);
}

Result<std::unique_ptr<Executor::Pending>> Executor::begin_replay(Captured& captured, const TensorMap& inputs) {
  const graph::Graph& g = plan_->graph();
  if (captured.owner_ != this) return invalid_argument("replay: the capture was made by another executor");
  run_deadline_ = hal::Deadline::never();
  HXRT_RETURN_IF_ERROR(settle());
  RunState& state = *captured.state_;
  hal::Stream& stream = *streams_[0];
  for (const auto& [id, view] : captured.state_views_) {
    auto bound = states_.find(id);
    if (bound == states_.end() || !(bound->second.view.buffer == view.buffer &&
                                    bound->second.view.offset == view.offset && bound->second.view.size == view.size)) {
      return failed_precondition("replay: state input '{}' was bound elsewhere since the capture; capture again",
                                 g.value(id).name);
    }
  }
  size_t passed = 0;
  for (graph::ValueId id : g.inputs()) {
    if (states_.contains(id)) continue;
    const graph::Value& value = g.value(id);
    auto it = inputs.find(value.name);
    if (it == inputs.end()) return invalid_argument("replay: missing input '{}'", value.name);
    const Shape& shape = state.shapes[static_cast<size_t>(id)];
    if (it->second.dtype != value.desc.dtype || !(it->second.shape == shape)) {
      return invalid_argument("replay: input '{}' is {} {}, the capture was made for {} {}", value.name,
                              it->second.dtype, it->second.shape, value.desc.dtype, shape);
    }
    ++passed;
  }
  if (passed != inputs.size())
    return invalid_argument("replay: {} inputs passed, the graph takes {}", inputs.size(), passed);
  const auto failed = [&](Status status) {
    drain_after_failure(RunOptions{});
    return std::move(status).with_context(fmt::format("replaying the captured run of graph '{}'", g.name()));
  };
  std::unique_ptr<Pending> pending(new Pending());
  pending->inputs_ = inputs;  // the stream copies from the pending replay's own bytes, not the caller's
  for (graph::ValueId id : g.inputs()) {
    if (states_.contains(id)) continue;
    const HostTensor& tensor = pending->inputs_.find(g.value(id).name)->second;
    if (tensor.bytes.empty()) continue;
    if (Status s = stream.copy_from_host(state.views[static_cast<size_t>(id)], tensor.bytes.data()); !s.ok()) {
      return failed(std::move(s));
    }
  }
  if (Status s = stream.launch_captured(captured.commands_); !s.ok()) return failed(std::move(s));
  // The outputs' host memory is placed before the copies are enqueued and never moves (node-based map).
  for (graph::ValueId id : g.outputs()) {
    const auto v = static_cast<size_t>(id);
    HostTensor tensor;
    tensor.dtype = g.value(id).desc.dtype;
    tensor.shape = state.shapes[v];
    tensor.bytes.resize(state.views[v].size);
    HostTensor& placed = pending->outputs_.emplace(g.value(id).name, std::move(tensor)).first->second;
    if (!placed.bytes.empty()) {
      if (Status s = stream.copy_to_host(placed.bytes.data(), state.views[v]); !s.ok()) return failed(std::move(s));
    }
  }
  pending->owner_ = this;
  pending->captured_ = &captured;
  return pending;
}

Result<TensorMap> Executor::finish_replay(Pending& pending) {
  if (pending.owner_ != this) return invalid_argument("finish_replay: the replay was begun by another executor");
  if (pending.finished_) return failed_precondition("finish_replay: this replay was already finished");
  pending.finished_ = true;
  if (Status s = streams_[0]->synchronize(); !s.ok()) {
    drain_after_failure(RunOptions{});
    return std::move(s).with_context(fmt::format("replaying the captured run of graph '{}'", plan_->graph().name()));
  }
  ++stats_.replays;
  stats_.launches += pending.captured_->launches_;
  return std::move(pending.outputs_);
}

}  // namespace hxrt::runtime
