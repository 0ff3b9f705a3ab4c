// OpenCL RMSNorm, RMSNormMul, Softmax and RoPE against the CPU kernels.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "kernels/opencl/opencl_test_util.h"

namespace hxrt::kernels::opencl {
namespace {

TEST(OpenClNormalizationTest, RmsNormAndRmsNormMulMatchTheCpu) {
  HXRT_SKIP_WITHOUT_OPENCL();
  std::mt19937 rng(21);
  for (const Shape& shape : {Shape{1, 576}, Shape{7, 576}, Shape{3, 37}, Shape{2, 3, 1}, Shape{4, 1536}}) {
    SCOPED_TRACE(shape.to_string());
    OpCall plain{.op_type = "RMSNorm", .domain = "hxrt"};
    plain.attrs.set("epsilon", graph::Attribute(1e-5));
    plain.inputs = {random_signed(shape, rng)};
    expect_close_to_cpu(plain, "RMSNormF32", 1e-6);

    OpCall fused{.op_type = "RMSNormMul", .domain = "hxrt.fused"};
    fused.attrs.set("epsilon", graph::Attribute(1e-5));
    fused.inputs = {random_signed(shape, rng), random_signed(Shape{shape.dim(-1)}, rng)};
    expect_close_to_cpu(fused, "RMSNormMul", 1e-6);
  }
}

TEST(OpenClNormalizationTest, SoftmaxOverAnyAxisMatchesTheCpu) {
  HXRT_SKIP_WITHOUT_OPENCL();
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
    expect_close_to_cpu(call, "SoftmaxF32", 1e-6);
  }
}

TEST(OpenClNormalizationTest, RopeMatchesTheCpu) {
  HXRT_SKIP_WITHOUT_OPENCL();
  std::mt19937 rng(23);
  struct Case {
    Shape shape;
    int64_t rotary_dims;
    const char* mode;
    double theta;
    bool i32_positions;
  };
  const std::vector<Case> cases = {
      {{5, 9, 64}, 0, "normal", 100000.0, true},  // SmolLM2's q heads
      {{5, 3, 64}, 0, "neox", 10000.0, true},
      {{4, 2, 10}, 6, "normal", 10000.0, false},  // a copied tail
      {{4, 2, 9}, 4, "neox", 500000.0, false},    // an odd head_dim
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
    expect_close_to_cpu(call, "RoPEF32", 1e-6);
  }
}

}  // namespace
}  // namespace hxrt::kernels::opencl
