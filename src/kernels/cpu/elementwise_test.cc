#include "kernels/cpu/elementwise.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "hxrt/base/float16.h"
#include "kernels/testing/infer_node.h"
#include "kernels/testing/kernel_harness.h"
#include "kernels/testing/test_data.h"
#include "ops/schemas/schemas.h"

namespace hxrt::kernels::cpu {
namespace {

using testing::HostTensor;
using testing::infer_node;
using testing::InferResult;
using testing::normalized_max_error;
using testing::OpCall;
using testing::random_values;
using testing::run_op;

double apply(BinaryOp op, double a, double b) {
  switch (op) {
    case BinaryOp::kAdd: return a + b;
    case BinaryOp::kSub: return a - b;
    case BinaryOp::kMul: return a * b;
    case BinaryOp::kDiv: return a / b;
  }
  return 0.0;
}

// Numpy broadcast of a and b in double, by index arithmetic.
std::vector<double> reference_binary(BinaryOp op, const std::vector<float>& a, const Shape& as,
                                     const std::vector<float>& b, const Shape& bs, const Shape& out) {
  std::vector<double> y(static_cast<size_t>(out.num_elements()));
  const int rank = out.rank();
  for (int64_t i = 0; i < out.num_elements(); ++i) {
    int64_t rest = i;
    int64_t ai = 0, bi = 0, a_stride = 1, b_stride = 1;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t idx = rest % out.dims()[d];
      rest /= out.dims()[d];
      const int da = d - (rank - as.rank());
      const int db = d - (rank - bs.rank());
      if (da >= 0) {
        const int64_t dim = as.dims()[da];
        ai += (dim == 1 ? 0 : idx) * a_stride;
        a_stride *= dim;
      }
      if (db >= 0) {
        const int64_t dim = bs.dims()[db];
        bi += (dim == 1 ? 0 : idx) * b_stride;
        b_stride *= dim;
      }
    }
    y[static_cast<size_t>(i)] = apply(op, a[static_cast<size_t>(ai)], b[static_cast<size_t>(bi)]);
  }
  return y;
}

struct BinaryCase {
  Shape a;
  Shape b;
  Shape out;
};

TEST(ElementwiseTest, BinaryOpsBroadcastAgainstReference) {
  std::mt19937 rng(7);
  const std::vector<BinaryCase> cases = {
      {{1}, {1}, {1}},
      {{17}, {17}, {17}},
      {{3, 5, 129}, {3, 5, 129}, {3, 5, 129}},
      {{17, 129}, {129}, {17, 129}},   // trailing vector (bias)
      {{129}, {17, 129}, {17, 129}},   // vector on the left (order matters for Sub and Div)
      {{3, 17}, {1}, {3, 17}},         // scalar on the right
      {{1, 1}, {3, 17}, {3, 17}},      // scalar on the left
      {{3, 1, 5}, {4, 1}, {3, 4, 5}},  // both operands stretch
      {{2, 1, 3, 1}, {1, 4, 1, 5}, {2, 4, 3, 5}},
      {{7, 1}, {7, 33}, {7, 33}},  // column broadcast: stride-0 inner loop
      {{1, 17}, {17}, {1, 17}},    // equal element counts, different ranks
      {{2, 3, 1, 4}, {3, 5, 1}, {2, 3, 5, 4}},
  };
  for (BinaryOp op : {BinaryOp::kAdd, BinaryOp::kSub, BinaryOp::kMul, BinaryOp::kDiv}) {
    for (const BinaryCase& c : cases) {
      const auto a = random_values(c.a.num_elements(), rng, 0.5f, 2.0f, true);
      const auto b = random_values(c.b.num_elements(), rng, 0.5f, 2.0f, true);
      OpCall call{.op_type = std::string(binary_op_name(op))};
      call.inputs = {HostTensor::f32(c.a, a), HostTensor::f32(c.b, b)};
      auto result = run_op(call);
      ASSERT_TRUE(result.ok()) << binary_op_name(op) << " " << c.a.to_string() << " " << c.b.to_string() << ": "
                               << result.status().to_string();
      const HostTensor& y = result->outputs[0];
      ASSERT_EQ(y.shape, c.out) << binary_op_name(op) << " " << c.a.to_string() << " " << c.b.to_string();
      EXPECT_LT(normalized_max_error(y.to_f32(), reference_binary(op, a, c.a, b, c.b, c.out)), 1e-6)
          << binary_op_name(op) << " " << c.a.to_string() << " " << c.b.to_string();
      EXPECT_EQ(result->kernel, fmt::format("{}F32", binary_op_name(op)));
    }
  }
}

TEST(ElementwiseTest, BroadcastPlanMergesDims) {
  // [2, 3, 4] + [4]: rows 6 of 4, b repeats each row.
  auto plan = BroadcastPlan::make(Shape{2, 3, 4}, Shape{4}, Shape{2, 3, 4});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->rank(), 2);
  EXPECT_EQ(plan->rows(), 6);
  EXPECT_EQ(plan->cols(), 4);
  EXPECT_EQ(plan->b_offset(5), 0);
  EXPECT_EQ(plan->a_offset(5), 20);
  // [2, 1, 5] op [1, 3, 1] → three merged dims; b is constant along each row.
  auto plan2 = BroadcastPlan::make(Shape{2, 1, 5}, Shape{1, 3, 1}, Shape{2, 3, 5});
  ASSERT_TRUE(plan2.ok());
  EXPECT_EQ(plan2->rank(), 3);
  EXPECT_EQ(plan2->b_inner_stride(), 0);
  EXPECT_EQ(plan2->a_inner_stride(), 1);
  EXPECT_EQ(plan2->b_offset(4), 1);  // row 4 = (1, 1)
  EXPECT_FALSE(BroadcastPlan::make(Shape{3}, Shape{4}, Shape{4}).ok());
}

TEST(ElementwiseTest, InPlaceBinaryMatchesOutOfPlace) {
  std::mt19937 rng(3);
  auto a = random_values(131, rng, 0.5f, 2.0f, true);
  const auto b = random_values(131, rng, 0.5f, 2.0f, true);
  std::vector<float> expected(131);
  binary_same_shape(BinaryOp::kSub, a.data(), b.data(), expected.data(), 131);
  binary_same_shape(BinaryOp::kSub, a.data(), b.data(), a.data(), 131);
  EXPECT_EQ(a, expected);
}

double reference_unary(UnaryOp op, double x) {
  switch (op) {
    case UnaryOp::kRelu: return x > 0 ? x : 0;
    case UnaryOp::kGeluErf: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case UnaryOp::kGeluTanh: return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case UnaryOp::kSigmoid: return 1.0 / (1.0 + std::exp(-x));
    case UnaryOp::kTanh: return std::tanh(x);
    case UnaryOp::kSilu: return x / (1.0 + std::exp(-x));
  }
  return 0.0;
}

struct UnaryCase {
  std::string op_type;
  std::string domain;
  graph::AttributeMap attrs;
  UnaryOp reference;
};

TEST(ElementwiseTest, ActivationsAgainstReference) {
  std::mt19937 rng(11);
  graph::AttributeMap gelu_none;
  gelu_none.set("approximate", "none");
  graph::AttributeMap gelu_tanh;
  gelu_tanh.set("approximate", "tanh");
  const std::vector<UnaryCase> cases = {
      {"Relu", "", {}, UnaryOp::kRelu},           {"Gelu", "", {}, UnaryOp::kGeluErf},
      {"Gelu", "", gelu_none, UnaryOp::kGeluErf}, {"Gelu", "", gelu_tanh, UnaryOp::kGeluTanh},
      {"Sigmoid", "", {}, UnaryOp::kSigmoid},     {"Tanh", "", {}, UnaryOp::kTanh},
      {"Silu", "hxrt", {}, UnaryOp::kSilu},
  };
  for (const UnaryCase& c : cases) {
    for (const Shape& shape : {Shape{1}, Shape{17}, Shape{3, 129}, Shape{5, 7, 9}}) {
      const auto x = random_values(shape.num_elements(), rng, 0.01f, 5.0f, true);
      OpCall call{.op_type = c.op_type, .domain = c.domain, .attrs = c.attrs};
      call.inputs = {HostTensor::f32(shape, x)};
      auto result = run_op(call);
      ASSERT_TRUE(result.ok()) << c.op_type << ": " << result.status().to_string();
      std::vector<double> expected;
      for (float v : x) expected.push_back(reference_unary(c.reference, v));
      EXPECT_EQ(result->outputs[0].shape, shape);
      EXPECT_LT(normalized_max_error(result->outputs[0].to_f32(), expected), 2e-6)
          << c.op_type << " " << c.attrs.to_string() << " " << shape.to_string();
    }
  }
}

TEST(ElementwiseTest, LeakyReluAgainstReference) {
  std::mt19937 rng(17);
  struct AlphaCase {
    std::optional<graph::Attribute> alpha;  // absent: the default 0.01
    double value;
  };
  const std::vector<AlphaCase> alphas = {{std::nullopt, 0.01},
                                         {graph::Attribute(0.2), 0.2},
                                         {graph::Attribute(-1.5), -1.5},
                                         {graph::Attribute(int64_t{3}), 3.0}};  // an int attribute converts
  for (const AlphaCase& a : alphas) {
    for (const Shape& shape : {Shape{1}, Shape{17}, Shape{3, 129}, Shape{5, 7, 9}, Shape{70001}}) {
      const auto x = random_values(shape.num_elements(), rng, 0.01f, 5.0f, true);
      OpCall call{.op_type = "LeakyRelu"};
      if (a.alpha) call.attrs.set("alpha", *a.alpha);
      call.inputs = {HostTensor::f32(shape, x)};
      auto result = run_op(call);
      ASSERT_TRUE(result.ok()) << result.status().to_string();
      EXPECT_EQ(result->kernel, "LeakyReluF32");
      EXPECT_EQ(result->outputs[0].shape, shape);
      const double alpha = static_cast<float>(a.value);  // the kernel multiplies by alpha rounded to f32
      std::vector<double> expected;
      for (float v : x) expected.push_back(v < 0 ? alpha * v : v);
      EXPECT_LT(normalized_max_error(result->outputs[0].to_f32(), expected), 1e-7)
          << "alpha " << a.value << " " << shape.to_string();
    }
  }
}

TEST(ElementwiseTest, LeakyReluRejectsANonFiniteAlpha) {
  OpCall call{.op_type = "LeakyRelu"};
  call.attrs.set("alpha", std::numeric_limits<double>::infinity());
  call.inputs = {HostTensor::f32(Shape{2}, {1.0f, -1.0f})};
  auto result = run_op(call);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(result.status().to_string().find("'alpha'"), std::string::npos) << result.status().to_string();
}

TEST(ElementwiseTest, ScalarHelpersMatchReference) {
  for (double x : {-6.0, -1.5, -0.3, 0.2, 0.9, 3.7}) {
    EXPECT_NEAR(silu(static_cast<float>(x)), reference_unary(UnaryOp::kSilu, x), 1e-6);
    EXPECT_NEAR(gelu_erf(static_cast<float>(x)), reference_unary(UnaryOp::kGeluErf, x), 1e-6);
    EXPECT_NEAR(gelu_tanh(static_cast<float>(x)), reference_unary(UnaryOp::kGeluTanh, x), 1e-6);
    EXPECT_NEAR(sigmoid(static_cast<float>(x)), reference_unary(UnaryOp::kSigmoid, x), 1e-7);
  }
}

// The SiLU, SwiGLU and sigmoid array paths (eight at a time on AVX2+FMA, Note [Vector SiLU]) give every element
// the scalar functions' bits: a dense sweep over [-100, 100] (past expf's overflow and underflow thresholds), signed
// zeros, infinities and NaN, at an odd length so the tail runs too.
TEST(ElementwiseTest, VectorSiluAndSigmoidGiveTheScalarBits) {
  std::vector<float> x;
  for (int i = -200000; i <= 200000; ++i) x.push_back(static_cast<float>(i) * 5e-4f);
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 88.7f, -88.7f, 103.9f, -103.9f, 1e30f, -1e30f,
                  std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min()}) {
    x.push_back(v);
  }
  if (x.size() % 8 == 0) x.push_back(0.75f);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  std::vector<float> up(x.size());
  for (float& u : up) u = dist(rng);
  const auto bits = [](float v) {
    uint32_t b;
    std::memcpy(&b, &v, 4);
    return b;
  };
  std::vector<float> y_silu(x.size()), y_mul(x.size()), y_sigmoid(x.size());
  silu(x.data(), y_silu.data(), static_cast<int64_t>(x.size()));
  silu_mul(x.data(), up.data(), y_mul.data(), static_cast<int64_t>(x.size()));
  unary(UnaryOp::kSigmoid, x.data(), y_sigmoid.data(), static_cast<int64_t>(x.size()));
  int mismatches = 0;
  for (size_t i = 0; i < x.size() && mismatches < 5; ++i) {
    const bool ok = bits(y_silu[i]) == bits(silu(x[i])) && bits(y_mul[i]) == bits(silu(x[i]) * up[i]) &&
                    bits(y_sigmoid[i]) == bits(sigmoid(x[i]));
    if (!ok) {
      ++mismatches;
      ADD_FAILURE() << "x=" << x[i] << ": silu " << y_silu[i] << " vs " << silu(x[i]) << ", swiglu " << y_mul[i]
                    << " vs " << silu(x[i]) * up[i] << ", sigmoid " << y_sigmoid[i] << " vs " << sigmoid(x[i]);
    }
  }
  // In place (y = x), as the graph's in-place reuse may run it.
  std::vector<float> in_place = x;
  silu_mul(in_place.data(), up.data(), in_place.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); i += 997) EXPECT_EQ(bits(in_place[i]), bits(y_mul[i])) << i;
}

// Note [Vector erf]: erf_array and the exact GELU array path against the double functions over a dense sweep of
// [-12, 12], tiny magnitudes and the special values, at an odd length for the tail. erf: within 4e-7 of |erf(x)|
// (1e-7 absolute where it is tiny); GELU: within 2e-6 of max(|GELU(x)|, 1e-6).
TEST(ElementwiseTest, VectorErfAndGeluAreWithinTheirBounds) {
  std::vector<float> x;
  for (int i = -240000; i <= 240000; ++i) x.push_back(static_cast<float>(i) * 5e-5f);
  for (float v : {1e-30f, -1e-30f, 1e-8f, -3e-6f, 0.49999997f, 0.5f, -0.5f, 9.4f, -9.6f, 30.0f, -30.0f, 1e30f,
                  -1e30f, -0.0f}) {
    x.push_back(v);
  }
  if (x.size() % 8 == 0) x.push_back(0.3f);
  std::vector<float> e(x.size()), g(x.size());
  erf_array(x.data(), e.data(), static_cast<int64_t>(x.size()));
  gelu(x.data(), g.data(), static_cast<int64_t>(x.size()), /*tanh_approximation=*/false);
  double worst_erf = 0.0, worst_gelu = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    const double erf_ref = std::erf(v);
    const double gelu_ref_v = 0.5 * v * std::erfc(-v / std::sqrt(2.0));
    worst_erf = std::max(worst_erf, std::abs(e[i] - erf_ref) / std::max(std::abs(erf_ref), 0.25));
    worst_gelu = std::max(worst_gelu, std::abs(g[i] - gelu_ref_v) / std::max(std::abs(gelu_ref_v), 1e-6));
    ASSERT_LE(std::abs(e[i] - erf_ref), std::max(4e-7 * std::abs(erf_ref), 1e-7)) << "erf(" << x[i] << ") = " << e[i];
    ASSERT_LE(std::abs(g[i] - gelu_ref_v), 2e-6 * std::max(std::abs(gelu_ref_v), 1e-6))
        << "gelu(" << x[i] << ") = " << g[i] << " vs " << gelu_ref_v;
  }
  const float specials[] = {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN()};
  float se[3], sg[3];
  erf_array(specials, se, 3);
  gelu(specials, sg, 3, false);
  EXPECT_EQ(se[0], 1.0f);
  EXPECT_EQ(se[1], -1.0f);
  EXPECT_TRUE(std::isnan(se[2]));
  EXPECT_EQ(sg[0], std::numeric_limits<float>::infinity());
  EXPECT_EQ(sg[1], 0.0f);
  EXPECT_TRUE(std::isnan(sg[2]));
  RecordProperty("worst_erf_relative", std::to_string(worst_erf));
  RecordProperty("worst_gelu_relative", std::to_string(worst_gelu));
  std::printf("erf worst %.3g, gelu worst %.3g\n", worst_erf, worst_gelu);
}

// The GELU-tanh array path (vectorised where the CPU has AVX2+FMA, Note [Vector GELU]) over a dense sweep of
// [-12, 12], tiny and huge magnitudes, and an odd length for the tail: within a few float ulps of the double
// reference, relative to max(|gelu(x)|, 1e-3 |x|).
TEST(ElementwiseTest, GeluTanhArraysMatchTheDoubleReference) {
  std::vector<float> x;
  for (int i = -120000; i <= 120000; ++i) x.push_back(static_cast<float>(i) * 1e-4f);
  for (float v : {1e-30f, -1e-30f, 1e-8f, -1e-8f, 30.0f, -30.0f, 100.0f, -100.0f, 1e30f, -1e30f, 0.0f}) x.push_back(v);
  x.push_back(7.5f);  // odd count: the scalar tail
  std::vector<float> y(x.size());
  gelu(x.data(), y.data(), static_cast<int64_t>(x.size()), /*tanh_approximation=*/true);
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = reference_unary(UnaryOp::kGeluTanh, x[i]);
    const double scale = std::max(std::fabs(want), 1e-3 * std::fabs(double{x[i]}));
    if (scale == 0) {
      EXPECT_EQ(y[i], 0.0f) << x[i];
      continue;
    }
    worst = std::max(worst, std::fabs(y[i] - want) / scale);
  }
  EXPECT_LT(worst, 1e-6);
}

// ---- Cast ----

HostTensor cast_of(const HostTensor& x, int64_t to) {
  OpCall call{.op_type = "Cast"};
  call.attrs.set("to", to);
  call.inputs = {x};
  auto result = run_op(call);
  EXPECT_TRUE(result.ok()) << result.status().to_string();
  return result.ok() ? result->outputs[0] : HostTensor{};
}

TEST(ElementwiseTest, CastFloatToEveryType) {
  const std::vector<float> x = {
      -2.7f, -1.0f, -0.5f, 0.25f, 1.5f, 2.7f, 300.0f, -300.0f, 65504.0f, 1e6f, std::numeric_limits<float>::quiet_NaN()};
  const HostTensor in = HostTensor::f32(Shape{static_cast<int64_t>(x.size())}, x);

  const HostTensor i32 = cast_of(in, 6);
  EXPECT_EQ(i32.dtype, DType::kI32);
  EXPECT_EQ(i32.to_i64(), (std::vector<int64_t>{-2, -1, 0, 0, 1, 2, 300, -300, 65504, 1000000, 0}));
  const HostTensor i8 = cast_of(in, 3);
  EXPECT_EQ(i8.dtype, DType::kI8);
  EXPECT_EQ(i8.to_i64(), (std::vector<int64_t>{-2, -1, 0, 0, 1, 2, 127, -128, 127, 127, 0}));  // saturates
  const HostTensor u8 = cast_of(in, 2);
  EXPECT_EQ(u8.to_i64(), (std::vector<int64_t>{0, 0, 0, 0, 1, 2, 255, 0, 255, 255, 0}));
  const HostTensor i64 = cast_of(in, 7);
  EXPECT_EQ(i64.to_i64(), (std::vector<int64_t>{-2, -1, 0, 0, 1, 2, 300, -300, 65504, 1000000, 0}));
  const HostTensor b = cast_of(in, 9);
  EXPECT_EQ(b.dtype, DType::kBool);
  EXPECT_EQ(b.to_i64(), (std::vector<int64_t>{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}));

  const HostTensor f16 = cast_of(in, 10);
  ASSERT_EQ(f16.dtype, DType::kF16);
  const HostTensor bf16 = cast_of(in, 16);
  ASSERT_EQ(bf16.dtype, DType::kBF16);
  for (size_t i = 0; i < x.size(); ++i) {
    uint16_t h, bh;
    std::memcpy(&h, f16.bytes.data() + 2 * i, 2);
    std::memcpy(&bh, bf16.bytes.data() + 2 * i, 2);
    if (std::isnan(x[i])) {
      EXPECT_TRUE(std::isnan(f16_to_f32(h)));
      EXPECT_TRUE(std::isnan(bf16_to_f32(bh)));
    } else {
      EXPECT_EQ(h, f32_to_f16(x[i])) << x[i];
      EXPECT_EQ(bh, f32_to_bf16(x[i])) << x[i];
    }
  }
  // f16 → f32 round trip of exactly representable values.
  const HostTensor back = cast_of(f16, 1);
  EXPECT_EQ(back.dtype, DType::kF32);
  EXPECT_EQ(back.to_f32()[0], f16_to_f32(f32_to_f16(-2.7f)));
  EXPECT_EQ(back.to_f32()[6], 300.0f);
  EXPECT_TRUE(std::isinf(back.to_f32()[9]));  // 1e6 overflows f16
}

TEST(ElementwiseTest, CastIntegersAndBool) {
  const HostTensor i64 = HostTensor::i64(Shape{5}, {-3, 0, 7, 300, -129});
  EXPECT_EQ(cast_of(i64, 1).to_f32(), (std::vector<float>{-3, 0, 7, 300, -129}));
  EXPECT_EQ(cast_of(i64, 9).to_i64(), (std::vector<int64_t>{1, 0, 1, 1, 1}));
  EXPECT_EQ(cast_of(i64, 3).to_i64(), (std::vector<int64_t>{-3, 0, 7, 44, 127}));  // wraps as numpy
  const HostTensor i32 = HostTensor::i32(Shape{3}, {-1, 2, 65536});
  EXPECT_EQ(cast_of(i32, 7).to_i64(), (std::vector<int64_t>{-1, 2, 65536}));
  const HostTensor flags = HostTensor::raw(DType::kBool, Shape{3}, {std::byte{1}, std::byte{0}, std::byte{1}});
  EXPECT_EQ(cast_of(flags, 1).to_f32(), (std::vector<float>{1, 0, 1}));
  EXPECT_EQ(cast_of(flags, 6).to_i64(), (std::vector<int64_t>{1, 0, 1}));
  // Same type: a copy.
  EXPECT_EQ(cast_of(i32, 6).to_i64(), (std::vector<int64_t>{-1, 2, 65536}));
}

TEST(ElementwiseTest, CastFunctionRejectsQuantized) {
  float x = 1.0f;
  std::byte y[64];
  EXPECT_FALSE(cast(DType::kF32, &x, DType::kQ8_0, y, 1).ok());
  EXPECT_TRUE(is_cast_dtype(DType::kBool));
  EXPECT_FALSE(is_cast_dtype(DType::kQ4_1));
}

// ---- Errors caught by the schema ----

TEST(ElementwiseTest, SchemaErrorsNameNodeAndField) {
  std::mt19937 rng(5);
  {
    OpCall call{.op_type = "Add"};
    call.inputs = {HostTensor::random_f32(Shape{3, 4}, rng), HostTensor::random_f32(Shape{5}, rng)};
    auto result = run_op(call);
    ASSERT_FALSE(result.ok());
    EXPECT_NE(result.status().to_string().find("broadcast"), std::string::npos) << result.status().to_string();
    EXPECT_NE(result.status().to_string().find("'op'"), std::string::npos) << result.status().to_string();
  }
  {
    OpCall call{.op_type = "Mul"};
    call.inputs = {HostTensor::i64(Shape{2}, {1, 2}), HostTensor::f32(Shape{2}, {3, 4})};
    auto result = run_op(call);
    ASSERT_FALSE(result.ok());
    EXPECT_NE(result.status().to_string().find("dtype"), std::string::npos) << result.status().to_string();
  }
  {
    OpCall call{.op_type = "Gelu"};
    call.attrs.set("approximate", "fast");
    call.inputs = {HostTensor::random_f32(Shape{3}, rng)};
    auto result = run_op(call);
    ASSERT_FALSE(result.ok());
    EXPECT_NE(result.status().to_string().find("approximate"), std::string::npos) << result.status().to_string();
  }
  {
    OpCall call{.op_type = "Cast"};
    call.attrs.set("to", int64_t{99});
    call.inputs = {HostTensor::random_f32(Shape{3}, rng)};
    auto result = run_op(call);
    ASSERT_FALSE(result.ok());
    EXPECT_NE(result.status().to_string().find("'to'"), std::string::npos) << result.status().to_string();
  }
  {
    OpCall call{.op_type = "Cast"};  // `to` is required
    call.inputs = {HostTensor::random_f32(Shape{3}, rng)};
    EXPECT_FALSE(run_op(call).ok());
  }
}

// ---- Symbolic shape inference ----

InferResult infer(const std::string& op_type, const std::vector<graph::TensorDesc>& inputs,
                  graph::AttributeMap attrs = {}, const std::string& domain = "") {
  return infer_node(op_type, domain, testing::graph_inputs(inputs), std::move(attrs));
}

graph::Dim sym(const char* name) {
  return graph::Dim::symbol(name);
}

TEST(ElementwiseTest, SymbolicBroadcastInference) {
  const graph::TensorDesc x{DType::kF32, {sym("n_tokens"), 576}};
  // Bias over the last axis keeps the symbolic dim.
  InferResult bias = infer("Add", {x, {DType::kF32, {576}}});
  ASSERT_TRUE(bias.status.ok()) << bias.status.to_string();
  EXPECT_EQ(bias.desc, "f32[n_tokens, 576]");
  EXPECT_TRUE(bias.checks.empty());
  // A [1, 1] operand stretches to the symbolic dim.
  InferResult scalar = infer("Div", {{DType::kF32, {1, 1}}, x});
  ASSERT_TRUE(scalar.status.ok());
  EXPECT_EQ(scalar.desc, "f32[n_tokens, 576]");
  // Two different symbols must match at run time: one recorded check.
  InferResult two = infer("Mul", {x, {DType::kF32, {sym("m"), 576}}});
  ASSERT_TRUE(two.status.ok());
  EXPECT_EQ(two.desc, "f32[n_tokens, 576]");
  ASSERT_EQ(two.checks.size(), 1u);
  // A symbolic dim against a static one takes the static dim and records a check.
  InferResult fixed = infer("Sub", {x, {DType::kF32, {5, 1}}});
  ASSERT_TRUE(fixed.status.ok());
  EXPECT_EQ(fixed.desc, "f32[5, 576]");
  EXPECT_EQ(fixed.checks.size(), 1u);
  // Static mismatch fails at planning.
  EXPECT_FALSE(infer("Add", {x, {DType::kF32, {575}}}).status.ok());
  // Unary and Cast keep the shape.
  EXPECT_EQ(infer("Silu", {x}, {}, "hxrt").desc, "f32[n_tokens, 576]");
  graph::AttributeMap to_f16;
  to_f16.set("to", int64_t{10});
  EXPECT_EQ(infer("Cast", {x}, to_f16).desc, "f16[n_tokens, 576]");
}

}  // namespace
}  // namespace hxrt::kernels::cpu
