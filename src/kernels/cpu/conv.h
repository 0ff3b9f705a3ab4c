// 2-D convolution (NCHW) and BatchNormalization (inference) on the CPU.
//
// Conv is im2col + sgemm: the output positions of one (image, group) are cut into column blocks; each pool task
// unfolds its block of input patches into a private buffer ((C/group)·kH·kW × cols) and multiplies the group's
// filters by it, writing straight into Y. A per-channel epilogue (bias, a folded BatchNormalization, Relu) is applied
// to the block while it is still in cache, which is how the fused ConvBnRelu runs in the same launch.
// 1×1 convolutions with unit stride and no padding skip the unfolding and read X in place; depthwise convolutions
// (one input and one output channel per group) are computed directly (Note [Depthwise convolution] in conv.cc).
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
#include "hxrt/ops/params/conv.h"

namespace hxrt::kernels::cpu {

// Conv's params and geometry are the op's (hxrt/ops/params/conv.h).
using ops::Conv2dGeometry;

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
Result<ops::Tiling> conv_tiling(const ops::ConvParams& params, const ops::TilingQuery& query);

}  // namespace hxrt::kernels::cpu
