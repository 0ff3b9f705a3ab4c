// CPU normalization and position math: Softmax, LayerNormalization, RMSNorm and RoPE.
//
// Plain functions over pointers and counts, reused by the fused kernels (RMSNormMul) and called by the kernels that
// register_normalization() (registration.h) adds. Reductions (sums of x, of squares, of exp) accumulate in double
// across kVectorBlock independent lanes, so they vectorise (Note [Vectorised loops] in elementwise.h) and stay
// accurate: against a double reference the outputs agree to about 1e-6 relative for rows of up to 10^5
// elements; the remaining error is the float rounding of each output element and of expf.
//
// Thread-safety: pure functions; safe from any thread. y may equal x (in place) but not overlap it partially.
#pragma once

#include <cstdint>
#include <string_view>
#include <memory>
#include <vector>

#include "hxrt/ops/params/normalization.h"

namespace hxrt::kernels::cpu {

// ---- Softmax ----
// y = exp(x - max) / sum(exp(x - max)) over each contiguous row of n elements.
void softmax_row(const float* x, float* y, int64_t n);
// Softmax along a strided axis for a block of `cols` adjacent columns: element (a, j) is x[a * stride + j] for
// a < axis_len, j < cols (cols <= stride). This is softmax over axis 1 of a tensor viewed as [outer, axis_len,
// inner] with stride = inner, vectorised across the columns.
void softmax_columns(const float* x, float* y, int64_t axis_len, int64_t stride, int64_t cols);

// ---- LayerNormalization ----
// y = (x - mean) / sqrt(var + eps) * scale + bias over one row of n elements (two-pass mean and variance).
// bias may be null.
void layer_norm_row(const float* x, const float* scale, const float* bias, float* y, int64_t n, float eps);

// ---- RMSNorm ----
// 1 / sqrt(mean(x²) + eps) for one row of n elements.
float rms_inverse(const float* x, int64_t n, float eps);
// y = x / sqrt(mean(x²) + eps) over one row of n elements.
void rms_norm_row(const float* x, float* y, int64_t n, float eps);
// y = x / sqrt(mean(x²) + eps) * weight: RMSNorm followed by the per-channel weight of LLaMA-style models.
void rms_norm_mul_row(const float* x, const float* weight, float* y, int64_t n, float eps);

// ---- RoPE ----
// RopeMode and rope_mode_name are the op's, in hxrt/ops/params/normalization.h.
using ops::RopeMode;

// Fills cos_sin[2i], cos_sin[2i+1] with cos and sin of pair i's angle at `position` for i < g.rotary_dims/2:
// position·theta^(-2i/rotary_dims), divided by freq_factors[i] (null: none) and scaled as Note [RoPE scaling] says.
// Angles are computed in double so that large positions keep their precision.
void rope_cos_sin(int64_t position, const ops::RopeParams& params, const ops::RopeGeometry& g,
                  const float* freq_factors, float* cos_sin);

// What rope_cos_sin computes that does not depend on the position, per pair: theta^(-2i/rotary_dims) and the YaRN
// ramp (a launch computes them once instead of once per token: pow was half a RoPE's time). rope_cos_sin is
// RopeAngles::cos_sin of a fresh table, so both give the same bits.
//
// Note [RoPE tables]: the rows depend on the position and these parameters only, and every layer of a model rotates
// the same positions with one or two sets of parameters (Gemma 3: local and global θ), so a launch takes its rows
// from a process-wide table per parameter set (table()), grown on demand and immutable once published, instead of
// computing 2 · rotary_dims / 2 double-precision cos and sin per token per layer (5% of a Gemma 3 prefill). The
// rows are cos_sin's own floats, so the results keep their bits. Positions from kRopeTablePositions on are
// computed per launch, as before.
inline constexpr int64_t kRopeTablePositions = 4096;
class RopeAngles {
 public:
  RopeAngles(const ops::RopeParams& params, const ops::RopeGeometry& g, const float* freq_factors);
  void cos_sin(int64_t position, float* out) const;
  // Rows [0, end) of cos_sin (rotary_dims floats apiece) for these parameters, end <= kRopeTablePositions; the
  // table may hold more rows. Thread-safe.
  std::shared_ptr<const std::vector<float>> table(int64_t end) const;

 private:
  // Every value the rows depend on besides the position.
  std::vector<double> key() const;

  const ops::RopeParams& params_;
  const float* freq_factors_;
  std::vector<double> freq_;  // (rotary_dims / 2)
  std::vector<double> mix_;   // (rotary_dims / 2)
};
// Rotates one head of head_dim elements: the first rotary_dims (even, <= head_dim) are rotated in pairs by the
// table from rope_cos_sin; the rest are copied.
void rope_head(const float* x, float* y, int64_t head_dim, int64_t rotary_dims, const float* cos_sin, RopeMode mode);

}  // namespace hxrt::kernels::cpu
