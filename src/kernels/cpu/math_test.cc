#include "kernels/cpu/math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "hxrt/ops/params/math.h"
#include "kernels/testing/kernel_harness.h"
#include "kernels/testing/test_data.h"

namespace hxrt::kernels::cpu {
namespace {

using ops::UnaryMathOp;
using testing::HostTensor;
using testing::normalized_max_error;
using testing::OpCall;
using testing::random_values;
using testing::run_op;

struct Domain {
  float lo;
  float hi;
  bool signed_values;
};

// Inputs inside each op's domain, crossing its interesting points (0, ±alpha, ±lambd).
Domain domain_of(UnaryMathOp op) {
  switch (op) {
    case UnaryMathOp::kAcos:
    case UnaryMathOp::kAsin:
    case UnaryMathOp::kAtanh: return {0.01f, 0.99f, true};
    case UnaryMathOp::kAcosh: return {1.0f, 6.0f, false};
    case UnaryMathOp::kLog:
    case UnaryMathOp::kSqrt: return {0.01f, 8.0f, false};
    case UnaryMathOp::kTan: return {0.01f, 1.4f, true};
    default: return {0.01f, 5.0f, true};
  }
}

// The ops in double, with the params the kernel parsed (alpha and beta as f32, as the kernel uses them).
double reference(const ops::UnaryMathParams& p, double x) {
  const double a = p.alpha;
  const double b = p.beta;
  switch (p.op) {
    case UnaryMathOp::kAbs: return std::fabs(x);
    case UnaryMathOp::kAcos: return std::acos(x);
    case UnaryMathOp::kAcosh: return std::acosh(x);
    case UnaryMathOp::kAsin: return std::asin(x);
    case UnaryMathOp::kAsinh: return std::asinh(x);
    case UnaryMathOp::kAtan: return std::atan(x);
    case UnaryMathOp::kAtanh: return std::atanh(x);
    case UnaryMathOp::kCeil: return std::ceil(x);
    case UnaryMathOp::kCos: return std::cos(x);
    case UnaryMathOp::kCosh: return std::cosh(x);
    case UnaryMathOp::kErf: return std::erf(x);
    case UnaryMathOp::kExp: return std::exp(x);
    case UnaryMathOp::kFloor: return std::floor(x);
    case UnaryMathOp::kLog: return std::log(x);
    case UnaryMathOp::kNeg: return -x;
    case UnaryMathOp::kReciprocal: return 1.0 / x;
    case UnaryMathOp::kRound: return std::nearbyint(x);
    case UnaryMathOp::kSign: return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0;
    case UnaryMathOp::kSin: return std::sin(x);
    case UnaryMathOp::kSinh: return std::sinh(x);
    case UnaryMathOp::kSqrt: return std::sqrt(x);
    case UnaryMathOp::kTan: return std::tan(x);
    case UnaryMathOp::kCelu: return std::max(0.0, x) + std::min(0.0, a * (std::exp(x / a) - 1.0));
    case UnaryMathOp::kElu: return x < 0 ? a * (std::exp(x) - 1.0) : x;
    case UnaryMathOp::kSelu: return x > 0 ? b * x : b * (a * std::exp(x) - a);
    case UnaryMathOp::kHardSigmoid: return std::max(0.0, std::min(1.0, a * x + b));
    case UnaryMathOp::kHardSwish: return x * std::max(0.0, std::min(1.0, x / 6.0 + 0.5));
    case UnaryMathOp::kShrink: return x < -a ? x + b : x > a ? x - b : 0.0;
    case UnaryMathOp::kSoftplus: return std::log(1.0 + std::exp(x));
    case UnaryMathOp::kSoftsign: return x / (1.0 + std::fabs(x));
    case UnaryMathOp::kThresholdedRelu: return x > a ? x : 0.0;
    case UnaryMathOp::kIsInf:
    case UnaryMathOp::kIsNaN:
    case UnaryMathOp::kNot: break;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

// Explicit attribute values for the ops that have attributes (the defaults are the other run).
graph::AttributeMap explicit_attrs(UnaryMathOp op) {
  graph::AttributeMap attrs;
  switch (op) {
    case UnaryMathOp::kCelu: attrs.set("alpha", 2.0); break;
    case UnaryMathOp::kElu: attrs.set("alpha", 0.7); break;
    case UnaryMathOp::kSelu:
      attrs.set("alpha", 2.0);
      attrs.set("gamma", 3.0);
      break;
    case UnaryMathOp::kHardSigmoid:
      attrs.set("alpha", 0.5);
      attrs.set("beta", 0.6);
      break;
    case UnaryMathOp::kShrink:
      attrs.set("lambd", 1.5);
      attrs.set("bias", 1.5);
      break;
    case UnaryMathOp::kThresholdedRelu: attrs.set("alpha", int64_t{2}); break;  // an int attribute converts
    default: break;
  }
  return attrs;
}

TEST(MathTest, FloatOpsAgainstReference) {
  std::mt19937 rng(23);
  for (const ops::UnaryMathOpInfo& info : ops::unary_math_ops()) {
    if (info.kind == ops::UnaryMathKind::kFloatToBool || info.kind == ops::UnaryMathKind::kBool) continue;
    for (const graph::AttributeMap& attrs : {graph::AttributeMap{}, explicit_attrs(info.op)}) {
      graph::Node node;
      node.op_type = std::string(info.op_type);
      node.attrs = attrs;
      auto params = ops::parse_unary_math_params(node);
      ASSERT_TRUE(params.ok()) << params.status().to_string();
      const Domain d = domain_of(info.op);
      for (const Shape& shape : {Shape{1}, Shape{17}, Shape{3, 129}, Shape{5, 7, 9}, Shape{40001}}) {
        const auto x = random_values(shape.num_elements(), rng, d.lo, d.hi, d.signed_values);
        OpCall call{.op_type = std::string(info.op_type), .attrs = attrs};
        call.inputs = {HostTensor::f32(shape, x)};
        auto result = run_op(call);
        ASSERT_TRUE(result.ok()) << info.op_type << ": " << result.status().to_string();
        EXPECT_EQ(result->kernel, info.op_type);
        ASSERT_EQ(result->outputs[0].shape, shape);
        std::vector<double> expected;
        for (float v : x) expected.push_back(reference(*params, v));
        EXPECT_LT(normalized_max_error(result->outputs[0].to_f32(), expected), 4e-6)
            << info.op_type << " " << attrs.to_string() << " " << shape.to_string();
      }
    }
  }
}

TEST(MathTest, RoundHalvesToEvenAndSignKeepsZero) {
  const std::vector<float> x = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.4f, -2.6f, 0.0f};
  OpCall round{.op_type = "Round"};
  round.inputs = {HostTensor::f32(Shape{8}, x)};
  auto r = run_op(round);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->outputs[0].to_f32(), (std::vector<float>{0, 2, 2, -0.0f, -2, 2, -3, 0}));
  OpCall sign{.op_type = "Sign"};
  sign.inputs = {HostTensor::f32(Shape{8}, x)};
  auto s = run_op(sign);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->outputs[0].to_f32(), (std::vector<float>{1, 1, 1, -1, -1, 1, -1, 0}));
}

TEST(MathTest, IntegerAbsNegSign) {
  const std::vector<int64_t> x = {-7, 3, 0, std::numeric_limits<int64_t>::min(), 12, -1};
  const int64_t min = std::numeric_limits<int64_t>::min();
  struct Case {
    const char* op;
    std::vector<int64_t> expected;
  };
  const std::vector<Case> cases = {{"Abs", {7, 3, 0, min, 12, 1}},  // |min| wraps to min, as numpy
                                   {"Neg", {7, -3, 0, min, -12, 1}},
                                   {"Sign", {-1, 1, 0, -1, 1, -1}}};
  for (const Case& c : cases) {
    OpCall call{.op_type = c.op};
    call.inputs = {HostTensor::i64(Shape{2, 3}, x)};
    auto result = run_op(call);
    ASSERT_TRUE(result.ok()) << c.op << ": " << result.status().to_string();
    EXPECT_EQ(result->outputs[0].dtype, DType::kI64);
    EXPECT_EQ(result->outputs[0].to_i64(), c.expected) << c.op;
    OpCall narrow{.op_type = c.op};
    narrow.inputs = {HostTensor::i32(Shape{3}, {-5, 0, 9})};
    auto r32 = run_op(narrow);
    ASSERT_TRUE(r32.ok()) << c.op << ": " << r32.status().to_string();
    EXPECT_EQ(r32->outputs[0].dtype, DType::kI32);
  }
  OpCall floor{.op_type = "Floor"};  // f32 only
  floor.inputs = {HostTensor::i64(Shape{1}, {1})};
  EXPECT_FALSE(run_op(floor).ok());
}

TEST(MathTest, IsInfIsNaNAndNot) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const HostTensor x = HostTensor::f32(Shape{6}, {-1.2f, nan, inf, 2.8f, -inf, inf});
  struct Case {
    const char* op;
    graph::AttributeMap attrs;
    std::vector<int64_t> expected;
  };
  graph::AttributeMap no_negative;
  no_negative.set("detect_negative", int64_t{0});
  graph::AttributeMap no_positive;
  no_positive.set("detect_positive", int64_t{0});
  const std::vector<Case> cases = {{"IsInf", {}, {0, 0, 1, 0, 1, 1}},
                                   {"IsInf", no_negative, {0, 0, 1, 0, 0, 1}},
                                   {"IsInf", no_positive, {0, 0, 0, 0, 1, 0}},
                                   {"IsNaN", {}, {0, 1, 0, 0, 0, 0}}};
  for (const Case& c : cases) {
    OpCall call{.op_type = c.op, .attrs = c.attrs};
    call.inputs = {x};
    auto result = run_op(call);
    ASSERT_TRUE(result.ok()) << c.op << ": " << result.status().to_string();
    EXPECT_EQ(result->outputs[0].dtype, DType::kBool);
    EXPECT_EQ(result->outputs[0].to_i64(), c.expected) << c.op << " " << c.attrs.to_string();
  }
  std::mt19937 rng(5);
  std::vector<std::byte> flags(70007);
  for (std::byte& f : flags) f = static_cast<std::byte>(rng() % 2);
  OpCall call{.op_type = "Not"};
  call.inputs = {HostTensor::raw(DType::kBool, Shape{7, 10001}, flags)};
  auto result = run_op(call);
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  const std::vector<int64_t> y = result->outputs[0].to_i64();
  for (size_t i = 0; i < flags.size(); ++i) ASSERT_EQ(y[i], flags[i] == std::byte{0} ? 1 : 0) << i;
}

TEST(MathTest, BadAttributesAreNamed) {
  struct Case {
    const char* op;
    const char* attr;
    graph::Attribute value;
  };
  const std::vector<Case> cases = {{"Celu", "alpha", graph::Attribute(0.0)},
                                   {"Elu", "alpha", graph::Attribute(std::numeric_limits<double>::infinity())},
                                   {"Shrink", "lambd", graph::Attribute(-1.0)},
                                   {"IsInf", "detect_negative", graph::Attribute(int64_t{2})},
                                   {"Selu", "gamma", graph::Attribute(std::numeric_limits<double>::quiet_NaN())}};
  for (const Case& c : cases) {
    OpCall call{.op_type = c.op};
    call.attrs.set(c.attr, c.value);
    call.inputs = {HostTensor::f32(Shape{2}, {1.0f, -1.0f})};
    auto result = run_op(call);
    ASSERT_FALSE(result.ok()) << c.op;
    EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument) << result.status().to_string();
    EXPECT_NE(result.status().to_string().find(fmt::format("'{}'", c.attr)), std::string::npos)
        << result.status().to_string();
  }
}

TEST(MathTest, ParamsToStringNamesAttributes) {
  graph::Node node;
  node.op_type = "Shrink";
  node.attrs.set("lambd", 1.5);
  auto params = ops::parse_unary_math_params(node);
  ASSERT_TRUE(params.ok());
  EXPECT_EQ(params->to_string(), "op=Shrink,lambd=1.5,bias=0");
  node.op_type = "Nope";
  EXPECT_FALSE(ops::parse_unary_math_params(node).ok());
}

}  // namespace
}  // namespace hxrt::kernels::cpu
