// Schemas of the shape and layout ops (docs/onnx_ops/shape_ops.md): Expand Tile Pad Split DepthToSpace SpaceToDepth
// Trilu Range ConstantOfShape OneHot Shape Size. (Squeeze, Unsqueeze, Flatten and Identity are imported as Reshape.)
//
// Inputs whose values decide the output shape (Expand's shape, Tile's repeats, Pad's pads, Split's split, Range's
// bounds, ConstantOfShape's shape, OneHot's depth) must be constants (initializers) when the plan is built; the ONNX
// importer makes them so (converter.h, Note [Values known at import]). The arithmetic lives in
// hxrt/ops/params/shape_ops.h, shared with the kernels.

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hxrt/ops/params/shape_ops.h"
#include "hxrt/ops/params/tensor_ops.h"
#include "ops/schemas/schemas.h"

namespace hxrt::ops::schemas {

namespace {

const std::vector<DType>& number_types() {
  static const std::vector<DType> types = {DType::kF32, DType::kI32, DType::kI64};
  return types;
}

// Reads element k of an i32, i64 or f32 weight as T.
template <typename T>
T weight_element(const graph::WeightData& weight, DType dtype, size_t k) {
  if (dtype == DType::kI64) {
    int64_t v;
    std::memcpy(&v, weight.data + k * 8, 8);
    return static_cast<T>(v);
  }
  if (dtype == DType::kI32) {
    int32_t v;
    std::memcpy(&v, weight.data + k * 4, 4);
    return static_cast<T>(v);
  }
  float v;
  std::memcpy(&v, weight.data + k * 4, 4);
  return static_cast<T>(v);
}

// The initializer behind input `i` and its element count; the error names the input. `dtypes` are the accepted ones.
Result<std::pair<const graph::WeightData*, size_t>> constant_weight(InferenceContext& ctx, size_t i,
                                                                    std::string_view name,
                                                                    std::initializer_list<DType> dtypes) {
  HXRT_ASSIGN_OR_RETURN(const graph::WeightData* weight, require_constant(ctx, i, name));
  const graph::TensorDesc& desc = ctx.input(i);
  if (std::find(dtypes.begin(), dtypes.end(), desc.dtype) == dtypes.end()) {
    return ctx.error(fmt::format("input '{}' has the unsupported dtype {}", name, desc.dtype));
  }
  if (desc.shape.rank() > 1 || !desc.shape.is_static()) {
    return ctx.error(fmt::format("input '{}' {} must be a static scalar or vector", name, desc.to_string()));
  }
  const auto count = static_cast<size_t>(desc.shape.num_elements().value());
  if (weight->size != count * element_bytes(desc.dtype)) {
    return ctx.error(fmt::format("input '{}' {} holds {} bytes", name, desc.to_string(), weight->size));
  }
  return std::pair<const graph::WeightData*, size_t>(weight, count);
}

// The values of constant input `i` (i32 or i64, rank 0 or 1).
Result<std::vector<int64_t>> constant_ints(InferenceContext& ctx, size_t i, std::string_view name) {
  HXRT_ASSIGN_OR_RETURN(const auto weight, constant_weight(ctx, i, name, {DType::kI64, DType::kI32}));
  std::vector<int64_t> values(weight.second);
  for (size_t k = 0; k < values.size(); ++k) values[k] = weight_element<int64_t>(*weight.first, ctx.input(i).dtype, k);
  return values;
}

// The value of constant input `i`, a single f32, i32 or i64 element.
template <typename T>
Result<T> constant_scalar(InferenceContext& ctx, size_t i, std::string_view name) {
  HXRT_ASSIGN_OR_RETURN(const auto weight, constant_weight(ctx, i, name, {DType::kF32, DType::kI64, DType::kI32}));
  if (weight.second != 1) return ctx.error(fmt::format("input '{}' must hold one value", name));
  return weight_element<T>(*weight.first, ctx.input(i).dtype, 0);
}

// dim + delta for a possibly negative delta.
graph::Dim add_constant(const graph::Dim& dim, int64_t delta) {
  return delta >= 0 ? dim + graph::Dim(delta) : dim - graph::Dim(-delta);
}

Status check_rank(InferenceContext& ctx, size_t rank) {
  if (rank > static_cast<size_t>(Shape::kMaxRank)) {
    return ctx.error(fmt::format("output rank {} exceeds {}", rank, Shape::kMaxRank));
  }
  return ok_status();
}

Status infer_expand(InferenceContext& ctx) {
  HXRT_ASSIGN_OR_RETURN(const std::vector<int64_t> shape, constant_ints(ctx, 1, "shape"));
  std::vector<graph::Dim> dims;
  for (int64_t d : shape) {
    if (d < 0) return ctx.error(fmt::format("input 'shape' [{}] has a negative dim", fmt::join(shape, ", ")));
    dims.emplace_back(d);
  }
  const graph::TensorDesc& in = ctx.input(0);
  HXRT_ASSIGN_OR_RETURN(graph::SymShape out, broadcast_shapes(ctx, in.shape, graph::SymShape(std::move(dims))));
  HXRT_RETURN_IF_ERROR(check_rank(ctx, static_cast<size_t>(out.rank())));
  ctx.set_output(0, graph::TensorDesc{in.dtype, std::move(out)});
  return ok_status();
}

Status infer_tile(InferenceContext& ctx) {
  const graph::TensorDesc& in = ctx.input(0);
  HXRT_ASSIGN_OR_RETURN(const std::vector<int64_t> repeats, constant_ints(ctx, 1, "repeats"));
  if (repeats.size() != static_cast<size_t>(in.shape.rank())) {
    return ctx.error(fmt::format("input 'repeats' [{}] has {} values for the rank-{} input {}",
                                 fmt::join(repeats, ", "), repeats.size(), in.shape.rank(), in.to_string()));
  }
  std::vector<graph::Dim> out;
  for (size_t d = 0; d < repeats.size(); ++d) {
    if (repeats[d] < 0) return ctx.error(fmt::format("input 'repeats' [{}] is negative", fmt::join(repeats, ", ")));
    out.push_back(in.shape.dims()[d] * graph::Dim(repeats[d]));
  }
  ctx.set_output(0, graph::TensorDesc{in.dtype, graph::SymShape(std::move(out))});
  return ok_status();
}

Status infer_pad(InferenceContext& ctx) {
  HXRT_ASSIGN_OR_RETURN(const PadParams params, parse_pad_params(ctx.node()));
  const graph::TensorDesc& in = ctx.input(0);
  const int rank = in.shape.rank();
  HXRT_ASSIGN_OR_RETURN(const std::vector<int64_t> pads, constant_ints(ctx, 1, "pads"));
  if (pads.size() != static_cast<size_t>(2 * rank)) {
    return ctx.error(fmt::format("input 'pads' [{}] has {} values; the rank-{} input needs {}", fmt::join(pads, ", "),
                                 pads.size(), rank, 2 * rank));
  }
  if (ctx.has_input(2) && ctx.input(2).shape.rank() > 1) {
    return ctx.error(fmt::format("input 'constant_value' {} must be a scalar", ctx.input(2).to_string()));
  }
  std::vector<graph::Dim> out;
  for (int d = 0; d < rank; ++d) {
    const int64_t before = pads[static_cast<size_t>(d)];
    const int64_t after = pads[static_cast<size_t>(d + rank)];
    const graph::Dim& dim = in.shape.dims()[static_cast<size_t>(d)];
    if (dim.is_static()) {
      Result<int64_t> padded = padded_dim(params.mode, dim.value(), before, after, d);
      if (!padded.ok()) return ctx.error(padded.status().message());
      out.emplace_back(*padded);
    } else {
      out.push_back(add_constant(dim, before + after));  // the kernel checks the cropped range at run time
    }
  }
  ctx.set_output(0, graph::TensorDesc{in.dtype, graph::SymShape(std::move(out))});
  return ok_status();
}

Status infer_split(InferenceContext& ctx) {
  const graph::TensorDesc& in = ctx.input(0);
  HXRT_ASSIGN_OR_RETURN(const AxisParams axis_params, parse_axis_params(ctx.node(), 0));
  HXRT_ASSIGN_OR_RETURN(const int axis, axis_value(ctx, axis_params.axis, in.shape.rank(), "attribute 'axis'"));
  std::vector<int64_t> split;
  if (ctx.has_input(1)) {
    HXRT_ASSIGN_OR_RETURN(split, constant_ints(ctx, 1, "split"));
  }
  const size_t outputs = ctx.num_outputs();
  const graph::Dim& dim = in.shape.dims()[static_cast<size_t>(axis)];
  std::vector<graph::Dim> parts;
  if (!split.empty()) {
    int64_t total = 0;
    for (int64_t s : split) total += s;
    HXRT_RETURN_IF_ERROR(ctx.require_equal(
        dim, graph::Dim(total), fmt::format("Split '{}': axis {} vs the sum of 'split'", ctx.node().name, axis)));
    Result<std::vector<int64_t>> sizes = split_sizes(total, split, outputs);
    if (!sizes.ok()) return ctx.error(sizes.status().message());
    for (int64_t s : *sizes) parts.emplace_back(s);
  } else if (dim.is_static()) {
    Result<std::vector<int64_t>> sizes = split_sizes(dim.value(), split, outputs);
    if (!sizes.ok()) return ctx.error(sizes.status().message());
    for (int64_t s : *sizes) parts.emplace_back(s);
  } else {
    if (outputs == 0 || outputs > kMaxSplitOutputs) return ctx.error(fmt::format("has {} outputs", outputs));
    // Equal parts of a symbolic axis; the kernel checks that the parts cover it.
    parts.assign(outputs, dim / graph::Dim(static_cast<int64_t>(outputs)));
  }
  for (size_t k = 0; k < outputs; ++k) {
    std::vector<graph::Dim> dims = in.shape.dims();
    dims[static_cast<size_t>(axis)] = parts[k];
    ctx.set_output(k, graph::TensorDesc{in.dtype, graph::SymShape(std::move(dims))});
  }
  return ok_status();
}

Status infer_block(InferenceContext& ctx, bool depth_to_space) {
  HXRT_ASSIGN_OR_RETURN(const BlockParams params, parse_block_params(ctx.node(), depth_to_space));
  const graph::TensorDesc& in = ctx.input(0);
  if (in.shape.rank() != 4) return ctx.error(fmt::format("input {} must have rank 4", in.to_string()));
  const std::vector<graph::Dim>& x = in.shape.dims();
  const graph::Dim b(params.blocksize);
  std::vector<graph::Dim> out;
  if (depth_to_space) {
    if (!x[1].is_static() || x[1].value() % (params.blocksize * params.blocksize) != 0) {
      return ctx.error(fmt::format("input {}: channels must be a static multiple of blocksize² = {}", in.to_string(),
                                   params.blocksize * params.blocksize));
    }
    out = {x[0], graph::Dim(x[1].value() / (params.blocksize * params.blocksize)), x[2] * b, x[3] * b};
  } else {
    for (int d = 2; d < 4; ++d) {
      if (x[static_cast<size_t>(d)].is_static() && x[static_cast<size_t>(d)].value() % params.blocksize != 0) {
        return ctx.error(fmt::format("input {}: dim {} is not a multiple of blocksize {}", in.to_string(), d,
                                     params.blocksize));
      }
    }
    out = {x[0], x[1] * b * b, x[2] / b, x[3] / b};  // the kernel checks symbolic spatial dims
  }
  ctx.set_output(0, graph::TensorDesc{in.dtype, graph::SymShape(std::move(out))});
  return ok_status();
}

Status infer_trilu(InferenceContext& ctx) {
  HXRT_RETURN_IF_ERROR(parse_trilu_params(ctx.node()).status());
  const graph::TensorDesc& in = ctx.input(0);
  if (in.shape.rank() < 2) return ctx.error(fmt::format("input {} must have rank >= 2", in.to_string()));
  if (ctx.has_input(1) && ctx.input(1).shape.rank() > 1) {
    return ctx.error(fmt::format("input 'k' {} must be a scalar", ctx.input(1).to_string()));
  }
  ctx.set_output(0, in);
  return ok_status();
}

Status infer_range(InferenceContext& ctx) {
  const DType dtype = ctx.input(0).dtype;
  Result<int64_t> count = 0;
  if (dtype == DType::kF32) {
    HXRT_ASSIGN_OR_RETURN(const double start, constant_scalar<double>(ctx, 0, "start"));
    HXRT_ASSIGN_OR_RETURN(const double limit, constant_scalar<double>(ctx, 1, "limit"));
    HXRT_ASSIGN_OR_RETURN(const double delta, constant_scalar<double>(ctx, 2, "delta"));
    count = range_count(start, limit, delta);
  } else {
    HXRT_ASSIGN_OR_RETURN(const int64_t start, constant_scalar<int64_t>(ctx, 0, "start"));
    HXRT_ASSIGN_OR_RETURN(const int64_t limit, constant_scalar<int64_t>(ctx, 1, "limit"));
    HXRT_ASSIGN_OR_RETURN(const int64_t delta, constant_scalar<int64_t>(ctx, 2, "delta"));
    count = range_count(start, limit, delta);
  }
  if (!count.ok()) return ctx.error(count.status().message());
  ctx.set_output(0, graph::TensorDesc{dtype, graph::SymShape({graph::Dim(*count)})});
  return ok_status();
}

Status infer_constant_of_shape(InferenceContext& ctx) {
  HXRT_ASSIGN_OR_RETURN(const ConstantOfShapeParams params, parse_constant_of_shape_params(ctx.node()));
  HXRT_ASSIGN_OR_RETURN(const std::vector<int64_t> shape, constant_ints(ctx, 0, "input"));
  HXRT_RETURN_IF_ERROR(check_rank(ctx, shape.size()));
  std::vector<graph::Dim> dims;
  for (int64_t d : shape) {
    if (d < 0) return ctx.error(fmt::format("input 'input' [{}] has a negative dim", fmt::join(shape, ", ")));
    dims.emplace_back(d);
  }
  ctx.set_output(0, graph::TensorDesc{params.value.dtype, graph::SymShape(std::move(dims))});
  return ok_status();
}

Status infer_onehot(InferenceContext& ctx) {
  HXRT_ASSIGN_OR_RETURN(const AxisParams axis_params, parse_axis_params(ctx.node(), -1));
  const graph::TensorDesc& indices = ctx.input(0);
  const int rank = indices.shape.rank() + 1;
  HXRT_RETURN_IF_ERROR(check_rank(ctx, static_cast<size_t>(rank)));
  HXRT_ASSIGN_OR_RETURN(const int axis, axis_value(ctx, axis_params.axis, rank, "attribute 'axis'"));
  HXRT_ASSIGN_OR_RETURN(const double depth, constant_scalar<double>(ctx, 1, "depth"));
  if (!(depth >= 1.0)) return ctx.error(fmt::format("input 'depth' = {} must be >= 1", depth));
  const graph::TensorDesc& values = ctx.input(2);
  if (!values.shape.is_static() || values.shape.num_elements().value() != 2) {
    return ctx.error(fmt::format("input 'values' {} must hold [off_value, on_value]", values.to_string()));
  }
  std::vector<graph::Dim> out = indices.shape.dims();
  out.insert(out.begin() + axis, graph::Dim(static_cast<int64_t>(depth)));
  ctx.set_output(0, graph::TensorDesc{values.dtype, graph::SymShape(std::move(out))});
  return ok_status();
}

Status infer_shape(InferenceContext& ctx) {
  HXRT_ASSIGN_OR_RETURN(const ShapeParams params, parse_shape_params(ctx.node()));
  const auto [first, last] = shape_slice(params, ctx.input(0).shape.rank());
  ctx.set_output(0, graph::TensorDesc{DType::kI64, graph::SymShape({graph::Dim(last - first)})});
  return ok_status();
}

Status infer_size(InferenceContext& ctx) {
  ctx.set_output(0, graph::TensorDesc{DType::kI64, graph::SymShape()});
  return ok_status();
}

OpSchema schema(std::string op_type, int since_version, std::vector<InputSpec> inputs, std::vector<OutputSpec> outputs,
                std::vector<TypeConstraint> types, ShapeInferenceFn infer, std::string doc) {
  OpSchema s;
  s.op_type = std::move(op_type);
  s.since_version = since_version;
  s.inputs = std::move(inputs);
  s.outputs = std::move(outputs);
  s.type_constraints = std::move(types);
  s.infer = std::move(infer);
  s.doc = std::move(doc);
  return s;
}

AttrSpec int_attr(std::string name, int64_t fallback) {
  return {.name = std::move(name), .type = graph::AttrType::kInt, .default_value = graph::Attribute(fallback)};
}

}  // namespace

Status register_shape_ops(OpSchemaRegistry& registry) {
  const std::vector<DType> i64 = {DType::kI64};

  HXRT_RETURN_IF_ERROR(registry.add(schema("Expand", 13, {{.name = "input"}, {.name = "shape", .type_var = "Tshape"}},
                                           {{.name = "output"}}, {{"T", plain_types()}, {"Tshape", i64}}, infer_expand,
                                           "broadcasts input to the constant shape (numpy rules, both ways)")));

  HXRT_RETURN_IF_ERROR(registry.add(schema("Tile", 13, {{.name = "input"}, {.name = "repeats", .type_var = "Trep"}},
                                           {{.name = "output"}}, {{"T", plain_types()}, {"Trep", i64}}, infer_tile,
                                           "repeats the input repeats[d] times along each dim d (constant repeats)")));

  OpSchema pad = schema(
      "Pad", 13,
      {{.name = "data"}, {.name = "pads", .type_var = "Tind"}, {.name = "constant_value", .optional = true}},
      {{.name = "output"}}, {{"T", plain_types()}, {"Tind", i64}}, infer_pad,
      "pads (or crops, for negative pads) each dim by constant pads [begins..., ends...]: constant, reflect or edge");
  pad.attrs = {{.name = "mode", .type = graph::AttrType::kString, .default_value = graph::Attribute("constant")}};
  HXRT_RETURN_IF_ERROR(registry.add(std::move(pad)));

  std::vector<OutputSpec> split_outputs;
  for (size_t k = 0; k < kMaxSplitOutputs; ++k) split_outputs.push_back({.name = fmt::format("outputs_{}", k)});
  OpSchema split = schema("Split", 13, {{.name = "input"}, {.name = "split", .type_var = "Tsplit", .optional = true}},
                          std::move(split_outputs), {{"T", plain_types()}, {"Tsplit", i64}}, infer_split,
                          "splits along axis into the constant sizes 'split', or into equal parts (one per output)");
  split.attrs = {int_attr("axis", 0)};
  HXRT_RETURN_IF_ERROR(registry.add(std::move(split)));

  OpSchema d2s = schema(
      "DepthToSpace", 13, {{.name = "input"}}, {{.name = "output"}}, {{"T", plain_types()}},
      [](InferenceContext& ctx) { return infer_block(ctx, true); },
      "[N, C, H, W] -> [N, C/b², H·b, W·b]; mode DCR (depth, column, row) or CRD (column, row, depth)");
  d2s.attrs = {{.name = "blocksize", .type = graph::AttrType::kInt, .required = true},
               {.name = "mode", .type = graph::AttrType::kString, .default_value = graph::Attribute("DCR")}};
  HXRT_RETURN_IF_ERROR(registry.add(std::move(d2s)));

  OpSchema s2d = schema(
      "SpaceToDepth", 13, {{.name = "input"}}, {{.name = "output"}}, {{"T", plain_types()}},
      [](InferenceContext& ctx) { return infer_block(ctx, false); },
      "[N, C, H, W] -> [N, C·b², H/b, W/b], the inverse of DepthToSpace in DCR mode");
  s2d.attrs = {{.name = "blocksize", .type = graph::AttrType::kInt, .required = true}};
  HXRT_RETURN_IF_ERROR(registry.add(std::move(s2d)));

  OpSchema trilu =
      schema("Trilu", 14, {{.name = "input"}, {.name = "k", .type_var = "Tk", .optional = true}},
             {{.name = "output"}}, {{"T", plain_types()}, {"Tk", i64}}, infer_trilu,
             "keeps the upper (j - i >= k) or lower (j - i <= k) triangle of the last two dims, zeroes the rest");
  trilu.attrs = {int_attr("upper", 1)};
  HXRT_RETURN_IF_ERROR(registry.add(std::move(trilu)));

  HXRT_RETURN_IF_ERROR(registry.add(
      schema("Range", 11, {{.name = "start"}, {.name = "limit"}, {.name = "delta"}}, {{.name = "output"}},
             {{"T", number_types()}}, infer_range,
             "start + i·delta for i < max(ceil((limit - start) / delta), 0); constant scalar inputs")));

  OpSchema constant_of_shape =
      schema("ConstantOfShape", 9, {{.name = "input", .type_var = "T1"}}, {{.name = "output", .type_var = "T2"}},
             {{"T1", i64}}, infer_constant_of_shape,
             "a tensor of the constant shape 'input' filled with the one-element attribute 'value' (f32 0)");
  constant_of_shape.attrs = {{.name = "value", .type = graph::AttrType::kTensor}};
  HXRT_RETURN_IF_ERROR(registry.add(std::move(constant_of_shape)));

  OpSchema onehot = schema(
      "OneHot", 11,
      {{.name = "indices", .type_var = "T1"}, {.name = "depth", .type_var = "T2"}, {.name = "values", .type_var = "T3"}},
      {{.name = "output", .type_var = "T3"}}, {{"T1", number_types()}, {"T2", number_types()}, {"T3", plain_types()}},
      infer_onehot,
      "values[1] where index (negative counts from depth) equals the position on the new axis, values[0] elsewhere");
  onehot.attrs = {int_attr("axis", -1)};
  HXRT_RETURN_IF_ERROR(registry.add(std::move(onehot)));

  OpSchema shape = schema("Shape", 15, {{.name = "data"}}, {{.name = "shape", .type_var = "T1"}},
                          {{"T", plain_types()}}, infer_shape, "the dims [start, end) of the input's shape as i64");
  shape.attrs = {int_attr("start", 0), {.name = "end", .type = graph::AttrType::kInt}};
  HXRT_RETURN_IF_ERROR(registry.add(std::move(shape)));

  HXRT_RETURN_IF_ERROR(registry.add(schema("Size", 13, {{.name = "data"}}, {{.name = "size", .type_var = "T1"}},
                                           {{"T", plain_types()}}, infer_size,
                                           "the input's element count as an i64 scalar")));
  return ok_status();
}

}  // namespace hxrt::ops::schemas
