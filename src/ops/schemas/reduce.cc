// Schemas of the reductions (docs/onnx_ops/reduce.md): the ten Reduce* ops, ArgMax, ArgMin and TopK. The
// normalisations of the family (LogSoftmax, Hardmax, MeanVarianceNormalization, LRN, InstanceNormalization) are in
// normalization.cc beside Softmax.

#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "hxrt/ops/params/reduce.h"
#include "ops/schemas/schemas.h"

namespace hxrt::ops::schemas {

namespace {

const std::vector<DType>& numeric_types() {
  static const std::vector<DType> types = {DType::kF32, DType::kI32, DType::kI64};
  return types;
}

ConstantInput constant_of(const InferenceContext& ctx, size_t i) {
  if (!ctx.has_input(i)) return {};
  return {.present = true, .desc = &ctx.input(i), .weight = ctx.constant_input(i)};
}

Status infer_reduce(InferenceContext& ctx) {
  const graph::TensorDesc& x = ctx.input(0);
  HXRT_ASSIGN_OR_RETURN(const ReduceParams params, parse_reduce_params(ctx.node(), constant_of(ctx, 1)));
  HXRT_ASSIGN_OR_RETURN(const std::vector<bool> reduced,
                        reduced_dims(params.axes, params.noop_with_empty_axes, x.shape.rank(), node_label(ctx.node())));
  std::vector<graph::Dim> out;
  for (int d = 0; d < x.shape.rank(); ++d) {
    if (!reduced[static_cast<size_t>(d)]) {
      out.push_back(x.shape.dims()[static_cast<size_t>(d)]);
    } else if (params.keepdims) {
      out.emplace_back(1);
    }
  }
  ctx.set_output(0, graph::TensorDesc{x.dtype, graph::SymShape(std::move(out))});
  return ok_status();
}

Status infer_arg_reduce(InferenceContext& ctx) {
  const graph::TensorDesc& x = ctx.input(0);
  HXRT_ASSIGN_OR_RETURN(const ArgReduceParams params, parse_arg_reduce_params(ctx.node()));
  const int rank = x.shape.rank();
  if (rank == 0) return ctx.error("input 'data' must have rank >= 1");
  if (params.axis < -rank || params.axis >= rank) {
    return ctx.error(
        fmt::format("attribute 'axis' = {} is out of range for input 'data' {}", params.axis, x.shape.to_string()));
  }
  const auto axis = static_cast<size_t>(params.axis < 0 ? params.axis + rank : params.axis);
  std::vector<graph::Dim> out = x.shape.dims();
  if (params.keepdims) {
    out[axis] = graph::Dim(1);
  } else {
    out.erase(out.begin() + static_cast<std::ptrdiff_t>(axis));
  }
  ctx.set_output(0, graph::TensorDesc{DType::kI64, graph::SymShape(std::move(out))});
  return ok_status();
}

Status infer_topk(InferenceContext& ctx) {
  const graph::TensorDesc& x = ctx.input(0);
  HXRT_ASSIGN_OR_RETURN(const TopKParams params, parse_topk_params(ctx.node(), constant_of(ctx, 1)));
  const int rank = x.shape.rank();
  if (rank == 0) return ctx.error("input 'X' must have rank >= 1");
  if (params.axis < -rank || params.axis >= rank) {
    return ctx.error(
        fmt::format("attribute 'axis' = {} is out of range for input 'X' {}", params.axis, x.shape.to_string()));
  }
  const auto axis = static_cast<size_t>(params.axis < 0 ? params.axis + rank : params.axis);
  const graph::Dim& len = x.shape.dims()[axis];
  if (len.is_static() && params.k > len.value()) {
    return ctx.error(fmt::format("input 'K' = {} exceeds the length {} of axis {} of 'X' {}", params.k, len.value(),
                                 axis, x.shape.to_string()));
  }
  std::vector<graph::Dim> out = x.shape.dims();
  out[axis] = graph::Dim(params.k);
  ctx.set_output(0, graph::TensorDesc{x.dtype, graph::SymShape(out)});
  if (ctx.num_outputs() > 1) ctx.set_output(1, graph::TensorDesc{DType::kI64, graph::SymShape(std::move(out))});
  return ok_status();
}

std::string reduce_doc(ReduceKind kind) {
  switch (kind) {
    case ReduceKind::kL1: return "sum(|x|)";
    case ReduceKind::kL2: return "sqrt(sum(x^2))";
    case ReduceKind::kLogSum: return "log(sum(x))";
    case ReduceKind::kLogSumExp: return "log(sum(exp(x))), computed around the max";
    case ReduceKind::kMax: return "max(x) (lowest value of T over an empty set)";
    case ReduceKind::kMean: return "sum(x) / count";
    case ReduceKind::kMin: return "min(x) (highest value of T over an empty set)";
    case ReduceKind::kProd: return "prod(x)";
    case ReduceKind::kSum: return "sum(x)";
    case ReduceKind::kSumSquare: return "sum(x^2)";
  }
  return "";
}

}  // namespace

Status register_reduce(OpSchemaRegistry& registry) {
  for (const ReduceKind kind : kReduceKinds) {
    OpSchema reduce;
    reduce.op_type = std::string(reduce_op_type(kind));
    // ReduceSum took 'axes' as an input from opset 13, the others from opset 18: hxrt's ops have that API.
    reduce.since_version = kind == ReduceKind::kSum ? 13 : 18;
    reduce.inputs = {{.name = "data"}, {.name = "axes", .type_var = "I", .optional = true}};
    reduce.outputs = {{.name = "reduced"}};
    reduce.attrs = {
        {.name = "keepdims", .type = graph::AttrType::kInt, .default_value = graph::Attribute(int64_t{1})},
        {.name = "noop_with_empty_axes", .type = graph::AttrType::kInt, .default_value = graph::Attribute(int64_t{0})}};
    reduce.type_constraints = {{"T", numeric_types()}, {"I", {DType::kI64}}};
    reduce.infer = infer_reduce;
    reduce.doc = fmt::format(
        "{} over the constant 'axes' (all axes when omitted or empty, none when noop_with_empty_axes); keepdims keeps "
        "reduced dims as 1",
        reduce_doc(kind));
    HXRT_RETURN_IF_ERROR(registry.add(std::move(reduce)));
  }

  for (const std::string_view op : {"ArgMax", "ArgMin"}) {
    OpSchema arg;
    arg.op_type = std::string(op);
    arg.since_version = 13;
    arg.inputs = {{.name = "data"}};
    arg.outputs = {{.name = "reduced", .type_var = "I"}};
    arg.attrs = {
        {.name = "axis", .type = graph::AttrType::kInt, .default_value = graph::Attribute(int64_t{0})},
        {.name = "keepdims", .type = graph::AttrType::kInt, .default_value = graph::Attribute(int64_t{1})},
        {.name = "select_last_index", .type = graph::AttrType::kInt, .default_value = graph::Attribute(int64_t{0})}};
    arg.type_constraints = {{"T", numeric_types()}, {"I", {DType::kI64}}};
    arg.infer = infer_arg_reduce;
    arg.doc =
        fmt::format("i64 index of the {} along axis; ties go to the first index (the last with select_last_index)",
                    op == "ArgMax" ? "maximum" : "minimum");
    HXRT_RETURN_IF_ERROR(registry.add(std::move(arg)));
  }

  OpSchema topk;
  topk.op_type = "TopK";
  topk.since_version = 11;
  topk.inputs = {{.name = "X"}, {.name = "K", .type_var = "I"}};
  topk.outputs = {{.name = "Values"}, {.name = "Indices", .type_var = "I"}};
  topk.attrs = {{.name = "axis", .type = graph::AttrType::kInt, .default_value = graph::Attribute(int64_t{-1})},
                {.name = "largest", .type = graph::AttrType::kInt, .default_value = graph::Attribute(int64_t{1})},
                {.name = "sorted", .type = graph::AttrType::kInt, .default_value = graph::Attribute(int64_t{1})}};
  topk.type_constraints = {{"T", numeric_types()}, {"I", {DType::kI64}}};
  topk.infer = infer_topk;
  topk.doc =
      "the K largest (smallest with largest=0) elements along axis and their i64 indices, K a constant [1]; sorted "
      "best first, equal values by lower index (sorted=0 gives the same order)";
  return registry.add(std::move(topk));
}

}  // namespace hxrt::ops::schemas
