// On each JIT backend's device: RMSNorm, RMSNormMul, Softmax, LayerNormalization and RoPE against the CPU kernels.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kernels/jit/device_test_util.h"

namespace hxrt::kernels::jit {
namespace {

class DeviceNormalizationTest : public DeviceKernelTest {};

TEST_P(DeviceNormalizationTest, RmsNormAndRmsNormMulMatchTheCpu) {
  std::mt19937 rng(21);
  for (const Shape& shape : {Shape{1, 576}, Shape{7, 576}, Shape{3, 37}, Shape{2, 3, 1}, Shape{4, 1536}}) {
    SCOPED_TRACE(shape.to_string());
    OpCall plain{.op_type = "RMSNorm", .domain = "hxrt"};
    plain.attrs.set("epsilon", graph::Attribute(1e-5));
    plain.inputs = {random_signed(shape, rng)};
    expect_close_to_cpu(plain, device(), "RMSNormF32", 1e-6);

    OpCall fused{.op_type = "RMSNormMul", .domain = "hxrt.fused"};
    fused.attrs.set("epsilon", graph::Attribute(1e-5));
    fused.inputs = {random_signed(shape, rng), random_signed(Shape{shape.dim(-1)}, rng)};
    expect_close_to_cpu(fused, device(), "RMSNormMul", 1e-6);
  }
}

TEST_P(DeviceNormalizationTest, SoftmaxOverAnyAxisMatchesTheCpu) {
  std::mt19937 rng(22);
  struct Case {
    Shape shape;
    int64_t axis;
  };
  for (const Case& c : {Case{Shape{5, 49}, -1}, Case{Shape{2, 3000}, 1}, Case{Shape{3, 7, 5}, 1}, Case{Shape{6, 4}, 0},
                        Case{Shape{1, 1}, -1}}) {
    SCOPED_TRACE(fmt::format("{} axis {}", c.shape, c.axis));
    OpCall call{.op_type = "Softmax"};
    call.attrs.set("axis", graph::Attribute(c.axis));
    call.inputs = {random_signed(c.shape, rng, 0.01f, 8.0f)};
    expect_close_to_cpu(call, device(), "SoftmaxF32", 1e-6);
  }
}

TEST_P(DeviceNormalizationTest, LayerNormalizationMatchesTheCpu) {
  std::mt19937 rng(24);
  struct Case {
    Shape shape;
    int64_t axis;
    bool bias;
  };
  // Rows of 37, 45, 768 and 1 values (blocks of 16, 16, 128 and 1 threads, as the Softmax tests use).
  for (const Case& c : {Case{Shape{3, 37}, -1, true}, Case{Shape{2, 5, 9}, 1, false}, Case{Shape{2, 3, 9, 5}, -2, true},
                        Case{Shape{4, 768}, 1, true}, Case{Shape{6, 1}, -1, true}}) {
    SCOPED_TRACE(fmt::format("{} axis {} bias {}", c.shape, c.axis, c.bias));
    int64_t d = 1;
    const int axis = static_cast<int>(c.axis < 0 ? c.axis + c.shape.rank() : c.axis);
    std::vector<int64_t> norm_dims;
    for (int i = axis; i < c.shape.rank(); ++i) {
      d *= c.shape.dim(i);
      norm_dims.push_back(c.shape.dim(i));
    }
    const Shape norm_shape = Shape::make(norm_dims).value();
    OpCall call{.op_type = "LayerNormalization"};
    call.attrs.set("axis", graph::Attribute(c.axis));
    call.attrs.set("epsilon", graph::Attribute(1e-5));
    // An offset keeps the mean away from zero, so the two-pass variance matters.
    HostTensor x = random_signed(c.shape, rng);
    std::vector<float> shifted = x.to_f32();
    for (float& v : shifted) v += 3.0f;
    call.inputs = {HostTensor::f32(c.shape, shifted), random_signed(norm_shape, rng)};
    if (c.bias) call.inputs.push_back(random_signed(norm_shape, rng));
    expect_close_to_cpu(call, device(), "LayerNormalizationF32", 1e-6);
  }
}

TEST_P(DeviceNormalizationTest, BadLayerNormalizationReturnsAnError) {
  std::mt19937 rng(25);
  OpCall call{.op_type = "LayerNormalization"};
  call.attrs.set("axis", graph::Attribute(int64_t{2}));  // out of range for rank 2
  call.inputs = {random_signed(Shape{3, 8}, rng), random_signed(Shape{8}, rng)};
  EXPECT_FALSE(device_status(call, device()).ok());
  call.attrs.set("axis", graph::Attribute(int64_t{-1}));
  call.inputs = {random_signed(Shape{3, 8}, rng), random_signed(Shape{7}, rng)};  // Scale of the wrong size
  EXPECT_FALSE(device_status(call, device()).ok());
}

TEST_P(DeviceNormalizationTest, RmsNormMulWithAWrongWeightReturnsAnError) {
  std::mt19937 rng(26);
  OpCall call{.op_type = "RMSNormMul", .domain = "hxrt.fused"};
  call.attrs.set("epsilon", graph::Attribute(1e-5));
  call.inputs = {random_signed(Shape{3, 16}, rng), random_signed(Shape{15}, rng)};
  EXPECT_FALSE(device_status(call, device()).ok());
}

TEST_P(DeviceNormalizationTest, RopeMatchesTheCpu) {
  std::mt19937 rng(23);
  struct Case {
    Shape shape;
    int64_t rotary_dims;
    const char* mode;
    double theta;
    bool i32_positions;
  };
  const std::vector<Case> cases = {
      // SmolLM2's q heads
      {{5, 9, 64}, 0, "normal", 100000.0, true},
      {{5, 3, 64}, 0, "neox", 10000.0, true},
      // a copied tail
      {{4, 2, 10}, 6, "normal", 10000.0, false},
      // an odd head_dim
      {{4, 2, 9}, 4, "neox", 500000.0, false},
      {{2, 17, 3, 8}, 4, "normal", 10000.0, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("{} {} rotary_dims {}", c.shape, c.mode, c.rotary_dims));
    const int64_t n_tokens = c.shape.dim(-3);
    std::vector<int64_t> positions(static_cast<size_t>(n_tokens));
    std::uniform_int_distribution<int64_t> position(1, 8000);
    for (int64_t& p : positions) p = position(rng);
    OpCall call{.op_type = "RoPE", .domain = "hxrt"};
    call.attrs.set("mode", graph::Attribute(c.mode));
    call.attrs.set("theta", graph::Attribute(c.theta));
    if (c.rotary_dims != 0) call.attrs.set("rotary_dims", graph::Attribute(c.rotary_dims));
    HostTensor pos = c.i32_positions
                         ? HostTensor::i32(Shape{n_tokens}, std::vector<int32_t>(positions.begin(), positions.end()))
                         : HostTensor::i64(Shape{n_tokens}, positions);
    call.inputs = {random_signed(c.shape, rng), pos};
    expect_close_to_cpu(call, device(), "RoPEF32", 1e-6);
  }
}

TEST_P(DeviceNormalizationTest, ScaledRopeMatchesTheCpu) {
  std::mt19937 rng(29);
  const Shape shape{5, 4, 64};
  const std::vector<int64_t> positions = {0, 3, 4095, 20000, 131071};
  std::vector<float> factors(32);
  std::uniform_real_distribution<float> factor(1.0f, 8.0f);
  for (float& v : factors) v = factor(rng);
  struct Case {
    const char* name;
    bool with_factors;
    double freq_scale, ext_factor, attn_factor;
    int64_t n_ctx_orig;
  };
  const std::vector<Case> cases = {{"llama3 factors", true, 1.0, 0.0, 1.0, 0},
                                   {"linear x4", false, 0.25, 0.0, 1.0, 0},
                                   {"yarn x4", false, 0.25, 1.0, 1.1386, 4096},
                                   {"factors + yarn half", true, 0.125, 0.5, 1.2, 2048}};
  for (const char* mode : {"normal", "neox"}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(fmt::format("{} {}", c.name, mode));
      OpCall call{.op_type = "RoPE", .domain = "hxrt"};
      call.attrs.set("mode", graph::Attribute(mode));
      call.attrs.set("theta", graph::Attribute(500000.0));
      call.attrs.set("freq_scale", graph::Attribute(c.freq_scale));
      call.attrs.set("ext_factor", graph::Attribute(c.ext_factor));
      call.attrs.set("attn_factor", graph::Attribute(c.attn_factor));
      call.attrs.set("n_ctx_orig", graph::Attribute(c.n_ctx_orig));
      call.inputs = {random_signed(shape, rng), HostTensor::i64(Shape{5}, positions)};
      if (c.with_factors) call.inputs.push_back(HostTensor::f32(Shape{32}, factors));
      expect_close_to_cpu(call, device(), "RoPEF32", 1e-6);
    }
  }
}

HXRT_DEVICE_KERNEL_TESTS(DeviceNormalizationTest);

}  // namespace
}  // namespace hxrt::kernels::jit
