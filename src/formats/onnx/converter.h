// ONNX converters: the compatibility layer from ONNX ops at a model's opset to hxrt ops.
//
// A converter is keyed by (domain, op type, opset range): the model's opset for the node's domain picks exactly one
// (ranges of one op never overlap; ConverterRegistry::add rejects an overlap). It reads the ONNX node through a
// ConversionContext and emits one or several hxrt nodes; the differences between opset versions (an attribute that
// became an input, a changed default, a changed axis semantic) are its job, so hxrt's op has one definition: the
// newest one. Every converter family registers in register_builtin_converters (converters.cc).
//
// Note [Values known at import]
// The importer walks the ONNX graph in order and keeps, for every ONNX value, its hxrt value name, its desc (dtype
// and symbolic shape, from the schemas' inference) and, when it is known at import, its value: initializers,
// Constant outputs, and the outputs of hxrt nodes whose inputs are all known, which the importer evaluates on the
// host instead of adding them to the graph (constant folding; ImportOptions::evaluate). A converter that needs a
// value to decide the graph (Reshape's shape, Pad's pads, TopK's K, Reduce axes given as an input) asks for it with
// require_ints / require_constant. When the value depends on graph inputs, import stops with a NeedsBindTimeValues
// answer naming those inputs (importer.h); runtime::Model then imports again at bind time with their values (and
// every input's concrete shape) known, cached per distinct value — the "evaluated on the host at bind time" path
// that `hxrt inspect` reports.
//
// Thread-safety: ConverterRegistry is thread-compatible (fill, then share read-only); converters are reentrant.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hxrt/base/status.h"
#include "hxrt/graph/attribute.h"
#include "hxrt/graph/graph.h"
#include "hxrt/ops/kernel_def.h"

namespace hxrt::formats::onnx {

// One ONNX node as converters see it; attributes already converted to hxrt's types (INT → int64, FLOAT → double,
// STRING, INTS, FLOATS, STRINGS, TENSOR → TensorValue).
struct OnnxNodeView {
  std::string name;                  // never empty: the importer names unnamed nodes "<op_type>_<index>"
  std::string op_type;
  std::string domain;                // "" for ai.onnx
  int opset = 0;                     // the model's opset for `domain`
  std::vector<std::string> inputs;   // ONNX value names; "" for an omitted optional input
  std::vector<std::string> outputs;  // "" for an omitted optional output
  graph::AttributeMap attrs;
};

class ConversionContext {
 public:
  virtual ~ConversionContext() = default;

  const OnnxNodeView& node() const { return node_; }
  int opset() const { return node_.opset; }
  const graph::AttributeMap& attrs() const { return node_.attrs; }

  size_t num_inputs() const { return node_.inputs.size(); }
  bool has_input(size_t i) const { return i < node_.inputs.size() && !node_.inputs[i].empty(); }
  size_t num_outputs() const { return node_.outputs.size(); }
  bool has_output(size_t i) const { return i < node_.outputs.size() && !node_.outputs[i].empty(); }

  // The hxrt value name carrying ONNX input `i` ("" when omitted), and the name to give ONNX output `i`.
  virtual std::string input(size_t i) const = 0;
  std::string output(size_t i) const { return has_output(i) ? node_.outputs[i] : std::string(); }

  // Dtype and (symbolic) shape of input `i`; null when the import does not know them.
  virtual const graph::TensorDesc* input_desc(size_t i) const = 0;
  // The value of input `i` when it is known at import (Note [Values known at import]); null otherwise.
  virtual const graph::TensorValue* constant(size_t i) const = 0;

  // The value of input `i`, which this converter needs to decide the graph; `what` names the input in messages.
  // When it is not known at import, records the need (the importer answers NeedsBindTimeValues when it depends on
  // graph inputs) and returns FailedPrecondition: the converter returns that status as it is.
  virtual Result<graph::TensorValue> require_constant(size_t i, std::string_view what) = 0;
  // As require_constant, converted to int64 (int32/int64/uint8/int8/bool tensors; InvalidArgument otherwise).
  Result<std::vector<int64_t>> require_ints(size_t i, std::string_view what);
  // As require_constant, converted to double (float and integer tensors).
  Result<std::vector<double>> require_floats(size_t i, std::string_view what);

  // Emits one hxrt node. `inputs` are hxrt value names (input(i), a temp, a constant; "" omits an optional input),
  // `outputs` are output(i) for the ONNX outputs it produces and temp() names for intermediates. The importer
  // names the node after the ONNX node, infers its outputs' descs and folds it when every input is known.
  virtual Status emit(std::string op_type, std::vector<std::string> inputs, std::vector<std::string> outputs,
                      graph::AttributeMap attrs = {}, std::string domain = "",
                      int version = graph::kLatestVersion) = 0;
  // A fresh value name for an intermediate, derived from the node's name and `hint`.
  virtual std::string temp(std::string_view hint) = 0;
  // A new initializer holding `value`; returns its value name.
  virtual std::string add_constant(graph::TensorValue value, std::string_view hint) = 0;
  std::string add_ints(std::span<const int64_t> values, std::string_view hint);   // i64 [n]
  std::string add_int_scalar(int64_t value, std::string_view hint);             // i64 []
  std::string add_float_scalar(float value, std::string_view hint);             // f32 []
  // ONNX output `i` is the value `value` (Identity, Dropout in inference, a no-op Reshape): no node is emitted.
  virtual Status alias_output(size_t i, const std::string& value) = 0;

  // InvalidArgument / Unimplemented "node 'n' (Op, opset 13): <message>".
  Status error(std::string_view message) const;
  Status unsupported(std::string_view message) const;

 protected:
  explicit ConversionContext(const OnnxNodeView& node) : node_(node) {}

 private:
  const OnnxNodeView& node_;
};

// Pieces most converters share.
// Every ONNX input of the node as an hxrt value name ("" for an omitted one), in order.
std::vector<std::string> all_inputs(const ConversionContext& ctx);
// Every ONNX output of the node, in order ("" for an omitted one: the importer gives it an unused value).
std::vector<std::string> all_outputs(const ConversionContext& ctx);
// The node's attributes less `dropped` (those the hxrt op does not take).
graph::AttributeMap attrs_without(const ConversionContext& ctx, std::initializer_list<std::string_view> dropped);

using ConvertFn = std::function<Status(ConversionContext&)>;

struct ConverterDef {
  std::string domain;                    // "" = ai.onnx
  std::string op_type;
  int since_version = 1;                 // the model opsets this converter serves, inclusive
  int end_version = ops::kMaxOpVersion;
  ConvertFn convert;
  std::string doc;                       // one line: what it emits ("Softmax(13) over the flattened axes ...")
  // "Softmax[1,12]": shown by `hxrt inspect` as the converter chosen.
  std::string label() const;
};

// A converter of the default domain serving opsets [since, end].
ConverterDef make_converter(std::string op_type, int since, int end, ConvertFn convert, std::string doc);

class ConverterRegistry {
 public:
  // InvalidArgument for a converter without a function or an empty range; AlreadyExists when its range overlaps
  // one of the same (domain, op type).
  Status add(ConverterDef def);
  // The converter serving `opset`; NotFound naming the op, its domain, the model's opset and the supported ranges
  // (or saying that no converter exists for the op at all).
  Result<const ConverterDef*> find(std::string_view domain, std::string_view op_type, int opset) const;
  // Every converter, ordered by (domain, op type, since_version).
  std::vector<const ConverterDef*> all() const;

 private:
  std::map<std::pair<std::string, std::string>, std::map<int, ConverterDef>, std::less<>> converters_;
};

// Converter families, one file each (convert_<family>.cc), and the call that registers them all.
Status register_core_converters(ConverterRegistry& registry);       // ops hxrt had before ONNX: Add .. Conv
Status register_math_converters(ConverterRegistry& registry);       // unary math and activations
Status register_logic_converters(ConverterRegistry& registry);      // binary, variadic, comparison, logical
Status register_reduce_converters(ConverterRegistry& registry);     // reductions and normalisations
Status register_shape_ops_converters(ConverterRegistry& registry);  // shape and layout ops
Status register_indexing_converters(ConverterRegistry& registry);   // indexing and data-dependent ops
Status register_pool_converters(ConverterRegistry& registry);       // pooling, ConvTranspose, resampling
Status register_sequence_converters(ConverterRegistry& registry);   // recurrent, spectral, remaining ops
Status register_builtin_converters(ConverterRegistry& registry);

}  // namespace hxrt::formats::onnx
