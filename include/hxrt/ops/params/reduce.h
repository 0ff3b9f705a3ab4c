// Params and geometry of the reductions (docs/onnx_ops/reduce.md): the ten Reduce* ops (ReduceParams), ArgMax /
// ArgMin (ArgReduceParams) and TopK (TopKParams).
//
// Values that decide output shapes (Reduce's `axes`, TopK's `K`) are constant inputs: the parsers read them from
// the node's initializers, so shape inference and the kernels see the same numbers.
//
// Thread-safety: params are immutable after parsing; the functions are reentrant.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hxrt/base/shape.h"
#include "hxrt/base/status.h"
#include "hxrt/graph/graph.h"
#include "hxrt/ops/params/common.h"

namespace hxrt::ops {

// A node input whose values the parsers read: its desc and, when it is an initializer, its bytes.
struct ConstantInput {
  bool present = false;  // false for an omitted optional input
  const graph::TensorDesc* desc = nullptr;
  const graph::WeightData* weight = nullptr;  // null when the input is not a constant
};
// Input `i` of `node` in `graph`.
ConstantInput constant_input(const graph::Graph& graph, const graph::Node& node, size_t i);
// Its values, i32/i64 of rank <= 1 (an empty one gives none); InvalidArgument naming the node and `name` when it is
// not a constant.
Result<std::vector<int64_t>> constant_input_ints(const graph::Node& node, const ConstantInput& input,
                                                 std::string_view name);

// ---- Reduce* ----
enum class ReduceKind : uint8_t { kL1, kL2, kLogSum, kLogSumExp, kMax, kMean, kMin, kProd, kSum, kSumSquare };
inline constexpr std::array<ReduceKind, 10> kReduceKinds = {
    ReduceKind::kL1,   ReduceKind::kL2,  ReduceKind::kLogSum, ReduceKind::kLogSumExp, ReduceKind::kMax,
    ReduceKind::kMean, ReduceKind::kMin, ReduceKind::kProd,   ReduceKind::kSum,       ReduceKind::kSumSquare};
// The op type: "ReduceL1" ... "ReduceSumSquare".
std::string_view reduce_op_type(ReduceKind kind);
// The kind of a Reduce* op type; nullopt for another op.
std::optional<ReduceKind> reduce_kind_of(std::string_view op_type);

struct ReduceParams final : TypedParams<ReduceParams> {
  static constexpr std::string_view kName = "ReduceParams";
  ReduceKind kind = ReduceKind::kSum;
  bool keepdims = true;
  bool noop_with_empty_axes = false;
  std::vector<int64_t> axes;  // from the constant input 'axes'; empty when omitted or empty
  std::string to_string() const override;
};
// Reads keepdims, noop_with_empty_axes and the constant input 'axes' (InvalidArgument naming it when it is not a
// constant). The first form serves shape inference (InferenceContext), the second the kernels.
Result<ReduceParams> parse_reduce_params(const graph::Node& node, const ConstantInput& axes);
Result<ReduceParams> parse_reduce_params(const graph::Graph& graph, const graph::Node& node);

// Which dims of a tensor of rank `rank` are reduced: every dim when `axes` is empty (none when
// noop_with_empty_axes); InvalidArgument naming `op` for an axis out of range or repeated.
Result<std::vector<bool>> reduced_dims(std::span<const int64_t> axes, bool noop_with_empty_axes, int rank,
                                       std::string_view op);

// Note [Reduction by offsets]
// A reduction over any set of axes first merges X's adjacent dims that are both reduced or both kept (and drops
// dims of 1), so [5, 7, 3] over axes {0, 2} is groups 5 (reduced), 7 (kept), 3 (reduced) and [2, 3, 4] over {1, 2}
// is 2 (kept), 12 (reduced). Output o starts at kept_offset(o) in X; the elements folded into it are, for every
// offset in outer_offsets (the reduced groups but the innermost, {0} when there is no other), inner_count elements
// inner_stride apart (the innermost reduced group: contiguous when the last axis is reduced). The offset list is
// built once per shape (tiling) and stays small: it never covers the innermost reduced group.
// MeanVarianceNormalization uses the same geometry.
struct ReduceGeometry final : TypedGeometry<ReduceGeometry> {
  static constexpr std::string_view kName = "ReduceGeometry";
  Shape output;                                  // keepdims applied
  int64_t outputs = 1;                           // output elements
  int64_t reduced = 1;                           // elements folded into each output
  std::vector<int64_t> kept_dims, kept_strides;  // merged kept groups of X, outermost first
  std::vector<int64_t> outer_offsets = {0};      // empty when `reduced` is 0
  int64_t inner_count = 1, inner_stride = 1;

  // Offset in X of the first element of output o (o < outputs).
  int64_t kept_offset(int64_t o) const {
    int64_t offset = 0;
    for (size_t d = kept_dims.size(); d-- > 0;) {
      offset += (o % kept_dims[d]) * kept_strides[d];
      o /= kept_dims[d];
    }
    return offset;
  }
  // Calls f(offset) for the offset in X of every element folded into the output at `base` (= kept_offset(o)).
  template <typename F>
  void for_each_reduced(int64_t base, F&& f) const {
    for (const int64_t outer : outer_offsets) {
      const int64_t start = base + outer;
      for (int64_t j = 0; j < inner_count; ++j) f(start + j * inner_stride);
    }
  }
};
// `reduced` from reduced_dims(); InvalidArgument when the output shape is invalid.
Result<ReduceGeometry> reduce_geometry(const Shape& x, const std::vector<bool>& reduced, bool keepdims);

// ---- ArgMax / ArgMin ----
struct ArgReduceParams final : TypedParams<ArgReduceParams> {
  static constexpr std::string_view kName = "ArgReduceParams";
  int64_t axis = 0;
  bool keepdims = true;
  bool select_last_index = false;
  std::string to_string() const override;
};
Result<ArgReduceParams> parse_arg_reduce_params(const graph::Node& node);

// ---- TopK ----
struct TopKParams final : TypedParams<TopKParams> {
  static constexpr std::string_view kName = "TopKParams";
  int64_t axis = -1;
  int64_t k = 0;  // from the constant input 'K' ([1], i64), >= 0
  bool largest = true;
  bool sorted = true;
  std::string to_string() const override;
};
Result<TopKParams> parse_topk_params(const graph::Node& node, const ConstantInput& k);
Result<TopKParams> parse_topk_params(const graph::Graph& graph, const graph::Node& node);

}  // namespace hxrt::ops
