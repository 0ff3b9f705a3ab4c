#include "hxrt/ops/params/tensor_ops.h"

#include <algorithm>
#include <array>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace hxrt::ops {

Status check_permutation(std::span<const int64_t> perm, int rank) {
  if (static_cast<int>(perm.size()) != rank) {
    return invalid_argument("perm [{}] has {} entries for rank {}", fmt::join(perm, ", "), perm.size(), rank);
  }
  std::array<bool, Shape::kMaxRank> seen{};
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[static_cast<size_t>(p)]) {
      return invalid_argument("perm [{}] is not a permutation of 0..{}", fmt::join(perm, ", "), rank - 1);
    }
    seen[static_cast<size_t>(p)] = true;
  }
  return ok_status();
}

Shape transposed_shape(const Shape& in, std::span<const int64_t> perm) {
  std::array<int64_t, Shape::kMaxRank> dims{};
  for (size_t i = 0; i < perm.size(); ++i) dims[i] = in.dims()[static_cast<size_t>(perm[i])];
  return Shape::make(std::span<const int64_t>(dims.data(), perm.size())).value();
}

std::string TransposeParams::to_string() const {
  return perm.empty() ? "perm=reverse" : fmt::format("perm=[{}]", fmt::join(perm, ","));
}

Result<TransposeParams> parse_transpose_params(const graph::Node& node) {
  Result<std::vector<int64_t>> perm = node.attrs.get_ints("perm", std::vector<int64_t>{});
  if (!perm.ok()) return attr_read_error(node, "perm", perm.status());
  TransposeParams params;
  params.perm = std::move(perm).value();
  return params;
}

SliceAxis slice_axis(int64_t dim, int64_t start, int64_t end, int64_t step) {
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  SliceAxis axis;
  axis.step = step;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    axis.count = end > start ? (end - start + step - 1) / step : 0;
  } else {
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
    axis.count = start > end ? (start - end + (-step) - 1) / (-step) : 0;
  }
  axis.start = start;
  return axis;
}

std::string SliceParams::to_string() const {
  return fmt::format("starts=[{}],ends=[{}],axes=[{}],steps=[{}]", fmt::join(starts, ","), fmt::join(ends, ","),
                     fmt::join(axes, ","), fmt::join(steps, ","));
}

// The values of node input `i`, an i32 or i64 initializer.
namespace {

Result<std::vector<int64_t>> constant_ints(const graph::Graph& graph, const graph::Node& node, size_t i,
                                           std::string_view name) {
  const graph::Value& value = graph.value(node.inputs[i]);
  if (!value.is_initializer || value.weight.data == nullptr) {
    return invalid_argument("node '{}' (Slice): input '{}' must be a constant (an initializer)", node.name, name);
  }
  const DType dtype = value.desc.dtype;
  const size_t width = dtype == DType::kI64 ? 8 : dtype == DType::kI32 ? 4 : 0;
  if (width == 0)
    return invalid_argument("node '{}' (Slice): input '{}' must be i32 or i64, got {}", node.name, name, dtype);
  std::vector<int64_t> values(value.weight.size / width);
  for (size_t k = 0; k < values.size(); ++k) {
    if (width == 8) {
      std::memcpy(&values[k], value.weight.data + k * 8, 8);
    } else {
      int32_t v = 0;
      std::memcpy(&v, value.weight.data + k * 4, 4);
      values[k] = v;
    }
  }
  return values;
}

bool has_input(const graph::Node& node, size_t i) {
  return i < node.inputs.size() && node.inputs[i] != graph::kNoValue;
}

}  // namespace

Result<SliceParams> parse_slice_params(const graph::Graph& graph, const graph::Node& node) {
  if (!has_input(node, 1) || !has_input(node, 2)) {
    return invalid_argument("node '{}' (Slice): inputs 'starts' and 'ends' are required", node.name);
  }
  SliceParams params;
  HXRT_ASSIGN_OR_RETURN(params.starts, constant_ints(graph, node, 1, "starts"));
  HXRT_ASSIGN_OR_RETURN(params.ends, constant_ints(graph, node, 2, "ends"));
  if (has_input(node, 3)) {
    HXRT_ASSIGN_OR_RETURN(params.axes, constant_ints(graph, node, 3, "axes"));
  } else {
    for (size_t i = 0; i < params.starts.size(); ++i) params.axes.push_back(static_cast<int64_t>(i));
  }
  if (has_input(node, 4)) {
    HXRT_ASSIGN_OR_RETURN(params.steps, constant_ints(graph, node, 4, "steps"));
  } else {
    params.steps.assign(params.starts.size(), 1);
  }
  const size_t count = params.starts.size();
  if (params.ends.size() != count || params.axes.size() != count || params.steps.size() != count) {
    return invalid_argument("node '{}' (Slice): starts, ends, axes and steps have {}, {}, {} and {} values", node.name,
                            count, params.ends.size(), params.axes.size(), params.steps.size());
  }
  return params;
}

size_t element_bytes(DType dtype) {
  const DTypeInfo& info = dtype_info(dtype);
  return info.block_elements == 1 ? info.block_bytes : 0;
}

}  // namespace hxrt::ops
