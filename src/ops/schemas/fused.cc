// Schemas of the fused ops (docs/ops.md, "Fused ops", domain hxrt.fused): ConvBnRelu, MatMulBias, RMSNormMul,
// SwiGLU. The fusion pass creates them; each runs as one launch with no intermediate tensor.

#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "hxrt/ops/params/conv.h"
#include "hxrt/ops/params/linear.h"
#include "ops/schemas/schemas.h"

namespace hxrt::ops::schemas {

// Shared with Conv; defined in conv.cc.
Result<graph::SymShape> infer_conv2d_shape(InferenceContext& ctx);
std::vector<AttrSpec> conv2d_attr_specs();

namespace {

constexpr std::string_view kFusedDomain = "hxrt.fused";

// Fails unless `p` is [length].
Status require_vector(InferenceContext& ctx, size_t input, std::string_view name, const graph::Dim& length,
                      std::string_view what) {
  const graph::SymShape& p = ctx.input(input).shape;
  if (p.rank() != 1) return ctx.error(fmt::format("input '{}' {} must be 1-D ({})", name, p.to_string(), what));
  return ctx.require_equal(p.dim(0), length, fmt::format("length of '{}' and {}", name, what));
}

// Inputs: X, W, B (optional), scale, bias, mean, var.
Status infer_conv_bn_relu(InferenceContext& ctx) {
  HXRT_ASSIGN_OR_RETURN(graph::SymShape out, infer_conv2d_shape(ctx));
  const graph::Dim channels = out.dim(1);
  if (ctx.has_input(2)) HXRT_RETURN_IF_ERROR(require_vector(ctx, 2, "B", channels, "output channels M"));
  static constexpr std::string_view kNames[] = {"scale", "bias", "mean", "var"};
  for (size_t i = 3; i < 7; ++i) HXRT_RETURN_IF_ERROR(require_vector(ctx, i, kNames[i - 3], channels, "output channels M"));
  HXRT_RETURN_IF_ERROR(parse_conv_bn_relu_params(ctx.node()).status());
  ctx.set_output(0, graph::TensorDesc{ctx.input(0).dtype, std::move(out)});
  return ok_status();
}

// A [..., M, K] · B [..., K, N] (numpy matmul, both rank >= 2) + bias [N] or [1, N], then the activation.
Status infer_matmul_bias(InferenceContext& ctx) {
  const graph::SymShape& a = ctx.input(0).shape;
  const graph::SymShape& b = ctx.input(1).shape;
  const graph::SymShape& bias = ctx.input(2).shape;
  if (a.rank() < 2 || b.rank() < 2) {
    return ctx.error(fmt::format("inputs 'A' {} and 'B' {} must have rank >= 2", a.to_string(), b.to_string()));
  }
  HXRT_RETURN_IF_ERROR(ctx.require_equal(a.dim(-1), b.dim(-2),
                                         fmt::format("inner dim K of 'A' {} and 'B' {} (MatMulBias '{}')",
                                                     a.to_string(), b.to_string(), ctx.node().name)));
  const std::vector<graph::Dim> a_batch(a.dims().begin(), a.dims().end() - 2);
  const std::vector<graph::Dim> b_batch(b.dims().begin(), b.dims().end() - 2);
  HXRT_ASSIGN_OR_RETURN(graph::SymShape out,
                        broadcast_shapes(ctx, graph::SymShape(a_batch), graph::SymShape(b_batch)));
  out.mutable_dims().push_back(a.dim(-2));
  out.mutable_dims().push_back(b.dim(-1));
  const bool row_bias = bias.rank() == 2 && bias.dim(0).is_static() && bias.dim(0).value() == 1;
  if (bias.rank() != 1 && !row_bias) {
    return ctx.error(fmt::format("input 'bias' {} must be [N] or [1, N]", bias.to_string()));
  }
  HXRT_RETURN_IF_ERROR(ctx.require_equal(bias.dim(-1), b.dim(-1), "length of 'bias' and N of 'B'"));
  HXRT_RETURN_IF_ERROR(parse_matmul_bias_params(ctx.node()).status());
  ctx.set_output(0, graph::TensorDesc{ctx.input(0).dtype, std::move(out)});
  return ok_status();
}

// X [..., D], weight [D].
Status infer_rmsnorm_mul(InferenceContext& ctx) {
  const graph::SymShape& x = ctx.input(0).shape;
  if (x.rank() < 1) return ctx.error("input 'X' must have rank >= 1");
  HXRT_RETURN_IF_ERROR(require_vector(ctx, 1, "weight", x.dim(-1), "the last dim of 'X'"));
  ctx.set_output(0, ctx.input(0));
  return ok_status();
}

// gate and up of one shape.
Status infer_swiglu(InferenceContext& ctx) {
  const graph::SymShape& gate = ctx.input(0).shape;
  const graph::SymShape& up = ctx.input(1).shape;
  if (gate.rank() != up.rank()) {
    return ctx.error(fmt::format("inputs 'gate' {} and 'up' {} must have the same shape", gate.to_string(),
                                 up.to_string()));
  }
  for (int i = 0; i < gate.rank(); ++i) {
    HXRT_RETURN_IF_ERROR(ctx.require_equal(gate.dim(i), up.dim(i), fmt::format("axis {} of 'gate' and 'up'", i)));
  }
  ctx.set_output(0, ctx.input(0));
  return ok_status();
}

OpSchema fused_schema(std::string op_type, std::vector<InputSpec> inputs, std::vector<AttrSpec> attrs,
                      ShapeInferenceFn infer, std::string doc) {
  OpSchema s;
  s.op_type = std::move(op_type);
  s.domain = std::string(kFusedDomain);
  s.since_version = 1;
  s.inputs = std::move(inputs);
  s.outputs = {{"Y"}};
  s.attrs = std::move(attrs);
  s.type_constraints = {{"T", float_types()}};
  s.infer = std::move(infer);
  s.doc = std::move(doc);
  return s;
}

}  // namespace

Status register_fused(OpSchemaRegistry& registry) {
  std::vector<AttrSpec> conv_attrs = conv2d_attr_specs();
  conv_attrs.push_back({"epsilon", graph::AttrType::kFloat, false, graph::Attribute(1e-5)});
  conv_attrs.push_back({"relu", graph::AttrType::kInt, false, graph::Attribute(int64_t{1})});
  HXRT_RETURN_IF_ERROR(registry.add(fused_schema(
      "ConvBnRelu",
      {{"X"}, {"W"}, {.name = "B", .optional = true}, {"scale"}, {"bias"}, {"mean"}, {"var"}}, std::move(conv_attrs),
      infer_conv_bn_relu, "Conv → BatchNormalization (→ Relu when relu=1), BN folded per output channel")));
  HXRT_RETURN_IF_ERROR(registry.add(fused_schema(
      "MatMulBias", {{"A"}, {"B"}, {"bias"}},
      {{"activation", graph::AttrType::kString, false, graph::Attribute("none")}}, infer_matmul_bias,
      "MatMul → Add of a [N] or [1, N] bias (→ Gelu: activation \"gelu\" (erf) or \"gelu_tanh\")")));
  HXRT_RETURN_IF_ERROR(registry.add(fused_schema(
      "RMSNormMul", {{"X"}, {"weight"}}, {{"epsilon", graph::AttrType::kFloat, false, graph::Attribute(1e-5)}},
      infer_rmsnorm_mul, "y = x / sqrt(mean(x², last axis) + epsilon) · weight")));
  return registry.add(fused_schema("SwiGLU", {{"gate"}, {"up"}}, {}, infer_swiglu, "y = silu(gate) · up"));
}

}  // namespace hxrt::ops::schemas
