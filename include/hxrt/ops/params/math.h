// Params of the unary math ops and activations (docs/onnx_ops/math.md): Abs Acos Acosh Asin Asinh Atan Atanh Ceil
// Cos Cosh Erf Exp Floor Log Neg Reciprocal Round Sign Sin Sinh Sqrt Tan IsInf IsNaN Not Celu Elu Selu HardSigmoid
// HardSwish Shrink Softplus Softsign ThresholdedRelu.
//
// One table (unary_math_ops()) describes every op: its ONNX version (the newest <= 17), which dtypes it takes and
// returns, and its attributes with their defaults. The schemas, the parser and the kernels all read that table, so
// an op's default lives in one place.
//
// Thread-safety: the table and params are immutable; the functions are reentrant.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "hxrt/base/status.h"
#include "hxrt/graph/graph.h"
#include "hxrt/ops/params/common.h"

namespace hxrt::ops {

enum class UnaryMathOp : uint8_t {
  kAbs, kAcos, kAcosh, kAsin, kAsinh, kAtan, kAtanh, kCeil, kCos, kCosh, kErf, kExp, kFloor, kLog, kNeg,
  kReciprocal, kRound, kSign, kSin, kSinh, kSqrt, kTan, kIsInf, kIsNaN, kNot, kCelu, kElu, kSelu, kHardSigmoid,
  kHardSwish, kShrink, kSoftplus, kSoftsign, kThresholdedRelu,
};

// The dtypes an op takes (X) and returns (Y).
enum class UnaryMathKind : uint8_t {
  kFloat,        // f32 → f32
  kSigned,       // f32, i32, i64 → the same (Abs, Neg, Sign)
  kFloatToBool,  // f32 → bool (IsInf, IsNaN)
  kBool,         // bool → bool (Not)
};

// One attribute of a unary op: a float (an int converts), or an int flag 0/1 (IsInf).
struct UnaryMathAttr {
  std::string_view name;  // empty: unused slot
  graph::AttrType type = graph::AttrType::kFloat;
  double default_value = 0.0;
};

struct UnaryMathOpInfo {
  UnaryMathOp op;
  std::string_view op_type;
  int since_version;  // the newest ONNX version <= 17
  UnaryMathKind kind;
  // Up to two attributes; their values land in UnaryMathParams::alpha and ::beta, in this order.
  std::array<UnaryMathAttr, 2> attrs;
  std::string_view doc;  // the formula
};

// Every unary math op, in UnaryMathOp order.
std::span<const UnaryMathOpInfo> unary_math_ops();
const UnaryMathOpInfo& unary_math_op_info(UnaryMathOp op);
// The row of `op_type` (default domain); null for another op.
const UnaryMathOpInfo* find_unary_math_op(std::string_view op_type);

// The op and its attributes, in the table's order: Celu, Elu, ThresholdedRelu: alpha; HardSigmoid: alpha, beta;
// Selu: alpha, gamma; Shrink: lambd, bias; IsInf: detect_negative, detect_positive (0 or 1). Unused slots are 0.
struct UnaryMathParams final : TypedParams<UnaryMathParams> {
  static constexpr std::string_view kName = "UnaryMathParams";
  UnaryMathOp op = UnaryMathOp::kAbs;
  float alpha = 0.0f;
  float beta = 0.0f;
  std::string to_string() const override;  // "op=Selu,alpha=1.67326,gamma=1.0507"
};
// Reads the node's op type and attributes with their defaults. InvalidArgument naming the node and attribute for a
// non-finite float, Celu's alpha = 0, Shrink's negative lambd or an IsInf flag other than 0/1; NotFound for an op
// outside the table.
Result<UnaryMathParams> parse_unary_math_params(const graph::Node& node);

}  // namespace hxrt::ops
