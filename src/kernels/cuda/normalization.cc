// CUDA normalization and position kernels: RMSNorm, the fused RMSNormMul, Softmax, LayerNormalization and RoPE; the
// twins of kernels/opencl/normalization.cc, with the same tiling, checks and arithmetic.
//
// Geometry: RMSNorm(Mul), LayerNormalization and Softmax over the last axis run one block per row, of WG threads (a
// power of two, at most 128, about a quarter of the row); the threads stride through the row, then reduce in shared
// memory (LayerNormalization's row is every dim from its axis on). Softmax over an inner axis runs one thread per
// (outer, column) walking the axis. RoPE runs one thread per (token row, pair), computing the pair's angle once and
// rotating that pair in every head.
//
// Numerics (Note [Matching the CPU kernels on CUDA] in cuda_program.h): the sums are in double, as the CPU kernels'
// and the OpenCL kernels' acc_t; the reductions are the OpenCL kernels' local-memory trees (hx_block_sum_double halves
// the block as reduce_sum halves the group); the maximum keeps the CPU's `>` comparison; exp is hx_exp; the inverse
// norm is 1 / sqrt(...) in double rounded to float once; RoPE's frequency, angle, cos and sin are in double like the
// CPU's rope_cos_sin. No float expression is contracted (--fmad=false), so x * inv * w stays two roundings.
#include <memory>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "kernels/cuda/registration.h"

namespace hxrt::kernels::cuda {
namespace {

constexpr std::string_view kSource = R"CUDA(
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
#if POS_I64
typedef long long hx_pos_t;
#else
typedef int hx_pos_t;
#endif

// y[row, :] = x[row, :] / sqrt(mean(x²) + epsilon) (· weight when HAS_WEIGHT); one block of WG threads per row.
extern "C" __global__ void rms_norm(const float* x, const float* w, float* y, int d, float epsilon) {
  __shared__ double partial[WG];
  const int lid = threadIdx.x;
  const long long row = blockIdx.x;
  x += row * d;
  y += row * d;
  double sum = 0;
  for (int i = lid; i < d; i += WG) {
    const double v = x[i];
    sum += v * v;
  }
  const double total = hx_block_sum_double(sum, partial);
  const float inv = (float)(1.0 / sqrt(total / (double)d + (double)epsilon));
#if HAS_WEIGHT
  for (int i = lid; i < d; i += WG) y[i] = x[i] * inv * w[i];
#else
  (void)w;
  for (int i = lid; i < d; i += WG) y[i] = x[i] * inv;
#endif
}

// LayerNormalization over rows of d values: mean, then the sum of squared deviations (two passes, in double, as the
// CPU's layer_norm_row), y = (x - mean) · inv · scale (+ bias); one block per row.
extern "C" __global__ void layer_norm(const float* x, const float* scale, const float* bias, float* y, int d,
                                      float epsilon, int has_bias) {
  __shared__ double partial[WG];
  const int lid = threadIdx.x;
  const long long row = blockIdx.x;
  x += row * d;
  y += row * d;
  double sum = 0;
  for (int i = lid; i < d; i += WG) sum += (double)x[i];
  const double mean = hx_block_sum_double(sum, partial) / (double)d;
  double squares = 0;
  for (int i = lid; i < d; i += WG) {
    const double deviation = (double)x[i] - mean;
    squares += deviation * deviation;
  }
  const double total = hx_block_sum_double(squares, partial);
  const float inv = (float)(1.0 / sqrt(total / (double)d + (double)epsilon));
  const float mean_f = (float)mean;
  if (has_bias) {
    for (int i = lid; i < d; i += WG) y[i] = (x[i] - mean_f) * inv * scale[i] + bias[i];
  } else {
    for (int i = lid; i < d; i += WG) y[i] = (x[i] - mean_f) * inv * scale[i];
  }
}

// Softmax over the last axis (inner == 1); one block per row.
extern "C" __global__ void softmax_rows(const float* x, float* y, int n) {
  __shared__ float maxima[WG];
  __shared__ double partial[WG];
  const int lid = threadIdx.x;
  const long long row = blockIdx.x;
  x += row * n;
  y += row * n;
  float m = -__int_as_float(0x7f800000);  // -inf: NVRTC has no INFINITY without math headers
  for (int i = lid; i < n; i += WG) m = x[i] > m ? x[i] : m;
  // The OpenCL kernel's tree with the CPU's `>` comparison (hx_block_max's fmaxf may pick either of +0 and -0).
  maxima[lid] = m;
  for (int stride = WG / 2; stride > 0; stride /= 2) {
    __syncthreads();
    if (lid < stride && maxima[lid + stride] > maxima[lid]) maxima[lid] = maxima[lid + stride];
  }
  __syncthreads();
  m = maxima[0];
  double sum = 0;
  for (int i = lid; i < n; i += WG) {
    const float e = hx_exp(x[i] - m);
    y[i] = e;
    sum += e;
  }
  const float inv = (float)(1.0 / hx_block_sum_double(sum, partial));
  for (int i = lid; i < n; i += WG) y[i] *= inv;
}

// Softmax over an inner axis: one thread per (outer, column), walking axis_len values `inner` apart.
extern "C" __global__ void softmax_columns(const float* x, float* y, int outer, int axis_len, int inner) {
  const long long gid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (gid >= (long long)outer * inner) return;
  const long long base = (gid / inner) * axis_len * inner + gid % inner;
  x += base;
  y += base;
  float m = x[0];
  for (int a = 1; a < axis_len; ++a) m = x[(long long)a * inner] > m ? x[(long long)a * inner] : m;
  double sum = 0;
  for (int a = 0; a < axis_len; ++a) {
    const float e = hx_exp(x[(long long)a * inner] - m);
    y[(long long)a * inner] = e;
    sum += e;
  }
  const float inv = (float)(1.0 / sum);
  for (int a = 0; a < axis_len; ++a) y[(long long)a * inner] *= inv;
}

// RoPE: one thread per (row, pair p): p < rotary_dims / 2 computes its angle once and rotates that pair of every
// head; later p copy two tail values of every head.
extern "C" __global__ void rope(const float* x, const hx_pos_t* positions, const float* freq_factors, float* y,
                                int rows, int n_tokens, int n_heads, int head_dim, int rotary_dims, float theta,
                                float freq_scale, float ext_factor, float attn_factor, float corr_low,
                                float corr_high) {
  const int pairs = (head_dim + 1) / 2;
  const long long gid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (gid >= (long long)rows * pairs) return;
  const int p = (int)(gid % pairs);
  const int row = (int)(gid / pairs);
  const int t = row % n_tokens;
  x += (long long)row * n_heads * head_dim;
  y += (long long)row * n_heads * head_dim;
  const int half_dims = rotary_dims / 2;
  if (p < half_dims) {
    const long long position = positions[t];
    const double freq = pow((double)theta, -2.0 * (double)p / (double)rotary_dims);
    double extrap = (double)position * freq;
#if HAS_FACTORS
    extrap /= (double)freq_factors[p];
#endif
    double angle = (double)freq_scale * extrap;
    if (ext_factor != 0.0f) {
      const double ramp = ((double)p - (double)corr_low) / fmax(0.001, (double)corr_high - (double)corr_low);
      const double mix = (1.0 - fmin(1.0, fmax(0.0, ramp))) * (double)ext_factor;
      if (mix != 0.0) angle = angle * (1.0 - mix) + extrap * mix;
    }
    const float c = (float)(cos(angle) * (double)attn_factor);
    const float s = (float)(sin(angle) * (double)attn_factor);
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
)CUDA";

std::shared_ptr<const CudaProgram> program() {
  static const auto instance = std::make_shared<const CudaProgram>("hxrt_normalization", kSource);
  return instance;
}

}  // namespace

Status register_normalization(ops::KernelRegistry& registry) {
  return jit::register_normalization(registry, cuda_backend(), program());
}

std::vector<ProgramBuild> normalization_builds() {
  const CudaProgram* p = program().get();
  std::vector<ProgramBuild> builds;
  for (const int64_t group : jit::row_groups()) {
    for (const bool weighted : {false, true}) builds.push_back({p, jit::rms_norm_options(weighted, group), {"rms_norm"}});
    builds.push_back({p, fmt::format(" -D WG={}", group), {"layer_norm", "softmax_rows"}});
  }
  builds.push_back({p, "", {"softmax_columns"}});
  for (const bool neox : {false, true}) {
    for (const bool i64 : {false, true}) {
      for (const bool factors : {false, true}) builds.push_back({p, jit::rope_options(neox, i64, factors), {"rope"}});
    }
  }
  return builds;
}

}  // namespace hxrt::kernels::cuda
