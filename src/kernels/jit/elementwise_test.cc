// The elementwise kernels on each JIT backend's device (opencl, cuda) against the CPU kernels.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kernels/jit/device_test_util.h"

namespace hxrt::kernels::jit {
namespace {

struct BinaryCase {
  Shape a, b;
};

class DeviceElementwiseTest : public DeviceKernelTest {};

TEST_P(DeviceElementwiseTest, BinaryOpsBroadcastLikeTheCpu) {
  std::mt19937 rng(11);
  const std::vector<BinaryCase> cases = {
      {Shape{7, 576}, Shape{7, 576}},                // the decoder's residual adds
      {Shape{1000}, Shape{1000}},                    // a ragged last block
      {Shape{4, 5, 6}, Shape{6}},                    // a trailing vector (bias)
      {Shape{3, 1, 5}, Shape{1, 4, 1}},              // both operands broadcast
      {Shape{1}, Shape{2, 3, 4}},                    // a scalar on the left
      {Shape{2, 3, 4, 5, 6}, Shape{1, 3, 4, 1, 6}},  // rank 5, four dims after merging
      {Shape{6, 1, 7}, Shape{6, 9, 7}},
  };
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
    for (const BinaryCase& c : cases) {
      OpCall call{.op_type = op};
      call.inputs = {random_signed(c.a, rng, 0.5f, 2.0f), random_signed(c.b, rng, 0.5f, 2.0f)};
      SCOPED_TRACE(fmt::format("{} {} {}", op, c.a, c.b));
      expect_close_to_cpu(call, device(), std::string(op) + "F32", 1e-6);
    }
  }
}

TEST_P(DeviceElementwiseTest, BinaryOpsAreBitIdenticalToTheCpu) {
  // One correctly rounded operation per element on both devices (--fmad=false, IEEE division): the same bits.
  std::mt19937 rng(16);
  const std::vector<BinaryCase> cases = {{Shape{1000}, Shape{1000}}, {Shape{3, 1, 5}, Shape{1, 4, 1}}};
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
    for (const BinaryCase& c : cases) {
      OpCall call{.op_type = op};
      call.inputs = {random_signed(c.a, rng, 0.01f, 6.0f), random_signed(c.b, rng, 0.01f, 6.0f)};
      SCOPED_TRACE(fmt::format("{} {} {}", op, c.a, c.b));
      expect_same_bytes(call, device(), std::string(op) + "F32");
    }
  }
}

TEST_P(DeviceElementwiseTest, BroadcastsNeedingMoreThanFourDimsAreUnimplemented) {
  std::mt19937 rng(14);
  OpCall call{.op_type = "Add", .device = device()};
  call.inputs = {random_signed(Shape{2, 3, 4, 5, 6}, rng), random_signed(Shape{2, 1, 4, 1, 6}, rng)};
  Result<OpResult> result = testing::run_op(call);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kUnimplemented) << result.status().to_string();
}

TEST_P(DeviceElementwiseTest, ActivationsMatchTheCpu) {
  std::mt19937 rng(12);
  struct Case {
    const char* op;
    const char* domain;
    const char* approximate;
  };
  for (const Case& c : {Case{"Relu", "", nullptr}, Case{"Sigmoid", "", nullptr}, Case{"Tanh", "", nullptr},
                        Case{"Silu", "hxrt", nullptr}, Case{"Gelu", "", "none"}, Case{"Gelu", "", "tanh"}}) {
    OpCall call{.op_type = c.op, .domain = c.domain};
    if (c.approximate != nullptr) call.attrs.set("approximate", graph::Attribute(c.approximate));
    call.inputs = {random_signed(Shape{3, 1537}, rng, 0.01f, 6.0f)};
    SCOPED_TRACE(c.op);
    expect_close_to_cpu(call, device(), std::string(c.op) + "F32", 1e-6);
  }
}

TEST_P(DeviceElementwiseTest, LeakyReluMatchesTheCpuAndTheReference) {
  std::mt19937 rng(15);
  for (double alpha : {0.01, 0.2, -1.5}) {
    for (const Shape& shape : {Shape{1}, Shape{257}, Shape{3, 1537}}) {
      OpCall call{.op_type = "LeakyRelu"};
      call.attrs.set("alpha", graph::Attribute(alpha));
      call.inputs = {random_signed(shape, rng, 0.01f, 6.0f)};
      SCOPED_TRACE(fmt::format("alpha {} {}", alpha, shape));
      // One multiply per negative element: bit-identical to the CPU.
      expect_same_bytes(call, device(), "LeakyReluF32");
      call.device = device();
      Result<OpResult> cu = testing::run_op(call);
      ASSERT_TRUE(cu.ok()) << cu.status().to_string();
      const double a = static_cast<float>(alpha);
      std::vector<double> expected;
      for (float v : call.inputs[0]->to_f32()) expected.push_back(v < 0 ? a * v : v);
      EXPECT_LT(testing::normalized_max_error(cu->outputs[0].to_f32(), expected), 1e-7);
    }
  }
}

TEST_P(DeviceElementwiseTest, SwiGluMatchesTheCpu) {
  std::mt19937 rng(13);
  OpCall call{.op_type = "SwiGLU", .domain = "hxrt.fused"};
  call.inputs = {random_signed(Shape{5, 1536}, rng, 0.01f, 6.0f), random_signed(Shape{5, 1536}, rng)};
  expect_close_to_cpu(call, device(), "SwiGLU", 1e-6);
}

TEST_P(DeviceElementwiseTest, EmptyTensorsLaunchNothing) {
  OpCall call{.op_type = "Add", .device = device()};
  call.inputs = {HostTensor::f32(Shape{0, 4}, {}), HostTensor::f32(Shape{4}, {1, 2, 3, 4})};
  Result<OpResult> result = testing::run_op(call);
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  EXPECT_EQ(result->outputs[0].shape, (Shape{0, 4}));
}

HXRT_DEVICE_KERNEL_TESTS(DeviceElementwiseTest);

}  // namespace
}  // namespace hxrt::kernels::jit
