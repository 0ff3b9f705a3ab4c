// Params and geometry of the convolution ops (docs/ops.md, "Convolution"): Conv (2-D, NCHW), the fused ConvBnRelu,
// BatchNormalization (EpsilonParams, common.h) and ConvTranspose (1-D to 3-D, docs/onnx_ops/pool.md).
//
// Thread-safety: params are immutable after parsing; the functions are reentrant.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hxrt/base/shape.h"
#include "hxrt/base/status.h"
#include "hxrt/graph/attribute.h"
#include "hxrt/graph/graph.h"
#include "hxrt/ops/params/common.h"
#include "hxrt/ops/params/pool.h"

namespace hxrt::ops {

// ONNX Conv attributes (2-D).
struct ConvParams final : TypedParams<ConvParams> {
  static constexpr std::string_view kName = "ConvParams";
  std::vector<int64_t> strides{1, 1};
  std::vector<int64_t> pads{0, 0, 0, 0};  // top, left, bottom, right
  std::vector<int64_t> dilations{1, 1};
  int64_t group = 1;
  std::string auto_pad = "NOTSET";  // NOTSET, SAME_UPPER, SAME_LOWER, VALID
  std::string to_string() const override;
};
// Reads and validates the attributes (lengths, positive strides/dilations/group, non-negative pads, auto_pad value);
// errors name the node and the attribute. kernel_shape is not read: kernels take the kernel size from W (the schema
// cross-checks the two).
Result<ConvParams> parse_conv_params(const graph::Node& node);
// Int-list attribute `name` of a 2-D Conv (default `fallback`): exactly `length` values, each >= `minimum`.
Result<std::vector<int64_t>> parse_conv_ints(const graph::Node& node, std::string_view name,
                                             std::vector<int64_t> fallback, size_t length, int64_t minimum);

// ConvBnRelu (hxrt.fused): Conv's attributes, the folded BatchNormalization's epsilon and the relu flag.
struct ConvBnReluParams final : TypedParams<ConvBnReluParams> {
  static constexpr std::string_view kName = "ConvBnReluParams";
  ConvParams conv;
  float epsilon = 1e-5f;
  bool relu = true;
  std::string to_string() const override;
};
Result<ConvBnReluParams> parse_conv_bn_relu_params(const graph::Node& node);

// Concrete geometry of one convolution.
struct Conv2dGeometry final : TypedGeometry<Conv2dGeometry> {
  static constexpr std::string_view kName = "Conv2dGeometry";
  int64_t n = 0, c = 0, h = 0, w = 0;  // input  [n, c, h, w]
  int64_t m = 0, kh = 0, kw = 0;       // filter [m, c / group, kh, kw]
  int64_t oh = 0, ow = 0;              // output [n, m, oh, ow]
  int64_t group = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t pad_top = 0, pad_left = 0;  // the bottom/right pads only shape oh/ow
  Shape output_shape() const { return Shape{n, m, oh, ow}; }
};
// InvalidArgument naming the shapes when X/W are not 4-D, channels do not match the group, or the output is empty.
Result<Conv2dGeometry> conv2d_geometry(const ConvParams& attrs, const Shape& x, const Shape& w);

// ONNX ConvTranspose attributes (11). The lists are empty when absent (their defaults depend on the spatial rank,
// which only X and W tell); when present their lengths agree with each other.
struct ConvTransposeParams final : TypedParams<ConvTransposeParams> {
  static constexpr std::string_view kName = "ConvTransposeParams";
  std::vector<int64_t> kernel_shape;    // k values >= 1; cross-checked with W
  std::vector<int64_t> strides;         // k values >= 1 (default 1)
  std::vector<int64_t> pads;            // 2k values >= 0: begins then ends (default 0)
  std::vector<int64_t> dilations;       // k values >= 1 (default 1)
  std::vector<int64_t> output_padding;  // k values >= 0 (default 0)
  std::vector<int64_t> output_shape;    // k (or 2 + k) values >= 0: the output's spatial extents; pads follow
  int64_t group = 1;
  std::string auto_pad = "NOTSET";  // NOTSET, SAME_UPPER, SAME_LOWER, VALID
  std::string to_string() const override;
};
Result<ConvTransposeParams> parse_conv_transpose_params(const graph::Node& node);

// Concrete geometry of one transposed convolution (Note [Spatial dims padded to three], pool.h):
// X [n, c, in...], W [c, m / group, kernel...], Y [n, m, out...]; y[o] gathers x[i] · w[k] for o = i·stride +
// k·dilation - pad_begin.
struct ConvTransposeGeometry final : TypedGeometry<ConvTransposeGeometry> {
  static constexpr std::string_view kName = "ConvTransposeGeometry";
  int64_t n = 0, c = 0, m = 0, group = 1;
  SpatialDims in{1, 1, 1}, out{1, 1, 1}, kernel{1, 1, 1}, stride{1, 1, 1}, dilation{1, 1, 1}, pad_begin{0, 0, 0};
  Shape output_shape;
};
// The output extent of each spatial axis: output_shape when given (its total padding stride·(in - 1) +
// output_padding + dilated kernel - out split with floor halves: the smaller half first for SAME_UPPER, last
// otherwise), else stride·(in - 1) + output_padding + dilated kernel - pads (in·stride for SAME_*). InvalidArgument
// naming the shapes when ranks or channels disagree or an extent is not positive.
Result<ConvTransposeGeometry> conv_transpose_geometry(const ConvTransposeParams& params, const Shape& x,
                                                      const Shape& w);

}  // namespace hxrt::ops
