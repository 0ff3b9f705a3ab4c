// Backend parity sweep, as ggml's test-backend-ops: every kernel registered for every available device (the
// built-in registries bundle, kernels::make_builtin_registries) runs one-node graphs on ordinary and odd
// shapes in each dtype it accepts, with that kernel forced, and must match a double-precision reference within the
// case's stated NMSE (Note [Parity tolerances] in parity_cases.h).
//
// Each case runs twice:
//   - through the normal path: ExecutionPlan::build (schema check, shape inference, selection with the kernel
//     forced through SelectionOptions::forced, attribute parsing) and Executor::run on a Session of the device;
//   - for a fused op, also its unfused chain (Case::pattern) planned with fusion on, which must become one node
//     run by the kernel under test;
//   - through the kernel harness (kernels/testing/kernel_harness.h), which poisons every output with all-ones
//     bytes (NaN for floats) and fences it with sentinel bytes, so an element a kernel does not write, or a write
//     past the end, fails the case.
//
// A kernel the sweep has no generator for fails it, unless kExemptions below names it with the reason, or it is a CPU
// kernel of an ONNX op (domain ""): those are checked against ONNX's own reference outputs by the ONNX backend node
// tests (tests/onnx, ctest OnnxConformance.Cpu), and the sweep lists them as such. A kernel the sweep runs must run at
// least one case, and one for every dtype it declares on each of its inputs. So a new kernel cannot
// be skipped silently: it gets a generator (parity_cases.cc) or an exemption someone has to justify.
//
// Environment: HXRT_PARITY_FILTER=substring runs only the kernels whose name contains it.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "differential/reference.h"
#include "hxrt/base/check.h"
#include "hxrt/hal/driver.h"
#include "hxrt/kernels/builtin_registries.h"
#include "hxrt/ops/fusion.h"
#include "hxrt/ops/op_schema.h"
#include "hxrt/runtime/executor.h"
#include "kernels/testing/kernel_harness.h"
#include "parity/parity_cases.h"

namespace hxrt::parity {
namespace {

// Kernels the sweep does not generate inputs for, by "<device kind>:<kernel name>", each with why. Every entry
// must name a registered kernel (a stale entry fails the sweep).
const std::map<std::string, std::string, std::less<>> kExemptions = {
    // The copies the planner inserts on the edges of a heterogeneous split plan (a device and its host fallback):
    // they need a fallback session on the host side, which a one-node graph on one device does not have;
    // runtime/split_test.cc runs them in split plans against the unsplit results.
    {"opencl:MemcpyToHost", "split-plan edge copy; see the comment above"},
    {"opencl:MemcpyFromHost", "split-plan edge copy; see the comment above"},
    {"cuda:MemcpyToHost", "split-plan edge copy; see the comment above"},
    {"cuda:MemcpyFromHost", "split-plan edge copy; see the comment above"},
    // Collectives run across ranks (processes): one process has nothing to compare them with. comm_mpi_test checks
    // the communicator's collectives on 2 and 3 ranks against references, and llm_tensor_parallel_test the graph
    // ops inside the tensor-parallel decoder (both under mpiexec).
    {"cpu:HostAllReduce", "collective; see the comment above"},
    {"cpu:HostAllGather", "collective; see the comment above"},
    {"cpu:HostReduceScatter", "collective; see the comment above"},
    {"cpu:HostBroadcast", "collective; see the comment above"},
    {"opencl:HostAllReduce", "collective; see the comment above"},
    {"opencl:HostAllGather", "collective; see the comment above"},
    {"opencl:HostReduceScatter", "collective; see the comment above"},
    {"opencl:HostBroadcast", "collective; see the comment above"},
};

// The built-in bundle (every device's kernels) and the drivers.
struct Registries {
  std::unique_ptr<ops::Registries> bundle = std::move(kernels::make_builtin_registries()).value();
  const ops::OpSchemaRegistry& schemas = bundle->schemas;
  const ops::KernelRegistry& kernels = bundle->kernels;
  hal::DriverRegistry drivers;

  Registries() { HXRT_CHECK(hal::register_builtin_drivers(drivers).ok(), "drivers"); }
};

Registries& registries() {
  static Registries* r = new Registries();
  return *r;
}

// The opset version a case's node gets: the newest schema the kernel's version range admits.
int node_version(const ops::OpSchemaRegistry& schemas, const ops::KernelDef& def) {
  Result<const ops::OpSchema*> schema = schemas.find(def.op_type, def.domain, def.end_version);
  if (!schema.ok()) return def.since_version;
  return std::max((*schema)->since_version, def.since_version);
}

bool accepts(const ops::KernelDef& def, const Case& c) {
  for (size_t i = 0; i < c.inputs.size() && i < def.input_dtypes.size(); ++i) {
    const std::vector<DType>& allowed = def.input_dtypes[i];
    if (!c.inputs[i] || allowed.empty()) continue;
    if (std::find(allowed.begin(), allowed.end(), c.inputs[i]->value.dtype) == allowed.end()) return false;
  }
  return true;
}

struct Built {
  graph::Graph graph{"parity"};
  differential::HostTensors feeds;  // graph inputs by name
  std::vector<std::string> outputs;
};

Result<Built> build_graph(const ops::KernelDef& def, int version, const Case& c) {
  Built b;
  std::vector<std::string> inputs;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (!c.inputs[i]) {
      inputs.emplace_back();
      continue;
    }
    const HostTensor& value = c.inputs[i]->value;
    const std::string name = fmt::format("x{}", i);
    graph::TensorDesc desc{value.dtype, graph::SymShape::from(value.shape)};
    if (c.inputs[i]->constant) {
      HXRT_RETURN_IF_ERROR(b.graph.add_initializer(name, desc, graph::WeightData::copy_of(value.bytes)).status());
    } else {
      HXRT_RETURN_IF_ERROR(b.graph.add_input(name, desc).status());
      b.feeds[name] = value;
    }
    inputs.push_back(name);
  }
  for (size_t i = 0; i < c.num_outputs; ++i) b.outputs.push_back(fmt::format("y{}", i));
  HXRT_RETURN_IF_ERROR(b.graph.add_node("node", def.op_type, inputs, b.outputs, c.attrs, def.domain, version).status());
  for (const std::string& output : b.outputs) HXRT_RETURN_IF_ERROR(b.graph.mark_output(output));
  return b;
}

struct Outcome {
  bool ran = false;            // the forced kernel was selected and the case compared
  std::string declined;        // why the kernel did not take the case (not an error)
  std::string failure;         // why the case failed
  bool fused_pattern = false;  // the unfused chain was fused into this kernel and compared
};

std::string compare(std::string_view path, const std::vector<HostTensor>& got,
                    const std::vector<differential::RefTensor>& expected, double tolerance) {
  if (got.size() != expected.size())
    return fmt::format("{}: {} outputs, expected {}", path, got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    std::string detail;
    const double error = nmse(got[i], expected[i], &detail);
    if (!(error <= tolerance)) {
      return fmt::format("{}: output {} NMSE {:.3g} > {:.3g}; {}", path, i, error, tolerance, detail);
    }
  }
  return "";
}

// Plans the case's unfused pattern with fusion on and the fused kernel forced; "" or why it failed.
std::string run_pattern(const ops::KernelDef& def, const Case& c, runtime::Session& session, const Registries& r,
                        const Built& single, const std::vector<differential::RefTensor>& expected) {
  graph::Graph graph("parity_pattern");
  for (graph::ValueId id : single.graph.inputs()) {
    const graph::Value& value = single.graph.value(id);
    HXRT_CHECK(graph.add_input(value.name, value.desc).ok(), "pattern input");
  }
  for (graph::ValueId id : single.graph.initializers()) {
    const graph::Value& value = single.graph.value(id);
    const size_t index = static_cast<size_t>(std::stoi(value.name.substr(1)));
    HXRT_CHECK(
        graph.add_initializer(value.name, value.desc, graph::WeightData::copy_of(c.inputs[index]->value.bytes)).ok(),
        "pattern initializer");
  }
  for (size_t i = 0; i < c.pattern.size(); ++i) {
    const Case::PatternNode& node = c.pattern[i];
    const Status added = graph
                             .add_node(fmt::format("p{}", i), node.op_type, node.inputs,
                                       std::vector<std::string>{node.output}, node.attrs, node.domain, node.version)
                             .status();
    if (!added.ok()) return "fused pattern: " + added.to_string();
  }
  if (Status marked = graph.mark_output("y0"); !marked.ok()) return "fused pattern: " + marked.to_string();
  runtime::PlanOptions options;
  options.max_streams = 1;
  options.fuse = true;
  options.selection.forced[def.op_type] = def.name;
  Result<std::unique_ptr<runtime::ExecutionPlan>> plan = runtime::ExecutionPlan::build(
      std::move(graph), session.device().info(), runtime::PlanContext::of(*r.bundle), options);
  if (!plan.ok()) return "fused pattern: planning: " + plan.status().to_string();
  if ((*plan)->objects().size() != 1 || (*plan)->objects().front().kernel != &def) {
    return "fused pattern: the fusion pass did not rewrite it into this kernel:\n" + (*plan)->describe();
  }
  Result<std::unique_ptr<runtime::Executor>> executor =
      runtime::Executor::create(session, std::shared_ptr<const runtime::ExecutionPlan>(std::move(plan).value()));
  if (!executor.ok()) return "fused pattern: executor: " + executor.status().to_string();
  Result<runtime::TensorMap> outputs = (*executor)->run(single.feeds);
  if (!outputs.ok()) return "fused pattern: run: " + outputs.status().to_string();
  return compare("fused pattern", {outputs->at("y0")}, expected, c.tolerance);
}

Outcome run_case(const ops::KernelDef& def, const Case& c, runtime::Session& session, const Registries& r,
                 const std::string& device_spec) {
  Outcome outcome;
  const int version = node_version(r.schemas, def);
  Result<Built> built = build_graph(def, version, c);
  if (!built.ok()) {
    outcome.failure = "building the graph: " + built.status().to_string();
    return outcome;
  }
  runtime::PlanOptions options;
  options.max_streams = 1;
  options.fuse = false;
  options.selection.forced[def.op_type] = def.name;
  Result<std::unique_ptr<runtime::ExecutionPlan>> plan = runtime::ExecutionPlan::build(
      built->graph.clone(), session.device().info(), runtime::PlanContext::of(*r.bundle), options);
  if (!plan.ok()) {
    outcome.declined = fmt::format("planning: {}", plan.status().message());
    return outcome;
  }
  const ops::KernelDef* chosen = (*plan)->objects().empty() ? nullptr : (*plan)->objects().front().kernel;
  if ((*plan)->objects().size() != 1 || chosen != &def) {
    outcome.declined = fmt::format("the plan chose {}", chosen == nullptr ? "nothing" : chosen->name);
    return outcome;
  }

  std::vector<differential::RefTensor> expected;
  if (c.reference) {
    expected = c.reference(c);
  } else {
    Result<differential::RefValues> values = differential::evaluate_reference(built->graph, built->feeds);
    if (!values.ok()) {
      outcome.failure = "reference: " + values.status().to_string();
      return outcome;
    }
    for (const std::string& name : built->outputs) expected.push_back(values->at(name));
  }

  // The normal path.
  Result<std::unique_ptr<runtime::Executor>> executor =
      runtime::Executor::create(session, std::shared_ptr<const runtime::ExecutionPlan>(std::move(plan).value()));
  if (!executor.ok()) {
    outcome.failure = "executor: " + executor.status().to_string();
    return outcome;
  }
  Result<runtime::TensorMap> outputs = (*executor)->run(built->feeds);
  if (!outputs.ok()) {
    outcome.failure = "run: " + outputs.status().to_string();
    return outcome;
  }
  std::vector<HostTensor> got;
  for (const std::string& name : built->outputs) got.push_back(outputs->at(name));
  outcome.failure = compare("plan/executor", got, expected, c.tolerance);
  if (!outcome.failure.empty()) return outcome;

  // A fused op's unfused chain, rewritten by the fusion pass into the kernel under test.
  if (!c.pattern.empty()) {
    outcome.failure = run_pattern(def, c, session, r, *built, expected);
    if (!outcome.failure.empty()) return outcome;
    outcome.fused_pattern = true;
  }

  // Poisoned, sentinel-fenced outputs.
  kernels::testing::OpCall call{.op_type = def.op_type, .domain = def.domain, .version = version, .attrs = c.attrs};
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    call.inputs.push_back(c.inputs[i] ? std::optional<HostTensor>(c.inputs[i]->value) : std::nullopt);
    if (c.inputs[i] && c.inputs[i]->constant) call.constant_inputs.push_back(i);
  }
  call.num_outputs = c.num_outputs;
  call.force_kernel = def.name;
  call.device = device_spec;
  Result<kernels::testing::OpResult> poisoned = kernels::testing::run_op(call);
  if (!poisoned.ok()) {
    outcome.failure = "poisoned run: " + poisoned.status().to_string();
    return outcome;
  }
  if (poisoned->kernel != def.name) {
    outcome.failure = fmt::format("poisoned run: the harness ran {}", poisoned->kernel);
    return outcome;
  }
  outcome.failure = compare("poisoned outputs", poisoned->outputs, expected, c.tolerance);
  outcome.ran = outcome.failure.empty();
  return outcome;
}

struct SweepResult {
  std::vector<std::string> failures;
  std::set<std::string> exemptions_used;
  std::vector<std::string> onnx_verified;  // CPU kernels of ONNX ops without a generator (tests/onnx checks them)
  std::map<std::string, double> seconds;  // per kernel
  int kernels = 0, cases = 0, declined = 0, fused_patterns = 0;
};

// Sweeps every kernel of `registry` for the session's device kind whose name contains `filter`.
SweepResult sweep(const ops::KernelRegistry& registry, runtime::Session& session, const std::string& device_spec,
                  const char* filter = nullptr) {
  SweepResult result;
  const Registries& r = registries();
  const hal::DeviceKind kind = session.device().info().kind;
  const std::string kind_name(hal::device_kind_name(kind));
  for (const ops::KernelDef* def : registry.all()) {
    if (def->device != kind) continue;
    if (filter != nullptr && def->name.find(filter) == std::string::npos) continue;
    const std::string key = fmt::format("{}:{}", kind_name, def->name);
    if (kExemptions.count(key) != 0) {
      result.exemptions_used.insert(key);
      continue;
    }
    const auto generator = generators().find({def->op_type, def->domain});
    if (generator == generators().end() && kind == hal::DeviceKind::kCpu && def->domain.empty()) {
      result.onnx_verified.push_back(key);
      continue;
    }
    ++result.kernels;
    if (generator == generators().end()) {
      result.failures.push_back(fmt::format(
          "{} ({} domain '{}'): no input generator; add one to tests/parity/parity_cases.cc or an exemption with "
          "its reason to kExemptions",
          key, def->op_type, def->domain));
      continue;
    }
    const auto kernel_start = std::chrono::steady_clock::now();
    std::mt19937 rng(static_cast<uint32_t>(std::hash<std::string>{}(def->name) & 0xFFFFFFFF));
    std::vector<std::set<DType>> dtypes_run(def->input_dtypes.size());  // per input index
    int ran = 0;
    std::vector<std::string> declines;
    for (const Case& c : generator->second(rng)) {
      if (!accepts(*def, c)) continue;
      const Outcome outcome = run_case(*def, c, session, r, device_spec);
      if (!outcome.failure.empty()) {
        result.failures.push_back(fmt::format("{} case {}: {}", key, c.label, outcome.failure));
      } else if (outcome.ran) {
        ++result.cases;
        ++ran;
        if (outcome.fused_pattern) ++result.fused_patterns;
        for (size_t i = 0; i < c.inputs.size() && i < dtypes_run.size(); ++i) {
          if (c.inputs[i]) dtypes_run[i].insert(c.inputs[i]->value.dtype);
        }
      } else {
        ++result.declined;
        declines.push_back(fmt::format("{}: {}", c.label, outcome.declined));
      }
    }
    result.seconds[key] = std::chrono::duration<double>(std::chrono::steady_clock::now() - kernel_start).count();
    const std::string declined = declines.empty() ? "" : "; first declined case: " + declines.front();
    if (ran == 0) result.failures.push_back(fmt::format("{}: no generated case ran{}", key, declined));
    // Every dtype a kernel declares for an input must have been exercised there by at least one case.
    for (size_t i = 0; i < def->input_dtypes.size(); ++i) {
      for (DType dtype : def->input_dtypes[i]) {
        if (dtypes_run[i].count(dtype) == 0) {
          result.failures.push_back(
              fmt::format("{}: accepts {} on input {} but no generated case ran with it{}", key, dtype, i, declined));
        }
      }
    }
  }
  return result;
}

class ParitySweep : public testing::TestWithParam<std::string> {};

TEST_P(ParitySweep, EveryKernelMatchesTheReference) {
  Result<std::unique_ptr<runtime::Session>> session = runtime::Session::create(registries().drivers, GetParam());
  if (!session.ok()) GTEST_SKIP() << "no " << GetParam() << " device: " << session.status().to_string();
  const auto start = std::chrono::steady_clock::now();
  const char* filter = std::getenv("HXRT_PARITY_FILTER");
  const SweepResult result = sweep(registries().kernels, **session, GetParam(), filter);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "parity sweep on %s: %d kernels, %d cases compared (%d also as fused patterns), %d declined by their kernel, "
      "%zu failures, %.1f s\n",
      GetParam().c_str(), result.kernels, result.cases, result.fused_patterns, result.declined, result.failures.size(),
      seconds);
  if (!result.onnx_verified.empty()) {
    std::printf("  %zu CPU kernels of ONNX ops verified by the ONNX node tests (tests/onnx) instead\n",
                result.onnx_verified.size());
  }
  for (const auto& [key, kernel_seconds] : result.seconds) {
    if (kernel_seconds > 2.0) std::printf("  %s took %.1f s\n", key.c_str(), kernel_seconds);
  }
  EXPECT_GT(result.kernels, 0);
  EXPECT_GT(result.cases, result.kernels);
  if (filter == nullptr) {
    EXPECT_GT(result.fused_patterns, 0);
  }
  for (const std::string& failure : result.failures) ADD_FAILURE() << failure;
  if (filter == nullptr) {
    const std::string prefix = std::string(hal::device_kind_name((*session)->device().info().kind)) + ":";
    for (const auto& [key, why] : kExemptions) {
      EXPECT_TRUE(!key.starts_with(prefix) || result.exemptions_used.count(key) != 0)
          << "exemption '" << key << "' names no registered kernel; remove it";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, ParitySweep, testing::Values("cpu", "opencl", "cuda"),
                         [](const testing::TestParamInfo<std::string>& param) { return param.param; });

// The gate itself: a kernel of an op without a generator fails the sweep and says what to do.
TEST(ParitySweepGate, AKernelWithoutAGeneratorFails) {
  Result<std::unique_ptr<runtime::Session>> session = runtime::Session::create(registries().drivers, "cpu");
  ASSERT_TRUE(session.ok()) << session.status().to_string();
  ops::KernelRegistry registry;
  ops::KernelDef def;
  def.op_type = "ParityUnknownOp";
  def.domain = "hxrt.test";
  def.name = "ParityUnknownOpF32";
  def.launch = ops::cpu_launch("parity_unknown", [](const ops::CpuComputeContext&) { return ok_status(); });
  ASSERT_TRUE(registry.add(std::move(def)).ok());
  const SweepResult result = sweep(registry, **session, "cpu");
  ASSERT_EQ(result.failures.size(), 1u);
  EXPECT_NE(result.failures[0].find("cpu:ParityUnknownOpF32"), std::string::npos) << result.failures[0];
  EXPECT_NE(result.failures[0].find("no input generator"), std::string::npos) << result.failures[0];
}

}  // namespace
}  // namespace hxrt::parity
