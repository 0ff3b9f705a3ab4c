// Schemas of the collective ops (docs/ops.md, "Collectives", domain hxrt): AllReduce, AllGather, ReduceScatter,
// Broadcast. They run across the ranks of the communicator group named by the attribute `group` (comm::find_group;
// HCCL's HcomAllReduce has the same attribute); every rank's plan must issue them in the same order.

#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "ops/schemas/schemas.h"

namespace hxrt::ops::schemas {
namespace {

const std::vector<DType>& collective_types() {
  static const std::vector<DType> types = {DType::kF32, DType::kF16, DType::kBF16, DType::kI8,
                                           DType::kU8,  DType::kI32, DType::kI64};
  return types;
}

Status check_group(InferenceContext& ctx) {
  Result<std::string> group = ctx.attrs().get_string("group", "world");
  if (!group.ok() || group->empty()) return ctx.error("attribute 'group' must name a communicator group");
  return ok_status();
}

Status check_reduction(InferenceContext& ctx) {
  Result<std::string> reduction = ctx.attrs().get_string("reduction", "sum");
  if (!reduction.ok()) return ctx.error(fmt::format("attribute 'reduction': {}", reduction.status().message()));
  for (const char* known : {"sum", "prod", "max", "min", "avg"}) {
    if (*reduction == known) return ok_status();
  }
  return ctx.error(fmt::format("attribute 'reduction' = '{}' is not sum, prod, max, min or avg", *reduction));
}

Result<int64_t> rank_size(InferenceContext& ctx) {
  Result<int64_t> size = ctx.attrs().get_int("rank_size", 0);
  if (!size.ok() || *size < 1) return ctx.error("attribute 'rank_size' must be a positive rank count");
  return *size;
}

Status infer_all_reduce(InferenceContext& ctx) {
  HXRT_RETURN_IF_ERROR(check_group(ctx));
  HXRT_RETURN_IF_ERROR(check_reduction(ctx));
  ctx.set_output(0, ctx.input(0));
  return ok_status();
}

Status infer_broadcast(InferenceContext& ctx) {
  HXRT_RETURN_IF_ERROR(check_group(ctx));
  Result<int64_t> root = ctx.attrs().get_int("root", 0);
  if (!root.ok() || *root < 0) return ctx.error("attribute 'root' must be a rank");
  ctx.set_output(0, ctx.input(0));
  return ok_status();
}

// Y = every rank's X stacked along axis 0, rank-major: dim 0 grows rank_size times.
Status infer_all_gather(InferenceContext& ctx) {
  HXRT_RETURN_IF_ERROR(check_group(ctx));
  HXRT_ASSIGN_OR_RETURN(const int64_t ranks, rank_size(ctx));
  const graph::TensorDesc& x = ctx.input(0);
  if (x.shape.rank() == 0) return ctx.error("input 'X' must have rank >= 1 (gathered along axis 0)");
  std::vector<graph::Dim> dims = x.shape.dims();
  dims[0] = dims[0] * graph::Dim(ranks);
  ctx.set_output(0, graph::TensorDesc{x.dtype, graph::SymShape(std::move(dims))});
  return ok_status();
}

// Y = this rank's slice (rank-major along axis 0) of the reduction of every rank's X: dim 0 shrinks rank_size times.
Status infer_reduce_scatter(InferenceContext& ctx) {
  HXRT_RETURN_IF_ERROR(check_group(ctx));
  HXRT_RETURN_IF_ERROR(check_reduction(ctx));
  HXRT_ASSIGN_OR_RETURN(const int64_t ranks, rank_size(ctx));
  const graph::TensorDesc& x = ctx.input(0);
  if (x.shape.rank() == 0) return ctx.error("input 'X' must have rank >= 1 (scattered along axis 0)");
  std::vector<graph::Dim> dims = x.shape.dims();
  if (dims[0].is_static() && dims[0].value() % ranks != 0) {
    return ctx.error(fmt::format("dim 0 of 'X' ({}) does not divide into {} ranks", dims[0].value(), ranks));
  }
  dims[0] = dims[0] / graph::Dim(ranks);
  ctx.set_output(0, graph::TensorDesc{x.dtype, graph::SymShape(std::move(dims))});
  return ok_status();
}

OpSchema collective_schema(std::string op_type, ShapeInferenceFn infer, std::vector<AttrSpec> attrs, std::string doc) {
  OpSchema s;
  s.op_type = std::move(op_type);
  s.domain = "hxrt";
  s.since_version = 1;
  s.inputs = {{.name = "X"}};
  s.outputs = {{.name = "Y"}};
  s.attrs = {{.name = "group", .type = graph::AttrType::kString, .default_value = graph::Attribute("world")}};
  s.attrs.insert(s.attrs.end(), attrs.begin(), attrs.end());
  s.type_constraints = {{"T", collective_types()}};
  s.infer = std::move(infer);
  s.doc = std::move(doc);
  return s;
}

}  // namespace

Status register_collective(OpSchemaRegistry& registry) {
  const AttrSpec reduction{.name = "reduction", .type = graph::AttrType::kString, .default_value = graph::Attribute("sum")};
  const AttrSpec ranks{.name = "rank_size", .type = graph::AttrType::kInt, .required = true};
  HXRT_RETURN_IF_ERROR(registry.add(collective_schema(
      "AllReduce", infer_all_reduce, {reduction},
      "Y = reduction (sum, prod, max, min, avg) over the group's ranks of X, on every rank")));
  HXRT_RETURN_IF_ERROR(registry.add(collective_schema(
      "AllGather", infer_all_gather, {ranks}, "Y = every rank's X concatenated along axis 0 in rank order")));
  HXRT_RETURN_IF_ERROR(registry.add(collective_schema(
      "ReduceScatter", infer_reduce_scatter, {reduction, ranks},
      "Y = this rank's part (axis 0, rank order) of the reduction over the group's ranks of X")));
  return registry.add(collective_schema(
      "Broadcast", infer_broadcast,
      {{.name = "root", .type = graph::AttrType::kInt, .default_value = graph::Attribute(int64_t{0})}},
      "Y = X of rank `root`, on every rank"));
}

}  // namespace hxrt::ops::schemas
