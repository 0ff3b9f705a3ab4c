// OpenCL normalization kernels: the OpenCL C of RMSNorm (and the fused RMSNormMul), Softmax, LayerNormalization and
// RoPE that the shared launch code in kernels/jit/normalization.cc runs (its comment has the geometry and numerics).
#include <memory>
#include <string_view>

#include "kernels/opencl/jit_program.h"
#include "kernels/opencl/registration.h"

namespace hxrt::kernels::opencl {
namespace {

constexpr std::string_view kSource = R"CLC(
#ifndef WG
#define WG 64
#endif
#ifndef HAS_WEIGHT
#define HAS_WEIGHT 1
#endif
#ifndef NEOX
#define NEOX 0
#endif
#ifndef POS_I64
#define POS_I64 0
#endif

// partial[0] = the sum of partial[0..WG); every work-item of the group must call it.
inline void reduce_sum(__local acc_t* partial) {
  const int lid = get_local_id(0);
  for (int stride = WG / 2; stride > 0; stride /= 2) {
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < stride) partial[lid] += partial[lid + stride];
  }
  barrier(CLK_LOCAL_MEM_FENCE);
}

// y[row, :] = x[row, :] / sqrt(mean(x²) + epsilon) (· weight when HAS_WEIGHT); one group per row.
__kernel void rms_norm(__global const uchar* x_buf, ulong x_off, __global const uchar* w_buf, ulong w_off,
                       __global uchar* y_buf, ulong y_off, int d, float epsilon) {
  __local acc_t partial[WG];
  const int lid = get_local_id(0);
  const long row = get_group_id(0);
  __global const float* x = HX_AT(const float, x_buf, x_off) + row * d;
  __global float* y = HX_AT(float, y_buf, y_off) + row * d;
  acc_t sum = 0;
  for (int i = lid; i < d; i += WG) {
    const acc_t v = x[i];
    sum += v * v;
  }
  partial[lid] = sum;
  reduce_sum(partial);
  const float inv = (float)((acc_t)1 / sqrt(partial[0] / (acc_t)d + (acc_t)epsilon));
#if HAS_WEIGHT
  __global const float* w = HX_AT(const float, w_buf, w_off);
  for (int i = lid; i < d; i += WG) y[i] = x[i] * inv * w[i];
#else
  for (int i = lid; i < d; i += WG) y[i] = x[i] * inv;
#endif
}

// LayerNormalization over rows of d values: mean, then the sum of squared deviations (two passes, in acc_t, as the
// CPU's layer_norm_row), y = (x - mean) · inv · scale (+ bias); one group per row.
__kernel void layer_norm(__global const uchar* x_buf, ulong x_off, __global const uchar* s_buf, ulong s_off,
                         __global const uchar* b_buf, ulong b_off, __global uchar* y_buf, ulong y_off, int d,
                         float epsilon, int has_bias) {
  __local acc_t partial[WG];
  const int lid = get_local_id(0);
  const long row = get_group_id(0);
  __global const float* x = HX_AT(const float, x_buf, x_off) + row * d;
  __global float* y = HX_AT(float, y_buf, y_off) + row * d;
  acc_t sum = 0;
  for (int i = lid; i < d; i += WG) sum += (acc_t)x[i];
  partial[lid] = sum;
  reduce_sum(partial);
  const acc_t mean = partial[0] / (acc_t)d;
  barrier(CLK_LOCAL_MEM_FENCE);  // every work-item has read partial[0] before it is overwritten
  acc_t squares = 0;
  for (int i = lid; i < d; i += WG) {
    const acc_t deviation = (acc_t)x[i] - mean;
    squares += deviation * deviation;
  }
  partial[lid] = squares;
  reduce_sum(partial);
  const float inv = (float)((acc_t)1 / sqrt(partial[0] / (acc_t)d + (acc_t)epsilon));
  const float mean_f = (float)mean;
  __global const float* scale = HX_AT(const float, s_buf, s_off);
  if (has_bias) {
    __global const float* bias = HX_AT(const float, b_buf, b_off);
    for (int i = lid; i < d; i += WG) y[i] = (x[i] - mean_f) * inv * scale[i] + bias[i];
  } else {
    for (int i = lid; i < d; i += WG) y[i] = (x[i] - mean_f) * inv * scale[i];
  }
}

// Softmax over the last axis (inner == 1); one group per row.
__kernel void softmax_rows(__global const uchar* x_buf, ulong x_off, __global uchar* y_buf, ulong y_off, int n) {
  __local float maxima[WG];
  __local acc_t partial[WG];
  const int lid = get_local_id(0);
  const long row = get_group_id(0);
  __global const float* x = HX_AT(const float, x_buf, x_off) + row * n;
  __global float* y = HX_AT(float, y_buf, y_off) + row * n;
  float m = -INFINITY;
  for (int i = lid; i < n; i += WG) m = x[i] > m ? x[i] : m;
  maxima[lid] = m;
  for (int stride = WG / 2; stride > 0; stride /= 2) {
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < stride && maxima[lid + stride] > maxima[lid]) maxima[lid] = maxima[lid + stride];
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  m = maxima[0];
  acc_t sum = 0;
  for (int i = lid; i < n; i += WG) {
    const float e = hx_exp(x[i] - m);
    y[i] = e;
    sum += e;
  }
  partial[lid] = sum;
  reduce_sum(partial);
  const float inv = (float)((acc_t)1 / partial[0]);
  for (int i = lid; i < n; i += WG) y[i] *= inv;
}

// Softmax over an inner axis: one work-item per (outer, column), walking axis_len values `inner` apart.
__kernel void softmax_columns(__global const uchar* x_buf, ulong x_off, __global uchar* y_buf, ulong y_off,
                              int outer, int axis_len, int inner) {
  const int gid = get_global_id(0);
  if (gid >= outer * inner) return;
  const long base = (long)(gid / inner) * axis_len * inner + gid % inner;
  __global const float* x = HX_AT(const float, x_buf, x_off) + base;
  __global float* y = HX_AT(float, y_buf, y_off) + base;
  float m = x[0];
  for (int a = 1; a < axis_len; ++a) m = x[(long)a * inner] > m ? x[(long)a * inner] : m;
  acc_t sum = 0;
  for (int a = 0; a < axis_len; ++a) {
    const float e = hx_exp(x[(long)a * inner] - m);
    y[(long)a * inner] = e;
    sum += e;
  }
  const float inv = (float)((acc_t)1 / sum);
  for (int a = 0; a < axis_len; ++a) y[(long)a * inner] *= inv;
}

// RoPE: one work-item per (row, pair p): p < rotary_dims / 2 computes its angle once and rotates that pair of every
// head; later p copy two tail values of every head.
__kernel void rope(__global const uchar* x_buf, ulong x_off, __global const uchar* pos_buf, ulong pos_off,
                   __global const uchar* f_buf, ulong f_off, __global uchar* y_buf, ulong y_off, int rows,
                   int n_tokens, int n_heads, int head_dim, int rotary_dims, float theta, float freq_scale,
                   float ext_factor, float attn_factor, float corr_low, float corr_high) {
  const int pairs = (head_dim + 1) / 2;
  const int gid = get_global_id(0);
  if (gid >= rows * pairs) return;
  const int p = gid % pairs;
  const int row = gid / pairs;
  const int t = row % n_tokens;
  __global const float* x = HX_AT(const float, x_buf, x_off) + (long)row * n_heads * head_dim;
  __global float* y = HX_AT(float, y_buf, y_off) + (long)row * n_heads * head_dim;
  const int half_dims = rotary_dims / 2;
  if (p < half_dims) {
#if POS_I64
    const long position = HX_AT(const long, pos_buf, pos_off)[t];
#else
    const long position = HX_AT(const int, pos_buf, pos_off)[t];
#endif
    const acc_t freq = pow((acc_t)theta, (acc_t)(-2.0) * (acc_t)p / (acc_t)rotary_dims);
    acc_t extrap = (acc_t)position * freq;
#if HAS_FACTORS
    extrap /= (acc_t)HX_AT(const float, f_buf, f_off)[p];
#endif
    acc_t angle = (acc_t)freq_scale * extrap;
    if (ext_factor != 0.0f) {
      const acc_t ramp = ((acc_t)p - (acc_t)corr_low) / fmax((acc_t)0.001, (acc_t)corr_high - (acc_t)corr_low);
      const acc_t mix = ((acc_t)1 - fmin((acc_t)1, fmax((acc_t)0, ramp))) * (acc_t)ext_factor;
      if (mix != (acc_t)0) angle = angle * ((acc_t)1 - mix) + extrap * mix;
    }
    const float c = (float)(cos(angle) * (acc_t)attn_factor);
    const float s = (float)(sin(angle) * (acc_t)attn_factor);
    const int i0 = NEOX ? p : 2 * p;
    const int i1 = i0 + (NEOX ? half_dims : 1);
    for (int h = 0; h < n_heads; ++h) {
      const float x0 = x[h * head_dim + i0];
      const float x1 = x[h * head_dim + i1];
      y[h * head_dim + i0] = x0 * c - x1 * s;
      y[h * head_dim + i1] = x0 * s + x1 * c;
    }
  } else {
    const int e = rotary_dims + 2 * (p - half_dims);
    for (int h = 0; h < n_heads; ++h) {
      if (e < head_dim) y[h * head_dim + e] = x[h * head_dim + e];
      if (e + 1 < head_dim) y[h * head_dim + e + 1] = x[h * head_dim + e + 1];
    }
  }
}
)CLC";

}  // namespace

Status register_normalization(ops::KernelRegistry& registry) {
  return jit::register_normalization(registry, opencl_backend(),
                                     std::make_shared<const JitProgram>("hxrt_normalization", kSource));
}

}  // namespace hxrt::kernels::opencl
