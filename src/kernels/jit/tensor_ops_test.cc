// On each JIT backend's device: Gather, Reshape, Transpose, Slice and Concat against the CPU kernels (copies:
// bit-identical outputs); skipped where the device is absent.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <fmt/ranges.h>

#include "hxrt/base/float16.h"
#include "kernels/jit/device_test_util.h"

namespace hxrt::kernels::jit {
namespace {

class DeviceTensorOpsTest : public DeviceKernelTest {};

TEST_P(DeviceTensorOpsTest, GatherCopiesTheRowsOfAnyAxisAndWidth) {
  std::mt19937 rng(31);
  // f32 rows (4-byte words) on axis 0 and 1, i32 and i64 indices, negative indices.
  for (int64_t axis : {0, 1}) {
    OpCall call{.op_type = "Gather"};
    call.attrs.set("axis", graph::Attribute(axis));
    call.inputs = {random_signed(Shape{6, 5, 7}, rng), HostTensor::i32(Shape{4}, {3, -1, 0, 3})};
    SCOPED_TRACE(fmt::format("f32 axis {}", axis));
    expect_same_bytes(call, device(), "Gather");
    call.inputs[1] = HostTensor::i64(Shape{2, 2}, {1, 4, -5, 2});
    expect_same_bytes(call, device(), "Gather");
  }
  // f16 rows of an odd width (2-byte words) and u8 rows (1-byte words).
  std::vector<std::byte> halves(static_cast<size_t>(5 * 3 * 2));
  for (size_t i = 0; i < halves.size(); i += 2) {
    const uint16_t h = f32_to_f16(static_cast<float>(i) * 0.25f + 1.0f);
    std::memcpy(&halves[i], &h, 2);
  }
  OpCall f16{.op_type = "Gather"};
  f16.inputs = {HostTensor::raw(DType::kF16, Shape{5, 3}, halves), HostTensor::i32(Shape{3}, {4, 0, 2})};
  expect_same_bytes(f16, device(), "Gather");
  std::vector<std::byte> bytes(5 * 3);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(i * 7 + 1);
  OpCall u8{.op_type = "Gather"};
  u8.inputs = {HostTensor::raw(DType::kU8, Shape{5, 3}, bytes), HostTensor::i32(Shape{3}, {1, 4, 1})};
  expect_same_bytes(u8, device(), "Gather");
}

TEST_P(DeviceTensorOpsTest, GatherCopiesWholeQuantizedRows) {
  std::mt19937 rng(38);
  // Embedding lookups on GGUF rows: q8_0 rows of 2 x 34 bytes move as 4-byte words, q4_0 rows of 18 bytes as 2-byte
  // words.
  for (const auto& [dtype, cols] : {std::pair{DType::kQ8_0, int64_t{64}}, std::pair{DType::kQ4_0, int64_t{32}}}) {
    SCOPED_TRACE(fmt::format("{}", dtype));
    OpCall call{.op_type = "Gather"};
    call.inputs = {random_quantized(dtype, 7, cols, rng), HostTensor::i64(Shape{3}, {6, -7, 2})};
    expect_same_bytes(call, device(), "Gather");
  }
}

TEST_P(DeviceTensorOpsTest, GatherIndexOutOfRangeFailsTheLaunch) {
  std::mt19937 rng(32);
  OpCall call{.op_type = "Gather", .device = device()};
  call.inputs = {random_signed(Shape{4, 8}, rng), HostTensor::i32(Shape{2}, {1, 4})};
  Result<OpResult> result = testing::run_op(call);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kOutOfRange) << result.status().to_string();
}

TEST_P(DeviceTensorOpsTest, ReshapeCopiesTheData) {
  std::mt19937 rng(33);
  OpCall call{.op_type = "Reshape"};
  call.inputs = {random_signed(Shape{5, 576}, rng), HostTensor::i64(Shape{3}, {-1, 9, 64})};
  call.constant_inputs = {1};
  expect_same_bytes(call, device(), "Reshape");
}

// Random raw values of a plain dtype of `bytes` bytes per element (no zero bytes, so a skipped copy shows).
HostTensor random_raw(DType dtype, Shape shape, std::mt19937& rng) {
  const size_t width = dtype_info(dtype).block_bytes;
  std::vector<std::byte> bytes(static_cast<size_t>(shape.num_elements()) * width);
  std::uniform_int_distribution<int> byte(1, 255);
  for (std::byte& b : bytes) b = static_cast<std::byte>(byte(rng));
  return HostTensor::raw(dtype, shape, std::move(bytes));
}

TEST_P(DeviceTensorOpsTest, TransposeMatchesTheCpuForEveryWidth) {
  std::mt19937 rng(34);
  struct Case {
    Shape shape;
    std::vector<int64_t> perm;  // empty: the default (reverse)
  };
  const std::vector<Case> cases = {
      {Shape{5, 7}, {}},  // a plain matrix transpose, default perm
      {Shape{2, 3, 4}, {2, 0, 1}},
      {Shape{1, 6, 1, 5}, {3, 1, 0, 2}},                          // dims of 1 dropped
      {Shape{2, 3, 4, 5}, {0, 1, 3, 2}},                          // leading dims merged
      {Shape{3, 2, 5, 1, 4, 3}, {5, 4, 3, 2, 1, 0}},              // rank 6
      {Shape{2, 2, 2, 2, 2, 2, 2, 3}, {7, 0, 6, 1, 5, 2, 4, 3}},  // rank 8, nothing merges
  };
  for (DType dtype : {DType::kF32, DType::kF16, DType::kU8, DType::kI64}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(fmt::format("{} {} perm [{}]", dtype, c.shape, fmt::join(c.perm, ",")));
      OpCall call{.op_type = "Transpose"};
      if (!c.perm.empty()) call.attrs.set("perm", graph::Attribute(c.perm));
      call.inputs = {random_raw(dtype, c.shape, rng)};
      expect_same_bytes(call, device(), "Transpose");
    }
  }
}

TEST_P(DeviceTensorOpsTest, SliceMatchesTheCpuIncludingClampingAndNegativeSteps) {
  std::mt19937 rng(35);
  struct Case {
    Shape shape;
    std::vector<int64_t> starts, ends, axes, steps;  // empty axes/steps: the input is omitted
  };
  const int64_t kBig = std::numeric_limits<int64_t>::max();
  const std::vector<Case> cases = {
      {Shape{10, 7}, {2}, {8}, {}, {}},                      // axes and steps omitted
      {Shape{10, 7}, {-3, 1}, {kBig, -1}, {0, 1}, {1, 2}},   // negative bounds, an end past the dim
      {Shape{10, 7}, {9, 6}, {-kBig, 0}, {0, 1}, {-1, -2}},  // negative steps down to the start (and clamped)
      {Shape{4, 5, 6}, {100}, {-100}, {2}, {-3}},            // a start past the end clamps to dim - 1
      {Shape{4, 5, 6}, {1, -2}, {3, -5}, {-1, 0}, {2, -1}},  // negative axes
      {Shape{3, 9, 2}, {0}, {9}, {1}, {4}},                  // a step that does not divide the length
      {Shape{6, 5}, {4}, {2}, {0}, {1}},                     // empty: start after end
  };
  for (bool i32 : {false, true}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(fmt::format("{} starts [{}] ends [{}] axes [{}] steps [{}] i32 {}", c.shape,
                               fmt::join(c.starts, ","), fmt::join(c.ends, ","), fmt::join(c.axes, ","),
                               fmt::join(c.steps, ","), i32));
      const auto ints = [i32](const std::vector<int64_t>& v) {
        if (!i32) return HostTensor::i64(Shape{static_cast<int64_t>(v.size())}, v);
        std::vector<int32_t> narrow;
        for (int64_t x : v) narrow.push_back(static_cast<int32_t>(std::clamp<int64_t>(x, INT32_MIN, INT32_MAX)));
        return HostTensor::i32(Shape{static_cast<int64_t>(v.size())}, narrow);
      };
      OpCall call{.op_type = "Slice"};
      call.inputs = {random_raw(DType::kF32, c.shape, rng), ints(c.starts), ints(c.ends)};
      call.constant_inputs = {1, 2};
      if (!c.axes.empty()) {
        call.inputs.push_back(ints(c.axes));
        call.constant_inputs.push_back(3);
      }
      if (!c.steps.empty()) {
        if (c.axes.empty()) call.inputs.push_back(std::nullopt);
        call.inputs.push_back(ints(c.steps));
        call.constant_inputs.push_back(4);
      }
      expect_same_bytes(call, device(), "Slice");
    }
  }
  // Another width: f16.
  OpCall call{.op_type = "Slice"};
  call.inputs = {random_raw(DType::kF16, Shape{5, 9}, rng), HostTensor::i64(Shape{1}, {7}),
                 HostTensor::i64(Shape{1}, {0}), HostTensor::i64(Shape{1}, {1}), HostTensor::i64(Shape{1}, {-3})};
  call.constant_inputs = {1, 2, 3, 4};
  expect_same_bytes(call, device(), "Slice");
}

TEST_P(DeviceTensorOpsTest, ConcatMatchesTheCpuOnAnyAxis) {
  std::mt19937 rng(36);
  struct Case {
    std::vector<Shape> shapes;
    int64_t axis;
  };
  const std::vector<Case> cases = {
      {{Shape{2, 3}, Shape{5, 3}}, 0},
      {{Shape{4, 3, 5}, Shape{4, 1, 5}, Shape{4, 7, 5}}, 1},
      {{Shape{3, 2, 7}, Shape{3, 2, 1}, Shape{3, 2, 0}, Shape{3, 2, 4}}, -1},  // an empty input
      {{Shape{9}}, 0},                                                         // a single input
  };
  for (DType dtype : {DType::kF32, DType::kI64, DType::kU8}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(fmt::format("{} axis {} first {}", dtype, c.axis, c.shapes[0]));
      OpCall call{.op_type = "Concat"};
      call.attrs.set("axis", graph::Attribute(c.axis));
      for (const Shape& shape : c.shapes) call.inputs.push_back(random_raw(dtype, shape, rng));
      expect_same_bytes(call, device(), "Concat");
    }
  }
}

TEST_P(DeviceTensorOpsTest, BadTransposeSliceAndConcatReturnAnError) {
  std::mt19937 rng(37);
  OpCall transpose{.op_type = "Transpose"};
  transpose.attrs.set("perm", graph::Attribute(std::vector<int64_t>{0, 0, 1}));
  transpose.inputs = {random_signed(Shape{2, 3, 4}, rng)};
  EXPECT_FALSE(device_status(transpose, device()).ok());

  OpCall zero_step{.op_type = "Slice"};
  zero_step.inputs = {random_signed(Shape{4, 4}, rng), HostTensor::i64(Shape{1}, {0}), HostTensor::i64(Shape{1}, {4}),
                      HostTensor::i64(Shape{1}, {0}), HostTensor::i64(Shape{1}, {0})};
  zero_step.constant_inputs = {1, 2, 3, 4};
  EXPECT_FALSE(device_status(zero_step, device()).ok());

  OpCall repeated_axis = zero_step;
  repeated_axis.inputs = {random_signed(Shape{4, 4}, rng), HostTensor::i64(Shape{2}, {0, 1}),
                          HostTensor::i64(Shape{2}, {4, 3}), HostTensor::i64(Shape{2}, {0, -2}),
                          HostTensor::i64(Shape{2}, {1, 1})};
  EXPECT_FALSE(device_status(repeated_axis, device()).ok());

  OpCall concat{.op_type = "Concat"};
  concat.attrs.set("axis", graph::Attribute(int64_t{0}));
  concat.inputs = {random_signed(Shape{2, 3}, rng), random_signed(Shape{2, 4}, rng)};
  EXPECT_FALSE(device_status(concat, device()).ok());
  concat.attrs.set("axis", graph::Attribute(int64_t{2}));
  concat.inputs = {random_signed(Shape{2, 3}, rng), random_signed(Shape{2, 3}, rng)};
  EXPECT_FALSE(device_status(concat, device()).ok());
}

HXRT_DEVICE_KERNEL_TESTS(DeviceTensorOpsTest);

}  // namespace
}  // namespace hxrt::kernels::jit
