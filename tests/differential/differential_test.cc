// Differential tests: random graphs run through ExecutionPlan + Executor in four configurations (1 or 4 streams,
// fusion on or off) on every available device (cpu, opencl) and compared with the double-precision reference
// interpreter, and with each other.
//
// Environment:
//   HXRT_DIFF_GRAPHS=N   number of random graphs per device (default 200 on cpu, 40 on opencl; a fifth of
//                        that under sanitizers)
//   HXRT_DIFF_SEED=S     run only the graph of seed S (what a failure report asks you to rerun)
//
// Note [Tolerances]
// Errors are normalised: max|actual - ref| / max(1, max|ref|) over an output, so values near zero are judged on
// an absolute scale and large values on a relative one. f32 values (kF32Tolerance = 1e-4): f32 rounding is
// 6e-8 per operation; a chain of up to ~50 ops with reductions of up to a few hundred terms (MatMul, Conv,
// norms, softmax) accumulates a few 1e-6 in the worst outputs we see, and kernels may use their own exp/erf/tanh;
// 1e-4 leaves a wide margin over that and is still far below what any indexing, broadcasting or attribute bug
// produces (errors of order 1). The generator keeps magnitudes O(1) so this stays true after normalising layers.
// Values downstream of a MatMulQ with a block-quantized weight (kQuantizedTolerance = 3e-2): the reference
// dequantizes W and multiplies in double, while the kernel also quantizes each activation row to 8 bits
// (d = max|x|/127, so each term carries up to 0.4% relative error); 3e-2 bounds that with margin, widened 3x by
// each RMSNorm/LayerNormalization after it (normalising a group of a few elements rescales its error too). f16/bf16
// Casts are applied only to exact inputs, so they add no tolerance: the reference rounds the same f32 values.
// Configurations: 1 vs 4 streams with the same fusion setting must be bit-identical (same kernels; streams only
// reorder independent nodes); fused vs unfused must agree within twice the tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "differential/random_graph.h"
#include "differential/reference.h"
#include "hxrt/base/float16.h"
#include "hxrt/hal/driver.h"
#include "hxrt/kernels/builtin_registries.h"
#include "hxrt/runtime/executor.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define HXRT_DIFF_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define HXRT_DIFF_SANITIZED 1
#endif

namespace hxrt::differential {
namespace {

#ifdef HXRT_DIFF_SANITIZED
constexpr int kDefaultGraphs = 40;
#else
constexpr int kDefaultGraphs = 200;
#endif
constexpr uint64_t kBaseSeed = 20240601;
constexpr int kMaxReportedFailures = 3;

struct Config {
  int max_streams;
  bool fuse;
  std::string name() const { return fmt::format("max_streams={} fuse={}", max_streams, fuse ? "on" : "off"); }
};
constexpr Config kConfigs[] = {{1, false}, {4, false}, {1, true}, {4, true}};
constexpr size_t kNumConfigs = std::size(kConfigs);

int env_int(const char* name, int fallback) {
  const char* text = std::getenv(name);
  return text != nullptr && *text != '\0' ? std::atoi(text) : fallback;
}

std::string bindings_string(const graph::SymbolBindings& bindings) {
  std::vector<std::string> parts;
  for (const auto& [name, value] : bindings) parts.push_back(fmt::format("{}={}", name, value));
  return fmt::format("{{{}}}", fmt::join(parts, ", "));
}

// Normalised max error of `actual` against `expected` (Note [Tolerances]); infinity when dtypes or shapes differ
// or a value is not finite, with the reason in `detail`.
double normalised_error(const HostTensor& actual, const RefTensor& expected, std::string* detail) {
  const std::vector<int64_t> actual_dims(actual.shape.dims().begin(), actual.shape.dims().end());
  if (actual.dtype != expected.dtype || actual_dims != expected.dims) {
    *detail = fmt::format("got {}{}, the reference has {}{}", actual.dtype, actual.shape, expected.dtype,
                          expected.shape_string());
    return INFINITY;
  }
  const std::vector<float> values = actual.to_f32();
  double scale = 1.0, worst = 0.0;
  size_t worst_at = 0;
  for (double v : expected.data) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < values.size(); ++i) {
    const double error = std::isfinite(values[i]) ? std::abs(values[i] - expected.data[i]) : INFINITY;
    if (!(error <= worst)) {
      worst = error;
      worst_at = i;
    }
  }
  if (!values.empty()) {
    *detail = fmt::format("worst at flat index {}: got {}, expected {} (max |ref| {})", worst_at, values[worst_at],
                          expected.data[worst_at], scale);
  }
  return worst / scale;
}

// What the generated graphs exercised, summed over the run (asserted so the generator cannot silently degrade).
struct Coverage {
  std::map<std::string, int> ops;
  std::map<std::string, int> fusion_patterns;
  int graphs = 0, multi_stream_plans = 0, arena_plans = 0, pool_plans = 0, runs = 0, comparisons = 0;
  int symbolic_graphs = 0;
  double worst_f32_error = 0.0, worst_quantized_error = 0.0;
};

class DifferentialTest : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(hal::register_builtin_drivers(drivers_).ok());
    session_ = std::move(runtime::Session::create(drivers_, "cpu")).value();
  }

  Result<std::unique_ptr<runtime::Executor>> compile(const graph::Graph& graph, const Config& config) {
    runtime::PlanOptions options;
    options.max_streams = config.max_streams;
    options.fuse = config.fuse;
    HXRT_ASSIGN_OR_RETURN(
        std::unique_ptr<runtime::ExecutionPlan> plan,
        runtime::ExecutionPlan::build(graph.clone(), session_->device().info(),
                                      runtime::PlanContext::of(*registries_), options));
    return runtime::Executor::create(*session_, std::shared_ptr<const runtime::ExecutionPlan>(std::move(plan)));
  }

  // Reruns `rg` in `config` with every node output marked as a graph output and names the first node, in
  // topological order, whose output leaves its tolerance. Marking intermediates as outputs blocks fusion of the
  // chains they are in, so a fault that only the fused kernel has will not reappear here; the report says so.
  std::string locate_divergence(const RandomGraph& rg, const Config& config, const HostTensors& inputs,
                                const RefValues& expected) {
    graph::Graph debug = rg.graph.clone();
    for (graph::NodeId id = 0; id < debug.num_nodes(); ++id) {
      for (graph::ValueId out : debug.node(id).outputs) {
        if (!debug.value(out).is_output) debug.mark_output(debug.value(out).name).ignore();
      }
    }
    Result<std::unique_ptr<runtime::Executor>> executor = compile(debug, config);
    if (!executor.ok()) return "debug rerun could not plan: " + executor.status().to_string();
    Result<runtime::TensorMap> outputs = (*executor)->run(inputs);
    if (!outputs.ok()) return "debug rerun failed: " + outputs.status().to_string();
    const std::vector<graph::NodeId> order = rg.graph.topological_order().value();
    for (graph::NodeId id : order) {
      const graph::Node& node = rg.graph.node(id);
      const std::string& name = rg.graph.value(node.outputs[0]).name;
      std::string detail;
      const double error = normalised_error(outputs->at(name), expected.at(name), &detail);
      if (error > rg.tolerance.at(name)) {
        std::vector<std::string> input_shapes;
        for (graph::ValueId in : node.inputs) {
          if (in == graph::kNoValue) continue;
          const RefTensor& t = expected.at(rg.graph.value(in).name);
          input_shapes.push_back(fmt::format("{} {}{}", rg.graph.value(in).name, t.dtype, t.shape_string()));
        }
        return fmt::format(
            "first diverging node (debug rerun, every value an output): '{}' ({}) attrs {} inputs [{}] -> '{}': "
            "normalised error {:.3g} > {:.3g}; {}",
            node.name, node.op_type, node.attrs.to_string(), fmt::join(input_shapes, ", "), name, error,
            rg.tolerance.at(name), detail);
      }
    }
    return "no intermediate diverges when every value is a graph output (which blocks fusion): suspect a fused "
           "kernel or the plan of the original run (fusion groups / stream events / memory reuse above)";
  }

  // Runs one generated graph in every configuration; returns "" or an actionable failure report.
  std::string check_graph(const RandomGraph& rg, Coverage& coverage) {
    ++coverage.graphs;
    if (!rg.bindings.front().empty()) ++coverage.symbolic_graphs;
    for (graph::NodeId id = 0; id < rg.graph.num_nodes(); ++id) ++coverage.ops[rg.graph.node(id).op_type];
    const std::string header = fmt::format("seed {} (rerun: HXRT_DIFF_SEED={} ./differential_test)", rg.seed, rg.seed);
    const std::string listing = "graph:\n" + rg.graph.to_string();

    std::vector<std::unique_ptr<runtime::Executor>> executors;
    for (const Config& config : kConfigs) {
      Result<std::unique_ptr<runtime::Executor>> executor = compile(rg.graph, config);
      if (!executor.ok()) {
        const char* hint = config.fuse && executors.size() >= 2
                               ? " (the same graph plans with fusion off: the fusion pass made a node that fails "
                                 "its fused op's schema or kernel)"
                               : "";
        return fmt::format("{}: planning failed with {}{}:\n{}\n{}", header, config.name(), hint,
                           executor.status().to_string(), listing);
      }
      const runtime::ExecutionPlan& plan = (*executor)->plan();
      if (plan.num_streams() > 1) ++coverage.multi_stream_plans;
      ++(plan.memory().uses_arena ? coverage.arena_plans : coverage.pool_plans);
      for (const ops::FusionGroup& group : plan.fusion_groups()) ++coverage.fusion_patterns[group.pattern];
      executors.push_back(std::move(executor).value());
    }

    for (size_t b = 0; b < rg.bindings.size(); ++b) {
      const graph::SymbolBindings& bindings = rg.bindings[b];
      std::mt19937_64 rng(rg.seed * 7919 + b);
      const HostTensors inputs = make_inputs(rg, bindings, rng);
      Result<RefValues> expected = evaluate_reference(rg.graph, inputs);
      if (!expected.ok()) {
        return fmt::format("{} bindings {}: the reference failed: {}\n{}", header, bindings_string(bindings),
                           expected.status().to_string(), listing);
      }
      std::vector<runtime::TensorMap> results;
      for (size_t c = 0; c < kNumConfigs; ++c) {
        const Config& config = kConfigs[c];
        const std::string where = fmt::format("{} {} bindings {}", header, config.name(), bindings_string(bindings));
        Result<runtime::TensorMap> outputs = executors[c]->run(inputs);
        ++coverage.runs;
        if (!outputs.ok()) {
          return fmt::format("{}: run failed: {}\n{}\nplan:\n{}", where, outputs.status().to_string(), listing,
                             executors[c]->plan().describe());
        }
        for (graph::ValueId out : rg.graph.outputs()) {
          const std::string& name = rg.graph.value(out).name;
          auto found = outputs->find(name);
          if (found == outputs->end())
            return fmt::format("{}: output '{}' missing from the run's results", where, name);
          std::string detail;
          const double error = normalised_error(found->second, expected->at(name), &detail);
          const double tolerance = rg.tolerance.at(name);
          ++coverage.comparisons;
          double& worst = tolerance > kF32Tolerance ? coverage.worst_quantized_error : coverage.worst_f32_error;
          worst = std::max(worst, error);
          if (!(error <= tolerance)) {
            return fmt::format("{}: output '{}' normalised error {:.3g} > tolerance {:.3g}; {}\n{}\n{}\nplan:\n{}",
                               where, name, error, tolerance, detail, locate_divergence(rg, config, inputs, *expected),
                               listing, executors[c]->plan().describe());
          }
        }
        results.push_back(std::move(outputs).value());
      }
      // The configurations against each other: 0 = (1, unfused), 1 = (4, unfused), 2 = (1, fused), 3 = (4, fused).
      for (graph::ValueId out : rg.graph.outputs()) {
        const std::string& name = rg.graph.value(out).name;
        for (size_t c : {size_t{1}, size_t{3}}) {
          if (results[c].at(name).bytes != results[c - 1].at(name).bytes) {
            return fmt::format("{} bindings {}: output '{}' differs between {} and {} (expected bit-identical)\n{}",
                               header, bindings_string(bindings), name, kConfigs[c - 1].name(), kConfigs[c].name(),
                               listing);
          }
        }
        const RefTensor unfused = ref_from_host(results[0].at(name));
        std::string detail;
        const double error = normalised_error(results[2].at(name), unfused, &detail);
        if (!(error <= 2 * rg.tolerance.at(name))) {
          return fmt::format("{} bindings {}: output '{}' fused vs unfused normalised difference {:.3g}; {}\n{}",
                             header, bindings_string(bindings), name, error, detail, listing);
        }
      }
    }
    return "";
  }

  // Every device's kernels: selection only offers a plan the kernels of its own device.
  std::unique_ptr<ops::Registries> registries_ = std::move(kernels::make_builtin_registries()).value();
  hal::DriverRegistry drivers_;
  std::unique_ptr<runtime::Session> session_;
};

// The same suite on each available device: the fixture's CPU session is replaced by one on the parameter's device.
class DifferentialDeviceTest : public DifferentialTest, public testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    DifferentialTest::SetUp();
    if (GetParam() == "cpu") return;
    ASSERT_EQ(GetParam(), "opencl");
    Result<std::unique_ptr<runtime::Session>> session = runtime::Session::create(drivers_, GetParam());
    if (!session.ok()) GTEST_SKIP() << "no " << GetParam() << " device: " << session.status().to_string();
    session_ = std::move(session).value();
  }
};

INSTANTIATE_TEST_SUITE_P(Devices, DifferentialDeviceTest, testing::Values("cpu", "opencl"),
                         [](const testing::TestParamInfo<std::string>& param) { return param.param; });

TEST_P(DifferentialDeviceTest, RandomGraphsMatchTheReferenceInEveryConfiguration) {
  const int single_seed = env_int("HXRT_DIFF_SEED", -1);
  // OpenCL compiles each kernel specialisation (PoCL's compiler here) the first time it meets it: 200 graphs take
  // minutes on a cold kernel cache, so it sweeps fewer graphs by default; the coverage assertions below are then
  // skipped (they need 100 or more).
  const int default_graphs = GetParam() == "cpu" ? kDefaultGraphs : kDefaultGraphs / 5;
  const int graphs = single_seed >= 0 ? 1 : env_int("HXRT_DIFF_GRAPHS", default_graphs);
  Coverage coverage;
  int failures = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < graphs && failures < kMaxReportedFailures; ++i) {
    const uint64_t seed = single_seed >= 0 ? static_cast<uint64_t>(single_seed) : kBaseSeed + static_cast<uint64_t>(i);
    const RandomGraph rg = generate_random_graph(seed);
    const std::string failure = check_graph(rg, coverage);
    if (!failure.empty()) {
      ++failures;
      ADD_FAILURE() << failure;
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::vector<std::string> ops;
  for (const auto& [op, n] : coverage.ops) ops.push_back(fmt::format("{}:{}", op, n));
  std::vector<std::string> patterns;
  for (const auto& [pattern, n] : coverage.fusion_patterns) patterns.push_back(fmt::format("{}:{}", pattern, n));
  std::printf(
      "differential: %d graphs (%d with symbolic dims), %zu configurations, %d runs, %d output comparisons in %.1f s\n"
      "  plans: %d multi-stream, %d arena, %d pool; worst normalised error f32 %.3g, quantized %.3g\n"
      "  ops: %s\n  fusions: %s\n",
      coverage.graphs, coverage.symbolic_graphs, kNumConfigs, coverage.runs, coverage.comparisons, seconds,
      coverage.multi_stream_plans, coverage.arena_plans, coverage.pool_plans, coverage.worst_f32_error,
      coverage.worst_quantized_error, fmt::format("{}", fmt::join(ops, " ")).c_str(),
      fmt::format("{}", fmt::join(patterns, " ")).c_str());

  if (single_seed >= 0 || failures > 0 || graphs < 100) return;  // coverage is judged on a full run only
  for (const char* op : {"Add",     "Sub",    "Mul",    "Div",     "Relu",      "Gelu",
                         "Sigmoid", "Tanh",   "Silu",   "Cast",    "Softmax",   "LayerNormalization",
                         "RMSNorm", "RoPE",   "Gather", "Reshape", "Transpose", "Concat",
                         "Slice",   "MatMul", "Gemm",   "MatMulQ", "Conv",      "BatchNormalization"}) {
    EXPECT_GT(coverage.ops[op], 0) << "no generated graph used " << op;
  }
  for (const char* pattern :
       {"Conv+BatchNormalization(+Relu)", "MatMul+Add(+Gelu)", "RMSNorm+Mul", "Silu+Mul (SwiGLU)"}) {
    EXPECT_GT(coverage.fusion_patterns[pattern], 0) << "no generated graph fused " << pattern;
  }
  EXPECT_GT(coverage.multi_stream_plans, 0);
  EXPECT_GT(coverage.arena_plans, 0);
  EXPECT_GT(coverage.pool_plans, 0);
}

// Minimal repros of what the random graphs found, kept as fixed graphs so a fix is checked directly.
// RMSNorm → Mul by a weight of shape [1, N]: docs/ops.md ("a weight broadcast over the last axis") and the fusion
// pass accept it, so planning with fusion on must succeed and match the reference.
TEST_F(DifferentialTest, RMSNormTimesRowWeightFusesAndMatches) {
  RandomGraph rg;
  rg.seed = 0;
  const std::vector<float> w(8, 0.5f);
  ASSERT_TRUE(rg.graph.add_input("x", {DType::kF32, {2, 8}}).ok());
  ASSERT_TRUE(
      rg.graph.add_initializer("w", {DType::kF32, {1, 8}}, graph::WeightData::copy_of(HostTensor::f32({1, 8}, w).bytes))
          .ok());
  ASSERT_TRUE(
      rg.graph.add_node("norm", "RMSNorm", std::vector<std::string>{"x"}, std::vector<std::string>{"n"}, {}, "hxrt")
          .ok());
  ASSERT_TRUE(
      rg.graph.add_node("scale", "Mul", std::vector<std::string>{"n", "w"}, std::vector<std::string>{"y"}, {}, "", 14)
          .ok());
  ASSERT_TRUE(rg.graph.mark_output("y").ok());
  rg.inputs.push_back({"x", {DType::kF32, {2, 8}}, InputSpec::Kind::kFloat, -1.0, 1.0});
  rg.bindings = {{}};
  rg.tolerance = {{"n", kF32Tolerance}, {"y", kF32Tolerance}};
  Coverage coverage;
  EXPECT_EQ(check_graph(rg, coverage), "");
}

TEST(RandomGraphTest, SameSeedSameGraph) {
  const RandomGraph a = generate_random_graph(7), b = generate_random_graph(7);
  EXPECT_EQ(a.graph.to_string(), b.graph.to_string());
  EXPECT_EQ(a.bindings, b.bindings);
  EXPECT_NE(a.graph.to_string(), generate_random_graph(8).graph.to_string());
  for (uint64_t seed = 0; seed < 50; ++seed) {
    const RandomGraph g = generate_random_graph(seed);
    EXPECT_GE(g.graph.num_nodes(), 5) << seed;
    EXPECT_LE(g.graph.num_nodes(), 48) << seed;  // 40 plus the squashing Tanh / input-consuming Relu extras
    EXPECT_TRUE(g.graph.validate().ok()) << seed << ": " << g.graph.validate().to_string();
  }
}

// The reference on small cases worked out by hand, so that a disagreement is not blamed on the wrong side.
class ReferenceTest : public testing::Test {
 protected:
  graph::Graph g_{"hand"};
  HostTensors inputs_;
  void input(const std::string& name, HostTensor t) {
    ASSERT_TRUE(g_.add_input(name, {t.dtype, graph::SymShape::from(t.shape)}).ok());
    inputs_[name] = std::move(t);
  }
  void constant(const std::string& name, const HostTensor& t) {
    ASSERT_TRUE(
        g_.add_initializer(name, {t.dtype, graph::SymShape::from(t.shape)}, graph::WeightData::copy_of(t.bytes)).ok());
  }
  void node(const std::string& op, std::vector<std::string> in, const std::string& out,
            graph::AttributeMap attrs = {}) {
    ASSERT_TRUE(g_.add_node("n_" + out, op, in, std::vector<std::string>{out}, std::move(attrs)).ok());
  }
  RefTensor eval(const std::string& name) {
    Result<RefValues> values = evaluate_reference(g_, inputs_);
    EXPECT_TRUE(values.ok()) << values.status().to_string();
    return values.ok() ? values->at(name) : RefTensor{};
  }
};

TEST_F(ReferenceTest, HandWorkedCases) {
  input("x", HostTensor::f32({5}, {0, 1, 2, 3, 4}));
  constant("starts", HostTensor::i64({1}, {-1}));
  constant("ends", HostTensor::i64({1}, {std::numeric_limits<int64_t>::min()}));
  constant("steps", HostTensor::i64({1}, {-2}));
  constant("axes", HostTensor::i64({1}, {0}));
  node("Slice", {"x", "starts", "ends", "axes", "steps"}, "sliced");
  EXPECT_EQ(eval("sliced").data, (std::vector<double>{4, 2, 0}));

  constant("idx", HostTensor::i64({2}, {-1, 0}));
  node("Gather", {"x", "idx"}, "gathered");
  EXPECT_EQ(eval("gathered").data, (std::vector<double>{4, 0}));

  // [1, 1, 3, 3] image 1..9, 2x2 kernel of ones, pads 1 on top/left only, stride 2 → [[1, 2+3], [4+7, 5+6+8+9]].
  input("img", HostTensor::f32({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}));
  constant("k", HostTensor::f32({1, 1, 2, 2}, {1, 1, 1, 1}));
  graph::AttributeMap conv;
  conv.set("pads", std::vector<int64_t>{1, 1, 0, 0});
  conv.set("strides", std::vector<int64_t>{2, 2});
  node("Conv", {"img", "k"}, "conv", conv);
  const RefTensor c = eval("conv");
  EXPECT_EQ(c.dims, (std::vector<int64_t>{1, 1, 2, 2}));
  EXPECT_EQ(c.data, (std::vector<double>{1, 5, 11, 28}));

  // RoPE on one token at position 1, one head of 4 dims; normal pairs (0,1),(2,3); neox pairs (0,2),(1,3).
  input("q", HostTensor::f32({1, 1, 4}, {1, 0, 1, 0}));
  input("pos", HostTensor::i64({1}, {1}));
  graph::AttributeMap rope;
  rope.set("theta", 100.0);
  node("RoPE", {"q", "pos"}, "roped", rope);
  const RefTensor r = eval("roped");
  const double a0 = 1.0, a1 = std::pow(100.0, -0.5);
  EXPECT_NEAR(r.data[0], std::cos(a0), 1e-12);
  EXPECT_NEAR(r.data[1], std::sin(a0), 1e-12);
  EXPECT_NEAR(r.data[2], std::cos(a1), 1e-12);
  EXPECT_NEAR(r.data[3], std::sin(a1), 1e-12);

  // q4_0: d = 1, byte 0 = 0x9F → element 0 = 0xF - 8 = 7, element 16 = 0x9 - 8 = 1.
  std::vector<std::byte> block(18, std::byte{0x88});
  block[0] = std::byte{0x00};
  block[1] = std::byte{0x3C};  // f16 1.0
  block[2] = std::byte{0x9F};
  constant("w", HostTensor::raw(DType::kQ4_0, {1, 32}, block));
  std::vector<float> ones(32, 1.0f);
  input("a", HostTensor::f32({32}, ones));
  node("MatMulQ", {"a", "w"}, "mq");
  EXPECT_EQ(eval("mq").data, (std::vector<double>{8}));
}

}  // namespace
}  // namespace hxrt::differential
