// 2-D convolution (NCHW) and BatchNormalization (inference) on the CPU.
//
// Conv is im2col + sgemm: the output positions of one (image, group) are cut into column blocks; each pool task
// unfolds its block of input patches into a private buffer ((C/group)·kH·kW × cols) and multiplies the group's
// filters by it, writing straight into Y. A per-channel epilogue (bias, a folded BatchNormalization, Relu) is applied
// to the block while it is still in cache, which is how the fused ConvBnRelu runs in the same launch.
// 1×1 convolutions with unit stride and no padding skip the unfolding and read X in place.
//
// Thread-safety: every function is reentrant.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hxrt/base/shape.h"
#include "hxrt/base/status.h"
#include "hxrt/base/thread_pool.h"
#include "hxrt/graph/attribute.h"
#include "hxrt/ops/kernel_def.h"

namespace hxrt::kernels::cpu {

// ONNX Conv attributes (2-D).
struct ConvAttrs {
  std::vector<int64_t> strides{1, 1};
  std::vector<int64_t> pads{0, 0, 0, 0};  // top, left, bottom, right
  std::vector<int64_t> dilations{1, 1};
  int64_t group = 1;
  std::string auto_pad = "NOTSET";  // NOTSET, SAME_UPPER, SAME_LOWER, VALID
  std::string to_string() const;
};
// Reads and validates the attributes (lengths, positive strides/dilations/group, non-negative pads, auto_pad value).
Result<ConvAttrs> parse_conv_attrs(const graph::AttributeMap& attrs);

// Concrete geometry of one convolution.
struct Conv2dGeometry {
  int64_t n = 0, c = 0, h = 0, w = 0;  // input  [n, c, h, w]
  int64_t m = 0, kh = 0, kw = 0;       // filter [m, c / group, kh, kw]
  int64_t oh = 0, ow = 0;              // output [n, m, oh, ow]
  int64_t group = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t pad_top = 0, pad_left = 0;   // the bottom/right pads only shape oh/ow
  Shape output_shape() const { return Shape{n, m, oh, ow}; }
};
// InvalidArgument naming the shapes when X/W are not 4-D, channels do not match the group, or the output is empty.
Result<Conv2dGeometry> conv2d_geometry(const ConvAttrs& attrs, const Shape& x, const Shape& w);

// Applied per output channel after the convolution: y = (conv + bias[c]) · scale[c] + shift[c], then max(y, 0)
// when relu. Null pointers skip their term.
struct ChannelEpilogue {
  const float* bias = nullptr;
  const float* scale = nullptr;
  const float* shift = nullptr;
  bool relu = false;
};

// Y [n, m, oh, ow] = conv(X [n, c, h, w], W [m, c/group, kh, kw]) with the epilogue; `tile_cols` output positions
// per task. Runs on `pool` when given.
void conv2d_nchw(const Conv2dGeometry& g, const float* x, const float* w, const ChannelEpilogue& epilogue, float* y,
                 int64_t tile_cols, ThreadPool* pool);

// BatchNormalization inference folded to per-channel scale'[c] = scale / sqrt(var + eps), shift'[c] =
// b - mean · scale'.
void batchnorm_fold(int64_t channels, const float* scale, const float* b, const float* mean, const float* var,
                    float epsilon, float* folded_scale, float* folded_shift);
// Y = X · scale'[c] + shift'[c] over X [n, c, inner...] (`inner` elements per channel plane).
void batchnorm_apply(int64_t n, int64_t channels, int64_t inner, const float* x, const float* folded_scale,
                     const float* folded_shift, float* y, ThreadPool* pool);

// Tiling shared with ConvBnRelu: output positions per task.
Result<ops::Tiling> conv_tiling(const ConvAttrs& attrs, const ops::TilingQuery& query);

}  // namespace hxrt::kernels::cpu
