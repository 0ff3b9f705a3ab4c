// CPU unary math ops and activations (docs/onnx_ops/math.md), over plain pointers so tests and fused kernels can
// call them directly; register_math() (registration.h) registers one kernel per op of unary_math_ops().
//
// Thread-safety: pure functions; safe from any thread. y may alias x exactly when the dtypes match.
#pragma once

#include <cstdint>

#include "hxrt/base/dtype.h"
#include "hxrt/base/status.h"
#include "hxrt/ops/params/math.h"

namespace hxrt::kernels::cpu {

// y[i] = op(x[i]) for i < n. x has `dtype` (f32; also i32/i64 for Abs, Neg, Sign; bool for Not); y has the same
// dtype, or bool for IsInf and IsNaN. InvalidArgument naming the op when it does not take `dtype`.
Status unary_math(const ops::UnaryMathParams& params, DType dtype, const void* x, void* y, int64_t n);

}  // namespace hxrt::kernels::cpu
