// The heterogeneous split (Note [Heterogeneous split] in execution_plan.cc): planning an OpenCL graph whose ops the
// device lacks onto a CPU fallback, and running it against the all-CPU result.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "hxrt/kernels/builtin_registries.h"
#include "hxrt/runtime/executor.h"

namespace hxrt::runtime {
namespace {

using graph::Dim;

hal::DeviceInfo device_of(hal::DeviceKind kind, bool host_addressable) {
  hal::DeviceInfo info;
  info.kind = kind;
  info.name = std::string(hal::device_kind_name(kind)) + " (test)";
  info.host_addressable = host_addressable;
  return info;
}

// "Cube" (domain test): y = x^3, with a CPU kernel only — the op an OpenCL device cannot run.
Status register_cube(ops::OpSchemaRegistry& schemas, ops::KernelRegistry& kernels) {
  ops::OpSchema schema;
  schema.op_type = "Cube";
  schema.domain = "test";
  schema.inputs = {{.name = "x"}};
  schema.outputs = {{.name = "y"}};
  schema.type_constraints = {{"T", {DType::kF32}}};
  schema.infer = [](ops::InferenceContext& ctx) {
    ctx.set_output(0, ctx.input(0));
    return ok_status();
  };
  HXRT_RETURN_IF_ERROR(schemas.add(std::move(schema)));
  ops::KernelDef def;
  def.op_type = "Cube";
  def.domain = "test";
  def.device = hal::DeviceKind::kCpu;
  def.kind = ops::KernelKind::kCustom;
  def.name = "CubeCpu";
  def.launch = ops::cpu_launch("CubeCpu", [](const ops::CpuComputeContext& ctx) {
    const auto* x = ctx.input(0).data<float>();
    auto* y = ctx.output(0).data<float>();
    for (int64_t i = 0; i < ctx.input(0).num_elements(); ++i) y[i] = x[i] * x[i] * x[i];
    return ok_status();
  });
  return kernels.add(std::move(def));
}

class SplitTest : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(register_cube(schemas_, kernels_).ok());
  }
  PlanContext context() const { return PlanContext{&schemas_, &kernels_, nullptr}; }

  // x[n, 16] → MatMul(w) → a → Cube → b → Relu → c ; Softmax(a) → d ; y = c + d; also output b.
  graph::Graph graph(const Dim& n) {
    graph::Graph g("split");
    EXPECT_TRUE(g.add_input("x", {DType::kF32, {n, 16}}).ok());
    EXPECT_TRUE(g.add_initializer("w", {DType::kF32, {16, 16}}, graph::WeightData::copy_of(w_.bytes)).ok());
    auto add = [&](const char* name, const char* op, std::vector<std::string> in, const char* out, const char* domain,
                   int version) {
      const std::vector<std::string> outs{out};
      EXPECT_TRUE(g.add_node(name, op, in, outs, {}, domain, version).ok()) << name;
    };
    add("mm", "MatMul", {"x", "w"}, "a", "", 13);
    add("cube", "Cube", {"a"}, "b", "test", 1);
    add("relu", "Relu", {"b"}, "c", "", 14);
    add("softmax", "Softmax", {"a"}, "d", "", 13);
    add("sum", "Add", {"c", "d"}, "y", "", 14);
    EXPECT_TRUE(g.mark_output("y").ok());
    EXPECT_TRUE(g.mark_output("b").ok());
    return g;
  }
  static const ExecutionObject* find(const ExecutionPlan& plan, std::string_view name) {
    for (const ExecutionObject& object : plan.objects()) {
      if (plan.graph().node(object.node).name == name) return &object;
    }
    return nullptr;
  }

  std::mt19937 rng_{11};
  HostTensor w_ = HostTensor::random_f32({16, 16}, rng_, -0.5f, 0.5f);
  std::unique_ptr<ops::Registries> registries_ =
      std::move(kernels::make_builtin_registries({.fusions = false})).value();
  ops::OpSchemaRegistry& schemas_ = registries_->schemas;
  ops::KernelRegistry& kernels_ = registries_->kernels;
};

TEST_F(SplitTest, WithoutAFallbackTheMissingKernelIsAnErrorNamingTheNode) {
  const hal::DeviceInfo opencl = device_of(hal::DeviceKind::kOpenCL, false);
  Result<std::unique_ptr<ExecutionPlan>> plan = ExecutionPlan::build(graph(Dim(4)), opencl, context());
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kNotFound);
  EXPECT_NE(plan.status().to_string().find("node 'cube' (Cube)"), std::string::npos) << plan.status().to_string();
}

TEST_F(SplitTest, NodesWithoutADeviceKernelGoToTheFallbackWithCopiesOnEveryCrossingEdge) {
  const hal::DeviceInfo opencl = device_of(hal::DeviceKind::kOpenCL, false);
  const hal::DeviceInfo cpu = device_of(hal::DeviceKind::kCpu, true);
  PlanOptions options;
  options.fallback_device = &cpu;
  Result<std::unique_ptr<ExecutionPlan>> built = ExecutionPlan::build(graph(Dim(4)), opencl, context(), options);
  ASSERT_TRUE(built.ok()) << built.status().to_string();
  const ExecutionPlan& plan = **built;
  EXPECT_EQ(plan.split().fallback_nodes, 1);
  EXPECT_EQ(plan.split().copies, 2) << "a to the host for Cube, b back for Relu";
  EXPECT_EQ(plan.split().copy_bytes, 2u * 4 * 16 * 4);
  ASSERT_NE(plan.fallback_device(), nullptr);

  const ExecutionObject* cube = find(plan, "cube");
  const ExecutionObject* to_host = find(plan, "MemcpyToHost(a)");
  const ExecutionObject* from_host = find(plan, "MemcpyFromHost(b)");
  ASSERT_TRUE(cube && to_host && from_host) << plan.describe();
  EXPECT_EQ(cube->device, kFallbackDevice);
  EXPECT_EQ(cube->kernel->name, "CubeCpu");
  EXPECT_EQ(plan.stream_device(cube->stream), kFallbackDevice);
  EXPECT_EQ(to_host->device, kMainDevice);
  EXPECT_EQ(to_host->kernel->device, hal::DeviceKind::kOpenCL);
  EXPECT_EQ(plan.stream_device(to_host->stream), kMainDevice);
  // Cube reads the copy; Relu reads the copy back; the graph output b stays on the fallback device.
  EXPECT_EQ(plan.graph().value(cube->inputs[0]).name, "a@cpu");
  EXPECT_EQ(plan.graph().value(find(plan, "relu")->inputs[0]).name, "b@opencl");
  EXPECT_EQ(plan.values()[static_cast<size_t>(cube->outputs[0])].device, kFallbackDevice);
  EXPECT_EQ(plan.values()[static_cast<size_t>(to_host->outputs[0])].device, kFallbackDevice);
  EXPECT_EQ(plan.values()[static_cast<size_t>(from_host->outputs[0])].device, kMainDevice);
  // Cross-device edges are ordered by events like cross-stream ones.
  EXPECT_FALSE(cube->wait_events.empty());
  EXPECT_FALSE(from_host->wait_events.empty());
  EXPECT_FALSE(plan.memory().uses_arena) << "a split plan uses the pool";
  for (const ExecutionObject& object : plan.objects()) {
    EXPECT_EQ(plan.stream_device(object.stream), object.device) << plan.graph().node(object.node).name;
  }
  const std::string text = plan.describe();
  EXPECT_NE(text.find("cube (id 1, test.Cube) stream"), std::string::npos) << text;
  EXPECT_NE(text.find("kernel CubeCpu v1 (custom) on fallback cpu device"), std::string::npos) << text;
  EXPECT_NE(text.find("heterogeneous split: 1 node(s) on fallback cpu device 'cpu (test)'"), std::string::npos) << text;
  EXPECT_NE(text.find("2 copy node(s) moving 512 bytes per run"), std::string::npos) << text;
}

TEST_F(SplitTest, FallbackOpsAreForcedOntoTheHostAndTheFallbackMustBeHostAddressable) {
  const hal::DeviceInfo opencl = device_of(hal::DeviceKind::kOpenCL, false);
  const hal::DeviceInfo cpu = device_of(hal::DeviceKind::kCpu, true);
  PlanOptions options;
  options.fallback_device = &cpu;
  options.fallback_ops = {"Softmax"};
  Result<std::unique_ptr<ExecutionPlan>> plan = ExecutionPlan::build(graph(Dim::symbol("n")), opencl, context(), options);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_EQ((*plan)->split().fallback_nodes, 2);
  EXPECT_EQ(find(**plan, "softmax")->device, kFallbackDevice);
  EXPECT_EQ((*plan)->split().copies, 3) << "a to the host once for Cube and Softmax; b and d back";
  EXPECT_EQ((*plan)->split().copy_bytes, 0u) << "symbolic shapes";

  const hal::DeviceInfo not_host = device_of(hal::DeviceKind::kCuda, false);
  options.fallback_device = &not_host;
  Result<std::unique_ptr<ExecutionPlan>> bad = ExecutionPlan::build(graph(Dim(4)), opencl, context(), options);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().to_string().find("not host-addressable"), std::string::npos);
}

// Runs the split plan on an OpenCL session with a CPU fallback session and compares with the all-CPU plan.
class SplitRunTest : public SplitTest {
 protected:
  void SetUp() override {
    SplitTest::SetUp();
    ASSERT_TRUE(hal::register_builtin_drivers(drivers_).ok());
    Result<std::unique_ptr<Session>> opencl = Session::create(drivers_, "opencl");
    if (!opencl.ok()) GTEST_SKIP() << "no OpenCL device: " << opencl.status().to_string();
    opencl_ = std::move(opencl).value();
    cpu_ = std::move(Session::create(drivers_, "cpu")).value();
  }
  Result<std::unique_ptr<Executor>> compile(Session& session, Session* fallback, const Dim& n, PlanOptions options = {}) {
    if (fallback != nullptr) options.fallback_device = &fallback->device().info();
    HXRT_ASSIGN_OR_RETURN(std::unique_ptr<ExecutionPlan> plan,
                          ExecutionPlan::build(graph(n), session.device().info(), context(), options));
    return Executor::create(session, std::shared_ptr<const ExecutionPlan>(std::move(plan)), fallback);
  }
  static void expect_near(const HostTensor& actual, const HostTensor& expected) {
    ASSERT_EQ(actual.shape, expected.shape);
    const std::vector<float> a = actual.to_f32(), e = expected.to_f32();
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], e[i], 1e-5 * (1 + std::abs(e[i]))) << i;
  }

  hal::DriverRegistry drivers_;
  std::unique_ptr<Session> opencl_;
  std::unique_ptr<Session> cpu_;
};

TEST_F(SplitRunTest, TheSplitPlanComputesWhatTheCpuPlanComputes) {
  Result<std::unique_ptr<Executor>> split = compile(*opencl_, cpu_.get(), Dim::symbol("n"));
  ASSERT_TRUE(split.ok()) << split.status().to_string();
  Result<std::unique_ptr<Executor>> reference = compile(*cpu_, nullptr, Dim::symbol("n"));
  ASSERT_TRUE(reference.ok()) << reference.status().to_string();
  for (int64_t n : {3, 1, 7, 3}) {
    const HostTensor x = HostTensor::random_f32({n, 16}, rng_);
    Result<TensorMap> got = (*split)->run({{"x", x}});
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    Result<TensorMap> want = (*reference)->run({{"x", x}});
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    expect_near(got->at("y"), want->at("y"));
    expect_near(got->at("b"), want->at("b"));  // an output produced on the fallback device
  }
  EXPECT_EQ(opencl_->pool().stats().active_blocks.current, 0);
  EXPECT_EQ(cpu_->pool().stats().active_blocks.current, 0) << "the host side of every copy was returned";
}

TEST_F(SplitRunTest, AProfiledSplitRunShowsTheCopiesOnDeviceStreamsAndTheFallbackOnCpuStreams) {
  PlanOptions options;
  options.fallback_ops = {"Softmax"};
  Result<std::unique_ptr<Executor>> split = compile(*opencl_, cpu_.get(), Dim(5), options);
  ASSERT_TRUE(split.ok()) << split.status().to_string();
  const HostTensor x = HostTensor::random_f32({5, 16}, rng_);
  ASSERT_TRUE((*split)->run({{"x", x}}, RunOptions{.profile = true}).ok());
  // The profile goes to the main session's profiler, one record per launch, each on its device's stream.
  const std::vector<LaunchRecord> records = opencl_->profiler().records();
  ASSERT_EQ(records.size(), (*split)->plan().objects().size());
  int copies = 0;
  for (const LaunchRecord& record : records) {
    const ExecutionObject* object = find((*split)->plan(), record.node_name);
    ASSERT_NE(object, nullptr) << record.node_name;
    const int device = (*split)->plan().stream_device(object->stream);
    EXPECT_EQ(device, object->device) << record.node_name;
    if (record.op_type == "MemcpyToHost" || record.op_type == "MemcpyFromHost") {
      ++copies;
      EXPECT_EQ(device, kMainDevice);
    }
    EXPECT_GE(record.device_end_ns, record.device_begin_ns) << record.node_name;
    EXPECT_GT(record.device_begin_ns, 0) << record.node_name;
  }
  EXPECT_EQ(copies, 3);
  Result<TensorMap> want = std::move(compile(*cpu_, nullptr, Dim(5))).value()->run({{"x", x}});
  ASSERT_TRUE(want.ok());
  Result<TensorMap> got = (*split)->run({{"x", x}});
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  expect_near(got->at("y"), want->at("y"));
}

TEST_F(SplitRunTest, ASplitPlanNeedsTheFallbackSession) {
  const hal::DeviceInfo& cpu = cpu_->device().info();
  PlanOptions options;
  options.fallback_device = &cpu;
  Result<std::unique_ptr<ExecutionPlan>> plan =
      ExecutionPlan::build(graph(Dim(2)), opencl_->device().info(), context(), options);
  ASSERT_TRUE(plan.ok());
  std::shared_ptr<const ExecutionPlan> shared(std::move(plan).value());
  Result<std::unique_ptr<Executor>> missing = Executor::create(*opencl_, shared);
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().to_string().find("pass a fallback session"), std::string::npos);
  Result<std::unique_ptr<Executor>> wrong = Executor::create(*opencl_, shared, opencl_.get());
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
}

// Devices are an indexed list: a plan names its devices by index and the executor takes one session per index.
TEST_F(SplitRunTest, TheExecutorTakesOneSessionPerDeviceIndexOfThePlan) {
  const hal::DeviceInfo& cpu = cpu_->device().info();
  PlanOptions options;
  options.fallback_device = &cpu;
  Result<std::unique_ptr<ExecutionPlan>> plan =
      ExecutionPlan::build(graph(Dim(3)), opencl_->device().info(), context(), options);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  std::shared_ptr<const ExecutionPlan> shared(std::move(plan).value());
  ASSERT_EQ(shared->num_devices(), 2);
  EXPECT_EQ(shared->device_info(kMainDevice).kind, opencl_->device().info().kind);
  EXPECT_EQ(shared->device_info(kFallbackDevice).kind, cpu.kind);
  for (const ExecutionObject& object : shared->objects()) {
    EXPECT_GE(object.device, 0);
    EXPECT_LT(object.device, shared->num_devices());
  }
  const std::vector<Session*> too_few{opencl_.get()};
  EXPECT_EQ(Executor::create(too_few, shared).status().code(), StatusCode::kInvalidArgument);
  const std::vector<Session*> sessions{opencl_.get(), cpu_.get()};
  Result<std::unique_ptr<Executor>> listed = Executor::create(sessions, shared);
  ASSERT_TRUE(listed.ok()) << listed.status().to_string();
  Result<std::unique_ptr<Executor>> paired = Executor::create(*opencl_, shared, cpu_.get());
  ASSERT_TRUE(paired.ok()) << paired.status().to_string();
  const HostTensor x = HostTensor::random_f32({3, 16}, rng_);
  Result<TensorMap> a = (*listed)->run({{"x", x}});
  Result<TensorMap> b = (*paired)->run({{"x", x}});
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_EQ(a->at("y").bytes, b->at("y").bytes) << "the list and the pair are one executor";
}

}  // namespace
}  // namespace hxrt::runtime
