// Shape inference of one node, the way the schema tests ask what the planner would know of an op's output without
// running it: the built-in schemas, a graph of the node's inputs (graph inputs or initializers) and one output.
//
// Thread-safety: thread-compatible.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hxrt/base/host_tensor.h"
#include "hxrt/base/status.h"
#include "hxrt/graph/attribute.h"
#include "hxrt/graph/graph.h"
#include "hxrt/ops/op_schema.h"

namespace hxrt::kernels::testing {

// One input of the node: a graph input of `desc`, an initializer holding `constant`, or (with `omitted`) an
// omitted optional input.
struct InferInput {
  graph::TensorDesc desc;
  std::optional<HostTensor> constant;
  bool omitted = false;
};

// Graph inputs of these descs, in order.
std::vector<InferInput> graph_inputs(const std::vector<graph::TensorDesc>& descs);

struct InferResult {
  Status status;                      // the inference's error, or one building the graph
  std::string desc;                   // output 0's TensorDesc when status is ok: "f32[n_tokens, 576]"
  std::vector<ops::DimCheck> checks;  // the run-time dim equalities inference recorded
};

// Infers node `op_type` (the newest schema version in `domain`) on `inputs`, named x0, x1, ... in order.
InferResult infer_node(const std::string& op_type, const std::string& domain, const std::vector<InferInput>& inputs,
                       graph::AttributeMap attrs = {});

}  // namespace hxrt::kernels::testing
