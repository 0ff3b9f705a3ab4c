#include "hxrt/runtime/executor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <future>
#include <random>
#include <set>

#include "hxrt/base/check.h"
#include "hxrt/kernels/builtin_registries.h"

namespace hxrt::runtime {
namespace {

using graph::Dim;

graph::WeightData weight_of(const HostTensor& t) { return graph::WeightData::copy_of(t.bytes); }

// The CPU kernels plus a custom Relu that always fails and outranks the built-in one.
std::unique_ptr<ops::Registries> registries_with_failing_relu() {
  std::unique_ptr<ops::Registries> bundle =
      std::move(kernels::make_builtin_registries({.opencl_kernels = false})).value();
  ops::KernelDef failing;
  failing.op_type = "Relu";
  failing.name = "BrokenRelu";
  failing.kind = ops::KernelKind::kCustom;
  failing.priority = 1000;
  failing.launch = ops::cpu_launch("BrokenRelu", [](const ops::CpuComputeContext&) {
    return internal_error("injected failure");
  });
  HXRT_CHECK(bundle->kernels.add(std::move(failing)).ok(), "adding BrokenRelu");
  return bundle;
}

class ExecutorTest : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(hal::register_builtin_drivers(drivers_).ok());
    session_ = std::move(Session::create(drivers_, "cpu")).value();
  }
  PlanContext context() const { return PlanContext::of(*registries_); }

  Result<std::unique_ptr<Executor>> compile(graph::Graph graph, const PlanOptions& options = {}) {
    HXRT_ASSIGN_OR_RETURN(std::unique_ptr<ExecutionPlan> plan,
                          ExecutionPlan::build(std::move(graph), session_->device().info(), context(), options));
    plan_text_ = plan->describe();
    return Executor::create(*session_, std::shared_ptr<const ExecutionPlan>(std::move(plan)));
  }

  void add_node(graph::Graph& g, const std::string& name, const std::string& op, std::vector<std::string> in,
                std::string out, graph::AttributeMap attrs = {}, const std::string& domain = "") {
    const int version = schemas_.find(op, domain, 0).value()->since_version;
    ASSERT_TRUE(g.add_node(name, op, in, std::vector<std::string>{out}, std::move(attrs), domain, version).ok()) << name;
  }

  // y = relu(x·W1 + b1)·W2 + b2 with x f32[batch, 8].
  graph::Graph mlp(const Dim& batch) {
    graph::Graph g("mlp");
    EXPECT_TRUE(g.add_input("x", {DType::kF32, {batch, 8}}).ok());
    EXPECT_TRUE(g.add_initializer("w1", {DType::kF32, {8, 16}}, weight_of(w1_)).ok());
    EXPECT_TRUE(g.add_initializer("b1", {DType::kF32, {16}}, weight_of(b1_)).ok());
    EXPECT_TRUE(g.add_initializer("w2", {DType::kF32, {16, 4}}, weight_of(w2_)).ok());
    EXPECT_TRUE(g.add_initializer("b2", {DType::kF32, {4}}, weight_of(b2_)).ok());
    add_node(g, "fc1", "MatMul", {"x", "w1"}, "h1");
    add_node(g, "bias1", "Add", {"h1", "b1"}, "h2");
    add_node(g, "act", "Relu", {"h2"}, "h3");
    add_node(g, "fc2", "MatMul", {"h3", "w2"}, "h4");
    add_node(g, "bias2", "Add", {"h4", "b2"}, "y");
    EXPECT_TRUE(g.mark_output("y").ok());
    return g;
  }
  std::vector<double> mlp_reference(const HostTensor& x) const {
    const std::vector<float> xs = x.to_f32(), a = w1_.to_f32(), b = b1_.to_f32(), c = w2_.to_f32(), d = b2_.to_f32();
    const int64_t n = x.shape.dim(0);
    std::vector<double> y(static_cast<size_t>(n * 4));
    for (int64_t r = 0; r < n; ++r) {
      std::vector<double> h(16);
      for (int j = 0; j < 16; ++j) {
        double s = b[static_cast<size_t>(j)];
        for (int k = 0; k < 8; ++k) s += double{xs[static_cast<size_t>(r * 8 + k)]} * a[static_cast<size_t>(k * 16 + j)];
        h[static_cast<size_t>(j)] = std::max(0.0, s);
      }
      for (int j = 0; j < 4; ++j) {
        double s = d[static_cast<size_t>(j)];
        for (int k = 0; k < 16; ++k) s += h[static_cast<size_t>(k)] * c[static_cast<size_t>(k * 4 + j)];
        y[static_cast<size_t>(r * 4 + j)] = s;
      }
    }
    return y;
  }
  static void expect_close(const std::vector<float>& actual, const std::vector<double>& expected, double tol = 1e-5) {
    ASSERT_EQ(actual.size(), expected.size());
    for (size_t i = 0; i < actual.size(); ++i) ASSERT_NEAR(actual[i], expected[i], tol * (1 + std::abs(expected[i]))) << i;
  }

  std::mt19937 rng_{42};
  HostTensor w1_ = HostTensor::random_f32({8, 16}, rng_);
  HostTensor b1_ = HostTensor::random_f32({16}, rng_);
  HostTensor w2_ = HostTensor::random_f32({16, 4}, rng_);
  HostTensor b2_ = HostTensor::random_f32({4}, rng_);
  std::unique_ptr<ops::Registries> registries_ =
      std::move(kernels::make_builtin_registries({.opencl_kernels = false})).value();
  ops::OpSchemaRegistry& schemas_ = registries_->schemas;
  ops::KernelRegistry& kernels_ = registries_->kernels;
  ops::FusionRegistry& fusions_ = registries_->fusions;
  hal::DriverRegistry drivers_;
  std::unique_ptr<Session> session_;
  std::string plan_text_;
};

TEST_F(ExecutorTest, DynamicBatchRunsWithoutReplanningAndCachesTilings) {
  Result<std::unique_ptr<Executor>> executor = compile(mlp(Dim::symbol("batch")));
  ASSERT_TRUE(executor.ok()) << executor.status().to_string();
  EXPECT_NE(plan_text_.find("fusion"), std::string::npos) << plan_text_;
  EXPECT_NE(plan_text_.find("MatMulBias"), std::string::npos) << plan_text_;
  EXPECT_NE(plan_text_.find("pool with dependency-counted release"), std::string::npos) << plan_text_;
  for (int64_t batch : {1, 5, 1, 5, 33, 33}) {  // the last run reuses the bindings' shapes (Note [Bound shapes])
    const HostTensor x = HostTensor::random_f32({batch, 8}, rng_);
    Result<TensorMap> out = (*executor)->run({{"x", x}});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    const HostTensor& y = out->at("y");
    EXPECT_EQ(y.shape, (Shape{batch, 4}));
    expect_close(y.to_f32(), mlp_reference(x));
    EXPECT_EQ((*executor)->last_bindings().at("batch"), batch);
  }
  const ExecutorStats& stats = (*executor)->stats();
  EXPECT_EQ(stats.runs, 6u);
  EXPECT_EQ(stats.tiling_cache_misses, 3u * 3u) << "3 fused nodes x 3 distinct batch sizes";
  EXPECT_EQ(stats.tiling_cache_hits, 3u * 3u);
  EXPECT_EQ(session_->pool().stats().active_blocks.current, 0) << "every intermediate and output returned";
}

TEST_F(ExecutorTest, TheTilingCacheIsBoundedAcrossEverNewShapes) {
  Result<std::unique_ptr<Executor>> executor = compile(mlp(Dim::symbol("batch")));
  ASSERT_TRUE(executor.ok()) << executor.status().to_string();
  // 3 fused nodes: three new entries per batch size. The run that starts with more than the capacity cached
  // empties the cache first.
  const int64_t sizes = static_cast<int64_t>(Executor::kTilingCacheCapacity / 3) + 2;
  for (int64_t batch = 1; batch <= sizes; ++batch) {
    Result<TensorMap> out = (*executor)->run({{"x", HostTensor::random_f32({batch, 8}, rng_)}});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
  }
  EXPECT_EQ((*executor)->stats().tiling_cache_clears, 1u);
  // A shape cached before the clear is computed again, and right.
  const HostTensor x = HostTensor::random_f32({3, 8}, rng_);
  Result<TensorMap> out = (*executor)->run({{"x", x}});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  expect_close(out->at("y").to_f32(), mlp_reference(x));
  EXPECT_EQ((*executor)->stats().tiling_cache_misses, 3u * static_cast<uint64_t>(sizes) + 3u);
}

TEST_F(ExecutorTest, StaticShapesUseThePlannedArena) {
  PlanOptions unfused;
  unfused.fuse = false;
  Result<std::unique_ptr<Executor>> executor = compile(mlp(Dim(3)), unfused);
  ASSERT_TRUE(executor.ok()) << executor.status().to_string();
  const MemoryPlanSummary& memory = (*executor)->plan().memory();
  EXPECT_TRUE(memory.uses_arena);
  EXPECT_EQ(memory.intermediates, 4);
  EXPECT_LT(memory.arena_bytes, memory.naive_bytes) << plan_text_;
  const HostTensor x = HostTensor::random_f32({3, 8}, rng_);
  Result<TensorMap> out = (*executor)->run({{"x", x}});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  expect_close(out->at("y").to_f32(), mlp_reference(x));
}

TEST_F(ExecutorTest, IndependentBranchesRunOnSeparateStreamsWithTheSameResult) {
  auto two_branches = [&] {
    graph::Graph g("branches");
    EXPECT_TRUE(g.add_input("x", {DType::kF32, {Dim::symbol("n"), 8}}).ok());
    EXPECT_TRUE(g.add_initializer("wa", {DType::kF32, {8, 16}}, weight_of(w1_)).ok());
    EXPECT_TRUE(g.add_initializer("wb", {DType::kF32, {8, 16}}, weight_of(w1_)).ok());
    add_node(g, "a1", "MatMul", {"x", "wa"}, "a");
    add_node(g, "a2", "Relu", {"a"}, "ar");
    add_node(g, "b1", "MatMul", {"x", "wb"}, "b");
    add_node(g, "b2", "Sigmoid", {"b"}, "bs");
    add_node(g, "join", "Mul", {"ar", "bs"}, "y");
    EXPECT_TRUE(g.mark_output("y").ok());
    return g;
  };
  PlanOptions single;
  single.max_streams = 1;
  Result<std::unique_ptr<Executor>> one = compile(two_branches(), single);
  ASSERT_TRUE(one.ok()) << one.status().to_string();
  PlanOptions several;
  several.max_streams = 4;  // explicit: a CPU plan left at kAutoStreams takes one (Note [Streams per device])
  Result<std::unique_ptr<Executor>> many = compile(two_branches(), several);
  ASSERT_TRUE(many.ok()) << many.status().to_string();
  EXPECT_EQ((*one)->plan().num_streams(), 1);
  EXPECT_EQ((*many)->plan().num_streams(), 2) << plan_text_;
  EXPECT_GE((*many)->plan().num_events(), 1) << plan_text_;
  for (int64_t n : {1, 7}) {
    const HostTensor x = HostTensor::random_f32({n, 8}, rng_);
    Result<TensorMap> a = (*one)->run({{"x", x}});
    Result<TensorMap> b = (*many)->run({{"x", x}});
    ASSERT_TRUE(a.ok() && b.ok()) << a.status().to_string() << b.status().to_string();
    EXPECT_EQ(a->at("y").bytes, b->at("y").bytes) << "same kernels, same order per value: bit-identical";
  }
}

// Note [Reshape aliasing]: Reshapes of a single-consumer intermediate share its memory, in the arena and the pool.
TEST_F(ExecutorTest, ReshapesOfSingleConsumerIntermediatesShareTheirInputsMemory) {
  auto shape_of = [](std::vector<int64_t> dims) {
    HostTensor t;
    t.dtype = DType::kI64;
    t.shape = Shape{static_cast<int64_t>(dims.size())};
    t.bytes.resize(dims.size() * sizeof(int64_t));
    std::memcpy(t.bytes.data(), dims.data(), t.bytes.size());
    return weight_of(t);
  };
  auto build = [&](const Dim& n) {
    graph::Graph g("aliases");
    EXPECT_TRUE(g.add_input("x", {DType::kF32, {n, 8}}).ok());
    EXPECT_TRUE(g.add_initializer("w1", {DType::kF32, {8, 16}}, weight_of(w1_)).ok());
    EXPECT_TRUE(g.add_initializer("to3d", {DType::kI64, {3}}, shape_of({0, 4, 4})).ok());
    EXPECT_TRUE(g.add_initializer("to2d", {DType::kI64, {2}}, shape_of({0, 16})).ok());
    add_node(g, "fc", "MatMul", {"x", "w1"}, "h");
    add_node(g, "split", "Reshape", {"h", "to3d"}, "h3");      // aliased: h has one consumer
    add_node(g, "merge", "Reshape", {"h3", "to2d"}, "h2");     // aliased: a chain shares h's block
    add_node(g, "act", "Relu", {"h2"}, "r");
    add_node(g, "again", "Reshape", {"r", "to3d"}, "r3");      // not aliased: r is also read by "neg"
    add_node(g, "neg", "Sigmoid", {"r"}, "s");
    add_node(g, "act3", "Relu", {"r3"}, "y");
    EXPECT_TRUE(g.mark_output("y").ok());
    EXPECT_TRUE(g.mark_output("s").ok());
    return g;
  };
  for (const bool dynamic : {false, true}) {
    for (const int streams : {1, 3}) {
      PlanOptions options;
      options.fuse = false;
      options.max_streams = streams;
      Result<std::unique_ptr<Executor>> executor = compile(build(dynamic ? Dim::symbol("n") : Dim(5)), options);
      ASSERT_TRUE(executor.ok()) << executor.status().to_string();
      const ExecutionPlan& plan = (*executor)->plan();
      EXPECT_EQ(plan.memory().aliased, 2) << plan_text_;
      EXPECT_NE(plan_text_.find("2 aliased by Reshape"), std::string::npos) << plan_text_;
      EXPECT_EQ(plan.memory().uses_arena, !dynamic);
      const HostTensor x = HostTensor::random_f32({5, 8}, rng_);
      Result<TensorMap> out = (*executor)->run({{"x", x}});
      ASSERT_TRUE(out.ok()) << out.status().to_string();
      const std::vector<float> xs = x.to_f32(), w = w1_.to_f32(), y = out->at("y").to_f32(), sg = out->at("s").to_f32();
      EXPECT_EQ(out->at("y").shape, (Shape{5, 4, 4}));
      for (int i = 0; i < 5; ++i) {
        for (int j = 0; j < 16; ++j) {
          double h = 0;
          for (int k = 0; k < 8; ++k) h += double{xs[static_cast<size_t>(i * 8 + k)]} * w[static_cast<size_t>(k * 16 + j)];
          const double r = std::max(0.0, h);
          ASSERT_NEAR(y[static_cast<size_t>(i * 16 + j)], r, 1e-5 * (1 + r));
          ASSERT_NEAR(sg[static_cast<size_t>(i * 16 + j)], 1.0 / (1.0 + std::exp(-r)), 1e-5);
        }
      }
      EXPECT_EQ(session_->pool().stats().active_blocks.current, dynamic ? 0 : 1) << "only the arena stays";
    }
  }
}

TEST_F(ExecutorTest, ARunThatTimesOutReturnsDeadlineExceededAndReleasesNothingStillInUse) {
  // Eight chained 1024x1024 MatMuls: far more work than a 1 ms timeout allows. The run must return
  // DeadlineExceeded without freeing memory that queued launches still use (this crashed: the queued launches ran
  // on freed run state), and the executor must run the graph correctly afterwards.
  graph::Graph g("chain");
  ASSERT_TRUE(g.add_input("x", {DType::kF32, {1024, 1024}}).ok());
  std::mt19937 rng(7);
  const HostTensor w = HostTensor::random_f32({1024, 1024}, rng, -0.03f, 0.03f);
  ASSERT_TRUE(g.add_initializer("w", {DType::kF32, {1024, 1024}}, weight_of(w)).ok());
  std::string previous = "x";
  for (int i = 0; i < 8; ++i) {
    const std::string out = i == 7 ? "y" : fmt::format("h{}", i);
    add_node(g, fmt::format("mm{}", i), "MatMul", {previous, "w"}, out);
    previous = out;
  }
  ASSERT_TRUE(g.mark_output("y").ok());
  PlanOptions options;
  options.static_memory_plan = false;  // intermediates from the pool: freeing them early is what went wrong
  Result<std::unique_ptr<Executor>> executor = compile(std::move(g), options);
  ASSERT_TRUE(executor.ok()) << executor.status().to_string();
  const HostTensor x = HostTensor::random_f32({1024, 1024}, rng);
  for (int attempt = 0; attempt < 3; ++attempt) {
    Result<TensorMap> timed_out = (*executor)->run({{"x", x}}, RunOptions{.timeout = std::chrono::milliseconds(1)});
    ASSERT_FALSE(timed_out.ok());
    EXPECT_EQ(timed_out.status().code(), StatusCode::kDeadlineExceeded) << timed_out.status().to_string();
  }
  Result<TensorMap> first = (*executor)->run({{"x", x}});
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  Result<TensorMap> second = (*executor)->run({{"x", x}});
  ASSERT_TRUE(second.ok()) << second.status().to_string();
  EXPECT_EQ(first->at("y"), second->at("y"));
  EXPECT_EQ(session_->pool().stats().active_blocks.current, 0) << "every run, timed out or not, returned its blocks";
}

TEST_F(ExecutorTest, ARunPastItsDeadlineReturnsAtItEvenWhileItsStreamIsStalled) {
  // Another command stalls the executor's stream: a host callback that holds it until the test lets go (30 s at
  // most). Runs with deadlines must return DeadlineExceeded while the stall still holds (Note [Runs past their
  // deadline]); once it ends, the stream is usable: the next run gives the answer of a run before the stall and
  // every pool block it took comes back.
  Result<std::unique_ptr<Executor>> executor = compile(mlp(Dim::symbol("batch")));
  ASSERT_TRUE(executor.ok()) << executor.status().to_string();
  const HostTensor x = HostTensor::random_f32({4, 8}, rng_);
  Result<TensorMap> before = (*executor)->run({{"x", x}});
  ASSERT_TRUE(before.ok()) << before.status().to_string();
  const int64_t blocks = session_->pool().stats().active_blocks.current;

  std::promise<void> let_go;
  std::shared_future<void> released = let_go.get_future().share();
  auto stall_over = std::make_shared<std::atomic<bool>>(false);
  ASSERT_TRUE((*executor)->stream().host_callback([released, stall_over](const Status&) {
    released.wait_for(std::chrono::seconds(30));
    stall_over->store(true);
  }).ok());
  for (int attempt = 0; attempt < 2; ++attempt) {  // the second finds the stream still running the stall
    HostTensor copy = x;  // the caller's input, gone once the run returns
    Result<TensorMap> late = (*executor)->run({{"x", copy}}, RunOptions{.timeout = std::chrono::milliseconds(100)});
    copy.bytes.clear();
    copy.bytes.shrink_to_fit();
    ASSERT_FALSE(late.ok());
    EXPECT_EQ(late.status().code(), StatusCode::kDeadlineExceeded) << late.status().to_string();
    EXPECT_FALSE(stall_over->load()) << "attempt " << attempt << " returned only when the stall ended";
  }
  let_go.set_value();
  Result<TensorMap> after = (*executor)->run({{"x", x}});
  ASSERT_TRUE(after.ok()) << after.status().to_string();
  EXPECT_TRUE(stall_over->load());
  EXPECT_EQ(after->at("y"), before->at("y"));
  EXPECT_EQ(session_->pool().stats().active_blocks.current, blocks);
  EXPECT_TRUE((*executor)->stream().status().ok());
}

TEST_F(ExecutorTest, BadBindingsNameTheInputAndAxis) {
  Result<std::unique_ptr<Executor>> executor = compile(mlp(Dim::symbol("batch")));
  ASSERT_TRUE(executor.ok());
  struct Case {
    TensorMap inputs;
    std::string expected;
  };
  std::vector<Case> cases;
  cases.push_back({{}, "missing input 'x'"});
  cases.push_back({{{"x", HostTensor::random_f32({2, 7}, rng_)}}, "input 'x' axis 1: expected 8, got 7"});
  cases.push_back({{{"x", HostTensor::random_f32({2, 8, 1}, rng_)}}, "input 'x' has rank 3"});
  cases.push_back({{{"x", HostTensor::i64({2, 8}, std::vector<int64_t>(16, 1))}}, "input 'x' is i64, the graph expects f32"});
  cases.push_back({{{"x", HostTensor::random_f32({2, 8}, rng_)}, {"z", HostTensor::random_f32({1}, rng_)}},
                   "unknown input 'z' (the graph's inputs: x)"});
  for (const Case& c : cases) {
    Result<TensorMap> out = (*executor)->run(c.inputs);
    ASSERT_FALSE(out.ok()) << c.expected;
    EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(out.status().to_string().find(c.expected), std::string::npos) << out.status().to_string();
  }
  // Still usable.
  EXPECT_TRUE((*executor)->run({{"x", HostTensor::random_f32({2, 8}, rng_)}}).ok());
}

TEST_F(ExecutorTest, UnsupportedOpsAndShapeErrorsFailThePlanWithTheNodeName) {
  graph::Graph g("bad");
  ASSERT_TRUE(g.add_input("x", {DType::kF32, {4, 8}}).ok());
  ASSERT_TRUE(g.add_node("mystery", "Frobnicate", std::vector<std::string>{"x"}, std::vector<std::string>{"y"}).ok());
  ASSERT_TRUE(g.mark_output("y").ok());
  Result<std::unique_ptr<Executor>> unsupported = compile(std::move(g));
  ASSERT_FALSE(unsupported.ok());
  EXPECT_NE(unsupported.status().to_string().find("Frobnicate"), std::string::npos) << unsupported.status().to_string();

  graph::Graph m("mismatch");
  ASSERT_TRUE(m.add_input("a", {DType::kF32, {4, 8}}).ok());
  ASSERT_TRUE(m.add_input("b", {DType::kF32, {9, 2}}).ok());
  add_node(m, "mm", "MatMul", {"a", "b"}, "y");
  ASSERT_TRUE(m.mark_output("y").ok());
  Result<std::unique_ptr<Executor>> mismatch = compile(std::move(m));
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.status().to_string().find("'mm'"), std::string::npos) << mismatch.status().to_string();
}

TEST_F(ExecutorTest, FailingKernelNamesTheNodeAndTheSessionRecovers) {
  std::unique_ptr<ops::Registries> bundle = registries_with_failing_relu();
  ops::KernelRegistry& broken = bundle->kernels;
  PlanOptions unfused;
  unfused.fuse = false;
  Result<std::unique_ptr<ExecutionPlan>> plan =
      ExecutionPlan::build(mlp(Dim::symbol("batch")), session_->device().info(),
                           PlanContext{&schemas_, &broken, &fusions_}, unfused);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  Result<std::unique_ptr<Executor>> executor =
      Executor::create(*session_, std::shared_ptr<const ExecutionPlan>(std::move(plan).value()));
  ASSERT_TRUE(executor.ok()) << executor.status().to_string();
  Result<TensorMap> out = (*executor)->run({{"x", HostTensor::random_f32({2, 8}, rng_)}});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().to_string().find("injected failure"), std::string::npos) << out.status().to_string();
  EXPECT_NE(out.status().to_string().find("BrokenRelu"), std::string::npos) << out.status().to_string();
  EXPECT_EQ(session_->pool().stats().active_blocks.current, 0) << "the failed run released its memory";
  // The same session runs a healthy plan right after.
  Result<std::unique_ptr<Executor>> healthy = compile(mlp(Dim::symbol("batch")), unfused);
  ASSERT_TRUE(healthy.ok()) << healthy.status().to_string();
  const HostTensor x = HostTensor::random_f32({2, 8}, rng_);
  Result<TensorMap> ok = (*healthy)->run({{"x", x}});
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  expect_close(ok->at("y").to_f32(), mlp_reference(x));
}

TEST_F(ExecutorTest, StateInputsAreBoundOnceAndUsedInPlace) {
  // y = x + state, with state's symbol n bound by the state binding.
  graph::Graph g("state");
  ASSERT_TRUE(g.add_input("x", {DType::kF32, {Dim::symbol("n")}}).ok());
  ASSERT_TRUE(g.add_input("state", {DType::kF32, {Dim::symbol("n")}}).ok());
  add_node(g, "add", "Add", {"x", "state"}, "y");
  ASSERT_TRUE(g.mark_output("y").ok());
  Result<std::unique_ptr<Executor>> executor = compile(std::move(g));
  ASSERT_TRUE(executor.ok()) << executor.status().to_string();
  Result<std::unique_ptr<hal::Buffer>> buffer = session_->device().allocate(4 * sizeof(float), hal::MemoryKind::kDevice);
  ASSERT_TRUE(buffer.ok());
  const std::vector<float> state = {10, 20, 30, 40};
  hal::Stream& stream = session_->default_stream();
  ASSERT_TRUE(stream.copy_from_host(**buffer, state.data()).ok());
  ASSERT_TRUE(stream.synchronize().ok());
  Executor& ex = **executor;
  EXPECT_EQ(ex.bind_state("state", DType::kI32, Shape{4}, hal::BufferView(**buffer)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ex.bind_state("nope", DType::kF32, Shape{4}, hal::BufferView(**buffer)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ex.bind_state("state", DType::kF32, Shape{5}, hal::BufferView(**buffer)).code(), StatusCode::kInvalidArgument)
      << "the view is too small";
  ASSERT_TRUE(ex.bind_state("state", DType::kF32, Shape{4}, hal::BufferView(**buffer)).ok());
  for (float base : {1.0f, 2.0f}) {
    Result<TensorMap> out = ex.run({{"x", HostTensor::f32(Shape{4}, {base, base, base, base})}});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_EQ(out->at("y").to_f32(), (std::vector<float>{10 + base, 20 + base, 30 + base, 40 + base}));
  }
  Result<TensorMap> mismatch = ex.run({{"x", HostTensor::f32(Shape{3}, {1, 2, 3})}});
  EXPECT_EQ(mismatch.status().code(), StatusCode::kInvalidArgument) << "n is 4 through the state";
  Result<TensorMap> twice = ex.run({{"x", HostTensor::f32(Shape{4}, {1, 2, 3, 4})}, {"state", HostTensor::f32(Shape{4}, {1, 2, 3, 4})}});
  EXPECT_NE(twice.status().message().find("bound as state"), std::string::npos) << twice.status().to_string();
}

// Note [Stable node ids]: fusion replaces fc1+bias1 and fc2+bias2; 'act' keeps its file id (2) in the plan, the
// trace and the failure report, and each fused node gets a fresh id listing the ids it replaced.
TEST_F(ExecutorTest, NodesKeepTheirGraphIdsThroughFusionInPlansTracesAndFailures) {
  graph::Graph g = mlp(Dim::symbol("batch"));
  ASSERT_EQ(g.node(*g.find_node("act")).stable_id, 2);
  Result<std::unique_ptr<ExecutionPlan>> built = ExecutionPlan::build(std::move(g), session_->device().info(), context());
  ASSERT_TRUE(built.ok()) << built.status().to_string();
  const std::shared_ptr<const ExecutionPlan> plan(std::move(built).value());
  const graph::Graph& fused = plan->graph();
  ASSERT_EQ(plan->fusion_groups().size(), 2u) << plan->describe();
  Result<graph::NodeId> act = fused.find_node_by_stable_id(2);
  ASSERT_TRUE(act.ok()) << plan->describe();
  EXPECT_EQ(fused.node(*act).name, "act");
  std::set<graph::NodeId> ids;
  for (graph::NodeId id = 0; id < fused.num_nodes(); ++id) ids.insert(fused.node(id).stable_id);
  EXPECT_EQ(ids.size(), 3u) << "stable ids are unique";
  const std::vector<std::vector<graph::NodeId>> replaced{{0, 1}, {3, 4}};
  for (size_t k = 0; k < 2; ++k) {
    const ops::FusionGroup& group = plan->fusion_groups()[k];
    EXPECT_EQ(group.original_ids, replaced[k]);
    EXPECT_GE(group.fused_id, 5) << "a fused node never reuses an original id";
    const graph::Node& node = fused.node(*fused.find_node_by_stable_id(group.fused_id));
    EXPECT_EQ(node.fused_ids, replaced[k]);
  }
  EXPECT_NE(plan->describe().find("act (id 2,"), std::string::npos) << plan->describe();

  // The trace names the file's ids, and a fused launch lists the ids it covers.
  Result<std::unique_ptr<Executor>> executor = Executor::create(*session_, plan);
  ASSERT_TRUE(executor.ok()) << executor.status().to_string();
  RunOptions profiled;
  profiled.profile = true;
  ASSERT_TRUE((*executor)->run({{"x", HostTensor::random_f32({2, 8}, rng_)}}, profiled).ok());
  const std::vector<LaunchRecord> records = session_->profiler().records();
  ASSERT_EQ(records.size(), 3u);
  for (const LaunchRecord& r : records) {
    if (r.node_name == "act") {
      EXPECT_EQ(r.node_id, 2);
    } else {
      EXPECT_EQ(r.fused_ids, replaced[r.node_name == "fc1#fused" ? 0 : 1]) << r.node_name;
    }
  }
  EXPECT_NE(session_->profiler().chrome_trace_json().find("\"fused_ids\":[3,4]"), std::string::npos);
  for (const PoolEvent& event : session_->profiler().pool_events()) {
    if (event.value == "h3") {
      EXPECT_EQ(event.node_id, 2) << "the pool event names the producer's file id";
    }
  }

  // A failure in 'act' reports id 2, not its index in the fused plan.
  std::unique_ptr<ops::Registries> bundle = registries_with_failing_relu();
  ops::KernelRegistry& broken = bundle->kernels;
  Result<std::unique_ptr<ExecutionPlan>> broken_plan = ExecutionPlan::build(
      mlp(Dim::symbol("batch")), session_->device().info(), PlanContext{&schemas_, &broken, &fusions_});
  ASSERT_TRUE(broken_plan.ok()) << broken_plan.status().to_string();
  Result<std::unique_ptr<Executor>> failing_executor =
      Executor::create(*session_, std::shared_ptr<const ExecutionPlan>(std::move(broken_plan).value()));
  ASSERT_TRUE(failing_executor.ok());
  Result<TensorMap> out = (*failing_executor)->run({{"x", HostTensor::random_f32({2, 8}, rng_)}});
  ASSERT_FALSE(out.ok());
  ASSERT_NE((*failing_executor)->last_failure(), nullptr);
  EXPECT_EQ((*failing_executor)->last_failure()->node_id, 2);
  EXPECT_NE(out.status().to_string().find("node 'act' (id 2, Relu)"), std::string::npos) << out.status().to_string();
}

}  // namespace
}  // namespace hxrt::runtime

namespace hxrt::runtime {
namespace {

// Note [Captured runs]: a capture replays what run() computes, bit for bit, for new input values of its shapes.
TEST_F(ExecutorTest, ACapturedRunReplaysWhatRunComputesForNewInputs) {
  for (const Dim& batch : {Dim(3), Dim::symbol("batch")}) {  // arena plan and pool plan
    Result<std::unique_ptr<Executor>> executor = compile(mlp(batch));
    ASSERT_TRUE(executor.ok()) << executor.status().to_string();
    Result<std::unique_ptr<Executor::Captured>> captured =
        (*executor)->capture({{"x", HostTensor::random_f32({3, 8}, rng_)}});
    ASSERT_TRUE(captured.ok()) << captured.status().to_string();
    EXPECT_EQ((*captured)->launches(), (*executor)->plan().objects().size());
    for (int rep = 0; rep < 4; ++rep) {
      const HostTensor x = HostTensor::random_f32({3, 8}, rng_);
      Result<TensorMap> replayed = (*executor)->replay(**captured, {{"x", x}});
      ASSERT_TRUE(replayed.ok()) << replayed.status().to_string();
      Result<TensorMap> ran = (*executor)->run({{"x", x}});  // runs in between do not disturb the capture
      ASSERT_TRUE(ran.ok()) << ran.status().to_string();
      const HostTensor& a = replayed->at("y");
      const HostTensor& b = ran->at("y");
      ASSERT_EQ(a.shape, (Shape{3, 4}));
      EXPECT_EQ(a.bytes, b.bytes) << "bit-identical to run()";
      expect_close(a.to_f32(), mlp_reference(x));
    }
    EXPECT_EQ((*executor)->stats().captures, 1u);
    EXPECT_EQ((*executor)->stats().replays, 4u);
    // Another shape is another capture.
    Result<TensorMap> wrong = (*executor)->replay(**captured, {{"x", HostTensor::random_f32({4, 8}, rng_)}});
    ASSERT_FALSE(wrong.ok());
    EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(wrong.status().message().find("the capture was made for"), std::string::npos)
        << wrong.status().to_string();
    EXPECT_EQ((*executor)->replay(**captured, {}).status().code(), StatusCode::kInvalidArgument);
  }
}

// Note [Pipelined replays]: begin_replay returns with the work enqueued; the caller's host work runs meanwhile;
// finish_replay gives what replay() gives.
TEST_F(ExecutorTest, APipelinedReplayGivesWhatReplayGives) {
  Result<std::unique_ptr<Executor>> executor = compile(mlp(Dim(3)));
  ASSERT_TRUE(executor.ok()) << executor.status().to_string();
  Result<std::unique_ptr<Executor::Captured>> captured =
      (*executor)->capture({{"x", HostTensor::random_f32({3, 8}, rng_)}});
  ASSERT_TRUE(captured.ok()) << captured.status().to_string();
  for (int rep = 0; rep < 3; ++rep) {
    const TensorMap inputs = {{"x", HostTensor::random_f32({3, 8}, rng_)}};
    Result<std::unique_ptr<Executor::Pending>> pending = (*executor)->begin_replay(**captured, inputs);
    ASSERT_TRUE(pending.ok()) << pending.status().to_string();
    const auto expected = mlp_reference(inputs.at("x"));  // host work while the stream runs
    Result<TensorMap> out = (*executor)->finish_replay(**pending);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    Result<TensorMap> replayed = (*executor)->replay(**captured, inputs);
    ASSERT_TRUE(replayed.ok()) << replayed.status().to_string();
    EXPECT_EQ(out->at("y").bytes, replayed->at("y").bytes);
    expect_close(out->at("y").to_f32(), expected);
    const Status again = (*executor)->finish_replay(**pending).status();
    EXPECT_EQ(again.code(), StatusCode::kFailedPrecondition) << again.to_string();
  }
  EXPECT_EQ((*executor)->stats().replays, 6u);
  {
    // Dropped unfinished, its inputs a temporary gone at once: it waits for its stream, and the executor goes on.
    Result<std::unique_ptr<Executor::Pending>> dropped =
        (*executor)->begin_replay(**captured, {{"x", HostTensor::random_f32({3, 8}, rng_)}});
    ASSERT_TRUE(dropped.ok()) << dropped.status().to_string();
  }
  EXPECT_TRUE((*executor)->replay(**captured, {{"x", HostTensor::random_f32({3, 8}, rng_)}}).ok());
  // Bad inputs fail at begin_replay, with nothing enqueued.
  EXPECT_EQ((*executor)->begin_replay(**captured, {}).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(ExecutorTest, AFailureInAReplayNamesTheNodeAndTheCaptureStaysUsable) {
  std::unique_ptr<ops::Registries> bundle = registries_with_failing_relu();
  Result<std::unique_ptr<ExecutionPlan>> plan = ExecutionPlan::build(
      mlp(Dim(2)), session_->device().info(), PlanContext{&schemas_, &bundle->kernels, &fusions_}, {.fuse = false});
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  Result<std::unique_ptr<Executor>> executor =
      Executor::create(*session_, std::shared_ptr<const ExecutionPlan>(std::move(plan).value()));
  ASSERT_TRUE(executor.ok()) << executor.status().to_string();
  Result<std::unique_ptr<Executor::Captured>> captured =
      (*executor)->capture({{"x", HostTensor::random_f32({2, 8}, rng_)}});
  ASSERT_TRUE(captured.ok()) << captured.status().to_string();
  for (int rep = 0; rep < 2; ++rep) {
    Result<TensorMap> out = (*executor)->replay(**captured, {{"x", HostTensor::random_f32({2, 8}, rng_)}});
    ASSERT_FALSE(out.ok());
    const std::string message = out.status().to_string();
    EXPECT_NE(message.find("injected failure"), std::string::npos) << message;
    EXPECT_NE(message.find("node 'act' (Relu, kernel BrokenRelu)"), std::string::npos) << message;
    EXPECT_NE(message.find("command 3 of 5"), std::string::npos) << message;
  }
  EXPECT_TRUE(session_->default_stream().status().ok()) << "the stream was reset";
}

TEST_F(ExecutorTest, PlansThatCannotBeCapturedSaySoAndRunNormally) {
  // Two independent branches on two streams: cross-stream events cannot be captured.
  graph::Graph g("branches");
  ASSERT_TRUE(g.add_input("x", {DType::kF32, {4}}).ok());
  add_node(g, "a", "Relu", {"x"}, "ya");
  add_node(g, "b", "Sigmoid", {"x"}, "yb");
  add_node(g, "join", "Add", {"ya", "yb"}, "y");
  ASSERT_TRUE(g.mark_output("y").ok());
  Result<std::unique_ptr<Executor>> executor = compile(std::move(g), PlanOptions{.max_streams = 2});
  ASSERT_TRUE(executor.ok()) << executor.status().to_string();
  const HostTensor x = HostTensor::random_f32({4}, rng_);
  Result<std::unique_ptr<Executor::Captured>> captured = (*executor)->capture({{"x", x}});
  if ((*executor)->plan().num_streams() < 2) GTEST_SKIP() << "the planner used one stream";
  ASSERT_FALSE(captured.ok());
  EXPECT_EQ(captured.status().code(), StatusCode::kUnimplemented) << captured.status().to_string();
  EXPECT_TRUE((*executor)->run({{"x", x}}).ok());
}

}  // namespace
}  // namespace hxrt::runtime
