// Model: the one-step API — load a graph file for a device and run it with named host tensors, as CANN's
// aclmdlLoadFromFile / aclmdlExecute or ONNX Runtime's InferenceSession do.
//
//   auto model = runtime::Model::load("mlp.hxrt", {.device = "opencl", .fallback_device = "cpu"});
//   Result<runtime::TensorMap> outputs = (*model)->run({{"x", x}});   // HostTensors in, HostTensors out
//
// A Model owns (or borrows, see ModelOptions) everything a run needs, made in the order the layers need them: the
// drivers, the registries bundle (kernels::make_builtin_registries), the session on `device`, a second session on
// `fallback_device` when the plan splits nodes onto it (released when it does not), the ExecutionPlan and, from
// the first run, the Executor (so a Model loaded only to inspect its plan uploads no weights). The plan is reachable for its explanations (plan().describe(), the arbitration reasons).
//
// Errors: a file that does not exist or is not a graph file, an unknown device, a graph hxrt cannot plan — from
// load(); an unknown input name, a missing input, a wrong dtype or shape — from run(), naming the input. Every
// error is a Status; nothing throws.
//
// Layers: Model reads graph files (formats/) and makes the built-in bundle (kernels/), which sit above or beside
// runtime/, so it is built as its own target, hxrt_model, above them; the rest of runtime/ does not link it.
//
// Thread-safety: thread-compatible: one run at a time per Model (load one Model per concurrent caller, or share a
// plan between Executors by hand).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "hxrt/base/status.h"
#include "hxrt/formats/onnx.h"
#include "hxrt/graph/graph.h"
#include "hxrt/hal/driver.h"
#include "hxrt/ops/registries.h"
#include "hxrt/ops/timing_cache.h"
#include "hxrt/runtime/execution_plan.h"
#include "hxrt/runtime/executor.h"
#include "hxrt/runtime/kernel_tuner.h"
#include "hxrt/runtime/session.h"

namespace hxrt::runtime {

struct ModelOptions {
  std::string device = "cpu";  // "cpu", "opencl", "opencl:1" ...
  // Heterogeneous split (PlanOptions::fallback_device): nodes `device` has no kernel for, and the op types in
  // plan.fallback_ops, run on this device (normally "cpu"). "" or the same kind as `device`: no split.
  std::string fallback_device;
  // Fusion, streams, forced kernels, timings, fallback_ops. fallback_device and tuner are set by the Model.
  PlanOptions plan;
  // Measured arbitration while planning (KernelTuner): candidates are measured on `device` into `tune_cache`
  // (borrowed; it must outlive load()). Null: no measuring.
  ops::TimingCache* tune_cache = nullptr;
  TunerOptions tuner;
  // Borrowed bundle to plan with (it must outlive the Model). Null: the Model makes and owns the built-in one.
  const ops::Registries* registries = nullptr;
  // Borrowed drivers (they must outlive the Model). Null: the Model registers the built-in ones.
  const hal::DriverRegistry* drivers = nullptr;
  std::string name = "model";  // names the sessions ("model", "model-fallback")
  // load(): check the weights against the file's checksums (a flipped bit is DataLoss at load); false skips it.
  bool verify_weights = true;
};

// Note [ONNX models]
// load() of a path ending in ".onnx" imports the model (formats/onnx.h) with constant folding on a CPU session of
// the Model's own, then plans the graph as for a graph file; run() takes and returns tensors by their ONNX names
// (an output folded at import, or an input returned as it is, comes back without running anything). A model whose
// graph depends on input values (a Reshape whose shape is computed from an input) is imported again at bind time:
// run() imports it with those inputs' values and every input's shape known, plans it, and keeps the plan for the
// next run with the same values and shapes (at most kMaxOnnxSpecializations; the oldest goes first).
class Model {
 public:
  static constexpr size_t kMaxOnnxSpecializations = 16;

  // Reads the graph file (or ONNX model, Note [ONNX models]) at `path` and plans it (see create). Errors name the
  // file.
  static Result<std::unique_ptr<Model>> load(const std::string& path, const ModelOptions& options = {});
  // Opens the device(s) and plans `graph`.
  static Result<std::unique_ptr<Model>> create(graph::Graph graph, const ModelOptions& options = {});
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // Runs the graph: `inputs` by graph input name, the outputs by graph output name. The first run creates the
  // executor (uploads or maps the weights).
  Result<TensorMap> run(const TensorMap& inputs, const RunOptions& options = {});

  // The plan (of the latest run, for an ONNX model planned at bind time: see has_plan(); aborts without one).
  const ExecutionPlan& plan() const;
  // plan().describe(), or for an ONNX model planned at bind time that has not run yet, what it waits for.
  std::string describe() const;
  // False only for an ONNX model planned at bind time that has not run yet.
  bool has_plan() const { return plan_ != nullptr; }
  // The ONNX import's report (converters chosen, hxrt nodes made, folding, bind-time needs); null for graph files.
  const formats::OnnxImport* onnx_import() const { return onnx_import_.get(); }
  const std::shared_ptr<const ExecutionPlan>& shared_plan() const { return plan_; }
  const graph::Graph& graph() const { return plan_->graph(); }
  std::vector<std::string> input_names() const;
  std::vector<std::string> output_names() const;
  Session& session() const { return *session_; }
  Session* fallback_session() const { return fallback_session_.get(); }  // null unless the plan splits
  // The executor of run(), created on the first call (FailedPrecondition after close()).
  Result<Executor*> executor();
  const ops::Registries& registries() const { return *registries_; }
  // KernelTuner::report() when ModelOptions::tune_cache was set; "" otherwise.
  const std::string& tuning_report() const { return tuning_report_; }

  // Destroys the executor and closes the sessions (the fallback's first); the main session's teardown report.
  Result<TeardownReport> close();

 private:
  struct OnnxState;
  Model();
  static Result<std::unique_ptr<Model>> load_onnx(const std::string& path, const ModelOptions& options);
  // Opens the registries, drivers and sessions of `options` (create's first half).
  Status open(const ModelOptions& options);
  // Plans `graph` on the Model's devices.
  Result<std::shared_ptr<const ExecutionPlan>> build_plan(graph::Graph graph, const ModelOptions& options);
  Result<TensorMap> run_onnx(const TensorMap& inputs, const RunOptions& options);
  // Evaluates a one-node graph of constants on the fold session (formats::NodeEvaluator).
  Result<std::vector<graph::TensorValue>> fold(graph::Graph graph);

  // Declared so that destruction runs executor → plan → sessions → drivers → registries.
  std::unique_ptr<ops::Registries> own_registries_;
  const ops::Registries* registries_ = nullptr;
  std::unique_ptr<hal::DriverRegistry> own_drivers_;
  const hal::DriverRegistry* drivers_ = nullptr;
  std::unique_ptr<Session> session_;
  std::unique_ptr<Session> fallback_session_;
  std::shared_ptr<const ExecutionPlan> plan_;
  std::unique_ptr<Executor> executor_;
  std::string tuning_report_;
  bool closed_ = false;
  // ONNX models only (Note [ONNX models]).
  std::unique_ptr<formats::OnnxImport> onnx_import_;
  std::unique_ptr<OnnxState> onnx_;
};

}  // namespace hxrt::runtime
