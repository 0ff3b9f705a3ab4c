// Schemas of the unary math ops and activations (docs/onnx_ops/math.md): Abs Acos Acosh Asin Asinh Atan Atanh
// Ceil Cos Cosh Erf Exp Floor Log Neg Reciprocal Round Sign Sin Sinh Sqrt Tan IsInf IsNaN Not Celu Elu Selu
// HardSigmoid HardSwish Shrink Softplus Softsign ThresholdedRelu. One schema per row of unary_math_ops()
// (hxrt/ops/params/math.h), whose inference runs the kernels' parser.

#include <string>
#include <utility>
#include <vector>

#include "hxrt/ops/params/math.h"
#include "ops/schemas/schemas.h"

namespace hxrt::ops::schemas {

namespace {

Status infer_unary_math(InferenceContext& ctx) {
  HXRT_ASSIGN_OR_RETURN(const UnaryMathParams params, parse_unary_math_params(ctx.node()));
  graph::TensorDesc out = ctx.input(0);
  if (unary_math_op_info(params.op).kind == UnaryMathKind::kFloatToBool) out.dtype = DType::kBool;
  ctx.set_output(0, std::move(out));
  return ok_status();
}

OpSchema unary_math_schema(const UnaryMathOpInfo& info) {
  OpSchema s;
  s.op_type = std::string(info.op_type);
  s.since_version = info.since_version;
  s.inputs = {{.name = "X", .type_var = "T"}};
  s.outputs = {{.name = "Y", .type_var = info.kind == UnaryMathKind::kFloatToBool ? "T2" : "T"}};
  switch (info.kind) {
    case UnaryMathKind::kFloat: s.type_constraints = {{"T", {DType::kF32}}}; break;
    case UnaryMathKind::kSigned: s.type_constraints = {{"T", {DType::kF32, DType::kI32, DType::kI64}}}; break;
    case UnaryMathKind::kFloatToBool: s.type_constraints = {{"T", {DType::kF32}}, {"T2", {DType::kBool}}}; break;
    case UnaryMathKind::kBool: s.type_constraints = {{"T", {DType::kBool}}}; break;
  }
  for (const UnaryMathAttr& attr : info.attrs) {
    if (attr.name.empty()) continue;
    AttrSpec& spec = s.attrs.emplace_back();
    spec.name = std::string(attr.name);
    spec.type = attr.type;
    if (attr.type == graph::AttrType::kInt) {
      spec.default_value.emplace(static_cast<int64_t>(attr.default_value));
    } else {
      spec.default_value.emplace(attr.default_value);
    }
  }
  s.infer = infer_unary_math;
  s.doc = std::string(info.doc);
  return s;
}

}  // namespace

Status register_math(OpSchemaRegistry& registry) {
  for (const UnaryMathOpInfo& info : unary_math_ops()) {
    HXRT_RETURN_IF_ERROR(registry.add(unary_math_schema(info)));
  }
  return ok_status();
}

}  // namespace hxrt::ops::schemas
