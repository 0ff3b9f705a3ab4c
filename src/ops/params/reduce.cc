#include "hxrt/ops/params/reduce.h"

#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace hxrt::ops {

namespace {

constexpr std::array<std::string_view, kReduceKinds.size()> kReduceOpTypes = {
    "ReduceL1",   "ReduceL2",  "ReduceLogSum", "ReduceLogSumExp", "ReduceMax",
    "ReduceMean", "ReduceMin", "ReduceProd",   "ReduceSum",       "ReduceSumSquare"};

// A 0/1 attribute.
Result<bool> parse_flag(const graph::Node& node, std::string_view name, bool fallback) {
  Result<int64_t> v = node.attrs.get_int(name, fallback ? 1 : 0);
  if (!v.ok()) return attr_read_error(node, name, v.status());
  if (*v != 0 && *v != 1) return attr_error(node, name, fmt::format("= {} must be 0 or 1", *v));
  return *v == 1;
}

bool has_input(const graph::Node& node, size_t i) {
  return i < node.inputs.size() && node.inputs[i] != graph::kNoValue;
}

}  // namespace

std::string_view reduce_op_type(ReduceKind kind) {
  return kReduceOpTypes[static_cast<size_t>(kind)];
}

std::optional<ReduceKind> reduce_kind_of(std::string_view op_type) {
  for (ReduceKind kind : kReduceKinds) {
    if (reduce_op_type(kind) == op_type) return kind;
  }
  return std::nullopt;
}

ConstantInput constant_input(const graph::Graph& graph, const graph::Node& node, size_t i) {
  if (!has_input(node, i)) return {};
  const graph::Value& value = graph.value(node.inputs[i]);
  return {.present = true, .desc = &value.desc, .weight = value.is_initializer ? &value.weight : nullptr};
}

Result<std::vector<int64_t>> constant_input_ints(const graph::Node& node, const ConstantInput& input,
                                                 std::string_view name) {
  if (!input.present) return std::vector<int64_t>{};
  if (input.weight == nullptr) {
    return invalid_argument("{}: input '{}' must be a constant (an initializer)", node_label(node), name);
  }
  const DType dtype = input.desc->dtype;
  const size_t width = dtype == DType::kI64 ? 8 : dtype == DType::kI32 ? 4 : 0;
  if (width == 0) return invalid_argument("{}: input '{}' must be i32 or i64, got {}", node_label(node), name, dtype);
  if (input.desc->shape.rank() > 1) {
    return invalid_argument("{}: input '{}' {} must have rank 0 or 1", node_label(node), name,
                            input.desc->shape.to_string());
  }
  const graph::WeightData& weight = *input.weight;
  std::vector<int64_t> values(weight.data == nullptr ? 0 : weight.size / width);
  for (size_t k = 0; k < values.size(); ++k) {
    if (width == 8) {
      std::memcpy(&values[k], weight.data + k * 8, 8);
    } else {
      int32_t v = 0;
      std::memcpy(&v, weight.data + k * 4, 4);
      values[k] = v;
    }
  }
  return values;
}

// ---- Reduce* ----

std::string ReduceParams::to_string() const {
  return fmt::format("axes=[{}],keepdims={},noop_with_empty_axes={}", fmt::join(axes, ","), keepdims ? 1 : 0,
                     noop_with_empty_axes ? 1 : 0);
}

Result<ReduceParams> parse_reduce_params(const graph::Graph& graph, const graph::Node& node) {
  return parse_reduce_params(node, constant_input(graph, node, 1));
}

Result<ReduceParams> parse_reduce_params(const graph::Node& node, const ConstantInput& axes) {
  const std::optional<ReduceKind> kind = reduce_kind_of(node.op_type);
  if (!kind) return invalid_argument("{}: not a Reduce op", node_label(node));
  ReduceParams params;
  params.kind = *kind;
  HXRT_ASSIGN_OR_RETURN(params.keepdims, parse_flag(node, "keepdims", true));
  HXRT_ASSIGN_OR_RETURN(params.noop_with_empty_axes, parse_flag(node, "noop_with_empty_axes", false));
  HXRT_ASSIGN_OR_RETURN(params.axes, constant_input_ints(node, axes, "axes"));
  return params;
}

Result<std::vector<bool>> reduced_dims(std::span<const int64_t> axes, bool noop_with_empty_axes, int rank,
                                       std::string_view op) {
  std::vector<bool> reduced(static_cast<size_t>(rank), axes.empty() && !noop_with_empty_axes);
  for (const int64_t axis : axes) {
    if (axis < -rank || axis >= rank) {
      return invalid_argument("{}: axis {} is out of range for rank {} (axes [{}])", op, axis, rank,
                              fmt::join(axes, ", "));
    }
    const auto d = static_cast<size_t>(axis < 0 ? axis + rank : axis);
    if (reduced[d]) return invalid_argument("{}: axis {} appears twice in axes [{}]", op, axis, fmt::join(axes, ", "));
    reduced[d] = true;
  }
  return reduced;
}

Result<ReduceGeometry> reduce_geometry(const Shape& x, const std::vector<bool>& reduced, bool keepdims) {
  const int rank = x.rank();
  if (reduced.size() != static_cast<size_t>(rank)) {
    return invalid_argument("reduce_geometry: {} reduced flags for a rank {} input", reduced.size(), rank);
  }
  const auto strides = x.strides();
  ReduceGeometry g;
  std::vector<int64_t> out_dims;
  // Merged groups (size, stride of the innermost dim, reduced), outermost first.
  struct Group {
    int64_t size, stride;
    bool reduced;
  };
  std::vector<Group> groups;
  for (int d = 0; d < rank; ++d) {
    const auto u = static_cast<size_t>(d);
    const int64_t dim = x.dims()[u];
    if (reduced[u]) {
      g.reduced *= dim;
      if (keepdims) out_dims.push_back(1);
    } else {
      g.outputs *= dim;
      out_dims.push_back(dim);
    }
    if (dim == 1) continue;
    if (!groups.empty() && groups.back().reduced == reduced[u]) {
      groups.back().size *= dim;
      groups.back().stride = strides[u];
    } else {
      groups.push_back({dim, strides[u], reduced[u]});
    }
  }
  HXRT_ASSIGN_OR_RETURN(g.output, Shape::make(out_dims));
  std::vector<const Group*> reduced_groups;
  for (const Group& group : groups) {
    if (group.reduced) {
      reduced_groups.push_back(&group);
    } else {
      g.kept_dims.push_back(group.size);
      g.kept_strides.push_back(group.stride);
    }
  }
  if (g.reduced == 0) {
    g.outer_offsets.clear();
    return g;
  }
  if (!reduced_groups.empty()) {
    g.inner_count = reduced_groups.back()->size;
    g.inner_stride = reduced_groups.back()->stride;
    reduced_groups.pop_back();
  }
  for (const Group* group : reduced_groups) {
    std::vector<int64_t> next;
    next.reserve(g.outer_offsets.size() * static_cast<size_t>(group->size));
    for (const int64_t base : g.outer_offsets) {
      for (int64_t i = 0; i < group->size; ++i) next.push_back(base + i * group->stride);
    }
    g.outer_offsets = std::move(next);
  }
  return g;
}

// ---- ArgMax / ArgMin ----

std::string ArgReduceParams::to_string() const {
  return fmt::format("axis={},keepdims={},select_last_index={}", axis, keepdims ? 1 : 0, select_last_index ? 1 : 0);
}

Result<ArgReduceParams> parse_arg_reduce_params(const graph::Node& node) {
  ArgReduceParams params;
  Result<int64_t> axis = node.attrs.get_int("axis", 0);
  if (!axis.ok()) return attr_read_error(node, "axis", axis.status());
  params.axis = *axis;
  HXRT_ASSIGN_OR_RETURN(params.keepdims, parse_flag(node, "keepdims", true));
  HXRT_ASSIGN_OR_RETURN(params.select_last_index, parse_flag(node, "select_last_index", false));
  return params;
}

// ---- TopK ----

std::string TopKParams::to_string() const {
  return fmt::format("axis={},k={},largest={},sorted={}", axis, k, largest ? 1 : 0, sorted ? 1 : 0);
}

Result<TopKParams> parse_topk_params(const graph::Graph& graph, const graph::Node& node) {
  return parse_topk_params(node, constant_input(graph, node, 1));
}

Result<TopKParams> parse_topk_params(const graph::Node& node, const ConstantInput& k_input) {
  TopKParams params;
  Result<int64_t> axis = node.attrs.get_int("axis", -1);
  if (!axis.ok()) return attr_read_error(node, "axis", axis.status());
  params.axis = *axis;
  HXRT_ASSIGN_OR_RETURN(params.largest, parse_flag(node, "largest", true));
  HXRT_ASSIGN_OR_RETURN(params.sorted, parse_flag(node, "sorted", true));
  if (!k_input.present) return invalid_argument("{}: input 'K' is required", node_label(node));
  HXRT_ASSIGN_OR_RETURN(const std::vector<int64_t> k, constant_input_ints(node, k_input, "K"));
  if (k.size() != 1 || k[0] < 0) {
    return invalid_argument("{}: input 'K' [{}] must hold one value >= 0", node_label(node), fmt::join(k, ", "));
  }
  params.k = k[0];
  return params;
}

}  // namespace hxrt::ops
