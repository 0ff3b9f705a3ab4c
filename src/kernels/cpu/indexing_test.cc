// The indexing ops through the kernel harness against plain references on random inputs.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "hxrt/ops/params/indexing.h"
#include "kernels/testing/kernel_harness.h"
#include "kernels/testing/test_data.h"

namespace hxrt::kernels::cpu {
namespace {

using testing::dims_of;
using testing::HostTensor;
using testing::OpCall;
using testing::ravel;
using testing::run_op;
using testing::unravel;

HostTensor bools(Shape shape, const std::vector<int>& values) {
  std::vector<std::byte> bytes;
  for (int v : values) bytes.push_back(static_cast<std::byte>(v != 0 ? 1 : 0));
  return HostTensor::raw(DType::kBool, shape, bytes);
}

// Random indices in [-dim, dim): negative ones included.
std::vector<int64_t> random_indices(int64_t n, int64_t dim, std::mt19937& rng) {
  std::uniform_int_distribution<int64_t> pick(-dim, dim - 1);
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t& x : v) x = pick(rng);
  return v;
}

HostTensor index_tensor(const Shape& shape, const std::vector<int64_t>& values, bool i32) {
  return i32 ? HostTensor::i32(shape, std::vector<int32_t>(values.begin(), values.end()))
             : HostTensor::i64(shape, values);
}

int64_t wrap(int64_t v, int64_t dim) {
  return v < 0 ? v + dim : v;
}

// ---- GatherElements ----

TEST(IndexingTest, GatherElementsAgainstReference) {
  struct Case {
    Shape data;
    Shape indices;
    int64_t axis;
  };
  const std::vector<Case> cases = {
      {{7}, {11}, 0},        {{3, 4}, {5, 2}, -2}, {{4, 5, 3}, {2, 7, 3}, 1}, {{2, 3, 5}, {2, 3, 1}, 2},
      {{1, 13}, {1, 13}, 1}, {{3, 3}, {2, 3}, 0}};
  std::mt19937 rng(3);
  for (const Case& c : cases) {
    for (bool i32 : {false, true}) {
      const int axis = static_cast<int>(wrap(c.axis, c.data.rank()));
      const int64_t axis_dim = c.data.dims()[static_cast<size_t>(axis)];
      const auto idx = random_indices(c.indices.num_elements(), axis_dim, rng);
      const HostTensor data = HostTensor::random_f32(c.data, rng);
      OpCall call{.op_type = "GatherElements"};
      call.attrs.set("axis", c.axis);
      call.inputs = {data, index_tensor(c.indices, idx, i32)};
      auto result = run_op(call);
      ASSERT_TRUE(result.ok()) << result.status().to_string();
      const HostTensor& y = result->outputs[0];
      ASSERT_EQ(dims_of(y.shape), dims_of(c.indices));
      const auto in = data.to_f32();
      const auto out = y.to_f32();
      for (int64_t i = 0; i < y.shape.num_elements(); ++i) {
        auto coord = unravel(i, c.indices);
        coord[static_cast<size_t>(axis)] = wrap(idx[static_cast<size_t>(i)], axis_dim);
        ASSERT_EQ(out[static_cast<size_t>(i)], in[static_cast<size_t>(ravel(coord, c.data))])
            << c.data.to_string() << " axis " << c.axis << " at " << i;
      }
    }
  }
}

TEST(IndexingTest, GatherElementsOtherDtypes) {
  OpCall ints{.op_type = "GatherElements"};
  ints.attrs.set("axis", int64_t{1});
  ints.inputs = {HostTensor::i64(Shape{2, 3}, {1, 2, 3, 4, 5, 6}), HostTensor::i64(Shape{2, 2}, {2, -3, 1, 1})};
  auto r = run_op(ints);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->outputs[0].to_i64(), (std::vector<int64_t>{3, 1, 5, 5}));

  OpCall flags{.op_type = "GatherElements"};
  flags.inputs = {bools(Shape{3}, {1, 0, 1}), HostTensor::i32(Shape{4}, {1, 2, 0, 1})};
  auto b = run_op(flags);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_EQ(b->outputs[0].dtype, DType::kBool);
  EXPECT_EQ(b->outputs[0].to_i64(), (std::vector<int64_t>{0, 1, 1, 0}));
}

TEST(IndexingTest, GatherElementsOutOfRangeIndexIsAnErrorNamingIt) {
  for (int64_t bad : {int64_t{3}, int64_t{-4}}) {
    OpCall call{.op_type = "GatherElements"};
    call.inputs = {HostTensor::f32(Shape{3}, {1.5f, 2.5f, 3.5f}), HostTensor::i64(Shape{3}, {0, 1, bad})};
    auto result = run_op(call);
    ASSERT_FALSE(result.ok());
    const std::string message = result.status().to_string();
    EXPECT_EQ(result.status().code(), StatusCode::kOutOfRange) << message;
    EXPECT_NE(message.find(fmt::format("GatherElements: index {} at position 2", bad)), std::string::npos) << message;
  }
}

// ---- GatherND ----

TEST(IndexingTest, GatherNDAgainstReference) {
  struct Case {
    Shape data;
    Shape indices;  // last dim m
    int64_t batch_dims;
  };
  const std::vector<Case> cases = {{{2, 2, 2}, {2, 1, 2}, 0}, {{5, 3}, {4, 2}, 0},          {{5, 3, 7}, {3, 1}, 0},
                                   {{3, 4, 5}, {3, 2, 1}, 1}, {{2, 3, 4, 5}, {2, 3, 2}, 2}, {{6}, {1}, 0}};
  std::mt19937 rng(5);
  for (const Case& c : cases) {
    const int r = c.data.rank();
    const int q = c.indices.rank();
    const int64_t b = c.batch_dims;
    const int64_t m = c.indices.dims()[static_cast<size_t>(q - 1)];
    // Index tuples: position j addresses data axis b + j.
    std::vector<int64_t> idx(static_cast<size_t>(c.indices.num_elements()));
    for (size_t k = 0; k < idx.size(); ++k) {
      const int64_t dim = c.data.dims()[static_cast<size_t>(b + static_cast<int64_t>(k) % m)];
      idx[k] = random_indices(1, dim, rng)[0];
    }
    const HostTensor data = HostTensor::random_f32(c.data, rng);
    OpCall call{.op_type = "GatherND"};
    call.attrs.set("batch_dims", b);
    call.inputs = {data, HostTensor::i64(c.indices, idx)};
    auto result = run_op(call);
    ASSERT_TRUE(result.ok()) << c.data.to_string() << ": " << result.status().to_string();
    const HostTensor& y = result->outputs[0];
    std::vector<int64_t> out_dims(c.indices.dims().begin(), c.indices.dims().end() - 1);
    out_dims.insert(out_dims.end(), c.data.dims().begin() + b + m, c.data.dims().end());
    ASSERT_EQ(dims_of(y.shape), out_dims);
    const auto in = data.to_f32();
    const auto out = y.to_f32();
    for (int64_t i = 0; i < y.shape.num_elements(); ++i) {
      const auto oc = unravel(i, y.shape);  // [indices dims but the last..., slice dims...]
      std::vector<int64_t> tuple_coord(oc.begin(), oc.begin() + (q - 1));
      tuple_coord.push_back(0);
      const int64_t tuple = ravel(tuple_coord, c.indices);
      std::vector<int64_t> dc(oc.begin(), oc.begin() + b);  // batch coords
      for (int64_t j = 0; j < m; ++j) {
        dc.push_back(wrap(idx[static_cast<size_t>(tuple + j)], c.data.dims()[static_cast<size_t>(b + j)]));
      }
      dc.insert(dc.end(), oc.begin() + (q - 1), oc.end());
      ASSERT_EQ(static_cast<int>(dc.size()), r);
      ASSERT_EQ(out[static_cast<size_t>(i)], in[static_cast<size_t>(ravel(dc, c.data))]) << c.data.to_string();
    }
  }
}

TEST(IndexingTest, GatherNDRejectsANegativeBatchDims) {
  OpCall call{.op_type = "GatherND"};
  call.attrs.set("batch_dims", int64_t{-1});
  call.inputs = {HostTensor::f32(Shape{2, 2}, {1.5f, 2.5f, 3.5f, 4.5f}), HostTensor::i64(Shape{1, 1}, {1})};
  auto result = run_op(call);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().to_string().find("attribute 'batch_dims'"), std::string::npos)
      << result.status().to_string();
}

// ---- ScatterElements, ScatterND ----

double reduce(double a, double b, const std::string& reduction) {
  if (reduction == "add") return a + b;
  if (reduction == "mul") return a * b;
  return b;
}

TEST(IndexingTest, ScatterElementsAgainstReference) {
  struct Case {
    Shape data;
    Shape indices;
    int64_t axis;
  };
  const std::vector<Case> cases = {
      {{1, 5}, {1, 2}, 1}, {{3, 3}, {2, 3}, 0}, {{4, 5, 3}, {2, 7, 3}, 1}, {{7}, {11}, -1}, {{2, 3, 5}, {2, 2, 4}, 2}};
  std::mt19937 rng(7);
  for (const Case& c : cases) {
    for (const std::string reduction : {"none", "add", "mul"}) {
      const int axis = static_cast<int>(wrap(c.axis, c.data.rank()));
      const int64_t axis_dim = c.data.dims()[static_cast<size_t>(axis)];
      const auto idx = random_indices(c.indices.num_elements(), axis_dim, rng);  // duplicates included
      const HostTensor data = HostTensor::random_f32(c.data, rng);
      const HostTensor updates = HostTensor::random_f32(c.indices, rng);
      OpCall call{.op_type = "ScatterElements"};
      call.attrs.set("axis", c.axis);
      call.attrs.set("reduction", reduction);
      call.inputs = {data, HostTensor::i64(c.indices, idx), updates};
      auto result = run_op(call);
      ASSERT_TRUE(result.ok()) << result.status().to_string();
      const auto initial = data.to_f32();
      std::vector<double> expected(initial.begin(), initial.end());
      const auto u = updates.to_f32();
      for (int64_t i = 0; i < c.indices.num_elements(); ++i) {
        auto coord = unravel(i, c.indices);
        coord[static_cast<size_t>(axis)] = wrap(idx[static_cast<size_t>(i)], axis_dim);
        double& e = expected[static_cast<size_t>(ravel(coord, c.data))];
        e = reduce(e, u[static_cast<size_t>(i)], reduction);
      }
      const auto out = result->outputs[0].to_f32();
      ASSERT_EQ(dims_of(result->outputs[0].shape), dims_of(c.data));
      for (size_t i = 0; i < out.size(); ++i) {
        ASSERT_NEAR(out[i], expected[i], 1e-5) << c.data.to_string() << " " << reduction << " at " << i;
      }
    }
  }
}

TEST(IndexingTest, ScatterElementsIntegersAndBadReduction) {
  OpCall ints{.op_type = "ScatterElements"};
  ints.attrs.set("reduction", "mul");
  ints.inputs = {HostTensor::i64(Shape{3}, {2, 3, 4}), HostTensor::i32(Shape{3}, {0, -1, 0}),
                 HostTensor::i64(Shape{3}, {5, 6, 7})};
  auto r = run_op(ints);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->outputs[0].to_i64(), (std::vector<int64_t>{70, 3, 24}));

  OpCall bad = ints;
  bad.attrs.set("reduction", "max");
  auto result = run_op(bad);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().to_string().find("attribute 'reduction'"), std::string::npos)
      << result.status().to_string();

  OpCall out_of_range = ints;
  out_of_range.inputs[1] = HostTensor::i32(Shape{3}, {0, 3, 0});
  result = run_op(out_of_range);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().to_string().find("index 3 at position 1"), std::string::npos)
      << result.status().to_string();
}

TEST(IndexingTest, ScatterNDAgainstReference) {
  struct Case {
    Shape data;
    Shape indices;  // last dim m
  };
  const std::vector<Case> cases = {{{4, 4, 4}, {2, 1}}, {{5, 3}, {4, 2}}, {{3, 5, 2}, {2, 3, 2}}, {{7}, {9, 1}}};
  std::mt19937 rng(11);
  for (const Case& c : cases) {
    for (const std::string reduction : {"none", "add", "mul"}) {
      const int q = c.indices.rank();
      const int64_t m = c.indices.dims()[static_cast<size_t>(q - 1)];
      std::vector<int64_t> idx(static_cast<size_t>(c.indices.num_elements()));
      for (size_t k = 0; k < idx.size(); ++k) {
        idx[k] = random_indices(1, c.data.dims()[static_cast<size_t>(static_cast<int64_t>(k) % m)], rng)[0];
      }
      std::vector<int64_t> update_dims(c.indices.dims().begin(), c.indices.dims().end() - 1);
      update_dims.insert(update_dims.end(), c.data.dims().begin() + m, c.data.dims().end());
      const Shape update_shape = Shape::make(update_dims).value();
      const HostTensor data = HostTensor::random_f32(c.data, rng);
      const HostTensor updates = HostTensor::random_f32(update_shape, rng);
      OpCall call{.op_type = "ScatterND"};
      call.attrs.set("reduction", reduction);
      call.inputs = {data, HostTensor::i64(c.indices, idx), updates};
      auto result = run_op(call);
      ASSERT_TRUE(result.ok()) << result.status().to_string();
      const auto initial = data.to_f32();
      std::vector<double> expected(initial.begin(), initial.end());
      const auto u = updates.to_f32();
      const int64_t slice = c.data.num_elements() / [&] {
        int64_t p = 1;
        for (int64_t d = 0; d < m; ++d) p *= c.data.dims()[static_cast<size_t>(d)];
        return p;
      }();
      for (int64_t t = 0; t < c.indices.num_elements() / m; ++t) {
        std::vector<int64_t> coord;
        for (int64_t j = 0; j < m; ++j) {
          coord.push_back(wrap(idx[static_cast<size_t>(t * m + j)], c.data.dims()[static_cast<size_t>(j)]));
        }
        for (int64_t d = m; d < c.data.rank(); ++d) coord.push_back(0);
        const int64_t base = ravel(coord, c.data);
        for (int64_t e = 0; e < slice; ++e) {
          double& v = expected[static_cast<size_t>(base + e)];
          v = reduce(v, u[static_cast<size_t>(t * slice + e)], reduction);
        }
      }
      const auto out = result->outputs[0].to_f32();
      for (size_t i = 0; i < out.size(); ++i) {
        ASSERT_NEAR(out[i], expected[i], 1e-5) << c.data.to_string() << " " << reduction << " at " << i;
      }
    }
  }
}

// ---- Compress ----

TEST(IndexingTest, CompressAgainstReference) {
  const Shape shape{3, 5, 2};
  std::mt19937 rng(13);
  const HostTensor data = HostTensor::random_f32(shape, rng);
  const auto in = data.to_f32();
  for (std::optional<int64_t> axis :
       {std::optional<int64_t>(), std::optional<int64_t>(0), std::optional<int64_t>(1), std::optional<int64_t>(-1)}) {
    const int64_t length = axis ? shape.dims()[static_cast<size_t>(wrap(*axis, 3))] : shape.num_elements();
    for (int64_t cond_length : {length, length - 1}) {
      std::vector<int> cond(static_cast<size_t>(cond_length));
      for (int& v : cond) v = static_cast<int>(rng() % 2);
      OpCall call{.op_type = "Compress"};
      if (axis) call.attrs.set("axis", *axis);
      call.inputs = {data, bools(Shape{cond_length}, cond)};
      call.constant_inputs = {1};
      auto result = run_op(call);
      ASSERT_TRUE(result.ok()) << result.status().to_string();
      std::vector<float> expected;
      std::vector<int64_t> expected_dims;
      if (!axis) {
        for (size_t i = 0; i < cond.size(); ++i) {
          if (cond[i] != 0) expected.push_back(in[i]);
        }
        expected_dims = {static_cast<int64_t>(expected.size())};
      } else {
        const int a = static_cast<int>(wrap(*axis, 3));
        int64_t kept = 0;
        for (int v : cond) kept += v;
        expected_dims = dims_of(shape);
        expected_dims[static_cast<size_t>(a)] = kept;
        for (int64_t i = 0; i < shape.num_elements(); ++i) {
          const auto coord = unravel(i, shape);
          const int64_t s = coord[static_cast<size_t>(a)];
          if (s < cond_length && cond[static_cast<size_t>(s)] != 0) expected.push_back(in[static_cast<size_t>(i)]);
        }
      }
      EXPECT_EQ(dims_of(result->outputs[0].shape), expected_dims);
      EXPECT_EQ(result->outputs[0].to_f32(), expected) << "axis " << (axis ? *axis : 99);
    }
  }
}

TEST(IndexingTest, CompressNeedsAConstantCondition) {
  OpCall call{.op_type = "Compress"};
  call.inputs = {HostTensor::f32(Shape{2}, {1.5f, 2.5f}), bools(Shape{2}, {1, 0})};
  auto result = run_op(call);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().to_string().find("input 'condition' must be a constant"), std::string::npos)
      << result.status().to_string();
}

// ---- NonZero ----

TEST(IndexingTest, NonZeroAgainstReference) {
  std::mt19937 rng(17);
  for (const Shape& shape : {Shape{2, 2}, Shape{3, 5, 2}, Shape{7}}) {
    std::vector<float> values = HostTensor::random_f32(shape, rng).to_f32();
    for (size_t i = 0; i < values.size(); i += 3) values[i] = i % 2 == 0 ? 0.0f : -0.0f;  // zeros of both signs
    OpCall call{.op_type = "NonZero"};
    call.inputs = {HostTensor::f32(shape, values)};
    call.constant_inputs = {0};
    auto result = run_op(call);
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    std::vector<std::vector<int64_t>> rows(static_cast<size_t>(shape.rank()));
    for (int64_t i = 0; i < shape.num_elements(); ++i) {
      if (values[static_cast<size_t>(i)] == 0.0f) continue;
      const auto coord = unravel(i, shape);
      for (size_t d = 0; d < coord.size(); ++d) rows[d].push_back(coord[d]);
    }
    std::vector<int64_t> expected;
    for (const auto& row : rows) expected.insert(expected.end(), row.begin(), row.end());
    EXPECT_EQ(dims_of(result->outputs[0].shape),
              (std::vector<int64_t>{shape.rank(), static_cast<int64_t>(rows[0].size())}));
    EXPECT_EQ(result->outputs[0].to_i64(), expected);
  }
  OpCall flags{.op_type = "NonZero"};
  flags.inputs = {bools(Shape{2, 2}, {1, 0, 1, 1})};
  flags.constant_inputs = {0};
  auto r = run_op(flags);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->outputs[0].to_i64(), (std::vector<int64_t>{0, 1, 1, 0, 0, 1}));
}

// ---- Unique ----

TEST(IndexingTest, UniqueAgainstReference) {
  std::mt19937 rng(19);
  const Shape shape{4, 6, 2};
  std::vector<float> values(static_cast<size_t>(shape.num_elements()));
  // Few distinct values, so that slices repeat; each slice along axis 1 copied from an earlier one half the time.
  for (float& v : values) v = static_cast<float>(rng() % 3) - 0.5f;
  for (int64_t s = 1; s < 6; s += 2) {
    for (int64_t o = 0; o < 4; ++o) {
      for (int64_t i = 0; i < 2; ++i)
        values[static_cast<size_t>((o * 6 + s) * 2 + i)] = values[static_cast<size_t>((o * 6 + s - 1) * 2 + i)];
    }
  }
  const HostTensor x = HostTensor::f32(shape, values);
  for (std::optional<int64_t> axis :
       {std::optional<int64_t>(), std::optional<int64_t>(0), std::optional<int64_t>(1), std::optional<int64_t>(-1)}) {
    for (int64_t sorted : {0, 1}) {
      // Reference: slices as vectors of doubles.
      const int a = axis ? static_cast<int>(wrap(*axis, 3)) : 0;
      const int64_t count = axis ? shape.dims()[static_cast<size_t>(a)] : shape.num_elements();
      std::vector<std::vector<double>> slices(static_cast<size_t>(count));
      for (int64_t i = 0; i < shape.num_elements(); ++i) {
        const int64_t s = axis ? unravel(i, shape)[static_cast<size_t>(a)] : i;
        slices[static_cast<size_t>(s)].push_back(values[static_cast<size_t>(i)]);
      }
      std::vector<std::vector<double>> order;  // unique slices in output order
      for (const auto& s : slices) {
        if (std::find(order.begin(), order.end(), s) == order.end()) order.push_back(s);
      }
      if (sorted == 1) std::sort(order.begin(), order.end());
      std::vector<int64_t> first;
      std::vector<int64_t> counts;
      for (const auto& u : order) {
        first.push_back(std::find(slices.begin(), slices.end(), u) - slices.begin());
        counts.push_back(std::count(slices.begin(), slices.end(), u));
      }
      std::vector<int64_t> inverse;
      for (const auto& s : slices) inverse.push_back(std::find(order.begin(), order.end(), s) - order.begin());

      OpCall call{.op_type = "Unique"};
      if (axis) call.attrs.set("axis", *axis);
      call.attrs.set("sorted", sorted);
      call.inputs = {x};
      call.constant_inputs = {0};
      call.num_outputs = 4;
      auto result = run_op(call);
      ASSERT_TRUE(result.ok()) << result.status().to_string();
      const auto& out = result->outputs;
      const std::string label = fmt::format("axis {} sorted {}", axis ? *axis : 99, sorted);
      EXPECT_EQ(out[1].to_i64(), first) << label;
      EXPECT_EQ(out[2].to_i64(), inverse) << label;
      EXPECT_EQ(out[3].to_i64(), counts) << label;
      std::vector<int64_t> y_dims = axis ? dims_of(shape) : std::vector<int64_t>{0};
      y_dims[static_cast<size_t>(a)] = static_cast<int64_t>(order.size());
      ASSERT_EQ(dims_of(out[0].shape), y_dims) << label;
      const auto y = out[0].to_f32();
      const Shape y_shape = out[0].shape;
      for (int64_t i = 0; i < y_shape.num_elements(); ++i) {
        auto coord = unravel(i, y_shape);
        int64_t src = 0;
        if (axis) {
          coord[static_cast<size_t>(a)] = first[static_cast<size_t>(coord[static_cast<size_t>(a)])];
          src = ravel(coord, shape);
        } else {
          src = first[static_cast<size_t>(i)];
        }
        ASSERT_EQ(y[static_cast<size_t>(i)], values[static_cast<size_t>(src)]) << label;
      }
    }
  }
}

TEST(IndexingTest, UniqueRejectsABadSortedAttribute) {
  OpCall call{.op_type = "Unique"};
  call.attrs.set("sorted", int64_t{2});
  call.inputs = {HostTensor::f32(Shape{2}, {1.5f, 2.5f})};
  call.constant_inputs = {0};
  auto result = run_op(call);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().to_string().find("attribute 'sorted'"), std::string::npos) << result.status().to_string();
}

// ---- ReverseSequence ----

TEST(IndexingTest, ReverseSequenceAgainstReference) {
  std::mt19937 rng(23);
  for (int64_t batch_axis : {0, 1}) {
    const int64_t time_axis = 1 - batch_axis;
    const Shape shape = batch_axis == 0 ? Shape{4, 5, 3} : Shape{5, 4, 3};  // 4 batches of 5 steps of 3
    std::vector<int64_t> lens(4);
    for (int64_t& l : lens) l = static_cast<int64_t>(rng() % 6);
    const HostTensor x = HostTensor::random_f32(shape, rng);
    OpCall call{.op_type = "ReverseSequence"};
    call.attrs.set("batch_axis", batch_axis);
    call.attrs.set("time_axis", time_axis);
    call.inputs = {x, HostTensor::i64(Shape{4}, lens)};
    auto result = run_op(call);
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    const auto in = x.to_f32();
    const auto out = result->outputs[0].to_f32();
    for (int64_t i = 0; i < shape.num_elements(); ++i) {
      auto coord = unravel(i, shape);
      const int64_t b = coord[static_cast<size_t>(batch_axis)];
      int64_t& t = coord[static_cast<size_t>(time_axis)];
      const int64_t len = lens[static_cast<size_t>(b)];
      if (t < len) t = len - 1 - t;
      ASSERT_EQ(out[static_cast<size_t>(i)], in[static_cast<size_t>(ravel(coord, shape))])
          << "batch_axis " << batch_axis;
    }
  }
}

TEST(IndexingTest, ReverseSequenceRejectsEqualAxesAndLongSequences) {
  OpCall call{.op_type = "ReverseSequence"};
  call.attrs.set("batch_axis", int64_t{0});
  call.attrs.set("time_axis", int64_t{0});
  call.inputs = {HostTensor::f32(Shape{2, 2}, {1.5f, 2.5f, 3.5f, 4.5f}), HostTensor::i64(Shape{2}, {1, 2})};
  auto result = run_op(call);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().to_string().find("attribute 'time_axis'"), std::string::npos)
      << result.status().to_string();

  call.attrs.set("time_axis", int64_t{1});
  call.inputs[1] = HostTensor::i64(Shape{2}, {1, 3});
  result = run_op(call);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().to_string().find("sequence_lens[1] = 3"), std::string::npos) << result.status().to_string();
}

}  // namespace
}  // namespace hxrt::kernels::cpu
