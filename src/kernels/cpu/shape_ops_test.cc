// The shape and layout ops through the kernel harness, against plain index-by-index references.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "hxrt/base/dtype.h"
#include "hxrt/graph/attribute.h"
#include "hxrt/ops/params/shape_ops.h"
#include "kernels/testing/kernel_harness.h"
#include "kernels/testing/test_data.h"

namespace hxrt::kernels::cpu {
namespace {

using testing::dims_of;
using testing::HostTensor;
using testing::OpCall;
using testing::random_bools;
using testing::ravel;
using testing::run_op;
using testing::unravel;

using Index = std::vector<int64_t>;

HostTensor ints(const std::vector<int64_t>& values) {
  return HostTensor::i64(Shape{static_cast<int64_t>(values.size())}, values);
}

// Random data of `dtype` (f32 in [-1, 1) and never 0, i64 in [-1000, 1000] without 0, bool).
HostTensor random_tensor(DType dtype, const Shape& shape, std::mt19937& rng) {
  if (dtype == DType::kF32) return HostTensor::random_f32(shape, rng);
  if (dtype == DType::kBool) return random_bools(shape, rng);
  std::vector<int64_t> v(static_cast<size_t>(shape.num_elements()));
  std::uniform_int_distribution<int64_t> pick(1, 1000);
  for (int64_t& x : v) x = (rng() % 2 ? 1 : -1) * pick(rng);
  return HostTensor::i64(shape, v);
}

std::vector<double> values_of(const HostTensor& t) {
  if (t.dtype == DType::kF32) {
    const auto f = t.to_f32();
    return {f.begin(), f.end()};
  }
  const auto i = t.to_i64();
  return {i.begin(), i.end()};
}

// Every output element y[o] must be x[source(o)], or `fill` where source returns nullopt.
void expect_mapped(const HostTensor& y, const HostTensor& x, const std::vector<int64_t>& expected_dims,
                   const std::function<std::optional<Index>(const Index&)>& source, double fill = 0.0) {
  ASSERT_EQ(dims_of(y.shape), expected_dims);
  ASSERT_EQ(y.dtype, x.dtype);
  const auto out = values_of(y);
  const auto in = values_of(x);
  for (int64_t i = 0; i < y.shape.num_elements(); ++i) {
    const Index o = unravel(i, y.shape);
    const std::optional<Index> s = source(o);
    const double expected = s ? in[static_cast<size_t>(ravel(*s, x.shape))] : fill;
    ASSERT_EQ(out[static_cast<size_t>(i)], expected) << "output element " << i << " of " << y.shape.to_string();
  }
}

const std::vector<DType> kDtypes = {DType::kF32, DType::kI64, DType::kBool};

// ---- Expand ----

TEST(ShapeOpsTest, ExpandAgainstReference) {
  struct Case {
    Shape x;
    std::vector<int64_t> shape, expected;
  };
  const std::vector<Case> cases = {{{3, 1}, {2, 1, 6}, {2, 3, 6}}, {{3, 1}, {3, 4}, {3, 4}},
                                   {{1, 5, 1}, {4, 1, 7}, {4, 5, 7}}, {{2, 3}, {1}, {2, 3}},
                                   {{7}, {3, 1, 1}, {3, 1, 7}},       {{}, {2, 3}, {2, 3}}};
  std::mt19937 rng(1);
  for (const Case& c : cases) {
    for (DType dtype : kDtypes) {
      OpCall call{.op_type = "Expand", .constant_inputs = {1}};
      call.inputs = {random_tensor(dtype, c.x, rng), ints(c.shape)};
      auto result = run_op(call);
      ASSERT_TRUE(result.ok()) << result.status().to_string();
      const int offset = static_cast<int>(c.expected.size()) - c.x.rank();
      expect_mapped(result->outputs[0], *call.inputs[0], c.expected, [&](const Index& o) {
        Index s;
        for (int d = 0; d < c.x.rank(); ++d) {
          s.push_back(c.x.dims()[static_cast<size_t>(d)] == 1 ? 0 : o[static_cast<size_t>(d + offset)]);
        }
        return std::optional<Index>(s);
      });
    }
  }
  OpCall bad{.op_type = "Expand", .constant_inputs = {1}};
  bad.inputs = {HostTensor::f32(Shape{3}, {1, 2, 3}), ints({4})};
  EXPECT_FALSE(run_op(bad).ok());
}

// ---- Tile ----

TEST(ShapeOpsTest, TileAgainstReference) {
  struct Case {
    Shape x;
    std::vector<int64_t> repeats;
  };
  const std::vector<Case> cases = {
      {{2, 3, 4}, {3, 2, 1}}, {{5}, {7}}, {{2, 2}, {2, 2}}, {{1, 3}, {4, 1}}, {{3, 1, 2}, {1, 5, 3}}, {{2, 3}, {0, 2}}};
  std::mt19937 rng(2);
  for (const Case& c : cases) {
    for (DType dtype : kDtypes) {
      OpCall call{.op_type = "Tile", .constant_inputs = {1}};
      call.inputs = {random_tensor(dtype, c.x, rng), ints(c.repeats)};
      auto result = run_op(call);
      ASSERT_TRUE(result.ok()) << result.status().to_string();
      std::vector<int64_t> expected;
      for (int d = 0; d < c.x.rank(); ++d) expected.push_back(c.x.dims()[static_cast<size_t>(d)] * c.repeats[d]);
      expect_mapped(result->outputs[0], *call.inputs[0], expected, [&](const Index& o) {
        Index s;
        for (int d = 0; d < c.x.rank(); ++d) s.push_back(o[static_cast<size_t>(d)] % c.x.dims()[static_cast<size_t>(d)]);
        return std::optional<Index>(s);
      });
    }
  }
  OpCall bad{.op_type = "Tile", .constant_inputs = {1}};
  bad.inputs = {HostTensor::f32(Shape{3}, {1, 2, 3}), ints({2, 2})};
  EXPECT_FALSE(run_op(bad).ok());
}

// ---- Pad ----

// numpy's pad on one axis: constant (nullopt), edge, or reflect bouncing between the ends.
std::optional<int64_t> reference_pad_index(const std::string& mode, int64_t i, int64_t dim) {
  if (i >= 0 && i < dim) return i;
  if (mode == "constant") return std::nullopt;
  if (mode == "edge" || dim == 1) return std::clamp<int64_t>(i, 0, dim - 1);
  while (i < 0 || i >= dim) i = i < 0 ? -i : 2 * (dim - 1) - i;
  return i;
}

TEST(ShapeOpsTest, PadAgainstReference) {
  struct Case {
    Shape x;
    std::vector<int64_t> pads;
    std::string mode;
  };
  const std::vector<Case> cases = {
      {{1, 3, 4, 5}, {0, 0, 1, 3, 0, 0, 2, 4}, "constant"},
      {{3, 7}, {-1, 2, 1, -3}, "constant"},
      {{3, 4}, {2, 3, 2, 3}, "reflect"},
      {{2, 3}, {0, 5, 0, 7}, "reflect"},  // more than one bounce
      {{4, 1, 5}, {1, 2, 0, 2, 3, 1}, "edge"},
      {{5}, {0, 0}, "edge"},
      {{6, 3}, {-2, 1, 1, 2}, "reflect"},  // crop, then reflect the rest
  };
  std::mt19937 rng(3);
  for (const Case& c : cases) {
    for (DType dtype : {DType::kF32, DType::kI64}) {
      const HostTensor value = dtype == DType::kF32 ? HostTensor::f32(Shape{}, {1.5f}) : HostTensor::i64(Shape{}, {-9});
      OpCall call{.op_type = "Pad", .constant_inputs = {1}};
      call.attrs.set("mode", c.mode);
      call.inputs = {random_tensor(dtype, c.x, rng), ints(c.pads), value};
      auto result = run_op(call);
      ASSERT_TRUE(result.ok()) << result.status().to_string();
      const int rank = c.x.rank();
      std::vector<int64_t> expected;
      for (int d = 0; d < rank; ++d) expected.push_back(c.x.dims()[static_cast<size_t>(d)] + c.pads[d] + c.pads[d + rank]);
      expect_mapped(
          result->outputs[0], *call.inputs[0], expected,
          [&](const Index& o) -> std::optional<Index> {
            Index s;
            for (int d = 0; d < rank; ++d) {
              // Cropping first: the kept range [lo, hi) of the source, then padded by the positive pads.
              const int64_t lo = std::max<int64_t>(0, -c.pads[d]);
              const int64_t hi = c.x.dims()[static_cast<size_t>(d)] - std::max<int64_t>(0, -c.pads[d + rank]);
              const auto i = reference_pad_index(c.mode, o[static_cast<size_t>(d)] - std::max<int64_t>(0, c.pads[d]),
                                                 hi - lo);
              if (!i) return std::nullopt;
              s.push_back(lo + *i);
            }
            return s;
          },
          values_of(value)[0]);
    }
  }
  // Without constant_value the padding is 0.
  OpCall zero{.op_type = "Pad", .constant_inputs = {1}};
  zero.inputs = {HostTensor::f32(Shape{2}, {3, 4}), ints({1, 1})};
  auto result = run_op(zero);
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  EXPECT_EQ(result->outputs[0].to_f32(), (std::vector<float>{0, 3, 4, 0}));
}

TEST(ShapeOpsTest, PadRejectsAnUnknownModeAndMissingPads) {
  OpCall call{.op_type = "Pad", .constant_inputs = {1}};
  call.attrs.set("mode", "wrap");
  call.inputs = {HostTensor::f32(Shape{2}, {3, 4}), ints({1, 1})};
  auto result = run_op(call);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().to_string().find("'mode'"), std::string::npos) << result.status().to_string();

  OpCall dynamic{.op_type = "Pad"};
  dynamic.inputs = {HostTensor::f32(Shape{2}, {3, 4}), ints({1, 1})};
  result = run_op(dynamic);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().to_string().find("'pads'"), std::string::npos) << result.status().to_string();
}

// ---- Split ----

TEST(ShapeOpsTest, SplitAgainstReference) {
  struct Case {
    Shape x;
    int64_t axis;
    std::vector<int64_t> split;  // empty: equal parts
    size_t outputs;
  };
  const std::vector<Case> cases = {{{2, 6}, 1, {2, 4}, 2},  {{6}, 0, {}, 3},         {{3, 5, 7}, -1, {1, 0, 6}, 3},
                                   {{0}, 0, {0, 0, 0}, 3}, {{4, 3}, 0, {}, 2},       {{5, 2, 3}, 1, {1, 1}, 2},
                                   {{7, 2}, 0, {7}, 1}};
  std::mt19937 rng(4);
  for (const Case& c : cases) {
    for (DType dtype : kDtypes) {
      OpCall call{.op_type = "Split", .num_outputs = c.outputs};
      call.attrs.set("axis", c.axis);
      call.inputs = {random_tensor(dtype, c.x, rng)};
      if (!c.split.empty()) {
        call.inputs.push_back(ints(c.split));
        call.constant_inputs = {1};
      }
      auto result = run_op(call);
      ASSERT_TRUE(result.ok()) << result.status().to_string();
      ASSERT_EQ(result->outputs.size(), c.outputs);
      const auto axis = static_cast<size_t>(c.axis < 0 ? c.axis + c.x.rank() : c.axis);
      int64_t offset = 0;
      for (size_t k = 0; k < c.outputs; ++k) {
        const int64_t part =
            c.split.empty() ? c.x.dims()[axis] / static_cast<int64_t>(c.outputs) : c.split[k];
        std::vector<int64_t> expected = dims_of(c.x);
        expected[axis] = part;
        expect_mapped(result->outputs[k], *call.inputs[0], expected, [&](const Index& o) {
          Index s = o;
          s[axis] += offset;
          return std::optional<Index>(s);
        });
        offset += part;
      }
    }
  }
  OpCall bad{.op_type = "Split", .constant_inputs = {1}, .num_outputs = 2};
  bad.inputs = {HostTensor::f32(Shape{5}, {1, 2, 3, 4, 5}), ints({2, 2})};
  EXPECT_FALSE(run_op(bad).ok());
  OpCall uneven{.op_type = "Split", .num_outputs = 2};
  uneven.inputs = {HostTensor::f32(Shape{5}, {1, 2, 3, 4, 5})};
  EXPECT_FALSE(run_op(uneven).ok());
}

// ---- DepthToSpace, SpaceToDepth ----

TEST(ShapeOpsTest, DepthToSpaceAndSpaceToDepthAgainstReference) {
  std::mt19937 rng(5);
  const std::vector<std::pair<Shape, int64_t>> cases = {
      {{2, 8, 3, 3}, 2}, {{1, 8, 2, 3}, 2}, {{1, 18, 1, 2}, 3}, {{3, 5, 2, 1}, 1}};
  for (const auto& [x_shape, b] : cases) {
    for (const std::string mode : {"DCR", "CRD"}) {
      OpCall call{.op_type = "DepthToSpace"};
      call.attrs.set("blocksize", b);
      call.attrs.set("mode", mode);
      call.inputs = {random_tensor(DType::kF32, x_shape, rng)};
      auto result = run_op(call);
      ASSERT_TRUE(result.ok()) << result.status().to_string();
      const int64_t c_out = x_shape.dims()[1] / (b * b);
      const std::vector<int64_t> expected = {x_shape.dims()[0], c_out, x_shape.dims()[2] * b, x_shape.dims()[3] * b};
      expect_mapped(result->outputs[0], *call.inputs[0], expected, [&](const Index& o) {
        const int64_t i = o[2] % b, j = o[3] % b;
        const int64_t c = mode == "DCR" ? (i * b + j) * c_out + o[1] : o[1] * b * b + i * b + j;
        return std::optional<Index>(Index{o[0], c, o[2] / b, o[3] / b});
      });
    }
    // SpaceToDepth of the expanded shape.
    const Shape s_shape{x_shape.dims()[0], x_shape.dims()[1], x_shape.dims()[2] * b, x_shape.dims()[3] * b};
    OpCall call{.op_type = "SpaceToDepth"};
    call.attrs.set("blocksize", b);
    call.inputs = {random_tensor(DType::kI64, s_shape, rng)};
    auto result = run_op(call);
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    const int64_t channels = s_shape.dims()[1];
    expect_mapped(result->outputs[0], *call.inputs[0], {s_shape.dims()[0], channels * b * b, x_shape.dims()[2],
                                                        x_shape.dims()[3]},
                  [&](const Index& o) {
                    const int64_t block = o[1] / channels, c = o[1] % channels;
                    return std::optional<Index>(Index{o[0], c, o[2] * b + block / b, o[3] * b + block % b});
                  });
  }
}

TEST(ShapeOpsTest, BlockOpsRejectBadAttributes) {
  std::mt19937 rng(6);
  OpCall call{.op_type = "DepthToSpace"};
  call.attrs.set("blocksize", int64_t{2});
  call.attrs.set("mode", "RCD");
  call.inputs = {HostTensor::random_f32(Shape{1, 4, 2, 2}, rng)};
  auto result = run_op(call);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().to_string().find("'mode'"), std::string::npos) << result.status().to_string();
  OpCall zero{.op_type = "SpaceToDepth"};
  zero.attrs.set("blocksize", int64_t{0});
  zero.inputs = {HostTensor::random_f32(Shape{1, 4, 2, 2}, rng)};
  result = run_op(zero);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().to_string().find("'blocksize'"), std::string::npos) << result.status().to_string();
}

// ---- Trilu ----

TEST(ShapeOpsTest, TriluAgainstReference) {
  std::mt19937 rng(7);
  const std::vector<Shape> shapes = {{4, 5}, {2, 3, 3}, {3, 1, 5}, {0, 5}, {5, 2}, {2, 2, 7, 3}};
  for (const Shape& shape : shapes) {
    for (int64_t upper : {0, 1}) {
      for (std::optional<int64_t> k : {std::optional<int64_t>(), std::optional<int64_t>(-7), std::optional<int64_t>(-1),
                                       std::optional<int64_t>(1), std::optional<int64_t>(2), std::optional<int64_t>(6)}) {
        for (DType dtype : kDtypes) {
          OpCall call{.op_type = "Trilu"};
          call.attrs.set("upper", upper);
          call.inputs = {random_tensor(dtype, shape, rng)};
          if (k) call.inputs.push_back(HostTensor::i64(Shape{}, {*k}));
          auto result = run_op(call);
          ASSERT_TRUE(result.ok()) << result.status().to_string();
          const int64_t kk = k.value_or(0);
          expect_mapped(result->outputs[0], *call.inputs[0], dims_of(shape), [&](const Index& o) {
            const int64_t i = o[o.size() - 2], j = o[o.size() - 1];
            const bool keep = upper ? j - i >= kk : j - i <= kk;
            return keep ? std::optional<Index>(o) : std::nullopt;
          });
        }
      }
    }
  }
  OpCall bad{.op_type = "Trilu"};
  bad.attrs.set("upper", int64_t{2});
  bad.inputs = {HostTensor::f32(Shape{2, 2}, {1, 2, 3, 4})};
  auto result = run_op(bad);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().to_string().find("'upper'"), std::string::npos) << result.status().to_string();
}

// ---- Range ----

TEST(ShapeOpsTest, RangeAgainstReference) {
  struct Case {
    double start, limit, delta;
  };
  for (const Case& c : std::vector<Case>{{1, 5, 2}, {10, 4, -3}, {0.5, 3.75, 0.25}, {3, 3, 1}, {-2, 7, 1.5}}) {
    const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((c.limit - c.start) / c.delta)));
    OpCall call{.op_type = "Range", .constant_inputs = {0, 1, 2}};
    call.inputs = {HostTensor::f32(Shape{}, {static_cast<float>(c.start)}),
                   HostTensor::f32(Shape{}, {static_cast<float>(c.limit)}),
                   HostTensor::f32(Shape{}, {static_cast<float>(c.delta)})};
    auto result = run_op(call);
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    ASSERT_EQ(dims_of(result->outputs[0].shape), std::vector<int64_t>{n});
    const auto y = result->outputs[0].to_f32();
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y[static_cast<size_t>(i)], c.start + static_cast<double>(i) * c.delta, 1e-6);
    if (c.start == std::floor(c.start) && c.delta == std::floor(c.delta)) {
      OpCall i64{.op_type = "Range", .constant_inputs = {0, 1, 2}};
      i64.inputs = {HostTensor::i64(Shape{}, {static_cast<int64_t>(c.start)}),
                    HostTensor::i64(Shape{}, {static_cast<int64_t>(c.limit)}),
                    HostTensor::i64(Shape{}, {static_cast<int64_t>(c.delta)})};
      auto r = run_op(i64);
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      const auto yi = r->outputs[0].to_i64();
      ASSERT_EQ(static_cast<int64_t>(yi.size()), n);
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(yi[static_cast<size_t>(i)], static_cast<int64_t>(c.start) + i * static_cast<int64_t>(c.delta));
    }
  }
  OpCall zero{.op_type = "Range", .constant_inputs = {0, 1, 2}};
  zero.inputs = {HostTensor::i64(Shape{}, {0}), HostTensor::i64(Shape{}, {4}), HostTensor::i64(Shape{}, {0})};
  EXPECT_FALSE(run_op(zero).ok());
}

// ---- ConstantOfShape ----

TEST(ShapeOpsTest, ConstantOfShapeFillsTheValue) {
  graph::TensorValue f32_value{.dtype = DType::kF32, .shape = Shape{1}};
  const float v = 1.25f;
  f32_value.data.resize(4);
  std::memcpy(f32_value.data.data(), &v, 4);
  graph::TensorValue i64_value{.dtype = DType::kI64, .shape = Shape{1}};
  const int64_t w = -7;
  i64_value.data.resize(8);
  std::memcpy(i64_value.data.data(), &w, 8);
  for (const std::vector<int64_t>& dims : {std::vector<int64_t>{4, 3, 2}, {5}, {}, {3, 0}}) {
    for (const auto& value : {f32_value, i64_value}) {
      OpCall call{.op_type = "ConstantOfShape", .constant_inputs = {0}};
      call.attrs.set("value", value);
      call.inputs = {ints(dims)};
      auto result = run_op(call);
      ASSERT_TRUE(result.ok()) << result.status().to_string();
      const HostTensor& y = result->outputs[0];
      ASSERT_EQ(dims_of(y.shape), dims);
      ASSERT_EQ(y.dtype, value.dtype);
      for (double e : values_of(y)) EXPECT_EQ(e, value.dtype == DType::kF32 ? 1.25 : -7.0);
    }
  }
  OpCall fallback{.op_type = "ConstantOfShape", .constant_inputs = {0}};
  fallback.inputs = {ints({3})};
  auto result = run_op(fallback);
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  EXPECT_EQ(result->outputs[0].to_f32(), (std::vector<float>{0, 0, 0}));
  OpCall bad{.op_type = "ConstantOfShape", .constant_inputs = {0}};
  graph::TensorValue two{.dtype = DType::kF32, .shape = Shape{2}};
  two.data.resize(8);
  bad.attrs.set("value", two);
  bad.inputs = {ints({3})};
  result = run_op(bad);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().to_string().find("'value'"), std::string::npos) << result.status().to_string();
}

// ---- OneHot ----

TEST(ShapeOpsTest, OneHotAgainstReference) {
  std::mt19937 rng(8);
  const int64_t depth = 10;
  const std::vector<std::pair<Shape, int64_t>> cases = {{{3}, 1}, {{2, 2}, 1}, {{2, 2}, -2}, {{2, 3}, -1}, {{4}, 0},
                                                        {{2, 1, 3}, 2}};
  for (const auto& [shape, axis] : cases) {
    for (bool float_indices : {false, true}) {
      std::vector<int64_t> idx(static_cast<size_t>(shape.num_elements()));
      std::uniform_int_distribution<int64_t> pick(-depth - 2, depth + 1);  // out-of-range values included
      for (int64_t& v : idx) v = pick(rng);
      const HostTensor off_on = HostTensor::f32(Shape{2}, {-0.5f, 2.5f});
      OpCall call{.op_type = "OneHot", .constant_inputs = {1}};
      call.attrs.set("axis", axis);
      call.inputs = {float_indices ? HostTensor::f32(shape, std::vector<float>(idx.begin(), idx.end()))
                                   : HostTensor::i64(shape, idx),
                     HostTensor::f32(Shape{}, {static_cast<float>(depth)}), off_on};
      auto result = run_op(call);
      ASSERT_TRUE(result.ok()) << result.status().to_string();
      const HostTensor& y = result->outputs[0];
      const int rank = shape.rank() + 1;
      const auto a = static_cast<size_t>(axis < 0 ? axis + rank : axis);
      std::vector<int64_t> expected = dims_of(shape);
      expected.insert(expected.begin() + static_cast<std::ptrdiff_t>(a), depth);
      ASSERT_EQ(dims_of(y.shape), expected);
      const auto out = y.to_f32();
      for (int64_t i = 0; i < y.shape.num_elements(); ++i) {
        Index o = unravel(i, y.shape);
        const int64_t position = o[a];
        o.erase(o.begin() + static_cast<std::ptrdiff_t>(a));
        int64_t v = idx[static_cast<size_t>(ravel(o, shape))];
        if (v < 0) v += depth;
        ASSERT_EQ(out[static_cast<size_t>(i)], v == position ? 2.5f : -0.5f) << i;
      }
    }
  }
  OpCall dynamic{.op_type = "OneHot"};
  dynamic.inputs = {HostTensor::i64(Shape{2}, {1, 2}), HostTensor::i64(Shape{}, {3}), HostTensor::f32(Shape{2}, {0, 1})};
  auto result = run_op(dynamic);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().to_string().find("'depth'"), std::string::npos) << result.status().to_string();
}

// ---- Shape, Size ----

TEST(ShapeOpsTest, ShapeSlicesAndSize) {
  std::mt19937 rng(9);
  const HostTensor x = HostTensor::random_f32(Shape{3, 4, 5}, rng);
  struct Case {
    std::optional<int64_t> start, end;
    std::vector<int64_t> expected;
  };
  const std::vector<Case> cases = {{{}, {}, {3, 4, 5}},  {1, {}, {4, 5}},   {{}, 1, {3}},     {{}, -1, {3, 4}},
                                   {-1, {}, {5}},        {1, 2, {4}},       {1, -1, {4}},     {-10, {}, {3, 4, 5}},
                                   {{}, 10, {3, 4, 5}},  {2, 1, {}}};
  for (const Case& c : cases) {
    OpCall call{.op_type = "Shape"};
    if (c.start) call.attrs.set("start", *c.start);
    if (c.end) call.attrs.set("end", *c.end);
    call.inputs = {x};
    auto result = run_op(call);
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    EXPECT_EQ(result->outputs[0].to_i64(), c.expected);
  }
  for (const Shape& shape : {Shape{3, 4, 5}, Shape{}, Shape{2, 0}}) {
    OpCall call{.op_type = "Size"};
    call.inputs = {HostTensor::random_f32(shape, rng)};
    auto result = run_op(call);
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    EXPECT_EQ(result->outputs[0].shape.rank(), 0);
    EXPECT_EQ(result->outputs[0].to_i64(), std::vector<int64_t>{shape.num_elements()});
  }
}

// ---- The arithmetic shared by inference and kernels ----

TEST(ShapeOpsTest, SharedArithmetic) {
  // ceil((limit - start) / delta), never negative, in integers and floats.
  EXPECT_EQ(*ops::range_count(int64_t{10}, int64_t{4}, int64_t{-3}), 2);
  EXPECT_EQ(*ops::range_count(int64_t{0}, int64_t{5}, int64_t{2}), 3);
  EXPECT_EQ(*ops::range_count(int64_t{5}, int64_t{0}, int64_t{1}), 0);
  EXPECT_EQ(*ops::range_count(int64_t{0}, int64_t{-5}, int64_t{-2}), 3);
  EXPECT_EQ(*ops::range_count(1.0, 5.0, 2.0), 2);
  EXPECT_FALSE(ops::range_count(1.0, 5.0, 0.0).ok());
  // Reflect over [a, b, c] is periodic with period 4 (the edges not repeated), edge clamps.
  std::vector<int64_t> reflect, edge;
  for (int64_t o = 0; o < 11; ++o) {
    reflect.push_back(ops::pad_source_index(ops::PadMode::kReflect, o, 4, 4, 3));
    edge.push_back(ops::pad_source_index(ops::PadMode::kEdge, o, 4, 4, 3));
  }
  EXPECT_EQ(reflect, (std::vector<int64_t>{0, 1, 2, 1, 0, 1, 2, 1, 0, 1, 2}));
  EXPECT_EQ(edge, (std::vector<int64_t>{0, 0, 0, 0, 0, 1, 2, 2, 2, 2, 2}));
  EXPECT_EQ(ops::pad_source_index(ops::PadMode::kConstant, 0, 1, 0, 3), -1);
  EXPECT_FALSE(ops::padded_dim(ops::PadMode::kConstant, 3, -2, -2, 0).ok());
  EXPECT_FALSE(ops::padded_dim(ops::PadMode::kEdge, 0, 1, 0, 0).ok());
  // Split sizes.
  EXPECT_EQ(*ops::split_sizes(6, {}, 3), (std::vector<int64_t>{2, 2, 2}));
  EXPECT_FALSE(ops::split_sizes(7, {}, 3).ok());
  EXPECT_FALSE(ops::split_sizes(6, std::vector<int64_t>{2, 3}, 2).ok());
  // Shape's slice clamps after counting negative bounds from the end.
  ops::ShapeParams params;
  params.start = -10;
  params.end = -1;
  EXPECT_EQ(ops::shape_slice(params, 3), (std::pair<int, int>{0, 2}));
  params.start = 2;
  params.end = 1;
  EXPECT_EQ(ops::shape_slice(params, 3), (std::pair<int, int>{2, 2}));
}

}  // namespace
}  // namespace hxrt::kernels::cpu
