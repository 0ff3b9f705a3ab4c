#include "hxrt/graph/graph.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hxrt::graph {
namespace {

using Names = std::vector<std::string>;

TensorDesc f32(std::initializer_list<Dim> dims) {
  return TensorDesc{DType::kF32, SymShape(dims)};
}

WeightData zeros(size_t bytes) {
  return WeightData::copy_of(std::vector<std::byte>(bytes, std::byte{0}));
}

// x[n, 4] -> fc1 (MatMul w1) -> h -> act (Gelu) -> a -> fc2 (MatMul w2) -> y, plus a residual Add(y, x) -> out.
Graph make_mlp() {
  Graph g("mlp");
  EXPECT_TRUE(g.add_input("x", f32({Dim::symbol("n"), 4})).ok());
  EXPECT_TRUE(g.add_initializer("w1", f32({4, 8}), zeros(4 * 8 * 4)).ok());
  EXPECT_TRUE(g.add_initializer("w2", f32({8, 4}), zeros(8 * 4 * 4)).ok());
  EXPECT_TRUE(g.add_node("fc1", "MatMul", Names{"x", "w1"}, Names{"h"}).ok());
  AttributeMap gelu;
  gelu.set("approximate", "tanh");
  EXPECT_TRUE(g.add_node("act", "Gelu", Names{"h"}, Names{"a"}, gelu).ok());
  EXPECT_TRUE(g.add_node("fc2", "MatMul", Names{"a", "w2"}, Names{"y"}).ok());
  EXPECT_TRUE(g.add_node("res", "Add", Names{"y", "x"}, Names{"out"}).ok());
  EXPECT_TRUE(g.mark_output("out").ok());
  return g;
}

bool contains(const Status& s, std::string_view text) {
  return s.to_string().find(text) != std::string::npos;
}

// Checks producer/consumer links against node inputs/outputs from scratch.
void expect_links_consistent(const Graph& g) {
  std::vector<std::vector<NodeId>> consumers(static_cast<size_t>(g.num_values()));
  std::vector<NodeId> producers(static_cast<size_t>(g.num_values()), kNoNode);
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (!g.has_node(n)) continue;
    for (ValueId v : g.node(n).inputs) {
      if (v != kNoValue) consumers[static_cast<size_t>(v)].push_back(n);
    }
    for (ValueId v : g.node(n).outputs) producers[static_cast<size_t>(v)] = n;
  }
  for (ValueId v = 0; v < g.num_values(); ++v) {
    EXPECT_EQ(g.value(v).id, v);
    EXPECT_EQ(g.value(v).consumers, consumers[static_cast<size_t>(v)]) << g.value(v).name;
    EXPECT_EQ(g.value(v).producer, producers[static_cast<size_t>(v)]) << g.value(v).name;
    EXPECT_EQ(*g.find_value(g.value(v).name), v);
  }
}

TEST(Graph, BuildAndLinks) {
  Graph g = make_mlp();
  EXPECT_EQ(g.name(), "mlp");
  EXPECT_EQ(g.num_nodes(), 4);
  EXPECT_EQ(g.num_values(), 7);  // x w1 w2 h a y out
  EXPECT_EQ(g.inputs().size(), 1u);
  EXPECT_EQ(g.initializers().size(), 2u);
  EXPECT_EQ(g.outputs().size(), 1u);
  const ValueId x = *g.find_value("x");
  EXPECT_TRUE(g.value(x).is_input);
  EXPECT_EQ(g.value(x).consumers, (std::vector<NodeId>{*g.find_node("fc1"), *g.find_node("res")}));
  EXPECT_EQ(g.value(*g.find_value("h")).producer, *g.find_node("fc1"));
  EXPECT_TRUE(g.value(*g.find_value("out")).is_output);
  EXPECT_EQ(*g.node(*g.find_node("act")).attrs.get_string("approximate"), "tanh");
  EXPECT_TRUE(g.validate().ok()) << g.validate().to_string();
  expect_links_consistent(g);
  EXPECT_EQ(g.find_value("zzz").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(g.find_node("zzz").status().code(), StatusCode::kNotFound);
  const std::string text = g.to_string();
  EXPECT_NE(text.find("fc1 = MatMul-latest(x, w1) -> h"), std::string::npos) << text;  // add_node's default
  EXPECT_NE(text.find("input x: f32[n, 4]"), std::string::npos) << text;
}

TEST(Graph, NodeConsumingTwiceAppearsTwice) {
  Graph g;
  ASSERT_TRUE(g.add_input("x", f32({2})).ok());
  ASSERT_TRUE(g.add_node("sq", "Mul", Names{"x", "x"}, Names{"y"}).ok());
  EXPECT_EQ(g.value(0).consumers, (std::vector<NodeId>{0, 0}));
  ASSERT_TRUE(g.remove_node(0).ok());
  EXPECT_TRUE(g.value(0).consumers.empty());
}

TEST(Graph, BuildErrors) {
  Graph g = make_mlp();
  Status dup_value = g.add_input("x", f32({1})).status();
  EXPECT_EQ(dup_value.code(), StatusCode::kAlreadyExists);
  EXPECT_TRUE(contains(dup_value, "'x'"));
  Status dup_node = g.add_node("fc1", "MatMul", Names{"x"}, Names{"z"}).status();
  EXPECT_EQ(dup_node.code(), StatusCode::kAlreadyExists);
  EXPECT_TRUE(contains(dup_node, "node 'fc1'"));
  Status missing = g.add_node("mlp.fc3", "MatMul", Names{"x", "w9"}, Names{"z"}).status();
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_TRUE(contains(missing, "node 'mlp.fc3' input 1: value 'w9' does not exist")) << missing.to_string();
  Status produced = g.add_node("again", "Relu", Names{"x"}, Names{"h"}).status();
  EXPECT_EQ(produced.code(), StatusCode::kAlreadyExists);
  EXPECT_TRUE(contains(produced, "produced by node 'fc1'")) << produced.to_string();
  EXPECT_EQ(g.add_node("onto_input", "Relu", Names{"h"}, Names{"x"}).status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(g.add_node("twice", "Split", Names{"h"}, Names{"p", "p"}).status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(g.add_node("", "Relu", Names{"h"}, Names{"q"}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(g.add_node("noop", "", Names{"h"}, Names{"q"}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(g.mark_output("nope").code(), StatusCode::kNotFound);
  // Failed calls changed nothing.
  EXPECT_EQ(g.num_nodes(), 4);
  EXPECT_EQ(g.num_values(), 7);
  EXPECT_TRUE(g.validate().ok());
  expect_links_consistent(g);
}

TEST(Graph, OptionalInputsAndDeclaredOutputs) {
  Graph g;
  ASSERT_TRUE(g.add_input("x", f32({3})).ok());
  ASSERT_TRUE(g.declare_value("y", TensorDesc{DType::kF16, SymShape{3}}).ok());
  Result<NodeId> clip = g.add_node("clip", "Clip", Names{"x", "", ""}, Names{"y"});
  ASSERT_TRUE(clip.ok()) << clip.status().to_string();
  EXPECT_EQ(g.node(*clip).inputs, (std::vector<ValueId>{0, kNoValue, kNoValue}));
  EXPECT_EQ(g.value(1).producer, *clip);
  EXPECT_EQ(g.value(1).desc.dtype, DType::kF16);  // the declared desc is kept
  ASSERT_TRUE(g.mark_output("y").ok());
  ASSERT_TRUE(g.mark_output("y").ok());  // idempotent
  EXPECT_EQ(g.outputs().size(), 1u);
  EXPECT_TRUE(g.validate().ok()) << g.validate().to_string();
}

TEST(Graph, TopologicalOrderIsStable) {
  Graph g;
  ASSERT_TRUE(g.add_input("x", f32({1})).ok());
  // Declared out of order: c consumes b's output, which is added later.
  ASSERT_TRUE(g.declare_value("b_out", f32({1})).ok());
  ASSERT_TRUE(g.add_node("a", "Relu", Names{"x"}, Names{"a_out"}).ok());
  ASSERT_TRUE(g.add_node("c", "Add", Names{"a_out", "b_out"}, Names{"c_out"}).ok());
  ASSERT_TRUE(g.add_node("b", "Relu", Names{"x"}, Names{"b_out"}).ok());
  ASSERT_TRUE(g.add_node("d", "Relu", Names{"x"}, Names{"d_out"}).ok());
  Result<std::vector<NodeId>> order = g.topological_order();
  ASSERT_TRUE(order.ok()) << order.status().to_string();
  // a, b and d are ready at the start; c becomes ready after b and, being older than d, runs before it.
  EXPECT_EQ(*order, (std::vector<NodeId>{0, 2, 1, 3}));
  EXPECT_TRUE(g.validate().ok()) << g.validate().to_string();
}

TEST(Graph, CycleMadeByHand) {
  Graph g = make_mlp();
  // Feed fc1 from fc2's output: fc1 -> act -> fc2 -> fc1.
  ASSERT_TRUE(g.set_node_input(*g.find_node("fc1"), 0, *g.find_value("y")).ok());
  expect_links_consistent(g);
  Result<std::vector<NodeId>> order = g.topological_order();
  ASSERT_FALSE(order.ok());
  EXPECT_EQ(order.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(contains(order.status(), "cycle through node '")) << order.status().to_string();
  EXPECT_TRUE(contains(order.status(), "fc1 -> act -> fc2 -> fc1")) << order.status().to_string();
  EXPECT_EQ(g.validate().code(), StatusCode::kFailedPrecondition);

  // A self-loop made through mutable_node (links not updated): the order still sees it.
  Graph h;
  ASSERT_TRUE(h.add_input("x", f32({1})).ok());
  ASSERT_TRUE(h.add_node("loop", "Relu", Names{"x"}, Names{"y"}).ok());
  h.mutable_node(0).inputs[0] = *h.find_value("y");
  Status s = h.topological_order().status();
  EXPECT_TRUE(contains(s, "cycle through node 'loop' (loop -> loop)")) << s.to_string();
}

TEST(Graph, ValidateNamesNodeAndField) {
  {
    Graph g = make_mlp();
    g.mutable_node(*g.find_node("fc2")).inputs[1] = 99;
    Status s = g.validate();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(contains(s, "node 'fc2' input 1: value id 99 does not exist")) << s.to_string();
  }
  {
    Graph g = make_mlp();
    g.mutable_node(*g.find_node("act")).op_type.clear();
    EXPECT_TRUE(contains(g.validate(), "node 'act' op_type: empty")) << g.validate().to_string();
  }
  {
    Graph g = make_mlp();
    g.mutable_node(*g.find_node("act")).name = "fc1";
    EXPECT_TRUE(contains(g.validate(), "node 'fc1' name: used by two nodes")) << g.validate().to_string();
  }
  {
    Graph g = make_mlp();  // act also claims fc1's output
    g.mutable_node(*g.find_node("act")).outputs.push_back(*g.find_value("h"));
    Status s = g.validate();
    EXPECT_TRUE(contains(s, "node 'act' output 1: value 'h' is also produced by node 'fc1'")) << s.to_string();
  }
  {
    Graph g = make_mlp();
    g.mutable_value(*g.find_value("w1")).weight = zeros(100);
    Status s = g.validate();
    EXPECT_TRUE(contains(s, "initializer 'w1' weight: 100 bytes, expected 128 for f32[4, 8]")) << s.to_string();
  }
  {
    Graph g;
    ASSERT_TRUE(g.add_initializer("q", TensorDesc{DType::kQ4_1, SymShape{2, 30}}, zeros(40)).ok());
    Status s = g.validate();  // 30 is not a whole number of 32-value blocks
    EXPECT_TRUE(contains(s, "initializer 'q'")) << s.to_string();
  }
  {
    Graph g = make_mlp();  // removing fc1 leaves act reading a value nobody produces
    ASSERT_TRUE(g.remove_node(*g.find_node("fc1")).ok());
    Status s = g.validate();
    EXPECT_TRUE(
        contains(s, "node 'act' input 0: value 'h' is not a graph input or initializer and no node produces it"))
        << s.to_string();
  }
  {
    Graph g = make_mlp();  // the graph output loses its producer
    ASSERT_TRUE(g.remove_node(*g.find_node("res")).ok());
    Status s = g.validate();
    EXPECT_TRUE(contains(s, "graph output 0: value 'out' is not produced by any node")) << s.to_string();
  }
  {
    Graph g = make_mlp();  // input edited without set_node_input: stale consumer list
    g.mutable_node(*g.find_node("res")).inputs[1] = *g.find_value("h");
    Status s = g.validate();
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
    EXPECT_TRUE(contains(s, "value 'x' consumers: recorded [0, 3] but node inputs say [0]")) << s.to_string();
  }
}

TEST(Graph, RemoveReplaceAndCompactKeepLinks) {
  Graph g = make_mlp();
  // Fuse fc1 + act into one node producing 'a', the way a fusion pass does.
  const NodeId fc1 = *g.find_node("fc1");
  const NodeId act = *g.find_node("act");
  const NodeId fc2_stable = g.node(*g.find_node("fc2")).stable_id;
  const NodeId res_stable = g.node(*g.find_node("res")).stable_id;
  EXPECT_EQ(g.node(fc1).stable_id, fc1) << "a built graph's stable ids are its add_node order";
  const NodeId first_new = g.next_stable_id();
  ASSERT_TRUE(g.remove_node(act).ok());
  ASSERT_TRUE(g.remove_node(fc1).ok());
  EXPECT_FALSE(g.has_node(fc1));
  EXPECT_EQ(g.remove_node(fc1).code(), StatusCode::kNotFound);
  EXPECT_EQ(g.find_node("fc1").status().code(), StatusCode::kNotFound);
  Result<NodeId> fused = g.add_node("fc1+act", "MatMulGelu", Names{"x", "w1"}, Names{"a"}, {}, "hxrt.fused");
  ASSERT_TRUE(fused.ok()) << fused.status().to_string();
  g.mutable_node(*fused).fusion_id = 0;
  g.mutable_node(*fused).fused_from = {"fc1", "act"};
  EXPECT_TRUE(g.validate().ok()) << g.validate().to_string();
  expect_links_consistent(g);

  g.compact();
  EXPECT_EQ(g.num_nodes(), 3);
  EXPECT_EQ(g.num_values(), 6);  // 'h' dropped: nobody produces or uses it
  EXPECT_EQ(g.find_value("h").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(g.validate().ok()) << g.validate().to_string();
  expect_links_consistent(g);
  EXPECT_EQ(*g.find_node("fc2"), 0);
  EXPECT_EQ(*g.find_node("res"), 1);
  EXPECT_EQ(*g.find_node("fc1+act"), 2);
  EXPECT_EQ(g.node(2).fused_from, (std::vector<std::string>{"fc1", "act"}));
  // Note [Stable node ids]: compact() renumbers the dense ids, not the stable ones; the new node's id is fresh.
  EXPECT_EQ(g.node(0).stable_id, fc2_stable);
  EXPECT_EQ(g.node(1).stable_id, res_stable);
  EXPECT_EQ(g.node(2).stable_id, first_new);
  EXPECT_EQ(*g.find_node_by_stable_id(fc2_stable), 0);
  EXPECT_EQ(g.find_node_by_stable_id(fc1).status().code(), StatusCode::kNotFound) << "removed with fc1";
  EXPECT_EQ(g.clone().next_stable_id(), g.next_stable_id());
  for (ValueId v : g.inputs()) EXPECT_TRUE(g.value(v).is_input);
  for (ValueId v : g.initializers()) EXPECT_TRUE(g.value(v).is_initializer);
  EXPECT_EQ(g.value(g.outputs().at(0)).name, "out");
  Result<std::vector<NodeId>> order = g.topological_order();
  ASSERT_TRUE(order.ok());
  EXPECT_EQ(*order, (std::vector<NodeId>{2, 0, 1}));

  // Redirect res to read 'a' instead of 'y'.
  ASSERT_TRUE(g.replace_all_uses(*g.find_value("y"), *g.find_value("a")).ok());
  expect_links_consistent(g);
  EXPECT_TRUE(g.value(*g.find_value("y")).consumers.empty());
  EXPECT_EQ(g.set_node_input(0, 5, kNoValue).code(), StatusCode::kOutOfRange);
}

TEST(Graph, CloneIsIndependent) {
  Graph g = make_mlp();
  Graph c = g.clone();
  EXPECT_EQ(c.to_string(), g.to_string());
  // Weights share their bytes.
  EXPECT_EQ(c.value(*c.find_value("w1")).weight.data, g.value(*g.find_value("w1")).weight.data);
  ASSERT_TRUE(c.remove_node(*c.find_node("res")).ok());
  ASSERT_TRUE(c.add_input("extra", f32({1})).ok());
  c.mutable_node(0).attrs.set("k", 1);
  EXPECT_TRUE(g.has_node(*g.find_node("res")));
  EXPECT_EQ(g.find_value("extra").status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(g.node(0).attrs.has("k"));
  EXPECT_EQ(g.value(*g.find_value("y")).consumers.size(), 1u);
  EXPECT_TRUE(g.validate().ok());
}

TEST(Graph, WeightDataCopyOf) {
  std::vector<std::byte> bytes = {std::byte{1}, std::byte{2}, std::byte{3}};
  WeightData w = WeightData::copy_of(bytes);
  bytes[0] = std::byte{9};
  ASSERT_EQ(w.size, 3u);
  EXPECT_EQ(w.data[0], std::byte{1});
  EXPECT_NE(w.keepalive, nullptr);
  WeightData shared = w;
  w = WeightData{};
  EXPECT_EQ(shared.data[2], std::byte{3});  // still alive through keepalive
}

}  // namespace
}  // namespace hxrt::graph
