#include "hxrt/runtime/execution_plan.h"

#include <algorithm>
#include <numeric>

#include <fmt/ranges.h>

namespace hxrt::runtime {
namespace {

// Above this many nodes a multi-stream plan skips the ordering matrix the arena needs and falls back to the pool.
constexpr size_t kMaxNodesForConcurrentArena = 4096;

uint64_t align_up(uint64_t n, uint64_t alignment) { return (n + alignment - 1) / alignment * alignment; }

std::string node_label(const graph::Node& node) { return fmt::format("node '{}' ({})", node.name, node.op_type); }

}  // namespace

Result<std::unique_ptr<ExecutionPlan>> ExecutionPlan::build(graph::Graph graph, const hal::DeviceInfo& device,
                                                            const PlanContext& context, const PlanOptions& options) {
  if (context.schemas == nullptr || context.kernels == nullptr) {
    return invalid_argument("ExecutionPlan::build needs op schemas and a kernel registry");
  }
  if (options.max_streams < 0) return invalid_argument("max_streams must be at least 1, or 0 for each device's default");
  const std::string graph_name = graph.name();
  std::unique_ptr<ExecutionPlan> plan(new ExecutionPlan(std::move(graph), device));
  graph::Graph& g = plan->graph_;

  HXRT_RETURN_IF_ERROR_CTX(g.validate(), "validating graph '{}'", graph_name);
  for (graph::NodeId id = 0; id < g.num_nodes(); ++id) {
    HXRT_RETURN_IF_ERROR_CTX(context.schemas->apply_defaults(g.mutable_node(id)), "checking {}",
                             node_label(g.node(id)));
  }
  HXRT_RETURN_IF_ERROR_CTX(context.schemas->infer_graph(g, &plan->dim_checks_), "inferring shapes of graph '{}'",
                           graph_name);
  if (options.fuse && context.fusions != nullptr) {
    Result<std::vector<ops::FusionGroup>> groups = ops::apply_fusions(g, *context.fusions, options.fusion);
    if (!groups.ok()) return std::move(groups).take_status().with_context(fmt::format("fusing graph '{}'", graph_name));
    plan->fusion_groups_ = std::move(groups).value();
    if (!plan->fusion_groups_.empty()) {
      for (graph::NodeId id = 0; id < g.num_nodes(); ++id) {
        HXRT_RETURN_IF_ERROR(context.schemas->apply_defaults(g.mutable_node(id)));
      }
      plan->dim_checks_.clear();
      HXRT_RETURN_IF_ERROR_CTX(context.schemas->infer_graph(g, &plan->dim_checks_),
                               "inferring shapes of fused graph '{}'", graph_name);
    }
  }
  HXRT_RETURN_IF_ERROR(plan->place_nodes(context, options));
  HXRT_RETURN_IF_ERROR(plan->select_kernels(context, options));
  plan->assign_streams(options.max_streams);
  plan->plan_memory(options.static_memory_plan);
  return plan;
}

// Note [Heterogeneous split]
// A node whose op has no kernel on the main device (NotFound from the registry: no kernel, or none compatible) is
// placed on the fallback device when the fallback has one. Every edge from a node on one device to a node on the
// other gets a copy node, once per (value, destination): MemcpyToHost (main → fallback) or MemcpyFromHost
// (fallback → main). Both run on the main device's streams — the fallback is host-addressable, so the main device's
// queue reads and writes its memory directly — and are ordinary nodes: they get kernels, streams, events, profiler
// records and error reports like any other. Graph inputs and initializers are not copied by nodes: the executor
// places them on each device that consumes them. Graph outputs stay where they are produced.
Status ExecutionPlan::place_nodes(const PlanContext& context, const PlanOptions& options) {
  placement_.assign(static_cast<size_t>(graph_.num_nodes()), kMainDevice);
  copy_target_.assign(static_cast<size_t>(graph_.num_nodes()), -1);
  if (options.fallback_device == nullptr) return ok_status();
  const hal::DeviceInfo& fallback = *options.fallback_device;
  if (!fallback.host_addressable) {
    return invalid_argument("fallback device '{}' ({}) is not host-addressable; the heterogeneous split needs one",
                            fallback.name, hal::device_kind_name(fallback.kind));
  }
  if (fallback.kind == device().kind) return ok_status();
  devices_.push_back(fallback);
  HXRT_ASSIGN_OR_RETURN(std::vector<graph::NodeId> order, graph_.topological_order());
  for (graph::NodeId id : order) {
    const graph::Node& node = graph_.node(id);
    const bool requested = std::find(options.fallback_ops.begin(), options.fallback_ops.end(), node.op_type) !=
                           options.fallback_ops.end();
    if (!requested) {
      Result<ops::Selection> main = context.kernels->select(graph_, node, device(), options.selection);
      if (main.ok() || main.status().code() != StatusCode::kNotFound) continue;  // forced-kernel errors stay errors
    }
    // The first fallback, in device order, with a kernel for the node; none: reported when kernels are selected.
    for (size_t d = kFallbackDevice; d < devices_.size(); ++d) {
      if (!context.kernels->select(graph_, node, devices_[d], options.selection).ok()) continue;
      placement_[static_cast<size_t>(id)] = static_cast<int>(d);
      ++split_.fallback_nodes;
      std::vector<std::string>& moved = split_.fallback_ops;
      if (std::find(moved.begin(), moved.end(), node.op_type) == moved.end()) moved.push_back(node.op_type);
      break;
    }
  }
  if (split_.fallback_nodes == 0) return ok_status();

  // Copies on every crossing edge, one per (value, destination device). Fallbacks are host-addressable and copies
  // run on the main device, so every copy has the main device on one side.
  for (graph::NodeId id : order) {
    const int from = placement_[static_cast<size_t>(id)];
    const std::vector<graph::ValueId> outputs = graph_.node(id).outputs;
    for (graph::ValueId value : outputs) {
      std::vector<graph::ValueId> copy_to(devices_.size(), graph::kNoValue);  // per destination device
      const std::vector<graph::NodeId> consumers = graph_.value(value).consumers;
      for (graph::NodeId consumer : consumers) {
        const int to = placement_[static_cast<size_t>(consumer)];
        if (to == from) continue;
        if (from != kMainDevice && to != kMainDevice) {
          return unimplemented("node '{}' on fallback device {} feeds node '{}' on fallback device {}: copies between "
                               "two fallback devices are not supported", graph_.node(id).name, from,
                               graph_.node(consumer).name, to);
        }
        graph::ValueId& copy = copy_to[static_cast<size_t>(to)];
        if (copy == graph::kNoValue) {
          const graph::Value& v = graph_.value(value);
          std::string name = fmt::format("{}@{}", v.name, hal::device_kind_name(device_info(to).kind));
          while (graph_.find_value(name).ok()) name += "_";
          const graph::TensorDesc desc = v.desc;
          const std::string source = v.name;
          HXRT_ASSIGN_OR_RETURN(copy, graph_.declare_value(name, desc));
          const std::string op = to != kMainDevice ? "MemcpyToHost" : "MemcpyFromHost";
          std::string node_name = fmt::format("{}({})", op, source);
          while (graph_.find_node(node_name).ok()) node_name += "_";
          const std::vector<std::string> in{source}, out{name};
          HXRT_ASSIGN_OR_RETURN(graph::NodeId copy_node, graph_.add_node(node_name, op, in, out, {}, "hxrt", 1));
          placement_.resize(static_cast<size_t>(graph_.num_nodes()), kMainDevice);
          copy_target_.resize(static_cast<size_t>(graph_.num_nodes()), -1);
          placement_[static_cast<size_t>(copy_node)] = kMainDevice;
          copy_target_[static_cast<size_t>(copy_node)] = to;
          ++split_.copies;
          if (desc.shape.is_static()) {
            Result<uint64_t> bytes = storage_bytes(desc.dtype, static_cast<uint64_t>(desc.shape.num_elements().value()));
            if (bytes.ok()) split_.copy_bytes += *bytes;
          }
        }
        const graph::Node& c = graph_.node(consumer);
        for (size_t i = 0; i < c.inputs.size(); ++i) {
          if (graph_.node(consumer).inputs[i] == value) {
            HXRT_RETURN_IF_ERROR(graph_.set_node_input(consumer, static_cast<int>(i), copy));
          }
        }
      }
    }
  }
  HXRT_RETURN_IF_ERROR_CTX(graph_.validate(), "validating graph '{}' after the heterogeneous split", graph_.name());
  return ok_status();
}

Status ExecutionPlan::select_kernels(const PlanContext& context, const PlanOptions& options) {
  HXRT_ASSIGN_OR_RETURN(std::vector<graph::NodeId> order, graph_.topological_order());
  objects_.reserve(order.size());
  ops::SelectionOptions selection_options = options.selection;
  if (options.tuner != nullptr) {
    selection_options.timings = &options.tuner->cache();
    selection_options.bucket_dims = options.tuner->options().dims;
  }
  for (graph::NodeId id : order) {
    const graph::Node& node = graph_.node(id);
    const int placed = placement_[static_cast<size_t>(id)];
    const hal::DeviceInfo& device = device_info(placed);
    Result<ops::Selection> selection = context.kernels->select(graph_, node, device, selection_options);
    if (options.tuner != nullptr && placed == kMainDevice && selection.ok() && selection->policy != "forced" &&
        selection->policy != "hint") {
      const std::vector<const ops::KernelDef*> candidates = selection->compatible();
      if (candidates.size() > 1) {
        HXRT_RETURN_IF_ERROR_CTX(options.tuner->measure(graph_, node, candidates), "measuring the kernels of {}",
                                 node_label(node));
        selection = context.kernels->select(graph_, node, device, selection_options);
      }
    }
    if (!selection.ok()) {
      return std::move(selection).take_status().with_context(fmt::format("selecting a kernel for {}", node_label(node)));
    }
    ExecutionObject object;
    object.node = id;
    object.kernel = selection->chosen;
    object.selection_reason = selection->explain();
    object.inputs = node.inputs;
    object.outputs = node.outputs;
    object.fusion_id = node.fusion_id;
    object.device = placed;
    if (object.kernel->parse_attrs) {
      Result<std::unique_ptr<ops::KernelParams>> params = object.kernel->parse_attrs(graph_, node);
      if (!params.ok()) {
        return std::move(params).take_status().with_context(
            fmt::format("parsing the attributes of {} for kernel '{}'", node_label(node), object.kernel->name));
      }
      object.params = std::move(params).value();
    }
    objects_.push_back(std::move(object));
  }
  return ok_status();
}

// Note [Streams per device]: the CPU driver's streams all hand their kernels to one intra-op pool that already
// spans the cores, so a second stream adds cross-stream events and worker hand-offs but no parallelism: on a 2-core
// Zen 5, runtime_bench's BM_TwoBranches (two independent chains of 512x512 MatMuls) ran 3.85 ms on one stream and
// 4.03 on two, and `hxrt run --streams 1` against 4 took MiniLM-L3 (batch 1 x 7) from 1.28-1.41 to 0.81-0.94 ms
// and PP-OCRv6 det (96x128) from 2.08-2.15 to 1.77-1.80 ms. So a plan left at kAutoStreams puts a CPU device's
// nodes on one stream and a device with queues of its own (OpenCL, CUDA) on up to four; an explicit max_streams is
// taken as given on every device.
int default_streams(const hal::DeviceInfo& device) {
  return device.kind == hal::DeviceKind::kCpu ? 1 : 4;
}

// Greedy stream assignment: a node continues the stream of a producer whose latest node is that producer (a
// chain stays on one stream); a node that cannot continue one (a new root, or a branch off a shared producer)
// opens a new stream while fewer than max_streams exist, else joins the least loaded. Each cross-stream input
// adds an event wait, skipped when the consuming stream has already waited for that point or later.
void ExecutionPlan::assign_streams(int max_streams) {
  const size_t n = objects_.size();
  std::vector<int> index_of(static_cast<size_t>(graph_.num_nodes()), -1);
  for (size_t i = 0; i < n; ++i) index_of[static_cast<size_t>(objects_[i].node)] = static_cast<int>(i);
  std::vector<int> tail;        // per stream: index of its latest object
  std::vector<int> load;        // per stream: objects assigned
  stream_devices_.clear();
  for (size_t i = 0; i < n; ++i) {
    ExecutionObject& object = objects_[i];
    int chosen = -1;
    for (graph::ValueId input : object.inputs) {
      if (input == graph::kNoValue) continue;
      const graph::NodeId producer = graph_.value(input).producer;
      if (producer == graph::kNoNode) continue;
      const int p = index_of[static_cast<size_t>(producer)];
      const int s = objects_[static_cast<size_t>(p)].stream;
      if (tail[static_cast<size_t>(s)] == p && stream_devices_[static_cast<size_t>(s)] == object.device) {
        chosen = s;
        break;
      }
    }
    if (chosen < 0) {
      // Streams belong to one device; max_streams applies per device (Note [Streams per device]).
      const int on_device = static_cast<int>(std::count(stream_devices_.begin(), stream_devices_.end(), object.device));
      const int limit = max_streams != kAutoStreams ? max_streams : default_streams(device_info(object.device));
      if (on_device < limit) {
        chosen = static_cast<int>(tail.size());
        tail.push_back(-1);
        load.push_back(0);
        stream_devices_.push_back(object.device);
      } else {
        for (size_t s = 0; s < load.size(); ++s) {
          if (stream_devices_[s] == object.device && (chosen < 0 || load[s] < load[static_cast<size_t>(chosen)])) {
            chosen = static_cast<int>(s);
          }
        }
      }
    }
    object.stream = chosen;
    tail[static_cast<size_t>(chosen)] = static_cast<int>(i);
    ++load[static_cast<size_t>(chosen)];
  }
  num_streams_ = std::max<int>(1, static_cast<int>(tail.size()));
  if (stream_devices_.empty()) stream_devices_.push_back(kMainDevice);

  // Events on cross-stream edges. waited[s][t]: the latest object index of stream t that stream s has waited for.
  std::vector<std::vector<int>> waited(static_cast<size_t>(num_streams_), std::vector<int>(static_cast<size_t>(num_streams_), -1));
  for (size_t i = 0; i < n; ++i) {
    ExecutionObject& object = objects_[i];
    const auto s = static_cast<size_t>(object.stream);
    for (graph::ValueId input : object.inputs) {
      if (input == graph::kNoValue) continue;
      const graph::NodeId producer = graph_.value(input).producer;
      if (producer == graph::kNoNode) continue;
      const int p = index_of[static_cast<size_t>(producer)];
      ExecutionObject& source = objects_[static_cast<size_t>(p)];
      const auto t = static_cast<size_t>(source.stream);
      if (t == s || waited[s][t] >= p) continue;
      if (source.record_event < 0) source.record_event = num_events_++;
      if (std::find(object.wait_events.begin(), object.wait_events.end(), source.record_event) ==
          object.wait_events.end()) {
        object.wait_events.push_back(source.record_event);
      }
      waited[s][t] = p;
    }
  }
}

void ExecutionPlan::plan_memory(bool allow_arena) {
  const size_t n = objects_.size();
  values_.assign(static_cast<size_t>(graph_.num_values()), ValuePlan{});
  std::vector<int> index_of(static_cast<size_t>(graph_.num_nodes()), -1);
  for (size_t i = 0; i < n; ++i) index_of[static_cast<size_t>(objects_[i].node)] = static_cast<int>(i);
  std::vector<int> first(values_.size(), -1), last(values_.size(), -1);
  std::vector<std::vector<int>> consumer_objects(values_.size());

  bool all_static = true;
  for (graph::ValueId id = 0; id < graph_.num_values(); ++id) {
    const graph::Value& value = graph_.value(id);
    ValuePlan& plan = values_[static_cast<size_t>(id)];
    plan.role = value.is_initializer ? ValueRole::kInitializer
                : value.is_input     ? ValueRole::kInput
                : value.is_output    ? ValueRole::kOutput
                                     : ValueRole::kIntermediate;
    plan.static_shape = value.desc.shape.is_static();
    if (plan.static_shape) {
      Result<uint64_t> bytes = storage_bytes(value.desc.dtype, static_cast<uint64_t>(value.desc.shape.num_elements().value()));
      plan.bytes = bytes.ok() ? *bytes : 0;
    }
    if (value.producer != graph::kNoNode) {
      const int p = index_of[static_cast<size_t>(value.producer)];
      first[static_cast<size_t>(id)] = last[static_cast<size_t>(id)] = p;
      plan.producer_stream = objects_[static_cast<size_t>(p)].stream;
      const int copy_target = copy_target_.empty() ? -1 : copy_target_[static_cast<size_t>(value.producer)];
      plan.device = copy_target >= 0 ? copy_target : objects_[static_cast<size_t>(p)].device;
    }
    if (plan.role == ValueRole::kIntermediate) {
      ++memory_.intermediates;
      if (!plan.static_shape) {
        all_static = false;
        ++memory_.dynamic_intermediates;
      } else {
        memory_.naive_bytes += align_up(std::max<uint64_t>(plan.bytes, 1), kArenaAlignment);
      }
    }
  }
  for (size_t i = 0; i < n; ++i) {
    for (graph::ValueId input : objects_[i].inputs) {
      if (input == graph::kNoValue) continue;
      ++values_[static_cast<size_t>(input)].consumers;
      last[static_cast<size_t>(input)] = std::max(last[static_cast<size_t>(input)], static_cast<int>(i));
      consumer_objects[static_cast<size_t>(input)].push_back(static_cast<int>(i));
    }
  }
  // Note [Reshape aliasing]
  // A Reshape only renames the dims of contiguous bytes, so its output can be its input's memory: when the input is
  // an intermediate whose only consumer is the Reshape, and the output is an intermediate on the same device, the
  // output aliases the input's root (chains of Reshapes share one block). The kernels skip the copy when input and
  // output are one view. The root's lifetime then extends to the alias's last use: the executor moves the block's
  // ownership to the alias when the Reshape is enqueued, and the arena places only roots, over their merged uses.
  for (size_t i = 0; i < n; ++i) {
    const ExecutionObject& object = objects_[i];
    const graph::Node& node = graph_.node(object.node);
    if (node.op_type != "Reshape" || !node.domain.empty() || object.inputs.empty() || object.outputs.size() != 1) continue;
    const graph::ValueId in = object.inputs[0];
    const graph::ValueId out = object.outputs[0];
    if (in == graph::kNoValue) continue;
    ValuePlan& source = values_[static_cast<size_t>(in)];
    ValuePlan& target = values_[static_cast<size_t>(out)];
    if (source.role != ValueRole::kIntermediate || target.role != ValueRole::kIntermediate || source.consumers != 1 ||
        source.device != object.device || target.device != object.device) {
      continue;
    }
    const graph::ValueId root = source.alias_of != graph::kNoValue ? source.alias_of : in;
    target.alias_of = root;
    const auto r = static_cast<size_t>(root);
    last[r] = std::max(last[r], last[static_cast<size_t>(out)]);
    consumer_objects[r].insert(consumer_objects[r].end(), consumer_objects[static_cast<size_t>(out)].begin(),
                               consumer_objects[static_cast<size_t>(out)].end());
    ++memory_.aliased;
  }
  for (graph::ValueId id = 0; id < graph_.num_values(); ++id) {
    if (values_[static_cast<size_t>(id)].role == ValueRole::kIntermediate && last[static_cast<size_t>(id)] >= 0) {
      objects_[static_cast<size_t>(last[static_cast<size_t>(id)])].release_after.push_back(id);
    }
  }

  const bool concurrent = num_streams_ > 1;
  if (!allow_arena || !all_static || memory_.intermediates == 0 || split_.fallback_nodes > 0 ||
      (concurrent && n > kMaxNodesForConcurrentArena)) {
    return;
  }
  // before[i]: objects that surely finish before object i starts (graph edges and same-stream order, transitively).
  std::vector<std::vector<bool>> before;
  if (concurrent) {
    before.assign(n, std::vector<bool>(n, false));
    std::vector<int> previous_on_stream(static_cast<size_t>(num_streams_), -1);
    for (size_t i = 0; i < n; ++i) {
      std::vector<int> preds;
      const int prev = previous_on_stream[static_cast<size_t>(objects_[i].stream)];
      if (prev >= 0) preds.push_back(prev);
      for (graph::ValueId input : objects_[i].inputs) {
        if (input != graph::kNoValue && first[static_cast<size_t>(input)] >= 0) preds.push_back(first[static_cast<size_t>(input)]);
      }
      for (int p : preds) {
        before[i][static_cast<size_t>(p)] = true;
        for (size_t k = 0; k < n; ++k) {
          if (before[static_cast<size_t>(p)][k]) before[i][k] = true;
        }
      }
      previous_on_stream[static_cast<size_t>(objects_[i].stream)] = static_cast<int>(i);
    }
  }
  // v's bytes may be reused by w when every use of v is ordered before w's producer (or the other way round).
  auto done_before = [&](graph::ValueId v, int start) {
    if (!concurrent) return last[static_cast<size_t>(v)] < start;
    if (!before[static_cast<size_t>(start)][static_cast<size_t>(first[static_cast<size_t>(v)])]) return false;
    for (int c : consumer_objects[static_cast<size_t>(v)]) {
      if (!before[static_cast<size_t>(start)][static_cast<size_t>(c)]) return false;
    }
    return true;
  };
  std::vector<graph::ValueId> order;
  for (graph::ValueId id = 0; id < graph_.num_values(); ++id) {
    const ValuePlan& value = values_[static_cast<size_t>(id)];
    if (value.role == ValueRole::kIntermediate && first[static_cast<size_t>(id)] >= 0 && value.alias_of == graph::kNoValue) {
      order.push_back(id);
    }
  }
  std::stable_sort(order.begin(), order.end(), [&](graph::ValueId a, graph::ValueId b) {
    return values_[static_cast<size_t>(a)].bytes > values_[static_cast<size_t>(b)].bytes;
  });
  struct Placed {
    graph::ValueId value;
    uint64_t offset;
    uint64_t size;
  };
  std::vector<Placed> placed;
  for (graph::ValueId v : order) {
    const uint64_t size = align_up(std::max<uint64_t>(values_[static_cast<size_t>(v)].bytes, 1), kArenaAlignment);
    std::vector<std::pair<uint64_t, uint64_t>> busy;
    for (const Placed& p : placed) {
      const bool disjoint = done_before(p.value, first[static_cast<size_t>(v)]) || done_before(v, first[static_cast<size_t>(p.value)]);
      if (!disjoint) busy.emplace_back(p.offset, p.offset + p.size);
    }
    std::sort(busy.begin(), busy.end());
    uint64_t offset = 0;
    for (const auto& [begin, end] : busy) {
      if (offset + size <= begin) break;
      offset = std::max(offset, end);
    }
    placed.push_back({v, offset, size});
    values_[static_cast<size_t>(v)].arena_offset = static_cast<int64_t>(offset);
    memory_.arena_bytes = std::max(memory_.arena_bytes, offset + size);
  }
  for (ValuePlan& value : values_) {
    if (value.alias_of != graph::kNoValue) value.arena_offset = values_[static_cast<size_t>(value.alias_of)].arena_offset;
  }
  memory_.uses_arena = true;
}

std::string ExecutionPlan::describe() const {
  std::string out = fmt::format("graph '{}' on {} device '{}': {} nodes, {} streams, {} events\n", graph_.name(),
                                hal::device_kind_name(device().kind), device().name, objects_.size(), num_streams_,
                                num_events_);
  out += "inputs:\n";
  for (graph::ValueId id : graph_.inputs()) out += fmt::format("  {}: {}\n", graph_.value(id).name, graph_.value(id).desc.to_string());
  out += "outputs:\n";
  for (graph::ValueId id : graph_.outputs()) out += fmt::format("  {}: {}\n", graph_.value(id).name, graph_.value(id).desc.to_string());
  out += "nodes (launch order):\n";
  for (size_t i = 0; i < objects_.size(); ++i) {
    const ExecutionObject& object = objects_[i];
    const graph::Node& node = graph_.node(object.node);
    std::vector<std::string> ins, outs;
    for (graph::ValueId v : object.inputs) ins.push_back(v == graph::kNoValue ? "-" : graph_.value(v).name);
    for (graph::ValueId v : object.outputs) {
      outs.push_back(fmt::format("{}: {}", graph_.value(v).name, graph_.value(v).desc.to_string()));
    }
    out += fmt::format("  [{}] {} (id {}, {}{}{}) stream {} kernel {} v{} ({}){}\n", i, node.name, node.stable_id,
                       node.domain, node.domain.empty() ? "" : ".", node.op_type, object.stream, object.kernel->name,
                       object.kernel->impl_version, ops::kernel_kind_name(object.kernel->kind),
                       object.device != kMainDevice
                           ? fmt::format(" on fallback {} device",
                                         hal::device_kind_name(device_info(object.device).kind))
                           : "");
    out += fmt::format("      in: {}\n      out: {}\n", fmt::join(ins, ", "), fmt::join(outs, ", "));
    if (!node.attrs.items().empty()) out += fmt::format("      attrs: {}\n", node.attrs.to_string());
    if (object.params) {
      const std::string params = object.params->to_string();
      if (!params.empty()) out += fmt::format("      params: {}\n", params);
    }
    if (object.fusion_id >= 0) {
      std::vector<std::string> replaced;
      for (size_t k = 0; k < node.fused_from.size(); ++k) {
        replaced.push_back(k < node.fused_ids.size() ? fmt::format("{} (id {})", node.fused_from[k], node.fused_ids[k])
                                                     : node.fused_from[k]);
      }
      out += fmt::format("      fusion {}: replaces {}\n", object.fusion_id, fmt::join(replaced, ", "));
    }
    if (!object.wait_events.empty()) out += fmt::format("      waits for events {}\n", fmt::join(object.wait_events, ", "));
    if (object.record_event >= 0) out += fmt::format("      records event {}\n", object.record_event);
    std::string reason = object.selection_reason;
    while (!reason.empty() && reason.back() == '\n') reason.pop_back();
    for (size_t start = 0; start <= reason.size();) {
      const size_t end = std::min(reason.find('\n', start), reason.size());
      out += fmt::format("      {}\n", reason.substr(start, end - start));
      start = end + 1;
    }
  }
  if (split_.fallback_nodes > 0) {
    out += fmt::format(
        "heterogeneous split: {} node(s) on fallback {} device '{}' (no {} kernel, or placed there, for: {}), {} copy "
        "node(s)",
        split_.fallback_nodes, hal::device_kind_name(device_info(kFallbackDevice).kind),
        device_info(kFallbackDevice).name, hal::device_kind_name(device().kind), fmt::join(split_.fallback_ops, ", "),
        split_.copies);
    out += split_.copy_bytes > 0 ? fmt::format(" moving {} bytes per run\n", split_.copy_bytes) : "\n";
    for (int s = 0; s < num_streams_; ++s) {
      out += fmt::format("  stream {}: {} device\n", s, hal::device_kind_name(device_info(stream_device(s)).kind));
    }
  }
  if (!fusion_groups_.empty()) {
    out += "fusion groups:\n";
    for (const ops::FusionGroup& group : fusion_groups_) {
      out += fmt::format("  {}: {} (id {}) = {} [{}] (ids {})\n", group.fusion_id, group.fused_node, group.fused_id,
                         group.pattern, fmt::join(group.original_nodes, " -> "), fmt::join(group.original_ids, ", "));
    }
  }
  if (!dim_checks_.empty()) {
    out += "shape checks at bind time:\n";
    for (const ops::DimCheck& check : dim_checks_) out += fmt::format("  {} == {} ({})\n", check.a.to_string(), check.b.to_string(), check.what);
  }
  out += fmt::format("memory: {} intermediates ({} sized at run time, {} aliased by Reshape); ", memory_.intermediates,
                     memory_.dynamic_intermediates, memory_.aliased);
  if (memory_.uses_arena) {
    out += fmt::format("arena plan {} bytes vs {} bytes unplanned ({:.1f}%)\n", memory_.arena_bytes,
                       memory_.naive_bytes,
                       memory_.naive_bytes ? 100.0 * static_cast<double>(memory_.arena_bytes) / static_cast<double>(memory_.naive_bytes) : 0.0);
    for (graph::ValueId id = 0; id < graph_.num_values(); ++id) {
      const ValuePlan& v = values_[static_cast<size_t>(id)];
      if (v.arena_offset >= 0) out += fmt::format("  {} @ {} ({} bytes)\n", graph_.value(id).name, v.arena_offset, v.bytes);
    }
  } else {
    out += "pool with dependency-counted release\n";
  }
  return out;
}

}  // namespace hxrt::runtime
