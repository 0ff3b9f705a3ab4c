#include "hxrt/ops/fusion.h"

#include <algorithm>

namespace hxrt::ops {
namespace {

constexpr std::string_view kFusedDomain = "hxrt.fused";

const graph::Node* single_consumer(const graph::Graph& g, graph::ValueId value, std::string_view op_type) {
  const graph::Value& v = g.value(value);
  if (v.consumers.size() != 1 || v.is_output) return nullptr;
  const graph::Node& consumer = g.node(v.consumers[0]);
  if (consumer.op_type != op_type || (!consumer.domain.empty() && consumer.domain != "hxrt")) return nullptr;
  return &consumer;
}

const std::string& name_of(const graph::Graph& g, graph::ValueId id) { return g.value(id).name; }

// The other operand of a binary node whose one operand is `value`.
graph::ValueId other_operand(const graph::Node& binary, graph::ValueId value) {
  if (binary.inputs.size() != 2) return graph::kNoValue;
  if (binary.inputs[0] == value) return binary.inputs[1];
  if (binary.inputs[1] == value) return binary.inputs[0];
  return graph::kNoValue;
}

// A vector broadcast over the last axis: shape [N] or [1, N] with N equal to `last`.
bool is_last_axis_vector(const graph::TensorDesc& desc, const graph::Dim& last) {
  const auto& dims = desc.shape.dims();
  if (dims.empty() || !(dims.back() == last)) return false;
  for (size_t i = 0; i + 1 < dims.size(); ++i) {
    if (!(dims[i] == graph::Dim(1))) return false;
  }
  return true;
}

std::optional<FusionMatch> match_conv_bn_relu(const graph::Graph& g, graph::NodeId anchor) {
  const graph::Node& conv = g.node(anchor);
  if (conv.op_type != "Conv" || !conv.domain.empty() || conv.outputs.size() != 1) return std::nullopt;
  const graph::Node* bn = single_consumer(g, conv.outputs[0], "BatchNormalization");
  if (bn == nullptr || bn->inputs.size() != 5 || bn->inputs[0] != conv.outputs[0] || bn->outputs.size() != 1) {
    return std::nullopt;
  }
  FusionMatch match;
  match.op_type = "ConvBnRelu";
  match.nodes = {conv.id, bn->id};
  match.attrs = conv.attrs;
  match.attrs.set("epsilon", bn->attrs.get_float("epsilon", 1e-5).value());
  int64_t relu = 0;
  if (const graph::Node* r = single_consumer(g, bn->outputs[0], "Relu")) {
    match.nodes.push_back(r->id);
    relu = 1;
  }
  match.attrs.set("relu", relu);
  match.inputs = {name_of(g, conv.inputs[0]), name_of(g, conv.inputs[1]),
                  conv.inputs.size() > 2 && conv.inputs[2] != graph::kNoValue ? name_of(g, conv.inputs[2]) : ""};
  for (size_t i = 1; i < 5; ++i) match.inputs.push_back(name_of(g, bn->inputs[i]));
  return match;
}

std::optional<FusionMatch> match_matmul_bias(const graph::Graph& g, graph::NodeId anchor) {
  const graph::Node& mm = g.node(anchor);
  if (mm.op_type != "MatMul" || !mm.domain.empty() || mm.outputs.size() != 1) return std::nullopt;
  const graph::TensorDesc& out = g.value(mm.outputs[0]).desc;
  if (out.shape.rank() < 2 || out.dtype != DType::kF32) return std::nullopt;
  const graph::Node* add = single_consumer(g, mm.outputs[0], "Add");
  if (add == nullptr) return std::nullopt;
  const graph::ValueId bias = other_operand(*add, mm.outputs[0]);
  if (bias == graph::kNoValue || bias == mm.outputs[0] ||
      !is_last_axis_vector(g.value(bias).desc, out.shape.dim(-1))) {
    return std::nullopt;
  }
  FusionMatch match;
  match.op_type = "MatMulBias";
  match.nodes = {mm.id, add->id};
  std::string activation = "none";
  if (const graph::Node* gelu = single_consumer(g, add->outputs[0], "Gelu")) {
    match.nodes.push_back(gelu->id);
    activation = gelu->attrs.get_string("approximate", "none").value() == "tanh" ? "gelu_tanh" : "gelu";
  }
  match.attrs.set("activation", activation);
  match.inputs = {name_of(g, mm.inputs[0]), name_of(g, mm.inputs[1]), name_of(g, bias)};
  return match;
}

std::optional<FusionMatch> match_rms_norm_mul(const graph::Graph& g, graph::NodeId anchor) {
  const graph::Node& norm = g.node(anchor);
  if (norm.op_type != "RMSNorm" || norm.domain != "hxrt" || norm.outputs.size() != 1) return std::nullopt;
  const graph::TensorDesc& out = g.value(norm.outputs[0]).desc;
  if (out.shape.rank() < 1) return std::nullopt;
  const graph::Node* mul = single_consumer(g, norm.outputs[0], "Mul");
  if (mul == nullptr) return std::nullopt;
  const graph::ValueId weight = other_operand(*mul, norm.outputs[0]);
  // RMSNormMul takes a rank-1 weight.
  if (weight == graph::kNoValue || weight == norm.outputs[0] || g.value(weight).desc.shape.rank() != 1 ||
      !is_last_axis_vector(g.value(weight).desc, out.shape.dim(-1))) {
    return std::nullopt;
  }
  FusionMatch match;
  match.op_type = "RMSNormMul";
  match.nodes = {norm.id, mul->id};
  match.attrs.set("epsilon", norm.attrs.get_float("epsilon", 1e-5).value());
  match.inputs = {name_of(g, norm.inputs[0]), name_of(g, weight)};
  return match;
}

std::optional<FusionMatch> match_swiglu(const graph::Graph& g, graph::NodeId anchor) {
  const graph::Node& silu = g.node(anchor);
  if (silu.op_type != "Silu" || silu.domain != "hxrt" || silu.outputs.size() != 1) return std::nullopt;
  const graph::Node* mul = single_consumer(g, silu.outputs[0], "Mul");
  if (mul == nullptr) return std::nullopt;
  const graph::ValueId up = other_operand(*mul, silu.outputs[0]);
  if (up == graph::kNoValue || up == silu.outputs[0] || !(g.value(up).desc == g.value(silu.outputs[0]).desc)) {
    return std::nullopt;
  }
  FusionMatch match;
  match.op_type = "SwiGLU";
  match.nodes = {silu.id, mul->id};
  match.inputs = {name_of(g, silu.inputs[0]), name_of(g, up)};
  return match;
}

}  // namespace

Status FusionRegistry::add(FusionPattern pattern) {
  if (pattern.name.empty() || !pattern.match) return invalid_argument("fusion pattern needs a name and a matcher");
  for (const FusionPattern& p : patterns_) {
    if (p.name == pattern.name) return already_exists("fusion pattern '{}' is already registered", pattern.name);
  }
  patterns_.push_back(std::move(pattern));
  return ok_status();
}

Status register_builtin_fusions(FusionRegistry& registry) {
  HXRT_RETURN_IF_ERROR(registry.add({"Conv+BatchNormalization(+Relu)", match_conv_bn_relu}));
  HXRT_RETURN_IF_ERROR(registry.add({"MatMul+Add(+Gelu)", match_matmul_bias}));
  HXRT_RETURN_IF_ERROR(registry.add({"RMSNorm+Mul", match_rms_norm_mul}));
  HXRT_RETURN_IF_ERROR(registry.add({"Silu+Mul (SwiGLU)", match_swiglu}));
  return ok_status();
}

Result<std::vector<FusionGroup>> apply_fusions(graph::Graph& graph, const FusionRegistry& registry,
                                               const FusionOptions& options) {
  HXRT_ASSIGN_OR_RETURN(std::vector<graph::NodeId> order, graph.topological_order());
  std::vector<bool> taken(static_cast<size_t>(graph.num_nodes()), false);
  struct Planned {
    FusionMatch match;
    std::string pattern;
  };
  std::vector<Planned> planned;
  for (graph::NodeId anchor : order) {
    if (taken[static_cast<size_t>(anchor)]) continue;
    for (const FusionPattern& pattern : registry.patterns()) {
      if (options.disabled.count(pattern.name) != 0) continue;
      std::optional<FusionMatch> match = pattern.match(graph, anchor);
      if (!match) continue;
      const bool overlaps = std::any_of(match->nodes.begin(), match->nodes.end(),
                                        [&](graph::NodeId id) { return taken[static_cast<size_t>(id)]; });
      if (overlaps) continue;
      for (graph::NodeId id : match->nodes) taken[static_cast<size_t>(id)] = true;
      planned.push_back({std::move(*match), pattern.name});
      break;
    }
  }

  int32_t next_id = 0;
  for (graph::NodeId id = 0; id < graph.num_nodes(); ++id) {
    next_id = std::max(next_id, graph.node(id).fusion_id + 1);
  }
  std::vector<FusionGroup> groups;
  for (Planned& plan : planned) {
    const graph::Node& last = graph.node(plan.match.nodes.back());
    std::vector<std::string> outputs;
    for (graph::ValueId out : last.outputs) outputs.push_back(graph.value(out).name);
    std::vector<std::string> originals;
    std::vector<graph::NodeId> original_ids;
    for (graph::NodeId id : plan.match.nodes) {
      originals.push_back(graph.node(id).name);
      original_ids.push_back(graph.node(id).stable_id);
    }
    FusionGroup group;
    group.fusion_id = next_id++;
    group.pattern = plan.pattern;
    group.fused_node = fmt::format("{}#fused", originals.front());
    group.original_nodes = originals;
    group.original_ids = original_ids;
    // Remove the chain (last first, so the outputs become free), then add the fused node producing them.
    for (auto it = plan.match.nodes.rbegin(); it != plan.match.nodes.rend(); ++it) {
      HXRT_RETURN_IF_ERROR_CTX(graph.remove_node(*it), "fusing {}", group.fused_node);
    }
    HXRT_ASSIGN_OR_RETURN(graph::NodeId fused,
                          graph.add_node(group.fused_node, plan.match.op_type, plan.match.inputs, outputs,
                                         std::move(plan.match.attrs), std::string(kFusedDomain), 1));
    graph::Node& node = graph.mutable_node(fused);
    node.fusion_id = group.fusion_id;
    node.fused_from = std::move(originals);
    node.fused_ids = std::move(original_ids);
    group.fused_id = node.stable_id;  // fresh: add_node never reuses a stable id (Note [Stable node ids])
    groups.push_back(std::move(group));
  }
  if (!planned.empty()) graph.compact();
  return groups;
}

}  // namespace hxrt::ops
