#include "onnx_report.h"

#include <map>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace hxrt::tools {
namespace {

// One hxrt node an ONNX node became, and where the plan put it.
struct HxrtNodeFate {
  std::string name;
  std::string op_type;
  const runtime::ExecutionObject* object = nullptr;  // null: not in the plan
  std::string fused_into;                            // the fused node that replaced it; "" when not fused
};

// "name (Op)" as OnnxNodeReport::hxrt_nodes writes it.
std::pair<std::string, std::string> split_node_text(const std::string& text) {
  const size_t open = text.rfind(" (");
  if (open == std::string::npos || text.back() != ')') return {text, ""};
  return {text.substr(0, open), text.substr(open + 2, text.size() - open - 3)};
}

// The plan's object of each node name, fused nodes also under the names of the nodes they replaced.
class PlanIndex {
 public:
  explicit PlanIndex(const runtime::ExecutionPlan* plan) : plan_(plan) {
    if (plan == nullptr) return;
    for (const runtime::ExecutionObject& object : plan->objects()) {
      const graph::Node& node = plan->graph().node(object.node);
      by_name_.emplace(node.name, &object);
      for (const std::string& original : node.fused_from) by_name_.emplace(original, &object);
    }
  }

  HxrtNodeFate fate(const std::string& text) const {
    HxrtNodeFate fate;
    std::tie(fate.name, fate.op_type) = split_node_text(text);
    auto it = by_name_.find(fate.name);
    if (it == by_name_.end()) return fate;
    fate.object = it->second;
    const graph::Node& node = plan_->graph().node(fate.object->node);
    if (node.name != fate.name) fate.fused_into = node.name;
    return fate;
  }

  std::string device_of(const runtime::ExecutionObject& object) const {
    const hal::DeviceInfo& device = plan_->device_info(object.device);
    return object.device == runtime::kMainDevice
               ? fmt::format("{}", hal::device_kind_name(device.kind))
               : fmt::format("{} (fallback)", hal::device_kind_name(device.kind));
  }

 private:
  const runtime::ExecutionPlan* plan_;
  std::map<std::string, const runtime::ExecutionObject*, std::less<>> by_name_;
};

// The arbitration line of the chosen kernel ("* K v1 (...): chosen: ..."), or the reason's first line.
std::string chosen_reason(const std::string& reason) {
  std::optional<std::string> first;
  for (size_t start = 0; start < reason.size();) {
    const size_t end = std::min(reason.find('\n', start), reason.size());
    std::string line = reason.substr(start, end - start);
    const size_t text = line.find_first_not_of(' ');
    if (text != std::string::npos) {
      line = line.substr(text);
      if (line.starts_with("* ")) return line.substr(2);
      if (!first) first = line;
    }
    start = end + 1;
  }
  return first.value_or("");
}

std::string opsets_text(const std::map<std::string, int>& opsets) {
  std::vector<std::string> parts;
  for (const auto& [domain, version] : opsets) {
    parts.push_back(fmt::format("{} {}", domain.empty() ? "ai.onnx" : domain, version));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

// What becomes of an ONNX node that emitted no hxrt node.
std::string nodeless_fate(const formats::OnnxNodeReport& node) {
  if (node.folded > 0) return fmt::format("folded at import ({} hxrt node(s) evaluated on the host)", node.folded);
  if (node.op_type == "Constant" && node.domain.empty()) return "folded at import (a constant)";
  if (node.aliased) return "alias (its output is another value; no node)";
  return "no hxrt node";
}

struct OutputInfo {
  std::string name;
  std::string type;    // "" when unknown (planned at bind time)
  std::string source;  // "graph output 'v'", "folded at import", "input 'x' returned as it is"
};

std::vector<OutputInfo> outputs_of(const OnnxReportInput& report) {
  std::vector<OutputInfo> outputs;
  if (report.planned == nullptr) {
    // A bind-time import stops at the node needing values, before the outputs: they are known once it is bound.
    for (const formats::OnnxOutput& o : report.model->outputs) outputs.push_back({o.name, "", ""});
    return outputs;
  }
  for (const formats::OnnxOutput& o : report.planned->outputs) {
    OutputInfo info{.name = o.name};
    if (o.constant) {
      info.type = fmt::format("{}{}", o.constant->dtype, o.constant->shape);
      info.source = "folded at import";
    } else if (!o.input.empty()) {
      for (size_t i = 0; i < report.planned->inputs.size(); ++i) {
        if (report.planned->inputs[i] == o.input && i < report.planned->input_types.size()) {
          info.type = report.planned->input_types[i].to_string();
        }
      }
      info.source = fmt::format("input '{}' returned as it is", o.input);
    } else {
      if (Result<graph::ValueId> id = report.plan->graph().find_value(o.value); id.ok()) {
        info.type = report.plan->graph().value(*id).desc.to_string();
      }
      info.source = o.value == o.name ? "graph output" : fmt::format("graph output '{}'", o.value);
    }
    outputs.push_back(std::move(info));
  }
  return outputs;
}

// The ONNX nodes to list: those of the plan's import, or those the load-time import got through.
const formats::OnnxImport& nodes_import(const OnnxReportInput& report) {
  return report.planned != nullptr ? *report.planned : *report.model;
}

}  // namespace

std::string describe_onnx(const OnnxReportInput& report) {
  const formats::OnnxImport& model = *report.model;
  std::string out = fmt::format("ONNX model {}: IR version {}, producer '{}', opsets {}\n", report.path,
                                model.ir_version, model.producer, opsets_text(model.opsets));
  out += "ONNX inputs:\n";
  for (size_t i = 0; i < model.inputs.size(); ++i) {
    out += fmt::format("  {}: {}\n", model.inputs[i],
                       i < model.input_types.size() ? model.input_types[i].to_string() : "?");
  }
  out += "ONNX outputs:\n";
  const std::vector<OutputInfo> outputs = outputs_of(report);
  if (outputs.empty() && model.bind_time) out += "  (known once the model is imported for input values)\n";
  for (const OutputInfo& o : outputs) {
    out += fmt::format("  {}: {}{}\n", o.name, o.type.empty() ? "(known at bind time)" : o.type,
                       o.source.empty() ? "" : fmt::format(" ({})", o.source));
  }
  if (model.bind_time) {
    const std::vector<std::string>& values = model.bind_time->input_values;
    out += fmt::format("planned at bind time: the graph depends on {}\n  because {}\n",
                       values.empty() ? std::string("the shapes of its inputs")
                                      : fmt::format("the values of input(s) {}", fmt::join(values, ", ")),
                       model.bind_time->reason);
    if (report.plan == nullptr) {
      out += "  pass --input NAME=FILE.npy for every input to import and plan it for them (the nodes below stop at "
             "the node that needs them)\n";
    } else {
      out += "  imported and planned for the --input values given\n";
    }
  }

  const PlanIndex index(report.plan);
  const formats::OnnxImport& listed = nodes_import(report);
  out += fmt::format("ONNX nodes ({}):\n", listed.nodes.size());
  std::vector<std::string> on_fallback;
  for (size_t i = 0; i < listed.nodes.size(); ++i) {
    const formats::OnnxNodeReport& node = listed.nodes[i];
    out += fmt::format("  [{}] {} ({}{}{}, opset {}) converter {}", i, node.name, node.domain,
                       node.domain.empty() ? "" : ".", node.op_type, node.opset, node.converter);
    const bool stopped_here = report.planned == nullptr && model.bind_time && i + 1 == listed.nodes.size();
    if (stopped_here) {
      out += ": needs values computed from the inputs, converted at bind time\n";
      continue;
    }
    if (node.hxrt_nodes.empty()) {
      out += fmt::format(": {}\n", nodeless_fate(node));
      continue;
    }
    out += "\n";
    for (const std::string& text : node.hxrt_nodes) {
      const HxrtNodeFate fate = index.fate(text);
      out += fmt::format("      -> {} ({})", fate.name, fate.op_type);
      if (report.plan == nullptr) {
        out += "\n";
      } else if (fate.object == nullptr) {
        out += ": not in the plan (removed while planning)\n";
      } else {
        const runtime::ExecutionObject& object = *fate.object;
        if (!fate.fused_into.empty()) out += fmt::format(": fused into {}", fate.fused_into);
        out += fmt::format(": kernel {} v{} on {}, stream {}\n         {}\n", object.kernel->name,
                           object.kernel->impl_version, index.device_of(object), object.stream,
                           chosen_reason(object.selection_reason));
        if (object.device != runtime::kMainDevice) {
          on_fallback.push_back(fmt::format("{} ({})", fate.name, fate.op_type));
        }
      }
    }
    if (node.folded > 0) out += fmt::format("      ({} more hxrt node(s) folded at import)\n", node.folded);
  }
  if (report.plan != nullptr) {
    const runtime::SplitSummary& split = report.plan->split();
    if (split.fallback_nodes > 0) {
      out += fmt::format("heterogeneous split: {} hxrt node(s) on the {} fallback (no {} kernel, or --fallback-op): "
                         "{}; {} copy node(s)\n",
                         on_fallback.size(), hal::device_kind_name(report.plan->fallback_device()->kind),
                         hal::device_kind_name(report.plan->device().kind), fmt::join(on_fallback, ", "),
                         split.copies);
    } else {
      out += fmt::format("heterogeneous split: none (every node runs on {})\n",
                         hal::device_kind_name(report.plan->device().kind));
    }
  }
  return out;
}

nlohmann::ordered_json onnx_json(const OnnxReportInput& report) {
  const formats::OnnxImport& model = *report.model;
  nlohmann::ordered_json opsets = nlohmann::ordered_json::object();
  for (const auto& [domain, version] : model.opsets) opsets[domain.empty() ? "ai.onnx" : domain] = version;
  nlohmann::ordered_json inputs = nlohmann::ordered_json::array();
  for (size_t i = 0; i < model.inputs.size(); ++i) {
    inputs.push_back({{"name", model.inputs[i]},
                      {"type", i < model.input_types.size() ? model.input_types[i].to_string() : ""}});
  }
  nlohmann::ordered_json outputs = nlohmann::ordered_json::array();
  for (const OutputInfo& o : outputs_of(report)) {
    outputs.push_back({{"name", o.name}, {"type", o.type}, {"source", o.source}});
  }
  nlohmann::ordered_json bind_time = nullptr;
  if (model.bind_time) {
    bind_time = {{"input_values", model.bind_time->input_values},
                 {"reason", model.bind_time->reason},
                 {"planned", report.plan != nullptr}};
  }

  const PlanIndex index(report.plan);
  const formats::OnnxImport& listed = nodes_import(report);
  nlohmann::ordered_json nodes = nlohmann::ordered_json::array();
  for (size_t i = 0; i < listed.nodes.size(); ++i) {
    const formats::OnnxNodeReport& node = listed.nodes[i];
    nlohmann::ordered_json hxrt_nodes = nlohmann::ordered_json::array();
    for (const std::string& text : node.hxrt_nodes) {
      const HxrtNodeFate fate = index.fate(text);
      nlohmann::ordered_json entry = {{"name", fate.name}, {"op_type", fate.op_type}};
      if (fate.object != nullptr) {
        entry["fused_into"] = fate.fused_into.empty() ? nlohmann::ordered_json(nullptr)
                                                      : nlohmann::ordered_json(fate.fused_into);
        entry["kernel"] = fate.object->kernel->name;
        entry["device"] = index.device_of(*fate.object);
        entry["fallback"] = fate.object->device != runtime::kMainDevice;
        entry["stream"] = fate.object->stream;
        entry["reason"] = chosen_reason(fate.object->selection_reason);
      } else if (report.plan != nullptr) {
        entry["removed_while_planning"] = true;
      }
      hxrt_nodes.push_back(std::move(entry));
    }
    const bool stopped_here = report.planned == nullptr && model.bind_time && i + 1 == listed.nodes.size();
    std::string fate = "hxrt nodes";
    if (stopped_here) {
      fate = "bind time";
    } else if (node.hxrt_nodes.empty()) {
      fate = node.folded > 0 || node.op_type == "Constant" ? "folded at import" : node.aliased ? "alias" : "none";
    }
    nodes.push_back({{"index", i},
                     {"name", node.name},
                     {"op_type", node.op_type},
                     {"domain", node.domain},
                     {"opset", node.opset},
                     {"converter", node.converter},
                     {"result", fate},
                     {"hxrt_nodes", std::move(hxrt_nodes)},
                     {"folded", node.folded},
                     {"aliased", node.aliased}});
  }
  nlohmann::ordered_json split = nullptr;
  if (report.plan != nullptr) {
    const runtime::SplitSummary& s = report.plan->split();
    split = {{"fallback_nodes", s.fallback_nodes},
             {"fallback_ops", s.fallback_ops},
             {"copies", s.copies},
             {"copy_bytes", s.copy_bytes}};
  }
  return {{"file", report.path},
          {"ir_version", model.ir_version},
          {"producer", model.producer},
          {"opsets", std::move(opsets)},
          {"inputs", std::move(inputs)},
          {"outputs", std::move(outputs)},
          {"bind_time", std::move(bind_time)},
          {"nodes", std::move(nodes)},
          {"split", std::move(split)}};
}

}  // namespace hxrt::tools
