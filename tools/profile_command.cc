// `hxrt profile`: runs a graph file N times with the profiler on, prints the summary per op type, kernel and node,
// and writes a Chrome trace (docs/profiling.md).
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "hxrt/formats/npy.h"
#include "hxrt/runtime/executor.h"
#include "plan_builder.h"
#include "profile_report.h"

namespace hxrt::tools {

Status report_profile(const runtime::Profiler& profiler, const std::string& trace_path, size_t rows, std::FILE* out,
                      const std::string& html_path) {
  const runtime::ProfileSummary summary = profiler.summary();
  fmt::print(out, "{}", summary.to_string(rows));
  if (profiler.dropped_runs() > 0) {
    fmt::print(out, "{} run(s) were not recorded (record limit reached)\n", profiler.dropped_runs());
  }
  if (!trace_path.empty()) {
    HXRT_RETURN_IF_ERROR(profiler.write_chrome_trace(trace_path));
    fmt::print(out,
               "trace: {} ({} launches) - open it at https://ui.perfetto.dev (\"Open trace file\") or chrome://tracing\n",
               trace_path, summary.launches);
  }
  if (!html_path.empty()) {
    HXRT_RETURN_IF_ERROR(profiler.write_timeline_html(html_path));
    fmt::print(out, "timeline: {} ({} launches) - open it in any browser, offline\n", html_path, summary.launches);
  }
  return ok_status();
}

Result<std::string> write_npy_snapshot(const std::string& path_stem, const HostTensor& tensor) {
  const std::string path = path_stem + ".npy";
  HXRT_RETURN_IF_ERROR(formats::write_npy(path, tensor));
  return std::filesystem::path(path).filename().string();
}

namespace {

struct ProfileFlags {
  PlanFlags plan;
  std::vector<std::string> inputs;  // "name=file.npy"
  int repeat = 10;
  int warmup = 1;
  std::string trace_path = "trace.json";
  size_t rows = 15;
  std::string snapshot_dir;
  std::string html_path;
  bool check_numerics = false;
};

Status profile_graph(const ProfileFlags& flags) {
  if (flags.repeat < 1) return invalid_argument("--repeat must be at least 1");
  if (flags.warmup < 0) return invalid_argument("--warmup must not be negative");
  HXRT_ASSIGN_OR_RETURN(runtime::TensorMap inputs, read_npy_inputs(flags.inputs));
  HXRT_ASSIGN_OR_RETURN(std::unique_ptr<LoadedPlan> loaded, load_plan(flags.plan));
  for (const std::string& warning : loaded->warnings) fmt::print(stderr, "hxrt profile: warning: {}\n", warning);
  HXRT_RETURN_IF_ERROR(check_inputs_present(*loaded->model, inputs));
  // An ONNX model planned at bind time is imported and planned for these inputs first (Note [ONNX models]).
  HXRT_RETURN_IF_ERROR(prepare_plan(flags.plan, *loaded, inputs));
  const runtime::ExecutionPlan& plan = loaded->model->plan();
  fmt::print("graph {} ('{}'): {} launches on {}:{} ({}), {} stream(s); {} warm-up + {} profiled run(s)\n\n",
             flags.plan.graph_path, plan.graph().name(), plan.objects().size(),
             hal::device_kind_name(plan.device().kind), plan.device().ordinal, plan.device().name,
             plan.num_streams(), flags.warmup, flags.repeat);
  runtime::Profiler& profiler = loaded->model->session().profiler();
  {
    runtime::RunOptions options;
    options.snapshot_dir = flags.snapshot_dir;
    options.snapshot_writer = write_npy_snapshot;
    options.check_numerics = flags.check_numerics;
    for (int i = 0; i < flags.warmup + flags.repeat; ++i) {
      // Warm-up runs fill the tiling cache and the pool; they are not recorded.
      profiler.set_enabled(i >= flags.warmup);
      Result<runtime::TensorMap> result = loaded->model->run(inputs, options);
      if (!result.ok()) {
        return std::move(result).take_status().with_context(
            fmt::format("running graph file '{}' (run {})", flags.plan.graph_path, i + 1));
      }
    }
    profiler.set_enabled(false);
  }
  HXRT_RETURN_IF_ERROR(report_profile(profiler, flags.trace_path, flags.rows, stdout, flags.html_path));
  HXRT_ASSIGN_OR_RETURN(runtime::TeardownReport report, loaded->model->close());
  if (!report.clean()) fmt::print(stderr, "hxrt profile: warning: session teardown: {}\n", report.to_string());
  return ok_status();
}

}  // namespace

void add_profile_command(CLI::App& app, int* exit_code) {
  CLI::App* command =
      app.add_subcommand("profile", "Run a graph file or ONNX model with the profiler: per-op summary and a "
                                    "Chrome/Perfetto trace");
  auto flags = std::make_shared<ProfileFlags>();
  add_plan_options(*command, flags->plan, /*with_force_kernel=*/true);
  command->add_option("--input", flags->inputs, "Graph input from a .npy file: NAME=FILE.npy (repeatable)");
  command->add_option("--repeat,-n", flags->repeat, "Profiled runs")->capture_default_str();
  command->add_option("--warmup", flags->warmup, "Runs before profiling (not recorded)")->capture_default_str();
  command->add_option("--trace", flags->trace_path, "Chrome trace-event JSON to write (\"\" = none)")
      ->capture_default_str();
  command->add_option("--rows", flags->rows, "Rows per summary table")->capture_default_str();
  command->add_option("--html", flags->html_path,
                      "Also write a self-contained HTML timeline (one lane per stream, hover for the args)");
  add_failure_options(*command, flags->snapshot_dir, flags->check_numerics);
  command->callback([flags, exit_code] {
    if (Status status = profile_graph(*flags); !status.ok()) {
      fmt::print(stderr, "hxrt profile: {}\n", status.to_string());
      *exit_code = 1;
    }
  });
}

}  // namespace hxrt::tools
