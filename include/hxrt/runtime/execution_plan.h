// ExecutionPlan: a graph compiled for one device — built once, run many times with different input shapes.
//
// build() runs the planning pipeline (docs/design/architecture.md, "The path of one request", step 4):
//   validate → infer shapes symbolically → fuse → select kernels (registry arbitration, explained; measured with a
//   KernelTuner when one is given) → parse
//   attributes into each kernel's parameters → assign streams to independent branches and add events on
//   cross-stream edges → plan memory → one ExecutionObject per node.
// Heterogeneous split (PlanOptions::fallback_device): nodes without a kernel for the device run on the fallback
// device, with copies inserted; streams belong to one device each; a split plan uses the pool, not the arena.
// Devices are an indexed list: the plan places every node, stream and value on a device index 0..num_devices()-1,
// 0 being the main device (kMainDevice) and 1.. the fallbacks; an Executor takes one session per index.
// Memory: when every intermediate has a static shape, a liveness plan gives each intermediate a fixed offset in one
// arena (values whose lifetimes are not ordered by the streams never share bytes); otherwise each intermediate
// returns to the session's pool, in stream order, after its last consumer (ExecutionObject::release_after).
//
// Thread-safety: immutable after build(); share it between executors and threads freely.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hxrt/base/status.h"
#include "hxrt/graph/graph.h"
#include "hxrt/hal/types.h"
#include "hxrt/ops/fusion.h"
#include "hxrt/ops/kernel_registry.h"
#include "hxrt/ops/op_schema.h"
#include "hxrt/ops/registries.h"
#include "hxrt/runtime/kernel_tuner.h"

namespace hxrt::runtime {

// The registries a plan draws on. They must outlive every plan built from them.
struct PlanContext {
  const ops::OpSchemaRegistry* schemas = nullptr;
  const ops::KernelRegistry* kernels = nullptr;
  const ops::FusionRegistry* fusions = nullptr;  // null: no fusion

  // The context of a registries bundle (hxrt/kernels/builtin_registries.h makes the built-in one).
  static PlanContext of(const ops::Registries& registries) {
    return PlanContext{&registries.schemas, &registries.kernels, &registries.fusions};
  }
};

inline constexpr int kAutoStreams = 0;
// The streams a plan spreads independent branches over on `device` when PlanOptions::max_streams is kAutoStreams:
// 1 on the CPU, 4 elsewhere.
int default_streams(const hal::DeviceInfo& device);

struct PlanOptions {
  bool fuse = true;
  ops::FusionOptions fusion;
  ops::SelectionOptions selection;  // forced kernels, hints, timings
  // Measured arbitration: when set, a node with several compatible kernels and no complete timing for its bucket is
  // measured on the tuner's device while the plan is built, and the fastest is chosen. The tuner's cache and dims
  // replace selection.timings and selection.bucket_dims.
  KernelTuner* tuner = nullptr;
  // Heterogeneous split: a node the device has no kernel for is placed on this device instead — a host-addressable
  // one, normally the CPU — and MemcpyToHost / MemcpyFromHost nodes (domain hxrt, run on the main device's streams)
  // carry every tensor that crosses between the two. Null: such a node is an error naming it.
  const hal::DeviceInfo* fallback_device = nullptr;
  // Op types placed on the fallback device even where the main device has a kernel (to rule a device kernel in or
  // out while debugging, or to keep an op the device runs badly on the host).
  std::vector<std::string> fallback_ops;
  // Most streams per device; 1 runs everything on one stream; 0 (kAutoStreams) takes each device's default,
  // default_streams() (Note [Streams per device] in execution_plan.cc).
  int max_streams = kAutoStreams;
  bool static_memory_plan = true;   // use the arena when all intermediate shapes are static
};

// One node ready to launch.
struct ExecutionObject {
  graph::NodeId node = graph::kNoNode;  // in plan.graph()
  const ops::KernelDef* kernel = nullptr;
  std::unique_ptr<ops::KernelParams> params;
  std::string selection_reason;          // Selection::explain() of the arbitration
  std::vector<graph::ValueId> inputs;    // tensor slots (kNoValue = omitted optional input)
  std::vector<graph::ValueId> outputs;
  int stream = 0;                        // index among the plan's streams
  std::vector<int> wait_events;          // events to wait for before the launch (recorded on other streams)
  int record_event = -1;                 // event recorded after the launch, when another stream consumes it
  // Intermediates whose block returns to the pool after this launch: their last use in plan order (through Reshape
  // aliases), or their producer when nothing reads them. The executor's only release points (Note [Release points]
  // in executor.cc).
  std::vector<graph::ValueId> release_after;
  int32_t fusion_id = -1;
  int device = 0;                        // index into the plan's devices (kMainDevice unless split)
};

// Device indices of a plan: the main device, and the first fallback (the one PlanOptions::fallback_device names).
inline constexpr int kMainDevice = 0;
inline constexpr int kFallbackDevice = 1;

enum class ValueRole : uint8_t { kInput, kInitializer, kIntermediate, kOutput };

struct ValuePlan {
  ValueRole role = ValueRole::kIntermediate;
  int consumers = 0;             // reads by launches (a node reading twice counts twice)
  int producer_stream = -1;
  bool static_shape = false;
  uint64_t bytes = 0;            // static shapes only
  int64_t arena_offset = -1;     // arena plans only
  // Where the bytes live: a device index for node outputs; -1 for inputs and initializers, which are placed on
  // every device that consumes them.
  int device = -1;
  // The output of a Reshape that shares its input's memory (Note [Reshape aliasing]): the value whose bytes it
  // uses; kNoValue otherwise.
  graph::ValueId alias_of = graph::kNoValue;
};

// The heterogeneous split of a plan (all zero when every node runs on the main device).
struct SplitSummary {
  int fallback_nodes = 0;
  int copies = 0;                  // MemcpyToHost + MemcpyFromHost nodes inserted
  uint64_t copy_bytes = 0;         // bytes the copies move per run (static shapes only)
  std::vector<std::string> fallback_ops;  // op types placed on the fallback device
};

struct MemoryPlanSummary {
  bool uses_arena = false;
  uint64_t arena_bytes = 0;         // planned peak
  uint64_t naive_bytes = 0;         // sum of all intermediate sizes (static shapes)
  int intermediates = 0;
  int dynamic_intermediates = 0;    // sized at run time, refcounted
  int aliased = 0;                  // Reshape outputs that share their input's bytes (no copy, no memory)
};

class ExecutionPlan {
 public:
  // Takes the graph (it is rewritten by fusion). Errors name the node and the pipeline stage.
  static Result<std::unique_ptr<ExecutionPlan>> build(graph::Graph graph, const hal::DeviceInfo& device,
                                                      const PlanContext& context, const PlanOptions& options = {});

  const graph::Graph& graph() const { return graph_; }
  const hal::DeviceInfo& device() const { return devices_.front(); }
  // The fallback device of a split plan; null when every node runs on device().
  const hal::DeviceInfo* fallback_device() const {
    return split_.fallback_nodes > 0 ? &devices_.at(kFallbackDevice) : nullptr;
  }
  // The devices the plan places work on: 1 (main only), or more for a split plan with nodes off the main device.
  int num_devices() const { return split_.fallback_nodes > 0 ? static_cast<int>(devices_.size()) : 1; }
  const hal::DeviceInfo& device_info(int device) const { return devices_.at(static_cast<size_t>(device)); }
  // The device index of each stream.
  int stream_device(int stream) const { return stream_devices_.at(static_cast<size_t>(stream)); }
  const SplitSummary& split() const { return split_; }
  const std::vector<ExecutionObject>& objects() const { return objects_; }
  const std::vector<ValuePlan>& values() const { return values_; }
  const std::vector<ops::FusionGroup>& fusion_groups() const { return fusion_groups_; }
  const std::vector<ops::DimCheck>& dim_checks() const { return dim_checks_; }
  int num_streams() const { return num_streams_; }
  int num_events() const { return num_events_; }
  const MemoryPlanSummary& memory() const { return memory_; }
  static constexpr uint64_t kArenaAlignment = 256;

  // A readable report: nodes with their kernels and arbitration reasons, fusion groups, streams and events,
  // the memory plan (`hxrt inspect`).
  std::string describe() const;

 private:
  ExecutionPlan(graph::Graph graph, hal::DeviceInfo device) : graph_(std::move(graph)) {
    devices_.push_back(std::move(device));
  }
  Status place_nodes(const PlanContext& context, const PlanOptions& options);
  Status select_kernels(const PlanContext& context, const PlanOptions& options);
  void assign_streams(int max_streams);
  void plan_memory(bool allow_arena);

  graph::Graph graph_;
  std::vector<hal::DeviceInfo> devices_;  // [kMainDevice] = the plan's device, then the fallbacks
  std::vector<ExecutionObject> objects_;
  std::vector<ValuePlan> values_;
  std::vector<ops::FusionGroup> fusion_groups_;
  std::vector<ops::DimCheck> dim_checks_;
  std::vector<int> placement_;       // per node id: the device index it runs on
  std::vector<int> copy_target_;     // per node id: the device a split copy writes to; -1 for other nodes
  SplitSummary split_;
  std::vector<int> stream_devices_;  // per stream
  int num_streams_ = 1;
  int num_events_ = 0;
  MemoryPlanSummary memory_;
};

}  // namespace hxrt::runtime
