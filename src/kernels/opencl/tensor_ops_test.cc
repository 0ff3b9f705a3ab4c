// OpenCL Gather and Reshape against the CPU kernels.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "kernels/opencl/opencl_test_util.h"

namespace hxrt::kernels::opencl {
namespace {

// Runs `call` on both devices and expects bit-identical outputs (copies).
void expect_same_bytes(OpCall call, const std::string& kernel) {
  call.device = "cpu";
  Result<OpResult> cpu = testing::run_op(call);
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  call.device = "opencl";
  Result<OpResult> cl = testing::run_op(call);
  ASSERT_TRUE(cl.ok()) << cl.status().to_string();
  EXPECT_EQ(cl->kernel, kernel);
  ASSERT_EQ(cl->outputs.size(), cpu->outputs.size());
  for (size_t i = 0; i < cpu->outputs.size(); ++i) EXPECT_EQ(cl->outputs[i], cpu->outputs[i]) << "output " << i;
}

TEST(OpenClTensorOpsTest, GatherCopiesTheRowsOfAnyAxisAndWidth) {
  HXRT_SKIP_WITHOUT_OPENCL();
  std::mt19937 rng(31);
  // f32 rows (4-byte words) on axis 0 and 1, i32 and i64 indices, negative indices.
  for (int64_t axis : {0, 1}) {
    OpCall call{.op_type = "Gather"};
    call.attrs.set("axis", graph::Attribute(axis));
    call.inputs = {random_signed(Shape{6, 5, 7}, rng), HostTensor::i32(Shape{4}, {3, -1, 0, 3})};
    SCOPED_TRACE(fmt::format("f32 axis {}", axis));
    expect_same_bytes(call, "Gather");
    call.inputs[1] = HostTensor::i64(Shape{2, 2}, {1, 4, -5, 2});
    expect_same_bytes(call, "Gather");
  }
  // f16 rows of an odd width (2-byte words) and u8 rows (1-byte words).
  std::vector<std::byte> halves(static_cast<size_t>(5 * 3 * 2));
  for (size_t i = 0; i < halves.size(); i += 2) {
    const uint16_t h = f32_to_f16(static_cast<float>(i) * 0.25f + 1.0f);
    std::memcpy(&halves[i], &h, 2);
  }
  OpCall f16{.op_type = "Gather"};
  f16.inputs = {HostTensor::raw(DType::kF16, Shape{5, 3}, halves), HostTensor::i32(Shape{3}, {4, 0, 2})};
  expect_same_bytes(f16, "Gather");
  std::vector<std::byte> bytes(5 * 3);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(i * 7 + 1);
  OpCall u8{.op_type = "Gather"};
  u8.inputs = {HostTensor::raw(DType::kU8, Shape{5, 3}, bytes), HostTensor::i32(Shape{3}, {1, 4, 1})};
  expect_same_bytes(u8, "Gather");
}

TEST(OpenClTensorOpsTest, GatherIndexOutOfRangeFailsTheLaunch) {
  HXRT_SKIP_WITHOUT_OPENCL();
  std::mt19937 rng(32);
  OpCall call{.op_type = "Gather", .device = "opencl"};
  call.inputs = {random_signed(Shape{4, 8}, rng), HostTensor::i32(Shape{2}, {1, 4})};
  Result<OpResult> result = testing::run_op(call);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kOutOfRange) << result.status().to_string();
}

TEST(OpenClTensorOpsTest, ReshapeCopiesTheData) {
  HXRT_SKIP_WITHOUT_OPENCL();
  std::mt19937 rng(33);
  OpCall call{.op_type = "Reshape"};
  call.inputs = {random_signed(Shape{5, 576}, rng), HostTensor::i64(Shape{3}, {-1, 9, 64})};
  call.constant_inputs = {1};
  expect_same_bytes(call, "Reshape");
}

}  // namespace
}  // namespace hxrt::kernels::opencl
