// Fusion: a registry of subgraph patterns and a pass that replaces each match with one fused node.
//
// A pattern matches a chain anchored at a node (Conv → BatchNormalization → Relu, MatMul → Add → Gelu, RMSNorm →
// Mul, Silu → Mul). A match is accepted only when every intermediate value has exactly one consumer and is not a
// graph output, so nothing else needs the tensors the fused kernel never writes. The fused node (domain
// `hxrt.fused`) takes over the last node's outputs, gets a fusion id and a fresh stable id, and lists the names and
// stable ids of the nodes it replaced, so profiles and errors map back to the original graph; nodes outside a
// match keep their stable ids (Note [Stable node ids] in graph/graph.h). Fused ops are ordinary ops with schemas and
// kernels of kind kFused.
//
// Thread-safety: FusionRegistry is thread-compatible: fill it, then share it read-only.
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "hxrt/base/status.h"
#include "hxrt/graph/graph.h"

namespace hxrt::ops {

struct FusionMatch {
  std::vector<graph::NodeId> nodes;  // the nodes replaced, in chain order; the last one's outputs are kept
  std::string op_type;               // fused op (domain hxrt.fused)
  graph::AttributeMap attrs;
  std::vector<std::string> inputs;   // value names ("" = omitted optional input)
};

struct FusionPattern {
  std::string name;  // "MatMul+Add(+Gelu)"
  // Tries to match a chain starting at `anchor` (single-consumer checks are done by the pass).
  std::function<std::optional<FusionMatch>(const graph::Graph&, graph::NodeId anchor)> match;
};

struct FusionGroup {
  int32_t fusion_id = -1;
  std::string pattern;
  std::string fused_node;
  graph::NodeId fused_id = graph::kNoNode;  // stable id of the fused node
  std::vector<std::string> original_nodes;
  std::vector<graph::NodeId> original_ids;  // their stable ids, in chain order
};

class FusionRegistry {
 public:
  Status add(FusionPattern pattern);  // AlreadyExists for a duplicate name
  const std::vector<FusionPattern>& patterns() const { return patterns_; }

 private:
  std::vector<FusionPattern> patterns_;
};

// Conv+BatchNormalization(+Relu), MatMul+Add(+Gelu), RMSNorm+Mul, Silu+Mul (SwiGLU).
Status register_builtin_fusions(FusionRegistry& registry);

struct FusionOptions {
  std::set<std::string> disabled;  // pattern names not to apply
};

// Rewrites `graph` in place (shapes must already be inferred) and returns the groups formed, in graph order.
Result<std::vector<FusionGroup>> apply_fusions(graph::Graph& graph, const FusionRegistry& registry,
                                               const FusionOptions& options = {});

}  // namespace hxrt::ops
