// Schemas of the indexing and data-dependent ops (docs/onnx_ops/indexing.md): GatherElements GatherND
// ScatterElements ScatterND Compress NonZero Unique ReverseSequence. Attributes are parsed by
// hxrt/ops/params/indexing.h, as the kernels parse them.
//
// Note [Data-dependent output shapes]
// The output shapes of Compress (the condition's true count), NonZero (the input's non-zero count) and Unique (the
// number of distinct slices) depend on values. Inference reads those values from constant inputs (initializers)
// and runs the same function the kernel runs (compress_selection, nonzero_positions, unique_slices), so the planned
// shape is the one the kernel produces; without the constant it fails naming the input. The ONNX converters ask
// for those inputs at import (require_constant), so a graph input there is supplied at bind time.

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "hxrt/ops/params/indexing.h"
#include "ops/schemas/schemas.h"

namespace hxrt::ops::schemas {

namespace {

// Input `i` as a constant (Note [Data-dependent output shapes]): its static shape and its bytes.
struct ConstantInput {
  Shape shape;
  const std::byte* data = nullptr;
};

Result<ConstantInput> constant_tensor(InferenceContext& ctx, size_t i, std::string_view name) {
  const graph::WeightData* weight = ctx.constant_input(i);
  if (weight == nullptr) {
    return ctx.error(
        fmt::format("input '{}' must be a constant (an initializer): the output shape depends on its values", name));
  }
  const graph::TensorDesc& desc = ctx.input(i);
  Result<Shape> shape = desc.shape.resolve({});
  if (!shape.ok()) return ctx.error(fmt::format("input '{}' {} must have a static shape", name, desc.to_string()));
  Result<uint64_t> bytes = storage_bytes(desc.dtype, static_cast<uint64_t>(shape->num_elements()));
  if (!bytes.ok() || *bytes != weight->size) {
    return ctx.error(fmt::format("input '{}' {} holds {} bytes", name, desc.to_string(), weight->size));
  }
  return ConstantInput{*shape, weight->data};
}

Status infer_gather_elements(InferenceContext& ctx) {
  const graph::TensorDesc& data = ctx.input(0);
  const graph::TensorDesc& indices = ctx.input(1);
  const int rank = data.shape.rank();
  if (rank == 0) return ctx.error("input 'data' must have rank >= 1");
  if (indices.shape.rank() != rank) {
    return ctx.error(fmt::format("input 'indices' {} must have the rank of 'data' {}", indices.shape.to_string(),
                                 data.shape.to_string()));
  }
  HXRT_ASSIGN_OR_RETURN(const AxisParams params, parse_axis_params(ctx.node(), 0));
  HXRT_RETURN_IF_ERROR(axis_value(ctx, params.axis, rank, "attribute 'axis'").status());
  ctx.set_output(0, graph::TensorDesc{data.dtype, indices.shape});
  return ok_status();
}

Status infer_gather_nd(InferenceContext& ctx) {
  const graph::TensorDesc& data = ctx.input(0);
  const graph::TensorDesc& indices = ctx.input(1);
  HXRT_ASSIGN_OR_RETURN(const GatherNDParams params, parse_gather_nd_params(ctx.node()));
  const int r = data.shape.rank();
  const int q = indices.shape.rank();
  if (r == 0 || q == 0) return ctx.error("inputs 'data' and 'indices' must have rank >= 1");
  const graph::Dim& last = indices.shape.dim(-1);
  if (!last.is_static()) {
    return ctx.error(fmt::format("the last dim of 'indices' {} must be static", indices.shape.to_string()));
  }
  const int64_t b = params.batch_dims;
  const int64_t m = last.value();
  if (b >= std::min(q, r) || b + m > r) {
    return ctx.error(
        fmt::format("batch_dims {} with 'data' {} and 'indices' {} (needs batch_dims < both ranks and "
                    "batch_dims + indices.shape[-1] <= rank of data)",
                    b, data.shape.to_string(), indices.shape.to_string()));
  }
  for (int d = 0; d < b; ++d) {
    HXRT_RETURN_IF_ERROR(ctx.require_equal(data.shape.dims()[static_cast<size_t>(d)],
                                           indices.shape.dims()[static_cast<size_t>(d)],
                                           fmt::format("GatherND '{}': batch dim {}", ctx.node().name, d)));
  }
  std::vector<graph::Dim> out(indices.shape.dims().begin(), indices.shape.dims().end() - 1);
  out.insert(out.end(), data.shape.dims().begin() + b + m, data.shape.dims().end());
  if (out.size() > static_cast<size_t>(Shape::kMaxRank)) {
    return ctx.error(fmt::format("output rank {} exceeds {}", out.size(), Shape::kMaxRank));
  }
  ctx.set_output(0, graph::TensorDesc{data.dtype, graph::SymShape(std::move(out))});
  return ok_status();
}

Status infer_scatter_elements(InferenceContext& ctx) {
  const graph::TensorDesc& data = ctx.input(0);
  const graph::TensorDesc& indices = ctx.input(1);
  const graph::TensorDesc& updates = ctx.input(2);
  HXRT_ASSIGN_OR_RETURN(const ScatterParams params, parse_scatter_params(ctx.node(), /*with_axis=*/true));
  const int rank = data.shape.rank();
  if (rank == 0) return ctx.error("input 'data' must have rank >= 1");
  HXRT_RETURN_IF_ERROR(axis_value(ctx, params.axis, rank, "attribute 'axis'").status());
  if (indices.shape.rank() != rank || updates.shape.rank() != rank) {
    return ctx.error(fmt::format("inputs 'indices' {} and 'updates' {} must have the rank of 'data' {}",
                                 indices.shape.to_string(), updates.shape.to_string(), data.shape.to_string()));
  }
  for (int d = 0; d < rank; ++d) {
    HXRT_RETURN_IF_ERROR(
        ctx.require_equal(indices.shape.dims()[static_cast<size_t>(d)], updates.shape.dims()[static_cast<size_t>(d)],
                          fmt::format("ScatterElements '{}': dim {} of indices vs updates", ctx.node().name, d)));
  }
  ctx.set_output(0, data);
  return ok_status();
}

Status infer_scatter_nd(InferenceContext& ctx) {
  const graph::TensorDesc& data = ctx.input(0);
  const graph::TensorDesc& indices = ctx.input(1);
  const graph::TensorDesc& updates = ctx.input(2);
  HXRT_RETURN_IF_ERROR(parse_scatter_params(ctx.node(), /*with_axis=*/false).status());
  const int r = data.shape.rank();
  const int q = indices.shape.rank();
  if (r == 0 || q == 0) return ctx.error("inputs 'data' and 'indices' must have rank >= 1");
  const graph::Dim& last = indices.shape.dim(-1);
  if (!last.is_static() || last.value() > r) {
    return ctx.error(fmt::format("the last dim of 'indices' {} must be static and at most the rank of 'data' {}",
                                 indices.shape.to_string(), data.shape.to_string()));
  }
  std::vector<graph::Dim> expected(indices.shape.dims().begin(), indices.shape.dims().end() - 1);
  expected.insert(expected.end(), data.shape.dims().begin() + last.value(), data.shape.dims().end());
  if (updates.shape.rank() != static_cast<int>(expected.size())) {
    return ctx.error(fmt::format("input 'updates' {} must have shape indices.shape[:-1] + data.shape[{}:] = {}",
                                 updates.shape.to_string(), last.value(), graph::SymShape(expected).to_string()));
  }
  for (size_t d = 0; d < expected.size(); ++d) {
    HXRT_RETURN_IF_ERROR(ctx.require_equal(updates.shape.dims()[d], expected[d],
                                           fmt::format("ScatterND '{}': dim {} of updates", ctx.node().name, d)));
  }
  ctx.set_output(0, data);
  return ok_status();
}

Status infer_compress(InferenceContext& ctx) {
  const graph::TensorDesc& input = ctx.input(0);
  HXRT_ASSIGN_OR_RETURN(const CompressParams params, parse_compress_params(ctx.node()));
  HXRT_ASSIGN_OR_RETURN(const ConstantInput condition, constant_tensor(ctx, 1, "condition"));
  if (condition.shape.rank() != 1) {
    return ctx.error(fmt::format("input 'condition' {} must have rank 1", condition.shape.to_string()));
  }
  std::vector<graph::Dim> out;
  graph::Dim length;
  int axis = 0;
  if (params.axis) {
    const int rank = input.shape.rank();
    if (rank == 0) return ctx.error("input 'input' must have rank >= 1 when 'axis' is given");
    HXRT_ASSIGN_OR_RETURN(axis, axis_value(ctx, *params.axis, rank, "attribute 'axis'"));
    out = input.shape.dims();
    length = out[static_cast<size_t>(axis)];
  } else {
    out = {graph::Dim()};
    length = input.shape.num_elements();
  }
  if (!length.is_static()) {
    return ctx.error(fmt::format("the selected axis of {} must be static", input.shape.to_string()));
  }
  const auto n = static_cast<size_t>(condition.shape.num_elements());
  Result<std::vector<int64_t>> selected = compress_selection({condition.data, n}, length.value());
  if (!selected.ok()) return ctx.error(fmt::format("input 'condition': {}", selected.status().message()));
  out[static_cast<size_t>(axis)] = graph::Dim(static_cast<int64_t>(selected->size()));
  ctx.set_output(0, graph::TensorDesc{input.dtype, graph::SymShape(std::move(out))});
  return ok_status();
}

Status infer_nonzero(InferenceContext& ctx) {
  const graph::TensorDesc& x = ctx.input(0);
  HXRT_ASSIGN_OR_RETURN(const ConstantInput input, constant_tensor(ctx, 0, "X"));
  const int64_t count = static_cast<int64_t>(nonzero_positions(x.dtype, input.data, input.shape.num_elements()).size());
  ctx.set_output(0,
                 graph::TensorDesc{DType::kI64, graph::SymShape({graph::Dim(input.shape.rank()), graph::Dim(count)})});
  return ok_status();
}

Status infer_unique(InferenceContext& ctx) {
  const graph::TensorDesc& x = ctx.input(0);
  HXRT_ASSIGN_OR_RETURN(const UniqueParams params, parse_unique_params(ctx.node()));
  HXRT_ASSIGN_OR_RETURN(const ConstantInput input, constant_tensor(ctx, 0, "X"));
  int64_t outer = 1;
  int64_t count = input.shape.num_elements();
  int64_t inner = 1;
  std::vector<graph::Dim> y = {graph::Dim(count)};  // Y's shape; the unique count replaces y[axis] below
  int axis = 0;
  if (params.axis) {
    HXRT_ASSIGN_OR_RETURN(axis, axis_value(ctx, *params.axis, input.shape.rank(), "attribute 'axis'"));
    outer = dims_product(input.shape, 0, axis);
    count = input.shape.dims()[static_cast<size_t>(axis)];
    inner = dims_product(input.shape, axis + 1, input.shape.rank());
    y = graph::SymShape::from(input.shape).dims();
  }
  Result<UniqueResult> unique = unique_slices(x.dtype, input.data, outer, count, inner, params.sorted);
  if (!unique.ok()) return ctx.error(unique.status().message());
  const auto n_unique = static_cast<int64_t>(unique->first.size());
  y[static_cast<size_t>(axis)] = graph::Dim(n_unique);
  const size_t n_outputs = ctx.num_outputs();
  ctx.set_output(0, graph::TensorDesc{x.dtype, graph::SymShape(std::move(y))});
  if (n_outputs > 1) ctx.set_output(1, graph::TensorDesc{DType::kI64, graph::SymShape({graph::Dim(n_unique)})});
  if (n_outputs > 2) ctx.set_output(2, graph::TensorDesc{DType::kI64, graph::SymShape({graph::Dim(count)})});
  if (n_outputs > 3) ctx.set_output(3, graph::TensorDesc{DType::kI64, graph::SymShape({graph::Dim(n_unique)})});
  return ok_status();
}

Status infer_reverse_sequence(InferenceContext& ctx) {
  const graph::TensorDesc& input = ctx.input(0);
  const graph::TensorDesc& lens = ctx.input(1);
  HXRT_ASSIGN_OR_RETURN(const ReverseSequenceParams params, parse_reverse_sequence_params(ctx.node()));
  if (input.shape.rank() < 2) return ctx.error(fmt::format("input 'input' {} must have rank >= 2", input.to_string()));
  if (lens.shape.rank() != 1) {
    return ctx.error(fmt::format("input 'sequence_lens' {} must have rank 1", lens.to_string()));
  }
  HXRT_RETURN_IF_ERROR(ctx.require_equal(
      lens.shape.dim(0), input.shape.dims()[static_cast<size_t>(params.batch_axis)],
      fmt::format("ReverseSequence '{}': length of sequence_lens vs the batch axis", ctx.node().name)));
  ctx.set_output(0, input);
  return ok_status();
}

OpSchema make_schema(std::string op_type, int since_version, std::string doc) {
  OpSchema schema;
  schema.op_type = std::move(op_type);
  schema.since_version = since_version;
  schema.doc = std::move(doc);
  return schema;
}

graph::Attribute reduction_default() {
  return graph::Attribute("none");
}

}  // namespace

Status register_indexing(OpSchemaRegistry& registry) {
  OpSchema gather_elements = make_schema(
      "GatherElements", 13, "output[i][j] = data[indices[i][j]][j] (axis 0); negative indices count from the end");
  gather_elements.inputs = {{.name = "data"}, {.name = "indices", .type_var = "Tind"}};
  gather_elements.outputs = {{.name = "output"}};
  gather_elements.attrs = {{.name = "axis", .type = graph::AttrType::kInt, .default_value = graph::Attribute(0)}};
  gather_elements.type_constraints = {{"T", plain_types()}, {"Tind", index_types()}};
  gather_elements.infer = infer_gather_elements;
  HXRT_RETURN_IF_ERROR(registry.add(std::move(gather_elements)));

  OpSchema gather_nd = make_schema(
      "GatherND", 13, "slices of data addressed by the last dim of indices, after batch_dims shared leading dims");
  gather_nd.inputs = {{.name = "data"}, {.name = "indices", .type_var = "Tind"}};
  gather_nd.outputs = {{.name = "output"}};
  gather_nd.attrs = {{.name = "batch_dims", .type = graph::AttrType::kInt, .default_value = graph::Attribute(0)}};
  gather_nd.type_constraints = {{"T", plain_types()}, {"Tind", index_types()}};
  gather_nd.infer = infer_gather_nd;
  HXRT_RETURN_IF_ERROR(registry.add(std::move(gather_nd)));

  OpSchema scatter_elements = make_schema(
      "ScatterElements", 16,
      "a copy of data with data[indices[i][j]][j] (axis 0) = updates[i][j], or combined by reduction add/mul");
  scatter_elements.inputs = {{.name = "data"}, {.name = "indices", .type_var = "Tind"}, {.name = "updates"}};
  scatter_elements.outputs = {{.name = "output"}};
  scatter_elements.attrs = {
      {.name = "axis", .type = graph::AttrType::kInt, .default_value = graph::Attribute(0)},
      {.name = "reduction", .type = graph::AttrType::kString, .default_value = reduction_default()}};
  scatter_elements.type_constraints = {{"T", plain_types()}, {"Tind", index_types()}};
  scatter_elements.infer = infer_scatter_elements;
  HXRT_RETURN_IF_ERROR(registry.add(std::move(scatter_elements)));

  OpSchema scatter_nd = make_schema(
      "ScatterND", 16, "a copy of data with the slices addressed by indices set to updates (or combined: add/mul)");
  scatter_nd.inputs = {{.name = "data"}, {.name = "indices", .type_var = "Tind"}, {.name = "updates"}};
  scatter_nd.outputs = {{.name = "output"}};
  scatter_nd.attrs = {{.name = "reduction", .type = graph::AttrType::kString, .default_value = reduction_default()}};
  scatter_nd.type_constraints = {{"T", plain_types()}, {"Tind", index_types()}};
  scatter_nd.infer = infer_scatter_nd;
  HXRT_RETURN_IF_ERROR(registry.add(std::move(scatter_nd)));

  OpSchema compress =
      make_schema("Compress", 11, "the slices along axis (or elements of the flattened input) where condition is true");
  compress.inputs = {{.name = "input"}, {.name = "condition", .type_var = "T1"}};
  compress.outputs = {{.name = "output"}};
  compress.attrs = {{.name = "axis", .type = graph::AttrType::kInt}};
  compress.type_constraints = {{"T", plain_types()}, {"T1", {DType::kBool}}};
  compress.infer = infer_compress;
  HXRT_RETURN_IF_ERROR(registry.add(std::move(compress)));

  OpSchema nonzero = make_schema("NonZero", 13, "indices of the non-zero elements, i64 [rank, count], row-major order");
  nonzero.inputs = {{.name = "X"}};
  nonzero.outputs = {{.name = "Y", .type_var = "I"}};
  nonzero.type_constraints = {{"T", plain_types()}, {"I", {DType::kI64}}};
  nonzero.infer = infer_nonzero;
  HXRT_RETURN_IF_ERROR(registry.add(std::move(nonzero)));

  OpSchema unique = make_schema(
      "Unique", 11, "distinct elements (or slices along axis), first-occurrence indices, inverse indices and counts");
  unique.inputs = {{.name = "X"}};
  unique.outputs = {{.name = "Y"},
                    {.name = "indices", .type_var = "I"},
                    {.name = "inverse_indices", .type_var = "I"},
                    {.name = "counts", .type_var = "I"}};
  unique.attrs = {{.name = "axis", .type = graph::AttrType::kInt},
                  {.name = "sorted", .type = graph::AttrType::kInt, .default_value = graph::Attribute(1)}};
  unique.type_constraints = {{"T", plain_types()}, {"I", {DType::kI64}}};
  unique.infer = infer_unique;
  HXRT_RETURN_IF_ERROR(registry.add(std::move(unique)));

  OpSchema reverse_sequence = make_schema(
      "ReverseSequence", 10, "reverses the first sequence_lens[b] steps along time_axis of each batch entry b");
  reverse_sequence.inputs = {{.name = "input"}, {.name = "sequence_lens", .type_var = "I"}};
  reverse_sequence.outputs = {{.name = "Y"}};
  reverse_sequence.attrs = {{.name = "batch_axis", .type = graph::AttrType::kInt, .default_value = graph::Attribute(1)},
                            {.name = "time_axis", .type = graph::AttrType::kInt, .default_value = graph::Attribute(0)}};
  reverse_sequence.type_constraints = {{"T", plain_types()}, {"I", {DType::kI64}}};
  reverse_sequence.infer = infer_reverse_sequence;
  HXRT_RETURN_IF_ERROR(registry.add(std::move(reverse_sequence)));
  return ok_status();
}

}  // namespace hxrt::ops::schemas
