// KernelRegistry: every kernel hxrt knows — built-in, custom (registered by users at run time, or JIT-compiled
// source), and fused — and the arbitration that picks one per node.
//
// Registration rejects overlaps: two kernels with the same (op, domain, device, name) and intersecting version
// ranges, or two different kernels that accept exactly the same nodes with the same priority (the choice between
// them would be arbitrary).
//
// Arbitration (select): candidates are kernels for the node's op and domain whose version range holds the node's
// version, whose device kind is the device's, whose dtype constraints accept the node's input dtypes, and whose
// supports() accepts the node. Among them, in order of precedence:
//   1. forced: an implementation named in SelectionOptions for this node name or op type;
//   2. hint: the node's kernel_hint left by a compiler, when compatible and hints are honoured;
//   3. measured: when a timing is known for every candidate on the node's shape_bucket (TimingCache), the fastest
//      (runtime/kernel_tuner.h measures them while a plan is built);
//   4. priority: the highest priority, then the newest impl_version, then the name.
// The Selection says why the winner won and why every other kernel lost (explain()).
//
// Thread-safety: thread-compatible: register, then share read-only. add() after sharing needs external locking.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hxrt/base/status.h"
#include "hxrt/graph/graph.h"
#include "hxrt/hal/types.h"
#include "hxrt/ops/kernel_def.h"
#include "hxrt/ops/timing_cache.h"

namespace hxrt::ops {

struct SelectionOptions {
  // Forced implementations: node name → kernel name, or op type → kernel name (node names win).
  std::map<std::string, std::string, std::less<>> forced;
  bool honour_hints = true;
  // Measured timings (may be null). Keys are (kernel name, shape_bucket(...)); see timing_cache.h.
  const TimingCache* timings = nullptr;
  // Values of symbolic dims in the bucket key: the shapes the timings were measured on (TunerOptions::dims).
  graph::SymbolBindings bucket_dims;
};

// The key a node's timings are stored under on `device`: the device kind, the input descs with `dims` substituted
// (symbols without a value stay symbolic) and, when the node has attributes, a digest of them —
// "cpu f32[1,576] f32[576,1536]" or "cpu f32[8,64] f32[64,32] attrs:9c1e03a2".
std::string shape_bucket(const graph::Graph& graph, const graph::Node& node, const hal::DeviceInfo& device,
                         const graph::SymbolBindings& dims);

struct CandidateVerdict {
  const KernelDef* kernel = nullptr;
  bool compatible = false;
  std::string reason;  // why it lost (or "chosen: ...")
};

struct Selection {
  const KernelDef* chosen = nullptr;
  std::string policy;   // "forced", "hint", "measured", "priority"
  std::string reason;   // why the chosen one won
  std::vector<CandidateVerdict> verdicts;  // every kernel registered for the op, chosen first
  // Multi-line: the chosen kernel and why, then each other candidate and why it lost.
  std::string explain() const;
  // The compatible candidates, best first under the priority rule (for measuring).
  std::vector<const KernelDef*> compatible() const;
};

class KernelRegistry {
 public:
  KernelRegistry() = default;
  KernelRegistry(const KernelRegistry&) = delete;
  KernelRegistry& operator=(const KernelRegistry&) = delete;

  // InvalidArgument for an incomplete definition (no op type, name or launch; bad version range);
  // AlreadyExists for an overlap (the message names both kernels).
  Status add(KernelDef def);
  // NotFound when no kernel is compatible; the message lists every candidate and why it was rejected.
  Result<Selection> select(const graph::Graph& graph, const graph::Node& node, const hal::DeviceInfo& device,
                           const SelectionOptions& options = {}) const;

  std::vector<const KernelDef*> kernels_for(std::string_view op_type, std::string_view domain = "") const;
  std::vector<const KernelDef*> all() const;
  size_t size() const { return kernels_.size(); }

 private:
  std::vector<std::unique_ptr<KernelDef>> kernels_;
  std::map<std::pair<std::string, std::string>, std::vector<const KernelDef*>, std::less<>> by_op_;
};

}  // namespace hxrt::ops
