// The observers of an Executor run (executor_observers.h): profiling, check-numerics, input snapshots.
#include "executor_observers.h"

#include <algorithm>
#include <span>
#include <thread>

#include "executor_run_state.h"

namespace hxrt::runtime {

// ---- Profiling -------------------------------------------------------------------------------------------------

Executor::Profiling::Profiling(Executor& executor, RunState& state) : executor_(executor), state_(state) {
  const size_t objects = executor.plan_->objects().size();
  event_producer_.assign(executor.events_.size(), -1);
  record_of_.assign(objects, -1);
  profile_.launches.reserve(objects);
  record_objects_.reserve(objects);
  profile_.counters.reserve(objects);
}

void Executor::Profiling::before_launch(size_t /*object*/) { enqueue_begin_ns_ = hal::host_now_ns(); }

void Executor::Profiling::on_pool_event(PoolEventKind kind, graph::ValueId value, std::string_view tag,
                                        uint64_t bytes) {
  const graph::Graph& g = executor_.plan_->graph();
  const graph::Value& v = g.value(value);
  PoolEvent event;
  event.ts_ns = hal::host_now_ns();
  event.kind = kind;
  event.tag = std::string(tag);
  event.value = v.name;
  event.node_id = v.producer == graph::kNoNode ? graph::kNoNode : g.node(v.producer).stable_id;
  event.bytes = bytes;
  event.in_use_bytes = executor_.session_.pool().stats().allocated_bytes.current;
  profile_.pool_events.push_back(std::move(event));
}

void Executor::Profiling::after_launch(size_t object, hal::Stream& stream) {
  LaunchRecord record = launch_record(object, stream);
  record.enqueue_begin_ns = enqueue_begin_ns_;
  record.enqueue_end_ns = hal::host_now_ns();
  const memory::AllocatorStats pool_stats = executor_.session_.pool().stats();
  profile_.counters.push_back(
      CounterSample{record.enqueue_end_ns, pool_stats.allocated_bytes.current, pool_stats.reserved_bytes.current});
  int64_t& index = record_of_[object];
  if (index < 0) {
    index = static_cast<int64_t>(profile_.launches.size());
    profile_.launches.push_back(std::move(record));
    record_objects_.push_back(object);
  } else {
    profile_.launches[static_cast<size_t>(index)] = std::move(record);  // a relaunch replaces its record
  }
  const int event = executor_.plan_->objects()[object].record_event;
  if (event >= 0) event_producer_[static_cast<size_t>(event)] = index;
}

LaunchRecord Executor::Profiling::launch_record(size_t object, const hal::Stream& stream) const {
  const ExecutionPlan& plan = *executor_.plan_;
  const ExecutionObject& eo = plan.objects()[object];
  const graph::Node& node = plan.graph().node(eo.node);
  const ops::KernelLaunch& launch = state_.launches[object];
  LaunchRecord record;
  record.graph = plan.graph().name();
  record.node_id = node.stable_id;
  record.node_name = node.name;
  record.op_type = node.op_type;
  record.kernel = eo.kernel->name;
  record.kernel_version = eo.kernel->impl_version;
  record.fusion_id = eo.fusion_id;
  record.fused_nodes = node.fused_from;
  record.fused_ids = node.fused_ids;
  record.stream = stream.name();
  record.tiling_key = launch.tiling ? launch.tiling->key() : std::string();
  for (size_t k = 0; k < eo.inputs.size(); ++k) {
    record.input_shapes.push_back(eo.inputs[k] == graph::kNoValue
                                      ? std::string("-")
                                      : fmt::format("{}{}", launch.inputs[k].dtype, launch.inputs[k].shape));
  }
  if (eo.params) record.params = eo.params->to_string();
  for (int e : eo.wait_events) {
    const int64_t producer = event_producer_[static_cast<size_t>(e)];
    if (producer >= 0) record.waits_on.push_back(static_cast<uint64_t>(producer));
  }
  return record;
}

void Executor::Profiling::finish() {
  std::vector<LaunchRecord>& records = profile_.launches;
  for (size_t k = 0; k < records.size(); ++k) {
    const size_t i = record_objects_[k];
    const hal::Event& begin = *executor_.markers_[2 * i];
    const hal::Event& end = *executor_.markers_[2 * i + 1];
    if (begin.state() != hal::EventState::kComplete || end.state() != hal::EventState::kComplete) continue;
    Result<int64_t> begin_ns = begin.timestamp_ns();
    Result<int64_t> end_ns = end.timestamp_ns();
    if (!begin_ns.ok() || !end_ns.ok()) continue;
    records[k].device_begin_ns = *begin_ns;
    records[k].device_end_ns = std::max(*begin_ns, *end_ns);
  }
  profile_.host_thread = std::this_thread::get_id();
  executor_.session_.profiler().add_run(std::move(profile_));
  profile_ = RunProfile();
}

// ---- Check-numerics ----------------------------------------------------------------------------------------------

Status Executor::NumericsCheck::after_enqueue(size_t object, hal::Stream& stream) {
  const graph::Graph& g = executor_.plan_->graph();
  const ExecutionObject& eo = executor_.plan_->objects()[object];
  HXRT_RETURN_IF_ERROR(stream.synchronize(executor_.time_left()));
  for (size_t k = 0; k < eo.outputs.size(); ++k) {
    const graph::ValueId out = eo.outputs[k];
    const auto v = static_cast<size_t>(out);
    const DType dtype = g.value(out).desc.dtype;
    const hal::BufferView& view = state_.views[v];
    if (!dtype_info(dtype).is_float || view.size == 0) continue;
    std::span<const std::byte> bytes;
    if (const void* host = view.host_address()) {
      bytes = std::span<const std::byte>(static_cast<const std::byte*>(host), view.size);
    } else {
      staging_.resize(view.size);
      HXRT_RETURN_IF_ERROR(stream.copy_to_host(staging_.data(), view));
      HXRT_RETURN_IF_ERROR(stream.synchronize(executor_.time_left()));
      bytes = staging_;
    }
    const NonFiniteCount count = scan_non_finite(dtype, bytes);
    if (count.clean()) continue;
    NonFiniteOutput bad{static_cast<int>(k), g.value(out).name, dtype, state_.shapes[v], count};
    Status status = data_loss("check-numerics: {}", bad.to_string());
    state_.non_finite = std::move(bad);
    state_.non_finite_object = object;
    return status;
  }
  return ok_status();
}

// ---- Input snapshots ---------------------------------------------------------------------------------------------

void Executor::InputSnapshot::on_failure(size_t object, FailureReport& report) {
  for (hal::Stream* stream : executor_.streams_) {
    if (!stream->query().idle) {
      report.snapshot_error = "a stream is still busy (timed out); inputs may be changing";
      return;
    }
  }
  const graph::Graph& g = executor_.plan_->graph();
  hal::Stream& reader = *executor_.streams_[0];
  std::vector<HostTensor> tensors;
  for (graph::ValueId in : executor_.plan_->objects()[object].inputs) {
    HostTensor tensor;
    if (in != graph::kNoValue) {
      const auto v = static_cast<size_t>(in);
      tensor.dtype = g.value(in).desc.dtype;
      tensor.shape = state_.shapes[v];
      const hal::BufferView& view = state_.views[v];
      if (view.buffer == nullptr && view.size > 0) {
        report.snapshot_error = fmt::format("input '{}' has no memory yet", g.value(in).name);
        return;
      }
      tensor.bytes.resize(view.size);
      if (view.size > 0) {
        Status copied = reader.copy_to_host(tensor.bytes.data(), view);
        if (copied.ok()) copied = reader.synchronize(executor_.time_left());
        if (!copied.ok()) {
          report.snapshot_error = copied.to_string();
          reader.reset().ignore();
          return;
        }
      }
    }
    tensors.push_back(std::move(tensor));
  }
  Status written = write_failure_snapshot(options_.snapshot_dir, tensors, options_.snapshot_writer, report);
  if (!written.ok()) report.snapshot_error = written.to_string();
}

}  // namespace hxrt::runtime
