#include "kernels/testing/infer_node.h"

#include <utility>

#include <fmt/format.h>

namespace hxrt::kernels::testing {

std::vector<InferInput> graph_inputs(const std::vector<graph::TensorDesc>& descs) {
  std::vector<InferInput> inputs;
  inputs.reserve(descs.size());
  for (const graph::TensorDesc& desc : descs) inputs.push_back({.desc = desc});
  return inputs;
}

InferResult infer_node(const std::string& op_type, const std::string& domain, const std::vector<InferInput>& inputs,
                       graph::AttributeMap attrs) {
  InferResult out;
  ops::OpSchemaRegistry registry;
  out.status = ops::register_builtin_schemas(registry);
  if (!out.status.ok()) return out;
  graph::Graph g;
  std::vector<std::string> names;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const InferInput& input = inputs[i];
    names.push_back(input.omitted ? std::string() : fmt::format("x{}", i));
    if (input.omitted) continue;
    if (input.constant) {
      const HostTensor& c = *input.constant;
      out.status = g.add_initializer(names.back(), {c.dtype, graph::SymShape::from(c.shape)},
                                     graph::WeightData::copy_of(c.bytes))
                       .status();
    } else {
      out.status = g.add_input(names.back(), input.desc).status();
    }
    if (!out.status.ok()) return out;
  }
  Result<const ops::OpSchema*> schema = registry.find(op_type, domain, 0);
  if (!schema.ok()) {
    out.status = schema.status();
    return out;
  }
  const std::vector<std::string> outputs = {"y"};
  Result<graph::NodeId> node =
      g.add_node("n", op_type, names, outputs, std::move(attrs), domain, (*schema)->since_version);
  if (!node.ok()) {
    out.status = node.status();
    return out;
  }
  out.status = registry.infer_node(g, *node, &out.checks);
  if (out.status.ok()) out.desc = g.value(g.node(*node).outputs[0]).desc.to_string();
  return out;
}

}  // namespace hxrt::kernels::testing
