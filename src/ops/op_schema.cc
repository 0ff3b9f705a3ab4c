#include "hxrt/ops/op_schema.h"

#include <algorithm>
#include <set>

#include <fmt/ranges.h>

#include "hxrt/base/check.h"
#include "ops/schemas/schemas.h"

namespace hxrt::ops {
namespace {

std::string node_label(const graph::Node& node) {
  return fmt::format("node '{}' ({}{}{})", node.name, node.domain, node.domain.empty() ? "" : ".", node.op_type);
}

// An int attribute is acceptable where a float is declared (ONNX writers do this), and an int where a bool is.
bool attr_type_accepts(graph::AttrType declared, graph::AttrType actual) {
  if (declared == actual) return true;
  if (declared == graph::AttrType::kFloat && actual == graph::AttrType::kInt) return true;
  if (declared == graph::AttrType::kBool && actual == graph::AttrType::kInt) return true;
  if (declared == graph::AttrType::kFloats && actual == graph::AttrType::kInts) return true;
  return false;
}

}  // namespace

const graph::TensorDesc& InferenceContext::input(size_t i) const {
  HXRT_CHECK(has_input(i), "input {} of node '{}' is absent", i, node_.name);
  return graph_.value(node_.inputs[i]).desc;
}

const graph::WeightData* InferenceContext::constant_input(size_t i) const {
  if (!has_input(i)) return nullptr;
  const graph::Value& value = graph_.value(node_.inputs[i]);
  return value.is_initializer ? &value.weight : nullptr;
}

Status InferenceContext::require_equal(const graph::Dim& a, const graph::Dim& b, std::string_view what) {
  if (a == b) return ok_status();
  if (a.is_static() && b.is_static()) {
    return error(fmt::format("{}: {} != {}", what, a.value(), b.value()));
  }
  if (checks_ != nullptr) {
    checks_->push_back(DimCheck{a, b, fmt::format("{}: {}", node_label(node_), what)});
  }
  return ok_status();
}

Status InferenceContext::error(std::string_view message) const {
  return invalid_argument("{}: {}", node_label(node_), message);
}

Status OpSchemaRegistry::add(OpSchema schema) {
  if (schema.op_type.empty()) return invalid_argument("op schema without an op type");
  if (!schema.infer) return invalid_argument("op schema '{}' has no shape inference", schema.op_type);
  if (schema.since_version < 1) return invalid_argument("op schema '{}': since_version must be >= 1", schema.op_type);
  for (size_t i = 0; i + 1 < schema.inputs.size(); ++i) {
    if (schema.inputs[i].variadic) return invalid_argument("op schema '{}': only the last input may be variadic", schema.op_type);
  }
  auto& versions = schemas_[{schema.domain, schema.op_type}];
  if (versions.count(schema.since_version) != 0) {
    return already_exists("op schema '{}' (domain '{}') version {} is already registered", schema.op_type,
                          schema.domain, schema.since_version);
  }
  const int version = schema.since_version;
  versions.emplace(version, std::move(schema));
  return ok_status();
}

Result<const OpSchema*> OpSchemaRegistry::find(std::string_view op_type, std::string_view domain, int version) const {
  auto it = schemas_.find(std::pair<std::string, std::string>(domain, op_type));
  if (it == schemas_.end() || it->second.empty()) {
    return not_found("unsupported op '{}'{}: hxrt has no schema for it", op_type,
                     domain.empty() ? std::string() : fmt::format(" in domain '{}'", domain));
  }
  const auto& versions = it->second;
  if (version <= 0) return &versions.rbegin()->second;
  auto upper = versions.upper_bound(version);
  if (upper == versions.begin()) {
    return not_found("op '{}' version {} is older than every supported version (oldest: {})", op_type, version,
                     versions.begin()->first);
  }
  return &std::prev(upper)->second;
}

Status OpSchemaRegistry::check_node(const graph::Graph& graph, const graph::Node& node) const {
  Result<const OpSchema*> found = find(node.op_type, node.domain, node.version);
  if (!found.ok()) return std::move(found).take_status().with_context(fmt::format("checking {}", node_label(node)));
  const OpSchema& schema = **found;
  const std::string label = node_label(node);

  // Arity.
  size_t min_inputs = 0;
  for (size_t i = 0; i < schema.inputs.size(); ++i) {
    if (!schema.inputs[i].optional) min_inputs = i + 1;
  }
  const bool variadic = !schema.inputs.empty() && schema.inputs.back().variadic;
  if (node.inputs.size() < min_inputs) {
    return invalid_argument("{}: has {} inputs, needs at least {} (missing '{}')", label, node.inputs.size(),
                            min_inputs, schema.inputs[node.inputs.size()].name);
  }
  if (!variadic && node.inputs.size() > schema.inputs.size()) {
    return invalid_argument("{}: has {} inputs, takes at most {}", label, node.inputs.size(), schema.inputs.size());
  }
  if (node.outputs.empty() || node.outputs.size() > schema.outputs.size()) {
    return invalid_argument("{}: has {} outputs, takes 1 to {}", label, node.outputs.size(), schema.outputs.size());
  }
  // Attributes: known, typed, required present.
  for (const auto& [name, attr] : node.attrs.items()) {
    // A named copy for the lambda: clang before 16 cannot capture a structured binding.
    const std::string_view attr_name = name;
    auto spec = std::find_if(schema.attrs.begin(), schema.attrs.end(),
                             [&](const AttrSpec& s) { return s.name == attr_name; });
    if (spec == schema.attrs.end()) {
      std::vector<std::string_view> known;
      for (const AttrSpec& s : schema.attrs) known.push_back(s.name);
      return invalid_argument("{}: unknown attribute '{}' (known: {})", label, name, fmt::join(known, ", "));
    }
    if (!attr_type_accepts(spec->type, attr.type())) {
      return invalid_argument("{}: attribute '{}' is {}, expected {}", label, name, graph::attr_type_name(attr.type()),
                              graph::attr_type_name(spec->type));
    }
  }
  for (const AttrSpec& spec : schema.attrs) {
    if (spec.required && !node.attrs.has(spec.name)) {
      return invalid_argument("{}: missing required attribute '{}'", label, spec.name);
    }
  }
  // Inputs: present when required, dtypes within constraints, type variables consistent.
  std::map<std::string, std::pair<DType, size_t>, std::less<>> bound;  // type var → (dtype, first input)
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const InputSpec& spec = schema.inputs[std::min(i, schema.inputs.size() - 1)];
    if (node.inputs[i] == graph::kNoValue) {
      if (!spec.optional) return invalid_argument("{}: required input {} ('{}') is missing", label, i, spec.name);
      continue;
    }
    if (node.inputs[i] < 0 || node.inputs[i] >= graph.num_values()) {
      return invalid_argument("{}: input {} refers to value id {} that does not exist", label, i, node.inputs[i]);
    }
    const DType dtype = graph.value(node.inputs[i]).desc.dtype;
    auto constraint = std::find_if(schema.type_constraints.begin(), schema.type_constraints.end(),
                                   [&](const TypeConstraint& c) { return c.var == spec.type_var; });
    if (constraint != schema.type_constraints.end() &&
        std::find(constraint->allowed.begin(), constraint->allowed.end(), dtype) == constraint->allowed.end()) {
      std::vector<std::string_view> allowed;
      for (DType d : constraint->allowed) allowed.push_back(dtype_name(d));
      return invalid_argument("{}: input {} ('{}', value '{}') has dtype {}, expected one of {}", label, i, spec.name,
                              graph.value(node.inputs[i]).name, dtype, fmt::join(allowed, ", "));
    }
    if (spec.type_var.empty()) continue;
    auto [it, inserted] = bound.try_emplace(spec.type_var, dtype, i);
    if (!inserted && it->second.first != dtype) {
      return invalid_argument("{}: input {} has dtype {} but input {} has {} (both are type '{}')", label, i, dtype,
                              it->second.second, it->second.first, spec.type_var);
    }
  }
  return ok_status();
}

Status OpSchemaRegistry::resolve_version(graph::Node& node) const {
  if (node.version != graph::kLatestVersion) return ok_status();
  Result<const OpSchema*> schema = find(node.op_type, node.domain, node.version);
  if (!schema.ok()) {
    return std::move(schema).take_status().with_context(fmt::format("resolving the version of {}", node_label(node)));
  }
  node.version = (*schema)->since_version;
  return ok_status();
}

Status OpSchemaRegistry::resolve_versions(graph::Graph& graph) const {
  for (graph::NodeId id = 0; id < graph.num_nodes(); ++id) {
    if (graph.has_node(id)) HXRT_RETURN_IF_ERROR(resolve_version(graph.mutable_node(id)));
  }
  return ok_status();
}

Status OpSchemaRegistry::apply_defaults(graph::Node& node) const {
  HXRT_RETURN_IF_ERROR(resolve_version(node));
  HXRT_ASSIGN_OR_RETURN(const OpSchema* schema, find(node.op_type, node.domain, node.version));
  for (const AttrSpec& spec : schema->attrs) {
    if (!node.attrs.has(spec.name) && spec.default_value.has_value()) node.attrs.set(spec.name, *spec.default_value);
  }
  return ok_status();
}

Status OpSchemaRegistry::infer_node(graph::Graph& graph, graph::NodeId id, std::vector<DimCheck>* checks) const {
  const graph::Node& node = graph.node(id);
  HXRT_RETURN_IF_ERROR(check_node(graph, node));
  HXRT_ASSIGN_OR_RETURN(const OpSchema* schema, find(node.op_type, node.domain, node.version));
  InferenceContext context(graph, node, checks);
  HXRT_RETURN_IF_ERROR_CTX(schema->infer(context), "inferring shapes of {}", node_label(node));
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    if (!context.outputs()[i].has_value()) {
      return internal_error("{}: shape inference did not set output {}", node_label(node), i);
    }
    graph.mutable_value(node.outputs[i]).desc = *context.outputs()[i];
  }
  return ok_status();
}

Status OpSchemaRegistry::infer_graph(graph::Graph& graph, std::vector<DimCheck>* checks) const {
  HXRT_ASSIGN_OR_RETURN(std::vector<graph::NodeId> order, graph.topological_order());
  for (graph::NodeId id : order) HXRT_RETURN_IF_ERROR(infer_node(graph, id, checks));
  return ok_status();
}

std::vector<const OpSchema*> OpSchemaRegistry::schemas() const {
  std::vector<const OpSchema*> out;
  for (const auto& [key, versions] : schemas_) {
    for (const auto& [version, schema] : versions) out.push_back(&schema);
  }
  return out;
}

Status register_builtin_schemas(OpSchemaRegistry& registry) {
  HXRT_RETURN_IF_ERROR(schemas::register_elementwise(registry));
  HXRT_RETURN_IF_ERROR(schemas::register_normalization(registry));
  HXRT_RETURN_IF_ERROR(schemas::register_tensor_ops(registry));
  HXRT_RETURN_IF_ERROR(schemas::register_linear(registry));
  HXRT_RETURN_IF_ERROR(schemas::register_conv(registry));
  HXRT_RETURN_IF_ERROR(schemas::register_fused(registry));
  HXRT_RETURN_IF_ERROR(schemas::register_llm(registry));
  HXRT_RETURN_IF_ERROR(schemas::register_math(registry));
  HXRT_RETURN_IF_ERROR(schemas::register_logic(registry));
  HXRT_RETURN_IF_ERROR(schemas::register_reduce(registry));
  HXRT_RETURN_IF_ERROR(schemas::register_shape_ops(registry));
  HXRT_RETURN_IF_ERROR(schemas::register_indexing(registry));
  HXRT_RETURN_IF_ERROR(schemas::register_pool(registry));
  HXRT_RETURN_IF_ERROR(schemas::register_sequence(registry));
  HXRT_RETURN_IF_ERROR(schemas::register_collective(registry));
  return ok_status();
}

}  // namespace hxrt::ops
