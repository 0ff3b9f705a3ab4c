// ONNX import: a framework model (ModelProto, IR 3-10) in, an hxrt Graph out.
//
//   formats::OnnxImportOptions options{.schemas = &registries.schemas, .evaluate = fold_on_cpu};
//   Result<formats::OnnxImport> imported = formats::import_onnx_file("model.onnx", options);
//
// Each ONNX node goes through the converter its domain, op type and the model's opset select (the compatibility
// layer, src/formats/onnx/converter.h), which emits hxrt ops at their newest version; the schemas infer every value's
// dtype and symbolic shape as the graph grows (ONNX dim_params become hxrt symbols, unnamed dims fresh symbols).
// Nodes whose inputs are all known at import are evaluated on the host (`evaluate`) instead of being added: the
// Constant/Shape subgraphs every exported model has fold away (Note [Values known at import] in converter.h).
//
// Initializers stay in the parsed ModelProto's buffers (held by the weights' keepalive; no second copy); tensors in
// external data files are mapped from the file beside the model.
//
// When a converter needs a value that depends on the graph inputs (a Reshape whose shape is computed from an
// input), the import answers with OnnxImport::bind_time set: the graph is not built, and the caller imports again
// once the inputs are known, with their values (OnnxImportOptions::input_values) and shapes (input_shapes).
// runtime::Model does this per distinct input, caching the plans.
//
// Errors (a Status naming the file, node, op and field; never a crash): malformed or truncated protobuf, an IR
// version or dtype hxrt does not read, a missing initializer or dangling input, a cycle, an op or opset no converter
// serves (naming the supported opset ranges), a converter's or a schema's rejection.
//
// Thread-safety: the functions are reentrant; the registries must not change during an import.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hxrt/base/shape.h"
#include "hxrt/base/status.h"
#include "hxrt/graph/graph.h"
#include "hxrt/ops/op_schema.h"

namespace hxrt::formats {

namespace onnx {
class ConverterRegistry;
}

// Evaluates a graph of one node whose inputs are all initializers; returns its outputs in node output order.
using NodeEvaluator = std::function<Result<std::vector<graph::TensorValue>>(graph::Graph graph)>;

struct OnnxImportOptions {
  const ops::OpSchemaRegistry* schemas = nullptr;  // required: shape inference while importing
  // Null: the built-in converters (onnx::register_builtin_converters).
  const onnx::ConverterRegistry* converters = nullptr;
  // Constant folding on the host; null: nothing is folded (nodes whose inputs are all constants stay in the graph).
  NodeEvaluator evaluate;
  // Bind-time import: graph inputs whose values are known (they become constants, not graph inputs) ...
  std::map<std::string, graph::TensorValue, std::less<>> input_values;
  // ... and concrete shapes of graph inputs (replacing their symbolic dims).
  std::map<std::string, Shape, std::less<>> input_shapes;
  // Folder of external data files; "" = the model file's folder (import_onnx_file) or the working directory.
  std::string external_data_dir;
};

// What became of one ONNX node (`hxrt inspect model.onnx`).
struct OnnxNodeReport {
  std::string name;
  std::string op_type;
  std::string domain;
  int opset = 0;
  std::string converter;                // "Softmax[13,]"
  std::vector<std::string> hxrt_nodes;  // nodes added to the graph: "name (Op)"
  int folded = 0;                       // hxrt nodes evaluated at import instead
  bool aliased = false;                 // an output forwarded without a node (Identity)
};

// Where one ONNX graph output comes from.
struct OnnxOutput {
  std::string name;            // the ONNX output name (what run() returns it as)
  std::string value;           // the hxrt graph output carrying it ("" when constant or an input)
  std::optional<graph::TensorValue> constant;  // folded at import
  std::string input;           // a graph input returned as it is (Identity of an input)
};

// The import needs values known only at bind time.
struct OnnxBindTimeNeeds {
  // Graph inputs whose values decide the graph; empty when the inputs' shapes are enough (Shape -> Slice bounds).
  std::vector<std::string> input_values;
  std::string reason;                     // the converter's request: "node 'r' (Reshape, opset 14): ..."
};

struct OnnxImport {
  graph::Graph graph;
  int64_t ir_version = 0;
  std::string producer;                  // "pytorch 2.1"
  std::map<std::string, int> opsets;     // domain ("" = ai.onnx) -> version
  std::vector<std::string> inputs;       // ONNX graph inputs (initializers excluded), in order
  std::vector<OnnxOutput> outputs;       // in ONNX output order
  std::vector<OnnxNodeReport> nodes;     // in ONNX node order
  std::optional<OnnxBindTimeNeeds> bind_time;  // set: `graph` is not usable; import again with the values
};

// A parsed ONNX model, imported as often as needed without parsing it again (runtime::Model's bind-time imports):
// every import's initializers point into its buffers, which live as long as the file or any graph imported from it.
// Immutable and thread-safe.
class OnnxModelFile {
 public:
  // `bytes` is one serialized ModelProto (copied in by protobuf); `name` names it in errors; external data files
  // are looked up in `external_data_dir` ("" = the working directory).
  static Result<std::shared_ptr<const OnnxModelFile>> parse(std::span<const std::byte> bytes, std::string name,
                                                            std::string external_data_dir);
  // Maps and parses the file at `path`; external data beside it.
  static Result<std::shared_ptr<const OnnxModelFile>> open(const std::string& path);
  Result<OnnxImport> import(const OnnxImportOptions& options) const;
  const std::string& name() const { return name_; }

 private:
  OnnxModelFile(std::shared_ptr<const void> proto, std::string name, std::string dir)
      : proto_(std::move(proto)), name_(std::move(name)), external_data_dir_(std::move(dir)) {}
  std::shared_ptr<const void> proto_;  // the ModelProto
  std::string name_;
  std::string external_data_dir_;
};

// One-shot imports: parse, then OnnxModelFile::import. `bytes` is one serialized ModelProto; `name` names it in
// errors.
Result<OnnxImport> import_onnx(std::span<const std::byte> bytes, const OnnxImportOptions& options,
                               const std::string& name = "model.onnx");
Result<OnnxImport> import_onnx_file(const std::string& path, const OnnxImportOptions& options);
// True when `path` ends in ".onnx".
bool is_onnx_path(const std::string& path);

// ONNX TensorProto data type code <-> hxrt dtype (float, float16, bfloat16, int8, uint8, int32, int64, bool);
// Unimplemented naming the ONNX type for the others.
Result<DType> dtype_from_onnx(int32_t data_type);
int32_t dtype_to_onnx(DType dtype);

// Reads a serialized TensorProto (the ONNX test data's input_0.pb): its name and value.
Result<std::pair<std::string, graph::TensorValue>> read_onnx_tensor(std::span<const std::byte> bytes);

}  // namespace hxrt::formats
