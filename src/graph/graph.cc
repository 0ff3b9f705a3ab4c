#include "hxrt/graph/graph.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <set>
#include <unordered_set>

#include <fmt/ranges.h>

#include "hxrt/base/check.h"

namespace hxrt::graph {

WeightData WeightData::copy_of(std::span<const std::byte> bytes) {
  auto owned = std::make_shared<std::vector<std::byte>>(bytes.begin(), bytes.end());
  WeightData weight;
  weight.data = owned->data();
  weight.size = owned->size();
  weight.keepalive = std::move(owned);
  return weight;
}

Graph Graph::clone() const {
  Graph copy(name_);
  copy.values_ = values_;
  copy.nodes_ = nodes_;
  copy.inputs_ = inputs_;
  copy.outputs_ = outputs_;
  copy.initializers_ = initializers_;
  copy.value_by_name_ = value_by_name_;
  copy.node_by_name_ = node_by_name_;
  copy.next_stable_id_ = next_stable_id_;
  return copy;
}

// ---- Building -------------------------------------------------------------------------------------------------

Result<ValueId> Graph::add_value(std::string name, TensorDesc desc) {
  if (name.empty()) return invalid_argument("graph '{}': a value needs a name", name_);
  if (value_by_name_.count(name) != 0) return already_exists("graph '{}': value '{}' already exists", name_, name);
  if (values_.size() >= static_cast<size_t>(INT32_MAX)) return out_of_range("graph '{}' has too many values", name_);
  const auto id = static_cast<ValueId>(values_.size());
  Value value;
  value.id = id;
  value.name = std::move(name);
  value.desc = std::move(desc);
  value_by_name_.emplace(value.name, id);
  values_.push_back(std::move(value));
  return id;
}

Result<ValueId> Graph::add_input(std::string name, TensorDesc desc) {
  HXRT_ASSIGN_OR_RETURN(const ValueId id, add_value(std::move(name), std::move(desc)));
  values_[static_cast<size_t>(id)].is_input = true;
  inputs_.push_back(id);
  return id;
}

Result<ValueId> Graph::add_initializer(std::string name, TensorDesc desc, WeightData weight) {
  HXRT_ASSIGN_OR_RETURN(const ValueId id, add_value(std::move(name), std::move(desc)));
  Value& value = values_[static_cast<size_t>(id)];
  value.is_initializer = true;
  value.weight = std::move(weight);
  initializers_.push_back(id);
  return id;
}

Result<ValueId> Graph::declare_value(std::string name, TensorDesc desc) {
  return add_value(std::move(name), std::move(desc));
}

Result<NodeId> Graph::add_node(std::string name, std::string op_type, std::span<const std::string> inputs,
                               std::span<const std::string> outputs, AttributeMap attrs, std::string domain,
                               int version) {
  // Everything is checked before anything changes, so a failed call leaves the graph as it was.
  if (name.empty()) return invalid_argument("graph '{}': a node needs a name", name_);
  if (node_by_name_.count(name) != 0) return already_exists("graph '{}': node '{}' already exists", name_, name);
  if (op_type.empty()) return invalid_argument("node '{}' op_type: empty", name);
  if (nodes_.size() >= static_cast<size_t>(INT32_MAX)) return out_of_range("graph '{}' has too many nodes", name_);

  std::vector<ValueId> input_ids;
  input_ids.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].empty()) {
      input_ids.push_back(kNoValue);
      continue;
    }
    auto it = value_by_name_.find(inputs[i]);
    if (it == value_by_name_.end()) {
      return not_found("node '{}' input {}: value '{}' does not exist", name, i, inputs[i]);
    }
    input_ids.push_back(it->second);
  }

  // Outputs are new values, or values declared earlier that nothing produces yet (adopted with their desc).
  std::vector<std::string> new_outputs;  // names to create
  std::unordered_set<std::string_view> seen;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::string& out = outputs[i];
    if (out.empty()) return invalid_argument("node '{}' output {}: empty value name", name, i);
    if (!seen.insert(out).second)
      return already_exists("node '{}' output {}: value '{}' is listed twice", name, i, out);
    auto it = value_by_name_.find(out);
    if (it == value_by_name_.end()) continue;
    const Value& existing = values_[static_cast<size_t>(it->second)];
    if (existing.is_input || existing.is_initializer) {
      return already_exists("node '{}' output {}: value '{}' already exists as a graph {}", name, i, out,
                            existing.is_input ? "input" : "initializer");
    }
    if (existing.producer != kNoNode) {
      return already_exists("node '{}' output {}: value '{}' already exists, produced by node '{}'", name, i, out,
                            nodes_[static_cast<size_t>(existing.producer)].name);
    }
  }

  const auto id = static_cast<NodeId>(nodes_.size());
  Node node;
  node.id = id;
  node.stable_id = next_stable_id_++;
  node.name = std::move(name);
  node.op_type = std::move(op_type);
  node.domain = std::move(domain);
  node.version = version;
  node.attrs = std::move(attrs);
  node.inputs = std::move(input_ids);
  for (const std::string& out : outputs) {
    ValueId vid = kNoValue;
    if (auto it = value_by_name_.find(out); it != value_by_name_.end()) {
      vid = it->second;
    } else {
      Result<ValueId> created = add_value(out, TensorDesc{});
      HXRT_CHECK(created.ok(), "{}", created.status().to_string());  // names were checked above
      vid = *created;
    }
    values_[static_cast<size_t>(vid)].producer = id;
    node.outputs.push_back(vid);
  }
  for (ValueId in : node.inputs) {
    if (in != kNoValue) values_[static_cast<size_t>(in)].consumers.push_back(id);
  }
  node_by_name_.emplace(node.name, id);
  nodes_.push_back(std::move(node));
  return id;
}

Status Graph::mark_output(std::string_view value_name) {
  HXRT_ASSIGN_OR_RETURN(const ValueId id, find_value(value_name));
  Value& value = values_[static_cast<size_t>(id)];
  if (!value.is_output) {
    value.is_output = true;
    outputs_.push_back(id);
  }
  return ok_status();
}

// ---- Access ---------------------------------------------------------------------------------------------------

const Value& Graph::value(ValueId id) const {
  HXRT_CHECK(id >= 0 && id < num_values(), "graph '{}': value id {} out of range [0, {})", name_, id, num_values());
  return values_[static_cast<size_t>(id)];
}

Value& Graph::mutable_value(ValueId id) {
  HXRT_CHECK(id >= 0 && id < num_values(), "graph '{}': value id {} out of range [0, {})", name_, id, num_values());
  return values_[static_cast<size_t>(id)];
}

const Node& Graph::node(NodeId id) const {
  HXRT_CHECK(id >= 0 && id < num_nodes(), "graph '{}': node id {} out of range [0, {})", name_, id, num_nodes());
  return nodes_[static_cast<size_t>(id)];
}

Node& Graph::mutable_node(NodeId id) {
  HXRT_CHECK(id >= 0 && id < num_nodes(), "graph '{}': node id {} out of range [0, {})", name_, id, num_nodes());
  return nodes_[static_cast<size_t>(id)];
}

bool Graph::has_node(NodeId id) const {
  return id >= 0 && id < num_nodes() && nodes_[static_cast<size_t>(id)].id != kNoNode;
}

Result<ValueId> Graph::find_value(std::string_view name) const {
  auto it = value_by_name_.find(std::string(name));
  if (it == value_by_name_.end()) return not_found("graph '{}' has no value '{}'", name_, name);
  return it->second;
}

Result<NodeId> Graph::find_node(std::string_view name) const {
  auto it = node_by_name_.find(std::string(name));
  if (it == node_by_name_.end()) return not_found("graph '{}' has no node '{}'", name_, name);
  return it->second;
}

Result<NodeId> Graph::find_node_by_stable_id(NodeId stable_id) const {
  for (const Node& node : nodes_) {
    if (node.id != kNoNode && node.stable_id == stable_id) return node.id;
  }
  return not_found("graph '{}' has no node with stable id {}", name_, stable_id);
}

Result<std::vector<NodeId>> Graph::topological_order() const {
  // Edges come from Node::inputs and Value::producer, not from consumer lists, so a graph edited through
  // mutable_node is still ordered (or its cycle found) correctly.
  const size_t n = nodes_.size();
  auto producer_of = [&](ValueId v) -> NodeId {
    if (v < 0 || v >= num_values()) return kNoNode;
    const NodeId p = values_[static_cast<size_t>(v)].producer;
    return has_node(p) ? p : kNoNode;
  };
  std::vector<int64_t> pending(n, 0);  // unprocessed producer edges into each node
  std::vector<std::vector<NodeId>> successors(n);
  size_t live = 0;
  for (size_t i = 0; i < n; ++i) {
    if (nodes_[i].id == kNoNode) continue;
    ++live;
    for (ValueId in : nodes_[i].inputs) {
      const NodeId p = producer_of(in);
      if (p == kNoNode) continue;
      ++pending[i];
      successors[static_cast<size_t>(p)].push_back(static_cast<NodeId>(i));
    }
  }
  std::priority_queue<NodeId, std::vector<NodeId>, std::greater<>> ready;  // lowest id first: stable
  for (size_t i = 0; i < n; ++i) {
    if (nodes_[i].id != kNoNode && pending[i] == 0) ready.push(static_cast<NodeId>(i));
  }
  std::vector<NodeId> order;
  order.reserve(live);
  while (!ready.empty()) {
    const NodeId id = ready.top();
    ready.pop();
    order.push_back(id);
    for (NodeId s : successors[static_cast<size_t>(id)]) {
      if (--pending[static_cast<size_t>(s)] == 0) ready.push(s);
    }
  }
  if (order.size() == live) return order;

  // Every node left has an unprocessed producer; walking producers from one of them must revisit a node, and the
  // walk from that node's first visit is a cycle.
  NodeId start = kNoNode;
  for (size_t i = 0; i < n && start == kNoNode; ++i) {
    if (nodes_[i].id != kNoNode && pending[i] > 0) start = static_cast<NodeId>(i);
  }
  std::vector<NodeId> walk;
  std::vector<int64_t> position(n, -1);
  NodeId at = start;
  while (position[static_cast<size_t>(at)] < 0) {
    position[static_cast<size_t>(at)] = static_cast<int64_t>(walk.size());
    walk.push_back(at);
    NodeId next = kNoNode;
    for (ValueId in : nodes_[static_cast<size_t>(at)].inputs) {
      const NodeId p = producer_of(in);
      if (p != kNoNode && pending[static_cast<size_t>(p)] > 0) {
        next = p;
        break;
      }
    }
    HXRT_CHECK(next != kNoNode, "cycle walk lost its way at node {}", at);
    at = next;
  }
  // walk[position[at]..] runs against the data flow from `at`; print it along the flow, starting at `at`.
  std::vector<std::string> names = {nodes_[static_cast<size_t>(at)].name};
  for (auto i = static_cast<int64_t>(walk.size()) - 1; i > position[static_cast<size_t>(at)]; --i) {
    names.push_back(nodes_[static_cast<size_t>(walk[static_cast<size_t>(i)])].name);
  }
  names.push_back(names.front());
  return failed_precondition("graph '{}' has a cycle through node '{}' ({})", name_,
                             nodes_[static_cast<size_t>(at)].name, fmt::join(names, " -> "));
}

// ---- Validation -----------------------------------------------------------------------------------------------

namespace {

// Bytes a static shape of `dtype` needs, or an error naming what is wrong with it.
Result<uint64_t> static_weight_bytes(const TensorDesc& desc) {
  uint64_t elements = 1;
  for (const Dim& d : desc.shape.dims()) {
    if (d.value() < 0) return invalid_argument("dimension {} is negative", d.value());
    if (__builtin_mul_overflow(elements, static_cast<uint64_t>(d.value()), &elements)) {
      return out_of_range("shape {} has more elements than fit in 64 bits", desc.shape.to_string());
    }
  }
  return storage_bytes(desc.dtype, elements);
}

}  // namespace

Status Graph::validate() const {
  auto value_label = [&](ValueId v) -> std::string {
    if (v >= 0 && v < num_values()) return fmt::format("'{}'", values_[static_cast<size_t>(v)].name);
    return fmt::format("id {}", v);
  };

  // Values.
  std::unordered_set<std::string_view> value_names;
  for (size_t i = 0; i < values_.size(); ++i) {
    const Value& v = values_[i];
    if (v.id != static_cast<ValueId>(i)) return internal_error("value '{}' at index {} has id {}", v.name, i, v.id);
    if (v.name.empty()) return invalid_argument("value {}: empty name", i);
    if (!value_names.insert(v.name).second) return invalid_argument("value '{}': name used twice", v.name);
    if (v.is_input && v.is_initializer)
      return invalid_argument("value '{}': both a graph input and an initializer", v.name);
    if (v.producer != kNoNode) {
      if (v.is_input || v.is_initializer) {
        return invalid_argument("value '{}': a graph {} cannot have a producer (node id {})", v.name,
                                v.is_input ? "input" : "initializer", v.producer);
      }
      if (!has_node(v.producer)) {
        return invalid_argument("value '{}' producer: node id {} does not exist", v.name, v.producer);
      }
      const Node& p = nodes_[static_cast<size_t>(v.producer)];
      if (std::find(p.outputs.begin(), p.outputs.end(), v.id) == p.outputs.end()) {
        return invalid_argument("value '{}' producer: node '{}' does not list it among its outputs", v.name, p.name);
      }
    }
  }

  // Graph input, initializer and output lists.
  auto check_list = [&](const std::vector<ValueId>& list, std::string_view what, bool Value::*flag) -> Status {
    std::unordered_set<ValueId> seen;
    for (size_t i = 0; i < list.size(); ++i) {
      const ValueId id = list[i];
      if (id < 0 || id >= num_values()) return invalid_argument("graph {} {}: value id {} does not exist", what, i, id);
      if (!(values_[static_cast<size_t>(id)].*flag)) {
        return invalid_argument("graph {} {}: value {} is not flagged as one", what, i, value_label(id));
      }
      if (!seen.insert(id).second)
        return invalid_argument("graph {} {}: value {} is listed twice", what, i, value_label(id));
    }
    size_t flagged = 0;
    for (const Value& v : values_) flagged += (v.*flag) ? 1 : 0;
    if (flagged != list.size()) {
      return invalid_argument("graph {}s: {} values are flagged but {} are listed", what, flagged, list.size());
    }
    return ok_status();
  };
  HXRT_RETURN_IF_ERROR(check_list(inputs_, "input", &Value::is_input));
  HXRT_RETURN_IF_ERROR(check_list(initializers_, "initializer", &Value::is_initializer));
  HXRT_RETURN_IF_ERROR(check_list(outputs_, "output", &Value::is_output));

  // Nodes.
  std::unordered_set<std::string_view> node_names;
  std::vector<NodeId> produced_by(values_.size(), kNoNode);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& node = nodes_[i];
    if (node.id == kNoNode) continue;  // removed
    if (node.id != static_cast<NodeId>(i))
      return internal_error("node '{}' at index {} has id {}", node.name, i, node.id);
    if (node.name.empty()) return invalid_argument("node {} name: empty", i);
    if (!node_names.insert(node.name).second) return invalid_argument("node '{}' name: used by two nodes", node.name);
    if (node.op_type.empty()) return invalid_argument("node '{}' op_type: empty", node.name);
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const ValueId in = node.inputs[k];
      if (in == kNoValue) continue;
      if (in < 0 || in >= num_values()) {
        return invalid_argument("node '{}' input {}: value id {} does not exist", node.name, k, in);
      }
      const Value& v = values_[static_cast<size_t>(in)];
      if (!v.is_input && !v.is_initializer && !has_node(v.producer)) {
        return invalid_argument(
            "node '{}' input {}: value '{}' is not a graph input or initializer and no node produces it", node.name, k,
            v.name);
      }
    }
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      const ValueId out = node.outputs[k];
      if (out < 0 || out >= num_values()) {
        return invalid_argument("node '{}' output {}: value id {} does not exist", node.name, k, out);
      }
      const Value& v = values_[static_cast<size_t>(out)];
      if (v.is_input || v.is_initializer) {
        return invalid_argument("node '{}' output {}: value '{}' is a graph {}", node.name, k, v.name,
                                v.is_input ? "input" : "initializer");
      }
      NodeId& first = produced_by[static_cast<size_t>(out)];
      if (first != kNoNode) {
        return invalid_argument("node '{}' output {}: value '{}' is also produced by node '{}'", node.name, k, v.name,
                                nodes_[static_cast<size_t>(first)].name);
      }
      first = node.id;
      if (v.producer != node.id) {
        return invalid_argument("node '{}' output {}: value '{}' records producer id {}", node.name, k, v.name,
                                v.producer);
      }
    }
  }

  // Weights.
  for (ValueId id : initializers_) {
    const Value& v = values_[static_cast<size_t>(id)];
    if (v.weight.data == nullptr && v.weight.size > 0) {
      return invalid_argument("initializer '{}' weight: {} bytes but no data", v.name, v.weight.size);
    }
    if (!v.desc.shape.is_static()) continue;
    Result<uint64_t> expected = static_weight_bytes(v.desc);
    if (!expected.ok()) {
      return std::move(expected).take_status().with_context(
          fmt::format("checking initializer '{}' ({})", v.name, v.desc.to_string()));
    }
    if (*expected != v.weight.size) {
      return invalid_argument("initializer '{}' weight: {} bytes, expected {} for {}", v.name, v.weight.size, *expected,
                              v.desc.to_string());
    }
  }

  // Graph outputs.
  for (size_t i = 0; i < outputs_.size(); ++i) {
    const Value& v = values_[static_cast<size_t>(outputs_[i])];
    if (!v.is_input && !v.is_initializer && !has_node(v.producer)) {
      return invalid_argument("graph output {}: value '{}' is not produced by any node", i, v.name);
    }
  }

  // Cycles.
  Result<std::vector<NodeId>> order = topological_order();
  if (!order.ok()) return std::move(order).take_status();

  // Consumer lists match Node::inputs.
  std::vector<std::vector<NodeId>> consumers(values_.size());
  for (const Node& node : nodes_) {
    if (node.id == kNoNode) continue;
    for (ValueId in : node.inputs) {
      if (in != kNoValue) consumers[static_cast<size_t>(in)].push_back(node.id);
    }
  }
  for (size_t i = 0; i < values_.size(); ++i) {
    std::vector<NodeId> recorded = values_[i].consumers;
    std::sort(recorded.begin(), recorded.end());
    if (recorded != consumers[i]) {
      return failed_precondition(
          "value '{}' consumers: recorded [{}] but node inputs say [{}] (edit inputs with Graph::set_node_input)",
          values_[i].name, fmt::join(values_[i].consumers, ", "), fmt::join(consumers[i], ", "));
    }
  }
  return ok_status();
}

// ---- Rewriting ------------------------------------------------------------------------------------------------

namespace {

void erase_consumer(Value& value, NodeId node) {
  auto& c = value.consumers;
  c.erase(std::remove(c.begin(), c.end(), node), c.end());
}

// Inserts `node` keeping the list in node order.
void insert_consumer(Value& value, NodeId node) {
  auto& c = value.consumers;
  c.insert(std::upper_bound(c.begin(), c.end(), node), node);
}

}  // namespace

Status Graph::remove_node(NodeId id) {
  if (!has_node(id)) return not_found("graph '{}': node id {} does not exist or was removed", name_, id);
  Node& node = nodes_[static_cast<size_t>(id)];
  for (ValueId in : node.inputs) {
    if (in >= 0 && in < num_values()) erase_consumer(values_[static_cast<size_t>(in)], id);
  }
  for (ValueId out : node.outputs) {
    if (out >= 0 && out < num_values() && values_[static_cast<size_t>(out)].producer == id) {
      values_[static_cast<size_t>(out)].producer = kNoNode;
    }
  }
  if (auto it = node_by_name_.find(node.name); it != node_by_name_.end() && it->second == id) node_by_name_.erase(it);
  node = Node{};  // a tombstone: id kNoNode
  return ok_status();
}

Status Graph::set_node_input(NodeId node_id, int index, ValueId value_id) {
  if (!has_node(node_id)) return not_found("graph '{}': node id {} does not exist or was removed", name_, node_id);
  Node& node = nodes_[static_cast<size_t>(node_id)];
  if (index < 0 || static_cast<size_t>(index) >= node.inputs.size()) {
    return out_of_range("node '{}' input {}: the node has {} inputs", node.name, index, node.inputs.size());
  }
  if (value_id != kNoValue && (value_id < 0 || value_id >= num_values())) {
    return not_found("node '{}' input {}: value id {} does not exist", node.name, index, value_id);
  }
  ValueId& slot = node.inputs[static_cast<size_t>(index)];
  if (slot == value_id) return ok_status();
  if (slot != kNoValue) {
    // Drop one consumer entry for this node (it may consume the old value through other inputs too).
    auto& c = values_[static_cast<size_t>(slot)].consumers;
    if (auto it = std::find(c.begin(), c.end(), node_id); it != c.end()) c.erase(it);
  }
  slot = value_id;
  if (value_id != kNoValue) insert_consumer(values_[static_cast<size_t>(value_id)], node_id);
  return ok_status();
}

Status Graph::replace_all_uses(ValueId from, ValueId to) {
  if (from < 0 || from >= num_values()) return not_found("graph '{}': value id {} does not exist", name_, from);
  if (to < 0 || to >= num_values()) return not_found("graph '{}': value id {} does not exist", name_, to);
  if (from == to) return ok_status();
  const std::vector<NodeId> users = values_[static_cast<size_t>(from)].consumers;
  for (NodeId user : users) {
    if (!has_node(user)) continue;
    const std::vector<ValueId>& inputs = nodes_[static_cast<size_t>(user)].inputs;
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (inputs[k] == from) HXRT_RETURN_IF_ERROR(set_node_input(user, static_cast<int>(k), to));
    }
  }
  return ok_status();
}

void Graph::compact() {
  std::vector<NodeId> node_map(nodes_.size(), kNoNode);
  std::vector<Node> nodes;
  for (Node& node : nodes_) {
    if (node.id == kNoNode) continue;
    node_map[static_cast<size_t>(node.id)] = static_cast<NodeId>(nodes.size());
    nodes.push_back(std::move(node));
  }
  std::vector<bool> used(values_.size(), false);
  for (const Node& node : nodes) {
    for (ValueId v : node.inputs) {
      if (v >= 0 && v < num_values()) used[static_cast<size_t>(v)] = true;
    }
    for (ValueId v : node.outputs) {
      if (v >= 0 && v < num_values()) used[static_cast<size_t>(v)] = true;
    }
  }
  std::vector<ValueId> value_map(values_.size(), kNoValue);
  std::vector<Value> values;
  for (size_t i = 0; i < values_.size(); ++i) {
    Value& v = values_[i];
    if (!(used[i] || v.is_input || v.is_initializer || v.is_output)) continue;
    value_map[i] = static_cast<ValueId>(values.size());
    values.push_back(std::move(v));
  }
  auto map_value = [&](ValueId v) {
    return v >= 0 && static_cast<size_t>(v) < value_map.size() ? value_map[static_cast<size_t>(v)] : kNoValue;
  };
  auto map_node = [&](NodeId n) {
    return n >= 0 && static_cast<size_t>(n) < node_map.size() ? node_map[static_cast<size_t>(n)] : kNoNode;
  };
  for (size_t i = 0; i < values.size(); ++i) {
    Value& v = values[i];
    v.id = static_cast<ValueId>(i);
    v.producer = map_node(v.producer);
    std::vector<NodeId> consumers;
    for (NodeId c : v.consumers) {
      if (map_node(c) != kNoNode) consumers.push_back(map_node(c));
    }
    v.consumers = std::move(consumers);
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    Node& node = nodes[i];
    node.id = static_cast<NodeId>(i);
    for (ValueId& v : node.inputs) v = map_value(v);
    for (ValueId& v : node.outputs) v = map_value(v);
  }
  auto map_list = [&](std::vector<ValueId>& list) {
    for (ValueId& v : list) v = map_value(v);
    list.erase(std::remove(list.begin(), list.end(), kNoValue), list.end());
  };
  map_list(inputs_);
  map_list(outputs_);
  map_list(initializers_);
  values_ = std::move(values);
  nodes_ = std::move(nodes);
  rebuild_indices();
}

void Graph::rebuild_indices() {
  value_by_name_.clear();
  node_by_name_.clear();
  for (const Value& v : values_) value_by_name_.emplace(v.name, v.id);
  for (const Node& n : nodes_) {
    if (n.id != kNoNode) node_by_name_.emplace(n.name, n.id);
  }
}

// ---- Printing -------------------------------------------------------------------------------------------------

std::string Graph::to_string() const {
  auto name_of = [&](ValueId v) -> std::string {
    if (v == kNoValue) return "_";
    if (v < 0 || v >= num_values()) return fmt::format("?{}", v);
    return values_[static_cast<size_t>(v)].name;
  };
  size_t live = 0;
  for (const Node& n : nodes_) live += n.id != kNoNode ? 1 : 0;
  std::string out = fmt::format("graph '{}': {} inputs, {} initializers, {} nodes, {} outputs\n", name_, inputs_.size(),
                                initializers_.size(), live, outputs_.size());
  for (ValueId id : inputs_) {
    out += fmt::format("  input {}: {}\n", name_of(id), value(id).desc.to_string());
  }
  for (ValueId id : initializers_) {
    out += fmt::format("  initializer {}: {} ({} bytes)\n", name_of(id), value(id).desc.to_string(),
                       value(id).weight.size);
  }
  for (const Node& n : nodes_) {
    if (n.id == kNoNode) continue;
    std::vector<std::string> ins;
    std::vector<std::string> outs;
    for (ValueId v : n.inputs) ins.push_back(name_of(v));
    for (ValueId v : n.outputs) {
      outs.push_back(v >= 0 && v < num_values() ? fmt::format("{}: {}", name_of(v), value(v).desc.to_string())
                                                : name_of(v));
    }
    std::string op = n.domain.empty() ? n.op_type : fmt::format("{}::{}", n.domain, n.op_type);
    out += fmt::format("  #{} {} = {}-{}({}) -> {}", n.id, n.name, op,
                       n.version == kLatestVersion ? std::string("latest") : std::to_string(n.version), fmt::join(ins, ", "),
                       fmt::join(outs, ", "));
    if (n.attrs.size() > 0) out += " " + n.attrs.to_string();
    if (!n.kernel_hint.empty()) out += fmt::format(" kernel={}", n.kernel_hint);
    if (n.fusion_id >= 0) out += fmt::format(" fusion={} from [{}]", n.fusion_id, fmt::join(n.fused_from, ", "));
    out += "\n";
  }
  for (ValueId id : outputs_) out += fmt::format("  output {}\n", name_of(id));
  return out;
}

}  // namespace hxrt::graph
