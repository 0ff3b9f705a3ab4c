// CPU pooling and resampling (docs/onnx_ops/pool.md): plain functions over pointers, shared by the kernels in
// pool.cc and by tests.
//
// Thread-safety: the functions are reentrant; those taking a ThreadPool split their work over it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "hxrt/base/shape.h"
#include "hxrt/base/thread_pool.h"
#include "hxrt/ops/params/pool.h"

namespace hxrt::kernels::cpu {

// Average or max pooling of x [planes, in...] into y [planes, out...] (geometry `g`). `indices` (max only; may be
// null) receives the flat index into x of each maximum: the plane's offset plus the row-major (storage_order 0)
// or column-major (1) index of the position in the plane. T: float (average and max), int8_t or uint8_t (max).
template <typename T>
void pool_nd(const ops::PoolGeometry& g, bool max, bool count_include_pad, int64_t storage_order, const T* x, T* y,
             int64_t* indices, ThreadPool* pool);

// One axis of a Resize: for each output position, `width` taps of (input index, weight), or `outside` when the
// position maps outside the input (tf_crop_and_resize: the output is extrapolation_value).
struct ResizeAxis {
  int width = 1;
  std::vector<int64_t> index;    // [out, width], clamped to [0, in)
  std::vector<double> weight;    // [out, width]
  std::vector<uint8_t> outside;  // [out]
};
// The taps of axis `axis` of extent `in` resized to `out` with `scale`; `roi` is empty or [2 · rank] (starts, ends).
ResizeAxis resize_axis(const ops::ResizeParams& params, int64_t in, int64_t out, double scale, size_t axis, size_t rank,
                       std::span<const double> roi);

// Resize of x (shape `in`) into y (shape `out`) with the axes' taps.
void resize_nd(const Shape& in, const Shape& out, std::span<const ResizeAxis> axes, float extrapolation_value,
               const float* x, float* y, ThreadPool* pool);

}  // namespace hxrt::kernels::cpu
