// Graph IR: nodes, values and weights of a compiled, static model graph.
//
// A Graph is a DAG. Values are tensors (graph inputs, initializers = weights, node outputs) identified by dense
// integer ids and unique names; nodes are op applications identified by dense ids and unique names. Each node
// carries its op type, domain and opset version, typed attributes, an optional kernel hint left by a compiler,
// and — once fusion ran — a fusion id and the names and ids of the original nodes it replaced.
//
// Note [Stable node ids]
// A node has two ids. Node::id is its dense index in this Graph (what NodeId arguments mean); passes that rewrite
// the graph (fusion's compact()) renumber it. Node::stable_id is the id a user sees: the node's index in the graph
// as it was built or loaded from a file (add_node order), kept through fusion, compaction and planning. A node a
// pass creates (a fused node, a copy of the heterogeneous split) gets a fresh stable id, never one that an original
// node held, and a fused node lists the stable ids it replaced. Traces, allocator events, failure reports and
// `hxrt inspect` name nodes by stable id, so one id points at the same node in the graph file and in every report.
//
// Weights (initializers) are WeightData: a pointer and size plus a keep-alive handle, so a reader can leave them
// in a memory-mapped file (zero copy) and the graph keeps the mapping alive.
//
// Validation here is structural (dangling or duplicate values, values produced twice, cycles, outputs never
// produced, weight sizes); op-level checks (arity, attribute types, dtypes, shapes) belong to ops/ schemas.
//
// Thread-safety: thread-compatible; a Graph is built by one thread and then shared read-only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hxrt/base/status.h"
#include "hxrt/graph/attribute.h"
#include "hxrt/graph/dim.h"

namespace hxrt::graph {

using ValueId = int32_t;
using NodeId = int32_t;
inline constexpr ValueId kNoValue = -1;  // an omitted optional input
inline constexpr NodeId kNoNode = -1;

// Bytes of a weight, possibly inside a memory mapping that `keepalive` holds open.
struct WeightData {
  const std::byte* data = nullptr;
  uint64_t size = 0;
  std::shared_ptr<const void> keepalive;
  // Copies `bytes` into owned memory.
  static WeightData copy_of(std::span<const std::byte> bytes);
};

struct Value {
  ValueId id = kNoValue;
  std::string name;
  TensorDesc desc;
  NodeId producer = kNoNode;        // kNoNode for graph inputs and initializers
  std::vector<NodeId> consumers;    // in node order; a node consuming twice appears twice
  bool is_input = false;
  bool is_output = false;
  bool is_initializer = false;
  WeightData weight;                // initializers only
};

// Node::version of a node that asks for its op's current version. The graph layer cannot see op schemas, so the
// version stays unresolved until ops::OpSchemaRegistry::resolve_versions (called while planning) replaces it with
// the newest schema's since_version; graph files hold resolved versions only.
inline constexpr int kLatestVersion = 0;

struct Node {
  NodeId id = kNoNode;              // dense index in this Graph; renumbered by compact()
  NodeId stable_id = kNoNode;       // Note [Stable node ids]: the graph-file id, kept through fusion and planning
  std::string name;
  std::string op_type;              // "MatMul"
  std::string domain;               // "" = the default (ONNX-compatible) domain; "hxrt", "hxrt.fused", custom
  int version = 1;                  // opset version of op_type in its domain
  AttributeMap attrs;
  std::vector<ValueId> inputs;      // kNoValue for an omitted optional input
  std::vector<ValueId> outputs;
  std::string kernel_hint;          // implementation a compiler asked for ("" = none)
  int32_t fusion_id = -1;           // >= 0 when this node is a fused instance
  std::vector<std::string> fused_from;  // names of the original nodes it replaces
  std::vector<NodeId> fused_ids;        // their stable ids, in the same order
};

class Graph {
 public:
  explicit Graph(std::string name = "graph") : name_(std::move(name)) {}
  Graph(Graph&&) = default;
  Graph& operator=(Graph&&) = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  // An independent copy (weights share their bytes through keepalive).
  Graph clone() const;

  const std::string& name() const { return name_; }

  // Building. Names must be unique among values (and among nodes); AlreadyExists otherwise.
  Result<ValueId> add_input(std::string name, TensorDesc desc);
  Result<ValueId> add_initializer(std::string name, TensorDesc desc, WeightData weight);
  // Adds a node; output values are created with an unknown desc (filled by shape inference) unless given.
  // Inputs are value names ("" for an omitted optional input); NotFound names a missing input. The default
  // version, kLatestVersion, stands for the op's current version (see there).
  Result<NodeId> add_node(std::string name, std::string op_type, std::span<const std::string> inputs,
                          std::span<const std::string> outputs, AttributeMap attrs = {}, std::string domain = "",
                          int version = kLatestVersion);
  Status mark_output(std::string_view value_name);
  // Declares a value that a node added later produces (add_node adopts it with this desc). Readers use it to
  // rebuild a graph with its value ids and descs intact; passes use it to give a new node's output a desc.
  Result<ValueId> declare_value(std::string name, TensorDesc desc);

  // Access.
  int32_t num_values() const { return static_cast<int32_t>(values_.size()); }
  int32_t num_nodes() const { return static_cast<int32_t>(nodes_.size()); }
  const Value& value(ValueId id) const;
  Value& mutable_value(ValueId id);
  // Removed nodes stay addressable by id (with `id == kNoNode`) until compact(); see has_node.
  const Node& node(NodeId id) const;
  Node& mutable_node(NodeId id);
  // True when `id` names a node that has not been removed.
  bool has_node(NodeId id) const;
  Result<ValueId> find_value(std::string_view name) const;
  Result<NodeId> find_node(std::string_view name) const;
  // The live node whose stable id is `stable_id` (Note [Stable node ids]); NotFound otherwise. Linear in nodes.
  Result<NodeId> find_node_by_stable_id(NodeId stable_id) const;
  // The stable id the next added node gets: one past every stable id this graph has given out.
  NodeId next_stable_id() const { return next_stable_id_; }
  const std::vector<ValueId>& inputs() const { return inputs_; }
  const std::vector<ValueId>& outputs() const { return outputs_; }
  const std::vector<ValueId>& initializers() const { return initializers_; }
  // Nodes in a topological order (stable: insertion order among ready nodes); FailedPrecondition naming a node on
  // a cycle.
  Result<std::vector<NodeId>> topological_order() const;

  // Structural validation; the Status names the node and field at fault.
  Status validate() const;

  // Rewriting (used by passes such as fusion). Removing nodes leaves their ids unused; compact() renumbers nodes
  // and values densely (dropping values nobody produces or uses that are not inputs/initializers/outputs).
  Status remove_node(NodeId id);
  void compact();
  // Rewires input `index` of `node` to `value` (kNoValue to omit it), keeping consumer lists right. Prefer this to
  // editing Node::inputs through mutable_node, which leaves the links stale (validate() reports that).
  Status set_node_input(NodeId node, int index, ValueId value);
  // Makes every node that consumes `from` consume `to` instead (graph outputs are not moved).
  Status replace_all_uses(ValueId from, ValueId to);

  std::string to_string() const;  // a readable listing, one node per line

 private:
  Result<ValueId> add_value(std::string name, TensorDesc desc);
  void rebuild_indices();

  std::string name_;
  std::vector<Value> values_;
  std::vector<Node> nodes_;                 // removed nodes have id kNoNode
  std::vector<ValueId> inputs_;
  std::vector<ValueId> outputs_;
  std::vector<ValueId> initializers_;
  std::unordered_map<std::string, ValueId> value_by_name_;
  std::unordered_map<std::string, NodeId> node_by_name_;
  NodeId next_stable_id_ = 0;
};

}  // namespace hxrt::graph
