#include "hxrt/ops/kernel_registry.h"

#include <algorithm>

#include <fmt/ranges.h>

namespace hxrt::ops {
namespace {

bool versions_overlap(const KernelDef& a, const KernelDef& b) {
  return a.since_version <= b.end_version && b.since_version <= a.end_version;
}

std::string label(const KernelDef& def) {
  return fmt::format("{} v{} ({}, {}, priority {})", def.name, def.impl_version, kernel_kind_name(def.kind),
                     hal::device_kind_name(def.device), def.priority);
}

// Default order: priority, then newer implementation, then name (deterministic).
bool better(const KernelDef* a, const KernelDef* b) {
  if (a->priority != b->priority) return a->priority > b->priority;
  if (a->impl_version != b->impl_version) return a->impl_version > b->impl_version;
  return a->name < b->name;
}

// Empty when `def` can run `node` on `device`, else why not.
std::string incompatibility(const KernelDef& def, const graph::Graph& graph, const graph::Node& node,
                            const hal::DeviceInfo& device) {
  if (def.device != device.kind) {
    return fmt::format("runs on {} devices, not {}", hal::device_kind_name(def.device),
                       hal::device_kind_name(device.kind));
  }
  if (node.version < def.since_version || node.version > def.end_version) {
    return fmt::format("supports opset versions {}..{}, node is version {}", def.since_version,
                       def.end_version == kMaxOpVersion ? std::string("latest") : std::to_string(def.end_version),
                       node.version);
  }
  for (size_t i = 0; i < node.inputs.size() && i < def.input_dtypes.size(); ++i) {
    if (node.inputs[i] == graph::kNoValue || def.input_dtypes[i].empty()) continue;
    const DType dtype = graph.value(node.inputs[i]).desc.dtype;
    if (std::find(def.input_dtypes[i].begin(), def.input_dtypes[i].end(), dtype) == def.input_dtypes[i].end()) {
      std::vector<std::string_view> names;
      for (DType d : def.input_dtypes[i]) names.push_back(dtype_name(d));
      return fmt::format("input {} is {}, kernel takes {}", i, dtype, fmt::join(names, "/"));
    }
  }
  if (def.supports) {
    std::string why;
    if (!def.supports(graph, node, &why)) return why.empty() ? "does not support this node" : why;
  }
  return "";
}

}  // namespace

std::string shape_bucket(const graph::Graph& graph, const graph::Node& node, const hal::DeviceInfo& device,
                         const graph::SymbolBindings& dims) {
  std::string out(hal::device_kind_name(device.kind));
  for (graph::ValueId input : node.inputs) {
    if (input == graph::kNoValue) {
      out += " -";
      continue;
    }
    const graph::TensorDesc& desc = graph.value(input).desc;
    std::vector<std::string> extents;
    for (const graph::Dim& dim : desc.shape.dims()) {
      Result<int64_t> value = dim.evaluate(dims);
      extents.push_back(value.ok() ? std::to_string(*value) : dim.to_string());
    }
    out += fmt::format(" {}[{}]", dtype_name(desc.dtype), fmt::join(extents, ","));
  }
  if (!node.attrs.items().empty()) {
    // FNV-1a of the attribute text: attributes change the work (transposes, strides) but are too long for a key.
    uint32_t hash = 2166136261u;
    for (char c : node.attrs.to_string()) hash = (hash ^ static_cast<uint8_t>(c)) * 16777619u;
    out += fmt::format(" attrs:{:08x}", hash);
  }
  return out;
}

Status KernelRegistry::add(KernelDef def) {
  if (def.op_type.empty()) return invalid_argument("kernel '{}' has no op type", def.name);
  if (def.name.empty()) return invalid_argument("kernel for op '{}' has no implementation name", def.op_type);
  if (!def.launch) return invalid_argument("kernel '{}' has no launch function", def.name);
  if (def.since_version < 1 || def.end_version < def.since_version) {
    return invalid_argument("kernel '{}': bad version range {}..{}", def.name, def.since_version, def.end_version);
  }
  auto& existing = by_op_[{def.domain, def.op_type}];
  for (const KernelDef* other : existing) {
    if (other->device != def.device || !versions_overlap(*other, def)) continue;
    if (other->name == def.name) {
      return already_exists("kernel '{}' for op '{}' on {} is already registered for overlapping versions {}..{}",
                            def.name, def.op_type, hal::device_kind_name(def.device), other->since_version,
                            other->end_version);
    }
    if (other->priority == def.priority && other->input_dtypes == def.input_dtypes && !other->supports &&
        !def.supports) {
      return already_exists(
          "kernels '{}' and '{}' for op '{}' accept the same nodes with the same priority {}; the choice between "
          "them would be arbitrary (give one a different priority or a supports() check)",
          other->name, def.name, def.op_type, def.priority);
    }
  }
  kernels_.push_back(std::make_unique<KernelDef>(std::move(def)));
  existing.push_back(kernels_.back().get());
  return ok_status();
}

std::vector<const KernelDef*> KernelRegistry::kernels_for(std::string_view op_type, std::string_view domain) const {
  auto it = by_op_.find(std::pair<std::string, std::string>(domain, op_type));
  return it == by_op_.end() ? std::vector<const KernelDef*>{} : it->second;
}

std::vector<const KernelDef*> KernelRegistry::all() const {
  std::vector<const KernelDef*> out;
  for (const auto& def : kernels_) out.push_back(def.get());
  return out;
}

Result<Selection> KernelRegistry::select(const graph::Graph& graph, const graph::Node& node,
                                         const hal::DeviceInfo& device, const SelectionOptions& options) const {
  Selection selection;
  std::vector<const KernelDef*> compatible;
  for (const KernelDef* def : kernels_for(node.op_type, node.domain)) {
    std::string why = incompatibility(*def, graph, node, device);
    selection.verdicts.push_back(CandidateVerdict{def, why.empty(), why});
    if (why.empty()) compatible.push_back(def);
  }
  const std::string node_text = fmt::format("node '{}' ({})", node.name, node.op_type);
  if (selection.verdicts.empty()) {
    return not_found("{}: no kernel is registered for op '{}'{}", node_text, node.op_type,
                     node.domain.empty() ? std::string() : fmt::format(" in domain '{}'", node.domain));
  }
  if (compatible.empty()) {
    std::string reasons;
    for (const CandidateVerdict& v : selection.verdicts) reasons += fmt::format("\n  {}: {}", label(*v.kernel), v.reason);
    return not_found("{}: no compatible kernel on {} device '{}'; candidates:{}", node_text,
                     hal::device_kind_name(device.kind), device.name, reasons);
  }
  std::sort(compatible.begin(), compatible.end(), better);
  auto by_name = [&](std::string_view name) -> const KernelDef* {
    for (const KernelDef* def : compatible) {
      if (def->name == name) return def;
    }
    return nullptr;
  };

  std::string hint_note;
  // 1. Forced by node name, then by op type.
  auto forced = options.forced.find(node.name);
  if (forced == options.forced.end()) forced = options.forced.find(node.op_type);
  if (forced != options.forced.end()) {
    if (const KernelDef* def = by_name(forced->second)) {
      selection.chosen = def;
      selection.policy = "forced";
      selection.reason = fmt::format("forced by the session options ({} = {})", forced->first, forced->second);
    } else {
      auto named = std::find_if(selection.verdicts.begin(), selection.verdicts.end(),
                                [&](const CandidateVerdict& v) { return v.kernel->name == forced->second; });
      if (named == selection.verdicts.end()) {
        return not_found("{}: forced kernel '{}' does not exist for this op", node_text, forced->second);
      }
      return failed_precondition("{}: forced kernel '{}' cannot run this node: {}", node_text, forced->second,
                                 named->reason);
    }
  }
  // 2. The compiler's hint.
  if (selection.chosen == nullptr && options.honour_hints && !node.kernel_hint.empty()) {
    if (const KernelDef* def = by_name(node.kernel_hint)) {
      selection.chosen = def;
      selection.policy = "hint";
      selection.reason = fmt::format("requested by the graph's kernel hint '{}'", node.kernel_hint);
    } else {
      hint_note = fmt::format(" (the graph's hint '{}' was ignored: no compatible kernel of that name)",
                              node.kernel_hint);
    }
  }
  // 3. Measured, when every candidate has a timing for this shape bucket.
  const std::string bucket =
      options.timings != nullptr && compatible.size() > 1 ? shape_bucket(graph, node, device, options.bucket_dims) : "";
  if (selection.chosen == nullptr && options.timings != nullptr && compatible.size() > 1) {
    const KernelDef* fastest = nullptr;
    int64_t fastest_ns = 0;
    bool complete = true;
    for (const KernelDef* def : compatible) {
      std::optional<int64_t> ns = options.timings->find(def->name, bucket);
      if (!ns) {
        complete = false;
        break;
      }
      if (*ns != TimingCache::kFailed && (fastest == nullptr || *ns < fastest_ns)) {
        fastest = def;
        fastest_ns = *ns;
      }
    }
    if (complete && fastest != nullptr) {
      selection.chosen = fastest;
      selection.policy = "measured";
      selection.reason = fmt::format("fastest measured on {} ({} ns){}", bucket, fastest_ns, hint_note);
    }
  }
  // 4. Priority.
  if (selection.chosen == nullptr) {
    selection.chosen = compatible.front();
    selection.policy = "priority";
    selection.reason = compatible.size() == 1
                           ? fmt::format("the only compatible kernel{}", hint_note)
                           : fmt::format("highest priority ({}) among {} compatible kernels{}",
                                         selection.chosen->priority, compatible.size(), hint_note);
  }
  // Why every other candidate lost.
  for (CandidateVerdict& verdict : selection.verdicts) {
    if (verdict.kernel == selection.chosen) {
      verdict.reason = "chosen: " + selection.reason;
      continue;
    }
    if (!verdict.compatible) continue;
    const KernelDef& def = *verdict.kernel;
    if (selection.policy == "forced" || selection.policy == "hint") {
      verdict.reason = fmt::format("compatible, but '{}' was {}", selection.chosen->name, selection.policy);
    } else if (selection.policy == "measured") {
      const int64_t ns = options.timings->find(def.name, bucket).value_or(TimingCache::kFailed);
      verdict.reason = ns == TimingCache::kFailed ? fmt::format("failed on {} when measured", bucket)
                                                  : fmt::format("slower on {} ({} ns)", bucket, ns);
    } else if (def.priority != selection.chosen->priority) {
      verdict.reason = fmt::format("lower priority ({} < {})", def.priority, selection.chosen->priority);
    } else if (def.impl_version != selection.chosen->impl_version) {
      verdict.reason = fmt::format("older implementation (v{} < v{})", def.impl_version, selection.chosen->impl_version);
    } else {
      verdict.reason = "same priority, ordered after by name";
    }
  }
  // Kernels for other device kinds are not candidates here; they stay out of the explanation.
  std::erase_if(selection.verdicts, [&](const CandidateVerdict& v) { return v.kernel->device != device.kind; });
  std::stable_partition(selection.verdicts.begin(), selection.verdicts.end(),
                        [&](const CandidateVerdict& v) { return v.kernel == selection.chosen; });
  return selection;
}

std::string Selection::explain() const {
  std::string out;
  for (const CandidateVerdict& v : verdicts) {
    out += fmt::format("{} {}: {}\n", v.kernel == chosen ? "*" : "-", label(*v.kernel), v.reason);
  }
  return out;
}

std::vector<const KernelDef*> Selection::compatible() const {
  std::vector<const KernelDef*> out;
  for (const CandidateVerdict& v : verdicts) {
    if (v.compatible) out.push_back(v.kernel);
  }
  std::sort(out.begin(), out.end(), better);
  return out;
}

}  // namespace hxrt::ops
