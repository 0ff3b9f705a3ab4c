#include "hxrt/ops/params/normalization.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace hxrt::ops {

Result<SoftmaxGeometry> softmax_geometry(const Shape& x, int64_t axis) {
  SoftmaxGeometry g;
  HXRT_ASSIGN_OR_RETURN(g.axis, normalize_axis(axis, x.rank(), "Softmax"));
  g.outer = dims_product(x, 0, g.axis);
  g.axis_len = x.dim(g.axis);
  g.inner = dims_product(x, g.axis + 1, x.rank());
  return g;
}

std::string LayerNormParams::to_string() const {
  return fmt::format("axis={},epsilon={}", axis, epsilon);
}

Result<LayerNormParams> parse_layer_norm_params(const graph::Node& node) {
  LayerNormParams params;
  Result<int64_t> axis = node.attrs.get_int("axis", -1);
  if (!axis.ok()) return attr_read_error(node, "axis", axis.status());
  params.axis = *axis;
  HXRT_ASSIGN_OR_RETURN(params.epsilon, parse_epsilon(node));
  return params;
}

Result<LayerNormGeometry> layer_norm_geometry(const Shape& x, int64_t axis) {
  LayerNormGeometry g;
  HXRT_ASSIGN_OR_RETURN(g.axis, normalize_axis(axis, x.rank(), "LayerNormalization"));
  g.rows = dims_product(x, 0, g.axis);
  g.d = dims_product(x, g.axis, x.rank());
  return g;
}

std::string_view rope_mode_name(RopeMode mode) {
  return mode == RopeMode::kNeox ? "neox" : "normal";
}

std::string RopeParams::to_string() const {
  std::string out = fmt::format("theta={},rotary_dims={},mode={}", theta, rotary_dims, rope_mode_name(mode));
  if (scaled()) {
    out += fmt::format(",freq_scale={},ext_factor={},attn_factor={}", freq_scale, ext_factor, attn_factor);
    if (ext_factor != 0.0f) out += fmt::format(",beta_fast={},beta_slow={},n_ctx_orig={}", beta_fast, beta_slow, n_ctx_orig);
  }
  return out;
}

Result<RopeParams> parse_rope_params(const graph::Node& node) {
  Result<double> theta = node.attrs.get_float("theta", 10000.0);
  if (!theta.ok()) return attr_read_error(node, "theta", theta.status());
  if (!(*theta > 0.0)) return attr_error(node, "theta", fmt::format("= {} must be > 0", *theta));
  Result<int64_t> rotary_dims = node.attrs.get_int("rotary_dims", 0);
  if (!rotary_dims.ok()) return attr_read_error(node, "rotary_dims", rotary_dims.status());
  if (*rotary_dims < 0 || *rotary_dims % 2 != 0) {
    return attr_error(node, "rotary_dims", fmt::format("= {} must be even and >= 0", *rotary_dims));
  }
  Result<std::string> mode = node.attrs.get_string("mode", "normal");
  if (!mode.ok()) return attr_read_error(node, "mode", mode.status());
  if (*mode != "normal" && *mode != "neox") {
    return attr_error(node, "mode", fmt::format("must be \"normal\" or \"neox\", got \"{}\"", *mode));
  }
  RopeParams params;
  params.theta = static_cast<float>(*theta);
  params.rotary_dims = *rotary_dims;
  params.mode = *mode == "neox" ? RopeMode::kNeox : RopeMode::kNormal;
  // The scaling attributes: each finite, positive where a ratio, ext_factor a mix weight.
  const struct {
    std::string_view name;
    double fallback, low, high;
    bool low_open;
    float* out;
  } floats[] = {{"freq_scale", 1.0, 0.0, 1e30, true, &params.freq_scale},
                {"ext_factor", 0.0, 0.0, 1.0, false, &params.ext_factor},
                {"attn_factor", 1.0, 0.0, 1e30, true, &params.attn_factor},
                {"beta_fast", 32.0, 0.0, 1e30, true, &params.beta_fast},
                {"beta_slow", 1.0, 0.0, 1e30, true, &params.beta_slow}};
  for (const auto& f : floats) {
    Result<double> v = node.attrs.get_float(f.name, f.fallback);
    if (!v.ok()) return attr_read_error(node, f.name, v.status());
    const bool in_range = std::isfinite(*v) && (f.low_open ? *v > f.low : *v >= f.low) && *v <= f.high;
    if (!in_range) {
      return attr_error(node, f.name,
                        fmt::format("= {} must be {} {}{}", *v, f.low_open ? ">" : ">=", f.low,
                                    f.high < 1e30 ? fmt::format(" and <= {}", f.high) : std::string()));
    }
    *f.out = static_cast<float>(*v);
  }
  Result<int64_t> n_ctx_orig = node.attrs.get_int("n_ctx_orig", 0);
  if (!n_ctx_orig.ok()) return attr_read_error(node, "n_ctx_orig", n_ctx_orig.status());
  if (*n_ctx_orig < 0) return attr_error(node, "n_ctx_orig", fmt::format("= {} must be >= 0", *n_ctx_orig));
  if (params.ext_factor != 0.0f && *n_ctx_orig == 0) {
    return attr_error(node, "n_ctx_orig", "must be > 0 when ext_factor != 0 (YaRN needs the original context)");
  }
  params.n_ctx_orig = *n_ctx_orig;
  return params;
}

// Note [RoPE scaling]
// Three ways a model stretches RoPE past the context it was trained at, all in one angle (ggml's rope_yarn):
// - frequency factors (Llama 3.1+ `rope_freqs`, Phi-3's long/short factors): pair i's frequency is divided by
//   factor i, a per-pair wavelength stretch the file ships as a tensor;
// - linear interpolation (`rope.scaling.type = linear`): every angle times freq_scale = 1 / factor;
// - YaRN (`yarn`): high-frequency pairs (fewer than beta_slow..beta_fast rotations over n_ctx_orig do not matter)
//   keep the extrapolated angle, low-frequency pairs the interpolated one, a linear ramp between the correction
//   dims; the magnitude attn_factor (0.1·ln(factor) + 1 for YaRN) is chosen by the model loader, not here.
// Angles are computed in double from the same formulas on every backend, so the CPU and the JIT kernels agree bit
// for bit; with the defaults every term is an exact identity (x · 1, x / 1, mix 0) and RoPE is unchanged.
// corr_dim(rotations) = rotary_dims · ln(n_ctx_orig / (rotations · 2π)) / (2 ln theta); low = floor(corr_dim(beta_fast))
// clamped at 0, high = ceil(corr_dim(beta_slow)) clamped at rotary_dims - 1 (ggml_rope_yarn_corr_dims).
Result<RopeGeometry> rope_geometry(const RopeParams& params, const Shape& x, const Shape& positions) {
  if (x.rank() < 3) return invalid_argument("RoPE: X {} must be [..., n_tokens, n_heads, head_dim]", x);
  RopeGeometry g;
  g.n_tokens = x.dim(-3);
  g.n_heads = x.dim(-2);
  g.head_dim = x.dim(-1);
  g.rotary_dims = params.rotary_dims == 0 ? g.head_dim : params.rotary_dims;
  if (g.rotary_dims % 2 != 0 || g.rotary_dims > g.head_dim) {
    return invalid_argument("RoPE: rotary_dims {} must be even and at most head_dim {}", g.rotary_dims, g.head_dim);
  }
  if (positions.num_elements() != g.n_tokens) {
    return invalid_argument("RoPE: positions {} must hold n_tokens = {} values", positions, g.n_tokens);
  }
  g.rows = g.n_heads * g.head_dim == 0 ? 0 : x.num_elements() / (g.n_heads * g.head_dim);
  if (params.ext_factor != 0.0f && g.rotary_dims > 0) {
    const double dims = static_cast<double>(g.rotary_dims);
    const auto corr_dim = [&](double rotations) {
      return dims * std::log(static_cast<double>(params.n_ctx_orig) / (rotations * 2.0 * 3.14159265358979323846)) /
             (2.0 * std::log(static_cast<double>(params.theta)));
    };
    g.corr_low = static_cast<float>(std::max(0.0, std::floor(corr_dim(params.beta_fast))));
    g.corr_high = static_cast<float>(std::min(dims - 1.0, std::ceil(corr_dim(params.beta_slow))));
  }
  return g;
}

Status check_rope_freq_factors(const RopeGeometry& g, DType dtype, const Shape& freq_factors) {
  if (dtype != DType::kF32 || freq_factors.rank() != 1 || freq_factors.dim(0) != g.rotary_dims / 2) {
    return invalid_argument("RoPE: freq_factors {} {} must be f32 [{}] (one factor per rotated pair)", dtype,
                            freq_factors, g.rotary_dims / 2);
  }
  return ok_status();
}

double rope_yarn_mix(const RopeParams& params, const RopeGeometry& g, int64_t pair) {
  if (params.ext_factor == 0.0f) return 0.0;
  const double low = g.corr_low, high = g.corr_high;
  const double y = (static_cast<double>(pair) - low) / std::max(0.001, high - low);
  return (1.0 - std::min(1.0, std::max(0.0, y))) * static_cast<double>(params.ext_factor);
}

std::string LrnParams::to_string() const {
  return fmt::format("alpha={},beta={},bias={},size={}", alpha, beta, bias, size);
}

Result<LrnParams> parse_lrn_params(const graph::Node& node) {
  LrnParams params;
  const struct {
    std::string_view name;
    double fallback;
    float* out;
  } floats[] = {{"alpha", 1e-4, &params.alpha}, {"beta", 0.75, &params.beta}, {"bias", 1.0, &params.bias}};
  for (const auto& f : floats) {
    Result<double> v = node.attrs.get_float(f.name, f.fallback);
    if (!v.ok()) return attr_read_error(node, f.name, v.status());
    if (!std::isfinite(*v)) return attr_error(node, f.name, fmt::format("= {} must be finite", *v));
    *f.out = static_cast<float>(*v);
  }
  if (!node.attrs.has("size")) return attr_error(node, "size", "is required");
  Result<int64_t> size = node.attrs.get_int("size");
  if (!size.ok()) return attr_read_error(node, "size", size.status());
  if (*size < 1) return attr_error(node, "size", fmt::format("= {} must be >= 1", *size));
  params.size = *size;
  return params;
}

std::string MvnParams::to_string() const {
  return fmt::format("axes=[{}]", fmt::join(axes, ","));
}

Result<MvnParams> parse_mvn_params(const graph::Node& node) {
  MvnParams params;
  Result<std::vector<int64_t>> axes = node.attrs.get_ints("axes", params.axes);
  if (!axes.ok()) return attr_read_error(node, "axes", axes.status());
  params.axes = std::move(axes).value();
  return params;
}

}  // namespace hxrt::ops
