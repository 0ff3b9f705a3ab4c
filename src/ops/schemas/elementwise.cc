// Schemas of the elementwise ops (docs/ops.md, "Elementwise"): Add Sub Mul Div Relu LeakyRelu Gelu Sigmoid Tanh Silu
// Cast. Attributes are parsed by hxrt/ops/params/elementwise.h, as the kernels parse them.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "hxrt/ops/params/elementwise.h"
#include "ops/schemas/schemas.h"

namespace hxrt::ops::schemas {

namespace {

// Add Sub Mul Div also take integers (f32 kernels, and i32/i64 kernels that wrap on overflow).
const std::vector<DType>& arithmetic_types() {
  static const std::vector<DType> types = {DType::kF32, DType::kI32, DType::kI64};
  return types;
}

// The dtypes Cast converts between.
const std::vector<DType>& cast_types() {
  static const std::vector<DType> types = {DType::kF32, DType::kF16, DType::kBF16, DType::kI8,
                                           DType::kU8,  DType::kI32, DType::kI64,  DType::kBool};
  return types;
}

Status infer_binary(InferenceContext& ctx) {
  const graph::TensorDesc& a = ctx.input(0);
  const graph::TensorDesc& b = ctx.input(1);
  if (a.dtype != b.dtype) {
    return ctx.error(fmt::format("inputs 'A' ({}) and 'B' ({}) must have the same dtype", a.dtype, b.dtype));
  }
  HXRT_ASSIGN_OR_RETURN(graph::SymShape shape, broadcast_shapes(ctx, a.shape, b.shape));
  ctx.set_output(0, graph::TensorDesc{a.dtype, std::move(shape)});
  return ok_status();
}

Status infer_same_as_input(InferenceContext& ctx) {
  ctx.set_output(0, ctx.input(0));
  return ok_status();
}

Status infer_gelu(InferenceContext& ctx) {
  HXRT_RETURN_IF_ERROR(parse_gelu_approximation(ctx.node()).status());
  return infer_same_as_input(ctx);
}

Status infer_leaky_relu(InferenceContext& ctx) {
  HXRT_RETURN_IF_ERROR(parse_leaky_relu_params(ctx.node()).status());
  return infer_same_as_input(ctx);
}

Status infer_cast(InferenceContext& ctx) {
  HXRT_ASSIGN_OR_RETURN(const CastParams cast, parse_cast_params(ctx.node()));
  ctx.set_output(0, graph::TensorDesc{cast.dtype, ctx.input(0).shape});
  return ok_status();
}

OpSchema binary_schema(std::string op_type, std::string doc) {
  OpSchema s;
  s.op_type = std::move(op_type);
  s.since_version = 14;
  s.inputs = {{.name = "A"}, {.name = "B"}};
  s.outputs = {{.name = "C"}};
  s.type_constraints = {{"T", arithmetic_types()}};
  s.infer = infer_binary;
  s.doc = std::move(doc);
  return s;
}

OpSchema unary_schema(std::string op_type, std::string domain, int since_version, std::string doc) {
  OpSchema s;
  s.op_type = std::move(op_type);
  s.domain = std::move(domain);
  s.since_version = since_version;
  s.inputs = {{.name = "X"}};
  s.outputs = {{.name = "Y"}};
  s.type_constraints = {{"T", float_types()}};
  s.infer = infer_same_as_input;
  s.doc = std::move(doc);
  return s;
}

}  // namespace

Status register_elementwise(OpSchemaRegistry& registry) {
  HXRT_RETURN_IF_ERROR(registry.add(binary_schema("Add", "C = A + B with numpy broadcasting")));
  HXRT_RETURN_IF_ERROR(registry.add(binary_schema("Sub", "C = A - B with numpy broadcasting")));
  HXRT_RETURN_IF_ERROR(registry.add(binary_schema("Mul", "C = A * B with numpy broadcasting")));
  HXRT_RETURN_IF_ERROR(registry.add(binary_schema("Div", "C = A / B with numpy broadcasting")));
  HXRT_RETURN_IF_ERROR(registry.add(unary_schema("Relu", "", 14, "Y = max(X, 0)")));
  OpSchema leaky_relu = unary_schema("LeakyRelu", "", 16, "Y = X for X >= 0, alpha * X for X < 0");
  leaky_relu.attrs = {{.name = "alpha", .type = graph::AttrType::kFloat, .default_value = graph::Attribute(0.01)}};
  leaky_relu.infer = infer_leaky_relu;
  HXRT_RETURN_IF_ERROR(registry.add(std::move(leaky_relu)));
  HXRT_RETURN_IF_ERROR(registry.add(unary_schema("Sigmoid", "", 13, "Y = 1 / (1 + exp(-X))")));
  HXRT_RETURN_IF_ERROR(registry.add(unary_schema("Tanh", "", 13, "Y = tanh(X)")));
  HXRT_RETURN_IF_ERROR(registry.add(unary_schema("Silu", "hxrt", 1, "Y = X * sigmoid(X)")));

  OpSchema gelu = unary_schema("Gelu", "", 20, "Y = X * Phi(X) (approximate=\"none\") or its tanh approximation");
  gelu.attrs = {{.name = "approximate", .type = graph::AttrType::kString, .default_value = graph::Attribute("none")}};
  gelu.infer = infer_gelu;
  HXRT_RETURN_IF_ERROR(registry.add(std::move(gelu)));

  OpSchema cast;
  cast.op_type = "Cast";
  cast.since_version = 19;
  cast.inputs = {{.name = "input", .type_var = "T1"}};
  cast.outputs = {{.name = "output", .type_var = "T2"}};
  // `saturate` (opset 19) only concerns float8 targets, which hxrt does not have; accepted and ignored.
  cast.attrs = {{.name = "to", .type = graph::AttrType::kInt, .required = true},
                {.name = "saturate", .type = graph::AttrType::kInt, .default_value = graph::Attribute(1)}};
  cast.type_constraints = {{"T1", cast_types()}, {"T2", cast_types()}};
  cast.infer = infer_cast;
  cast.doc = "Converts X to the dtype `to` (ONNX TensorProto code); float to integer truncates toward zero";
  HXRT_RETURN_IF_ERROR(registry.add(std::move(cast)));
  return ok_status();
}

}  // namespace hxrt::ops::schemas
