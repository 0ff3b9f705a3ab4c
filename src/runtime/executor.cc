#include "hxrt/runtime/executor.h"

#include <algorithm>
#include <cstring>
#include <cmath>
#include <functional>
#include <optional>

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
  Session* const sessions[] = {&session, fallback};
  return create(std::span<Session* const>(sessions), std::move(plan));
}

Result<std::unique_ptr<Executor>> Executor::create(std::span<Session* const> sessions,
                                                   std::shared_ptr<const ExecutionPlan> plan) {
  if (!plan) return invalid_argument("Executor::create: null plan");
  if (sessions.empty() || sessions.front() == nullptr) return invalid_argument("Executor::create: no main session");
  Session& session = *sessions.front();
  if (session.device().info().kind != plan->device().kind) {
    return invalid_argument("plan for a {} device cannot run on session '{}' ({} device)",
                            hal::device_kind_name(plan->device().kind), session.name(),
                            hal::device_kind_name(session.device().info().kind));
  }
  std::vector<Session*> used{&session};
  for (int d = kFallbackDevice; d < plan->num_devices(); ++d) {
    const hal::DeviceInfo& wanted = plan->device_info(d);
    Session* fallback = static_cast<size_t>(d) < sessions.size() ? sessions[static_cast<size_t>(d)] : nullptr;
    if (fallback == nullptr) {
      return invalid_argument("plan '{}' places {} node(s) on a fallback {} device: pass a fallback session",
                              plan->graph().name(), plan->split().fallback_nodes, hal::device_kind_name(wanted.kind));
    }
    if (fallback->device().info().kind != wanted.kind || !fallback->device().info().host_addressable) {
      return invalid_argument("plan '{}' needs a host-addressable {} fallback session, got session '{}' ({} device)",
                              plan->graph().name(), hal::device_kind_name(wanted.kind), fallback->name(),
                              hal::device_kind_name(fallback->device().info().kind));
    }
    used.push_back(fallback);
  }
  std::unique_ptr<Executor> executor(new Executor(std::move(used), std::move(plan)));
  HXRT_RETURN_IF_ERROR_CTX(executor->prepare(), "preparing graph '{}'", executor->plan_->graph().name());
  return executor;
}

// Note [Split runs]
// A plan with a heterogeneous split (Note [Heterogeneous split] in execution_plan.cc) runs on one session per device
// index of the plan (sessions_[d] for device d; two today: the main device and one fallback): each
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
  const size_t num_devices = sessions_.size();
  read_on_.assign(num_devices, std::vector<bool>(values.size(), false));
  crosses_devices_.assign(values.size(), false);
  for (const ExecutionObject& object : objects) {
    for (graph::ValueId in : object.inputs) {
      if (in == graph::kNoValue) continue;
      const auto v = static_cast<size_t>(in);
      read_on_[static_cast<size_t>(object.device)][v] = true;
      if (values[v].device >= 0 && values[v].device != object.device) crosses_devices_[v] = true;
    }
    for (graph::ValueId out : object.outputs) {
      if (values[static_cast<size_t>(out)].device != object.device) crosses_devices_[static_cast<size_t>(out)] = true;
    }
  }
  host_weights_.resize(num_devices);
  for (size_t d = kFallbackDevice; d < num_devices; ++d) {
    for (graph::ValueId id : g.initializers()) {
      const graph::Value& value = g.value(id);
      if (!read_on_[d][static_cast<size_t>(id)] || value.weight.size == 0) continue;
      HXRT_ASSIGN_OR_RETURN(
          std::unique_ptr<hal::Buffer> buffer,
          sessions_[d]->device().register_host(const_cast<std::byte*>(value.weight.data), value.weight.size));
      host_weights_[d][id] = hal::BufferView(buffer.get(), 0, value.weight.size);
      weight_buffers_.push_back(std::move(buffer));
    }
  }
  hal::Device& device = session_.device();
  hal::Stream& upload = *streams_[0];
  for (graph::ValueId id : g.initializers()) {
    const graph::Value& value = g.value(id);
    if (!read_on_[kMainDevice][static_cast<size_t>(id)]) continue;
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
  for (hal::Stream* stream : unsettled_) stream->reset().ignore();  // Note [Runs past their deadline]
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
  // Note [Bound shapes]: the plan's dim checks and every value's shape depend on the symbol bindings alone, and
  // resolving a detection model's deep dim expressions (((h - 1) / 2 + 1) ... per value) was 4% of each PP-OCRv6
  // det run; a run with the bindings of the last one that resolved (every fixed-shape caller) takes its shapes.
  if (!resolved_shapes_.empty() && bindings_ == resolved_bindings_) {
    state.shapes = resolved_shapes_;
    return ok_status();
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
  resolved_bindings_ = bindings_;
  resolved_shapes_ = state.shapes;
  return ok_status();
}

Result<const ops::Tiling*> Executor::tiling_for(size_t object, const ops::KernelLaunch& launch) {
  const ExecutionObject& eo = plan_->objects()[object];
  // Each object remembers its last shapes and tiling: a run with the shapes of the previous one (every decode step,
  // every static plan) finds it without building the cache key.
  if (last_tilings_.size() != plan_->objects().size()) last_tilings_.assign(plan_->objects().size(), LastTiling{});
  LastTiling& last = last_tilings_[object];
  const auto same_shapes = [&] {
    if (last.tiling == nullptr || last.shapes.size() != launch.inputs.size() + launch.outputs.size()) return false;
    size_t k = 0;
    for (const ops::TensorRef& t : launch.inputs) {
      if (!(t.shape == last.shapes[k++])) return false;
    }
    for (const ops::TensorRef& t : launch.outputs) {
      if (!(t.shape == last.shapes[k++])) return false;
    }
    return true;
  };
  if (same_shapes()) {
    ++stats_.tiling_cache_hits;
    return last.tiling;
  }
  HXRT_ASSIGN_OR_RETURN(const ops::Tiling* tiling, tiling_by_key(eo, launch));
  last.shapes.clear();
  for (const ops::TensorRef& t : launch.inputs) last.shapes.push_back(t.shape);
  for (const ops::TensorRef& t : launch.outputs) last.shapes.push_back(t.shape);
  last.tiling = tiling;
  return tiling;
}

Result<const ops::Tiling*> Executor::tiling_by_key(const ExecutionObject& eo, const ops::KernelLaunch& launch) {
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

std::string_view launch_step_name(LaunchStep step) {
  switch (step) {
    case LaunchStep::kSizeOutputs: return "sizing the outputs of";
    case LaunchStep::kAllocateOutputs: return "allocating the outputs of";
    case LaunchStep::kTiling: return "computing the tiling of";
    case LaunchStep::kWaitInputs: return "waiting for the inputs of";
    case LaunchStep::kRecordStart: return "recording the start of";
    case LaunchStep::kKernel: return "launching";
    case LaunchStep::kRecordEnd: return "recording the end of";
    case LaunchStep::kRecordCompletion: return "recording the completion event of";
    case LaunchStep::kCheckOutputs: return "checking the outputs of";
    case LaunchStep::kReleaseInputs: return "releasing the inputs of";
  }
  return "launching";
}

std::string Executor::pool_tag(graph::ValueId value) const {
  const graph::Graph& g = plan_->graph();
  const graph::Value& v = g.value(value);
  return plan_->values()[static_cast<size_t>(value)].role == ValueRole::kOutput ? fmt::format("output:{}", v.name)
                                                                                : g.node(v.producer).name;
}

void Executor::notify_pool_event(RunState& state, PoolEventKind kind, graph::ValueId value, std::string_view tag,
                                 uint64_t bytes) {
  for (LaunchObserver* observer : state.observers) observer->on_pool_event(kind, value, tag, bytes);
}

Executor::LaunchResult Executor::launch_object(size_t i, RunState& state) {
  const ExecutionObject& object = plan_->objects()[i];
  hal::Stream& stream = *streams_[static_cast<size_t>(object.stream)];
  const bool observed = !state.observers.empty();
  if (observed) {
    for (LaunchObserver* observer : state.observers) observer->before_launch(i);
  }
  if (LaunchResult placed = place_outputs(i, state, stream); !placed.ok()) return placed;
  if (Status bound = bind_launch(i, state); !bound.ok()) return LaunchResult::failed(LaunchStep::kTiling, bound);
  if (LaunchResult enqueued = enqueue(i, state, stream); !enqueued.ok()) return enqueued;
  if (observed) {
    for (LaunchObserver* observer : state.observers) {
      if (Status checked = observer->after_enqueue(i, stream); !checked.ok()) {
        return LaunchResult::failed(LaunchStep::kCheckOutputs, std::move(checked));
      }
    }
  }
  if (Status released = release_inputs(i, state, stream); !released.ok()) {
    return LaunchResult::failed(LaunchStep::kReleaseInputs, std::move(released));
  }
  if (observed) {
    for (LaunchObserver* observer : state.observers) observer->after_launch(i, stream);
  }
  return LaunchResult{};
}

// Outputs go where the plan put them: an arena slice, the block of the Reshape input they alias (Note [Reshape
// aliasing]), or a pool block owned by this run (a relaunch in continue mode keeps its blocks).
Executor::LaunchResult Executor::place_outputs(size_t i, RunState& state, hal::Stream& stream) {
  const graph::Graph& g = plan_->graph();
  const ExecutionObject& object = plan_->objects()[i];
  const std::vector<ValuePlan>& values = plan_->values();
  for (graph::ValueId out : object.outputs) {
    const auto v = static_cast<size_t>(out);
    const auto elements = static_cast<uint64_t>(state.shapes[v].num_elements());
    Result<uint64_t> sized = storage_bytes(g.value(out).desc.dtype, elements);
    if (!sized.ok()) return LaunchResult::failed(LaunchStep::kSizeOutputs, std::move(sized).take_status());
    const uint64_t bytes = *sized;
    if (state.use_arena && values[v].arena_offset >= 0) {
      state.views[v] = arena_.view().subview(static_cast<uint64_t>(values[v].arena_offset), bytes);
      continue;
    }
    if (state.allocations[v]) continue;
    if (values[v].alias_of != graph::kNoValue) {
      // The output takes over its input's block (the input has no other consumer).
      const auto in = static_cast<size_t>(object.inputs[0]);
      if (state.allocations[in]) {
        state.views[v] = state.allocations[in].view().subview(0, bytes);
        state.allocations[v] = state.allocations[in];
        state.allocations[in] = memory::Allocation();
        continue;
      }
    }
    std::string tag = values[v].role == ValueRole::kOutput ? fmt::format("output:{}", g.value(out).name)
                                                           : g.node(object.node).name;
    // A copy's host side belongs to the other device's pool and stream (Note [Split runs]).
    Session& owner = session_of(values[v].device);
    hal::Stream& owner_stream = values[v].device == object.device ? stream : owner.default_stream();
    memory::CachingAllocator& pool = state.pool != nullptr ? *state.pool : owner.pool();
    Result<memory::Allocation> allocated = pool.allocate(std::max<uint64_t>(bytes, 1), owner_stream, tag);
    if (!allocated.ok()) return LaunchResult::failed(LaunchStep::kAllocateOutputs, std::move(allocated).take_status());
    state.allocations[v] = *allocated;
    state.views[v] = allocated->view().subview(0, bytes);
    if (values[v].role == ValueRole::kIntermediate) {
      state.live_bytes += bytes;
      stats_.peak_intermediate_bytes = std::max(stats_.peak_intermediate_bytes, state.live_bytes);
    }
    if (!state.observers.empty()) notify_pool_event(state, PoolEventKind::kAlloc, out, tag, bytes);
  }
  return LaunchResult{};
}

Status Executor::bind_launch(size_t i, RunState& state) {
  const graph::Graph& g = plan_->graph();
  const ExecutionObject& object = plan_->objects()[i];
  const std::vector<ValuePlan>& values = plan_->values();
  ops::KernelLaunch& launch = state.launches[i];
  launch = ops::KernelLaunch{};
  launch.node = &g.node(object.node);
  launch.params = object.params.get();
  for (graph::ValueId in : object.inputs) {
    if (in == graph::kNoValue) {
      launch.inputs.push_back(ops::TensorRef{});
      continue;
    }
    const auto v = static_cast<size_t>(in);
    const bool host_side = object.device != kMainDevice && values[v].device < 0;  // input or initializer
    launch.inputs.push_back(ops::TensorRef{
        g.value(in).desc.dtype, state.shapes[v],
        host_side ? state.host_views[static_cast<size_t>(object.device)][v] : state.views[v]});
  }
  for (graph::ValueId out : object.outputs) {
    const auto v = static_cast<size_t>(out);
    launch.outputs.push_back(ops::TensorRef{g.value(out).desc.dtype, state.shapes[v], state.views[v]});
  }
  HXRT_ASSIGN_OR_RETURN(launch.tiling, tiling_for(i, launch));
  return ok_status();
}

// Waits for cross-stream inputs, then the kernel between its markers, then the event other streams wait for.
Executor::LaunchResult Executor::enqueue(size_t i, RunState& state, hal::Stream& stream) {
  const ExecutionObject& object = plan_->objects()[i];
  for (int e : object.wait_events) {
    if (Status s = stream.wait(*events_[static_cast<size_t>(e)]); !s.ok()) {
      return LaunchResult::failed(LaunchStep::kWaitInputs, std::move(s));
    }
  }
  if (state.markers) {
    if (Status s = stream.record(*markers_[2 * i]); !s.ok()) return LaunchResult::failed(LaunchStep::kRecordStart, s);
  }
  if (Status s = object.kernel->launch(stream, state.launches[i]); !s.ok()) {
    return LaunchResult::failed(LaunchStep::kKernel, std::move(s));
  }
  state.launched = std::max(state.launched, i + 1);
  ++stats_.launches;
  if (state.markers) {
    if (Status s = stream.record(*markers_[2 * i + 1]); !s.ok()) return LaunchResult::failed(LaunchStep::kRecordEnd, s);
  }
  if (object.record_event >= 0) {
    if (Status s = stream.record(*events_[static_cast<size_t>(object.record_event)]); !s.ok()) {
      return LaunchResult::failed(LaunchStep::kRecordCompletion, std::move(s));
    }
  }
  return LaunchResult{};
}

// Note [Release points]
// The plan decides where each intermediate's block goes back to the pool: ExecutionObject::release_after lists
// the intermediates whose last use (in plan order, following Reshape aliases to the root) is that launch. The free
// is stream-ordered: a consumer on another stream than the block's declares its use first, so the block also waits
// for it. Values that cross devices are held until the run has drained (Note [Split runs]); snapshot and continue
// runs hold every intermediate until the run ends.
memory::CachingAllocator& Executor::pool_for(graph::ValueId value, const RunState& state) const {
  return state.pool != nullptr ? *state.pool : pool_of(value);
}

Status Executor::release_inputs(size_t i, RunState& state, hal::Stream& stream) {
  const ExecutionObject& object = plan_->objects()[i];
  const std::vector<ValuePlan>& values = plan_->values();
  for (graph::ValueId in : object.inputs) {
    if (in == graph::kNoValue) continue;
    const auto v = static_cast<size_t>(in);
    const memory::Allocation& allocation = state.allocations[v];
    if (!allocation || values[v].role != ValueRole::kIntermediate || crosses_devices_[v]) continue;
    // The block belongs to the stream that allocated it: the root's producer for a Reshape alias.
    const graph::ValueId owner = values[v].alias_of != graph::kNoValue ? values[v].alias_of : in;
    if (values[static_cast<size_t>(owner)].producer_stream != object.stream) {
      HXRT_RETURN_IF_ERROR(pool_for(in, state).record_use(allocation, stream));
    }
  }
  if (state.hold_intermediates) return ok_status();
  for (graph::ValueId value : object.release_after) {
    const auto v = static_cast<size_t>(value);
    memory::Allocation& allocation = state.allocations[v];
    if (!allocation || crosses_devices_[v]) continue;  // arena slice, moved to a Reshape alias, or held
    HXRT_RETURN_IF_ERROR(pool_for(value, state).free(allocation));
    allocation = memory::Allocation();
    state.live_bytes -= state.views[v].size;
    if (!state.observers.empty()) notify_pool_event(state, PoolEventKind::kFree, value, pool_tag(value), state.views[v].size);
  }
  return ok_status();
}

Result<TensorMap> Executor::run(const TensorMap& inputs, const RunOptions& options) {
  const graph::Graph& g = plan_->graph();
  const std::vector<ExecutionObject>& objects = plan_->objects();
  hal::Device& device = session_.device();
  failures_.clear();
  // Note [One deadline per run]: RunOptions::timeout bounds the whole run, not each of its waits; every wait takes
  // what is left (time_left()), and a run that times out aborts its streams before it releases their memory.
  run_deadline_ = hal::Deadline::after(options.timeout);
  HXRT_RETURN_IF_ERROR_CTX(settle(), "running graph '{}'", g.name());
  // Launches hold pointers into the tiling cache until they run; between runs none is queued, so it may be emptied.
  if (tiling_cache_.size() > kTilingCacheCapacity) {
    tiling_cache_.clear();
    last_tilings_.clear();
    ++stats_.tiling_cache_clears;
  }
  RunState state;
  HXRT_RETURN_IF_ERROR_CTX(bind(inputs, state), "binding the inputs of graph '{}'", g.name());
  state.views.resize(static_cast<size_t>(g.num_values()));
  state.host_views.resize(sessions_.size());
  for (size_t d = kFallbackDevice; d < sessions_.size(); ++d) state.host_views[d].resize(static_cast<size_t>(g.num_values()));
  state.allocations.resize(static_cast<size_t>(g.num_values()));
  state.launches.resize(objects.size());
  state.outcome.assign(objects.size(), Outcome::kPending);
  const bool continuing = options.failure_mode == FailureMode::kContinue;
  const bool profiling = options.profile || session_.profiler().enabled();
  state.markers = profiling || options.locate_failures || !options.snapshot_dir.empty() || options.check_numerics ||
                  continuing;
  state.hold_intermediates = !options.snapshot_dir.empty() || continuing;
  state.use_arena = !continuing;
  if (state.markers) HXRT_RETURN_IF_ERROR_CTX(ensure_markers(), "creating the profiling events of graph '{}'", g.name());
  // Note [Launch observers]: only what the options ask for is attached.
  if (options.check_numerics) {
    state.numerics = std::make_unique<NumericsCheck>(*this, state);
    state.observers.push_back(state.numerics.get());
  }
  if (!options.snapshot_dir.empty()) {
    state.snapshot = std::make_unique<InputSnapshot>(*this, state, options);
    state.observers.push_back(state.snapshot.get());
  }
  if (profiling) {
    state.profiling = std::make_unique<Profiling>(*this, state);
    state.observers.push_back(state.profiling.get());
  }

  TensorMap outputs;  // declared before release(), which keeps it alive for a late run's running copies
  // Frees what this run still holds, once the streams have drained. After a failure, quiesce() first: a run that
  // timed out still has launches queued that name this memory.
  auto release = [&] {
    for (size_t v = 0; v < state.allocations.size(); ++v) {
      memory::Allocation& allocation = state.allocations[v];
      if (!allocation) continue;
      const auto id = static_cast<graph::ValueId>(v);
      pool_of(id).free(allocation).ignore();
      if (!state.observers.empty()) notify_pool_event(state, PoolEventKind::kFree, id, pool_tag(id), state.views[v].size);
    }
    if (state.profiling) {
      state.profiling->finish();
      state.profiling.reset();
      state.observers.clear();
    }
    for (hal::Stream* stream : streams_) stream->synchronize(time_left()).ignore();
    if (!unsettled_.empty()) {  // Note [Runs past their deadline]: a command may still read or write these
      for (std::unique_ptr<hal::Buffer>& buffer : state.input_buffers) left_buffers_.push_back(std::move(buffer));
      for (std::vector<std::byte>& copy : state.input_copies) left_copies_.push_back(std::move(copy));
      left_outputs_.push_back(std::move(outputs));
      left_launches_.push_back(std::move(state.launches));  // a CPU kernel reads its KernelLaunch while it runs
    }
    state.input_buffers.clear();
    state.input_copies.clear();
  };
  auto fail = [&](Status status) -> Status {
    drain_after_failure(options);
    quiesce();
    release();
    return status;
  };

  // Inputs: in place on host-addressable devices, else uploaded on stream 0.
  bool uploaded = false;
  for (graph::ValueId id : g.inputs()) {
    if (auto bound = states_.find(id); bound != states_.end()) {
      state.views[static_cast<size_t>(id)] = bound->second.view;
      for (size_t d = kFallbackDevice; d < sessions_.size(); ++d) {
        if (!read_on_[d][static_cast<size_t>(id)]) continue;
        if (bound->second.view.host_address() == nullptr) {
          return fail(failed_precondition("state input '{}' is read by a node on the fallback device but lives in "
                                          "memory the host cannot address", g.value(id).name));
        }
        state.host_views[d][static_cast<size_t>(id)] = bound->second.view;
      }
      continue;
    }
    const HostTensor& tensor = inputs.find(g.value(id).name)->second;
    if (tensor.bytes.empty()) continue;
    // Note [Runs past their deadline]: with a deadline, the run reads a copy that outlives a late return.
    const std::byte* source = tensor.bytes.data();
    if (options.timeout != hal::kInfinite) {
      source = state.input_copies.emplace_back(tensor.bytes.begin(), tensor.bytes.end()).data();
    }
    std::unique_ptr<hal::Buffer> buffer;
    if (device.info().host_addressable) {
      Result<std::unique_ptr<hal::Buffer>> registered =
          device.register_host(const_cast<std::byte*>(source), tensor.bytes.size());
      if (!registered.ok()) return fail(std::move(registered).take_status());
      buffer = std::move(registered).value();
    } else {
      Result<std::unique_ptr<hal::Buffer>> allocated = device.allocate(tensor.bytes.size(), hal::MemoryKind::kDevice);
      if (!allocated.ok()) return fail(std::move(allocated).take_status());
      buffer = std::move(allocated).value();
      if (Status s = streams_[0]->copy_from_host(*buffer, source); !s.ok()) return fail(std::move(s));
      uploaded = true;
    }
    state.views[static_cast<size_t>(id)] = hal::BufferView(*buffer);
    state.input_buffers.push_back(std::move(buffer));
    for (size_t d = kFallbackDevice; d < sessions_.size(); ++d) {
      if (!read_on_[d][static_cast<size_t>(id)]) continue;
      Result<std::unique_ptr<hal::Buffer>> registered =
          sessions_[d]->device().register_host(const_cast<std::byte*>(source), tensor.bytes.size());
      if (!registered.ok()) return fail(std::move(registered).take_status());
      state.host_views[d][static_cast<size_t>(id)] = hal::BufferView(**registered);
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
  for (size_t d = kFallbackDevice; d < sessions_.size(); ++d) {
    for (const auto& [id, view] : host_weights_[d]) state.host_views[d][static_cast<size_t>(id)] = view;
  }

  if (continuing) {
    if (Status status = run_continuing(state, options); !status.ok()) {
      drain_after_failure(options);
      quiesce();
      release();
      return status;
    }
  } else {
    for (size_t i = 0; i < objects.size(); ++i) {
      if (LaunchResult launched = launch_object(i, state); !launched.ok()) {
        // A stream that already failed rejects every later command: the culprit is an earlier launch on it (found
        // as at synchronize), not this node.
        const int stream = objects[i].stream;
        Status diagnosed =
            streams_[static_cast<size_t>(stream)]->status().ok()
                ? diagnose(std::move(launched.status), i, launch_step_name(launched.step), state, options)
                : diagnose(std::move(launched.status), kNoObject, "running", state, options, stream);
        quiesce();
        release();
        return diagnosed;
      }
    }
    for (size_t s = 0; s < streams_.size(); ++s) {
      if (Status status = streams_[s]->synchronize(time_left()); !status.ok()) {
        Status diagnosed = diagnose(std::move(status), kNoObject, "running", state, options, static_cast<int>(s));
        quiesce();
        release();
        return diagnosed;
      }
    }
  }
  // Each output is read back on the stream that produced it: in a split plan an output may live on the fallback
  // device, whose buffers the main device's streams do not own (Note [Split runs]).
  std::vector<bool> read_on(streams_.size(), false);
  for (graph::ValueId id : g.outputs()) {
    const auto v = static_cast<size_t>(id);
    const graph::Value& value = g.value(id);
    HostTensor tensor;
    tensor.dtype = value.desc.dtype;
    tensor.shape = state.shapes[v];
    tensor.bytes.resize(state.views[v].size);
    const int producer = plan_->values()[v].producer_stream;
    const size_t stream = producer >= 0 ? static_cast<size_t>(producer) : 0;
    if (!tensor.bytes.empty()) {
      read_on[stream] = true;
      if (Status s = streams_[stream]->copy_to_host(tensor.bytes.data(), state.views[v]); !s.ok()) {
        return fail(std::move(s));
      }
    }
    outputs.emplace(value.name, std::move(tensor));
  }
  for (size_t s = 0; s < streams_.size(); ++s) {
    if (!read_on[s]) continue;
    if (Status status = streams_[s]->synchronize(time_left()); !status.ok()) return fail(std::move(status));
  }
  release();
  ++stats_.runs;
  return outputs;
}

}  // namespace hxrt::runtime
