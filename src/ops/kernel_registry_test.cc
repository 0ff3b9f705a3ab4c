#include "hxrt/ops/kernel_registry.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace hxrt::ops {
namespace {

hal::DeviceInfo cpu_device() {
  hal::DeviceInfo info;
  info.kind = hal::DeviceKind::kCpu;
  info.name = "test cpu";
  return info;
}

KernelDef make_kernel(std::string name, int priority, std::vector<std::vector<DType>> dtypes = {}) {
  KernelDef def;
  def.op_type = "MatMul";
  def.name = std::move(name);
  def.priority = priority;
  def.input_dtypes = std::move(dtypes);
  def.launch = [](hal::Stream&, const KernelLaunch&) { return ok_status(); };
  return def;
}

class KernelRegistryTest : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(graph_.add_input("a", {DType::kF32, {4, 8}}).ok());
    ASSERT_TRUE(graph_.add_input("b", {DType::kF32, {8, 2}}).ok());
    const std::vector<std::string> inputs{"a", "b"}, outputs{"y"};
    node_ = *graph_.add_node("mm", "MatMul", inputs, outputs, {}, "", 13);
    ASSERT_TRUE(registry_.add(make_kernel("MatMul", 10, {{DType::kF32}, {DType::kF32}})).ok());
    ASSERT_TRUE(registry_.add(make_kernel("BatchMatMulV3", 5, {{DType::kF32}, {DType::kF32}})).ok());
    KernelDef bf16 = make_kernel("MatMulBf16", 20, {{DType::kBF16}, {DType::kBF16}});
    ASSERT_TRUE(registry_.add(std::move(bf16)).ok());
    KernelDef gpu = make_kernel("MatMulCuda", 30);
    gpu.device = hal::DeviceKind::kCuda;
    ASSERT_TRUE(registry_.add(std::move(gpu)).ok());
  }
  const graph::Node& node() { return graph_.node(node_); }

  graph::Graph graph_;
  graph::NodeId node_ = graph::kNoNode;
  KernelRegistry registry_;
};

TEST_F(KernelRegistryTest, PriorityWinsAndEveryLoserIsExplained) {
  Result<Selection> selection = registry_.select(graph_, node(), cpu_device());
  ASSERT_TRUE(selection.ok()) << selection.status().to_string();
  EXPECT_EQ(selection->chosen->name, "MatMul");
  EXPECT_EQ(selection->policy, "priority");
  const std::string text = selection->explain();
  EXPECT_NE(text.find("* MatMul"), std::string::npos) << text;
  EXPECT_NE(text.find("BatchMatMulV3 v1 (built-in, cpu, priority 5): lower priority (5 < 10)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("MatMulBf16"), std::string::npos);
  EXPECT_NE(text.find("input 0 is f32, kernel takes bf16"), std::string::npos) << text;
  EXPECT_EQ(text.find("MatMulCuda"), std::string::npos) << "kernels of other devices are no candidates: " << text;
  EXPECT_EQ(selection->compatible().size(), 2u);
}

TEST_F(KernelRegistryTest, ForcedByNodeOrOpType) {
  SelectionOptions options;
  options.forced["MatMul"] = "BatchMatMulV3";
  Result<Selection> by_op = registry_.select(graph_, node(), cpu_device(), options);
  ASSERT_TRUE(by_op.ok());
  EXPECT_EQ(by_op->chosen->name, "BatchMatMulV3");
  EXPECT_EQ(by_op->policy, "forced");
  options.forced["mm"] = "MatMul";  // node name beats op type
  EXPECT_EQ(registry_.select(graph_, node(), cpu_device(), options)->chosen->name, "MatMul");
  options.forced["mm"] = "MatMulBf16";
  Result<Selection> incompatible = registry_.select(graph_, node(), cpu_device(), options);
  EXPECT_EQ(incompatible.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(incompatible.status().message().find("bf16"), std::string_view::npos);
  options.forced["mm"] = "NoSuchKernel";
  EXPECT_EQ(registry_.select(graph_, node(), cpu_device(), options).status().code(), StatusCode::kNotFound);
}

TEST_F(KernelRegistryTest, HintHonouredWhenCompatible) {
  graph_.mutable_node(node_).kernel_hint = "BatchMatMulV3";
  Result<Selection> hinted = registry_.select(graph_, node(), cpu_device());
  ASSERT_TRUE(hinted.ok());
  EXPECT_EQ(hinted->chosen->name, "BatchMatMulV3");
  EXPECT_EQ(hinted->policy, "hint");
  SelectionOptions no_hints;
  no_hints.honour_hints = false;
  EXPECT_EQ(registry_.select(graph_, node(), cpu_device(), no_hints)->chosen->name, "MatMul");
  graph_.mutable_node(node_).kernel_hint = "MatMulBf16";
  Result<Selection> ignored = registry_.select(graph_, node(), cpu_device());
  EXPECT_EQ(ignored->chosen->name, "MatMul");
  EXPECT_NE(ignored->reason.find("hint 'MatMulBf16' was ignored"), std::string::npos) << ignored->reason;
}

TEST_F(KernelRegistryTest, MeasuredPicksTheFastestWhenAllAreTimed) {
  const std::string bucket = shape_bucket(graph_, node(), cpu_device(), {});
  EXPECT_EQ(bucket, "cpu f32[4,8] f32[8,2]");
  TimingCache timings;
  timings.record("MatMul", bucket, 900);
  SelectionOptions options;
  options.timings = &timings;
  EXPECT_EQ(registry_.select(graph_, node(), cpu_device(), options)->policy, "priority") << "incomplete timings";
  timings.record("BatchMatMulV3", "cpu f32[4,8] f32[8,3]", 100);
  EXPECT_EQ(registry_.select(graph_, node(), cpu_device(), options)->policy, "priority") << "another bucket";
  timings.record("BatchMatMulV3", bucket, 400);
  Result<Selection> measured = registry_.select(graph_, node(), cpu_device(), options);
  ASSERT_TRUE(measured.ok());
  EXPECT_EQ(measured->chosen->name, "BatchMatMulV3");
  EXPECT_EQ(measured->policy, "measured");
  EXPECT_NE(measured->explain().find("slower on cpu f32[4,8] f32[8,2] (900 ns)"), std::string::npos)
      << measured->explain();
  // A forced kernel still beats measurements.
  options.forced["MatMul"] = "MatMul";
  EXPECT_EQ(registry_.select(graph_, node(), cpu_device(), options)->chosen->name, "MatMul");
}

TEST_F(KernelRegistryTest, AKernelThatFailedWhenMeasuredNeverWins) {
  const std::string bucket = shape_bucket(graph_, node(), cpu_device(), {});
  TimingCache timings;
  timings.record("MatMul", bucket, TimingCache::kFailed);
  timings.record("BatchMatMulV3", bucket, 400);
  SelectionOptions options;
  options.timings = &timings;
  Result<Selection> measured = registry_.select(graph_, node(), cpu_device(), options);
  ASSERT_TRUE(measured.ok());
  EXPECT_EQ(measured->chosen->name, "BatchMatMulV3");
  EXPECT_NE(measured->explain().find("MatMul v1 (built-in, cpu, priority 10): failed on cpu f32[4,8] f32[8,2] when measured"),
            std::string::npos)
      << measured->explain();
  timings.record("BatchMatMulV3", bucket, TimingCache::kFailed);
  EXPECT_EQ(registry_.select(graph_, node(), cpu_device(), options)->policy, "priority") << "all failed";
}

TEST(ShapeBucket, SubstitutesBoundSymbolsAndDigestsAttributes) {
  graph::Graph g;
  ASSERT_TRUE(g.add_input("x", {DType::kF32, {graph::Dim::symbol("n_tokens"), 576}}).ok());
  ASSERT_TRUE(g.add_input("w", {DType::kF16, {576, 64}}).ok());
  const std::vector<std::string> inputs{"x", "w"}, outputs{"y"};
  graph::AttributeMap attrs;
  attrs.set("transB", int64_t{1});
  const graph::NodeId a = *g.add_node("a", "Gemm", inputs, outputs, {}, "", 13);
  const std::vector<std::string> outputs2{"y2"};
  const graph::NodeId b = *g.add_node("b", "Gemm", inputs, outputs2, attrs, "", 13);
  EXPECT_EQ(shape_bucket(g, g.node(a), cpu_device(), {}), "cpu f32[n_tokens,576] f16[576,64]");
  EXPECT_EQ(shape_bucket(g, g.node(a), cpu_device(), {{"n_tokens", 1}}), "cpu f32[1,576] f16[576,64]");
  const std::string with_attrs = shape_bucket(g, g.node(b), cpu_device(), {{"n_tokens", 1}});
  EXPECT_EQ(with_attrs.rfind("cpu f32[1,576] f16[576,64] attrs:", 0), 0u) << with_attrs;
  hal::DeviceInfo opencl = cpu_device();
  opencl.kind = hal::DeviceKind::kOpenCL;
  EXPECT_EQ(shape_bucket(g, g.node(a), opencl, {{"n_tokens", 1}}).rfind("opencl ", 0), 0u);
}

TEST_F(KernelRegistryTest, RegistrationRejectsOverlapsAndIncompleteDefinitions) {
  EXPECT_EQ(registry_.add(make_kernel("MatMul", 1)).code(), StatusCode::kAlreadyExists);
  Status ambiguous = registry_.add(make_kernel("OtherMatMul", 10, {{DType::kF32}, {DType::kF32}}));
  EXPECT_EQ(ambiguous.code(), StatusCode::kAlreadyExists);
  EXPECT_NE(ambiguous.message().find("arbitrary"), std::string_view::npos);
  KernelDef legacy = make_kernel("Legacy", 3);
  legacy.end_version = 12;
  EXPECT_TRUE(registry_.add(std::move(legacy)).ok());
  KernelDef newer = make_kernel("Legacy", 3);
  newer.since_version = 13;  // same name, disjoint version range: allowed
  EXPECT_TRUE(registry_.add(std::move(newer)).ok());
  KernelDef overlapping = make_kernel("Legacy", 3);
  overlapping.since_version = 10;
  EXPECT_EQ(registry_.add(std::move(overlapping)).code(), StatusCode::kAlreadyExists);
  KernelDef no_launch = make_kernel("X", 1);
  no_launch.launch = nullptr;
  EXPECT_EQ(registry_.add(std::move(no_launch)).code(), StatusCode::kInvalidArgument);
  KernelDef bad_range = make_kernel("Y", 1);
  bad_range.since_version = 5;
  bad_range.end_version = 4;
  EXPECT_EQ(registry_.add(std::move(bad_range)).code(), StatusCode::kInvalidArgument);
}

TEST_F(KernelRegistryTest, CustomKernelsJoinAtRunTimeAndSupportsFiltersNodes) {
  KernelDef custom = make_kernel("MyMatMul", 50);
  custom.kind = KernelKind::kCustom;
  custom.supports = [](const graph::Graph& g, const graph::Node& n, std::string* why) {
    if (g.value(n.inputs[0]).desc.shape.rank() != 2) {
      *why = "only rank-2 A";
      return false;
    }
    return true;
  };
  ASSERT_TRUE(registry_.add(std::move(custom)).ok());
  Result<Selection> selection = registry_.select(graph_, node(), cpu_device());
  ASSERT_TRUE(selection.ok());
  EXPECT_EQ(selection->chosen->name, "MyMatMul");
  EXPECT_EQ(selection->chosen->kind, KernelKind::kCustom);
}

TEST_F(KernelRegistryTest, NoKernelExplainsEveryCandidate) {
  graph::Graph g;
  ASSERT_TRUE(g.add_input("a", {DType::kI8, {2, 2}}).ok());
  ASSERT_TRUE(g.add_input("b", {DType::kI8, {2, 2}}).ok());
  const std::vector<std::string> in{"a", "b"}, out{"y"};
  const graph::NodeId id = *g.add_node("int_mm", "MatMul", in, out, {}, "", 13);
  Result<Selection> none = registry_.select(g, g.node(id), cpu_device());
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("input 0 is i8, kernel takes f32"), std::string_view::npos)
      << none.status().message();
  const graph::NodeId unknown = *g.add_node("weird", "Frobnicate", in, std::vector<std::string>{"z"});
  EXPECT_NE(registry_.select(g, g.node(unknown), cpu_device()).status().message().find("no kernel is registered"),
            std::string_view::npos);
}

TEST(TimingCache, SaveLoadRoundTripAndMalformedFiles) {
  const std::string path = (std::filesystem::temp_directory_path() / "hxrt_timing_cache_test.json").string();
  TimingCache cache;
  cache.record("MatMul", "f32[1,576]x[576,1536]", 12345);
  cache.record("BatchMatMulV3", "f32[1,576]x[576,1536]", 23456);
  ASSERT_TRUE(cache.save(path).ok());
  TimingCache loaded;
  ASSERT_TRUE(loaded.load(path).ok());
  EXPECT_EQ(loaded.size(), 2u);
  EXPECT_EQ(loaded.find("MatMul", "f32[1,576]x[576,1536]"), 12345);
  EXPECT_FALSE(loaded.find("MatMul", "other").has_value());
  for (const char* bad : {"not json", "{\"format\": \"x\"}", "{\"format\": \"hxrt-timing-cache\", \"version\": 1, \"entries\": [{\"kernel\": 3}]}"}) {
    { std::ofstream(path, std::ios::trunc) << bad; }
    EXPECT_EQ(loaded.load(path).code(), StatusCode::kDataLoss) << bad;
  }
  EXPECT_EQ(loaded.size(), 2u) << "a failed load keeps the previous contents";
  EXPECT_EQ(loaded.load("/nonexistent/cache.json").code(), StatusCode::kNotFound);
  std::filesystem::remove(path);
  // save() makes the cache's folder.
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "hxrt_timing_cache_test_dir";
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(cache.save((dir / "sub" / "cache.json").string()).ok());
  EXPECT_TRUE(loaded.load((dir / "sub" / "cache.json").string()).ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hxrt::ops
