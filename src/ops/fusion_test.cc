#include "hxrt/ops/fusion.h"

#include <gtest/gtest.h>

#include <memory>

#include "hxrt/ops/op_schema.h"
#include "hxrt/ops/registries.h"

namespace hxrt::ops {
namespace {

graph::WeightData zeros(DType dtype, int64_t n) {
  std::vector<std::byte> bytes(storage_bytes(dtype, static_cast<uint64_t>(n)).value(), std::byte{1});
  return graph::WeightData::copy_of(bytes);
}

class FusionTest : public testing::Test {
 protected:
  void weight(const std::string& name, std::initializer_list<graph::Dim> dims, int64_t n) {
    ASSERT_TRUE(g_.add_initializer(name, {DType::kF32, graph::SymShape(dims)}, zeros(DType::kF32, n)).ok());
  }
  void node(const std::string& name, const std::string& op, std::vector<std::string> in, std::string out,
            graph::AttributeMap attrs = {}, const std::string& domain = "") {
    const int version = schemas_.find(op, domain, 0).value()->since_version;
    ASSERT_TRUE(g_.add_node(name, op, in, std::vector<std::string>{out}, std::move(attrs), domain, version).ok())
        << name;
  }
  void infer() {
    std::vector<DimCheck> checks;
    Status status = schemas_.infer_graph(g_, &checks);
    ASSERT_TRUE(status.ok()) << status.to_string();
  }
  std::vector<std::string> op_types() {
    std::vector<std::string> out;
    const std::vector<graph::NodeId> order = g_.topological_order().value();
    for (graph::NodeId id : order) out.push_back(g_.node(id).op_type);
    return out;
  }

  std::unique_ptr<Registries> registries_ = std::move(make_registries()).value();  // schemas and fusions
  OpSchemaRegistry& schemas_ = registries_->schemas;
  FusionRegistry& fusions_ = registries_->fusions;
  graph::Graph g_;
};

TEST_F(FusionTest, TransformerBlockChainsFuse) {
  const graph::Dim n = graph::Dim::symbol("n");
  ASSERT_TRUE(g_.add_input("x", {DType::kF32, {n, 8}}).ok());
  weight("w", {8, 16}, 128);
  weight("b", {16}, 16);
  weight("g", {16}, 16);
  weight("w_up", {16, 16}, 256);
  graph::AttributeMap tanh;
  tanh.set("approximate", "tanh");
  node("fc", "MatMul", {"x", "w"}, "fc_out");
  node("bias", "Add", {"fc_out", "b"}, "biased");
  node("act", "Gelu", {"biased"}, "act_out", tanh);
  node("norm", "RMSNorm", {"act_out"}, "normed", {}, "hxrt");
  node("scale", "Mul", {"g", "normed"}, "scaled");  // weight on the left: still a match
  node("gate", "Silu", {"scaled"}, "gated", {}, "hxrt");
  node("up", "MatMul", {"scaled", "w_up"}, "up_out");
  node("glu", "Mul", {"gated", "up_out"}, "y");
  ASSERT_TRUE(g_.mark_output("y").ok());
  infer();

  Result<std::vector<FusionGroup>> groups = apply_fusions(g_, fusions_);
  ASSERT_TRUE(groups.ok()) << groups.status().to_string();
  ASSERT_EQ(groups->size(), 3u);
  EXPECT_EQ((*groups)[0].pattern, "MatMul+Add(+Gelu)");
  EXPECT_EQ((*groups)[0].original_nodes, (std::vector<std::string>{"fc", "bias", "act"}));
  EXPECT_EQ((*groups)[1].original_nodes, (std::vector<std::string>{"norm", "scale"}));
  EXPECT_EQ((*groups)[2].original_nodes, (std::vector<std::string>{"gate", "glu"}));
  EXPECT_EQ(op_types(), (std::vector<std::string>{"MatMulBias", "RMSNormMul", "MatMul", "SwiGLU"}));
  ASSERT_TRUE(g_.validate().ok()) << g_.validate().to_string();

  const graph::Node& fused = g_.node(*g_.find_node((*groups)[0].fused_node));
  EXPECT_EQ(fused.domain, "hxrt.fused");
  EXPECT_EQ(fused.fusion_id, (*groups)[0].fusion_id);
  EXPECT_EQ(fused.attrs.get_string("activation").value(), "gelu_tanh");
  EXPECT_EQ(g_.value(fused.outputs[0]).name, "act_out");
  // The fused graph still infers, and the output keeps its symbolic shape.
  infer();
  EXPECT_EQ(g_.value(*g_.find_value("y")).desc.to_string(), "f32[n, 16]");
}

TEST_F(FusionTest, ConvBatchNormRelu) {
  ASSERT_TRUE(g_.add_input("img", {DType::kF32, {1, 3, 8, 8}}).ok());
  weight("k", {4, 3, 3, 3}, 108);
  for (const char* p : {"scale", "shift", "mean", "var"}) weight(p, {4}, 4);
  graph::AttributeMap conv_attrs;
  conv_attrs.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  node("conv", "Conv", {"img", "k"}, "c");
  g_.mutable_node(*g_.find_node("conv")).attrs = conv_attrs;
  node("bn", "BatchNormalization", {"c", "scale", "shift", "mean", "var"}, "b");
  node("relu", "Relu", {"b"}, "out");
  ASSERT_TRUE(g_.mark_output("out").ok());
  infer();
  Result<std::vector<FusionGroup>> groups = apply_fusions(g_, fusions_);
  ASSERT_TRUE(groups.ok()) << groups.status().to_string();
  ASSERT_EQ(groups->size(), 1u);
  EXPECT_EQ(op_types(), std::vector<std::string>{"ConvBnRelu"});
  const graph::Node& fused = g_.node(0);
  EXPECT_EQ(fused.attrs.get_int("relu").value(), 1);
  EXPECT_EQ(fused.attrs.get_ints("pads").value(), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(fused.inputs.size(), 7u);
  EXPECT_EQ(fused.inputs[2], graph::kNoValue) << "Conv had no bias";
  infer();
}

TEST_F(FusionTest, SharedOrExportedIntermediatesBlockFusion) {
  ASSERT_TRUE(g_.add_input("x", {DType::kF32, {4, 8}}).ok());
  weight("w", {8, 16}, 128);
  weight("b", {16}, 16);
  node("fc", "MatMul", {"x", "w"}, "fc_out");
  node("bias", "Add", {"fc_out", "b"}, "y");
  node("other", "Relu", {"fc_out"}, "z");  // fc_out has two consumers
  ASSERT_TRUE(g_.mark_output("y").ok());
  ASSERT_TRUE(g_.mark_output("z").ok());
  infer();
  EXPECT_TRUE(apply_fusions(g_, fusions_)->empty());

  g_ = graph::Graph();
  ASSERT_TRUE(g_.add_input("x", {DType::kF32, {4, 8}}).ok());
  weight("w", {8, 16}, 128);
  weight("b", {16}, 16);
  node("fc", "MatMul", {"x", "w"}, "fc_out");
  node("bias", "Add", {"fc_out", "b"}, "y");
  ASSERT_TRUE(g_.mark_output("fc_out").ok());  // the caller wants the intermediate
  ASSERT_TRUE(g_.mark_output("y").ok());
  infer();
  EXPECT_TRUE(apply_fusions(g_, fusions_)->empty());
}

TEST_F(FusionTest, NonVectorAddAndDisabledPatternsAreLeftAlone) {
  ASSERT_TRUE(g_.add_input("x", {DType::kF32, {4, 8}}).ok());
  ASSERT_TRUE(g_.add_input("r", {DType::kF32, {4, 16}}).ok());
  weight("w", {8, 16}, 128);
  node("fc", "MatMul", {"x", "w"}, "fc_out");
  node("residual", "Add", {"fc_out", "r"}, "y");  // a full tensor, not a bias
  ASSERT_TRUE(g_.add_input("s", {DType::kF32, {4, 16}}).ok());
  node("gate", "Silu", {"y"}, "gated", {}, "hxrt");
  node("glu", "Mul", {"gated", "s"}, "out");
  ASSERT_TRUE(g_.mark_output("out").ok());
  infer();
  FusionOptions options;
  options.disabled.insert("Silu+Mul (SwiGLU)");
  EXPECT_TRUE(apply_fusions(g_, fusions_, options)->empty());
  EXPECT_EQ(apply_fusions(g_, fusions_)->size(), 1u);
}

}  // namespace
}  // namespace hxrt::ops
