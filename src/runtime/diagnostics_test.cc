// Failures name the failing launch, its producers and the stream's recent launches; snapshots hold the inputs.
#include "hxrt/runtime/diagnostics.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <span>
#include <filesystem>
#include <fstream>
#include <random>

#include "hxrt/kernels/builtin_registries.h"
#include "hxrt/runtime/executor.h"

namespace hxrt::runtime {
namespace {

using graph::Dim;

// An f32 kernel for a unary or binary elementwise op that fails on node `fail_on` and otherwise computes
// relu(a) (unary) or a + b (binary, same shapes): enough to stand in for the real kernel in these graphs.
ops::KernelDef failing_kernel(const std::string& op, const std::string& name, const std::string& fail_on) {
  ops::KernelDef def;
  def.op_type = op;
  def.name = name;
  def.kind = ops::KernelKind::kCustom;
  def.priority = 1000;
  def.launch = ops::cpu_launch(name, [fail_on](const ops::CpuComputeContext& ctx) -> Status {
    if (ctx.launch().node->name == fail_on) return internal_error("injected failure");
    const auto n = static_cast<size_t>(ctx.output(0).num_elements());
    const float* a = ctx.input(0).data<float>();
    float* y = ctx.output(0).data<float>();
    for (size_t i = 0; i < n; ++i) y[i] = ctx.num_inputs() > 1 ? a[i] + ctx.input(1).data<float>()[i] : std::max(a[i], 0.0f);
    return ok_status();
  });
  return def;
}

class DiagnosticsTest : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(hal::register_builtin_drivers(drivers_).ok());
    session_ = std::move(Session::create(drivers_, "cpu")).value();
  }

  Result<std::unique_ptr<Executor>> compile(graph::Graph graph, int max_streams = 4,
                                            const ops::KernelRegistry* kernels = nullptr) {
    PlanOptions options;
    options.fuse = false;
    options.max_streams = max_streams;
    HXRT_ASSIGN_OR_RETURN(std::unique_ptr<ExecutionPlan> plan,
                          ExecutionPlan::build(std::move(graph), session_->device().info(),
                                               PlanContext{&schemas_, kernels ? kernels : &kernels_, nullptr}, options));
    return Executor::create(*session_, std::shared_ptr<const ExecutionPlan>(std::move(plan)));
  }
  void add_node(graph::Graph& g, const std::string& name, const std::string& op, std::vector<std::string> in,
                const std::string& out) {
    const int version = schemas_.find(op, "", 0).value()->since_version;
    ASSERT_TRUE(g.add_node(name, op, in, std::vector<std::string>{out}, {}, "", version).ok()) << name;
  }
  // Two branches joined: a2 = relu(x·wa) on one stream, b2 = sigmoid(x·wb) on another, y = a2 * b2.
  graph::Graph branches() {
    graph::Graph g("branches");
    EXPECT_TRUE(g.add_input("x", {DType::kF32, {Dim::symbol("n"), 8}}).ok());
    EXPECT_TRUE(g.add_initializer("wa", {DType::kF32, {8, 8}}, graph::WeightData::copy_of(w_.bytes)).ok());
    EXPECT_TRUE(g.add_initializer("wb", {DType::kF32, {8, 8}}, graph::WeightData::copy_of(w_.bytes)).ok());
    add_node(g, "a1", "MatMul", {"x", "wa"}, "a");
    add_node(g, "a2", "Relu", {"a"}, "ar");
    add_node(g, "b1", "MatMul", {"x", "wb"}, "b");
    add_node(g, "b2", "Sigmoid", {"b"}, "bs");
    add_node(g, "join", "Mul", {"ar", "bs"}, "y");
    EXPECT_TRUE(g.mark_output("y").ok());
    return g;
  }

  std::mt19937 rng_{7};
  HostTensor w_ = HostTensor::random_f32({8, 8}, rng_);
  std::unique_ptr<ops::Registries> registries_ =
      std::move(kernels::make_builtin_registries({.opencl_kernels = false, .fusions = false})).value();
  ops::OpSchemaRegistry& schemas_ = registries_->schemas;
  ops::KernelRegistry& kernels_ = registries_->kernels;
  hal::DriverRegistry drivers_;
  std::unique_ptr<Session> session_;
};

TEST_F(DiagnosticsTest, KernelErrorInAMultiStreamGraphNamesTheNodeAndItsProducers) {
  ASSERT_TRUE(kernels_.add(failing_kernel("Relu", "BrokenRelu", "a2")).ok());
  Result<std::unique_ptr<Executor>> executor = compile(branches());
  ASSERT_TRUE(executor.ok()) << executor.status().to_string();
  ASSERT_EQ((*executor)->plan().num_streams(), 2);
  const HostTensor x = HostTensor::random_f32({3, 8}, rng_);
  for (bool locate : {true, false}) {
    SCOPED_TRACE(locate ? "with markers" : "without markers");
    RunOptions options;
    options.locate_failures = locate;
    Result<TensorMap> out = (*executor)->run({{"x", x}}, options);
    ASSERT_FALSE(out.ok());
    const std::string text = out.status().to_string();
    EXPECT_EQ(out.status().code(), StatusCode::kInternal) << text;
    EXPECT_NE(text.find("injected failure"), std::string::npos) << text;
    EXPECT_NE(text.find("node 'a2' (id 1, Relu) with kernel 'BrokenRelu' v1"), std::string::npos) << text;
    EXPECT_NE(text.find("input 0: 'a' f32[3, 8] from node 'a1' (MatMul)"), std::string::npos) << text;
    const FailureReport* report = (*executor)->last_failure();
    ASSERT_NE(report, nullptr);
    EXPECT_EQ(report->location, locate ? FailureLocation::kExact : FailureLocation::kInferred);
    EXPECT_EQ(report->node_name, "a2");
    EXPECT_EQ(report->node_id, 1);
    EXPECT_EQ(report->op_type, "Relu");
    EXPECT_EQ(report->tiling, "default");
    ASSERT_EQ(report->producers.size(), 2u) << text;
    EXPECT_EQ(report->producers[0], "'a' f32[3, 8] <- node 'a1' (MatMul)");
    EXPECT_EQ(report->producers[1], "  'x' f32[3, 8] <- graph input");
    ASSERT_FALSE(report->recent_launches.empty());
    EXPECT_EQ(report->recent_launches.back().node_name, "a1") << "the ring ends with the launch before a2";
    EXPECT_EQ(session_->pool().stats().active_blocks.current, 0) << "the failed run released its memory";
  }
  // The session and its streams recover: a healthy plan runs on them.
  std::unique_ptr<ops::Registries> healthy =
      std::move(kernels::make_builtin_registries({.opencl_kernels = false, .fusions = false})).value();
  Result<std::unique_ptr<Executor>> good = compile(branches(), 4, &healthy->kernels);
  ASSERT_TRUE(good.ok());
  Result<TensorMap> out = (*good)->run({{"x", x}});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ((*good)->last_failure(), nullptr);
}

TEST_F(DiagnosticsTest, RepeatedKernelIsAmbiguousWithoutMarkersAndExactWithThem) {
  ASSERT_TRUE(kernels_.add(failing_kernel("Relu", "BrokenRelu", "r2")).ok());
  graph::Graph g("chain");
  ASSERT_TRUE(g.add_input("x", {DType::kF32, {4}}).ok());
  add_node(g, "r1", "Relu", {"x"}, "h1");
  add_node(g, "r2", "Relu", {"h1"}, "h2");
  add_node(g, "r3", "Tanh", {"h2"}, "y");
  ASSERT_TRUE(g.mark_output("y").ok());
  Result<std::unique_ptr<Executor>> executor = compile(std::move(g));
  ASSERT_TRUE(executor.ok()) << executor.status().to_string();
  const HostTensor x = HostTensor::f32({4}, {1, -2, 3, -4});
  Result<TensorMap> out = (*executor)->run({{"x", x}});
  ASSERT_FALSE(out.ok());
  const FailureReport* report = (*executor)->last_failure();
  ASSERT_NE(report, nullptr);
  EXPECT_EQ(report->location, FailureLocation::kAmbiguous) << out.status().to_string();
  EXPECT_EQ(report->candidates, std::vector<std::string>{"'r2'"});
  RunOptions exact;
  exact.locate_failures = true;
  out = (*executor)->run({{"x", x}}, exact);
  ASSERT_FALSE(out.ok());
  report = (*executor)->last_failure();
  ASSERT_NE(report, nullptr);
  EXPECT_EQ(report->location, FailureLocation::kExact);
  EXPECT_EQ(report->node_name, "r2") << out.status().to_string();
  EXPECT_TRUE(report->candidates.empty());
}

TEST_F(DiagnosticsTest, TilingErrorIsNamedAtEnqueue) {
  ops::KernelDef def = failing_kernel("Relu", "UntileableRelu", "");
  def.tiling = [](const ops::TilingQuery& query) -> Result<ops::Tiling> {
    return invalid_argument("no tiling for {} elements", query.inputs[0].num_elements());
  };
  ASSERT_TRUE(kernels_.add(std::move(def)).ok());
  graph::Graph g("tiled");
  ASSERT_TRUE(g.add_input("x", {DType::kF32, {5}}).ok());
  add_node(g, "neg", "Tanh", {"x"}, "h");
  add_node(g, "act", "Relu", {"h"}, "y");
  ASSERT_TRUE(g.mark_output("y").ok());
  Result<std::unique_ptr<Executor>> executor = compile(std::move(g));
  ASSERT_TRUE(executor.ok());
  Result<TensorMap> out = (*executor)->run({{"x", HostTensor::f32({5}, {1, 2, 3, 4, 5})}});
  ASSERT_FALSE(out.ok());
  const std::string text = out.status().to_string();
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(text.find("no tiling for 5 elements"), std::string::npos) << text;
  EXPECT_NE(text.find("computing the tiling of node 'act' (id 1, Relu) with kernel 'UntileableRelu'"),
            std::string::npos) << text;
  EXPECT_NE(text.find("tiling: (not computed)"), std::string::npos) << text;
  EXPECT_NE(text.find("'h' f32[5] <- node 'neg' (Tanh)"), std::string::npos) << text;
  ASSERT_NE((*executor)->last_failure(), nullptr);
  EXPECT_EQ((*executor)->last_failure()->location, FailureLocation::kExact);
}

TEST_F(DiagnosticsTest, SnapshotHoldsTheFailingNodesInputsAndAManifest) {
  ASSERT_TRUE(kernels_.add(failing_kernel("Add", "BrokenAdd", "sum")).ok());
  // h = relu(x) (a pool-allocated intermediate: n is symbolic), sum = h + x fails.
  graph::Graph g("snap");
  ASSERT_TRUE(g.add_input("x", {DType::kF32, {Dim::symbol("n"), 3}}).ok());
  add_node(g, "act", "Relu", {"x"}, "h");
  add_node(g, "sum", "Add", {"h", "x"}, "s");
  add_node(g, "neg", "Tanh", {"s"}, "y");
  ASSERT_TRUE(g.mark_output("y").ok());
  Result<std::unique_ptr<Executor>> executor = compile(std::move(g), 1);
  ASSERT_TRUE(executor.ok());
  ASSERT_FALSE((*executor)->plan().memory().uses_arena);
  const HostTensor x = HostTensor::random_f32({2, 3}, rng_);
  const std::filesystem::path dir = std::filesystem::path(testing::TempDir()) / fmt::format("hxrt_snapshot_test.{}", getpid());
  std::filesystem::remove_all(dir);
  RunOptions options;
  options.snapshot_dir = dir.string();
  Result<TensorMap> out = (*executor)->run({{"x", x}}, options);
  ASSERT_FALSE(out.ok());
  const std::string text = out.status().to_string();
  EXPECT_NE(text.find("inputs snapshot: " + dir.string() + "/manifest.json"), std::string::npos) << text;
  EXPECT_EQ(session_->pool().stats().active_blocks.current, 0);

  std::ifstream manifest_file(dir / "manifest.json");
  ASSERT_TRUE(manifest_file) << text;
  const nlohmann::json manifest = nlohmann::json::parse(manifest_file);
  EXPECT_EQ(manifest["node"], "sum");
  EXPECT_EQ(manifest["op"], "Add");
  EXPECT_EQ(manifest["kernel"], "BrokenAdd");
  EXPECT_NE(manifest["error"].get<std::string>().find("injected failure"), std::string::npos);
  ASSERT_EQ(manifest["inputs"].size(), 2u);
  std::vector<float> relu_x = x.to_f32();
  for (float& v : relu_x) v = std::max(v, 0.0f);
  const std::vector<std::vector<float>> expected = {relu_x, x.to_f32()};
  for (size_t i = 0; i < 2; ++i) {
    const nlohmann::json& in = manifest["inputs"][i];
    EXPECT_EQ(in["dtype"], "f32");
    EXPECT_EQ(in["shape"], nlohmann::json::array({2, 3}));
    std::ifstream file(dir / in["file"].get<std::string>(), std::ios::binary);
    ASSERT_TRUE(file) << in.dump();
    std::vector<float> values(6);
    file.read(reinterpret_cast<char*>(values.data()), 6 * sizeof(float));
    EXPECT_EQ(file.gcount(), 6 * static_cast<std::streamsize>(sizeof(float)));
    EXPECT_EQ(values, expected[i]) << in.dump();
  }
  EXPECT_EQ(manifest["inputs"][0]["producer"], "node 'act' (Relu)");
  EXPECT_EQ(manifest["inputs"][1]["value"], "x");
  std::filesystem::remove_all(dir);
}

// An f32 Sigmoid that writes NaN at element 1 and +Inf at element 2 (when the tensor holds them) for node `bad`.
ops::KernelDef poisoning_sigmoid(const std::string& bad) {
  ops::KernelDef def;
  def.op_type = "Sigmoid";
  def.name = "PoisonSigmoid";
  def.kind = ops::KernelKind::kCustom;
  def.priority = 1000;
  def.launch = ops::cpu_launch("PoisonSigmoid", [bad](const ops::CpuComputeContext& ctx) -> Status {
    const auto n = static_cast<size_t>(ctx.output(0).num_elements());
    const float* a = ctx.input(0).data<float>();
    float* y = ctx.output(0).data<float>();
    for (size_t i = 0; i < n; ++i) y[i] = 1.0f / (1.0f + std::exp(-a[i]));
    if (ctx.launch().node->name == bad && n > 2) {
      y[1] = std::numeric_limits<float>::quiet_NaN();
      y[2] = std::numeric_limits<float>::infinity();
    }
    return ok_status();
  });
  return def;
}

TEST_F(DiagnosticsTest, ScanNonFiniteCountsNanAndInfInEveryFloatType) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const HostTensor f32 = HostTensor::f32({5}, {1, nan, -inf, 2, nan});
  NonFiniteCount c = scan_non_finite(DType::kF32, f32.bytes);
  EXPECT_EQ(c.nan, 2u);
  EXPECT_EQ(c.inf, 1u);
  EXPECT_EQ(c.first_index, 1);
  // f16: 0x3c00 = 1, 0x7e00 = NaN, 0xfc00 = -Inf; bf16: 0x3f80 = 1, 0x7fc0 = NaN, 0x7f80 = +Inf.
  const std::vector<uint16_t> f16 = {0x3c00, 0x3c00, 0xfc00, 0x7e00};
  c = scan_non_finite(DType::kF16, std::as_bytes(std::span(f16)));
  EXPECT_EQ(c.nan, 1u);
  EXPECT_EQ(c.inf, 1u);
  EXPECT_EQ(c.first_index, 2);
  const std::vector<uint16_t> bf16 = {0x3f80, 0x7f80, 0x7fc0};
  c = scan_non_finite(DType::kBF16, std::as_bytes(std::span(bf16)));
  EXPECT_EQ(c.nan, 1u);
  EXPECT_EQ(c.inf, 1u);
  EXPECT_EQ(c.first_index, 1);
  EXPECT_TRUE(scan_non_finite(DType::kF32, HostTensor::f32({3}, {1, -2, 3e38f}).bytes).clean());
  const std::vector<int32_t> ints = {-1, 0x7fc00000};
  EXPECT_TRUE(scan_non_finite(DType::kI32, std::as_bytes(std::span(ints))).clean()) << "integers are never scanned";
}

TEST_F(DiagnosticsTest, CheckNumericsNamesTheNodeThatMadeNanInAMultiStreamGraph) {
  ASSERT_TRUE(kernels_.add(poisoning_sigmoid("b2")).ok());
  Result<std::unique_ptr<Executor>> executor = compile(branches());
  ASSERT_TRUE(executor.ok()) << executor.status().to_string();
  ASSERT_EQ((*executor)->plan().num_streams(), 2);
  const HostTensor x = HostTensor::random_f32({3, 8}, rng_);
  // Without the check the NaN flows into the output unnoticed.
  Result<TensorMap> unchecked = (*executor)->run({{"x", x}});
  ASSERT_TRUE(unchecked.ok()) << unchecked.status().to_string();
  EXPECT_TRUE(std::isnan(unchecked->at("y").to_f32()[1]));

  const std::filesystem::path dir = std::filesystem::path(testing::TempDir()) / fmt::format("hxrt_numerics_test.{}", getpid());
  std::filesystem::remove_all(dir);
  RunOptions options;
  options.check_numerics = true;
  options.snapshot_dir = dir.string();
  Result<TensorMap> out = (*executor)->run({{"x", x}}, options);
  ASSERT_FALSE(out.ok());
  const std::string text = out.status().to_string();
  EXPECT_EQ(out.status().code(), StatusCode::kDataLoss) << text;
  EXPECT_NE(text.find("checking the outputs of node 'b2' (id 3, Sigmoid) with kernel 'PoisonSigmoid' v1"),
            std::string::npos) << text;
  EXPECT_NE(text.find("non-finite values: output 0 'bs' f32[3, 8]: 1 NaN, 1 Inf, first at index 1"), std::string::npos)
      << text;
  EXPECT_NE(text.find("input 0: 'b' f32[3, 8] from node 'b1' (MatMul)"), std::string::npos) << text;
  const FailureReport* report = (*executor)->last_failure();
  ASSERT_NE(report, nullptr);
  EXPECT_EQ(report->node_name, "b2") << "the producer of the NaN, not the Mul that consumed it";
  EXPECT_EQ(report->location, FailureLocation::kExact);
  ASSERT_TRUE(report->non_finite.has_value());
  EXPECT_EQ(report->non_finite->value, "bs");
  EXPECT_EQ(report->non_finite->count.nan, 1u);
  EXPECT_EQ(report->non_finite->count.inf, 1u);
  EXPECT_EQ(report->non_finite->count.first_index, 1);
  EXPECT_EQ(report->producers.front(), "'b' f32[3, 8] <- node 'b1' (MatMul)");
  // The snapshot holds b2's input and the manifest says what was found.
  std::ifstream manifest_file(dir / "manifest.json");
  ASSERT_TRUE(manifest_file) << text;
  const nlohmann::json manifest = nlohmann::json::parse(manifest_file);
  EXPECT_EQ(manifest["node"], "b2");
  EXPECT_EQ(manifest["non_finite"]["nan"], 1);
  EXPECT_EQ(manifest["non_finite"]["first_index"], 1);
  ASSERT_EQ(manifest["inputs"].size(), 1u);
  std::filesystem::remove_all(dir);
  EXPECT_EQ(session_->pool().stats().active_blocks.current, 0);

  // A clean graph passes with the check on and gives the same result as without it.
  std::unique_ptr<ops::Registries> healthy =
      std::move(kernels::make_builtin_registries({.opencl_kernels = false, .fusions = false})).value();
  Result<std::unique_ptr<Executor>> good = compile(branches(), 4, &healthy->kernels);
  ASSERT_TRUE(good.ok());
  Result<TensorMap> checked = (*good)->run({{"x", x}}, RunOptions{.check_numerics = true});
  ASSERT_TRUE(checked.ok()) << checked.status().to_string();
  Result<TensorMap> plain = (*good)->run({{"x", x}});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(checked->at("y").to_f32(), plain->at("y").to_f32());
}

// Continue mode, with every branch on one stream (1) or on streams of their own (4).
class ContinueModeTest : public DiagnosticsTest, public testing::WithParamInterface<int> {
 protected:
  // Three branches from x: a (a1 MatMul, a2 Relu, a3 Tanh → ya), b (b1 MatMul, b2 Sigmoid → yb), c (c1 Relu,
  // c2 Tanh → yc), and join = a2 * b2 → y.
  graph::Graph graph() {
    graph::Graph g("three");
    EXPECT_TRUE(g.add_input("x", {DType::kF32, {Dim::symbol("n"), 8}}).ok());
    EXPECT_TRUE(g.add_initializer("wa", {DType::kF32, {8, 8}}, graph::WeightData::copy_of(w_.bytes)).ok());
    EXPECT_TRUE(g.add_initializer("wb", {DType::kF32, {8, 8}}, graph::WeightData::copy_of(w_.bytes)).ok());
    add_node(g, "a1", "MatMul", {"x", "wa"}, "a");
    add_node(g, "a2", "Relu", {"a"}, "ar");
    add_node(g, "a3", "Tanh", {"ar"}, "ya");
    add_node(g, "b1", "MatMul", {"x", "wb"}, "b");
    add_node(g, "b2", "Sigmoid", {"b"}, "yb");
    add_node(g, "c1", "Relu", {"x"}, "c");
    add_node(g, "c2", "Tanh", {"c"}, "yc");
    add_node(g, "join", "Mul", {"ar", "yb"}, "y");
    for (const char* out : {"ya", "yb", "yc", "y"}) EXPECT_TRUE(g.mark_output(out).ok());
    return g;
  }
};

TEST_P(ContinueModeTest, IndependentBranchesKeepRunningAndDependentsAreSkipped) {
  // a2 (Relu) fails in its kernel, at run time on its stream; the c branch's Relu uses the same kernel and works.
  ASSERT_TRUE(kernels_.add(failing_kernel("Relu", "BrokenRelu", "a2")).ok());
  Result<std::unique_ptr<Executor>> executor = compile(graph(), GetParam());
  ASSERT_TRUE(executor.ok()) << executor.status().to_string();
  const HostTensor x = HostTensor::random_f32({3, 8}, rng_);
  RunOptions options;
  options.failure_mode = FailureMode::kContinue;
  options.profile = true;
  Result<TensorMap> out = (*executor)->run({{"x", x}}, options);
  ASSERT_FALSE(out.ok());
  const std::string text = out.status().to_string();
  EXPECT_EQ(out.status().code(), StatusCode::kInternal) << text;
  EXPECT_NE(text.find("1 of 8 launches of graph 'three' failed and 2 were skipped (continue mode)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("running node 'a2' (id 1, Relu) with kernel 'BrokenRelu' v1"), std::string::npos) << text;
  EXPECT_NE(text.find("skipped (they depend on it): 'a3' (Tanh), 'join' (Mul)"), std::string::npos) << text;
  ASSERT_EQ((*executor)->failures().size(), 1u);
  EXPECT_EQ((*executor)->failures()[0].node_name, "a2");
  EXPECT_EQ((*executor)->failures()[0].location, FailureLocation::kExact);
  // Every launch that does not depend on a2 ran to completion, once each.
  std::map<std::string, int> ran;
  for (const LaunchRecord& r : session_->profiler().records()) {
    if (r.has_device_time()) ++ran[r.node_name];
  }
  for (const char* node : {"a1", "b1", "b2", "c1", "c2"}) EXPECT_EQ(ran[node], 1) << node;
  for (const char* node : {"a2", "a3", "join"}) EXPECT_EQ(ran[node], 0) << node;
  EXPECT_EQ(session_->pool().stats().active_blocks.current, 0) << "the failed run released its memory";
  for (const std::string& name : session_->stream_names()) {
    EXPECT_TRUE(session_->stream(name).value()->status().ok()) << name << " was reset";
  }
}

TEST_P(ContinueModeTest, EveryFailureIsListedAndEnqueueErrorsDoNotStopTheRun) {
  ASSERT_TRUE(kernels_.add(failing_kernel("Relu", "BrokenRelu", "a2")).ok());
  ops::KernelDef untileable = failing_kernel("Tanh", "UntileableTanh", "");
  untileable.tiling = [](const ops::TilingQuery& query) -> Result<ops::Tiling> {
    if (query.inputs[0].num_elements() == 24) return invalid_argument("no tiling for 24 elements");
    return ops::Tiling{};
  };
  ASSERT_TRUE(kernels_.add(std::move(untileable)).ok());
  Result<std::unique_ptr<Executor>> executor = compile(graph(), GetParam());
  ASSERT_TRUE(executor.ok()) << executor.status().to_string();
  RunOptions options;
  options.failure_mode = FailureMode::kContinue;
  Result<TensorMap> out = (*executor)->run({{"x", HostTensor::random_f32({3, 8}, rng_)}}, options);
  ASSERT_FALSE(out.ok());
  const std::string text = out.status().to_string();
  // a2 fails at run time; c2's tiling fails at enqueue; a3 (Tanh, after a2) and join are skipped.
  EXPECT_NE(text.find("2 of 8 launches of graph 'three' failed and 2 were skipped"), std::string::npos) << text;
  const std::vector<FailureReport>& failures = (*executor)->failures();
  ASSERT_EQ(failures.size(), 2u) << text;
  EXPECT_EQ(failures[0].node_name, "a2");
  EXPECT_NE(failures[0].error.find("injected failure"), std::string::npos);
  EXPECT_EQ(failures[1].node_name, "c2");
  EXPECT_EQ(failures[1].stage, "computing the tiling of");
  EXPECT_NE(failures[1].error.find("no tiling for 24 elements"), std::string::npos);
  EXPECT_NE(text.find("failure 2 of 2: computing the tiling of node 'c2'"), std::string::npos) << text;
  EXPECT_EQ(session_->pool().stats().active_blocks.current, 0);
}

INSTANTIATE_TEST_SUITE_P(Streams, ContinueModeTest, testing::Values(1, 4),
                         [](const testing::TestParamInfo<int>& param) { return fmt::format("max_streams{}", param.param); });

TEST_F(DiagnosticsTest, AStreamThatFailedOnceIsResetAndTheGraphRunsCorrectlyAgain) {
  // A Relu that fails on its first call only, in the middle of a two-stream graph.
  auto calls = std::make_shared<std::atomic<int>>(0);
  ops::KernelDef flaky;
  flaky.op_type = "Relu";
  flaky.name = "FlakyRelu";
  flaky.kind = ops::KernelKind::kCustom;
  flaky.priority = 1000;
  flaky.launch = ops::cpu_launch("FlakyRelu", [calls](const ops::CpuComputeContext& ctx) -> Status {
    if (calls->fetch_add(1) == 0) return internal_error("transient failure");
    const auto n = static_cast<size_t>(ctx.output(0).num_elements());
    const float* a = ctx.input(0).data<float>();
    float* y = ctx.output(0).data<float>();
    for (size_t i = 0; i < n; ++i) y[i] = std::max(a[i], 0.0f);
    return ok_status();
  });
  ASSERT_TRUE(kernels_.add(std::move(flaky)).ok());
  std::unique_ptr<ops::Registries> healthy =
      std::move(kernels::make_builtin_registries({.opencl_kernels = false, .fusions = false})).value();
  Result<std::unique_ptr<Executor>> reference = compile(branches(), 4, &healthy->kernels);
  ASSERT_TRUE(reference.ok());
  const HostTensor x = HostTensor::random_f32({5, 8}, rng_);
  Result<TensorMap> expected = (*reference)->run({{"x", x}});
  ASSERT_TRUE(expected.ok());

  for (FailureMode mode : {FailureMode::kStop, FailureMode::kContinue}) {
    SCOPED_TRACE(mode == FailureMode::kStop ? "stop" : "continue");
    calls->store(0);
    Result<std::unique_ptr<Executor>> executor = compile(branches());
    ASSERT_TRUE(executor.ok());
    ASSERT_EQ((*executor)->plan().num_streams(), 2);
    RunOptions options;
    options.failure_mode = mode;
    Result<TensorMap> failed = (*executor)->run({{"x", x}}, options);
    ASSERT_FALSE(failed.ok());
    EXPECT_NE(failed.status().to_string().find("node 'a2' (id 1, Relu) with kernel 'FlakyRelu'"), std::string::npos)
        << failed.status().to_string();
    for (const std::string& name : session_->stream_names()) {
      EXPECT_TRUE(session_->stream(name).value()->status().ok()) << name << " was reset";
    }
    // The same executor and session run again, with the right answer.
    Result<TensorMap> again = (*executor)->run({{"x", x}}, options);
    ASSERT_TRUE(again.ok()) << again.status().to_string();
    EXPECT_EQ((*executor)->last_failure(), nullptr);
    EXPECT_EQ(again->at("y").to_f32(), expected->at("y").to_f32());
    EXPECT_EQ(session_->pool().stats().active_blocks.current, 0);
  }
}

}  // namespace
}  // namespace hxrt::runtime
