#include "hxrt/runtime/executor.h"

#include <algorithm>
#include <cstring>
#include <cmath>
#include <functional>
#include <optional>
#include <thread>

#include <fmt/ranges.h>

#include "diagnostics_builder.h"
#include "hxrt/base/logging.h"

namespace hxrt::runtime {
namespace {

constexpr size_t kNoObject = SIZE_MAX;

// What became of each launch in a run (continue mode reads it; stop mode ends at the first failure).
enum class Outcome : uint8_t { kPending, kEnqueued, kDone, kFailed, kSkipped };

// A dim that is exactly one symbol binds it; any other expression is checked after binding.
bool is_plain_symbol(const graph::Dim& dim) {
  if (dim.is_static()) return false;
  const std::vector<std::string> symbols = dim.symbols();
  return symbols.size() == 1 && dim.to_string() == symbols[0];
}

}  // namespace

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

Result<std::unique_ptr<Executor>> Executor::create(Session& session, std::shared_ptr<const ExecutionPlan> plan,
                                                   Session* fallback) {
  if (!plan) return invalid_argument("Executor::create: null plan");
  if (session.device().info().kind != plan->device().kind) {
    return invalid_argument("plan for a {} device cannot run on session '{}' ({} device)",
                            hal::device_kind_name(plan->device().kind), session.name(),
                            hal::device_kind_name(session.device().info().kind));
  }
  if (const hal::DeviceInfo* wanted = plan->fallback_device()) {
    if (fallback == nullptr) {
      return invalid_argument("plan '{}' places {} node(s) on a fallback {} device: pass a fallback session",
                              plan->graph().name(), plan->split().fallback_nodes, hal::device_kind_name(wanted->kind));
    }
    if (fallback->device().info().kind != wanted->kind || !fallback->device().info().host_addressable) {
      return invalid_argument("plan '{}' needs a host-addressable {} fallback session, got session '{}' ({} device)",
                              plan->graph().name(), hal::device_kind_name(wanted->kind), fallback->name(),
                              hal::device_kind_name(fallback->device().info().kind));
    }
  } else {
    fallback = nullptr;  // not needed
  }
  std::unique_ptr<Executor> executor(new Executor(session, std::move(plan), fallback));
  HXRT_RETURN_IF_ERROR_CTX(executor->prepare(), "preparing graph '{}'", executor->plan_->graph().name());
  return executor;
}

// Note [Split runs]
// A plan with a heterogeneous split (Note [Heterogeneous split] in execution_plan.cc) runs on two sessions: each
// stream is made by the session of its device, each event by the session of the stream that records it (events
// are host-signalled, so a stream of one device waits for another's), and each value's bytes come from the pool of
// the device the plan put it on. Inputs and initializers read by fallback nodes are registered on the fallback
// device in place (it is host-addressable). The copies (MemcpyToHost / MemcpyFromHost) run on main-device streams
// and touch fallback memory directly; the blocks on their host side are never handed to the other device's
// allocator (an allocator orders reuse only on its own device's streams): a MemcpyToHost output is allocated on
// the fallback session's default stream, and both it and a MemcpyFromHost input are held until the run has
// drained, then freed.
Status Executor::prepare() {
  const graph::Graph& g = plan_->graph();
  const std::vector<ExecutionObject>& objects = plan_->objects();
  const std::vector<ValuePlan>& values = plan_->values();
  for (int s = 0; s < plan_->num_streams(); ++s) {
    HXRT_ASSIGN_OR_RETURN(hal::Stream * stream,
                          session_of(plan_->stream_device(s)).stream(fmt::format("{}.s{}", g.name(), s)));
    streams_.push_back(stream);
  }
  // One event per cross-stream edge source, plus "inputs ready" for streams that read uploaded inputs.
  std::vector<int> event_device(static_cast<size_t>(plan_->num_events()) + 1, kMainDevice);
  for (const ExecutionObject& object : objects) {
    if (object.record_event >= 0) event_device[static_cast<size_t>(object.record_event)] = object.device;
  }
  for (int e = 0; e <= plan_->num_events(); ++e) {
    Session& owner = session_of(event_device[static_cast<size_t>(e)]);
    HXRT_ASSIGN_OR_RETURN(hal::Event * event, owner.create_event());
    events_.push_back(event);
    event_sessions_.push_back(&owner);
  }
  std::vector<bool> read_on_main(values.size(), false);
  read_on_fallback_.assign(values.size(), false);
  crosses_devices_.assign(values.size(), false);
  for (const ExecutionObject& object : objects) {
    for (graph::ValueId in : object.inputs) {
      if (in == graph::kNoValue) continue;
      const auto v = static_cast<size_t>(in);
      (object.device == kFallbackDevice ? read_on_fallback_ : read_on_main)[v] = true;
      if (values[v].device >= 0 && values[v].device != object.device) crosses_devices_[v] = true;
    }
    for (graph::ValueId out : object.outputs) {
      if (values[static_cast<size_t>(out)].device != object.device) crosses_devices_[static_cast<size_t>(out)] = true;
    }
  }
  if (fallback_ != nullptr) {
    for (graph::ValueId id : g.initializers()) {
      const graph::Value& value = g.value(id);
      if (!read_on_fallback_[static_cast<size_t>(id)] || value.weight.size == 0) continue;
      HXRT_ASSIGN_OR_RETURN(std::unique_ptr<hal::Buffer> buffer,
                            fallback_->device().register_host(const_cast<std::byte*>(value.weight.data), value.weight.size));
      fallback_weights_[id] = hal::BufferView(buffer.get(), 0, value.weight.size);
      weight_buffers_.push_back(std::move(buffer));
    }
  }
  hal::Device& device = session_.device();
  hal::Stream& upload = *streams_[0];
  for (graph::ValueId id : g.initializers()) {
    const graph::Value& value = g.value(id);
    if (!read_on_main[static_cast<size_t>(id)]) continue;
    const uint64_t bytes = std::max<uint64_t>(value.weight.size, 1);
    std::unique_ptr<hal::Buffer> buffer;
    if (device.info().host_addressable && value.weight.size > 0) {
      // Zero copy: kernels read the weights where they are (often a memory-mapped file). Kernels never write
      // their inputs, so casting away const is safe.
      HXRT_ASSIGN_OR_RETURN(buffer, device.register_host(const_cast<std::byte*>(value.weight.data), value.weight.size));
    } else {
      HXRT_ASSIGN_OR_RETURN(buffer, device.allocate(bytes, hal::MemoryKind::kDevice));
      if (value.weight.size > 0) {
        HXRT_RETURN_IF_ERROR(upload.copy_from_host(hal::BufferView(buffer.get(), 0, value.weight.size), value.weight.data));
      }
    }
    weights_[id] = hal::BufferView(buffer.get(), 0, value.weight.size);
    weight_buffers_.push_back(std::move(buffer));
  }
  HXRT_RETURN_IF_ERROR(upload.synchronize());
  if (plan_->memory().uses_arena) {
    HXRT_ASSIGN_OR_RETURN(arena_, session_.pool().allocate(plan_->memory().arena_bytes, upload,
                                                           fmt::format("arena:{}", g.name())));
    for (size_t s = 1; s < streams_.size(); ++s) HXRT_RETURN_IF_ERROR(session_.pool().record_use(arena_, *streams_[s]));
  }
  return ok_status();
}

Executor::~Executor() {
  for (hal::Stream* stream : streams_) stream->synchronize().ignore();
  if (arena_) session_.pool().free(arena_).ignore();
  for (size_t e = 0; e < events_.size(); ++e) event_sessions_[e]->destroy_event(events_[e]).ignore();
}

Status Executor::bind_state(std::string_view name, DType dtype, Shape shape, hal::BufferView view) {
  const graph::Graph& g = plan_->graph();
  Result<graph::ValueId> id = g.find_value(name);
  if (!id.ok() || !g.value(*id).is_input) return invalid_argument("bind_state: '{}' is not an input of graph '{}'", name, g.name());
  const graph::Value& value = g.value(*id);
  if (dtype != value.desc.dtype || shape.rank() != value.desc.shape.rank()) {
    return invalid_argument("bind_state: '{}' is {}{}, the graph expects {}", name, dtype, shape, value.desc.to_string());
  }
  for (int axis = 0; axis < shape.rank(); ++axis) {
    const graph::Dim& dim = value.desc.shape.dim(axis);
    if (dim.is_static() && dim.value() != shape.dim(axis)) {
      return invalid_argument("bind_state: '{}' axis {} is {}, the graph expects {}", name, axis, shape.dim(axis), dim.value());
    }
  }
  HXRT_ASSIGN_OR_RETURN(const uint64_t bytes, storage_bytes(dtype, static_cast<uint64_t>(shape.num_elements())));
  if (view.buffer == nullptr || view.size < bytes) {
    return invalid_argument("bind_state: '{}' {}{} needs {} bytes, the view holds {}", name, dtype, shape, bytes, view.size);
  }
  states_[*id] = StateBinding{dtype, std::move(shape), view.subview(0, bytes)};
  return ok_status();
}

Status Executor::bind(const TensorMap& inputs, RunState& state) {
  const graph::Graph& g = plan_->graph();
  bindings_.clear();
  for (const auto& [name, tensor] : inputs) {
    Result<graph::ValueId> id = g.find_value(name);
    if (!id.ok() || !g.value(*id).is_input) {
      std::vector<std::string_view> names;
      for (graph::ValueId in : g.inputs()) names.push_back(g.value(in).name);
      return invalid_argument("unknown input '{}' (the graph's inputs: {})", name, fmt::join(names, ", "));
    }
    if (states_.contains(*id)) return invalid_argument("input '{}' is bound as state; do not pass it to run()", name);
  }
  // Bind plain symbols first, then check every dim.
  for (int pass = 0; pass < 2; ++pass) {
    for (graph::ValueId id : g.inputs()) {
      const graph::Value& value = g.value(id);
      DType dtype;
      const Shape* shape = nullptr;
      uint64_t held_bytes = 0;
      if (auto bound = states_.find(id); bound != states_.end()) {
        dtype = bound->second.dtype;
        shape = &bound->second.shape;
        held_bytes = bound->second.view.size;
      } else {
        auto it = inputs.find(value.name);
        if (it == inputs.end()) return invalid_argument("missing input '{}' ({})", value.name, value.desc.to_string());
        dtype = it->second.dtype;
        shape = &it->second.shape;
        held_bytes = it->second.bytes.size();
      }
      if (dtype != value.desc.dtype) {
        return invalid_argument("input '{}' is {}, the graph expects {}", value.name, dtype, value.desc.dtype);
      }
      if (shape->rank() != value.desc.shape.rank()) {
        return invalid_argument("input '{}' has rank {} ({}), the graph expects {}", value.name, shape->rank(),
                                *shape, value.desc.shape.to_string());
      }
      for (int axis = 0; axis < shape->rank(); ++axis) {
        const graph::Dim& dim = value.desc.shape.dim(axis);
        const int64_t actual = shape->dim(axis);
        if (pass == 0) {
          if (!is_plain_symbol(dim)) continue;
          auto [bound, inserted] = bindings_.try_emplace(dim.to_string(), actual);
          if (!inserted && bound->second != actual) {
            return invalid_argument("input '{}' axis {}: symbol '{}' is {} here but {} in another input", value.name,
                                    axis, dim.to_string(), actual, bound->second);
          }
          continue;
        }
        Result<int64_t> expected = dim.evaluate(bindings_);
        if (!expected.ok()) {
          return std::move(expected).take_status().with_context(
              fmt::format("binding input '{}' axis {} ({})", value.name, axis, dim.to_string()));
        }
        if (*expected != actual) {
          return invalid_argument("input '{}' axis {}: expected {}{}, got {}", value.name, axis, *expected,
                                  dim.is_static() ? "" : fmt::format(" ({})", dim.to_string()), actual);
        }
      }
      if (pass == 1) {
        HXRT_ASSIGN_OR_RETURN(uint64_t bytes, storage_bytes(dtype, static_cast<uint64_t>(shape->num_elements())));
        if (bytes != held_bytes) {
          return invalid_argument("input '{}': {} holds {} bytes, needs {}", value.name, *shape, held_bytes, bytes);
        }
      }
    }
  }
  for (const ops::DimCheck& check : plan_->dim_checks()) {
    HXRT_ASSIGN_OR_RETURN(int64_t a, check.a.evaluate(bindings_));
    HXRT_ASSIGN_OR_RETURN(int64_t b, check.b.evaluate(bindings_));
    if (a != b) {
      return invalid_argument("{}: {} = {} but {} = {} for these inputs", check.what, check.a.to_string(), a,
                              check.b.to_string(), b);
    }
  }
  state.shapes.resize(static_cast<size_t>(g.num_values()));
  for (graph::ValueId id = 0; id < g.num_values(); ++id) {
    Result<Shape> shape = g.value(id).desc.shape.resolve(bindings_);
    if (!shape.ok()) {
      return std::move(shape).take_status().with_context(fmt::format("resolving the shape of '{}'", g.value(id).name));
    }
    state.shapes[static_cast<size_t>(id)] = *shape;
  }
  return ok_status();
}

Result<const ops::Tiling*> Executor::tiling_for(size_t object, const ops::KernelLaunch& launch) {
  const ExecutionObject& eo = plan_->objects()[object];
  std::string key = eo.kernel->name;
  for (const ops::TensorRef& t : launch.inputs) key += fmt::format("|{}{}", t.dtype, t.shape);
  for (const ops::TensorRef& t : launch.outputs) key += fmt::format("|{}{}", t.dtype, t.shape);
  if (eo.params) key += "|" + eo.params->to_string();
  auto it = tiling_cache_.find(key);
  if (it != tiling_cache_.end()) {
    ++stats_.tiling_cache_hits;
    return it->second.get();
  }
  ++stats_.tiling_cache_misses;
  auto tiling = std::make_unique<ops::Tiling>();
  if (eo.kernel->tiling) {
    const ops::TilingQuery query{eo.params.get(), launch.inputs, launch.outputs, &plan_->device()};
    HXRT_ASSIGN_OR_RETURN(*tiling, eo.kernel->tiling(query));
  }
  const ops::Tiling* raw = tiling.get();
  tiling_cache_.emplace(std::move(key), std::move(tiling));
  return raw;
}

Status Executor::ensure_markers() {
  if (!markers_.empty()) return ok_status();
  const size_t count = 2 * plan_->objects().size();
  std::vector<std::unique_ptr<hal::Event>> markers;
  markers.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    hal::Device& device = session_of(plan_->objects()[i / 2].device).device();  // the device of the object's stream
    HXRT_ASSIGN_OR_RETURN(std::unique_ptr<hal::Event> event, device.create_event());
    markers.push_back(std::move(event));
  }
  markers_ = std::move(markers);
  return ok_status();
}

LaunchRecord Executor::launch_record(size_t object, const RunState& state, const hal::Stream& stream) const {
  const ExecutionObject& eo = plan_->objects()[object];
  const graph::Node& node = plan_->graph().node(eo.node);
  const ops::KernelLaunch& launch = state.launches[object];
  LaunchRecord record;
  record.graph = plan_->graph().name();
  record.node_id = eo.node;
  record.node_name = node.name;
  record.op_type = node.op_type;
  record.kernel = eo.kernel->name;
  record.kernel_version = eo.kernel->impl_version;
  record.fusion_id = eo.fusion_id;
  record.fused_nodes = node.fused_from;
  record.stream = stream.name();
  record.tiling_key = launch.tiling ? launch.tiling->key() : std::string();
  for (size_t k = 0; k < eo.inputs.size(); ++k) {
    record.input_shapes.push_back(eo.inputs[k] == graph::kNoValue
                                      ? std::string("-")
                                      : fmt::format("{}{}", launch.inputs[k].dtype, launch.inputs[k].shape));
  }
  if (eo.params) record.params = eo.params->to_string();
  for (int e : eo.wait_events) {
    const int64_t producer = state.event_producer[static_cast<size_t>(e)];
    if (producer >= 0) record.waits_on.push_back(static_cast<uint64_t>(producer));
  }
  return record;
}

void Executor::finish_profile(RunState& state) {
  std::vector<LaunchRecord>& records = state.profile.launches;
  for (size_t k = 0; k < records.size(); ++k) {
    const size_t i = state.record_objects[k];
    const hal::Event& begin = *markers_[2 * i];
    const hal::Event& end = *markers_[2 * i + 1];
    if (begin.state() != hal::EventState::kComplete || end.state() != hal::EventState::kComplete) continue;
    Result<int64_t> begin_ns = begin.timestamp_ns();
    Result<int64_t> end_ns = end.timestamp_ns();
    if (!begin_ns.ok() || !end_ns.ok()) continue;
    records[k].device_begin_ns = *begin_ns;
    records[k].device_end_ns = std::max(*begin_ns, *end_ns);
  }
  state.profile.host_thread = std::this_thread::get_id();
  session_.profiler().add_run(std::move(state.profile));
  state.profile = RunProfile();
  state.profiling = false;
}

void Executor::record_pool_event(RunState& state, PoolEventKind kind, graph::ValueId value, std::string tag,
                                 uint64_t bytes) {
  const graph::Value& v = plan_->graph().value(value);
  PoolEvent event;
  event.ts_ns = hal::host_now_ns();
  event.kind = kind;
  event.tag = std::move(tag);
  event.value = v.name;
  event.node_id = v.producer;
  event.bytes = bytes;
  event.in_use_bytes = session_.pool().stats().allocated_bytes.current;
  state.profile.pool_events.push_back(std::move(event));
}

void Executor::drain_after_failure(const RunOptions& options) {
  for (hal::Stream* stream : streams_) stream->synchronize(options.timeout).ignore();
  for (hal::Stream* stream : streams_) {
    if (!stream->status().ok()) stream->reset().ignore();
  }
}

Status Executor::diagnose(Status status, size_t object, std::string_view stage, RunState& state,
                          const RunOptions& options, int stream_hint) {
  // Drain first: the failure's effects (failed events, skipped commands) must be final before they are read.
  std::vector<Status> stream_errors;
  for (hal::Stream* stream : streams_) {
    stream->synchronize(options.timeout).ignore();
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
  if (!options.snapshot_dir.empty() && object != kNoObject) snapshot_inputs(object, state, options, report);
  failures_.assign(1, report);
  return std::move(status).with_context(report.to_string());
}

void Executor::snapshot_inputs(size_t object, RunState& state, const RunOptions& options, FailureReport& report) {
  for (hal::Stream* stream : streams_) {
    if (!stream->query().idle) {
      report.snapshot_error = "a stream is still busy (timed out); inputs may be changing";
      return;
    }
  }
  const graph::Graph& g = plan_->graph();
  std::vector<HostTensor> tensors;
  for (graph::ValueId in : plan_->objects()[object].inputs) {
    HostTensor tensor;
    if (in != graph::kNoValue) {
      const auto v = static_cast<size_t>(in);
      tensor.dtype = g.value(in).desc.dtype;
      tensor.shape = state.shapes[v];
      const hal::BufferView& view = state.views[v];
      if (view.buffer == nullptr && view.size > 0) {
        report.snapshot_error = fmt::format("input '{}' has no memory yet", g.value(in).name);
        return;
      }
      tensor.bytes.resize(view.size);
      if (view.size > 0) {
        Status copied = streams_[0]->copy_to_host(tensor.bytes.data(), view);
        if (copied.ok()) copied = streams_[0]->synchronize(options.timeout);
        if (!copied.ok()) {
          report.snapshot_error = copied.to_string();
          streams_[0]->reset().ignore();
          return;
        }
      }
    }
    tensors.push_back(std::move(tensor));
  }
  Status written = write_failure_snapshot(options.snapshot_dir, tensors, options.snapshot_writer, report);
  if (!written.ok()) report.snapshot_error = written.to_string();
}

Status Executor::check_outputs(size_t object, RunState& state, const RunOptions& options) {
  const graph::Graph& g = plan_->graph();
  const ExecutionObject& eo = plan_->objects()[object];
  hal::Stream& stream = *streams_[static_cast<size_t>(eo.stream)];
  HXRT_RETURN_IF_ERROR(stream.synchronize(options.timeout));
  std::vector<std::byte> staging;
  for (size_t k = 0; k < eo.outputs.size(); ++k) {
    const graph::ValueId out = eo.outputs[k];
    const auto v = static_cast<size_t>(out);
    const DType dtype = g.value(out).desc.dtype;
    const hal::BufferView& view = state.views[v];
    if (!dtype_info(dtype).is_float || view.size == 0) continue;
    std::span<const std::byte> bytes;
    if (const void* host = view.host_address()) {
      bytes = std::span<const std::byte>(static_cast<const std::byte*>(host), view.size);
    } else {
      staging.resize(view.size);
      HXRT_RETURN_IF_ERROR(stream.copy_to_host(staging.data(), view));
      HXRT_RETURN_IF_ERROR(stream.synchronize(options.timeout));
      bytes = staging;
    }
    const NonFiniteCount count = scan_non_finite(dtype, bytes);
    if (count.clean()) continue;
    NonFiniteOutput bad{static_cast<int>(k), g.value(out).name, dtype, state.shapes[v], count};
    Status status = data_loss("check-numerics: {}", bad.to_string());
    state.non_finite = std::move(bad);
    state.non_finite_object = object;
    return status;
  }
  return ok_status();
}

Status Executor::launch_object(size_t i, RunState& state, const RunOptions& options, std::string_view& stage) {
  const graph::Graph& g = plan_->graph();
  const ExecutionObject& object = plan_->objects()[i];
  const std::vector<ValuePlan>& values = plan_->values();
  const graph::Node& node = g.node(object.node);
  hal::Stream& stream = *streams_[static_cast<size_t>(object.stream)];
  const int64_t enqueue_begin = state.profiling ? hal::host_now_ns() : 0;
  // Outputs: arena slices, or pool blocks owned by this run (a relaunch in continue mode keeps its blocks).
  for (graph::ValueId out : object.outputs) {
    const auto v = static_cast<size_t>(out);
    stage = "sizing the outputs of";
    HXRT_ASSIGN_OR_RETURN(const uint64_t bytes,
                          storage_bytes(g.value(out).desc.dtype, static_cast<uint64_t>(state.shapes[v].num_elements())));
    if (state.use_arena && values[v].arena_offset >= 0) {
      state.views[v] = arena_.view().subview(static_cast<uint64_t>(values[v].arena_offset), bytes);
      continue;
    }
    if (state.allocations[v]) continue;
    if (const graph::ValueId root = values[v].alias_of; root != graph::kNoValue) {
      // Note [Reshape aliasing]: the output takes over its input's block (the input has no other consumer).
      const auto in = static_cast<size_t>(object.inputs[0]);
      if (state.allocations[in]) {
        state.views[v] = state.allocations[in].view().subview(0, bytes);
        state.allocations[v] = state.allocations[in];
        state.allocations[in] = memory::Allocation();
        continue;
      }
    }
    stage = "allocating the outputs of";
    std::string tag = values[v].role == ValueRole::kOutput ? fmt::format("output:{}", g.value(out).name) : node.name;
    // A copy's host side belongs to the other device's pool and stream (Note [Split runs]).
    Session& owner = session_of(values[v].device);
    hal::Stream& owner_stream = values[v].device == object.device ? stream : owner.default_stream();
    HXRT_ASSIGN_OR_RETURN(memory::Allocation allocation,
                          owner.pool().allocate(std::max<uint64_t>(bytes, 1), owner_stream, tag));
    state.allocations[v] = allocation;
    state.views[v] = allocation.view().subview(0, bytes);
    if (values[v].role == ValueRole::kIntermediate) {
      state.live_bytes += bytes;
      stats_.peak_intermediate_bytes = std::max(stats_.peak_intermediate_bytes, state.live_bytes);
    }
    if (state.profiling) record_pool_event(state, PoolEventKind::kAlloc, out, std::move(tag), bytes);
  }
  ops::KernelLaunch& launch = state.launches[i];
  launch = ops::KernelLaunch{};
  launch.node = &node;
  launch.params = object.params.get();
  for (graph::ValueId in : object.inputs) {
    if (in == graph::kNoValue) {
      launch.inputs.push_back(ops::TensorRef{});
      continue;
    }
    const auto v = static_cast<size_t>(in);
    const bool host_side = object.device == kFallbackDevice && values[v].device < 0;  // input or initializer
    launch.inputs.push_back(
        ops::TensorRef{g.value(in).desc.dtype, state.shapes[v], host_side ? state.fallback_views[v] : state.views[v]});
  }
  for (graph::ValueId out : object.outputs) {
    const auto v = static_cast<size_t>(out);
    launch.outputs.push_back(ops::TensorRef{g.value(out).desc.dtype, state.shapes[v], state.views[v]});
  }
  stage = "computing the tiling of";
  HXRT_ASSIGN_OR_RETURN(launch.tiling, tiling_for(i, launch));
  stage = "waiting for the inputs of";
  for (int e : object.wait_events) HXRT_RETURN_IF_ERROR(stream.wait(*events_[static_cast<size_t>(e)]));
  if (state.markers) {
    stage = "recording the start of";
    HXRT_RETURN_IF_ERROR(stream.record(*markers_[2 * i]));
  }
  stage = "launching";
  HXRT_RETURN_IF_ERROR(object.kernel->launch(stream, launch));
  state.launched = std::max(state.launched, i + 1);
  ++stats_.launches;
  if (state.markers) {
    stage = "recording the end of";
    HXRT_RETURN_IF_ERROR(stream.record(*markers_[2 * i + 1]));
  }
  if (object.record_event >= 0) {
    stage = "recording the completion event of";
    HXRT_RETURN_IF_ERROR(stream.record(*events_[static_cast<size_t>(object.record_event)]));
  }
  if (options.check_numerics) {
    stage = "checking the outputs of";
    HXRT_RETURN_IF_ERROR(check_outputs(i, state, options));
  }
  // Dependency counts: an intermediate returns to the pool once its last consumer is enqueued (stream-ordered;
  // consumers on other streams are declared so the block waits for them too).
  stage = "releasing the inputs of";
  for (graph::ValueId in : object.inputs) {
    if (in == graph::kNoValue) continue;
    const auto v = static_cast<size_t>(in);
    memory::Allocation& allocation = state.allocations[v];
    if (!allocation || values[v].role != ValueRole::kIntermediate || crosses_devices_[v]) continue;
    memory::CachingAllocator& pool = pool_of(in);
    // The block belongs to the stream that allocated it: the root's producer for a Reshape alias.
    const graph::ValueId owner = values[v].alias_of != graph::kNoValue ? values[v].alias_of : in;
    if (values[static_cast<size_t>(owner)].producer_stream != object.stream) {
      HXRT_RETURN_IF_ERROR(pool.record_use(allocation, stream));
    }
    if (--state.remaining[v] == 0 && !state.hold_intermediates) {
      HXRT_RETURN_IF_ERROR(pool.free(allocation));
      allocation = memory::Allocation();
      state.live_bytes -= state.views[v].size;
      if (state.profiling) {
        record_pool_event(state, PoolEventKind::kFree, in, g.node(g.value(in).producer).name, state.views[v].size);
      }
    }
  }
  if (state.profiling) {
    LaunchRecord record = launch_record(i, state, stream);
    record.enqueue_begin_ns = enqueue_begin;
    record.enqueue_end_ns = hal::host_now_ns();
    const memory::AllocatorStats pool_stats = session_.pool().stats();
    state.profile.counters.push_back(CounterSample{record.enqueue_end_ns, pool_stats.allocated_bytes.current,
                                                   pool_stats.reserved_bytes.current});
    int64_t& index = state.record_of[i];
    if (index < 0) {
      index = static_cast<int64_t>(state.profile.launches.size());
      state.profile.launches.push_back(std::move(record));
      state.record_objects.push_back(i);
    } else {
      state.profile.launches[static_cast<size_t>(index)] = std::move(record);  // a relaunch replaces its record
    }
    if (object.record_event >= 0) state.event_producer[static_cast<size_t>(object.record_event)] = index;
  }
  return ok_status();
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
      std::string_view stage;
      Status status = launch_object(i, state, options, stage);
      if (status.ok()) {
        state.outcome[i] = Outcome::kEnqueued;
        enqueued.push_back(i);
      } else if (stream.status().ok()) {
        add_failure(i, stage, std::move(status));
      } else if (stage == "recording the end of") {
        // Its kernel was enqueued and its stream failed before the end marker was: only the kernel ran after the
        // start marker, so the start marker decides (the end marker still holds an earlier run's state).
        started.push_back(i);
        state.outcome[i] = Outcome::kEnqueued;
      } else if (stage == "recording the completion event of" || stage == "checking the outputs of" ||
                 stage == "releasing the inputs of") {
        enqueued.push_back(i);  // both markers were enqueued: they say whether this launch failed
        state.outcome[i] = Outcome::kEnqueued;
      }  // else its stream failed before its kernel was enqueued: it stays pending
    }
    std::vector<Status> stream_errors;
    for (hal::Stream* stream : streams_) {
      Status synced = stream->synchronize(options.timeout);
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
  if (!options.snapshot_dir.empty()) snapshot_inputs(sorted_objects.front(), state, options, reports.front());
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

Result<TensorMap> Executor::run(const TensorMap& inputs, const RunOptions& options) {
  const graph::Graph& g = plan_->graph();
  const std::vector<ExecutionObject>& objects = plan_->objects();
  const std::vector<ValuePlan>& values = plan_->values();
  hal::Device& device = session_.device();
  failures_.clear();
  RunState state;
  HXRT_RETURN_IF_ERROR_CTX(bind(inputs, state), "binding the inputs of graph '{}'", g.name());
  state.views.resize(static_cast<size_t>(g.num_values()));
  if (fallback_ != nullptr) state.fallback_views.resize(static_cast<size_t>(g.num_values()));
  state.allocations.resize(static_cast<size_t>(g.num_values()));
  state.remaining.resize(static_cast<size_t>(g.num_values()));
  for (size_t v = 0; v < values.size(); ++v) state.remaining[v] = values[v].consumers;
  state.launches.resize(objects.size());
  state.outcome.assign(objects.size(), Outcome::kPending);
  const bool continuing = options.failure_mode == FailureMode::kContinue;
  // Observability (profiler.h, diagnostics.h): when none is asked for, each launch pays one branch.
  state.profiling = options.profile || session_.profiler().enabled();
  state.markers = state.profiling || options.locate_failures || !options.snapshot_dir.empty() ||
                  options.check_numerics || continuing;
  state.hold_intermediates = !options.snapshot_dir.empty() || continuing;
  state.use_arena = !continuing;
  if (state.markers) HXRT_RETURN_IF_ERROR_CTX(ensure_markers(), "creating the profiling events of graph '{}'", g.name());
  if (state.profiling) {
    state.event_producer.assign(events_.size(), -1);
    state.record_of.assign(objects.size(), -1);
    state.profile.launches.reserve(objects.size());
    state.record_objects.reserve(objects.size());
    state.profile.counters.reserve(objects.size());
  }

  // Frees what this run still holds, once the streams have drained.
  auto release = [&] {
    for (size_t v = 0; v < state.allocations.size(); ++v) {
      memory::Allocation& allocation = state.allocations[v];
      if (!allocation) continue;
      pool_of(static_cast<graph::ValueId>(v)).free(allocation).ignore();
      if (state.profiling) {
        const auto id = static_cast<graph::ValueId>(v);
        record_pool_event(state, PoolEventKind::kFree, id,
                          values[v].role == ValueRole::kOutput ? fmt::format("output:{}", g.value(id).name)
                                                               : g.node(g.value(id).producer).name,
                          state.views[v].size);
      }
    }
    if (state.profiling) finish_profile(state);
    for (hal::Stream* stream : streams_) stream->synchronize(options.timeout).ignore();
    state.input_buffers.clear();
  };
  auto fail = [&](Status status) -> Status {
    drain_after_failure(options);
    release();
    return status;
  };

  // Inputs: in place on host-addressable devices, else uploaded on stream 0.
  bool uploaded = false;
  for (graph::ValueId id : g.inputs()) {
    if (auto bound = states_.find(id); bound != states_.end()) {
      state.views[static_cast<size_t>(id)] = bound->second.view;
      if (fallback_ != nullptr && read_on_fallback_[static_cast<size_t>(id)]) {
        if (bound->second.view.host_address() == nullptr) {
          return fail(failed_precondition("state input '{}' is read by a node on the fallback device but lives in "
                                          "memory the host cannot address", g.value(id).name));
        }
        state.fallback_views[static_cast<size_t>(id)] = bound->second.view;
      }
      continue;
    }
    const HostTensor& tensor = inputs.find(g.value(id).name)->second;
    if (tensor.bytes.empty()) continue;
    std::unique_ptr<hal::Buffer> buffer;
    if (device.info().host_addressable) {
      Result<std::unique_ptr<hal::Buffer>> registered =
          device.register_host(const_cast<std::byte*>(tensor.bytes.data()), tensor.bytes.size());
      if (!registered.ok()) return fail(std::move(registered).take_status());
      buffer = std::move(registered).value();
    } else {
      Result<std::unique_ptr<hal::Buffer>> allocated = device.allocate(tensor.bytes.size(), hal::MemoryKind::kDevice);
      if (!allocated.ok()) return fail(std::move(allocated).take_status());
      buffer = std::move(allocated).value();
      if (Status s = streams_[0]->copy_from_host(*buffer, tensor.bytes.data()); !s.ok()) return fail(std::move(s));
      uploaded = true;
    }
    state.views[static_cast<size_t>(id)] = hal::BufferView(*buffer);
    state.input_buffers.push_back(std::move(buffer));
    if (fallback_ != nullptr && read_on_fallback_[static_cast<size_t>(id)]) {
      Result<std::unique_ptr<hal::Buffer>> registered =
          fallback_->device().register_host(const_cast<std::byte*>(tensor.bytes.data()), tensor.bytes.size());
      if (!registered.ok()) return fail(std::move(registered).take_status());
      state.fallback_views[static_cast<size_t>(id)] = hal::BufferView(**registered);
      state.input_buffers.push_back(std::move(registered).value());
    }
  }
  if (uploaded && streams_.size() > 1) {
    hal::Event& ready = *events_.back();
    if (Status s = streams_[0]->record(ready); !s.ok()) return fail(std::move(s));
    for (size_t s = 1; s < streams_.size(); ++s) {
      if (Status w = streams_[s]->wait(ready); !w.ok()) return fail(std::move(w));
    }
  }
  for (const auto& [id, view] : weights_) state.views[static_cast<size_t>(id)] = view;
  for (const auto& [id, view] : fallback_weights_) state.fallback_views[static_cast<size_t>(id)] = view;

  if (continuing) {
    if (Status status = run_continuing(state, options); !status.ok()) {
      drain_after_failure(options);
      release();
      return status;
    }
  } else {
    for (size_t i = 0; i < objects.size(); ++i) {
      std::string_view stage;
      if (Status status = launch_object(i, state, options, stage); !status.ok()) {
        // A stream that already failed rejects every later command: the culprit is an earlier launch on it (found
        // as at synchronize), not this node.
        const int stream = objects[i].stream;
        Status diagnosed = streams_[static_cast<size_t>(stream)]->status().ok()
                               ? diagnose(std::move(status), i, stage, state, options)
                               : diagnose(std::move(status), kNoObject, "running", state, options, stream);
        release();
        return diagnosed;
      }
    }
    for (size_t s = 0; s < streams_.size(); ++s) {
      if (Status status = streams_[s]->synchronize(options.timeout); !status.ok()) {
        Status diagnosed = diagnose(std::move(status), kNoObject, "running", state, options, static_cast<int>(s));
        release();
        return diagnosed;
      }
    }
  }
  TensorMap outputs;
  for (graph::ValueId id : g.outputs()) {
    const auto v = static_cast<size_t>(id);
    const graph::Value& value = g.value(id);
    HostTensor tensor;
    tensor.dtype = value.desc.dtype;
    tensor.shape = state.shapes[v];
    tensor.bytes.resize(state.views[v].size);
    if (!tensor.bytes.empty()) {
      if (Status s = streams_[0]->copy_to_host(tensor.bytes.data(), state.views[v]); !s.ok()) return fail(std::move(s));
    }
    outputs.emplace(value.name, std::move(tensor));
  }
  if (Status s = streams_[0]->synchronize(options.timeout); !s.ok()) return fail(std::move(s));
  release();
  ++stats_.runs;
  return outputs;
}

}  // namespace hxrt::runtime
