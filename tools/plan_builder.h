// What `hxrt run`, `hxrt inspect` and `hxrt profile` share: the planning flags, and loading a graph file or an ONNX
// model into a runtime::Model (the built-in registries, the session(s) and the plan; Note [ONNX models] in
// hxrt/runtime/model.h), and reading .npy inputs.
//
// Thread-safety: thread-compatible (one command builds and uses one LoadedPlan).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "hxrt/base/status.h"
#include "hxrt/graph/graph.h"
#include "hxrt/runtime/model.h"

namespace hxrt::tools {

struct PlanFlags {
  std::string graph_path;
  std::string device = "cpu";
  int streams = 0;  // runtime::kAutoStreams
  bool no_fusion = false;
  std::vector<std::string> force_kernels;  // "OP_OR_NODE=KERNEL"
  bool tune = false;                       // measure candidate kernels while planning (KernelTuner)
  std::string timing_cache;                // JSON timing cache: read if present; written after --tune measured
  std::vector<std::string> tune_dims;      // "SYMBOL=N": symbolic dims while measuring
  bool no_fallback = false;                // a node without a kernel on the device is an error
  std::vector<std::string> fallback_ops;   // op types placed on the CPU fallback anyway
  bool no_verify_weights = false;          // skip the weights' checksums at load (speed)
};

// Registers GRAPH, --device, --streams, --no-fusion, --tune, --timing-cache, --tune-dim, --no-fallback,
// --fallback-op, --no-verify-weights and (when `with_force_kernel`) --force-kernel on `command`.
void add_plan_options(CLI::App& command, PlanFlags& flags, bool with_force_kernel);

// --snapshot-on-error DIR and --check-numerics, shared by `run` and `profile`.
void add_failure_options(CLI::App& command, std::string& snapshot_dir, bool& check_numerics);

// Counts of a graph, for `inspect`.
struct GraphStats {
  int nodes = 0;
  int values = 0;
  int inputs = 0;
  int outputs = 0;
  int initializers = 0;
  uint64_t weight_bytes = 0;
  static GraphStats of(const graph::Graph& graph);
};

// One graph loaded for a command: the Model (its registries, sessions, plan and executor; the CPU fallback
// session of the heterogeneous split when the device is not the CPU and fallback is on) and what the CLI reports.
// For an ONNX model planned at bind time, model->has_plan() is false until model->prepare() or the first run.
struct LoadedPlan {
  // Measured timings (--timing-cache, --tune), which the model's planning reads and adds to: declared first, so it
  // outlives the model.
  std::unique_ptr<ops::TimingCache> timings;
  size_t timings_saved = 0;  // entries in the --timing-cache file as last written or read
  std::unique_ptr<runtime::Model> model;
  GraphStats loaded;  // the graph as read from the file, before fusion (graph files only)
  std::vector<std::string> warnings;  // e.g. a forced op type that fusion removed
  std::string tuning_report;          // KernelTuner::report() when --tune ran; "" otherwise
};

// Reads flags.graph_path (a graph file, or an ONNX model when it ends in ".onnx"), opens flags.device and builds
// the plan. Errors name the file or the pipeline stage.
Result<std::unique_ptr<LoadedPlan>> load_plan(const PlanFlags& flags);

// Plans an ONNX model planned at bind time for `inputs` (runtime::Model::prepare); then, with --tune, updates the
// tuning report and saves new timings to --timing-cache. Checks the input names of any ONNX model; nothing for a
// graph file.
Status prepare_plan(const PlanFlags& flags, LoadedPlan& loaded, const runtime::TensorMap& inputs);

// "NAME=FILE.npy" specs of --input, read into tensors by name. Errors name the spec or the input.
Result<runtime::TensorMap> read_npy_inputs(const std::vector<std::string>& specs);

// Names the first input of the model (its ONNX inputs, or its graph's) that `inputs` lacks, with its type and the
// flag to add; OK when none is missing.
Status check_inputs_present(const runtime::Model& model, const runtime::TensorMap& inputs);

// "3 nodes planned as 2 launches" for a graph file; "3 ONNX nodes -> 2 hxrt nodes, planned as 2 launches" for an
// ONNX model (whose plan must exist).
std::string plan_size_text(const LoadedPlan& loaded);

}  // namespace hxrt::tools
