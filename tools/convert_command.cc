// `hxrt convert model.onnx -o model.hxrt`: imports an ONNX model (converters, constant folding on the host) and
// saves the imported graph as an hxrt graph file, which `run`, `inspect` and `profile` then load without the import.
// A model whose graph depends on input values (Note [ONNX models] in hxrt/runtime/model.h) is converted only for
// given values: those inputs become constants of the graph file, and every --input's shape replaces its declared
// dims.
#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.h"
#include "hxrt/formats/graph_file.h"
#include "hxrt/formats/onnx.h"
#include "hxrt/runtime/model.h"
#include "plan_builder.h"
#include "text_format.h"

namespace hxrt::tools {
namespace {

struct ConvertFlags {
  std::string model_path;
  std::string output_path;
  std::vector<std::string> inputs;  // "name=file.npy"
};

Status convert_model(const ConvertFlags& flags) {
  if (!formats::is_onnx_path(flags.model_path)) {
    return invalid_argument("'{}' is not an ONNX model (convert reads .onnx files)", flags.model_path);
  }
  HXRT_ASSIGN_OR_RETURN(runtime::TensorMap inputs, read_npy_inputs(flags.inputs));
  HXRT_ASSIGN_OR_RETURN(formats::OnnxImport import, runtime::Model::import_onnx(flags.model_path, inputs));
  for (const auto& [name, tensor] : inputs) {
    if (std::find(import.inputs.begin(), import.inputs.end(), name) == import.inputs.end()) {
      return invalid_argument("--input '{}': the model has no input '{}' (inputs: {})", name, name,
                              fmt::join(import.inputs, ", "));
    }
  }
  if (import.bind_time && import.bind_time->input_values.empty()) {
    return failed_precondition(
        "ONNX model '{}' is imported at bind time: its graph depends on the shapes of its inputs ({}); pass --input "
        "NAME=FILE.npy for every input to convert it for those shapes",
        flags.model_path, import.bind_time->reason);
  }
  if (import.bind_time) {
    return failed_precondition(
        "ONNX model '{}' is imported at bind time: its graph depends on the values of input(s) {} ({}); pass --input "
        "NAME=FILE.npy for them to convert it for those values",
        flags.model_path, fmt::join(import.bind_time->input_values, ", "), import.bind_time->reason);
  }

  const graph::Graph& graph = import.graph;
  int hxrt_nodes = 0;
  int nodeless = 0;  // ONNX nodes folded at import or forwarding a value
  for (const formats::OnnxNodeReport& node : import.nodes) {
    hxrt_nodes += static_cast<int>(node.hxrt_nodes.size());
    nodeless += node.hxrt_nodes.empty() ? 1 : 0;
  }
  // What the graph file cannot say: outputs known at import, and inputs returned as they are, are not graph outputs.
  for (const formats::OnnxOutput& o : import.outputs) {
    if (o.constant) {
      fmt::print(stderr, "hxrt convert: warning: output '{}' is a constant folded at import ({}{}); the graph file "
                 "does not have it as an output\n", o.name, o.constant->dtype, o.constant->shape);
    } else if (!o.input.empty()) {
      fmt::print(stderr, "hxrt convert: warning: output '{}' is input '{}' returned as it is; the graph file does not "
                 "have it as an output\n", o.name, o.input);
    }
  }
  HXRT_RETURN_IF_ERROR_CTX(formats::write_graph_file(graph, flags.output_path), "writing graph file '{}'",
                           flags.output_path);

  fmt::print("converted {} -> {}: {} ONNX nodes -> {} hxrt nodes ({} ONNX node(s) folded at import or aliased)\n",
             flags.model_path, flags.output_path, import.nodes.size(), hxrt_nodes, nodeless);
  for (graph::ValueId id : graph.inputs()) {
    fmt::print("input  {}: {}\n", graph.value(id).name, graph.value(id).desc.to_string());
  }
  for (const std::string& name : import.inputs) {
    const Result<graph::ValueId> id = graph.find_value(name);
    if (inputs.contains(name) && (!id.ok() || !graph.value(*id).is_input)) {
      fmt::print("bound  {}: {}{} (its value decides the graph: a constant of the graph file)\n", name,
                 inputs.at(name).dtype, inputs.at(name).shape);
    }
  }
  for (const formats::OnnxOutput& o : import.outputs) {
    if (o.value.empty()) continue;
    const graph::Value& value = graph.value(*graph.find_value(o.value));
    fmt::print("output {}: {}{}\n", o.name, value.desc.to_string(),
               o.value == o.name ? "" : fmt::format(" (graph output '{}')", o.value));
  }
  uint64_t weight_bytes = 0;
  for (graph::ValueId id : graph.initializers()) weight_bytes += graph.value(id).weight.size;
  fmt::print("weights: {} initializers, {} ({} bytes)\n", graph.initializers().size(), human_bytes(weight_bytes),
             weight_bytes);
  return ok_status();
}

}  // namespace

void add_convert_command(CLI::App& app, int* exit_code) {
  CLI::App* command = app.add_subcommand("convert", "Import an ONNX model and save it as an hxrt graph file");
  auto flags = std::make_shared<ConvertFlags>();
  command->add_option("model", flags->model_path, "ONNX model (.onnx)")->required();
  command->add_option("-o,--output", flags->output_path, "hxrt graph file to write (.hxrt)")->required();
  command->add_option("--input", flags->inputs,
                      "Input from a .npy file: NAME=FILE.npy (repeatable). Needed for the inputs whose values decide "
                      "the graph (they become constants); any other input's shape replaces its declared dims");
  command->callback([flags, exit_code] {
    if (Status status = convert_model(*flags); !status.ok()) {
      fmt::print(stderr, "hxrt convert: {}\n", status.to_string());
      *exit_code = 1;
    }
  });
}

}  // namespace hxrt::tools
