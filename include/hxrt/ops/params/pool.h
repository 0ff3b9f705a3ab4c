// Params and geometry of the pooling and resampling ops (docs/onnx_ops/pool.md): AveragePool, MaxPool, MaxUnpool,
// GlobalAveragePool, GlobalMaxPool (no params), Resize, GridSample and RoiAlign. ConvTranspose is in conv.h.
//
// Note [Spatial dims padded to three]
// The pooling geometries describe 1-D, 2-D and 3-D windows the same way: the spatial dims are right-aligned in three
// slots and the missing leading ones are 1 (kernel 1, stride 1, dilation 1, no pads). A kernel loops over three
// spatial dims whatever the rank; a column-major index (MaxPool's storage_order 1) over the padded dims equals the
// one over the real dims, since the leading dims have extent 1.
//
// Thread-safety: params are immutable after parsing; the functions are reentrant.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hxrt/base/shape.h"
#include "hxrt/base/status.h"
#include "hxrt/graph/graph.h"
#include "hxrt/ops/params/common.h"

namespace hxrt::ops {

inline constexpr int kMaxPoolSpatialDims = 3;
using SpatialDims = std::array<int64_t, kMaxPoolSpatialDims>;

// AveragePool (11), MaxPool (12), MaxUnpool (11): the window over the spatial dims of X [N, C, D1, ..., Dk].
struct PoolParams final : TypedParams<PoolParams> {
  static constexpr std::string_view kName = "PoolParams";
  std::vector<int64_t> kernel_shape;  // k values, >= 1 (required)
  std::vector<int64_t> strides;       // k values, >= 1 (default 1)
  std::vector<int64_t> pads;          // 2k values, >= 0: begins then ends (default 0)
  std::vector<int64_t> dilations;     // k values, >= 1 (default 1; AveragePool-11 has none)
  std::string auto_pad = "NOTSET";    // NOTSET, SAME_UPPER, SAME_LOWER, VALID
  bool ceil_mode = false;
  bool count_include_pad = false;  // AveragePool: explicit pads count in the divisor
  int64_t storage_order = 0;       // MaxPool's Indices: 0 row-major, 1 column-major
  std::string to_string() const override;
};
// Reads and validates the attributes (kernel_shape required with 1 to 3 values; the other lists' lengths follow it);
// errors name the node and the attribute.
Result<PoolParams> parse_pool_params(const graph::Node& node);

// Pads and output extent of one spatial axis of a pooling window.
struct PoolAxis {
  int64_t out = 0;
  int64_t pad_begin = 0;
  int64_t pad_end = 0;
};
// ONNX's output extent of axis `axis` of extent `in`: floor (or ceil with ceil_mode, dropping a last window that
// would start in the end padding) of (in + pads - dilated kernel) / stride + 1; ceil(in / stride) for SAME_*, with
// the total pad split as auto_pad says (the odd one at the end for SAME_UPPER). InvalidArgument when the dilated
// kernel is larger than the padded input.
Result<PoolAxis> pool_axis(const PoolParams& params, size_t axis, int64_t in);

// Concrete geometry of one pooling (Note [Spatial dims padded to three]).
struct PoolGeometry final : TypedGeometry<PoolGeometry> {
  static constexpr std::string_view kName = "PoolGeometry";
  int64_t planes = 0;  // N · C
  SpatialDims in{1, 1, 1}, out{1, 1, 1}, kernel{1, 1, 1}, stride{1, 1, 1}, dilation{1, 1, 1};
  SpatialDims pad_begin{0, 0, 0}, pad_end{0, 0, 0};
  Shape output_shape;  // [N, C, out...]
};
// InvalidArgument naming the shape when X's rank is not 2 + kernel_shape's length, or an axis fails pool_axis.
Result<PoolGeometry> pool_geometry(const PoolParams& params, const Shape& x);

// Resize (13).
struct ResizeParams final : TypedParams<ResizeParams> {
  static constexpr std::string_view kName = "ResizeParams";
  enum class Mode : uint8_t { kNearest, kLinear, kCubic };
  Mode mode = Mode::kNearest;
  // half_pixel, pytorch_half_pixel, align_corners, asymmetric, tf_crop_and_resize, and tf_half_pixel_for_nn
  // (Resize-11's, kept so the opset-11 converter can emit it).
  std::string coordinate_transformation_mode = "half_pixel";
  std::string nearest_mode = "round_prefer_floor";  // round_prefer_floor, round_prefer_ceil, floor, ceil
  double cubic_coeff_a = -0.75;
  bool exclude_outside = false;
  double extrapolation_value = 0.0;
  std::string to_string() const override;
};
Result<ResizeParams> parse_resize_params(const graph::Node& node);

// Output shape and per-axis scales of a Resize of X `x`: from `sizes` when not empty (scale = out / in), else from
// `scales` (out = floor(in · scale)). InvalidArgument when neither or both are given, a length differs from X's
// rank, or a scale is not positive.
struct ResizeShape {
  Shape output;
  std::vector<double> scales;  // one per axis
};
Result<ResizeShape> resize_shape(const Shape& x, std::span<const double> scales, std::span<const int64_t> sizes);

// GridSample (16).
struct GridSampleParams final : TypedParams<GridSampleParams> {
  static constexpr std::string_view kName = "GridSampleParams";
  enum class Mode : uint8_t { kBilinear, kNearest, kBicubic };
  enum class Padding : uint8_t { kZeros, kBorder, kReflection };
  Mode mode = Mode::kBilinear;
  Padding padding_mode = Padding::kZeros;
  bool align_corners = false;
  std::string to_string() const override;
};
Result<GridSampleParams> parse_grid_sample_params(const graph::Node& node);

// RoiAlign (16).
struct RoiAlignParams final : TypedParams<RoiAlignParams> {
  static constexpr std::string_view kName = "RoiAlignParams";
  bool half_pixel = true;  // coordinate_transformation_mode: half_pixel (true) or output_half_pixel
  bool max_mode = false;   // mode: avg (false) or max
  int64_t output_height = 1;
  int64_t output_width = 1;
  int64_t sampling_ratio = 0;  // 0: ceil(roi extent / output extent) samples per bin and axis
  float spatial_scale = 1.0f;
  std::string to_string() const override;
};
Result<RoiAlignParams> parse_roi_align_params(const graph::Node& node);

}  // namespace hxrt::ops
