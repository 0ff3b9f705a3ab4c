// OpenCL Conv, BatchNormalization and ConvBnRelu against the CPU kernels (im2col + OpenBLAS): the window sums run in
// another order, so the comparison is by normalised error.
#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kernels/opencl/opencl_test_util.h"

namespace hxrt::kernels::opencl {
namespace {

constexpr double kTolerance = 1e-5;

struct ConvCase {
  Shape x, w;
  std::vector<int64_t> strides{1, 1}, pads{0, 0, 0, 0}, dilations{1, 1};
  int64_t group = 1;
  std::string auto_pad = "NOTSET";
  bool bias = true;
};

std::vector<ConvCase> conv_cases() {
  std::vector<ConvCase> cases;
  cases.push_back({.x = Shape{1, 3, 32, 32}, .w = Shape{16, 3, 3, 3}, .pads = {1, 1, 1, 1}});  // cnn_block's first conv
  cases.push_back({.x = Shape{2, 3, 7, 9}, .w = Shape{5, 3, 1, 1}, .bias = false});            // 1x1, two images
  cases.push_back({.x = Shape{1, 4, 11, 10},
                   .w = Shape{6, 2, 3, 2},
                   .strides = {2, 3},
                   .pads = {0, 1, 2, 0},
                   .group = 2});  // groups, asymmetric pads
  cases.push_back({.x = Shape{1, 2, 13, 12}, .w = Shape{3, 2, 3, 3}, .dilations = {2, 3}, .auto_pad = "SAME_UPPER"});
  cases.push_back({.x = Shape{1, 2, 10, 9}, .w = Shape{3, 2, 4, 2}, .strides = {2, 2}, .auto_pad = "SAME_LOWER"});
  cases.push_back({.x = Shape{1, 6, 8, 8}, .w = Shape{6, 1, 3, 3}, .group = 6, .auto_pad = "VALID"});  // depthwise
  return cases;
}

OpCall conv_call(const ConvCase& c, std::mt19937& rng, bool fused) {
  OpCall call{.op_type = fused ? "ConvBnRelu" : "Conv", .domain = fused ? "hxrt.fused" : ""};
  call.attrs.set("strides", graph::Attribute(c.strides));
  call.attrs.set("dilations", graph::Attribute(c.dilations));
  call.attrs.set("group", graph::Attribute(c.group));
  call.attrs.set("auto_pad", graph::Attribute(c.auto_pad));
  if (c.auto_pad == "NOTSET") call.attrs.set("pads", graph::Attribute(c.pads));
  const int64_t m = c.w.dim(0);
  call.inputs = {random_signed(c.x, rng), random_signed(c.w, rng, 0.05f, 0.5f)};
  call.constant_inputs = {1};
  if (c.bias) {
    call.inputs.push_back(random_signed(Shape{m}, rng));
    call.constant_inputs.push_back(2);
  } else if (fused) {
    call.inputs.push_back(std::nullopt);
  }
  return call;
}

// BatchNormalization's scale, bias, mean (random signs) and var (positive) for `channels`.
std::vector<HostTensor> bn_params(int64_t channels, std::mt19937& rng) {
  return {random_signed(Shape{channels}, rng, 0.5f, 1.5f), random_signed(Shape{channels}, rng, 0.1f, 0.5f),
          random_signed(Shape{channels}, rng, 0.1f, 0.5f), HostTensor::random_f32(Shape{channels}, rng, 0.5f, 1.5f)};
}

TEST(OpenClConvTest, ConvMatchesTheCpuForEveryPaddingStrideDilationAndGroup) {
  HXRT_SKIP_WITHOUT_OPENCL();
  std::mt19937 rng(71);
  for (const ConvCase& c : conv_cases()) {
    SCOPED_TRACE(fmt::format("X {} W {} group {} auto_pad {}", c.x, c.w, c.group, c.auto_pad));
    expect_close_to_cpu(conv_call(c, rng, /*fused=*/false), "Conv", kTolerance);
  }
}

TEST(OpenClConvTest, ConvBnReluMatchesTheCpu) {
  HXRT_SKIP_WITHOUT_OPENCL();
  std::mt19937 rng(72);
  for (int64_t relu : {1, 0}) {
    for (const ConvCase& c : conv_cases()) {
      SCOPED_TRACE(fmt::format("relu {} X {} W {} group {} bias {}", relu, c.x, c.w, c.group, c.bias));
      OpCall call = conv_call(c, rng, /*fused=*/true);
      call.attrs.set("epsilon", graph::Attribute(1e-3));
      call.attrs.set("relu", graph::Attribute(relu));
      for (HostTensor& t : bn_params(c.w.dim(0), rng)) {
        call.constant_inputs.push_back(call.inputs.size());
        call.inputs.push_back(std::move(t));
      }
      expect_close_to_cpu(call, "ConvBnRelu", kTolerance);
    }
  }
}

TEST(OpenClConvTest, BatchNormalizationMatchesTheCpu) {
  HXRT_SKIP_WITHOUT_OPENCL();
  std::mt19937 rng(73);
  for (const Shape& shape : {Shape{1, 16, 32, 32}, Shape{2, 5, 3, 7}, Shape{3, 4}, Shape{2, 3, 5}}) {
    SCOPED_TRACE(shape.to_string());
    OpCall call{.op_type = "BatchNormalization"};
    call.attrs.set("epsilon", graph::Attribute(1e-5));
    call.inputs = {random_signed(shape, rng)};
    for (HostTensor& t : bn_params(shape.dim(1), rng)) call.inputs.push_back(std::move(t));
    call.constant_inputs = {1, 2, 3, 4};
    expect_close_to_cpu(call, "BatchNormalization", 1e-6);
  }
}

TEST(OpenClConvTest, BadConvolutionsReturnAnError) {
  HXRT_SKIP_WITHOUT_OPENCL();
  std::mt19937 rng(74);
  ConvCase group_mismatch{.x = Shape{1, 3, 8, 8}, .w = Shape{4, 3, 3, 3}, .group = 2};  // 3 channels in 2 groups
  EXPECT_FALSE(opencl_status(conv_call(group_mismatch, rng, false)).ok());
  ConvCase too_large{.x = Shape{1, 2, 3, 3}, .w = Shape{2, 2, 5, 5}};  // kernel past the input
  EXPECT_FALSE(opencl_status(conv_call(too_large, rng, false)).ok());
  ConvCase bad_stride{.x = Shape{1, 2, 8, 8}, .w = Shape{2, 2, 3, 3}, .strides = {0, 1}};
  EXPECT_FALSE(opencl_status(conv_call(bad_stride, rng, false)).ok());

  OpCall bn{.op_type = "BatchNormalization"};
  bn.inputs = {random_signed(Shape{2, 4, 3}, rng)};
  for (HostTensor& t : bn_params(3, rng)) bn.inputs.push_back(std::move(t));  // 3 values for 4 channels
  EXPECT_FALSE(opencl_status(bn).ok());

  ConvCase fine{.x = Shape{1, 2, 6, 6}, .w = Shape{3, 2, 3, 3}};
  OpCall fused = conv_call(fine, rng, true);
  for (HostTensor& t : bn_params(2, rng)) fused.inputs.push_back(std::move(t));  // 2 values for M = 3
  EXPECT_FALSE(opencl_status(fused).ok());
}

}  // namespace
}  // namespace hxrt::kernels::opencl
