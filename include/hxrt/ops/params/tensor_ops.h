// Params and geometry of the tensor-movement ops (docs/ops.md, "Tensor movement"): Gather and Concat
// (AxisParams, common.h), Transpose and Slice; Reshape has none (NoParams).
//
// Thread-safety: params are immutable after parsing; the functions are reentrant.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hxrt/base/dtype.h"
#include "hxrt/base/shape.h"
#include "hxrt/base/status.h"
#include "hxrt/graph/graph.h"
#include "hxrt/ops/params/common.h"

namespace hxrt::ops {

// ---- Transpose ----
struct TransposeParams final : TypedParams<TransposeParams> {
  static constexpr std::string_view kName = "TransposeParams";
  std::vector<int64_t> perm;  // empty = reverse the dims
  std::string to_string() const override;
};
Result<TransposeParams> parse_transpose_params(const graph::Node& node);
// InvalidArgument unless perm is a permutation of [0, rank).
Status check_permutation(std::span<const int64_t> perm, int rank);
// output dim i = input dim perm[i]; perm must be valid.
Shape transposed_shape(const Shape& in, std::span<const int64_t> perm);

// ---- Slice (ONNX-13) ----
struct SliceAxis {
  int64_t start = 0;  // first source index read
  int64_t step = 1;
  int64_t count = 0;  // output length
};
// Clamps start and end as ONNX does for an axis of `dim` elements (negative values count from the end; step > 0
// clamps to [0, dim], step < 0 to [-1, dim - 1]). step must be non-zero.
SliceAxis slice_axis(int64_t dim, int64_t start, int64_t end, int64_t step);

// Slice's starts/ends/axes/steps when they are constants (initializers), read once when the plan is built; for
// kernels that cannot read them at run time (OpenCL).
struct SliceParams final : TypedParams<SliceParams> {
  static constexpr std::string_view kName = "SliceParams";
  std::vector<int64_t> starts, ends, axes, steps;  // axes and steps filled with their defaults
  std::string to_string() const override;
};
// InvalidArgument naming the node when an input is not an i32/i64 initializer or the counts differ.
Result<SliceParams> parse_slice_params(const graph::Graph& graph, const graph::Node& node);

// Bytes per element of a plain (non-block) dtype; 0 for block-quantized dtypes.
size_t element_bytes(DType dtype);

}  // namespace hxrt::ops
