#include "hxrt/runtime/executor.h"

#include <algorithm>
#include <cstring>
#include <cmath>
#include <functional>
#include <optional>
#include <thread>

#include <fmt/ranges.h>

#include "diagnostics_builder.h"
#include "executor_run_state.h"
#include "hxrt/base/logging.h"

namespace hxrt::runtime {
namespace {

// A dim that is exactly one symbol binds it; any other expression is checked after binding.
bool is_plain_symbol(const graph::Dim& dim) {
  if (dim.is_static()) return false;
  const std::vector<std::string> symbols = dim.symbols();
  return symbols.size() == 1 && dim.to_string() == symbols[0];
}

}  // namespace

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
