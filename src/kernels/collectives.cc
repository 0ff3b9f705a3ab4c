#include "kernels/collectives.h"

#include <memory>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "hxrt/comm/communicator.h"

namespace hxrt::kernels {
namespace {

// Note [Collective kernels]
// A collective node names its communicator by the attribute `group`; parse_attrs looks the group up
// (comm::find_group) once, at plan time, so a plan holds its communicator and a missing group is a planning error
// naming the node. The launch enqueues the collective on the node's stream as a host task: it runs after the
// node's inputs are ready and before its consumers, fails the stream (naming the node, through the executor's
// launch context) when the collective fails, and is captured into replays like a kernel. Every rank's plan must
// issue the same collectives in the same order; a plan on one stream (the CPU default, Note [Streams per device])
// keeps the graph's topological order, which is the same on every rank for the same graph.
struct CollectiveParams final : ops::TypedParams<CollectiveParams> {
  static constexpr std::string_view kName = "CollectiveParams";
  std::string group;
  std::shared_ptr<comm::Communicator> communicator;
  comm::ReduceOp op = comm::ReduceOp::kSum;
  int root = 0;
  std::string to_string() const override {
    return fmt::format("group={} ({}), reduction={}, root={}", group, communicator->describe(),
                       comm::reduce_op_name(op), root);
  }
};

Result<std::unique_ptr<ops::KernelParams>> parse_collective(const graph::Node& node) {
  auto params = std::make_unique<CollectiveParams>();
  HXRT_ASSIGN_OR_RETURN(params->group, node.attrs.get_string("group", "world"));
  HXRT_ASSIGN_OR_RETURN(params->communicator, comm::find_group(params->group));
  HXRT_ASSIGN_OR_RETURN(const std::string reduction, node.attrs.get_string("reduction", "sum"));
  HXRT_ASSIGN_OR_RETURN(params->op, comm::parse_reduce_op(reduction));
  HXRT_ASSIGN_OR_RETURN(const int64_t root, node.attrs.get_int("root", 0));
  if (root < 0 || root >= params->communicator->size()) {
    return invalid_argument("root {} is not a rank of group '{}' ({} ranks)", root, params->group,
                            params->communicator->size());
  }
  params->root = static_cast<int>(root);
  if (node.attrs.has("rank_size")) {
    HXRT_ASSIGN_OR_RETURN(const int64_t ranks, node.attrs.get_int("rank_size"));
    if (ranks != params->communicator->size()) {
      return invalid_argument("rank_size {} differs from group '{}', which has {} ranks", ranks, params->group,
                              params->communicator->size());
    }
  }
  return std::unique_ptr<ops::KernelParams>(std::move(params));
}

ops::KernelDef collective_def(std::string op_type, hal::DeviceKind device, ops::LaunchFn launch) {
  ops::KernelDef def;
  def.op_type = op_type;
  def.domain = "hxrt";
  def.device = device;
  def.name = "Host" + op_type;
  def.description = op_type + " through the group's communicator, as a host task on the stream";
  def.parse_attrs = [](const graph::Graph&, const graph::Node& node) { return parse_collective(node); };
  def.launch = std::move(launch);
  return def;
}

}  // namespace

Status register_collective_kernels(ops::KernelRegistry& registry, hal::DeviceKind device) {
  HXRT_RETURN_IF_ERROR(registry.add(collective_def(
      "AllReduce", device, [](hal::Stream& stream, const ops::KernelLaunch& launch) {
        const auto& p = launch.params_as<CollectiveParams>();
        return p.communicator->all_reduce(stream, launch.inputs[0].view, launch.outputs[0].view,
                                          launch.inputs[0].dtype, p.op);
      })));
  HXRT_RETURN_IF_ERROR(registry.add(collective_def(
      "AllGather", device, [](hal::Stream& stream, const ops::KernelLaunch& launch) {
        const auto& p = launch.params_as<CollectiveParams>();
        return p.communicator->all_gather(stream, launch.inputs[0].view, launch.outputs[0].view,
                                          launch.inputs[0].dtype);
      })));
  HXRT_RETURN_IF_ERROR(registry.add(collective_def(
      "ReduceScatter", device, [](hal::Stream& stream, const ops::KernelLaunch& launch) {
        const auto& p = launch.params_as<CollectiveParams>();
        return p.communicator->reduce_scatter(stream, launch.inputs[0].view, launch.outputs[0].view,
                                              launch.inputs[0].dtype, p.op);
      })));
  return registry.add(collective_def("Broadcast", device, [](hal::Stream& stream, const ops::KernelLaunch& launch) {
    const auto& p = launch.params_as<CollectiveParams>();
    HXRT_RETURN_IF_ERROR(stream.copy(launch.outputs[0].view, launch.inputs[0].view));
    return p.communicator->broadcast(stream, launch.outputs[0].view, launch.inputs[0].dtype, p.root);
  }));
}

}  // namespace hxrt::kernels
