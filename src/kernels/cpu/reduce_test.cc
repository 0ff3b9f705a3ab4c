// The reductions (Reduce*, ArgMax, ArgMin, TopK) through the kernel harness against double-precision references.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hxrt/ops/params/reduce.h"
#include "kernels/testing/kernel_harness.h"
#include "kernels/testing/test_data.h"

namespace hxrt::kernels::cpu {
namespace {

using testing::HostTensor;
using testing::normalized_max_error;
using testing::OpCall;
using testing::random_values;
using testing::run_op;

// The output flat index of input flat index `i` when the dims in `reduced` collapse.
int64_t output_index(const Shape& shape, const std::vector<bool>& reduced, int64_t i) {
  int64_t out = 0;
  int64_t out_stride = 1;
  for (int d = shape.rank() - 1; d >= 0; --d) {
    const int64_t dim = shape.dims()[static_cast<size_t>(d)];
    const int64_t coord = i % dim;
    i /= dim;
    if (!reduced[static_cast<size_t>(d)]) {
      out += coord * out_stride;
      out_stride *= dim;
    }
  }
  return out;
}

std::vector<double> reference_reduce(ops::ReduceKind kind, const std::vector<double>& x, const Shape& shape,
                                     const std::vector<bool>& reduced) {
  int64_t outputs = 1;
  int64_t count = 1;
  for (int d = 0; d < shape.rank(); ++d) {
    (reduced[static_cast<size_t>(d)] ? count : outputs) *= shape.dims()[static_cast<size_t>(d)];
  }
  std::vector<std::vector<double>> groups(static_cast<size_t>(outputs));
  for (int64_t i = 0; i < shape.num_elements(); ++i) {
    groups[static_cast<size_t>(output_index(shape, reduced, i))].push_back(x[static_cast<size_t>(i)]);
  }
  std::vector<double> y;
  for (const std::vector<double>& g : groups) {
    double sum = 0, abs_sum = 0, squares = 0, prod = 1, exp_sum = 0;
    double max = -INFINITY, min = INFINITY;
    for (const double v : g) {
      sum += v;
      abs_sum += std::abs(v);
      squares += v * v;
      prod *= v;
      exp_sum += std::exp(v);
      max = std::max(max, v);
      min = std::min(min, v);
    }
    switch (kind) {
      case ops::ReduceKind::kL1: y.push_back(abs_sum); break;
      case ops::ReduceKind::kL2: y.push_back(std::sqrt(squares)); break;
      case ops::ReduceKind::kLogSum: y.push_back(std::log(sum)); break;
      case ops::ReduceKind::kLogSumExp: y.push_back(std::log(exp_sum)); break;
      case ops::ReduceKind::kMax: y.push_back(max); break;
      case ops::ReduceKind::kMean: y.push_back(sum / static_cast<double>(count)); break;
      case ops::ReduceKind::kMin: y.push_back(min); break;
      case ops::ReduceKind::kProd: y.push_back(prod); break;
      case ops::ReduceKind::kSum: y.push_back(sum); break;
      case ops::ReduceKind::kSumSquare: y.push_back(squares); break;
    }
  }
  return y;
}

std::vector<bool> reduced_mask(int rank, const std::vector<int64_t>& axes) {
  std::vector<bool> reduced(static_cast<size_t>(rank), axes.empty());
  for (const int64_t a : axes) reduced[static_cast<size_t>(a < 0 ? a + rank : a)] = true;
  return reduced;
}

Shape reduced_shape(const Shape& shape, const std::vector<bool>& reduced, bool keepdims) {
  std::vector<int64_t> dims;
  for (int d = 0; d < shape.rank(); ++d) {
    if (!reduced[static_cast<size_t>(d)]) {
      dims.push_back(shape.dims()[static_cast<size_t>(d)]);
    } else if (keepdims) {
      dims.push_back(1);
    }
  }
  return Shape::make(dims).value();
}

OpCall reduce_call(ops::ReduceKind kind, HostTensor x, const std::vector<int64_t>& axes, bool keepdims) {
  OpCall call{.op_type = std::string(ops::reduce_op_type(kind))};
  call.attrs.set("keepdims", int64_t{keepdims ? 1 : 0});
  call.inputs = {std::move(x)};
  if (!axes.empty()) {
    call.inputs.push_back(HostTensor::i64(Shape{static_cast<int64_t>(axes.size())}, axes));
    call.constant_inputs = {1};
  }
  return call;
}

TEST(ReduceTest, EveryKindAgainstReference) {
  std::mt19937 rng(1);
  struct Case {
    Shape shape;
    std::vector<int64_t> axes;
  };
  const std::vector<Case> cases = {
      {{7}, {}},
      {{3, 2, 2}, {}},
      {{3, 2, 2}, {1}},
      {{3, 2, 2}, {-1}},
      {{5, 7, 3}, {0, 2}},
      {{5, 7, 3}, {2, 0}},
      {{2, 3, 4, 5}, {1, 3}},
      {{4, 129}, {1}},
      {{1, 1, 13}, {-3, 1}},
      {{3, 5, 1}, {0, 1, 2}},
      {{2, 3, 4, 5}, {0, 1}},
      {{2, 3, 1, 5}, {1, 2}},
      {{3, 1, 4}, {1}},
      {{2, 5, 2, 3}, {0, 2}},
      {{40, 601}, {1}},
      {{601, 40}, {0}},  // several chunks
  };
  for (const ops::ReduceKind kind : ops::kReduceKinds) {
    for (const Case& c : cases) {
      for (const bool keepdims : {true, false}) {
        // Prod stays finite near 1; LogSum needs a positive sum.
        const bool positive = kind == ops::ReduceKind::kLogSum;
        const auto x = kind == ops::ReduceKind::kProd
                           ? random_values(c.shape.num_elements(), rng, 0.6f, 1.4f)
                           : random_values(c.shape.num_elements(), rng, 0.05f, 3.0f, !positive);
        auto result = run_op(reduce_call(kind, HostTensor::f32(c.shape, x), c.axes, keepdims));
        const std::string what = fmt::format("{} {} axes [{}] keepdims {}", ops::reduce_op_type(kind), c.shape,
                                             fmt::join(c.axes, ","), keepdims);
        ASSERT_TRUE(result.ok()) << what << ": " << result.status().to_string();
        const std::vector<bool> reduced = reduced_mask(c.shape.rank(), c.axes);
        EXPECT_EQ(result->outputs[0].shape, reduced_shape(c.shape, reduced, keepdims)) << what;
        const std::vector<double> xd(x.begin(), x.end());
        EXPECT_LT(normalized_max_error(result->outputs[0].to_f32(), reference_reduce(kind, xd, c.shape, reduced)), 1e-6)
            << what;
      }
    }
  }
}

TEST(ReduceTest, IntegersAreExact) {
  std::mt19937 rng(2);
  std::uniform_int_distribution<int64_t> dist(-50, 50);
  const Shape shape{4, 3, 5};
  std::vector<int64_t> x(static_cast<size_t>(shape.num_elements()));
  for (int64_t& v : x) v = dist(rng) | 1;  // odd: never zero
  const std::vector<double> xd(x.begin(), x.end());
  for (const ops::ReduceKind kind : {ops::ReduceKind::kSum, ops::ReduceKind::kMax, ops::ReduceKind::kMin,
                                     ops::ReduceKind::kL1, ops::ReduceKind::kSumSquare, ops::ReduceKind::kProd}) {
    const std::vector<int64_t> axes =
        kind == ops::ReduceKind::kProd ? std::vector<int64_t>{1} : std::vector<int64_t>{0, 2};
    auto result = run_op(reduce_call(kind, HostTensor::i64(shape, x), axes, false));
    ASSERT_TRUE(result.ok()) << ops::reduce_op_type(kind) << ": " << result.status().to_string();
    const std::vector<double> expected = reference_reduce(kind, xd, shape, reduced_mask(3, axes));
    const std::vector<int64_t> actual = result->outputs[0].to_i64();
    ASSERT_EQ(actual.size(), expected.size());
    for (size_t i = 0; i < actual.size(); ++i) {
      EXPECT_EQ(actual[i], static_cast<int64_t>(expected[i])) << ops::reduce_op_type(kind) << " output " << i;
    }
  }
}

TEST(ReduceTest, EmptyAxesReduceAllOrNothing) {
  std::mt19937 rng(3);
  const Shape shape{3, 2, 2};
  const auto x = random_values(shape.num_elements(), rng, 0.05f, 3.0f);
  for (const bool noop : {false, true}) {
    OpCall call{.op_type = "ReduceSum"};
    call.attrs.set("noop_with_empty_axes", int64_t{noop ? 1 : 0});
    call.inputs = {HostTensor::f32(shape, x), HostTensor::i64(Shape{0}, {})};
    call.constant_inputs = {1};
    auto result = run_op(call);
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    if (noop) {
      EXPECT_EQ(result->outputs[0].shape, shape);
      EXPECT_EQ(result->outputs[0].to_f32(), x);
    } else {
      EXPECT_EQ(result->outputs[0].shape, (Shape{1, 1, 1}));
      const double sum = std::accumulate(x.begin(), x.end(), 0.0);
      EXPECT_NEAR(result->outputs[0].to_f32()[0], sum, 1e-5);
    }
  }
}

TEST(ReduceTest, EmptyReductionGivesTheIdentity) {
  const Shape shape{2, 0, 3};
  for (const ops::ReduceKind kind : {ops::ReduceKind::kSum, ops::ReduceKind::kProd, ops::ReduceKind::kMax}) {
    auto result = run_op(reduce_call(kind, HostTensor::f32(shape, {}), {1}, false));
    ASSERT_TRUE(result.ok()) << ops::reduce_op_type(kind) << ": " << result.status().to_string();
    EXPECT_EQ(result->outputs[0].shape, (Shape{2, 3}));
    const float identity = kind == ops::ReduceKind::kSum    ? 0.0f
                           : kind == ops::ReduceKind::kProd ? 1.0f
                                                            : -std::numeric_limits<float>::infinity();
    EXPECT_EQ(result->outputs[0].to_f32(), std::vector<float>(6, identity)) << ops::reduce_op_type(kind);
  }
}

TEST(ReduceTest, RejectsBadAttributesAndAxes) {
  std::mt19937 rng(4);
  OpCall bad_keepdims = reduce_call(ops::ReduceKind::kMean, HostTensor::random_f32(Shape{3, 4}, rng), {1}, true);
  bad_keepdims.attrs.set("keepdims", int64_t{2});
  auto result = run_op(bad_keepdims);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().to_string().find("'keepdims'"), std::string::npos) << result.status().to_string();

  result = run_op(reduce_call(ops::ReduceKind::kMax, HostTensor::random_f32(Shape{3, 4}, rng), {2}, true));
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().to_string().find("axis 2 is out of range"), std::string::npos)
      << result.status().to_string();

  OpCall not_constant = reduce_call(ops::ReduceKind::kSum, HostTensor::random_f32(Shape{3, 4}, rng), {1}, true);
  not_constant.constant_inputs.clear();
  result = run_op(not_constant);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().to_string().find("'axes' must be a constant"), std::string::npos)
      << result.status().to_string();
}

// ---- ArgMax / ArgMin ----

TEST(ReduceTest, ArgMaxArgMinWithTies) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> small(-2, 2);  // many ties
  const Shape shape{3, 4, 5};
  std::vector<float> x(static_cast<size_t>(shape.num_elements()));
  for (float& v : x) v = static_cast<float>(small(rng)) + 0.5f;
  for (const bool is_max : {true, false}) {
    for (int axis = -3; axis < 3; ++axis) {
      for (const bool last : {false, true}) {
        for (const bool keepdims : {true, false}) {
          OpCall call{.op_type = is_max ? "ArgMax" : "ArgMin"};
          call.attrs.set("axis", int64_t{axis});
          call.attrs.set("keepdims", int64_t{keepdims ? 1 : 0});
          call.attrs.set("select_last_index", int64_t{last ? 1 : 0});
          call.inputs = {HostTensor::f32(shape, x)};
          auto result = run_op(call);
          ASSERT_TRUE(result.ok()) << result.status().to_string();
          const int a = axis < 0 ? axis + 3 : axis;
          std::vector<bool> reduced(3, false);
          reduced[static_cast<size_t>(a)] = true;
          EXPECT_EQ(result->outputs[0].shape, reduced_shape(shape, reduced, keepdims));
          // Reference: scan every input element in order.
          std::vector<int64_t> best_index(result->outputs[0].to_i64().size(), -1);
          std::vector<float> best(best_index.size());
          for (int64_t i = 0; i < shape.num_elements(); ++i) {
            const auto o = static_cast<size_t>(output_index(shape, reduced, i));
            const int64_t coord = (i / (a == 2 ? 1 : a == 1 ? 5 : 20)) % shape.dims()[static_cast<size_t>(a)];
            const float v = x[static_cast<size_t>(i)];
            const bool better = best_index[o] < 0 || (is_max ? v > best[o] : v < best[o]) || (last && v == best[o]);
            if (better) {
              best[o] = v;
              best_index[o] = coord;
            }
          }
          EXPECT_EQ(result->outputs[0].to_i64(), best_index)
              << (is_max ? "ArgMax" : "ArgMin") << " axis " << axis << " last " << last;
        }
      }
    }
  }
}

TEST(ReduceTest, ArgMaxRejectsBadAxis) {
  std::mt19937 rng(6);
  OpCall call{.op_type = "ArgMax"};
  call.attrs.set("axis", int64_t{3});
  call.inputs = {HostTensor::random_f32(Shape{2, 3, 4}, rng)};
  auto result = run_op(call);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().to_string().find("'axis'"), std::string::npos) << result.status().to_string();
}

// ---- TopK ----

TEST(ReduceTest, TopKLargestSmallestAndTies) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(-3, 3);
  const Shape shape{3, 7, 2};
  std::vector<float> x(static_cast<size_t>(shape.num_elements()));
  for (float& v : x) v = static_cast<float>(small(rng)) + 0.25f;
  for (const bool largest : {true, false}) {
    for (const int64_t k : {int64_t{0}, int64_t{1}, int64_t{4}, int64_t{7}}) {
      OpCall call{.op_type = "TopK", .num_outputs = 2};
      call.attrs.set("axis", int64_t{1});
      call.attrs.set("largest", int64_t{largest ? 1 : 0});
      call.inputs = {HostTensor::f32(shape, x), HostTensor::i64(Shape{1}, {k})};
      call.constant_inputs = {1};
      auto result = run_op(call);
      ASSERT_TRUE(result.ok()) << result.status().to_string();
      ASSERT_EQ(result->outputs[0].shape, (Shape{3, k, 2}));
      const std::vector<float> values = result->outputs[0].to_f32();
      const std::vector<int64_t> indices = result->outputs[1].to_i64();
      for (int64_t o = 0; o < 3; ++o) {
        for (int64_t i = 0; i < 2; ++i) {
          std::vector<int64_t> order(7);
          std::iota(order.begin(), order.end(), 0);
          auto at = [&](int64_t a) { return x[static_cast<size_t>((o * 7 + a) * 2 + i)]; };
          std::stable_sort(order.begin(), order.end(),
                           [&](int64_t a, int64_t b) { return largest ? at(a) > at(b) : at(a) < at(b); });
          for (int64_t r = 0; r < k; ++r) {
            const auto out = static_cast<size_t>((o * k + r) * 2 + i);
            EXPECT_EQ(indices[out], order[static_cast<size_t>(r)]) << "largest " << largest << " k " << k;
            EXPECT_EQ(values[out], at(order[static_cast<size_t>(r)]));
          }
        }
      }
    }
  }
}

TEST(ReduceTest, NaNIsGreaterThanEveryNumber) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const HostTensor x = HostTensor::f32(Shape{1, 6}, {1.0f, nan, 3.0f, nan, -2.0f, 3.0f});
  OpCall topk{.op_type = "TopK", .num_outputs = 2};
  topk.inputs = {x, HostTensor::i64(Shape{1}, {4})};
  topk.constant_inputs = {1};
  auto result = run_op(topk);
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  EXPECT_EQ(result->outputs[1].to_i64(), (std::vector<int64_t>{1, 3, 2, 5}));

  OpCall argmax{.op_type = "ArgMax"};
  argmax.attrs.set("axis", int64_t{1});
  argmax.inputs = {x};
  result = run_op(argmax);
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  EXPECT_EQ(result->outputs[0].to_i64(), (std::vector<int64_t>{1}));

  result = run_op(reduce_call(ops::ReduceKind::kMax, x, {1}, false));
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  EXPECT_TRUE(std::isnan(result->outputs[0].to_f32()[0]));
}

TEST(ReduceTest, TopKRejectsKLargerThanTheAxis) {
  std::mt19937 rng(8);
  OpCall call{.op_type = "TopK", .num_outputs = 2};
  call.inputs = {HostTensor::random_f32(Shape{3, 4}, rng), HostTensor::i64(Shape{1}, {5})};
  call.constant_inputs = {1};
  auto result = run_op(call);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().to_string().find("'K' = 5 exceeds"), std::string::npos) << result.status().to_string();
}

}  // namespace
}  // namespace hxrt::kernels::cpu
