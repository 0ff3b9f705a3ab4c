// Parsed parameters shared by several op families, and the helpers every family's parser uses.
//
// The params of the built-in ops live in this folder, one header per op family (docs/design/adding_an_op.md): each
// is parsed and validated once from a node's attributes (defaults, ranges), and the same parser serves the shape
// inference schemas (src/ops/schemas/) and every backend's kernels (src/kernels/<device>/). Parse errors are
// InvalidArgument naming the node and the attribute: "node 'n' (Op): attribute 'axis' ...".
// Geometry (loop bounds, strides, normalized axes) derived from params and concrete shapes lives beside them.
//
// Thread-safety: params are immutable after parsing; the functions are reentrant.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "hxrt/base/shape.h"
#include "hxrt/base/status.h"
#include "hxrt/graph/graph.h"
#include "hxrt/ops/kernel_def.h"

namespace hxrt::ops {

// "node 'n' (domain.Op)", as the schemas' errors begin.
std::string node_label(const graph::Node& node);
// InvalidArgument "node 'n' (Op): attribute '<attr>' <message>".
Status attr_error(const graph::Node& node, std::string_view attr, std::string_view message);
// InvalidArgument "node 'n' (Op): attribute '<attr>': <why reading it failed>".
Status attr_read_error(const graph::Node& node, std::string_view attr, const Status& status);

// Axis `axis` of a tensor of rank `rank`, negative counting from the end; InvalidArgument naming `op` otherwise.
Result<int> normalize_axis(int64_t axis, int rank, std::string_view op);
// Product of dims [begin, end) of a shape (1 for an empty range).
int64_t dims_product(const Shape& shape, int begin, int end);

// Ops with a single axis attribute: Softmax (default -1), Gather and Concat (default 0 / required).
struct AxisParams final : TypedParams<AxisParams> {
  static constexpr std::string_view kName = "AxisParams";
  int64_t axis = 0;
  std::string to_string() const override;
};
// Reads `axis` (an int; `fallback` when absent, required when `required`).
Result<AxisParams> parse_axis_params(const graph::Node& node, int64_t fallback, bool required = false);

// Ops with a single epsilon attribute: RMSNorm, RMSNormMul, BatchNormalization (default 1e-5, must be >= 0).
struct EpsilonParams final : TypedParams<EpsilonParams> {
  static constexpr std::string_view kName = "EpsilonParams";
  float epsilon = 1e-5f;
  std::string to_string() const override;
};
Result<float> parse_epsilon(const graph::Node& node);
Result<EpsilonParams> parse_epsilon_params(const graph::Node& node);

// Ops without attributes (MatMul, Reshape, ...), so that every kernel's params have a type.
struct NoParams final : TypedParams<NoParams> {
  static constexpr std::string_view kName = "NoParams";
};

// Moves parsed params into the KernelParams a ParseAttrsFn returns.
template <typename T>
Result<std::unique_ptr<KernelParams>> boxed(Result<T> params) {
  if (!params.ok()) return params.status();
  return std::unique_ptr<KernelParams>(std::make_unique<T>(std::move(params).value()));
}
template <typename T>
std::unique_ptr<KernelParams> boxed(T params) {
  return std::make_unique<T>(std::move(params));
}

}  // namespace hxrt::ops
