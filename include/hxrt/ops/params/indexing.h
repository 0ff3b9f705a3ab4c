// Params of the indexing and data-dependent ops (docs/onnx_ops/indexing.md): GatherElements (AxisParams, common.h),
// GatherND, ScatterElements / ScatterND, Compress, NonZero (NoParams), Unique and ReverseSequence; and the
// algorithms that decide the output shapes of the data-dependent ops (Compress, NonZero, Unique), shared by the
// schemas (which run them on constant inputs while planning) and the kernels (which run them on the bound data), so
// that both agree by construction.
//
// Thread-safety: params are immutable after parsing; the functions are reentrant.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
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

// ---- GatherND ----
struct GatherNDParams final : TypedParams<GatherNDParams> {
  static constexpr std::string_view kName = "GatherNDParams";
  int64_t batch_dims = 0;  // >= 0: leading dims shared by data and indices
  std::string to_string() const override;
};
Result<GatherNDParams> parse_gather_nd_params(const graph::Node& node);

// ---- ScatterElements, ScatterND ----
enum class ScatterReduction : uint8_t { kNone, kAdd, kMul };
std::string_view scatter_reduction_name(ScatterReduction reduction);  // "none", "add", "mul"

struct ScatterParams final : TypedParams<ScatterParams> {
  static constexpr std::string_view kName = "ScatterParams";
  int64_t axis = 0;  // ScatterElements only (ScatterND has no axis)
  ScatterReduction reduction = ScatterReduction::kNone;
  std::string to_string() const override;
};
// Reads `reduction` ("none" default, "add", "mul") and, when `with_axis`, `axis` (default 0).
Result<ScatterParams> parse_scatter_params(const graph::Node& node, bool with_axis);

// ---- Compress ----
struct CompressParams final : TypedParams<CompressParams> {
  static constexpr std::string_view kName = "CompressParams";
  std::optional<int64_t> axis;  // absent: select from the flattened input
  std::string to_string() const override;
};
Result<CompressParams> parse_compress_params(const graph::Node& node);
// The positions in [0, length) that `condition` (n bool bytes) selects. Entries past `length` must be false
// (InvalidArgument naming the position otherwise); a shorter condition selects nothing past its end.
Result<std::vector<int64_t>> compress_selection(std::span<const std::byte> condition, int64_t length);

// ---- NonZero ----
// True when the element at `element` (of `dtype`, a plain non-quantized dtype) is not zero; -0.0 is zero.
bool element_is_nonzero(DType dtype, const std::byte* element);
// Flat positions of the non-zero elements of `n` elements of `dtype`, in row-major order.
std::vector<int64_t> nonzero_positions(DType dtype, const std::byte* data, int64_t n);

// ---- Unique ----
struct UniqueParams final : TypedParams<UniqueParams> {
  static constexpr std::string_view kName = "UniqueParams";
  std::optional<int64_t> axis;  // absent: unique elements of the flattened input
  bool sorted = true;           // ascending (lexicographic for slices); else in order of first occurrence
  std::string to_string() const override;
};
Result<UniqueParams> parse_unique_params(const graph::Node& node);

// Unique over the slices of a tensor viewed as [outer, count, inner] (count slices of outer x inner elements,
// compared element by element in row-major order): what the four outputs of Unique hold.
struct UniqueResult {
  std::vector<int64_t> first;    // (n_unique) index of each unique slice's first occurrence, in output order
  std::vector<int64_t> inverse;  // (count) output position of each input slice
  std::vector<int64_t> counts;   // (n_unique) occurrences of each unique slice
};
// The dtype must be f32, f16, bf16, i8, u8, i32, i64 or bool (InvalidArgument otherwise). Floats compare by value.
Result<UniqueResult> unique_slices(DType dtype, const std::byte* data, int64_t outer, int64_t count, int64_t inner,
                                   bool sorted);

// ---- ReverseSequence ----
struct ReverseSequenceParams final : TypedParams<ReverseSequenceParams> {
  static constexpr std::string_view kName = "ReverseSequenceParams";
  int64_t batch_axis = 1;  // 0 or 1, differing from time_axis
  int64_t time_axis = 0;
  std::string to_string() const override;
};
Result<ReverseSequenceParams> parse_reverse_sequence_params(const graph::Node& node);

}  // namespace hxrt::ops
