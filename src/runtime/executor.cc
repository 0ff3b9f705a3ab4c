#include "hxrt/runtime/executor.h"

#include <algorithm>
#include <cstring>

#include <fmt/ranges.h>

#include "hxrt/base/logging.h"

namespace hxrt::runtime {
namespace {

std::string node_label(const graph::Node& node) { return fmt::format("node '{}' ({})", node.name, node.op_type); }

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
  uint64_t live_bytes = 0;
};

Result<std::unique_ptr<Executor>> Executor::create(Session& session, std::shared_ptr<const ExecutionPlan> plan) {
  if (!plan) return invalid_argument("Executor::create: null plan");
  if (session.device().info().kind != plan->device().kind) {
    return invalid_argument("plan for a {} device cannot run on session '{}' ({} device)",
                            hal::device_kind_name(plan->device().kind), session.name(),
                            hal::device_kind_name(session.device().info().kind));
  }
  std::unique_ptr<Executor> executor(new Executor(session, std::move(plan)));
  HXRT_RETURN_IF_ERROR_CTX(executor->prepare(), "preparing graph '{}'", executor->plan_->graph().name());
  return executor;
}

Status Executor::prepare() {
  const graph::Graph& g = plan_->graph();
  for (int s = 0; s < plan_->num_streams(); ++s) {
    HXRT_ASSIGN_OR_RETURN(hal::Stream * stream, session_.stream(fmt::format("{}.s{}", g.name(), s)));
    streams_.push_back(stream);
  }
  // One event per cross-stream edge source, plus "inputs ready" for streams that read uploaded inputs.
  for (int e = 0; e <= plan_->num_events(); ++e) {
    HXRT_ASSIGN_OR_RETURN(hal::Event * event, session_.create_event());
    events_.push_back(event);
  }
  hal::Device& device = session_.device();
  hal::Stream& upload = *streams_[0];
  for (graph::ValueId id : g.initializers()) {
    const graph::Value& value = g.value(id);
    if (value.consumers.empty()) continue;
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
  for (hal::Event* event : events_) session_.destroy_event(event).ignore();
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

Result<TensorMap> Executor::run(const TensorMap& inputs, const RunOptions& options) {
  const graph::Graph& g = plan_->graph();
  const std::vector<ExecutionObject>& objects = plan_->objects();
  const std::vector<ValuePlan>& values = plan_->values();
  memory::CachingAllocator& pool = session_.pool();
  hal::Device& device = session_.device();
  RunState state;
  HXRT_RETURN_IF_ERROR_CTX(bind(inputs, state), "binding the inputs of graph '{}'", g.name());
  state.views.resize(static_cast<size_t>(g.num_values()));
  state.allocations.resize(static_cast<size_t>(g.num_values()));
  state.remaining.resize(static_cast<size_t>(g.num_values()));
  for (size_t v = 0; v < values.size(); ++v) state.remaining[v] = values[v].consumers;
  state.launches.resize(objects.size());

  // Frees what this run still holds; after a failure, first drains and resets the streams.
  auto cleanup = [&](bool failed) {
    if (failed) {
      for (hal::Stream* stream : streams_) stream->synchronize(options.timeout).ignore();
      for (hal::Stream* stream : streams_) {
        if (!stream->status().ok()) stream->reset().ignore();
      }
    }
    for (memory::Allocation& allocation : state.allocations) {
      if (allocation) pool.free(allocation).ignore();
    }
    for (hal::Stream* stream : streams_) stream->synchronize(options.timeout).ignore();
    state.input_buffers.clear();
  };
  auto fail = [&](Status status) -> Status {
    cleanup(true);
    return status;
  };

  // Inputs: in place on host-addressable devices, else uploaded on stream 0.
  bool uploaded = false;
  for (graph::ValueId id : g.inputs()) {
    if (auto bound = states_.find(id); bound != states_.end()) {
      state.views[static_cast<size_t>(id)] = bound->second.view;
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
  }
  if (uploaded && streams_.size() > 1) {
    hal::Event& ready = *events_.back();
    if (Status s = streams_[0]->record(ready); !s.ok()) return fail(std::move(s));
    for (size_t s = 1; s < streams_.size(); ++s) {
      if (Status w = streams_[s]->wait(ready); !w.ok()) return fail(std::move(w));
    }
  }
  for (const auto& [id, view] : weights_) state.views[static_cast<size_t>(id)] = view;

  for (size_t i = 0; i < objects.size(); ++i) {
    const ExecutionObject& object = objects[i];
    const graph::Node& node = g.node(object.node);
    hal::Stream& stream = *streams_[static_cast<size_t>(object.stream)];
    auto at_node = [&](Status status) {
      return fail(std::move(status).with_context(
          fmt::format("running {} with kernel '{}' on stream '{}'", node_label(node), object.kernel->name, stream.name())));
    };
    // Outputs: arena slices, or pool blocks owned by this run.
    for (graph::ValueId out : object.outputs) {
      const auto v = static_cast<size_t>(out);
      Result<uint64_t> bytes = storage_bytes(g.value(out).desc.dtype, static_cast<uint64_t>(state.shapes[v].num_elements()));
      if (!bytes.ok()) return at_node(std::move(bytes).take_status());
      if (values[v].arena_offset >= 0) {
        state.views[v] = arena_.view().subview(static_cast<uint64_t>(values[v].arena_offset), *bytes);
        continue;
      }
      const std::string tag = values[v].role == ValueRole::kOutput ? fmt::format("output:{}", g.value(out).name) : node.name;
      Result<memory::Allocation> allocation = pool.allocate(std::max<uint64_t>(*bytes, 1), stream, tag);
      if (!allocation.ok()) return at_node(std::move(allocation).take_status());
      state.allocations[v] = *allocation;
      state.views[v] = allocation->view().subview(0, *bytes);
      if (values[v].role == ValueRole::kIntermediate) {
        state.live_bytes += *bytes;
        stats_.peak_intermediate_bytes = std::max(stats_.peak_intermediate_bytes, state.live_bytes);
      }
    }
    ops::KernelLaunch& launch = state.launches[i];
    launch.node = &node;
    launch.params = object.params.get();
    for (graph::ValueId in : object.inputs) {
      if (in == graph::kNoValue) {
        launch.inputs.push_back(ops::TensorRef{});
        continue;
      }
      const auto v = static_cast<size_t>(in);
      launch.inputs.push_back(ops::TensorRef{g.value(in).desc.dtype, state.shapes[v], state.views[v]});
    }
    for (graph::ValueId out : object.outputs) {
      const auto v = static_cast<size_t>(out);
      launch.outputs.push_back(ops::TensorRef{g.value(out).desc.dtype, state.shapes[v], state.views[v]});
    }
    Result<const ops::Tiling*> tiling = tiling_for(i, launch);
    if (!tiling.ok()) return at_node(std::move(tiling).take_status().with_context("computing the tiling"));
    launch.tiling = *tiling;
    for (int e : object.wait_events) {
      if (Status s = stream.wait(*events_[static_cast<size_t>(e)]); !s.ok()) return at_node(std::move(s));
    }
    if (Status s = object.kernel->launch(stream, launch); !s.ok()) return at_node(std::move(s));
    ++stats_.launches;
    if (object.record_event >= 0) {
      if (Status s = stream.record(*events_[static_cast<size_t>(object.record_event)]); !s.ok()) return at_node(std::move(s));
    }
    // Dependency counts: an intermediate returns to the pool once its last consumer is enqueued (stream-ordered;
    // consumers on other streams are declared so the block waits for them too).
    for (graph::ValueId in : object.inputs) {
      if (in == graph::kNoValue) continue;
      const auto v = static_cast<size_t>(in);
      memory::Allocation& allocation = state.allocations[v];
      if (!allocation || values[v].role != ValueRole::kIntermediate) continue;
      if (values[v].producer_stream != object.stream) {
        if (Status s = pool.record_use(allocation, stream); !s.ok()) return at_node(std::move(s));
      }
      if (--state.remaining[v] == 0) {
        if (Status s = pool.free(allocation); !s.ok()) return at_node(std::move(s));
        allocation = memory::Allocation();
        state.live_bytes -= state.views[v].size;
      }
    }
  }

  for (hal::Stream* stream : streams_) {
    if (Status s = stream->synchronize(options.timeout); !s.ok()) {
      return fail(std::move(s).with_context(fmt::format("running graph '{}'", g.name())));
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
  cleanup(false);
  ++stats_.runs;
  return outputs;
}

}  // namespace hxrt::runtime
