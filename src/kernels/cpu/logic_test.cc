#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

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
using testing::random_bools;
using testing::random_values;
using testing::run_op;

// Nonzero integers in [-range, range].
std::vector<int64_t> random_ints(int64_t n, std::mt19937& rng, int64_t range) {
  std::uniform_int_distribution<int64_t> dist(1, range);
  std::bernoulli_distribution sign(0.5);
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t& x : v) x = dist(rng) * (sign(rng) ? -1 : 1);
  return v;
}

// The element of an operand of shape `in` that output element `i` of shape `out` reads under numpy broadcasting.
int64_t source_index(int64_t i, const Shape& in, const Shape& out) {
  int64_t index = 0;
  int64_t stride = 1;
  for (int d = out.rank() - 1; d >= 0; --d) {
    const int64_t coord = i % out.dims()[d];
    i /= out.dims()[d];
    const int di = d - (out.rank() - in.rank());
    if (di < 0) continue;
    const int64_t dim = in.dims()[di];
    index += (dim == 1 ? 0 : coord) * stride;
    stride *= dim;
  }
  return index;
}

// y[i] = f(a[.], b[.]) by index arithmetic, in double.
std::vector<double> reference_binary(const std::vector<double>& a, const Shape& as, const std::vector<double>& b,
                                     const Shape& bs, const Shape& out,
                                     const std::function<double(double, double)>& f) {
  std::vector<double> y(static_cast<size_t>(out.num_elements()));
  for (int64_t i = 0; i < out.num_elements(); ++i) {
    y[static_cast<size_t>(i)] = f(a[static_cast<size_t>(source_index(i, as, out))],
                                  b[static_cast<size_t>(source_index(i, bs, out))]);
  }
  return y;
}

std::vector<double> as_double(const HostTensor& t) {
  std::vector<double> out;
  if (dtype_info(t.dtype).is_float) {
    for (float v : t.to_f32()) out.push_back(v);
  } else {
    for (int64_t v : t.to_i64()) out.push_back(static_cast<double>(v));
  }
  return out;
}

struct BroadcastCase {
  Shape a;
  Shape b;
  Shape out;
};

const std::vector<BroadcastCase>& broadcast_cases() {
  static const std::vector<BroadcastCase> cases = {
      {{1}, {1}, {1}},
      {{3, 4, 5}, {3, 4, 5}, {3, 4, 5}},
      {{3, 4, 5}, {5}, {3, 4, 5}},
      {{7}, {}, {7}},                          // scalar on the right
      {{}, {2, 3}, {2, 3}},                    // scalar on the left
      {{3, 1, 5}, {4, 1}, {3, 4, 5}},          // both operands stretch
      {{1, 4, 1, 6}, {3, 1, 5, 6}, {3, 4, 5, 6}},
      {{7, 1}, {7, 33}, {7, 33}},
      {{2, 3, 1, 4}, {3, 5, 1}, {2, 3, 5, 4}},
      {{17, 600}, {600}, {17, 600}},
  };
  return cases;
}

struct FloatBinary {
  std::string op;
  graph::AttributeMap attrs;
  std::function<double(double, double)> f;
  bool bool_output = false;
  bool positive_a = false;  // Pow: a positive base
};

TEST(LogicTest, FloatBinaryOpsBroadcastAgainstReference) {
  std::mt19937 rng(31);
  graph::AttributeMap fmod;
  fmod.set("fmod", int64_t{1});
  const std::vector<FloatBinary> ops = {
      {"Pow", {}, [](double a, double b) { return std::pow(a, b); }, false, true},
      {"Mod", fmod, [](double a, double b) { return std::fmod(a, b); }},
      {"Equal", {}, [](double a, double b) { return a == b ? 1.0 : 0.0; }, true},
      {"Greater", {}, [](double a, double b) { return a > b ? 1.0 : 0.0; }, true},
      {"GreaterOrEqual", {}, [](double a, double b) { return a >= b ? 1.0 : 0.0; }, true},
      {"Less", {}, [](double a, double b) { return a < b ? 1.0 : 0.0; }, true},
      {"LessOrEqual", {}, [](double a, double b) { return a <= b ? 1.0 : 0.0; }, true},
      {"Max", {}, [](double a, double b) { return std::max(a, b); }},
      {"Min", {}, [](double a, double b) { return std::min(a, b); }},
      {"Sum", {}, [](double a, double b) { return a + b; }},
      {"Mean", {}, [](double a, double b) { return (a + b) / 2; }},
  };
  for (const FloatBinary& op : ops) {
    for (const BroadcastCase& c : broadcast_cases()) {
      auto a = random_values(c.a.num_elements(), rng, 0.5f, 3.0f, !op.positive_a);
      auto b = random_values(c.b.num_elements(), rng, 0.5f, 3.0f, true);
      // Some equal elements, so that the equalities see both answers.
      if (!op.positive_a) {
        for (size_t i = 0; i < std::min(a.size(), b.size()); i += 3) a[i] = b[i];
      }
      OpCall call{.op_type = op.op, .attrs = op.attrs};
      call.inputs = {HostTensor::f32(c.a, a), HostTensor::f32(c.b, b)};
      auto result = run_op(call);
      ASSERT_TRUE(result.ok()) << op.op << " " << c.a.to_string() << " " << c.b.to_string() << ": "
                               << result.status().to_string();
      const HostTensor& y = result->outputs[0];
      ASSERT_EQ(y.shape, c.out) << op.op;
      ASSERT_EQ(y.dtype, op.bool_output ? DType::kBool : DType::kF32) << op.op;
      const auto expected = reference_binary(std::vector<double>(a.begin(), a.end()), c.a,
                                             std::vector<double>(b.begin(), b.end()), c.b, c.out, op.f);
      if (op.bool_output) {
        EXPECT_EQ(as_double(y), expected) << op.op << " " << c.a.to_string() << " " << c.b.to_string();
      } else {
        EXPECT_LT(normalized_max_error(y.to_f32(), expected), 2e-6)
            << op.op << " " << c.a.to_string() << " " << c.b.to_string();
      }
    }
  }
}

int64_t floored_mod(int64_t a, int64_t b) {
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

struct IntBinary {
  std::string op;
  graph::AttributeMap attrs;
  std::function<int64_t(int64_t, int64_t)> f;
};

TEST(LogicTest, IntegerBinaryOpsBroadcastAgainstReference) {
  std::mt19937 rng(37);
  graph::AttributeMap fmod;
  fmod.set("fmod", int64_t{1});
  const std::vector<IntBinary> ops = {
      {"Add", {}, [](int64_t a, int64_t b) { return a + b; }},
      {"Sub", {}, [](int64_t a, int64_t b) { return a - b; }},
      {"Mul", {}, [](int64_t a, int64_t b) { return a * b; }},
      {"Div", {}, [](int64_t a, int64_t b) { return a / b; }},
      {"Mod", {}, floored_mod},
      {"Mod", fmod, [](int64_t a, int64_t b) { return a % b; }},
      {"Max", {}, [](int64_t a, int64_t b) { return std::max(a, b); }},
      {"Min", {}, [](int64_t a, int64_t b) { return std::min(a, b); }},
      {"PRelu", {}, [](int64_t a, int64_t b) { return a < 0 ? a * b : a; }},
      {"Greater", {}, [](int64_t a, int64_t b) { return a > b ? 1 : 0; }},
      {"Equal", {}, [](int64_t a, int64_t b) { return a == b ? 1 : 0; }},
  };
  for (const IntBinary& op : ops) {
    for (const BroadcastCase& c : broadcast_cases()) {
      if (op.op == "PRelu" && c.out != c.a) continue;  // the slope broadcasts to X only
      for (DType dtype : {DType::kI64, DType::kI32}) {
        const auto a = random_ints(c.a.num_elements(), rng, 1000);
        const auto b = random_ints(c.b.num_elements(), rng, 9);
        OpCall call{.op_type = op.op, .attrs = op.attrs};
        if (dtype == DType::kI64) {
          call.inputs = {HostTensor::i64(c.a, a), HostTensor::i64(c.b, b)};
        } else {
          call.inputs = {HostTensor::i32(c.a, std::vector<int32_t>(a.begin(), a.end())),
                         HostTensor::i32(c.b, std::vector<int32_t>(b.begin(), b.end()))};
        }
        auto result = run_op(call);
        ASSERT_TRUE(result.ok()) << op.op << " " << dtype_name(dtype) << " " << c.a.to_string() << " " << c.b.to_string() << ": "
                                 << result.status().to_string();
        std::vector<int64_t> expected(static_cast<size_t>(c.out.num_elements()));
        for (int64_t i = 0; i < c.out.num_elements(); ++i) {
          expected[static_cast<size_t>(i)] = op.f(a[static_cast<size_t>(source_index(i, c.a, c.out))],
                                                  b[static_cast<size_t>(source_index(i, c.b, c.out))]);
        }
        EXPECT_EQ(result->outputs[0].to_i64(), expected)
            << op.op << " " << op.attrs.to_string() << " " << dtype_name(dtype) << " " << c.a.to_string() << " "
            << c.b.to_string();
      }
    }
  }
}

HostTensor bytes_of(DType dtype, const Shape& shape, const std::vector<int>& values) {
  std::vector<std::byte> b;
  for (int v : values) b.push_back(static_cast<std::byte>(static_cast<uint8_t>(v)));
  return HostTensor::raw(dtype, shape, b);
}

TEST(LogicTest, EightBitIntegers) {
  struct Case {
    const char* op;
    DType dtype;
    std::vector<int> a, b;
    std::vector<int64_t> expected;
  };
  const std::vector<Case> cases = {
      {"Mod", DType::kU8, {200, 7, 9}, {7, 7, 4}, {4, 0, 1}},
      {"Mod", DType::kI8, {-7, 7, -9}, {3, -3, 4}, {2, -2, 3}},
      {"Max", DType::kI8, {-7, 7, -9}, {3, -3, -10}, {3, 7, -9}},
      {"Min", DType::kU8, {200, 7, 9}, {7, 70, 4}, {7, 7, 4}},
      {"Greater", DType::kU8, {200, 7, 9}, {7, 70, 9}, {1, 0, 0}},
  };
  for (const Case& c : cases) {
    OpCall call{.op_type = c.op};
    call.inputs = {bytes_of(c.dtype, Shape{3}, c.a), bytes_of(c.dtype, Shape{3}, c.b)};
    auto r = run_op(call);
    ASSERT_TRUE(r.ok()) << c.op << ": " << r.status().to_string();
    EXPECT_EQ(r->outputs[0].to_i64(), c.expected) << c.op << " " << dtype_name(c.dtype);
  }
  OpCall clip{.op_type = "Clip"};
  clip.inputs = {bytes_of(DType::kI8, Shape{4}, {-100, 5, 100, 0}), bytes_of(DType::kI8, Shape{}, {-3})};
  auto r = run_op(clip);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->outputs[0].to_i64(), (std::vector<int64_t>{-3, 5, 100, 0}));
}

TEST(LogicTest, IntegerDivisionByZeroFailsNamingTheOp) {
  for (const char* op : {"Div", "Mod"}) {
    OpCall call{.op_type = op};
    call.inputs = {HostTensor::i64(Shape{3}, {4, 5, 6}), HostTensor::i64(Shape{3}, {1, 0, 2})};
    auto result = run_op(call);
    ASSERT_FALSE(result.ok()) << op;
    EXPECT_NE(result.status().to_string().find(op), std::string::npos) << result.status().to_string();
    EXPECT_NE(result.status().to_string().find("zero"), std::string::npos) << result.status().to_string();
  }
  // min / -1 wraps instead of trapping.
  const int64_t min = std::numeric_limits<int64_t>::min();
  OpCall call{.op_type = "Div"};
  call.inputs = {HostTensor::i64(Shape{2}, {min, 7}), HostTensor::i64(Shape{2}, {-1, -1})};
  auto result = run_op(call);
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  EXPECT_EQ(result->outputs[0].to_i64(), (std::vector<int64_t>{min, -7}));
}

TEST(LogicTest, ModRejectsFloorModOfFloats) {
  OpCall call{.op_type = "Mod"};
  call.inputs = {HostTensor::f32(Shape{2}, {1.5f, -2.5f}), HostTensor::f32(Shape{2}, {1.0f, 2.0f})};
  auto result = run_op(call);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(result.status().to_string().find("'fmod'"), std::string::npos) << result.status().to_string();
  call.attrs.set("fmod", int64_t{2});
  call.inputs = {HostTensor::i64(Shape{1}, {3}), HostTensor::i64(Shape{1}, {2})};
  result = run_op(call);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().to_string().find("'fmod'"), std::string::npos) << result.status().to_string();
}

TEST(LogicTest, PowMixedTypes) {
  {
    OpCall call{.op_type = "Pow"};  // i64 ^ f32 → i64, truncated
    call.inputs = {HostTensor::i64(Shape{3}, {1, 2, 3}), HostTensor::f32(Shape{3}, {4.0f, 5.0f, 0.5f})};
    auto r = run_op(call);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->outputs[0].dtype, DType::kI64);
    EXPECT_EQ(r->outputs[0].to_i64(), (std::vector<int64_t>{1, 32, 1}));
  }
  {
    OpCall call{.op_type = "Pow"};  // f32 ^ i64 → f32
    call.inputs = {HostTensor::f32(Shape{3}, {1.5f, -2.0f, 3.0f}), HostTensor::i64(Shape{3}, {2, 3, -1})};
    auto r = run_op(call);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->outputs[0].to_f32(), (std::vector<float>{2.25f, -8.0f, 1.0f / 3.0f}));
  }
  {
    OpCall call{.op_type = "Pow"};  // i64 ^ i64, exact
    call.inputs = {HostTensor::i64(Shape{4}, {3, -2, 2, 7}), HostTensor::i64(Shape{4}, {39, 3, -1, 0})};
    auto r = run_op(call);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->outputs[0].to_i64(), (std::vector<int64_t>{4052555153018976267, -8, 0, 1}));
  }
}

TEST(LogicTest, PReluSlopeBroadcastsToX) {
  std::mt19937 rng(41);
  for (const Shape& slope_shape : {Shape{5}, Shape{4, 1}, Shape{3, 4, 5}, Shape{1}}) {
    const Shape xs{3, 4, 5};
    const auto x = random_values(xs.num_elements(), rng, 0.1f, 2.0f, true);
    const auto s = random_values(slope_shape.num_elements(), rng, 0.1f, 2.0f, true);
    OpCall call{.op_type = "PRelu"};
    call.inputs = {HostTensor::f32(xs, x), HostTensor::f32(slope_shape, s)};
    auto r = run_op(call);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const auto expected = reference_binary(std::vector<double>(x.begin(), x.end()), xs,
                                           std::vector<double>(s.begin(), s.end()), slope_shape, xs,
                                           [](double v, double k) { return v < 0 ? k * v : v; });
    EXPECT_LT(normalized_max_error(r->outputs[0].to_f32(), expected), 1e-7) << slope_shape.to_string();
  }
  OpCall bad{.op_type = "PRelu"};  // a slope that would widen X
  bad.inputs = {HostTensor::f32(Shape{1, 5}, std::vector<float>(5, 1.0f)),
                HostTensor::f32(Shape{3, 5}, std::vector<float>(15, 1.0f))};
  EXPECT_FALSE(run_op(bad).ok());
}

TEST(LogicTest, LogicalOpsBroadcast) {
  std::mt19937 rng(43);
  struct Op {
    const char* name;
    std::function<double(double, double)> f;
  };
  const std::vector<Op> ops = {{"And", [](double a, double b) { return (a != 0 && b != 0) ? 1.0 : 0.0; }},
                               {"Or", [](double a, double b) { return (a != 0 || b != 0) ? 1.0 : 0.0; }},
                               {"Xor", [](double a, double b) { return ((a != 0) != (b != 0)) ? 1.0 : 0.0; }},
                               {"Equal", [](double a, double b) { return a == b ? 1.0 : 0.0; }}};
  for (const Op& op : ops) {
    for (const BroadcastCase& c : broadcast_cases()) {
      const HostTensor a = random_bools(c.a, rng);
      const HostTensor b = random_bools(c.b, rng);
      OpCall call{.op_type = op.name};
      call.inputs = {a, b};
      auto r = run_op(call);
      ASSERT_TRUE(r.ok()) << op.name << ": " << r.status().to_string();
      EXPECT_EQ(r->outputs[0].dtype, DType::kBool);
      EXPECT_EQ(as_double(r->outputs[0]), reference_binary(as_double(a), c.a, as_double(b), c.b, c.out, op.f))
          << op.name << " " << c.a.to_string() << " " << c.b.to_string();
    }
  }
}

TEST(LogicTest, VariadicOpsFoldWithBroadcast) {
  std::mt19937 rng(47);
  const std::vector<Shape> shapes = {{3, 1, 5}, {4, 1}, {5}, {1}};
  const Shape out{3, 4, 5};
  for (const char* op : {"Max", "Min", "Sum", "Mean"}) {
    for (size_t count = 1; count <= shapes.size(); ++count) {
      OpCall call{.op_type = op};
      std::vector<std::vector<float>> values;
      for (size_t k = 0; k < count; ++k) {
        values.push_back(random_values(shapes[k].num_elements(), rng, 0.1f, 2.0f, true));
        call.inputs.push_back(HostTensor::f32(shapes[k], values.back()));
      }
      auto r = run_op(call);
      ASSERT_TRUE(r.ok()) << op << " x" << count << ": " << r.status().to_string();
      Shape expected_shape = shapes[0];
      if (count > 1) expected_shape = out;
      ASSERT_EQ(r->outputs[0].shape, expected_shape) << op << " x" << count;
      std::vector<double> expected(static_cast<size_t>(expected_shape.num_elements()));
      for (int64_t i = 0; i < expected_shape.num_elements(); ++i) {
        double acc = 0;
        for (size_t k = 0; k < count; ++k) {
          const double v = values[k][static_cast<size_t>(source_index(i, shapes[k], expected_shape))];
          if (k == 0) {
            acc = v;
          } else if (std::string(op) == "Max") {
            acc = std::max(acc, v);
          } else if (std::string(op) == "Min") {
            acc = std::min(acc, v);
          } else {
            acc += v;
          }
        }
        if (std::string(op) == "Mean") acc /= static_cast<double>(count);
        expected[static_cast<size_t>(i)] = acc;
      }
      EXPECT_LT(normalized_max_error(r->outputs[0].to_f32(), expected), 1e-6) << op << " x" << count;
    }
  }
  OpCall ints{.op_type = "Max"};
  ints.inputs = {HostTensor::i64(Shape{3}, {1, -5, 9}), HostTensor::i64(Shape{3}, {2, -7, 8}),
                 HostTensor::i64(Shape{1}, {0})};
  auto r = run_op(ints);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->outputs[0].to_i64(), (std::vector<int64_t>{2, 0, 9}));
  OpCall sum_ints{.op_type = "Sum"};  // Sum takes floats only
  sum_ints.inputs = {HostTensor::i64(Shape{1}, {1}), HostTensor::i64(Shape{1}, {2})};
  EXPECT_FALSE(run_op(sum_ints).ok());
}

TEST(LogicTest, WhereBroadcastsAllThree) {
  std::mt19937 rng(53);
  struct Case {
    Shape cond, x, y, out;
  };
  const std::vector<Case> cases = {{{2, 2}, {2, 2}, {2, 2}, {2, 2}},
                                   {{3, 1, 5}, {4, 1}, {5}, {3, 4, 5}},
                                   {{1}, {7, 3}, {3}, {7, 3}},
                                   {{6, 1, 1}, {1, 50, 1}, {1, 1, 40}, {6, 50, 40}}};
  for (const Case& c : cases) {
    const HostTensor cond = random_bools(c.cond, rng);
    const auto x = random_values(c.x.num_elements(), rng, 0.1f, 2.0f, true);
    const auto y = random_ints(c.y.num_elements(), rng, 100);
    OpCall call{.op_type = "Where"};
    std::vector<float> yf(y.begin(), y.end());
    call.inputs = {cond, HostTensor::f32(c.x, x), HostTensor::f32(c.y, yf)};
    auto r = run_op(call);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    ASSERT_EQ(r->outputs[0].shape, c.out);
    const auto flags = cond.to_i64();
    std::vector<double> expected(static_cast<size_t>(c.out.num_elements()));
    for (int64_t i = 0; i < c.out.num_elements(); ++i) {
      expected[static_cast<size_t>(i)] = flags[static_cast<size_t>(source_index(i, c.cond, c.out))] != 0
                                             ? x[static_cast<size_t>(source_index(i, c.x, c.out))]
                                             : yf[static_cast<size_t>(source_index(i, c.y, c.out))];
    }
    EXPECT_EQ(as_double(r->outputs[0]), expected) << c.out.to_string();
  }
  OpCall ints{.op_type = "Where"};
  ints.inputs = {HostTensor::raw(DType::kBool, Shape{2}, {std::byte{1}, std::byte{0}}), HostTensor::i64(Shape{2}, {1, 2}),
                 HostTensor::i64(Shape{1}, {9})};
  auto r = run_op(ints);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->outputs[0].to_i64(), (std::vector<int64_t>{1, 9}));
}

TEST(LogicTest, ClipWithOptionalBounds) {
  std::mt19937 rng(59);
  const Shape shape{3, 4, 5};
  const auto x = random_values(shape.num_elements(), rng, 0.1f, 3.0f, true);
  struct Case {
    std::optional<float> lo, hi;
  };
  for (const Case& c : {Case{-1.0f, 1.0f}, Case{std::nullopt, 0.5f}, Case{-0.5f, std::nullopt},
                        Case{std::nullopt, std::nullopt}, Case{2.0f, 1.0f}}) {
    OpCall call{.op_type = "Clip"};
    call.inputs = {HostTensor::f32(shape, x)};
    call.inputs.push_back(c.lo ? std::optional<HostTensor>(HostTensor::f32(Shape{}, {*c.lo})) : std::nullopt);
    if (c.hi) call.inputs.push_back(HostTensor::f32(Shape{}, {*c.hi}));
    auto r = run_op(call);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    std::vector<double> expected;
    for (float v : x) {
      double y = v;
      if (c.lo) y = std::max<double>(y, *c.lo);
      if (c.hi) y = std::min<double>(y, *c.hi);
      expected.push_back(y);
    }
    EXPECT_LT(normalized_max_error(r->outputs[0].to_f32(), expected), 1e-9);
  }
  OpCall ints{.op_type = "Clip"};
  ints.inputs = {HostTensor::i64(Shape{4}, {-9, 3, 7, 0}), HostTensor::i64(Shape{}, {-2}),
                 HostTensor::i64(Shape{}, {5})};
  auto r = run_op(ints);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->outputs[0].to_i64(), (std::vector<int64_t>{-2, 3, 5, 0}));
  OpCall bad{.op_type = "Clip"};  // a bound must be a scalar
  bad.inputs = {HostTensor::f32(Shape{2}, {1, 2}), HostTensor::f32(Shape{2}, {0, 0})};
  auto rb = run_op(bad);
  ASSERT_FALSE(rb.ok());
  EXPECT_NE(rb.status().to_string().find("'min'"), std::string::npos) << rb.status().to_string();
}

// ---- Symbolic shape inference ----

InferResult infer(const std::string& op_type, const std::vector<graph::TensorDesc>& inputs) {
  return infer_node(op_type, "", testing::graph_inputs(inputs));
}

TEST(LogicTest, SymbolicInference) {
  const graph::Dim n = graph::Dim::symbol("n");
  const graph::TensorDesc x{DType::kF32, {n, 5}};
  EXPECT_EQ(infer("Greater", {x, {DType::kF32, {5}}}).desc, "bool[n, 5]");
  EXPECT_EQ(infer("Pow", {x, {DType::kI64, {1}}}).desc, "f32[n, 5]");
  EXPECT_EQ(infer("Where", {{DType::kBool, {n, 1}}, {DType::kI64, {1, 5}}, {DType::kI64, {}}}).desc, "i64[n, 5]");
  EXPECT_EQ(infer("Sum", {x, {DType::kF32, {3, 1, 1}}, {DType::kF32, {1}}}).desc, "f32[3, n, 5]");
  EXPECT_EQ(infer("IsNaN", {x}).desc, "bool[n, 5]");
  EXPECT_EQ(infer("Clip", {x}).desc, "f32[n, 5]");
  // PRelu's slope along a symbolic dim of X: equal at run time (one check); a slope widening X fails now.
  InferResult prelu = infer("PRelu", {x, {DType::kF32, {graph::Dim::symbol("m"), 1}}});
  ASSERT_TRUE(prelu.status.ok()) << prelu.status.to_string();
  EXPECT_EQ(prelu.desc, "f32[n, 5]");
  EXPECT_EQ(prelu.checks.size(), 1u);
  EXPECT_FALSE(infer("PRelu", {x, {DType::kF32, {2, n, 5}}}).status.ok());
  EXPECT_FALSE(infer("And", {{DType::kBool, {3}}, {DType::kBool, {4}}}).status.ok());
}

}  // namespace
}  // namespace hxrt::kernels::cpu
