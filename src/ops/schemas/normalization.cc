// Schemas of the normalization and position ops (docs/ops.md, "Normalization and position"): Softmax,
// LayerNormalization, RMSNorm and RoPE; and LogSoftmax, Hardmax, MeanVarianceNormalization, LRN and
// InstanceNormalization (docs/onnx_ops/reduce.md).

#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "hxrt/ops/params/common.h"
#include "hxrt/ops/params/normalization.h"
#include "hxrt/ops/params/reduce.h"
#include "ops/schemas/schemas.h"

namespace hxrt::ops::schemas {

namespace {

// Resolves attribute `name` (an axis) against `rank`; the error names the attribute.
Result<int> axis_attr(InferenceContext& ctx, std::string_view name, int64_t fallback, int rank) {
  Result<int64_t> axis = ctx.attrs().get_int(name, fallback);
  if (!axis.ok()) return ctx.error(fmt::format("attribute '{}': {}", name, axis.status().message()));
  if (axis.value() < -rank || axis.value() >= rank) {
    return ctx.error(
        fmt::format("attribute '{}' = {} is out of range for input 'X' of rank {}", name, axis.value(), rank));
  }
  return static_cast<int>(axis.value() < 0 ? axis.value() + rank : axis.value());
}

Status epsilon_attr(InferenceContext& ctx) {
  return ops::parse_epsilon(ctx.node()).status();
}

Status infer_softmax(InferenceContext& ctx) {
  const graph::TensorDesc& x = ctx.input(0);
  if (x.shape.rank() == 0) return ctx.error("input 'X' must have rank >= 1");
  HXRT_ASSIGN_OR_RETURN(const int axis, axis_attr(ctx, "axis", -1, x.shape.rank()));
  (void)axis;
  ctx.set_output(0, x);
  return ok_status();
}

// Scale and B must have the shape of X's normalised dims (X.shape[axis:]).
Status check_norm_operand(InferenceContext& ctx, size_t input, std::string_view name, int axis) {
  const graph::TensorDesc& x = ctx.input(0);
  const graph::TensorDesc& t = ctx.input(input);
  if (t.dtype != x.dtype) {
    return ctx.error(fmt::format("input '{}' has dtype {}, X has {}", name, t.dtype, x.dtype));
  }
  const int norm_rank = x.shape.rank() - axis;
  if (t.shape.rank() != norm_rank) {
    return ctx.error(fmt::format("input '{}' {} must have the shape of X's normalised dims (X {} from axis {})", name,
                                 t.shape.to_string(), x.shape.to_string(), axis));
  }
  for (int d = 0; d < norm_rank; ++d) {
    HXRT_RETURN_IF_ERROR(ctx.require_equal(
        t.shape.dims()[static_cast<size_t>(d)], x.shape.dims()[static_cast<size_t>(axis + d)],
        fmt::format("LayerNormalization '{}': {} dim {} vs X dim {}", ctx.node().name, name, d, axis + d)));
  }
  return ok_status();
}

Status infer_layer_norm(InferenceContext& ctx) {
  const graph::TensorDesc& x = ctx.input(0);
  if (x.shape.rank() == 0) return ctx.error("input 'X' must have rank >= 1");
  HXRT_ASSIGN_OR_RETURN(const int axis, axis_attr(ctx, "axis", -1, x.shape.rank()));
  HXRT_RETURN_IF_ERROR(epsilon_attr(ctx));
  HXRT_RETURN_IF_ERROR(check_norm_operand(ctx, 1, "Scale", axis));
  if (ctx.has_input(2)) HXRT_RETURN_IF_ERROR(check_norm_operand(ctx, 2, "B", axis));
  ctx.set_output(0, x);
  // Mean and InvStdDev: X's shape with the normalised dims set to 1.
  std::vector<graph::Dim> stats = x.shape.dims();
  for (size_t d = static_cast<size_t>(axis); d < stats.size(); ++d) stats[d] = graph::Dim(1);
  for (size_t i = 1; i < ctx.num_outputs(); ++i) ctx.set_output(i, graph::TensorDesc{x.dtype, graph::SymShape(stats)});
  return ok_status();
}

Status infer_rms_norm(InferenceContext& ctx) {
  const graph::TensorDesc& x = ctx.input(0);
  if (x.shape.rank() == 0) return ctx.error("input 'X' must have rank >= 1");
  HXRT_RETURN_IF_ERROR(epsilon_attr(ctx));
  ctx.set_output(0, x);
  return ok_status();
}

Status infer_rope(InferenceContext& ctx) {
  const graph::TensorDesc& x = ctx.input(0);
  const graph::TensorDesc& positions = ctx.input(1);
  if (x.shape.rank() < 3) {
    return ctx.error(
        fmt::format("input 'X' {} must have rank >= 3: [..., n_tokens, n_heads, head_dim]", x.shape.to_string()));
  }
  if (positions.shape.rank() != 1) {
    return ctx.error(fmt::format("input 'positions' {} must have rank 1: [n_tokens]", positions.shape.to_string()));
  }
  HXRT_RETURN_IF_ERROR(
      ctx.require_equal(positions.shape.dim(0), x.shape.dim(-3),
                        fmt::format("RoPE '{}': positions length vs n_tokens (X dim -3)", ctx.node().name)));
  HXRT_ASSIGN_OR_RETURN(const RopeParams rope, parse_rope_params(ctx.node()));
  const graph::Dim& head_dim = x.shape.dim(-1);
  if (ctx.has_input(2)) {
    const graph::TensorDesc& factors = ctx.input(2);
    if (factors.shape.rank() != 1) {
      return ctx.error(fmt::format("input 'freq_factors' {} must have rank 1: [rotary_dims / 2]", factors.shape.to_string()));
    }
    const int64_t rotary = rope.rotary_dims != 0 ? rope.rotary_dims : (head_dim.is_static() ? head_dim.value() : -1);
    if (rotary >= 0 && factors.shape.dim(0).is_static() && factors.shape.dim(0).value() != rotary / 2) {
      return ctx.error(fmt::format("input 'freq_factors' {} must hold rotary_dims / 2 = {} values",
                                   factors.shape.to_string(), rotary / 2));
    }
  }
  if (head_dim.is_static()) {
    if (rope.rotary_dims > head_dim.value()) {
      return ctx.error(
          fmt::format("attribute 'rotary_dims' = {} exceeds head_dim {}", rope.rotary_dims, head_dim.value()));
    }
    if (rope.rotary_dims == 0 && head_dim.value() % 2 != 0) {
      return ctx.error(fmt::format("head_dim {} must be even when rotary_dims is 0", head_dim.value()));
    }
  }
  ctx.set_output(0, x);
  return ok_status();
}

Status infer_lrn(InferenceContext& ctx) {
  const graph::TensorDesc& x = ctx.input(0);
  if (x.shape.rank() < 3)
    return ctx.error(fmt::format("input 'X' {} must have rank >= 3 (N, C, ...)", x.shape.to_string()));
  HXRT_RETURN_IF_ERROR(parse_lrn_params(ctx.node()).status());
  ctx.set_output(0, x);
  return ok_status();
}

Status infer_mvn(InferenceContext& ctx) {
  const graph::TensorDesc& x = ctx.input(0);
  HXRT_ASSIGN_OR_RETURN(const MvnParams params, parse_mvn_params(ctx.node()));
  HXRT_RETURN_IF_ERROR(reduced_dims(params.axes, false, x.shape.rank(), node_label(ctx.node())).status());
  ctx.set_output(0, x);
  return ok_status();
}

Status infer_instance_norm(InferenceContext& ctx) {
  const graph::TensorDesc& x = ctx.input(0);
  if (x.shape.rank() < 3) {
    return ctx.error(fmt::format("input 'input' {} must have rank >= 3 (N, C, D1, ...)", x.shape.to_string()));
  }
  HXRT_RETURN_IF_ERROR(epsilon_attr(ctx));
  static constexpr std::string_view kNames[] = {"scale", "B"};
  for (size_t i = 1; i < 3; ++i) {
    const graph::SymShape& p = ctx.input(i).shape;
    if (p.rank() != 1) return ctx.error(fmt::format("input '{}' {} must be [C]", kNames[i - 1], p.to_string()));
    HXRT_RETURN_IF_ERROR(ctx.require_equal(p.dim(0), x.shape.dim(1),
                                           fmt::format("length of '{}' and channels C of 'input'", kNames[i - 1])));
  }
  ctx.set_output(0, x);
  return ok_status();
}

// LogSoftmax and Hardmax: Softmax's shape of schema at opset 13 (one axis, default -1).
OpSchema axis_schema(std::string op_type, std::string doc) {
  OpSchema schema;
  schema.op_type = std::move(op_type);
  schema.since_version = 13;
  schema.inputs = {{.name = "input"}};
  schema.outputs = {{.name = "output"}};
  schema.attrs = {{.name = "axis", .type = graph::AttrType::kInt, .default_value = graph::Attribute(-1)}};
  schema.type_constraints = {{"T", float_types()}};
  schema.infer = infer_softmax;
  schema.doc = std::move(doc);
  return schema;
}

}  // namespace

Status register_normalization(OpSchemaRegistry& registry) {
  OpSchema softmax;
  softmax.op_type = "Softmax";
  softmax.since_version = 13;
  softmax.inputs = {{.name = "input"}};
  softmax.outputs = {{.name = "output"}};
  softmax.attrs = {{.name = "axis", .type = graph::AttrType::kInt, .default_value = graph::Attribute(-1)}};
  softmax.type_constraints = {{"T", float_types()}};
  softmax.infer = infer_softmax;
  softmax.doc = "exp(x - max) / sum(exp(x - max)) along axis";
  HXRT_RETURN_IF_ERROR(registry.add(std::move(softmax)));

  OpSchema layer_norm;
  layer_norm.op_type = "LayerNormalization";
  layer_norm.since_version = 17;
  layer_norm.inputs = {{.name = "X"}, {.name = "Scale"}, {.name = "B", .optional = true}};
  layer_norm.outputs = {{.name = "Y"}, {.name = "Mean"}, {.name = "InvStdDev"}};
  // stash_type (the precision of mean and variance) is accepted for ONNX compatibility; hxrt always uses double.
  layer_norm.attrs = {{.name = "axis", .type = graph::AttrType::kInt, .default_value = graph::Attribute(-1)},
                      {.name = "epsilon", .type = graph::AttrType::kFloat, .default_value = graph::Attribute(1e-5)},
                      {.name = "stash_type", .type = graph::AttrType::kInt, .default_value = graph::Attribute(1)}};
  layer_norm.type_constraints = {{"T", float_types()}};
  layer_norm.infer = infer_layer_norm;
  layer_norm.doc =
      "normalises over dims axis..end: y = (x - mean) / sqrt(var + epsilon) * Scale + B; the optional outputs Mean "
      "and InvStdDev have X's shape with the normalised dims set to 1";
  HXRT_RETURN_IF_ERROR(registry.add(std::move(layer_norm)));

  OpSchema rms_norm;
  rms_norm.op_type = "RMSNorm";
  rms_norm.domain = "hxrt";
  rms_norm.inputs = {{.name = "X"}};
  rms_norm.outputs = {{.name = "Y"}};
  rms_norm.attrs = {{.name = "epsilon", .type = graph::AttrType::kFloat, .default_value = graph::Attribute(1e-5)}};
  rms_norm.type_constraints = {{"T", float_types()}};
  rms_norm.infer = infer_rms_norm;
  rms_norm.doc = "y = x / sqrt(mean(x^2 over the last axis) + epsilon); no weight (a Mul follows)";
  HXRT_RETURN_IF_ERROR(registry.add(std::move(rms_norm)));

  OpSchema rope;
  rope.op_type = "RoPE";
  rope.domain = "hxrt";
  rope.inputs = {{.name = "X"},
                 {.name = "positions", .type_var = "Tpos"},
                 {.name = "freq_factors", .type_var = "Tf", .optional = true}};
  rope.outputs = {{.name = "Y"}};
  const auto float_attr = [](const char* name, double value) {
    return AttrSpec{.name = name, .type = graph::AttrType::kFloat, .default_value = graph::Attribute(value)};
  };
  rope.attrs = {float_attr("theta", 10000.0),
                {.name = "rotary_dims", .type = graph::AttrType::kInt, .default_value = graph::Attribute(0)},
                {.name = "mode", .type = graph::AttrType::kString, .default_value = graph::Attribute("normal")},
                float_attr("freq_scale", 1.0),
                float_attr("ext_factor", 0.0),
                float_attr("attn_factor", 1.0),
                float_attr("beta_fast", 32.0),
                float_attr("beta_slow", 1.0),
                {.name = "n_ctx_orig", .type = graph::AttrType::kInt, .default_value = graph::Attribute(0)}};
  rope.type_constraints = {{"T", float_types()}, {"Tpos", {DType::kI32, DType::kI64}}, {"Tf", {DType::kF32}}};
  rope.infer = infer_rope;
  rope.doc =
      "rotary position embedding of X [..., n_tokens, n_heads, head_dim] at positions [n_tokens]: pairs rotate by "
      "pos * theta^(-2i/rotary_dims) / freq_factors[i]; mode \"normal\" pairs (2i, 2i+1), \"neox\" pairs (i, i + "
      "rotary_dims/2); freq_scale interpolates positions linearly, ext_factor > 0 mixes in YaRN's extrapolated angles "
      "over n_ctx_orig (beta_fast, beta_slow), attn_factor scales cos and sin";
  HXRT_RETURN_IF_ERROR(registry.add(std::move(rope)));

  HXRT_RETURN_IF_ERROR(registry.add(axis_schema("LogSoftmax", "x - max - log(sum(exp(x - max))) along axis")));
  HXRT_RETURN_IF_ERROR(registry.add(axis_schema("Hardmax", "1 at the first maximum along axis, 0 elsewhere")));

  OpSchema lrn;
  lrn.op_type = "LRN";
  lrn.since_version = 13;
  lrn.inputs = {{.name = "X"}};
  lrn.outputs = {{.name = "Y"}};
  lrn.attrs = {{.name = "alpha", .type = graph::AttrType::kFloat, .default_value = graph::Attribute(1e-4)},
               {.name = "beta", .type = graph::AttrType::kFloat, .default_value = graph::Attribute(0.75)},
               {.name = "bias", .type = graph::AttrType::kFloat, .default_value = graph::Attribute(1.0)},
               {.name = "size", .type = graph::AttrType::kInt, .required = true}};
  lrn.type_constraints = {{"T", float_types()}};
  lrn.infer = infer_lrn;
  lrn.doc = "X [N, C, ...]: y = x / (bias + alpha / size * sum of x^2 over channels [c - (size-1)/2, c + size/2])^beta";
  HXRT_RETURN_IF_ERROR(registry.add(std::move(lrn)));

  OpSchema mvn;
  mvn.op_type = "MeanVarianceNormalization";
  mvn.since_version = 13;
  mvn.inputs = {{.name = "X"}};
  mvn.outputs = {{.name = "Y"}};
  mvn.attrs = {{.name = "axes",
                .type = graph::AttrType::kInts,
                .default_value = graph::Attribute(std::vector<int64_t>{0, 2, 3})}};
  mvn.type_constraints = {{"T", float_types()}};
  mvn.infer = infer_mvn;
  mvn.doc = "y = (x - mean) / (sqrt(variance) + 1e-9), mean and variance over axes";
  HXRT_RETURN_IF_ERROR(registry.add(std::move(mvn)));

  OpSchema instance_norm;
  instance_norm.op_type = "InstanceNormalization";
  instance_norm.since_version = 6;
  instance_norm.inputs = {{.name = "input"}, {.name = "scale"}, {.name = "B"}};
  instance_norm.outputs = {{.name = "output"}};
  instance_norm.attrs = {{.name = "epsilon", .type = graph::AttrType::kFloat, .default_value = graph::Attribute(1e-5)}};
  instance_norm.type_constraints = {{"T", float_types()}};
  instance_norm.infer = infer_instance_norm;
  instance_norm.doc =
      "input [N, C, D1, ...]: each (n, c) normalised over D1... : y = scale[c] * (x - mean) / sqrt(var + epsilon) + "
      "B[c]";
  HXRT_RETURN_IF_ERROR(registry.add(std::move(instance_norm)));
  return ok_status();
}

}  // namespace hxrt::ops::schemas
