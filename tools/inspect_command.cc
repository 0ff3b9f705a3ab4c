// `hxrt inspect`: plans a graph file for a device without running it and prints the plan — kernels chosen and why,
// fusion groups, streams and events, the memory plan — plus graph statistics, as text or JSON. For an ONNX model,
// the model and what each ONNX node became come first (onnx_report.h); a model planned at bind time is planned for
// the --input values when they are given.
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>  // ordered_json: keys print in the order below

#include "chat_template_flag.h"
#include "commands.h"
#include "model_report.h"
#include "onnx_report.h"
#include "plan_builder.h"
#include "text_format.h"
#include "hxrt/llm/model_cache.h"

namespace hxrt::tools {
namespace {

struct InspectFlags {
  PlanFlags plan;
  std::vector<std::string> inputs;  // "name=file.npy": an ONNX model planned at bind time is planned for them
  bool json = false;
  std::string model;          // --model FILE.gguf: the LLM report (model_report.h) instead of a plan
  std::string chat_template;  // --chat-template FILE|NAME, with --model
};

Status inspect_model(const InspectFlags& flags) {
  HXRT_ASSIGN_OR_RETURN(std::string chat_template, resolve_chat_template_flag(flags.chat_template));
  HXRT_ASSIGN_OR_RETURN(nlohmann::ordered_json report,
                        gguf_model_json({.path = flags.model, .chat_template = std::move(chat_template)}));
  fmt::print("{}", flags.json ? report.dump(2) + "\n" : describe_gguf_model(report));
  return ok_status();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

nlohmann::ordered_json stats_json(const GraphStats& s) {
  return {{"nodes", s.nodes},
          {"values", s.values},
          {"inputs", s.inputs},
          {"outputs", s.outputs},
          {"initializers", s.initializers},
          {"weight_bytes", s.weight_bytes}};
}

nlohmann::ordered_json values_json(const graph::Graph& g, const std::vector<graph::ValueId>& ids) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (graph::ValueId id : ids) {
    if (id == graph::kNoValue) {
      out.push_back(nullptr);
      continue;
    }
    out.push_back({{"name", g.value(id).name}, {"type", g.value(id).desc.to_string()}});
  }
  return out;
}

nlohmann::ordered_json plan_json(const LoadedPlan& loaded, const std::string& path) {
  const runtime::ExecutionPlan& plan = loaded.model->plan();
  const graph::Graph& g = plan.graph();
  nlohmann::ordered_json nodes = nlohmann::ordered_json::array();
  for (size_t i = 0; i < plan.objects().size(); ++i) {
    const runtime::ExecutionObject& object = plan.objects()[i];
    const graph::Node& node = g.node(object.node);
    nodes.push_back({{"index", i},
                     {"id", node.stable_id},
                     {"name", node.name},
                     {"op_type", node.op_type},
                     {"domain", node.domain},
                     {"version", node.version},
                     {"attrs", node.attrs.to_string()},
                     {"params", object.params ? object.params->to_string() : ""},
                     {"kernel",
                      {{"name", object.kernel->name},
                       {"impl_version", object.kernel->impl_version},
                       {"kind", ops::kernel_kind_name(object.kernel->kind)},
                       {"priority", object.kernel->priority},
                       {"description", object.kernel->description}}},
                     {"selection", lines_of(object.selection_reason)},
                     {"stream", object.stream},
                     {"wait_events", object.wait_events},
                     {"record_event", object.record_event},
                     {"fusion_id", object.fusion_id},
                     {"fused_from", node.fused_from},
                     {"fused_ids", node.fused_ids},
                     {"inputs", values_json(g, object.inputs)},
                     {"outputs", values_json(g, object.outputs)}});
  }
  nlohmann::ordered_json groups = nlohmann::ordered_json::array();
  for (const ops::FusionGroup& group : plan.fusion_groups()) {
    groups.push_back({{"fusion_id", group.fusion_id},
                      {"pattern", group.pattern},
                      {"fused_node", group.fused_node},
                      {"fused_id", group.fused_id},
                      {"original_nodes", group.original_nodes},
                      {"original_ids", group.original_ids}});
  }
  nlohmann::ordered_json checks = nlohmann::ordered_json::array();
  for (const ops::DimCheck& check : plan.dim_checks()) {
    checks.push_back({{"a", check.a.to_string()}, {"b", check.b.to_string()}, {"what", check.what}});
  }
  const runtime::MemoryPlanSummary& memory = plan.memory();
  nlohmann::ordered_json placements = nlohmann::ordered_json::array();
  for (graph::ValueId id = 0; id < g.num_values(); ++id) {
    const runtime::ValuePlan& v = plan.values()[static_cast<size_t>(id)];
    if (v.arena_offset >= 0)
      placements.push_back({{"value", g.value(id).name}, {"offset", v.arena_offset}, {"bytes", v.bytes}});
  }
  const hal::DeviceInfo& device = plan.device();
  return {
      {"graph_file", path},
      {"graph", g.name()},
      {"device", {{"kind", hal::device_kind_name(device.kind)}, {"ordinal", device.ordinal}, {"name", device.name}}},
      {"loaded", stats_json(loaded.loaded)},
      {"planned", stats_json(GraphStats::of(g))},
      {"inputs", values_json(g, g.inputs())},
      {"outputs", values_json(g, g.outputs())},
      {"streams", plan.num_streams()},
      {"events", plan.num_events()},
      {"nodes", std::move(nodes)},
      {"fusion_groups", std::move(groups)},
      {"dim_checks", std::move(checks)},
      {"memory",
       {{"plan", memory.uses_arena ? "arena" : "pool"},
        {"arena_bytes", memory.arena_bytes},
        {"naive_bytes", memory.naive_bytes},
        {"intermediates", memory.intermediates},
        {"dynamic_intermediates", memory.dynamic_intermediates},
        {"arena_placements", std::move(placements)}}},
      {"warnings", loaded.warnings},
      {"kernel_measurements", lines_of(loaded.tuning_report)}};
}

std::string stats_line(const GraphStats& s) {
  return fmt::format("{} nodes, {} values ({} inputs, {} outputs, {} initializers), weights {} ({} bytes)", s.nodes,
                     s.values, s.inputs, s.outputs, s.initializers, human_bytes(s.weight_bytes), s.weight_bytes);
}

// `hxrt inspect model.onnx`: the ONNX report, then the plan when there is one.
Status inspect_onnx(const InspectFlags& flags, LoadedPlan& loaded) {
  runtime::Model& model = *loaded.model;
  if (!flags.inputs.empty()) {
    HXRT_ASSIGN_OR_RETURN(runtime::TensorMap inputs, read_npy_inputs(flags.inputs));
    HXRT_RETURN_IF_ERROR(check_inputs_present(model, inputs));
    HXRT_RETURN_IF_ERROR(prepare_plan(flags.plan, loaded, inputs));
  }
  const OnnxReportInput report{.path = flags.plan.graph_path,
                               .model = model.onnx_import(),
                               .planned = model.plan_onnx_import(),
                               .plan = model.has_plan() ? &model.plan() : nullptr};
  if (flags.json) {
    nlohmann::ordered_json out;
    if (report.plan != nullptr) {
      out = plan_json(loaded, flags.plan.graph_path);
      out.erase("loaded");
    } else {
      out = {{"graph_file", flags.plan.graph_path}, {"warnings", loaded.warnings}};
    }
    out["onnx"] = onnx_json(report);
    fmt::print("{}\n", out.dump(2));
    return ok_status();
  }
  for (const std::string& warning : loaded.warnings) fmt::print("warning: {}\n", warning);
  fmt::print("{}", describe_onnx(report));
  if (report.plan == nullptr) return ok_status();
  fmt::print("planned graph: {}\n", stats_line(GraphStats::of(report.plan->graph())));
  fmt::print("{}", report.plan->describe());
  if (!loaded.tuning_report.empty()) fmt::print("kernel measurements (--tune):\n{}", loaded.tuning_report);
  return ok_status();
}

Status inspect_graph(const InspectFlags& flags) {
  HXRT_ASSIGN_OR_RETURN(std::unique_ptr<LoadedPlan> loaded, load_plan(flags.plan));
  if (loaded->model->onnx_import() != nullptr) {
    HXRT_RETURN_IF_ERROR(inspect_onnx(flags, *loaded));
  } else if (!flags.inputs.empty()) {
    return invalid_argument("--input is for ONNX models planned at bind time; a graph file's plan does not depend "
                            "on its inputs");
  } else if (flags.json) {
    fmt::print("{}\n", plan_json(*loaded, flags.plan.graph_path).dump(2));
  } else {
    for (const std::string& warning : loaded->warnings) fmt::print("warning: {}\n", warning);
    fmt::print("graph file {}: {}\n", flags.plan.graph_path, stats_line(loaded->loaded));
    fmt::print("planned graph: {}\n", stats_line(GraphStats::of(loaded->model->plan().graph())));
    fmt::print("{}", loaded->model->plan().describe());
    if (!loaded->tuning_report.empty()) fmt::print("kernel measurements (--tune):\n{}", loaded->tuning_report);
  }
  HXRT_ASSIGN_OR_RETURN(runtime::TeardownReport report, loaded->model->close());
  if (!report.clean()) fmt::print(stderr, "hxrt inspect: warning: session teardown: {}\n", report.to_string());
  return ok_status();
}

}  // namespace

void add_inspect_command(CLI::App& app, int* exit_code) {
  CLI::App* command =
      app.add_subcommand("inspect", "Plan a graph file or ONNX model for a device and print the plan (for an ONNX "
                                    "model also what each ONNX node became)");
  auto flags = std::make_shared<InspectFlags>();
  add_plan_options(*command, flags->plan, /*with_force_kernel=*/true);
  command->add_option("--input", flags->inputs,
                      "Input from a .npy file: NAME=FILE.npy (repeatable). An ONNX model whose graph depends on input "
                      "values is imported and planned for these inputs");
  command->add_flag("--json", flags->json, "Print JSON instead of text");
  command->add_option("--model", flags->model,
                      "A GGUF model (a file, or a model cache name: " + llm::named_model_list() +
                          ") instead of a graph: its family, configuration, tensor types, tokenizer and the chat "
                          "template in use, with an example rendered by it");
  add_chat_template_option(command, &flags->chat_template);
  // Either a graph or --model.
  command->get_option("graph")->required(false);
  command->callback([flags, exit_code] {
    Status status;
    if (!flags->model.empty()) {
      status = flags->plan.graph_path.empty()
                   ? inspect_model(*flags)
                   : invalid_argument("give a graph file or --model, not both");
    } else if (!flags->chat_template.empty()) {
      status = invalid_argument("--chat-template goes with --model");
    } else if (flags->plan.graph_path.empty()) {
      status = invalid_argument("a graph file (.hxrt, .onnx) or --model FILE.gguf is required");
    } else {
      status = inspect_graph(*flags);
    }
    if (!status.ok()) {
      fmt::print(stderr, "hxrt inspect: {}\n", status.to_string());
      *exit_code = 1;
    }
  });
}

}  // namespace hxrt::tools
