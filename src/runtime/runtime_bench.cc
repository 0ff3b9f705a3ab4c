// Runtime benchmarks (Google Benchmark; run by hand, never by CTest):
//   build/src/runtime/runtime_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
//   BM_DispatchPerNode     a 10,000-node chain of tiny ops (Relu / Add on f32[16]): the executor's cost per node,
//                          for the arena plan (static offsets) and the pool plan (refcounted blocks); ns_per_node.
//   BM_Replay              the same chain captured once and replayed (Note [Captured runs]): ns_per_node.
//   BM_ProfilerOverhead    the same chain with the profiler off and on (arena and pool plans): ns_per_launch; the
//                          difference is what profiling costs per launch (events, records, pool events).
//   BM_TwoBranches         two independent chains of 512x512 MatMuls joined at the end, max_streams 1 vs 2.
//   BM_MlpBlock            MatMul + Add(bias) + Gelu at [64, 576] x [576, 1536], fused vs unfused.
//   BM_TransformerBlock    a static decoder-block-like graph run with the arena vs the pool; counters give the
//                          planned arena peak, the naive sum of intermediate sizes, and the pool's measured peak.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "hxrt/hal/driver.h"
#include "hxrt/kernels/builtin_registries.h"
#include "hxrt/runtime/executor.h"

namespace hxrt::runtime {
namespace {

// Registries and a CPU session, plus small helpers to build graphs.
class Bench {
 public:
  Bench() {
    Result<std::unique_ptr<ops::Registries>> registries = kernels::make_builtin_registries({.opencl_kernels = false});
    check(registries.status(), "registries");
    registries_ = std::move(registries).value();
    check(hal::register_builtin_drivers(drivers_), "drivers");
    session_ = std::move(Session::create(drivers_, "cpu")).value();
  }

  std::unique_ptr<Executor> compile(graph::Graph graph, const PlanOptions& options) {
    Result<std::unique_ptr<ExecutionPlan>> plan = ExecutionPlan::build(
        std::move(graph), session_->device().info(), PlanContext::of(*registries_), options);
    check(plan.status(), "plan");
    Result<std::unique_ptr<Executor>> executor =
        Executor::create(*session_, std::shared_ptr<const ExecutionPlan>(std::move(plan).value()));
    check(executor.status(), "executor");
    return std::move(executor).value();
  }

  void node(graph::Graph& g, const std::string& op, const std::vector<std::string>& inputs, const std::string& out,
            graph::AttributeMap attrs = {}, const std::string& domain = "") {
    check(g.add_node("n." + out, op, inputs, std::vector<std::string>{out}, std::move(attrs), domain).status(), out);
  }
  // A random f32 weight (never zero) scaled by `scale`.
  void weight(graph::Graph& g, const std::string& name, const Shape& shape, float scale = 1.0f) {
    HostTensor t = HostTensor::random_f32(shape, rng_, -scale, scale);
    check(g.add_initializer(name, {DType::kF32, graph::SymShape::from(shape)}, graph::WeightData::copy_of(t.bytes))
              .status(),
          name);
  }
  void shape_constant(graph::Graph& g, const std::string& name, const std::vector<int64_t>& dims) {
    const HostTensor t = HostTensor::i64({static_cast<int64_t>(dims.size())}, dims);
    check(g.add_initializer(name, {DType::kI64, graph::SymShape::from(t.shape)}, graph::WeightData::copy_of(t.bytes))
              .status(),
          name);
  }
  HostTensor random(const Shape& shape) { return HostTensor::random_f32(shape, rng_); }
  Session& session() { return *session_; }

  static void check(const Status& status, const std::string& what) {
    if (!status.ok()) {
      std::fprintf(stderr, "runtime_bench: %s: %s\n", what.c_str(), status.to_string().c_str());
      std::abort();
    }
  }

 private:
  std::unique_ptr<ops::Registries> registries_;
  hal::DriverRegistry drivers_;
  std::unique_ptr<Session> session_;
  std::mt19937 rng_{1234};
};

void run_or_skip(benchmark::State& state, Executor& executor, const TensorMap& inputs) {
  Result<TensorMap> out = executor.run(inputs);
  if (!out.ok()) state.SkipWithError(out.status().to_string().c_str());
  benchmark::DoNotOptimize(out);
}

// ---- (i) dispatch overhead --------------------------------------------------------------------------------------

constexpr int kChainNodes = 10000;

// x f32[16] → Relu → Add(b) → Relu → Add(b) → ... (kChainNodes nodes).
graph::Graph tiny_chain(Bench& bench) {
  graph::Graph g("tiny_chain");
  Bench::check(g.add_input("x", {DType::kF32, {16}}).status(), "x");
  bench.weight(g, "b", {16});
  std::string prev = "x";
  for (int i = 0; i < kChainNodes; ++i) {
    const std::string out = fmt::format("t{}", i);
    if (i % 2 == 0) {
      bench.node(g, "Relu", {prev}, out);
    } else {
      bench.node(g, "Add", {prev, "b"}, out);
    }
    prev = out;
  }
  Bench::check(g.mark_output(prev), "output");
  return g;
}

// The chain planned unfused on one stream, with the arena (static offsets) or the pool.
std::unique_ptr<Executor> chain_executor(Bench& bench, bool arena) {
  PlanOptions options;
  options.fuse = false;
  options.max_streams = 1;
  options.static_memory_plan = arena;
  return bench.compile(tiny_chain(bench), options);
}

// Times `body` over the benchmark's iterations and reports ns_per_node of the chain; range(0) names the plan.
template <typename Body>
void time_per_node(benchmark::State& state, Body&& body) {
  body();  // warm-up: tilings cached, pool segments allocated
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) body();
  const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
  state.counters["ns_per_node"] = ns / static_cast<double>(state.iterations()) / kChainNodes;
  state.SetLabel(state.range(0) == 1 ? "arena" : "pool");
}

// range(0): 1 = arena plan, 0 = pool plan.
void BM_DispatchPerNode(benchmark::State& state) {
  Bench bench;
  std::unique_ptr<Executor> executor = chain_executor(bench, state.range(0) == 1);
  if (executor->plan().memory().uses_arena != (state.range(0) == 1)) {
    state.SkipWithError("the plan did not use the requested memory mode");
    return;
  }
  const TensorMap inputs = {{"x", bench.random({16})}};
  time_per_node(state, [&] { run_or_skip(state, *executor, inputs); });
}
BENCHMARK(BM_DispatchPerNode)->Arg(1)->Arg(0)->ArgName("arena")->Unit(benchmark::kMillisecond)->UseRealTime();

// The same chain captured once and replayed (Note [Captured runs]): what a node costs when nothing per launch
// happens on the host; range(0) as above.
void BM_Replay(benchmark::State& state) {
  Bench bench;
  std::unique_ptr<Executor> executor = chain_executor(bench, state.range(0) == 1);
  const TensorMap inputs = {{"x", bench.random({16})}};
  Result<std::unique_ptr<Executor::Captured>> captured = executor->capture(inputs);
  if (!captured.ok()) {
    state.SkipWithError(captured.status().to_string().c_str());
    return;
  }
  time_per_node(state, [&] {
    Result<TensorMap> out = executor->replay(**captured, inputs);
    if (!out.ok()) state.SkipWithError(out.status().to_string().c_str());
  });
}
BENCHMARK(BM_Replay)->Arg(1)->Arg(0)->ArgName("arena")->Unit(benchmark::kMillisecond)->UseRealTime();

// range(0): 1 = profiled (RunOptions::profile), 0 = not; range(1): 1 = arena plan, 0 = pool plan. The profiler is
// cleared between runs (untimed) so its record cap never drops a run.
void BM_ProfilerOverhead(benchmark::State& state) {
  Bench bench;
  std::unique_ptr<Executor> executor = chain_executor(bench, state.range(1) == 1);
  const TensorMap inputs = {{"x", bench.random({16})}};
  const RunOptions run_options{.profile = state.range(0) == 1};
  Profiler& profiler = bench.session().profiler();
  Bench::check(executor->run(inputs, run_options).status(), "warm-up");
  double ns = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    Result<TensorMap> out = executor->run(inputs, run_options);
    ns += std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
    if (!out.ok()) state.SkipWithError(out.status().to_string().c_str());
    state.PauseTiming();
    profiler.clear();
    state.ResumeTiming();
  }
  state.counters["ns_per_launch"] = ns / static_cast<double>(state.iterations()) / kChainNodes;
  state.SetLabel(fmt::format("{}, {}", state.range(0) == 1 ? "profiled" : "not profiled",
                             state.range(1) == 1 ? "arena" : "pool"));
}
BENCHMARK(BM_ProfilerOverhead)
    ->Args({0, 1})
    ->Args({1, 1})
    ->Args({0, 0})
    ->Args({1, 0})
    ->ArgNames({"profile", "arena"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// ---- (ii) multi-stream speedup ------------------------------------------------------------------------------------

constexpr int64_t kSquare = 512;
constexpr int kChainDepth = 3;

// x f32[512, 512]; branch a and branch b each: (MatMul → Relu) x kChainDepth with their own weights; y = a + b.
graph::Graph two_branches(Bench& bench) {
  graph::Graph g("two_branches");
  Bench::check(g.add_input("x", {DType::kF32, {kSquare, kSquare}}).status(), "x");
  const float scale = 1.0f / std::sqrt(static_cast<float>(kSquare));
  for (const char* branch : {"a", "b"}) {
    std::string prev = "x";
    for (int i = 0; i < kChainDepth; ++i) {
      const std::string w = fmt::format("{}.w{}", branch, i), mm = fmt::format("{}.mm{}", branch, i);
      const std::string act = fmt::format("{}.act{}", branch, i);
      bench.weight(g, w, {kSquare, kSquare}, scale);
      bench.node(g, "MatMul", {prev, w}, mm);
      bench.node(g, "Relu", {mm}, act);
      prev = act;
    }
  }
  bench.node(g, "Add", {fmt::format("a.act{}", kChainDepth - 1), fmt::format("b.act{}", kChainDepth - 1)}, "y");
  Bench::check(g.mark_output("y"), "y");
  return g;
}

// range(0): max_streams.
void BM_TwoBranches(benchmark::State& state) {
  Bench bench;
  PlanOptions options;
  options.max_streams = static_cast<int>(state.range(0));
  std::unique_ptr<Executor> executor = bench.compile(two_branches(bench), options);
  const TensorMap inputs = {{"x", bench.random({kSquare, kSquare})}};
  run_or_skip(state, *executor, inputs);
  for (auto _ : state) run_or_skip(state, *executor, inputs);
  state.counters["streams_used"] = executor->plan().num_streams();
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * 2 * kChainDepth * kSquare * kSquare * kSquare / 1e9,
                                                benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_TwoBranches)->Arg(1)->Arg(2)->ArgName("max_streams")->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- (iii) fused vs unfused MLP block ---------------------------------------------------------------------------

constexpr int64_t kTokens = 64, kModel = 576, kHidden = 1536;

// x f32[64, 576] · W f32[576, 1536] + b f32[1536] → Gelu.
graph::Graph mlp_block(Bench& bench) {
  graph::Graph g("mlp_block");
  Bench::check(g.add_input("x", {DType::kF32, {kTokens, kModel}}).status(), "x");
  bench.weight(g, "w", {kModel, kHidden}, 1.0f / std::sqrt(static_cast<float>(kModel)));
  bench.weight(g, "b", {kHidden});
  bench.node(g, "MatMul", {"x", "w"}, "h");
  bench.node(g, "Add", {"h", "b"}, "hb");
  bench.node(g, "Gelu", {"hb"}, "y");
  Bench::check(g.mark_output("y"), "y");
  return g;
}

// range(0): 1 = fused, 0 = unfused.
void BM_MlpBlock(benchmark::State& state) {
  Bench bench;
  PlanOptions options;
  options.fuse = state.range(0) == 1;
  std::unique_ptr<Executor> executor = bench.compile(mlp_block(bench), options);
  const TensorMap inputs = {{"x", bench.random({kTokens, kModel})}};
  run_or_skip(state, *executor, inputs);
  for (auto _ : state) run_or_skip(state, *executor, inputs);
  state.counters["launches_per_run"] = static_cast<double>(executor->plan().objects().size());
  state.SetLabel(options.fuse ? "fused" : "unfused");
}
BENCHMARK(BM_MlpBlock)->Arg(1)->Arg(0)->ArgName("fused")->Unit(benchmark::kMicrosecond)->UseRealTime();

// ---- (iv) planned arena vs naive allocation -----------------------------------------------------------------------

constexpr int64_t kHeads = 9, kHeadDim = kModel / kHeads;

// A pre-norm decoder block with static shapes: x f32[64, 576], 9 heads of 64, SwiGLU MLP of 1536.
graph::Graph transformer_block(Bench& bench) {
  graph::Graph g("transformer_block");
  Bench::check(g.add_input("x", {DType::kF32, {kTokens, kModel}}).status(), "x");
  const float s_model = 1.0f / std::sqrt(static_cast<float>(kModel));
  const float s_hidden = 1.0f / std::sqrt(static_cast<float>(kHidden));
  for (const char* w : {"wq", "wk", "wv", "wo"}) bench.weight(g, w, {kModel, kModel}, s_model);
  bench.weight(g, "w_gate", {kModel, kHidden}, s_model);
  bench.weight(g, "w_up", {kModel, kHidden}, s_model);
  bench.weight(g, "w_down", {kHidden, kModel}, s_hidden);
  bench.weight(g, "norm1", {kModel});
  bench.weight(g, "norm2", {kModel});
  bench.weight(g, "scale", {1}, 1.0f / std::sqrt(static_cast<float>(kHeadDim)));
  bench.shape_constant(g, "heads", {kTokens, kHeads, kHeadDim});
  bench.shape_constant(g, "merged", {kTokens, kModel});
  graph::AttributeMap to_heads;  // [tokens, heads, head_dim] → [heads, tokens, head_dim]
  to_heads.set("perm", std::vector<int64_t>{1, 0, 2});
  graph::AttributeMap k_transposed;  // [tokens, heads, head_dim] → [heads, head_dim, tokens]
  k_transposed.set("perm", std::vector<int64_t>{1, 2, 0});

  bench.node(g, "RMSNorm", {"x"}, "xn", {}, "hxrt");  // [64, 576]
  bench.node(g, "Mul", {"xn", "norm1"}, "xw");        // [64, 576]
  for (const char* p : {"q", "k", "v"}) {
    bench.node(g, "MatMul", {"xw", fmt::format("w{}", p)}, p);      // [64, 576]
    bench.node(g, "Reshape", {p, "heads"}, fmt::format("{}h", p));  // [64, 9, 64]
  }
  bench.node(g, "Transpose", {"qh"}, "qt", to_heads);       // [9, 64, 64]
  bench.node(g, "Transpose", {"kh"}, "kt", k_transposed);   // [9, 64, 64] (head_dim, tokens)
  bench.node(g, "Transpose", {"vh"}, "vt", to_heads);       // [9, 64, 64]
  bench.node(g, "MatMul", {"qt", "kt"}, "scores");          // [9, 64, 64]
  bench.node(g, "Mul", {"scores", "scale"}, "scaled");      // [9, 64, 64]
  bench.node(g, "Softmax", {"scaled"}, "probs");            // [9, 64, 64]
  bench.node(g, "MatMul", {"probs", "vt"}, "ctx");          // [9, 64, 64]
  bench.node(g, "Transpose", {"ctx"}, "ctx_t", to_heads);   // [64, 9, 64]
  bench.node(g, "Reshape", {"ctx_t", "merged"}, "ctx_m");   // [64, 576]
  bench.node(g, "MatMul", {"ctx_m", "wo"}, "attn");         // [64, 576]
  bench.node(g, "Add", {"x", "attn"}, "h1");                // [64, 576]
  bench.node(g, "RMSNorm", {"h1"}, "hn", {}, "hxrt");       // [64, 576]
  bench.node(g, "Mul", {"hn", "norm2"}, "hw");              // [64, 576]
  bench.node(g, "MatMul", {"hw", "w_gate"}, "gate");        // [64, 1536]
  bench.node(g, "MatMul", {"hw", "w_up"}, "up");            // [64, 1536]
  bench.node(g, "Silu", {"gate"}, "gate_act", {}, "hxrt");  // [64, 1536]
  bench.node(g, "Mul", {"gate_act", "up"}, "mlp");          // [64, 1536]
  bench.node(g, "MatMul", {"mlp", "w_down"}, "down");       // [64, 576]
  bench.node(g, "Add", {"h1", "down"}, "y");                // [64, 576]
  Bench::check(g.mark_output("y"), "y");
  return g;
}

// range(0): 1 = arena plan, 0 = pool plan.
void BM_TransformerBlock(benchmark::State& state) {
  Bench bench;
  PlanOptions options;
  options.static_memory_plan = state.range(0) == 1;
  std::unique_ptr<Executor> executor = bench.compile(transformer_block(bench), options);
  const TensorMap inputs = {{"x", bench.random({kTokens, kModel})}};
  run_or_skip(state, *executor, inputs);
  for (auto _ : state) run_or_skip(state, *executor, inputs);
  const MemoryPlanSummary& memory = executor->plan().memory();
  state.counters["naive_bytes"] = static_cast<double>(memory.naive_bytes);
  state.counters["arena_bytes"] = static_cast<double>(memory.arena_bytes);
  state.counters["pool_peak_bytes"] = static_cast<double>(executor->stats().peak_intermediate_bytes);
  state.counters["streams"] = executor->plan().num_streams();
  state.SetLabel(memory.uses_arena ? "arena" : "pool");
}
BENCHMARK(BM_TransformerBlock)->Arg(1)->Arg(0)->ArgName("arena")->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace hxrt::runtime

BENCHMARK_MAIN();
