#include "hxrt/ops/op_schema.h"

#include <gtest/gtest.h>

namespace hxrt::ops {
namespace {

// A toy op: Scale(X: T, Y: T optional) -> Z, attributes factor (float, required), mode (string, default "a").
OpSchema scale_schema(int since = 1) {
  OpSchema schema;
  schema.op_type = "Scale";
  schema.domain = "test";
  schema.since_version = since;
  schema.inputs = {{"X", "T"}, {"Y", "T", /*optional=*/true}};
  schema.outputs = {{"Z", "T"}};
  schema.attrs = {{"factor", graph::AttrType::kFloat, true, std::nullopt},
                  {"mode", graph::AttrType::kString, false, graph::Attribute("a")}};
  schema.type_constraints = {{"T", {DType::kF32, DType::kF16}}};
  schema.infer = [](InferenceContext& ctx) -> Status {
    graph::SymShape shape = ctx.input(0).shape;
    if (ctx.has_input(1)) {
      HXRT_RETURN_IF_ERROR(ctx.require_equal(ctx.input(0).shape.dim(0), ctx.input(1).shape.dim(0), "leading dims"));
    }
    ctx.set_output(0, graph::TensorDesc{ctx.input(0).dtype, shape});
    return ok_status();
  };
  return schema;
}

class OpSchemaTest : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(registry_.add(scale_schema(1)).ok());
    ASSERT_TRUE(registry_.add(scale_schema(7)).ok());
    ASSERT_TRUE(graph_.add_input("x", {DType::kF32, {graph::Dim::symbol("n"), 4}}).ok());
    ASSERT_TRUE(graph_.add_input("y", {DType::kF32, {graph::Dim::symbol("m"), 4}}).ok());
    ASSERT_TRUE(graph_.add_input("i", {DType::kI32, {3}}).ok());
  }
  Result<graph::NodeId> add(std::vector<std::string> inputs, graph::AttributeMap attrs, int version = 7) {
    return graph_.add_node(fmt::format("s{}", counter_++), "Scale", inputs, std::vector<std::string>{fmt::format("z{}", counter_)},
                           std::move(attrs), "test", version);
  }
  graph::AttributeMap factor() {
    graph::AttributeMap attrs;
    attrs.set("factor", 2.0);
    return attrs;
  }

  OpSchemaRegistry registry_;
  graph::Graph graph_;
  int counter_ = 0;
};

TEST_F(OpSchemaTest, VersionLookup) {
  EXPECT_EQ((*registry_.find("Scale", "test", 6))->since_version, 1);
  EXPECT_EQ((*registry_.find("Scale", "test", 7))->since_version, 7);
  EXPECT_EQ((*registry_.find("Scale", "test", 0))->since_version, 7) << "0 = newest";
  EXPECT_EQ(registry_.add(scale_schema(7)).code(), StatusCode::kAlreadyExists);
  Result<const OpSchema*> missing = registry_.find("Scale", "", 7);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("unsupported op 'Scale'"), std::string_view::npos);
}

TEST_F(OpSchemaTest, InferenceWritesOutputsAndRecordsSymbolicChecks) {
  graph::NodeId id = *add({"x", "y"}, factor());
  std::vector<DimCheck> checks;
  ASSERT_TRUE(registry_.infer_node(graph_, id, &checks).ok());
  EXPECT_EQ(graph_.value(graph_.node(id).outputs[0]).desc.to_string(), "f32[n, 4]");
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_EQ(checks[0].a.to_string(), "n");
  EXPECT_EQ(checks[0].b.to_string(), "m");
  EXPECT_NE(checks[0].what.find("leading dims"), std::string::npos);
}

TEST_F(OpSchemaTest, CheckNodeNamesNodeAndField) {
  struct Case {
    std::vector<std::string> inputs;
    graph::AttributeMap attrs;
    std::string expected;
  };
  graph::AttributeMap typo = factor();
  typo.set("factr", 1.0);
  graph::AttributeMap wrong_type;
  wrong_type.set("factor", "big");
  std::vector<Case> cases = {
      {{"x"}, {}, "missing required attribute 'factor'"},
      {{"x"}, typo, "unknown attribute 'factr' (known: factor, mode)"},
      {{"x"}, wrong_type, "attribute 'factor' is string, expected float"},
      {{"i"}, factor(), "input 0 ('X', value 'i') has dtype i32, expected one of f32, f16"},
      {{"x", "y", "x"}, factor(), "has 3 inputs, takes at most 2"},
  };
  for (Case& c : cases) {
    Result<graph::NodeId> id = add(c.inputs, std::move(c.attrs));
    ASSERT_TRUE(id.ok()) << id.status().to_string();
    Status status = registry_.check_node(graph_, graph_.node(*id));
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << c.expected;
    EXPECT_NE(status.message().find(c.expected), std::string_view::npos) << status.message();
    EXPECT_NE(status.message().find(graph_.node(*id).name), std::string_view::npos) << "names the node";
  }
}

TEST_F(OpSchemaTest, ApplyDefaultsFillsAbsentAttributes) {
  graph::NodeId id = *add({"x"}, factor());
  ASSERT_TRUE(registry_.apply_defaults(graph_.mutable_node(id)).ok());
  EXPECT_EQ(graph_.node(id).attrs.get_string("mode").value(), "a");
}

TEST(BuiltinSchemas, RegisterWithoutConflicts) {
  OpSchemaRegistry registry;
  Status status = register_builtin_schemas(registry);
  ASSERT_TRUE(status.ok()) << status.to_string();
  for (const char* op : {"Add", "MatMul", "Softmax", "Reshape", "Conv", "Gather", "Concat", "Cast"}) {
    EXPECT_TRUE(registry.find(op, "", 0).ok()) << op;
  }
  for (const char* op : {"RMSNorm", "RoPE", "Silu", "MatMulQ"}) EXPECT_TRUE(registry.find(op, "hxrt", 0).ok()) << op;
  for (const char* op : {"ConvBnRelu", "MatMulBias", "RMSNormMul", "SwiGLU"}) {
    EXPECT_TRUE(registry.find(op, "hxrt.fused", 0).ok()) << op;
  }
}

// A fuzz finding (tests/fuzz/corpus/onnx_import/finding-reshape-overflow): a target shape whose static dims multiply
// past int64 is an error, not signed overflow.
TEST(BuiltinSchemas, ReshapeToAnOverflowingElementCountIsAnError) {
  OpSchemaRegistry registry;
  ASSERT_TRUE(register_builtin_schemas(registry).ok());
  graph::Graph graph;
  ASSERT_TRUE(graph.add_input("x", {DType::kF32, {2, 3}}).ok());
  const std::vector<int64_t> target = {int64_t{1} << 62, 4, -1};
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(target.data()),
                                         target.size() * sizeof(int64_t));
  ASSERT_TRUE(graph.add_initializer("shape", {DType::kI64, {3}}, graph::WeightData::copy_of(bytes)).ok());
  Result<graph::NodeId> node =
      graph.add_node("reshape", "Reshape", std::vector<std::string>{"x", "shape"}, std::vector<std::string>{"y"}, {});
  ASSERT_TRUE(node.ok()) << node.status().to_string();
  Status status = registry.infer_node(graph, *node, nullptr);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.to_string().find("overflows"), std::string::npos) << status.to_string();
}

}  // namespace
}  // namespace hxrt::ops
