#include "kernels/cpu/tensor_ops.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/testing/infer_node.h"
#include "kernels/testing/kernel_harness.h"
#include "kernels/testing/test_data.h"
#include "ops/schemas/schemas.h"

namespace hxrt::kernels::cpu {
namespace {

using testing::dims_of;
using testing::HostTensor;
using testing::infer_node;
using testing::InferResult;
using testing::OpCall;
using testing::ravel;
using testing::run_op;
using testing::unravel;

// Distinct, non-zero values: every misplaced element shows.
std::vector<float> distinct_values(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) + 0.5f;
  return v;
}

std::vector<int64_t> distinct_ints(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>(i) * 7 + 1;
  return v;
}

// ---- Gather ----

TEST(TensorOpsTest, GatherAxesIndexTypesAndNegativeIndices) {
  struct Case {
    Shape data;
    int64_t axis;
    Shape indices;
  };
  const std::vector<Case> cases = {
      {{10, 17}, 0, {3}}, {{10, 17}, 0, {2, 3}}, {{4, 5, 6}, 1, {7}}, {{4, 5, 6}, -1, {2, 2}},
      {{129}, 0, {1}},    {{3, 4}, 1, {}},       {{2, 3, 5}, 2, {4}},
  };
  std::mt19937 rng(1);
  for (const Case& c : cases) {
    for (bool i32 : {false, true}) {
      const int axis = static_cast<int>(c.axis < 0 ? c.axis + c.data.rank() : c.axis);
      const int64_t axis_dim = c.data.dims()[axis];
      std::uniform_int_distribution<int64_t> pick(-axis_dim, axis_dim - 1);  // negative indices included
      std::vector<int64_t> idx(static_cast<size_t>(c.indices.num_elements()));
      for (int64_t& v : idx) v = pick(rng);
      const auto data = distinct_values(c.data.num_elements());
      OpCall call{.op_type = "Gather"};
      call.attrs.set("axis", c.axis);
      call.inputs = {HostTensor::f32(c.data, data),
                     i32 ? HostTensor::i32(c.indices, std::vector<int32_t>(idx.begin(), idx.end()))
                         : HostTensor::i64(c.indices, idx)};
      auto result = run_op(call);
      ASSERT_TRUE(result.ok()) << result.status().to_string();
      const HostTensor& y = result->outputs[0];
      // Expected shape: data[:axis] + indices + data[axis+1:].
      std::vector<int64_t> out_dims(c.data.dims().begin(), c.data.dims().begin() + axis);
      out_dims.insert(out_dims.end(), c.indices.dims().begin(), c.indices.dims().end());
      out_dims.insert(out_dims.end(), c.data.dims().begin() + axis + 1, c.data.dims().end());
      ASSERT_EQ(dims_of(y.shape), out_dims);
      const auto out = y.to_f32();
      for (int64_t i = 0; i < y.shape.num_elements(); ++i) {
        const auto oi = unravel(i, y.shape);
        std::vector<int64_t> di(oi.begin(), oi.begin() + axis);
        const int64_t flat_index =
            ravel(std::vector<int64_t>(oi.begin() + axis, oi.begin() + axis + c.indices.rank()), c.indices);
        const int64_t v = idx[static_cast<size_t>(flat_index)];
        di.push_back(v < 0 ? v + axis_dim : v);
        di.insert(di.end(), oi.begin() + axis + c.indices.rank(), oi.end());
        ASSERT_EQ(out[i], data[static_cast<size_t>(ravel(di, c.data))]) << c.data.to_string() << " axis " << c.axis;
      }
    }
  }
}

TEST(TensorOpsTest, GatherQuantizedRowsAndOtherDtypes) {
  // Embedding lookup on q8_0 rows (34 bytes per 32 values): rows are copied whole.
  std::vector<std::byte> table(static_cast<size_t>(4 * 2 * 34));
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<std::byte>(i * 13 + 1);
  OpCall call{.op_type = "Gather"};
  call.inputs = {HostTensor::raw(DType::kQ8_0, Shape{4, 64}, table), HostTensor::i64(Shape{2}, {3, -4})};
  auto result = run_op(call);
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  const auto& bytes = result->outputs[0].bytes;
  ASSERT_EQ(bytes.size(), 2u * 68);
  EXPECT_EQ(std::memcmp(bytes.data(), table.data() + 3 * 68, 68), 0);
  EXPECT_EQ(std::memcmp(bytes.data() + 68, table.data(), 68), 0);

  OpCall ints{.op_type = "Gather"};
  ints.inputs = {HostTensor::i64(Shape{3, 2}, {1, 2, 3, 4, 5, 6}), HostTensor::i32(Shape{2}, {2, 0})};
  auto r = run_op(ints);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->outputs[0].to_i64(), (std::vector<int64_t>{5, 6, 1, 2}));
}

TEST(TensorOpsTest, GatherOutOfRangeIndexIsAnErrorNamingIt) {
  for (int64_t bad : {int64_t{10}, int64_t{-11}, std::numeric_limits<int64_t>::max()}) {
    OpCall call{.op_type = "Gather"};
    call.inputs = {HostTensor::f32(Shape{10, 3}, distinct_values(30)), HostTensor::i64(Shape{3}, {0, bad, 1})};
    auto result = run_op(call);
    ASSERT_FALSE(result.ok());
    const std::string message = result.status().to_string();
    EXPECT_EQ(result.status().code(), StatusCode::kOutOfRange) << message;
    EXPECT_NE(message.find(fmt::format("index {}", bad)), std::string::npos) << message;
    EXPECT_NE(message.find("position 1"), std::string::npos) << message;
  }
  int64_t out[1];
  const int32_t idx = 5;
  EXPECT_FALSE(resolve_gather_indices(DType::kI32, &idx, 1, 5, out).ok());
  EXPECT_TRUE(resolve_gather_indices(DType::kI32, &idx, 1, 6, out).ok());
}

// ---- Reshape ----

HostTensor shape_tensor(const std::vector<int64_t>& dims) {
  return HostTensor::i64(Shape{static_cast<int64_t>(dims.size())}, dims);
}

TEST(TensorOpsTest, ReshapeZeroMinusOneAndAllowZero) {
  const auto data = distinct_values(2 * 3 * 4);
  struct Case {
    std::vector<int64_t> target;
    int64_t allowzero;
    std::vector<int64_t> expected;
  };
  const std::vector<Case> cases = {
      {{4, 6}, 0, {4, 6}},        {{0, -1}, 0, {2, 12}}, {{-1}, 0, {24}}, {{0, 0, 2, 2}, 0, {2, 3, 2, 2}},
      {{2, -1, 4}, 1, {2, 3, 4}}, {{24, 1}, 1, {24, 1}},
  };
  for (const Case& c : cases) {
    OpCall call{.op_type = "Reshape", .constant_inputs = {1}};
    call.attrs.set("allowzero", c.allowzero);
    call.inputs = {HostTensor::f32(Shape{2, 3, 4}, data), shape_tensor(c.target)};
    auto result = run_op(call);
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    EXPECT_EQ(dims_of(result->outputs[0].shape), c.expected);
    EXPECT_EQ(result->outputs[0].to_f32(), data);
  }
  // Errors: two -1, element count mismatch, 0 copying a dim past the input rank, shape not a constant.
  for (const std::vector<int64_t>& bad : {std::vector<int64_t>{-1, -1}, {5, 5}, {0, 0, 0, 0}, {-2, 12}}) {
    OpCall call{.op_type = "Reshape", .constant_inputs = {1}};
    call.inputs = {HostTensor::f32(Shape{2, 3, 4}, data), shape_tensor(bad)};
    EXPECT_FALSE(run_op(call).ok()) << bad.size();
  }
  OpCall dynamic{.op_type = "Reshape"};
  dynamic.inputs = {HostTensor::f32(Shape{2, 3, 4}, data), shape_tensor({24})};
  auto result = run_op(dynamic);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().to_string().find("'shape'"), std::string::npos) << result.status().to_string();
}

// ---- Transpose ----

TEST(TensorOpsTest, TransposeAgainstIndexReference) {
  std::mt19937 rng(2);
  const std::vector<Shape> shapes = {Shape{1}, Shape{3, 17}, Shape{2, 3, 5}, Shape{4, 1, 3, 129},
                                     Shape{2, 3, 2, 3, 2, 1, 2, 3}};
  for (const Shape& shape : shapes) {
    std::vector<int64_t> perm(static_cast<size_t>(shape.rank()));
    std::iota(perm.begin(), perm.end(), 0);
    for (int trial = 0; trial < 4; ++trial) {
      std::shuffle(perm.begin(), perm.end(), rng);
      const auto data = distinct_values(shape.num_elements());
      OpCall call{.op_type = "Transpose"};
      call.attrs.set("perm", perm);
      call.inputs = {HostTensor::f32(shape, data)};
      auto result = run_op(call);
      ASSERT_TRUE(result.ok()) << result.status().to_string();
      const HostTensor& y = result->outputs[0];
      const auto out = y.to_f32();
      for (int64_t i = 0; i < y.shape.num_elements(); ++i) {
        const auto oi = unravel(i, y.shape);
        std::vector<int64_t> ii(oi.size());
        for (size_t d = 0; d < perm.size(); ++d) ii[static_cast<size_t>(perm[d])] = oi[d];
        ASSERT_EQ(out[i], data[static_cast<size_t>(ravel(ii, shape))]) << shape.to_string();
      }
    }
  }
  // Default perm reverses; 1-, 2- and 8-byte dtypes move by element size.
  OpCall rev{.op_type = "Transpose"};
  rev.inputs = {HostTensor::i64(Shape{2, 3}, distinct_ints(6))};
  auto r = run_op(rev);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(dims_of(r->outputs[0].shape), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(r->outputs[0].to_i64(), (std::vector<int64_t>{1, 22, 8, 29, 15, 36}));
  OpCall bytes{.op_type = "Transpose"};
  bytes.inputs = {HostTensor::raw(
      DType::kU8, Shape{2, 3}, {std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}, std::byte{5}, std::byte{6}})};
  auto rb = run_op(bytes);
  ASSERT_TRUE(rb.ok());
  EXPECT_EQ(rb->outputs[0].to_i64(), (std::vector<int64_t>{1, 4, 2, 5, 3, 6}));
}

TEST(TensorOpsTest, TransposeRejectsBadPerm) {
  for (const std::vector<int64_t>& perm : {std::vector<int64_t>{0, 0, 1}, {0, 1}, {0, 1, 3}, {-1, 0, 1}}) {
    OpCall call{.op_type = "Transpose"};
    call.attrs.set("perm", perm);
    call.inputs = {HostTensor::f32(Shape{2, 3, 4}, distinct_values(24))};
    auto result = run_op(call);
    ASSERT_FALSE(result.ok());
    EXPECT_NE(result.status().to_string().find("'perm'"), std::string::npos) << result.status().to_string();
  }
  EXPECT_FALSE(check_permutation(std::vector<int64_t>{1, 1}, 2).ok());
}

// ---- Concat ----

TEST(TensorOpsTest, ConcatEveryAxis) {
  const Shape base{2, 3, 4};
  for (int axis = -3; axis < 3; ++axis) {
    const int a = axis < 0 ? axis + 3 : axis;
    std::vector<HostTensor> parts;
    std::vector<std::vector<float>> values;
    std::vector<Shape> shapes;
    for (int64_t len : {int64_t{1}, int64_t{3}, int64_t{2}}) {
      std::vector<int64_t> dims = dims_of(base);
      dims[a] = len;
      shapes.push_back(Shape::make(dims).value());
      values.push_back(distinct_values(shapes.back().num_elements()));
      for (float& v : values.back()) v += 1000.0f * static_cast<float>(parts.size() + 1);
      parts.push_back(HostTensor::f32(shapes.back(), values.back()));
    }
    OpCall call{.op_type = "Concat"};
    call.attrs.set("axis", int64_t{axis});
    for (const HostTensor& p : parts) call.inputs.emplace_back(p);
    auto result = run_op(call);
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    const HostTensor& y = result->outputs[0];
    ASSERT_EQ(y.shape.dims()[a], 6);
    const auto out = y.to_f32();
    for (int64_t i = 0; i < y.shape.num_elements(); ++i) {
      auto idx = unravel(i, y.shape);
      size_t part = 0;
      while (idx[a] >= shapes[part].dims()[a]) idx[a] -= shapes[part++].dims()[a];
      ASSERT_EQ(out[i], values[part][static_cast<size_t>(ravel(idx, shapes[part]))]) << "axis " << axis;
    }
  }
  // One input: a copy.
  OpCall one{.op_type = "Concat"};
  one.attrs.set("axis", int64_t{0});
  one.inputs = {HostTensor::i32(Shape{3}, {4, 5, 6})};
  auto r = run_op(one);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outputs[0].to_i64(), (std::vector<int64_t>{4, 5, 6}));
}

TEST(TensorOpsTest, ConcatRejectsMismatchedInputs) {
  auto run = [](std::vector<HostTensor> inputs, int64_t axis) {
    OpCall call{.op_type = "Concat"};
    call.attrs.set("axis", axis);
    for (HostTensor& t : inputs) call.inputs.emplace_back(std::move(t));
    return run_op(call);
  };
  auto mismatch =
      run({HostTensor::f32(Shape{2, 3}, distinct_values(6)), HostTensor::f32(Shape{3, 3}, distinct_values(9))}, 1);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.status().to_string().find("axis 0"), std::string::npos) << mismatch.status().to_string();
  EXPECT_FALSE(
      run({HostTensor::f32(Shape{2, 3}, distinct_values(6)), HostTensor::f32(Shape{6}, distinct_values(6))}, 0).ok());
  EXPECT_FALSE(
      run({HostTensor::f32(Shape{2, 3}, distinct_values(6)), HostTensor::i32(Shape{2, 3}, {1, 2, 3, 4, 5, 6})}, 0)
          .ok());
  EXPECT_FALSE(run({HostTensor::f32(Shape{2, 3}, distinct_values(6))}, 2).ok());
  OpCall no_axis{.op_type = "Concat"};
  no_axis.inputs = {HostTensor::f32(Shape{2}, {1, 2})};
  EXPECT_FALSE(run_op(no_axis).ok());
}

// ---- Slice ----

struct SliceCase {
  Shape shape;
  std::vector<int64_t> starts, ends, axes, steps;  // axes/steps empty = omitted
};

std::vector<float> reference_slice(const std::vector<float>& data, const Shape& shape, const SliceCase& c,
                                   std::vector<int64_t>* out_dims) {
  std::vector<SliceAxis> axes(static_cast<size_t>(shape.rank()));
  for (int d = 0; d < shape.rank(); ++d) axes[d] = SliceAxis{0, 1, shape.dims()[d]};
  for (size_t i = 0; i < c.starts.size(); ++i) {
    int64_t axis = c.axes.empty() ? static_cast<int64_t>(i) : c.axes[i];
    if (axis < 0) axis += shape.rank();
    const int64_t step = c.steps.empty() ? 1 : c.steps[i];
    // Independent restatement of ONNX clamping.
    const int64_t dim = shape.dims()[axis];
    int64_t s = c.starts[i] < 0 ? c.starts[i] + dim : c.starts[i];
    int64_t e = c.ends[i] < 0 ? c.ends[i] + dim : c.ends[i];
    if (step > 0) {
      s = std::max<int64_t>(0, std::min(s, dim));
      e = std::max<int64_t>(0, std::min(e, dim));
    } else {
      s = std::max<int64_t>(0, std::min(s, dim - 1));
      e = std::max<int64_t>(-1, std::min(e, dim - 1));
    }
    int64_t count = 0;
    for (int64_t k = s; step > 0 ? k < e : k > e; k += step) ++count;
    axes[static_cast<size_t>(axis)] = SliceAxis{s, step, count};
  }
  out_dims->clear();
  for (const SliceAxis& a : axes) out_dims->push_back(a.count);
  const Shape out = Shape::make(*out_dims).value();
  std::vector<float> y;
  for (int64_t i = 0; i < out.num_elements(); ++i) {
    auto idx = unravel(i, out);
    for (size_t d = 0; d < idx.size(); ++d) idx[d] = axes[d].start + idx[d] * axes[d].step;
    y.push_back(data[static_cast<size_t>(ravel(idx, shape))]);
  }
  return y;
}

TEST(TensorOpsTest, SliceOnnxSemantics) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  const std::vector<SliceCase> cases = {
      {{17}, {2}, {9}, {}, {}},
      {{17}, {-5}, {kMax}, {}, {}},     // last five
      {{17}, {-1}, {kMin}, {0}, {-1}},  // reversed
      {{17}, {15}, {2}, {0}, {-3}},     // negative step
      {{17}, {1}, {100}, {0}, {4}},     // step past the end
      {{4, 129}, {1, 3}, {3, -3}, {}, {}},
      {{4, 129}, {0}, {64}, {-1}, {2}},  // negative axis
      {{3, 5, 7}, {0, 6, 1}, {kMax, 0, 4}, {1, 2, 0}, {2, -2, 1}},
      {{3, 5, 7}, {4}, {2}, {1}, {1}},      // empty result
      {{2, 3, 4}, {-100}, {100}, {2}, {}},  // clamped to everything
  };
  for (const SliceCase& c : cases) {
    const auto data = distinct_values(c.shape.num_elements());
    OpCall call{.op_type = "Slice", .constant_inputs = {1, 2, 3, 4}};
    call.inputs = {HostTensor::f32(c.shape, data), shape_tensor(c.starts), shape_tensor(c.ends)};
    if (!c.axes.empty() || !c.steps.empty()) {
      std::vector<int64_t> axes = c.axes;
      if (axes.empty()) {
        axes.resize(c.starts.size());
        std::iota(axes.begin(), axes.end(), 0);
      }
      call.inputs.emplace_back(shape_tensor(axes));
    }
    if (!c.steps.empty()) call.inputs.emplace_back(shape_tensor(c.steps));
    auto result = run_op(call);
    ASSERT_TRUE(result.ok()) << c.shape.to_string() << ": " << result.status().to_string();
    std::vector<int64_t> dims;
    const auto expected = reference_slice(data, c.shape, c, &dims);
    EXPECT_EQ(dims_of(result->outputs[0].shape), dims) << c.shape.to_string();
    EXPECT_EQ(result->outputs[0].to_f32(), expected) << c.shape.to_string();
  }
  // i32 starts/ends.
  OpCall i32{.op_type = "Slice", .constant_inputs = {1, 2}};
  i32.inputs = {HostTensor::i64(Shape{5}, {1, 2, 3, 4, 5}), HostTensor::i32(Shape{1}, {1}),
                HostTensor::i32(Shape{1}, {-1})};
  auto r = run_op(i32);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->outputs[0].to_i64(), (std::vector<int64_t>{2, 3, 4}));
}

TEST(TensorOpsTest, SliceRejectsBadInputs) {
  auto run = [](std::vector<int64_t> starts, std::vector<int64_t> ends, std::vector<int64_t> axes,
                std::vector<int64_t> steps) {
    OpCall call{.op_type = "Slice", .constant_inputs = {1, 2, 3, 4}};
    call.inputs = {HostTensor::f32(Shape{4, 5}, distinct_values(20)), shape_tensor(starts), shape_tensor(ends),
                   shape_tensor(axes), shape_tensor(steps)};
    return run_op(call);
  };
  EXPECT_FALSE(run({0}, {2}, {0}, {0}).ok());              // zero step
  EXPECT_FALSE(run({0, 0}, {2, 2}, {1, 1}, {1, 1}).ok());  // repeated axis
  EXPECT_FALSE(run({0}, {2}, {2}, {1}).ok());              // axis out of range
  EXPECT_FALSE(run({0, 1}, {2}, {0}, {1}).ok());           // length mismatch
  EXPECT_TRUE(run({0}, {2}, {-2}, {1}).ok());
}

TEST(TensorOpsTest, StridedCopyMergesContiguousDims) {
  // A transpose that keeps the last two dims together merges them into one memcpy per row.
  const StridedCopy plan = transpose_plan(Shape{2, 3, 4, 5}, std::vector<int64_t>{1, 0, 2, 3}, 4);
  EXPECT_EQ(plan.rank(), 3);
  EXPECT_EQ(plan.cols(), 20);
  EXPECT_EQ(plan.rows(), 6);
  const StridedCopy identity = transpose_plan(Shape{2, 3, 4}, std::vector<int64_t>{0, 1, 2}, 4);
  EXPECT_EQ(identity.rank(), 1);
  EXPECT_EQ(identity.cols(), 24);
}

// ---- Symbolic shape inference ----

struct Input {
  graph::TensorDesc desc;
  std::vector<int64_t> constant;  // non-empty: an i64 initializer with these values
};

InferResult infer(const std::string& op_type, const std::vector<Input>& inputs, graph::AttributeMap attrs = {}) {
  std::vector<testing::InferInput> node_inputs;
  for (const Input& input : inputs) {
    if (input.constant.empty()) {
      node_inputs.push_back({.desc = input.desc});
    } else {
      const Shape shape{static_cast<int64_t>(input.constant.size())};
      node_inputs.push_back({.constant = HostTensor::i64(shape, input.constant)});
    }
  }
  return infer_node(op_type, "", node_inputs, std::move(attrs));
}

Input constant(std::vector<int64_t> v) {
  return Input{{}, std::move(v)};
}

TEST(TensorOpsTest, SymbolicReshapeInference) {
  const graph::Dim n = graph::Dim::symbol("n_tokens");
  const Input x{{DType::kF32, {n, 576}}, {}};
  InferResult copy_dim = infer("Reshape", {x, constant({0, 9, 64})});
  ASSERT_TRUE(copy_dim.status.ok()) << copy_dim.status.to_string();
  EXPECT_EQ(copy_dim.desc, "f32[n_tokens, 9, 64]");
  EXPECT_TRUE(copy_dim.checks.empty());
  InferResult minus_one = infer("Reshape", {x, constant({-1, 9, 64})});
  ASSERT_TRUE(minus_one.status.ok()) << minus_one.status.to_string();
  EXPECT_EQ(minus_one.desc, "f32[n_tokens, 9, 64]");
  InferResult merge = infer("Reshape", {{{DType::kF32, {n, 9, 64}}, {}}, constant({0, -1})});
  ASSERT_TRUE(merge.status.ok());
  EXPECT_EQ(merge.desc, "f32[n_tokens, 576]");
  InferResult flat = infer("Reshape", {x, constant({-1})});
  ASSERT_TRUE(flat.status.ok());
  EXPECT_EQ(flat.desc, "f32[" + (n * graph::Dim(576)).to_string() + "]");
  InferResult half = infer("Reshape", {x, constant({0, 2, -1})});
  ASSERT_TRUE(half.status.ok());
  EXPECT_EQ(half.desc, "f32[n_tokens, 2, 288]");
  // A static target for a symbolic input is a bind-time check.
  InferResult fixed = infer("Reshape", {x, constant({4, 144})});
  ASSERT_TRUE(fixed.status.ok());
  EXPECT_EQ(fixed.desc, "f32[4, 144]");
  EXPECT_EQ(fixed.checks.size(), 1u);
  EXPECT_FALSE(infer("Reshape", {{{DType::kF32, {6, 4}}, {}}, constant({5, -1})}).status.ok());
}

TEST(TensorOpsTest, SymbolicTransposeConcatGatherSliceInference) {
  const graph::Dim n = graph::Dim::symbol("n_tokens");
  const graph::Dim past = graph::Dim::symbol("past");
  graph::AttributeMap perm;
  perm.set("perm", std::vector<int64_t>{1, 0, 2});
  EXPECT_EQ(infer("Transpose", {{{DType::kF32, {n, 9, 64}}, {}}}, perm).desc, "f32[9, n_tokens, 64]");
  EXPECT_EQ(infer("Transpose", {{{DType::kF32, {n, 576}}, {}}}).desc, "f32[576, n_tokens]");

  graph::AttributeMap axis0;
  axis0.set("axis", int64_t{0});
  InferResult kv = infer("Concat", {{{DType::kF32, {past, 8, 64}}, {}}, {{DType::kF32, {n, 8, 64}}, {}}}, axis0);
  ASSERT_TRUE(kv.status.ok()) << kv.status.to_string();
  EXPECT_EQ(kv.desc, "f32[" + (past + n).to_string() + ", 8, 64]");
  graph::AttributeMap axis1;
  axis1.set("axis", int64_t{1});
  InferResult sym = infer("Concat", {{{DType::kF32, {n, 8}}, {}}, {{DType::kF32, {past, 8}}, {}}}, axis1);
  ASSERT_TRUE(sym.status.ok());
  EXPECT_EQ(sym.desc, "f32[n_tokens, 16]");
  EXPECT_EQ(sym.checks.size(), 1u);  // n_tokens == past at bind time
  EXPECT_FALSE(infer("Concat", {{{DType::kF32, {n, 8}}, {}}, {{DType::kF32, {n, 8, 1}}, {}}}, axis0).status.ok());

  // Embedding lookup: [vocab, 576] gathered by ids [n_tokens].
  InferResult embed = infer("Gather", {{{DType::kF32, {32000, 576}}, {}}, {{DType::kI32, {n}}, {}}});
  ASSERT_TRUE(embed.status.ok()) << embed.status.to_string();
  EXPECT_EQ(embed.desc, "f32[n_tokens, 576]");
  EXPECT_FALSE(infer("Gather", {{{DType::kF32, {10, 4}}, {}}, {{DType::kF32, {n}}, {}}}).status.ok());  // float ids
  EXPECT_FALSE(infer("Gather", {{{DType::kQ8_0, {10, 32}}, {}}, {{DType::kI32, {2}}, {}}}, axis1).status.ok());

  // Slice of the last token of a symbolic axis, and from a start to the end.
  const Input logits{{DType::kF32, {n, 1000}}, {}};
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  InferResult last = infer("Slice", {logits, constant({-1}), constant({kMax}), constant({0})});
  ASSERT_TRUE(last.status.ok()) << last.status.to_string();
  EXPECT_EQ(last.desc, "f32[1, 1000]");
  InferResult tail = infer("Slice", {logits, constant({2}), constant({kMax}), constant({0})});
  ASSERT_TRUE(tail.status.ok());
  EXPECT_EQ(tail.desc, "f32[" + (n - graph::Dim(2)).to_string() + ", 1000]");
  InferResult both = infer("Slice", {logits, constant({0, 10}), constant({4, -10}), constant({0, 1}), constant({1, 3})});
  ASSERT_TRUE(both.status.ok());
  EXPECT_EQ(both.desc, "f32[4, 327]");
  // Unsupported on a symbolic axis: a negative step, and a negative start with a finite end.
  EXPECT_FALSE(infer("Slice", {logits, constant({-1}), constant({0}), constant({0}), constant({-1})}).status.ok());
  EXPECT_FALSE(infer("Slice", {logits, constant({-3}), constant({5}), constant({0})}).status.ok());
  // Starts not constant.
  EXPECT_FALSE(infer("Slice", {logits, {{DType::kI64, {1}}, {}}, constant({5})}).status.ok());
}

// The conformance data moves f32, i64 and bool tensors: every movement op copies them by element size.
TEST(TensorOpsTest, MovementOpsOnBoolAndI64) {
  const std::vector<std::byte> flags = {std::byte{1}, std::byte{0}, std::byte{0}, std::byte{1}, std::byte{1},
                                        std::byte{0}};  // [[1, 0, 0], [1, 1, 0]]
  const HostTensor b = HostTensor::raw(DType::kBool, Shape{2, 3}, flags);
  const HostTensor i = HostTensor::i64(Shape{2, 3}, distinct_ints(6));  // [[1, 8, 15], [22, 29, 36]]

  OpCall transpose{.op_type = "Transpose"};
  transpose.inputs = {b};
  auto t = run_op(transpose);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->outputs[0].dtype, DType::kBool);
  EXPECT_EQ(t->outputs[0].to_i64(), (std::vector<int64_t>{1, 1, 0, 1, 0, 0}));

  OpCall concat{.op_type = "Concat"};
  concat.attrs.set("axis", int64_t{-1});
  concat.inputs = {b, b};
  auto c = run_op(concat);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->outputs[0].to_i64(), (std::vector<int64_t>{1, 0, 0, 1, 0, 0, 1, 1, 0, 1, 1, 0}));

  OpCall slice{.op_type = "Slice", .constant_inputs = {1, 2, 3, 4}};
  slice.inputs = {i, shape_tensor({-1}), shape_tensor({std::numeric_limits<int64_t>::min()}), shape_tensor({1}),
                  shape_tensor({-2})};
  auto s = run_op(slice);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->outputs[0].to_i64(), (std::vector<int64_t>{15, 1, 36, 22}));

  OpCall gather{.op_type = "Gather"};
  gather.attrs.set("axis", int64_t{1});
  gather.inputs = {b, HostTensor::i64(Shape{2}, {-1, 0})};
  auto g = run_op(gather);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(g->outputs[0].to_i64(), (std::vector<int64_t>{0, 1, 0, 1}));
}

}  // namespace
}  // namespace hxrt::kernels::cpu
