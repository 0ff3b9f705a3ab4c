// The ops' typed params: checked access, parse errors naming the node and the attribute, and geometry.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "hxrt/ops/params/common.h"
#include "hxrt/ops/params/conv.h"
#include "hxrt/ops/params/elementwise.h"
#include "hxrt/ops/params/normalization.h"

namespace hxrt::ops {
namespace {

graph::Node node(std::string op_type, std::string domain = "") {
  graph::Node n;
  n.name = "n7";
  n.op_type = std::move(op_type);
  n.domain = std::move(domain);
  return n;
}

TEST(ParamsTest, CheckedAccessReturnsTheParamsOfTheirType) {
  const std::unique_ptr<KernelParams> params = boxed(AxisParams{});
  EXPECT_EQ(params->type_name(), "AxisParams");
  EXPECT_EQ(&params_as<AxisParams>(params.get()), params.get());
  KernelLaunch launch;
  launch.params = params.get();
  EXPECT_EQ(launch.params_as<AxisParams>().axis, 0);
}

TEST(ParamsDeathTest, AMismatchAbortsNamingBothTypes) {
  const std::unique_ptr<KernelParams> params = boxed(EpsilonParams{});
  KernelLaunch launch;
  launch.params = params.get();
  EXPECT_DEATH((void)launch.params_as<RopeParams>(), "expected RopeParams, got EpsilonParams");
  launch.params = nullptr;
  EXPECT_DEATH((void)launch.params_as<RopeParams>(), "expected RopeParams, got none");
  Tiling tiling;
  EXPECT_DEATH((void)tiling.geometry_as<SoftmaxGeometry>(), "tiling geometry: expected SoftmaxGeometry, got none");
}

TEST(ParamsTest, ErrorsNameTheNodeAndTheAttribute) {
  graph::Node rope = node("RoPE", "hxrt");
  rope.attrs.set("theta", 0.0);
  Result<RopeParams> bad_theta = parse_rope_params(rope);
  ASSERT_FALSE(bad_theta.ok());
  EXPECT_EQ(bad_theta.status().message(), "node 'n7' (hxrt.RoPE): attribute 'theta' = 0 must be > 0");
  rope.attrs.set("theta", 10000.0);
  rope.attrs.set("mode", "sideways");
  EXPECT_NE(parse_rope_params(rope).status().message().find("attribute 'mode'"), std::string::npos);

  graph::Node norm = node("LayerNormalization");
  norm.attrs.set("epsilon", -1.0);
  EXPECT_EQ(parse_layer_norm_params(norm).status().message(),
            "node 'n7' (LayerNormalization): attribute 'epsilon' = -1 must be >= 0");

  graph::Node leaky = node("LeakyRelu");
  leaky.attrs.set("alpha", "steep");
  EXPECT_NE(parse_leaky_relu_params(leaky).status().message().find("node 'n7' (LeakyRelu): attribute 'alpha':"),
            std::string::npos);
}

TEST(ParamsTest, DefaultsWhenAttributesAreAbsent) {
  const RopeParams rope = parse_rope_params(node("RoPE", "hxrt")).value();
  EXPECT_EQ(rope.theta, 10000.0f);
  EXPECT_EQ(rope.rotary_dims, 0);
  EXPECT_EQ(rope.mode, RopeMode::kNormal);
  EXPECT_EQ(parse_leaky_relu_params(node("LeakyRelu")).value().alpha, 0.01f);
  EXPECT_EQ(parse_epsilon_params(node("RMSNorm", "hxrt")).value().epsilon, 1e-5f);
  const ConvParams conv = parse_conv_params(node("Conv")).value();
  EXPECT_EQ(conv.to_string(), "strides=[1, 1], pads=[0, 0, 0, 0], dilations=[1, 1], group=1, auto_pad=NOTSET");
}

TEST(ParamsTest, GeometryNormalizesAxesAndViewsTheTensor) {
  const SoftmaxGeometry s = softmax_geometry(Shape{2, 3, 5}, -2).value();
  EXPECT_EQ(s.axis, 1);
  EXPECT_EQ(s.outer, 2);
  EXPECT_EQ(s.axis_len, 3);
  EXPECT_EQ(s.inner, 5);
  EXPECT_FALSE(softmax_geometry(Shape{2, 3}, 2).ok());
  const LayerNormGeometry l = layer_norm_geometry(Shape{4, 6, 8}, 1).value();
  EXPECT_EQ(l.rows, 4);
  EXPECT_EQ(l.d, 48);
  RopeParams rope;
  rope.rotary_dims = 4;
  const RopeGeometry r = rope_geometry(rope, Shape{2, 3, 5, 8}, Shape{3}).value();
  EXPECT_EQ(r.rows, 6);
  EXPECT_EQ(r.n_heads, 5);
  EXPECT_EQ(r.rotary_dims, 4);
  EXPECT_FALSE(rope_geometry(rope, Shape{2, 3, 5, 8}, Shape{4}).ok());
}

}  // namespace
}  // namespace hxrt::ops
