// Op schemas: what an op is, independent of any kernel — inputs, outputs, typed attributes with defaults, dtype
// constraints, and symbolic shape inference.
//
// Every op the planner accepts has a schema. check_node() validates a node against it (arity, attribute names and
// types, required attributes, dtype constraints) and infer_node() computes its outputs' TensorDescs from its
// inputs' (symbolic) descs. Dims that inference cannot prove equal (two different symbols that must broadcast)
// become runtime checks evaluated when shapes are bound.
//
// Thread-safety: OpSchemaRegistry is thread-compatible: fill it, then share it read-only.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "hxrt/base/status.h"
#include "hxrt/graph/graph.h"

namespace hxrt::ops {

struct AttrSpec {
  std::string name;
  graph::AttrType type = graph::AttrType::kInt;
  bool required = false;
  std::optional<graph::Attribute> default_value;
};

struct InputSpec {
  std::string name;
  std::string type_var = "T";  // inputs/outputs sharing a type variable share a dtype
  bool optional = false;
  bool variadic = false;       // only the last input; matches one or more values
};

struct OutputSpec {
  std::string name;
  std::string type_var = "T";
};

struct TypeConstraint {
  std::string var;
  std::vector<DType> allowed;
};

// A dim equality that could not be decided while planning; checked when shapes are bound.
struct DimCheck {
  graph::Dim a;
  graph::Dim b;
  std::string what;  // "MatMul 'ffn.up': inner dims of A and B"
};

class InferenceContext {
 public:
  InferenceContext(const graph::Graph& graph, const graph::Node& node, std::vector<DimCheck>* checks)
      : graph_(graph), node_(node), checks_(checks), outputs_(node.outputs.size()) {}

  const graph::Node& node() const { return node_; }
  const graph::AttributeMap& attrs() const { return node_.attrs; }
  size_t num_inputs() const { return node_.inputs.size(); }
  bool has_input(size_t i) const { return i < node_.inputs.size() && node_.inputs[i] != graph::kNoValue; }
  const graph::TensorDesc& input(size_t i) const;
  // The bytes of input `i` when it is an initializer (Reshape's shape, Gather's indices ...), else null.
  const graph::WeightData* constant_input(size_t i) const;
  size_t num_outputs() const { return outputs_.size(); }
  void set_output(size_t i, graph::TensorDesc desc) { outputs_.at(i) = std::move(desc); }
  const std::vector<std::optional<graph::TensorDesc>>& outputs() const { return outputs_; }

  // Fails now when `a` and `b` are static and differ; records a DimCheck when they cannot be compared yet.
  Status require_equal(const graph::Dim& a, const graph::Dim& b, std::string_view what);
  // An error naming this node: "node 'x' (Op): <message>".
  Status error(std::string_view message) const;

 private:
  const graph::Graph& graph_;
  const graph::Node& node_;
  std::vector<DimCheck>* checks_;
  std::vector<std::optional<graph::TensorDesc>> outputs_;
};

using ShapeInferenceFn = std::function<Status(InferenceContext&)>;

struct OpSchema {
  std::string op_type;
  std::string domain;        // "" = default domain
  int since_version = 1;     // this schema applies from this opset version until the next schema's
  std::vector<InputSpec> inputs;
  std::vector<OutputSpec> outputs;
  std::vector<AttrSpec> attrs;
  std::vector<TypeConstraint> type_constraints;
  ShapeInferenceFn infer;
  std::string doc;
};

class OpSchemaRegistry {
 public:
  // AlreadyExists for the same (op_type, domain, since_version); InvalidArgument for an incomplete schema.
  Status add(OpSchema schema);
  // The schema of the newest since_version <= version (the newest of all for graph::kLatestVersion); NotFound
  // explains what exists.
  Result<const OpSchema*> find(std::string_view op_type, std::string_view domain, int version) const;
  // Arity, attribute names/types/required, dtype constraints of inputs. Errors name the node and the field.
  Status check_node(const graph::Graph& graph, const graph::Node& node) const;
  // Runs the schema's inference and writes the outputs' descs into the graph (outputs that already have a desc
  // must agree). Undecidable dim equalities are appended to `checks`.
  Status infer_node(graph::Graph& graph, graph::NodeId node, std::vector<DimCheck>* checks) const;
  // check_node + infer_node for every node in topological order.
  Status infer_graph(graph::Graph& graph, std::vector<DimCheck>* checks) const;
  // Replaces graph::kLatestVersion with the newest since_version of the node's op (NotFound for an unknown op);
  // other versions are left as they are.
  Status resolve_version(graph::Node& node) const;
  // resolve_version for every node: before writing a graph built with add_node's default version to a file.
  Status resolve_versions(graph::Graph& graph) const;
  // Resolves the node's version (resolve_version), then fills defaults of absent optional attributes into it (so
  // kernels see every attribute).
  Status apply_defaults(graph::Node& node) const;

  std::vector<const OpSchema*> schemas() const;

 private:
  // (domain, op_type) → schemas by since_version.
  std::map<std::pair<std::string, std::string>, std::map<int, OpSchema>, std::less<>> schemas_;
};

// Schemas of hxrt's built-in ops (the ONNX-compatible set used by transformers and CNNs, plus hxrt's own ops such
// as RMSNorm, RoPE, MatMulQ and the fused ops).
Status register_builtin_schemas(OpSchemaRegistry& registry);

}  // namespace hxrt::ops
