// Fused CPU kernels (domain hxrt.fused): ConvBnRelu, MatMulBias, RMSNormMul, SwiGLU. Each runs as one launch that
// writes its output once, with no intermediate tensor: the epilogues (bias, activation, folded BatchNormalization,
// Relu) are applied to each output tile by the task that computed it, while the tile is still in cache.
//
// Thread-safety: every function is reentrant.
#pragma once

#include <cstdint>
#include <string_view>

#include "hxrt/base/status.h"
#include "hxrt/base/thread_pool.h"
#include "hxrt/ops/params/linear.h"

namespace hxrt::kernels::cpu {

// Activation and activation_from_name are MatMulBias's (hxrt/ops/params/linear.h).
using ops::Activation;
using ops::activation_from_name;
// c[rows, n] = act(c + bias[n]) in place, rows ldc apart.
void bias_activation(float* c, int64_t rows, int64_t n, int64_t ldc, const float* bias, Activation activation);

// y[rows, d] = x / sqrt(mean(x², row) + epsilon) · weight[d].
void rmsnorm_mul(const float* x, const float* weight, int64_t rows, int64_t d, float epsilon, float* y,
                 ThreadPool* pool);

// y[i] = silu(gate[i]) · up[i] = gate / (1 + exp(-gate)) · up.
void swiglu(const float* gate, const float* up, int64_t count, float* y, ThreadPool* pool);

}  // namespace hxrt::kernels::cpu
