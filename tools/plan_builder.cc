#include "plan_builder.h"

#include <charconv>
#include <filesystem>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "hxrt/formats/graph_file.h"
#include "hxrt/formats/npy.h"
#include "hxrt/formats/onnx.h"

namespace hxrt::tools {
namespace {

struct ForcedKernel {
  std::string target;  // node name or op type
  std::string kernel;
};

Result<ForcedKernel> parse_forced(const std::string& text) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    return invalid_argument("--force-kernel '{}': expected OP_OR_NODE=KERNEL (e.g. MatMul=BatchMatMulV3)", text);
  }
  return ForcedKernel{text.substr(0, eq), text.substr(eq + 1)};
}

Result<std::pair<std::string, int64_t>> parse_dim(const std::string& text) {
  const size_t eq = text.find('=');
  int64_t value = 0;
  const char* end = text.data() + text.size();
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size() ||
      std::from_chars(text.data() + eq + 1, end, value).ptr != end || value < 0) {
    return invalid_argument("--tune-dim '{}': expected SYMBOL=N with N >= 0 (e.g. batch=8)", text);
  }
  return std::pair<std::string, int64_t>(text.substr(0, eq), value);
}

// Node names and op types of an ONNX import's hxrt nodes ("name (Op)" each), before fusion.
std::set<std::string, std::less<>> targets_of(const formats::OnnxImport& import) {
  std::set<std::string, std::less<>> names;
  for (const formats::OnnxNodeReport& node : import.nodes) {
    for (const std::string& text : node.hxrt_nodes) {
      const size_t open = text.rfind(" (");
      if (open == std::string::npos || text.back() != ')') continue;
      names.insert(text.substr(0, open));
      names.insert(text.substr(open + 2, text.size() - open - 3));
    }
  }
  return names;
}

// Node names and op types of a graph (what a --force-kernel target may name).
std::set<std::string, std::less<>> targets_of(const graph::Graph& graph) {
  std::set<std::string, std::less<>> names;
  for (graph::NodeId id = 0; id < graph.num_nodes(); ++id) {
    if (!graph.has_node(id)) continue;
    names.insert(graph.node(id).name);
    names.insert(graph.node(id).op_type);
  }
  return names;
}

Status check_forced_targets(const std::vector<ForcedKernel>& forced,
                            const std::set<std::string, std::less<>>& targets) {
  for (const ForcedKernel& f : forced) {
    if (!targets.contains(f.target)) {
      return not_found("--force-kernel {}={}: the graph has no node or op type '{}'", f.target, f.kernel, f.target);
    }
  }
  return ok_status();
}

}  // namespace

void add_plan_options(CLI::App& command, PlanFlags& flags, bool with_force_kernel) {
  command.add_option("graph", flags.graph_path, "hxrt graph file (.hxrt) or ONNX model (.onnx)")->required();
  command.add_option("--device", flags.device, "Device to plan for (cpu, opencl, opencl:1 ...)")->capture_default_str();
  command.add_option("--streams", flags.streams,
                     "Most streams to spread independent branches over (0: the device's default, 1 on the CPU and "
                     "4 on OpenCL/CUDA)")
      ->capture_default_str()
      ->check(CLI::Range(0, 64));
  command.add_flag("--no-fusion", flags.no_fusion, "Do not apply fusion patterns");
  command.add_flag("--no-verify-weights", flags.no_verify_weights,
                   "Do not check the weights against their checksums at load (faster for large files)");
  command.add_flag("--tune", flags.tune,
                   "Measure every compatible kernel of a node on the device and choose the fastest (once per shape "
                   "bucket; see --timing-cache)");
  command.add_option("--timing-cache", flags.timing_cache,
                     "Timing cache JSON: measured arbitration reads it when it exists; --tune adds to it and saves it");
  command.add_flag("--no-fallback", flags.no_fallback,
                   "Fail on a node the device has no kernel for, instead of running it on the CPU with copies");
  command.add_option("--fallback-op", flags.fallback_ops,
                     "Run every node of this op type on the CPU fallback even where the device has a kernel "
                     "(repeatable)");
  command.add_option("--tune-dim", flags.tune_dims, "Value of a symbolic dim in measured buckets (with --tune or --timing-cache): SYMBOL=N (repeatable)");
  if (with_force_kernel) {
    command.add_option("--force-kernel", flags.force_kernels,
                       "Force a kernel for a node name or an op type: OP_OR_NODE=KERNEL (repeatable)");
  }
}

void add_failure_options(CLI::App& command, std::string& snapshot_dir, bool& check_numerics) {
  command.add_option("--snapshot-on-error", snapshot_dir,
                     "On a failure, write the failing op's inputs here as .npy with manifest.json");
  command.add_flag("--check-numerics", check_numerics,
                   "Fail at the first op whose float output holds NaN or Inf (waits for every launch)");
}

GraphStats GraphStats::of(const graph::Graph& graph) {
  GraphStats stats;
  for (graph::NodeId id = 0; id < graph.num_nodes(); ++id) stats.nodes += graph.has_node(id) ? 1 : 0;
  stats.values = graph.num_values();
  stats.inputs = static_cast<int>(graph.inputs().size());
  stats.outputs = static_cast<int>(graph.outputs().size());
  stats.initializers = static_cast<int>(graph.initializers().size());
  for (graph::ValueId id : graph.initializers()) stats.weight_bytes += graph.value(id).weight.size;
  return stats;
}

Result<std::unique_ptr<LoadedPlan>> load_plan(const PlanFlags& flags) {
  auto loaded = std::make_unique<LoadedPlan>();
  runtime::ModelOptions options{.device = flags.device, .name = "cli"};
  options.plan.fuse = !flags.no_fusion;
  options.plan.max_streams = flags.streams;
  std::vector<ForcedKernel> forced;
  for (const std::string& text : flags.force_kernels) {
    HXRT_ASSIGN_OR_RETURN(ForcedKernel f, parse_forced(text));
    options.plan.selection.forced.insert_or_assign(f.target, f.kernel);
    forced.push_back(std::move(f));
  }

  // An ONNX model is imported by Model::load (Note [ONNX models]); its targets are checked once it is imported.
  const bool onnx = formats::is_onnx_path(flags.graph_path);
  graph::Graph graph;
  if (!onnx) {
    HXRT_ASSIGN_OR_RETURN(graph,
                          formats::read_graph_file(flags.graph_path, {.verify_weights = !flags.no_verify_weights}));
    loaded->loaded = GraphStats::of(graph);
    HXRT_RETURN_IF_ERROR(check_forced_targets(forced, targets_of(graph)));
  }

  // Measured arbitration: timings from the cache file, and from measuring with --tune.
  for (const std::string& text : flags.tune_dims) {
    HXRT_ASSIGN_OR_RETURN(auto dim, parse_dim(text));
    options.tuner.dims.insert_or_assign(dim.first, dim.second);
  }
  // The Model keeps pointers to the cache (an ONNX model planned at bind time plans with it later): the LoadedPlan
  // owns it.
  loaded->timings = std::make_unique<ops::TimingCache>();
  ops::TimingCache& timings = *loaded->timings;
  if (!flags.timing_cache.empty() && std::filesystem::exists(flags.timing_cache)) {
    HXRT_RETURN_IF_ERROR(timings.load(flags.timing_cache));
  }
  if (flags.tune) {
    options.tune_cache = &timings;
  } else if (!flags.timing_cache.empty()) {
    options.plan.selection.timings = &timings;
    options.plan.selection.bucket_dims = options.tuner.dims;
  }

  // Heterogeneous split: nodes the device cannot run go to the CPU, with copies (Note [Heterogeneous split]).
  if (!flags.fallback_ops.empty() && flags.no_fallback) {
    return invalid_argument("--fallback-op needs a non-CPU --device and the fallback (not --no-fallback)");
  }
  if (!flags.no_fallback) {
    options.fallback_device = "cpu";
    options.plan.fallback_ops = flags.fallback_ops;
  }

  const size_t timings_before = timings.size();
  Result<std::unique_ptr<runtime::Model>> model = onnx ? runtime::Model::load(flags.graph_path, options)
                                                      : runtime::Model::create(std::move(graph), options);
  if (!model.ok()) {
    Status status = std::move(model).take_status();
    // A CPU device has no fallback, which the Model reports in its own words; the CLI names its flags.
    if (!flags.fallback_ops.empty() && status.message().find("fallback ops") != std::string::npos) {
      return invalid_argument("--fallback-op needs a non-CPU --device and the fallback (not --no-fallback)");
    }
    // The ONNX path names the model and the stage itself (importing, planning).
    if (onnx) return status;
    return std::move(status).with_context(fmt::format("planning graph file '{}'", flags.graph_path));
  }
  loaded->model = std::move(model).value();
  if (onnx) {
    // A model planned at bind time was imported only up to the node needing values: its targets are not all known.
    if (!loaded->model->has_plan()) {
      if (!forced.empty()) {
        loaded->warnings.push_back("--force-kernel targets of a model planned at bind time are not checked");
      }
      return loaded;
    }
    HXRT_RETURN_IF_ERROR(check_forced_targets(forced, targets_of(*loaded->model->onnx_import())));
  }
  loaded->timings_saved = timings.size();
  if (flags.tune) {
    loaded->tuning_report = loaded->model->tuning_report();
    if (loaded->tuning_report.empty()) loaded->tuning_report = "no node has more than one compatible kernel\n";
    if (!flags.timing_cache.empty() && timings.size() != timings_before) {
      HXRT_RETURN_IF_ERROR(timings.save(flags.timing_cache));
    }
  }

  const auto planned_targets = targets_of(loaded->model->graph());
  for (const ForcedKernel& f : forced) {
    if (!planned_targets.contains(f.target)) {
      loaded->warnings.push_back(
          fmt::format("--force-kernel {}={} had no effect: fusion replaced every '{}' (add --no-fusion to keep them)",
                      f.target, f.kernel, f.target));
    }
  }
  return loaded;
}

Status prepare_plan(const PlanFlags& flags, LoadedPlan& loaded, const runtime::TensorMap& inputs) {
  if (loaded.model->has_plan() && loaded.model->onnx_import() == nullptr) return ok_status();
  HXRT_RETURN_IF_ERROR(loaded.model->prepare(inputs));
  if (flags.tune) {
    loaded.tuning_report = loaded.model->tuning_report();
    if (loaded.tuning_report.empty()) loaded.tuning_report = "no node has more than one compatible kernel\n";
    if (!flags.timing_cache.empty() && loaded.timings->size() != loaded.timings_saved) {
      HXRT_RETURN_IF_ERROR(loaded.timings->save(flags.timing_cache));
      loaded.timings_saved = loaded.timings->size();
    }
  }
  return ok_status();
}

Result<runtime::TensorMap> read_npy_inputs(const std::vector<std::string>& specs) {
  runtime::TensorMap inputs;
  for (const std::string& spec : specs) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
      return invalid_argument("--input '{}': expected NAME=FILE.npy", spec);
    }
    const std::string name = spec.substr(0, eq);
    if (inputs.contains(name)) return invalid_argument("--input '{}' is given twice", name);
    Result<HostTensor> tensor = formats::read_npy(spec.substr(eq + 1));
    if (!tensor.ok()) return std::move(tensor).take_status().with_context(fmt::format("reading input '{}'", name));
    inputs.emplace(name, std::move(tensor).value());
  }
  return inputs;
}

Status check_inputs_present(const runtime::Model& model, const runtime::TensorMap& inputs) {
  if (const formats::OnnxImport* import = model.onnx_import()) {
    for (size_t i = 0; i < import->inputs.size(); ++i) {
      const std::string& name = import->inputs[i];
      if (inputs.contains(name)) continue;
      const std::string type = i < import->input_types.size() ? import->input_types[i].to_string() : "?";
      return invalid_argument("missing input '{}' ({}): pass --input {}=FILE.npy", name, type, name);
    }
    return ok_status();
  }
  const graph::Graph& graph = model.plan().graph();
  for (graph::ValueId id : graph.inputs()) {
    const graph::Value& value = graph.value(id);
    if (!inputs.contains(value.name)) {
      return invalid_argument("missing input '{}' ({}): pass --input {}=FILE.npy", value.name, value.desc.to_string(),
                              value.name);
    }
  }
  return ok_status();
}

std::string plan_size_text(const LoadedPlan& loaded) {
  const runtime::ExecutionPlan& plan = loaded.model->plan();
  if (const formats::OnnxImport* import = loaded.model->plan_onnx_import()) {
    int hxrt_nodes = 0;
    for (const formats::OnnxNodeReport& node : import->nodes) {
      hxrt_nodes += static_cast<int>(node.hxrt_nodes.size());
    }
    return fmt::format("{} ONNX nodes -> {} hxrt nodes, planned as {} launches", import->nodes.size(), hxrt_nodes,
                       plan.objects().size());
  }
  return fmt::format("{} nodes planned as {} launches", loaded.loaded.nodes, plan.objects().size());
}

}  // namespace hxrt::tools
