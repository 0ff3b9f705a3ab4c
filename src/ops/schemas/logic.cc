// Schemas of the broadcast binary, variadic, comparison and logical ops (docs/onnx_ops/logic.md): Pow Mod PRelu
// Max Min Sum Mean Equal Greater GreaterOrEqual Less LessOrEqual And Or Xor Where Clip, at their newest ONNX
// version <= 17. Broadcasting is numpy's (multidirectional) except PRelu's slope, which broadcasts to X.

#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "hxrt/ops/params/logic.h"
#include "ops/schemas/schemas.h"

namespace hxrt::ops::schemas {

namespace {

const std::vector<DType>& numeric_types() {
  static const std::vector<DType> types = {DType::kF32, DType::kI8, DType::kU8, DType::kI32, DType::kI64};
  return types;
}

const std::vector<DType>& any_types() {
  static const std::vector<DType> types = {DType::kF32, DType::kI8,  DType::kU8,
                                           DType::kI32, DType::kI64, DType::kBool};
  return types;
}

// The broadcast shape of inputs [first, num_inputs).
Result<graph::SymShape> broadcast_inputs(InferenceContext& ctx, size_t first) {
  graph::SymShape shape = ctx.input(first).shape;
  for (size_t i = first + 1; i < ctx.num_inputs(); ++i) {
    HXRT_ASSIGN_OR_RETURN(shape, broadcast_shapes(ctx, shape, ctx.input(i).shape));
  }
  return shape;
}

// Inputs of one type variable must agree; check_node has done that, so the output takes input 0's dtype.
Status infer_broadcast(InferenceContext& ctx) {
  HXRT_ASSIGN_OR_RETURN(graph::SymShape shape, broadcast_inputs(ctx, 0));
  ctx.set_output(0, graph::TensorDesc{ctx.input(0).dtype, std::move(shape)});
  return ok_status();
}

Status infer_comparison(InferenceContext& ctx) {
  HXRT_ASSIGN_OR_RETURN(graph::SymShape shape, broadcast_inputs(ctx, 0));
  ctx.set_output(0, graph::TensorDesc{DType::kBool, std::move(shape)});
  return ok_status();
}

Status infer_mod(InferenceContext& ctx) {
  HXRT_RETURN_IF_ERROR(parse_mod_params(ctx.node(), ctx.input(0).dtype == DType::kF32).status());
  return infer_broadcast(ctx);
}

// PRelu: the slope broadcasts to X (unidirectionally); Y has X's shape.
Status infer_prelu(InferenceContext& ctx) {
  const graph::SymShape& x = ctx.input(0).shape;
  const graph::SymShape& slope = ctx.input(1).shape;
  if (slope.rank() > x.rank()) {
    return ctx.error(fmt::format("slope {} has a higher rank than X {}", slope.to_string(), x.to_string()));
  }
  for (int i = 0; i < slope.rank(); ++i) {
    const graph::Dim& s = slope.dims()[static_cast<size_t>(slope.rank() - 1 - i)];
    const graph::Dim& d = x.dims()[static_cast<size_t>(x.rank() - 1 - i)];
    if (s.is_static() && s.value() == 1) continue;
    HXRT_RETURN_IF_ERROR(ctx.require_equal(
        s, d, fmt::format("PRelu '{}': slope {} broadcasts to X {}", ctx.node().name, slope.to_string(), x.to_string())));
  }
  ctx.set_output(0, ctx.input(0));
  return ok_status();
}

Status infer_where(InferenceContext& ctx) {
  HXRT_ASSIGN_OR_RETURN(graph::SymShape shape, broadcast_inputs(ctx, 0));
  ctx.set_output(0, graph::TensorDesc{ctx.input(1).dtype, std::move(shape)});
  return ok_status();
}

// Clip: min and max, when given, hold one value each.
Status infer_clip(InferenceContext& ctx) {
  for (size_t i : {size_t{1}, size_t{2}}) {
    if (!ctx.has_input(i)) continue;
    for (const graph::Dim& d : ctx.input(i).shape.dims()) {
      if (!d.is_static() || d.value() != 1) {
        return ctx.error(fmt::format("input '{}' {} must be a scalar", i == 1 ? "min" : "max",
                                     ctx.input(i).to_string()));
      }
    }
  }
  ctx.set_output(0, ctx.input(0));
  return ok_status();
}

OpSchema binary_schema(std::string op_type, int since_version, std::vector<DType> types, ShapeInferenceFn infer,
                       std::string doc) {
  OpSchema s;
  s.op_type = std::move(op_type);
  s.since_version = since_version;
  s.inputs = {{.name = "A"}, {.name = "B"}};
  s.outputs = {{.name = "C"}};
  s.type_constraints = {{"T", std::move(types)}};
  s.infer = std::move(infer);
  s.doc = std::move(doc);
  return s;
}

OpSchema comparison_schema(std::string op_type, int since_version, std::vector<DType> types, std::string doc) {
  OpSchema s = binary_schema(std::move(op_type), since_version, std::move(types), infer_comparison, std::move(doc));
  s.outputs = {{.name = "C", .type_var = "T1"}};
  s.type_constraints.push_back({"T1", {DType::kBool}});
  return s;
}

OpSchema variadic_schema(std::string op_type, std::vector<DType> types, std::string doc) {
  OpSchema s;
  s.op_type = std::move(op_type);
  s.since_version = 13;
  s.inputs = {{.name = "data_0", .variadic = true}};
  s.outputs = {{.name = "result"}};
  s.type_constraints = {{"T", std::move(types)}};
  s.infer = infer_broadcast;
  s.doc = std::move(doc);
  return s;
}

}  // namespace

Status register_logic(OpSchemaRegistry& registry) {
  OpSchema pow = binary_schema("Pow", 15, numeric_types(), infer_broadcast, "Z = X ^ Y with numpy broadcasting");
  pow.inputs = {{.name = "X", .type_var = "T"}, {.name = "Y", .type_var = "T1"}};
  pow.outputs = {{.name = "Z", .type_var = "T"}};
  pow.type_constraints.push_back({"T1", numeric_types()});
  HXRT_RETURN_IF_ERROR(registry.add(std::move(pow)));

  OpSchema mod = binary_schema("Mod", 13, numeric_types(), infer_mod,
                               "C = A mod B: the divisor's sign (fmod=0, integers) or the dividend's (fmod=1)");
  mod.attrs = {{.name = "fmod", .type = graph::AttrType::kInt, .default_value = graph::Attribute(0)}};
  HXRT_RETURN_IF_ERROR(registry.add(std::move(mod)));

  OpSchema prelu = binary_schema("PRelu", 16, numeric_types(), infer_prelu,
                                 "Y = X for X >= 0, slope * X for X < 0; slope broadcasts to X");
  prelu.inputs = {{.name = "X"}, {.name = "slope"}};
  prelu.outputs = {{.name = "Y"}};
  HXRT_RETURN_IF_ERROR(registry.add(std::move(prelu)));

  HXRT_RETURN_IF_ERROR(registry.add(variadic_schema("Max", numeric_types(), "elementwise max, numpy broadcasting")));
  HXRT_RETURN_IF_ERROR(registry.add(variadic_schema("Min", numeric_types(), "elementwise min, numpy broadcasting")));
  HXRT_RETURN_IF_ERROR(registry.add(variadic_schema("Sum", {DType::kF32}, "elementwise sum, numpy broadcasting")));
  HXRT_RETURN_IF_ERROR(registry.add(variadic_schema("Mean", {DType::kF32}, "elementwise mean, numpy broadcasting")));

  HXRT_RETURN_IF_ERROR(registry.add(comparison_schema("Equal", 13, any_types(), "C = A == B")));
  HXRT_RETURN_IF_ERROR(registry.add(comparison_schema("Greater", 13, numeric_types(), "C = A > B")));
  HXRT_RETURN_IF_ERROR(registry.add(comparison_schema("GreaterOrEqual", 16, numeric_types(), "C = A >= B")));
  HXRT_RETURN_IF_ERROR(registry.add(comparison_schema("Less", 13, numeric_types(), "C = A < B")));
  HXRT_RETURN_IF_ERROR(registry.add(comparison_schema("LessOrEqual", 16, numeric_types(), "C = A <= B")));
  HXRT_RETURN_IF_ERROR(registry.add(binary_schema("And", 7, {DType::kBool}, infer_broadcast, "C = A and B")));
  HXRT_RETURN_IF_ERROR(registry.add(binary_schema("Or", 7, {DType::kBool}, infer_broadcast, "C = A or B")));
  HXRT_RETURN_IF_ERROR(registry.add(binary_schema("Xor", 7, {DType::kBool}, infer_broadcast, "C = A xor B")));

  OpSchema where;
  where.op_type = "Where";
  where.since_version = 16;
  where.inputs = {{.name = "condition", .type_var = "B"}, {.name = "X"}, {.name = "Y"}};
  where.outputs = {{.name = "output"}};
  where.type_constraints = {{"B", {DType::kBool}}, {"T", any_types()}};
  where.infer = infer_where;
  where.doc = "output = condition ? X : Y, numpy broadcasting of all three";
  HXRT_RETURN_IF_ERROR(registry.add(std::move(where)));

  OpSchema clip;
  clip.op_type = "Clip";
  clip.since_version = 13;
  clip.inputs = {{.name = "input"}, {.name = "min", .optional = true}, {.name = "max", .optional = true}};
  clip.outputs = {{.name = "output"}};
  clip.type_constraints = {{"T", numeric_types()}};
  clip.infer = infer_clip;
  clip.doc = "output = min(max(input, min), max); an omitted bound does not clip";
  HXRT_RETURN_IF_ERROR(registry.add(std::move(clip)));
  return ok_status();
}

}  // namespace hxrt::ops::schemas
