// `hxrt run`: reads a graph file (or ONNX model) and .npy inputs, plans the graph for a device, runs it (--repeat
// times) and writes every output as DIR/<name>.npy (the name sanitised into a file name: file_stem).
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.h"
#include "hxrt/formats/npy.h"
#include "hxrt/runtime/executor.h"
#include "plan_builder.h"
#include "profile_report.h"

namespace hxrt::tools {
namespace {

struct RunFlags {
  PlanFlags plan;
  std::vector<std::string> inputs;  // "name=file.npy"
  std::string output_dir;
  int repeat = 1;
  std::string snapshot_dir;
  bool check_numerics = false;
  bool keep_going = false;
};

// Output file name for a value name: characters other than [A-Za-z0-9._-] become '_' ("onnx::Add_3" →
// "onnx__Add_3"), so every name maps into the output directory.
std::string file_stem(std::string_view value_name) {
  std::string stem;
  for (char c : value_name) {
    const bool plain =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    stem += plain ? c : '_';
  }
  if (stem.empty() || stem == "." || stem == "..") stem = "output";
  return stem;
}

// "[0.1, -0.25, 3, ... ] min -1 max 3 mean 0.5" for the first few elements.
std::string preview(const HostTensor& tensor) {
  constexpr size_t kShown = 6;
  const auto n = static_cast<size_t>(tensor.shape.num_elements());
  if (dtype_info(tensor.dtype).is_quantized) return "(quantized)";
  if (n == 0) return "[]";
  std::vector<std::string> shown;
  std::string stats;
  if (dtype_info(tensor.dtype).is_float) {
    const std::vector<float> values = tensor.to_f32();
    for (size_t i = 0; i < std::min(n, kShown); ++i) shown.push_back(fmt::format("{:.6g}", values[i]));
    double sum = 0;
    for (float v : values) sum += v;
    const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
    stats = fmt::format(" min {:.6g} max {:.6g} mean {:.6g}", *lo, *hi, sum / static_cast<double>(n));
  } else {
    const std::vector<int64_t> values = tensor.to_i64();
    for (size_t i = 0; i < std::min(n, kShown); ++i) shown.push_back(fmt::format("{}", values[i]));
    const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
    stats = fmt::format(" min {} max {}", *lo, *hi);
  }
  return fmt::format("[{}{}]{}", fmt::join(shown, ", "), n > kShown ? ", ..." : "", stats);
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

Status run_graph(const RunFlags& flags) {
  if (flags.repeat < 1) return invalid_argument("--repeat must be at least 1");
  HXRT_ASSIGN_OR_RETURN(runtime::TensorMap inputs, read_npy_inputs(flags.inputs));
  HXRT_ASSIGN_OR_RETURN(std::unique_ptr<LoadedPlan> loaded, load_plan(flags.plan));
  for (const std::string& warning : loaded->warnings) fmt::print(stderr, "hxrt run: warning: {}\n", warning);
  HXRT_RETURN_IF_ERROR(check_inputs_present(*loaded->model, inputs));
  // An ONNX model planned at bind time is imported and planned for these inputs here (Note [ONNX models]).
  const bool bind_time = !loaded->model->has_plan();
  HXRT_RETURN_IF_ERROR(prepare_plan(flags.plan, *loaded, inputs));
  const runtime::ExecutionPlan& plan = loaded->model->plan();
  const hal::DeviceInfo& device = plan.device();

  fmt::print("graph {} ('{}'): {} on {}:{} ({}), {} stream(s), memory: {}{}\n", flags.plan.graph_path,
             plan.graph().name(), plan_size_text(*loaded), hal::device_kind_name(device.kind), device.ordinal,
             device.name, plan.num_streams(), plan.memory().uses_arena ? "arena" : "pool",
             bind_time ? " (planned at bind time for these inputs)" : "");
  if (const runtime::SplitSummary& split = plan.split(); split.fallback_nodes > 0) {
    fmt::print("heterogeneous split: {} node(s) on the {} fallback ({}), {} copy node(s)\n", split.fallback_nodes,
               hal::device_kind_name(plan.fallback_device()->kind), fmt::join(split.fallback_ops, ", "), split.copies);
  }
  for (const auto& [name, tensor] : inputs) fmt::print("input  {}: {}{}\n", name, tensor.dtype, tensor.shape);

  std::map<std::string, HostTensor, std::less<>> outputs;
  std::vector<double> times_ms;
  {
    runtime::RunOptions options;
    options.snapshot_dir = flags.snapshot_dir;
    options.snapshot_writer = write_npy_snapshot;
    options.check_numerics = flags.check_numerics;
    options.failure_mode = flags.keep_going ? runtime::FailureMode::kContinue : runtime::FailureMode::kStop;
    for (int i = 0; i < flags.repeat; ++i) {
      const auto start = std::chrono::steady_clock::now();
      Result<runtime::TensorMap> result = loaded->model->run(inputs, options);
      const auto end = std::chrono::steady_clock::now();
      if (!result.ok()) {
        return std::move(result).take_status().with_context(
            fmt::format("running graph file '{}'", flags.plan.graph_path));
      }
      times_ms.push_back(std::chrono::duration<double, std::milli>(end - start).count());
      if (i + 1 == flags.repeat) outputs = std::move(result).value();
    }
  }

  std::error_code error;
  std::filesystem::create_directories(flags.output_dir, error);
  if (error) return unavailable("cannot create output directory '{}': {}", flags.output_dir, error.message());
  std::map<std::string, std::string> written;  // file stem → value name
  for (const auto& [name, tensor] : outputs) {
    std::string stem = file_stem(name);
    while (written.contains(stem)) stem += "_";
    written.emplace(stem, name);
    const std::string path = (std::filesystem::path(flags.output_dir) / (stem + ".npy")).string();
    HXRT_RETURN_IF_ERROR_CTX(formats::write_npy(path, tensor), "writing output '{}'", name);
    fmt::print("output {}: {}{} -> {}\n  {}\n", name, tensor.dtype, tensor.shape, path, preview(tensor));
  }
  const auto [fastest, slowest] = std::minmax_element(times_ms.begin(), times_ms.end());
  fmt::print("run time: median {:.3f} ms over {} run(s) (min {:.3f} ms, max {:.3f} ms)\n", median(times_ms),
             times_ms.size(), *fastest, *slowest);

  HXRT_ASSIGN_OR_RETURN(runtime::TeardownReport report, loaded->model->close());
  if (!report.clean()) fmt::print(stderr, "hxrt run: warning: session teardown: {}\n", report.to_string());
  return ok_status();
}

}  // namespace

void add_run_command(CLI::App& app, int* exit_code) {
  CLI::App* command =
      app.add_subcommand("run", "Run a graph file or ONNX model on .npy inputs and write its outputs as .npy");
  auto flags = std::make_shared<RunFlags>();
  add_plan_options(*command, flags->plan, /*with_force_kernel=*/true);
  command->add_option("--input", flags->inputs, "Graph input from a .npy file: NAME=FILE.npy (repeatable)");
  command
      ->add_option("--output-dir", flags->output_dir,
                   "Directory for the outputs: <name>.npy each, every character of the output name other than "
                   "A-Z a-z 0-9 . _ - written as '_' (ONNX names such as 'onnx::Add_3' or 'layer/out:0')")
      ->required();
  command->add_option("--repeat", flags->repeat, "Runs to time; the median is printed")->capture_default_str();
  add_failure_options(*command, flags->snapshot_dir, flags->check_numerics);
  command->add_flag("--keep-going", flags->keep_going,
                    "On a failure, keep running the launches that do not depend on it and report every failure");
  command->callback([flags, exit_code] {
    Status status = run_graph(*flags);
    if (!status.ok()) {
      fmt::print(stderr, "hxrt run: {}\n", status.to_string());
      *exit_code = 1;
    }
  });
}

}  // namespace hxrt::tools
