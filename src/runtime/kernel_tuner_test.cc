#include "hxrt/runtime/kernel_tuner.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <random>
#include <thread>

#include "hxrt/kernels/builtin_registries.h"
#include "hxrt/runtime/executor.h"

namespace hxrt::runtime {
namespace {

using graph::Dim;

// Relu as a custom kernel that takes at least `delay` per launch (a busy wait, so it is device time).
ops::KernelDef relu_kernel(std::string name, int priority, std::chrono::microseconds delay, bool fail = false) {
  ops::KernelDef def;
  def.op_type = "Relu";
  def.device = hal::DeviceKind::kCpu;
  def.input_dtypes = {{DType::kF32}};
  def.kind = ops::KernelKind::kCustom;
  def.name = name;
  def.priority = priority;
  def.launch = ops::cpu_launch(name, [delay, fail](const ops::CpuComputeContext& ctx) -> Status {
    if (fail) return internal_error("this implementation cannot run these shapes");
    const auto until = std::chrono::steady_clock::now() + delay;
    const auto* x = ctx.input(0).data<float>();
    auto* y = ctx.output(0).data<float>();
    for (int64_t i = 0; i < ctx.input(0).num_elements(); ++i) y[i] = std::max(x[i], 0.0f);
    while (std::chrono::steady_clock::now() < until) {
    }
    return ok_status();
  });
  return def;
}

class KernelTunerTest : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(hal::register_builtin_drivers(drivers_).ok());
    session_ = std::move(Session::create(drivers_, "cpu")).value();
  }

  // x[n, 64] → Relu → MatMul with w[64, 32] → y.
  graph::Graph graph(const Dim& n) {
    graph::Graph g("tuned");
    EXPECT_TRUE(g.add_input("x", {DType::kF32, {n, 64}}).ok());
    EXPECT_TRUE(g.add_initializer("w", {DType::kF32, {64, 32}}, graph::WeightData::copy_of(w_.bytes)).ok());
    const std::vector<std::string> x{"x"}, r{"r"}, rw{"r", "w"}, y{"y"};
    EXPECT_TRUE(g.add_node("act", "Relu", x, r, {}, "", 14).ok());
    EXPECT_TRUE(g.add_node("fc", "MatMul", rw, y, {}, "", 13).ok());
    EXPECT_TRUE(g.mark_output("y").ok());
    return g;
  }

  Result<std::unique_ptr<ExecutionPlan>> build(graph::Graph g, KernelTuner* tuner) {
    PlanOptions options;
    options.tuner = tuner;
    return ExecutionPlan::build(std::move(g), session_->device().info(), PlanContext{&schemas_, &kernels_, nullptr},
                                options);
  }
  static const ExecutionObject& object_of(const ExecutionPlan& plan, std::string_view name) {
    for (const ExecutionObject& object : plan.objects()) {
      if (plan.graph().node(object.node).name == name) return object;
    }
    ADD_FAILURE() << "no node " << name;
    return plan.objects().front();
  }

  std::mt19937 rng_{7};
  HostTensor w_ = HostTensor::random_f32({64, 32}, rng_);
  std::unique_ptr<ops::Registries> registries_ =
      std::move(kernels::make_builtin_registries({.opencl_kernels = false, .fusions = false})).value();
  ops::OpSchemaRegistry& schemas_ = registries_->schemas;
  ops::KernelRegistry& kernels_ = registries_->kernels;
  hal::DriverRegistry drivers_;
  std::unique_ptr<Session> session_;
};

TEST_F(KernelTunerTest, MeasuredPolicyPicksTheFasterKernelAndTheSavedCacheSkipsMeasuring) {
  // A slow custom Relu outranks the built-in ReluF32 (priority 0): only measuring can prefer the built-in one.
  ASSERT_TRUE(kernels_.add(relu_kernel("ReluSlow", 100, std::chrono::microseconds(10000))).ok());
  ops::TimingCache cache;
  Result<std::unique_ptr<KernelTuner>> tuner = KernelTuner::create(session_->device(), cache, {.repetitions = 5});
  ASSERT_TRUE(tuner.ok()) << tuner.status().to_string();
  Result<std::unique_ptr<ExecutionPlan>> plan = build(graph(Dim(16)), tuner->get());
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();

  const ExecutionObject& act = object_of(**plan, "act");
  EXPECT_EQ(act.kernel->name, "ReluF32");
  EXPECT_NE(act.selection_reason.find("* ReluF32 v1 (built-in, cpu, priority 0): chosen: fastest measured on cpu f32[16,64]"),
            std::string::npos)
      << act.selection_reason;
  EXPECT_NE(act.selection_reason.find("- ReluSlow v1 (custom, cpu, priority 100): slower on cpu f32[16,64]"),
            std::string::npos)
      << act.selection_reason;
  const int64_t slow = cache.find("ReluSlow", "cpu f32[16,64]").value_or(0);
  const int64_t fast = cache.find("ReluF32", "cpu f32[16,64]").value_or(0);
  EXPECT_GE(slow, 3'000'000) << "the busy wait is device time";
  EXPECT_LT(fast, slow);
  // The built-in MatMul has two implementations (OpenBLAS and hxrt's blocked sgemm): both measured as well.
  const ExecutionObject& fc = object_of(**plan, "fc");
  EXPECT_NE(fc.selection_reason.find("fastest measured on cpu f32[16,64] f32[64,32]"), std::string::npos)
      << fc.selection_reason;
  EXPECT_EQ((*tuner)->measured(), 2);
  EXPECT_EQ(cache.size(), 4u);
  const std::string report = (*tuner)->report();
  EXPECT_NE(report.find("act (Relu) on cpu f32[16,64]: measured: ReluSlow"), std::string::npos) << report;

  // The plan runs, with the chosen kernels, to the right answer.
  {
    Result<std::unique_ptr<Executor>> executor =
        Executor::create(*session_, std::shared_ptr<const ExecutionPlan>(std::move(plan).value()));
    ASSERT_TRUE(executor.ok()) << executor.status().to_string();
    const HostTensor x = HostTensor::random_f32({16, 64}, rng_);
    Result<TensorMap> out = (*executor)->run({{"x", x}});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    const std::vector<float> xs = x.to_f32(), ws = w_.to_f32(), ys = out->at("y").to_f32();
    for (int i = 0; i < 16; ++i) {
      for (int j = 0; j < 32; ++j) {
        double s = 0;
        for (int k = 0; k < 64; ++k) s += std::max(0.0, double{xs[i * 64 + k]}) * ws[k * 32 + j];
        ASSERT_NEAR(ys[static_cast<size_t>(i * 32 + j)], s, 1e-4 * (1 + std::abs(s)));
      }
    }
  }

  // Saved and loaded, the cache answers the next build without measuring anything.
  const std::string path = (std::filesystem::temp_directory_path() / "hxrt_kernel_tuner_test.json").string();
  ASSERT_TRUE(cache.save(path).ok());
  ops::TimingCache loaded;
  ASSERT_TRUE(loaded.load(path).ok());
  std::filesystem::remove(path);
  Result<std::unique_ptr<KernelTuner>> second = KernelTuner::create(session_->device(), loaded);
  ASSERT_TRUE(second.ok());
  Result<std::unique_ptr<ExecutionPlan>> again = build(graph(Dim(16)), second->get());
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ(object_of(**again, "act").kernel->name, "ReluF32");
  EXPECT_EQ((*second)->measured(), 0);
  ASSERT_EQ((*second)->nodes().size(), 2u);
  EXPECT_EQ((*second)->nodes()[0].outcome, TunedNode::Outcome::kCached);

  // Another shape is another bucket: measured again.
  Result<std::unique_ptr<ExecutionPlan>> other = build(graph(Dim(4)), second->get());
  ASSERT_TRUE(other.ok());
  EXPECT_EQ((*second)->measured(), 2);
  EXPECT_EQ(object_of(**other, "act").kernel->name, "ReluF32");
}

TEST_F(KernelTunerTest, SymbolicShapesAreMeasuredAtTheGivenDimsOrSkipped) {
  ASSERT_TRUE(kernels_.add(relu_kernel("ReluSlow", 100, std::chrono::microseconds(10000))).ok());
  ops::TimingCache cache;
  Result<std::unique_ptr<KernelTuner>> unbound = KernelTuner::create(session_->device(), cache);
  ASSERT_TRUE(unbound.ok());
  Result<std::unique_ptr<ExecutionPlan>> plan = build(graph(Dim::symbol("n")), unbound->get());
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_EQ(object_of(**plan, "act").kernel->name, "ReluSlow") << "not measurable: priority decides";
  ASSERT_FALSE((*unbound)->nodes().empty());
  EXPECT_EQ((*unbound)->nodes()[0].outcome, TunedNode::Outcome::kSkipped);
  EXPECT_NE((*unbound)->report().find("'x' has shape [n, 64]"), std::string::npos) << (*unbound)->report();
  EXPECT_EQ(cache.size(), 0u);

  Result<std::unique_ptr<KernelTuner>> bound =
      KernelTuner::create(session_->device(), cache, {.repetitions = 5, .dims = {{"n", 2}}});
  ASSERT_TRUE(bound.ok());
  plan = build(graph(Dim::symbol("n")), bound->get());
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_EQ(object_of(**plan, "act").kernel->name, "ReluF32");
  EXPECT_TRUE(cache.find("ReluSlow", "cpu f32[2,64]").has_value());
}

TEST_F(KernelTunerTest, AKernelThatFailsWhenMeasuredNeverWins) {
  // The fastest candidate (no work at all) fails on these shapes; the built-in one wins.
  ASSERT_TRUE(kernels_.add(relu_kernel("ReluBroken", 100, std::chrono::microseconds(0), /*fail=*/true)).ok());
  ASSERT_TRUE(kernels_.add(relu_kernel("ReluSlow", 50, std::chrono::microseconds(10000))).ok());
  ops::TimingCache cache;
  Result<std::unique_ptr<KernelTuner>> tuner = KernelTuner::create(session_->device(), cache, {.repetitions = 5});
  ASSERT_TRUE(tuner.ok());
  Result<std::unique_ptr<ExecutionPlan>> plan = build(graph(Dim(8)), tuner->get());
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  const ExecutionObject& act = object_of(**plan, "act");
  EXPECT_EQ(act.kernel->name, "ReluF32");
  EXPECT_NE(act.selection_reason.find("ReluBroken v1 (custom, cpu, priority 100): failed on cpu f32[8,64] when measured"),
            std::string::npos)
      << act.selection_reason;
  EXPECT_EQ(cache.find("ReluBroken", "cpu f32[8,64]"), ops::TimingCache::kFailed);
  EXPECT_NE((*tuner)->report().find("ReluBroken failed: "), std::string::npos) << (*tuner)->report();
  EXPECT_NE((*tuner)->report().find("cannot run these shapes"), std::string::npos) << (*tuner)->report();
  // The tuner's stream was reset: the session is still usable.
  EXPECT_TRUE(session_->synchronize().ok());
}

TEST(KernelTunerOptions, RejectsNonsense) {
  hal::DriverRegistry drivers;
  ASSERT_TRUE(hal::register_builtin_drivers(drivers).ok());
  std::unique_ptr<Session> session = std::move(Session::create(drivers, "cpu")).value();
  ops::TimingCache cache;
  EXPECT_EQ(KernelTuner::create(session->device(), cache, {.repetitions = 0}).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hxrt::runtime
