#include "hxrt/ops/params/math.h"

#include <cmath>

#include <fmt/format.h>

namespace hxrt::ops {

namespace {

using graph::AttrType;
using K = UnaryMathKind;

// Selu's defaults are the float32 constants ONNX gives.
constexpr double kSeluAlpha = 1.67326319217681884765625;
constexpr double kSeluGamma = 1.05070102214813232421875;

constexpr std::array<UnaryMathOpInfo, 34> kOps = {{
    {UnaryMathOp::kAbs, "Abs", 13, K::kSigned, {}, "Y = |X|"},
    {UnaryMathOp::kAcos, "Acos", 7, K::kFloat, {}, "Y = acos(X)"},
    {UnaryMathOp::kAcosh, "Acosh", 9, K::kFloat, {}, "Y = acosh(X)"},
    {UnaryMathOp::kAsin, "Asin", 7, K::kFloat, {}, "Y = asin(X)"},
    {UnaryMathOp::kAsinh, "Asinh", 9, K::kFloat, {}, "Y = asinh(X)"},
    {UnaryMathOp::kAtan, "Atan", 7, K::kFloat, {}, "Y = atan(X)"},
    {UnaryMathOp::kAtanh, "Atanh", 9, K::kFloat, {}, "Y = atanh(X)"},
    {UnaryMathOp::kCeil, "Ceil", 13, K::kFloat, {}, "Y = ceil(X)"},
    {UnaryMathOp::kCos, "Cos", 7, K::kFloat, {}, "Y = cos(X)"},
    {UnaryMathOp::kCosh, "Cosh", 9, K::kFloat, {}, "Y = cosh(X)"},
    {UnaryMathOp::kErf, "Erf", 13, K::kFloat, {}, "Y = erf(X)"},
    {UnaryMathOp::kExp, "Exp", 13, K::kFloat, {}, "Y = exp(X)"},
    {UnaryMathOp::kFloor, "Floor", 13, K::kFloat, {}, "Y = floor(X)"},
    {UnaryMathOp::kLog, "Log", 13, K::kFloat, {}, "Y = ln(X)"},
    {UnaryMathOp::kNeg, "Neg", 13, K::kSigned, {}, "Y = -X"},
    {UnaryMathOp::kReciprocal, "Reciprocal", 13, K::kFloat, {}, "Y = 1 / X"},
    {UnaryMathOp::kRound, "Round", 11, K::kFloat, {}, "Y = X rounded to the nearest integer, halves to even"},
    {UnaryMathOp::kSign, "Sign", 13, K::kSigned, {}, "Y = 1 for X > 0, -1 for X < 0, 0 for 0 (NaN stays NaN)"},
    {UnaryMathOp::kSin, "Sin", 7, K::kFloat, {}, "Y = sin(X)"},
    {UnaryMathOp::kSinh, "Sinh", 9, K::kFloat, {}, "Y = sinh(X)"},
    {UnaryMathOp::kSqrt, "Sqrt", 13, K::kFloat, {}, "Y = sqrt(X)"},
    {UnaryMathOp::kTan, "Tan", 7, K::kFloat, {}, "Y = tan(X)"},
    {UnaryMathOp::kIsInf,
     "IsInf",
     10,
     K::kFloatToBool,
     {{{"detect_negative", AttrType::kInt, 1.0}, {"detect_positive", AttrType::kInt, 1.0}}},
     "Y = X is -inf (when detect_negative) or +inf (when detect_positive)"},
    {UnaryMathOp::kIsNaN, "IsNaN", 13, K::kFloatToBool, {}, "Y = X is NaN"},
    {UnaryMathOp::kNot, "Not", 1, K::kBool, {}, "Y = !X"},
    {UnaryMathOp::kCelu,
     "Celu",
     12,
     K::kFloat,
     {{{"alpha", AttrType::kFloat, 1.0}, {}}},
     "Y = max(0, X) + min(0, alpha * (exp(X / alpha) - 1))"},
    {UnaryMathOp::kElu,
     "Elu",
     6,
     K::kFloat,
     {{{"alpha", AttrType::kFloat, 1.0}, {}}},
     "Y = X for X >= 0, alpha * (exp(X) - 1) for X < 0"},
    {UnaryMathOp::kSelu,
     "Selu",
     6,
     K::kFloat,
     {{{"alpha", AttrType::kFloat, kSeluAlpha}, {"gamma", AttrType::kFloat, kSeluGamma}}},
     "Y = gamma * X for X > 0, gamma * alpha * (exp(X) - 1) for X <= 0"},
    {UnaryMathOp::kHardSigmoid,
     "HardSigmoid",
     6,
     K::kFloat,
     {{{"alpha", AttrType::kFloat, 0.2}, {"beta", AttrType::kFloat, 0.5}}},
     "Y = max(0, min(1, alpha * X + beta))"},
    {UnaryMathOp::kHardSwish, "HardSwish", 14, K::kFloat, {}, "Y = X * max(0, min(1, X / 6 + 0.5))"},
    {UnaryMathOp::kShrink,
     "Shrink",
     9,
     K::kFloat,
     {{{"lambd", AttrType::kFloat, 0.5}, {"bias", AttrType::kFloat, 0.0}}},
     "Y = X + bias for X < -lambd, X - bias for X > lambd, 0 otherwise"},
    {UnaryMathOp::kSoftplus, "Softplus", 1, K::kFloat, {}, "Y = ln(1 + exp(X))"},
    {UnaryMathOp::kSoftsign, "Softsign", 1, K::kFloat, {}, "Y = X / (1 + |X|)"},
    {UnaryMathOp::kThresholdedRelu,
     "ThresholdedRelu",
     10,
     K::kFloat,
     {{{"alpha", AttrType::kFloat, 1.0}, {}}},
     "Y = X for X > alpha, 0 otherwise"},
}};

constexpr bool table_in_enum_order() {
  for (size_t i = 0; i < kOps.size(); ++i) {
    if (static_cast<size_t>(kOps[i].op) != i) return false;
  }
  return true;
}
static_assert(table_in_enum_order(), "kOps must list the ops in UnaryMathOp order");

Result<float> read_attr(const graph::Node& node, const UnaryMathAttr& spec) {
  if (spec.type == AttrType::kInt) {
    Result<int64_t> flag = node.attrs.get_int(spec.name, static_cast<int64_t>(spec.default_value));
    if (!flag.ok()) return attr_read_error(node, spec.name, flag.status());
    if (*flag != 0 && *flag != 1) return attr_error(node, spec.name, fmt::format("= {} must be 0 or 1", *flag));
    return static_cast<float>(*flag);
  }
  Result<double> value = node.attrs.get_float(spec.name, spec.default_value);
  if (!value.ok()) return attr_read_error(node, spec.name, value.status());
  const auto f = static_cast<float>(*value);
  if (!std::isfinite(f)) return attr_error(node, spec.name, fmt::format("= {} must be finite", *value));
  return f;
}

}  // namespace

std::span<const UnaryMathOpInfo> unary_math_ops() {
  return kOps;
}

const UnaryMathOpInfo& unary_math_op_info(UnaryMathOp op) {
  return kOps[static_cast<size_t>(op)];
}

const UnaryMathOpInfo* find_unary_math_op(std::string_view op_type) {
  for (const UnaryMathOpInfo& info : kOps) {
    if (info.op_type == op_type) return &info;
  }
  return nullptr;
}

std::string UnaryMathParams::to_string() const {
  const UnaryMathOpInfo& info = unary_math_op_info(op);
  std::string out = fmt::format("op={}", info.op_type);
  if (!info.attrs[0].name.empty()) out += fmt::format(",{}={}", info.attrs[0].name, alpha);
  if (!info.attrs[1].name.empty()) out += fmt::format(",{}={}", info.attrs[1].name, beta);
  return out;
}

Result<UnaryMathParams> parse_unary_math_params(const graph::Node& node) {
  const UnaryMathOpInfo* info = node.domain.empty() ? find_unary_math_op(node.op_type) : nullptr;
  if (info == nullptr) return not_found("{}: not a unary math op", node_label(node));
  UnaryMathParams params;
  params.op = info->op;
  if (!info->attrs[0].name.empty()) {
    HXRT_ASSIGN_OR_RETURN(params.alpha, read_attr(node, info->attrs[0]));
  }
  if (!info->attrs[1].name.empty()) {
    HXRT_ASSIGN_OR_RETURN(params.beta, read_attr(node, info->attrs[1]));
  }
  if (info->op == UnaryMathOp::kCelu && params.alpha == 0.0f) {
    return attr_error(node, "alpha", "must not be 0 (Celu divides by it)");
  }
  if (info->op == UnaryMathOp::kShrink && params.alpha < 0.0f) {
    return attr_error(node, "lambd", fmt::format("= {} must be >= 0", params.alpha));
  }
  return params;
}

}  // namespace hxrt::ops
