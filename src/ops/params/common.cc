#include "hxrt/ops/params/common.h"

#include <fmt/format.h>

namespace hxrt::ops {

std::string node_label(const graph::Node& node) {
  return fmt::format("node '{}' ({}{}{})", node.name, node.domain, node.domain.empty() ? "" : ".", node.op_type);
}

Status attr_error(const graph::Node& node, std::string_view attr, std::string_view message) {
  return invalid_argument("{}: attribute '{}' {}", node_label(node), attr, message);
}

Status attr_read_error(const graph::Node& node, std::string_view attr, const Status& status) {
  return invalid_argument("{}: attribute '{}': {}", node_label(node), attr, status.message());
}

Result<int> normalize_axis(int64_t axis, int rank, std::string_view op) {
  if (axis < -rank || axis >= rank) return invalid_argument("{}: axis {} out of range for rank {}", op, axis, rank);
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

int64_t dims_product(const Shape& shape, int begin, int end) {
  int64_t p = 1;
  for (int d = begin; d < end; ++d) p *= shape.dims()[static_cast<size_t>(d)];
  return p;
}

std::string AxisParams::to_string() const {
  return fmt::format("axis={}", axis);
}

Result<AxisParams> parse_axis_params(const graph::Node& node, int64_t fallback, bool required) {
  Result<int64_t> axis = required ? node.attrs.get_int("axis") : node.attrs.get_int("axis", fallback);
  if (!axis.ok()) return attr_read_error(node, "axis", axis.status());
  AxisParams params;
  params.axis = *axis;
  return params;
}

std::string EpsilonParams::to_string() const {
  return fmt::format("epsilon={}", epsilon);
}

Result<float> parse_epsilon(const graph::Node& node) {
  Result<double> eps = node.attrs.get_float("epsilon", 1e-5);
  if (!eps.ok()) return attr_read_error(node, "epsilon", eps.status());
  if (!(*eps >= 0.0)) return attr_error(node, "epsilon", fmt::format("= {} must be >= 0", *eps));
  return static_cast<float>(*eps);
}

Result<EpsilonParams> parse_epsilon_params(const graph::Node& node) {
  EpsilonParams params;
  HXRT_ASSIGN_OR_RETURN(params.epsilon, parse_epsilon(node));
  return params;
}

}  // namespace hxrt::ops
