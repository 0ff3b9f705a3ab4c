// The ONNX part of `hxrt inspect model.onnx`: the model (IR version, producer, opsets, inputs with their symbolic
// dims, outputs) and, for each ONNX node, the converter chosen and what it became — hxrt nodes, each with the
// kernel the plan chose for it and why and the device it runs on (the heterogeneous split), or "folded at import"
// or "alias" — as text or JSON. The plan's own report (ExecutionPlan::describe()) follows it in `inspect`.
//
// Thread-safety: the functions are reentrant; they only read their arguments.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "hxrt/formats/onnx.h"
#include "hxrt/runtime/execution_plan.h"

namespace hxrt::tools {

// What `inspect` knows of an ONNX model.
struct OnnxReportInput {
  std::string path;                            // the model file
  const formats::OnnxImport* model = nullptr;  // the load-time import: model info; bind-time needs when set
  // The import the plan was made from (`model` itself, or the bind-time import for --input values) and the plan;
  // both null for a model planned at bind time that was not given inputs.
  const formats::OnnxImport* planned = nullptr;
  const runtime::ExecutionPlan* plan = nullptr;
};

// Text, one section per line group; ends with a newline.
std::string describe_onnx(const OnnxReportInput& report);
// The same as JSON ("model", "inputs", "outputs", "bind_time", "nodes", "split").
nlohmann::ordered_json onnx_json(const OnnxReportInput& report);

}  // namespace hxrt::tools
