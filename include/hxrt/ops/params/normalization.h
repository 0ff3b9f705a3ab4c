// Params and geometry of the normalization and position ops (docs/ops.md, "Normalization and position"):
// Softmax, LogSoftmax, Hardmax (AxisParams), LayerNormalization, RMSNorm / RMSNormMul / InstanceNormalization
// (EpsilonParams, common.h), RoPE, LRN and MeanVarianceNormalization (docs/onnx_ops/reduce.md).
//
// Thread-safety: params are immutable after parsing; the functions are reentrant.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hxrt/base/shape.h"
#include "hxrt/base/status.h"
#include "hxrt/graph/graph.h"
#include "hxrt/ops/params/common.h"

namespace hxrt::ops {

// ---- Softmax ----
// X viewed as [outer, axis_len, inner] around the normalized softmax axis.
struct SoftmaxGeometry final : TypedGeometry<SoftmaxGeometry> {
  static constexpr std::string_view kName = "SoftmaxGeometry";
  int axis = 0;
  int64_t outer = 1, axis_len = 1, inner = 1;
};
// InvalidArgument when the axis is out of range for X.
Result<SoftmaxGeometry> softmax_geometry(const Shape& x, int64_t axis);

// ---- LayerNormalization ----
struct LayerNormParams final : TypedParams<LayerNormParams> {
  static constexpr std::string_view kName = "LayerNormParams";
  int64_t axis = -1;
  float epsilon = 1e-5f;
  std::string to_string() const override;
};
Result<LayerNormParams> parse_layer_norm_params(const graph::Node& node);

// X viewed as [rows, d]: d = the product of the normalized dims axis..end.
struct LayerNormGeometry final : TypedGeometry<LayerNormGeometry> {
  static constexpr std::string_view kName = "LayerNormGeometry";
  int axis = 0;
  int64_t rows = 1, d = 1;
};
Result<LayerNormGeometry> layer_norm_geometry(const Shape& x, int64_t axis);

// ---- RoPE ----
enum class RopeMode : uint8_t {
  kNormal,  // pairs (2i, 2i+1): ggml's LLaMA layout
  kNeox,    // pairs (i, i + rotary_dims/2): GPT-NeoX / Hugging Face layout
};
std::string_view rope_mode_name(RopeMode mode);

// Pair i (of rotary_dims / 2) at position p turns by an angle built as ggml's rope_yarn does (Note [RoPE scaling] in
// ops/params/normalization.cc):
//   extrap = p · theta^(-2i/rotary_dims) / freq_factors[i]      (freq_factors: the optional third input, else 1)
//   interp = freq_scale · extrap
//   angle  = interp · (1 - r_i) + extrap · r_i,   r_i = ext_factor · ramp(i) over YaRN's correction dims
// and cos/sin are multiplied by attn_factor. The defaults (freq_scale 1, ext_factor 0, attn_factor 1, no factors)
// give plain RoPE bit for bit.
struct RopeParams final : TypedParams<RopeParams> {
  static constexpr std::string_view kName = "RopeParams";
  float theta = 10000.0f;   // > 0
  int64_t rotary_dims = 0;  // even, >= 0; 0 = head_dim
  RopeMode mode = RopeMode::kNormal;
  float freq_scale = 1.0f;   // > 0: linear position interpolation (1 / the scaling factor)
  float ext_factor = 0.0f;   // [0, 1]: YaRN's mix of extrapolated and interpolated angles; 0 = plain interpolation
  float attn_factor = 1.0f;  // > 0: magnitude of cos and sin (YaRN's mscale)
  float beta_fast = 32.0f;   // YaRN correction range in rotations over n_ctx_orig (> 0)
  float beta_slow = 1.0f;
  int64_t n_ctx_orig = 0;    // the context the model was trained at; required (> 0) when ext_factor != 0
  bool scaled() const { return freq_scale != 1.0f || ext_factor != 0.0f || attn_factor != 1.0f; }
  std::string to_string() const override;
};
Result<RopeParams> parse_rope_params(const graph::Node& node);

// X [..., n_tokens, n_heads, head_dim] as rows of (n_heads, head_dim), with the rotary dims resolved, and YaRN's
// correction dims [corr_low, corr_high] (pair indices; meaningful when ext_factor != 0).
struct RopeGeometry final : TypedGeometry<RopeGeometry> {
  static constexpr std::string_view kName = "RopeGeometry";
  int64_t rows = 0, n_tokens = 0, n_heads = 0, head_dim = 0, rotary_dims = 0;
  float corr_low = 0.0f, corr_high = 0.0f;
};
// InvalidArgument when X has rank < 3, rotary_dims is odd or exceeds head_dim, or positions do not hold n_tokens
// values.
Result<RopeGeometry> rope_geometry(const RopeParams& params, const Shape& x, const Shape& positions);
// InvalidArgument unless `freq_factors` is a 1-D f32 of rotary_dims / 2 values (RoPE's optional third input).
Status check_rope_freq_factors(const RopeGeometry& g, DType dtype, const Shape& freq_factors);
// ramp(i) · ext_factor of Note [RoPE scaling]: 1 below corr_low, 0 above corr_high, linear between.
double rope_yarn_mix(const RopeParams& params, const RopeGeometry& g, int64_t pair);

// ---- LRN ----
// y = x / (bias + alpha / size * sum of x² over the channels [c - (size-1)/2, c + size/2])^beta, X [N, C, ...].
struct LrnParams final : TypedParams<LrnParams> {
  static constexpr std::string_view kName = "LrnParams";
  float alpha = 1e-4f;
  float beta = 0.75f;
  float bias = 1.0f;
  int64_t size = 1;  // required, >= 1
  std::string to_string() const override;
};
Result<LrnParams> parse_lrn_params(const graph::Node& node);

// ---- MeanVarianceNormalization ----
// y = (x - mean) / (sqrt(variance) + 1e-9) over `axes` (default [0, 2, 3]).
struct MvnParams final : TypedParams<MvnParams> {
  static constexpr std::string_view kName = "MvnParams";
  std::vector<int64_t> axes = {0, 2, 3};
  std::string to_string() const override;
};
Result<MvnParams> parse_mvn_params(const graph::Node& node);
// The constant ONNX adds to the standard deviation.
inline constexpr double kMvnEpsilon = 1e-9;

}  // namespace hxrt::ops
