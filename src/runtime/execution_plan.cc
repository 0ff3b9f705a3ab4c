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
  if (options.max_streams < 1) return invalid_argument("max_streams must be at least 1");
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
  HXRT_RETURN_IF_ERROR(plan->select_kernels(context, options));
  plan->assign_streams(options.max_streams);
  plan->plan_memory(options.static_memory_plan);
  return plan;
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
    Result<ops::Selection> selection = context.kernels->select(graph_, node, device_, selection_options);
    if (options.tuner != nullptr && selection.ok() && selection->policy != "forced" && selection->policy != "hint") {
      const std::vector<const ops::KernelDef*> candidates = selection->compatible();
      if (candidates.size() > 1) {
        HXRT_RETURN_IF_ERROR_CTX(options.tuner->measure(graph_, node, candidates), "measuring the kernels of {}",
                                 node_label(node));
        selection = context.kernels->select(graph_, node, device_, selection_options);
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
  for (size_t i = 0; i < n; ++i) {
    ExecutionObject& object = objects_[i];
    int chosen = -1;
    for (graph::ValueId input : object.inputs) {
      if (input == graph::kNoValue) continue;
      const graph::NodeId producer = graph_.value(input).producer;
      if (producer == graph::kNoNode) continue;
      const int p = index_of[static_cast<size_t>(producer)];
      const int s = objects_[static_cast<size_t>(p)].stream;
      if (tail[static_cast<size_t>(s)] == p) {
        chosen = s;
        break;
      }
    }
    if (chosen < 0) {
      if (static_cast<int>(tail.size()) < max_streams) {
        chosen = static_cast<int>(tail.size());
        tail.push_back(-1);
        load.push_back(0);
      } else {
        chosen = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
      }
    }
    object.stream = chosen;
    tail[static_cast<size_t>(chosen)] = static_cast<int>(i);
    ++load[static_cast<size_t>(chosen)];
  }
  num_streams_ = std::max<int>(1, static_cast<int>(tail.size()));

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
  for (graph::ValueId id = 0; id < graph_.num_values(); ++id) {
    if (values_[static_cast<size_t>(id)].role == ValueRole::kIntermediate && last[static_cast<size_t>(id)] >= 0) {
      objects_[static_cast<size_t>(last[static_cast<size_t>(id)])].release_after.push_back(id);
    }
  }

  const bool concurrent = num_streams_ > 1;
  if (!allow_arena || !all_static || memory_.intermediates == 0 || (concurrent && n > kMaxNodesForConcurrentArena)) {
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
    if (values_[static_cast<size_t>(id)].role == ValueRole::kIntermediate && first[static_cast<size_t>(id)] >= 0) order.push_back(id);
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
  memory_.uses_arena = true;
}

std::string ExecutionPlan::describe() const {
  std::string out = fmt::format("graph '{}' on {} device '{}': {} nodes, {} streams, {} events\n", graph_.name(),
                                hal::device_kind_name(device_.kind), device_.name, objects_.size(), num_streams_,
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
    out += fmt::format("  [{}] {} ({}{}{}) stream {} kernel {} v{} ({})\n", i, node.name, node.domain,
                       node.domain.empty() ? "" : ".", node.op_type, object.stream, object.kernel->name,
                       object.kernel->impl_version, ops::kernel_kind_name(object.kernel->kind));
    out += fmt::format("      in: {}\n      out: {}\n", fmt::join(ins, ", "), fmt::join(outs, ", "));
    if (!node.attrs.items().empty()) out += fmt::format("      attrs: {}\n", node.attrs.to_string());
    if (object.params) {
      const std::string params = object.params->to_string();
      if (!params.empty()) out += fmt::format("      params: {}\n", params);
    }
    if (object.fusion_id >= 0) {
      out += fmt::format("      fusion {}: replaces {}\n", object.fusion_id, fmt::join(node.fused_from, ", "));
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
  if (!fusion_groups_.empty()) {
    out += "fusion groups:\n";
    for (const ops::FusionGroup& group : fusion_groups_) {
      out += fmt::format("  {}: {} = {} [{}]\n", group.fusion_id, group.fused_node, group.pattern,
                         fmt::join(group.original_nodes, " -> "));
    }
  }
  if (!dim_checks_.empty()) {
    out += "shape checks at bind time:\n";
    for (const ops::DimCheck& check : dim_checks_) out += fmt::format("  {} == {} ({})\n", check.a.to_string(), check.b.to_string(), check.what);
  }
  out += fmt::format("memory: {} intermediates ({} sized at run time); ", memory_.intermediates,
                     memory_.dynamic_intermediates);
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
