#include "hxrt/ops/params/normalization.h"

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
  return fmt::format("theta={},rotary_dims={},mode={}", theta, rotary_dims, rope_mode_name(mode));
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
  return params;
}

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
  return g;
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
