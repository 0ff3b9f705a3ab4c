// ONNX converters of the shape_ops family (converter.h): Reshape, Expand, Tile, Pad, Split, Squeeze, Unsqueeze,
// Flatten, Identity, DepthToSpace, SpaceToDepth, Trilu, Range, ConstantOfShape, OneHot, Shape and Size.
//
// Inputs whose values decide an output shape are read with require_ints and passed on as fresh constants, so the hxrt
// op's shape inference sees an initializer. Squeeze, Unsqueeze and Flatten become a Reshape to a target computed from
// the input's (symbolic) shape (Note [Reshape targets]); Identity is a rename.
//
// Note [Reshape targets]
// A fully static output shape is written as it is (allowzero=1 when it holds a 0, so the 0 is a length). Otherwise a
// dim equal to the input's dim at the same position is written 0 (copy), a static dim as its value, and at most one
// remaining symbolic dim as -1; more than one is Unimplemented.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "formats/onnx/converter.h"
#include "hxrt/ops/params/shape_ops.h"

namespace hxrt::formats::onnx {

namespace {

constexpr int kMax = ops::kMaxOpVersion;

Result<graph::SymShape> input_shape(ConversionContext& ctx, size_t i) {
  const graph::TensorDesc* desc = ctx.input_desc(i);
  if (desc == nullptr) return ctx.unsupported(fmt::format("the shape of input {} is not known at import", i));
  return desc->shape;
}

// Axis `axis` of rank `rank`, negative counting from the end.
Result<int> axis_in(ConversionContext& ctx, int64_t axis, int rank, std::string_view what) {
  if (axis < -rank || axis >= rank) {
    return ctx.error(fmt::format("{} {} is out of range for rank {}", what, axis, rank));
  }
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

// Reshape of input 0 to `out` (Note [Reshape targets]).
Status emit_reshape(ConversionContext& ctx, const graph::SymShape& in, const std::vector<graph::Dim>& out) {
  std::vector<int64_t> target(out.size());
  bool all_static = true;
  bool has_zero = false;
  for (size_t k = 0; k < out.size(); ++k) {
    all_static = all_static && out[k].is_static();
    has_zero = has_zero || (out[k].is_static() && out[k].value() == 0);
  }
  graph::AttributeMap attrs;
  if (all_static) {
    for (size_t k = 0; k < out.size(); ++k) target[k] = out[k].value();
    if (has_zero) attrs.set("allowzero", int64_t{1});
  } else {
    bool inferred = false;
    for (size_t k = 0; k < out.size(); ++k) {
      const bool same_position = k < static_cast<size_t>(in.rank()) && in.dims()[k] == out[k];
      if (out[k].is_static() && (out[k].value() != 0 || same_position)) {
        target[k] = same_position ? 0 : out[k].value();
      } else if (same_position) {
        target[k] = 0;
      } else if (!out[k].is_static() && !inferred && !has_zero) {
        target[k] = -1;
        inferred = true;
      } else {
        return ctx.unsupported(fmt::format("cannot express {} -> {} as one Reshape", in.to_string(),
                                           graph::SymShape(out).to_string()));
      }
    }
  }
  return ctx.emit("Reshape", {ctx.input(0), ctx.add_ints(target, "shape")}, {ctx.output(0)}, std::move(attrs));
}

// ---- Reshape ----

Status convert_reshape_v1(ConversionContext& ctx) {
  Result<std::vector<int64_t>> shape = ctx.attrs().get_ints("shape");
  if (!shape.ok()) return ctx.error(fmt::format("attribute 'shape': {}", shape.status().message()));
  return ctx.emit("Reshape", {ctx.input(0), ctx.add_ints(*shape, "shape")}, {ctx.output(0)});
}

Status convert_reshape(ConversionContext& ctx) {
  HXRT_ASSIGN_OR_RETURN(const std::vector<int64_t> shape, ctx.require_ints(1, "shape"));
  graph::AttributeMap attrs;
  Result<int64_t> allowzero = ctx.attrs().get_int("allowzero", 0);
  if (!allowzero.ok()) return ctx.error(fmt::format("attribute 'allowzero': {}", allowzero.status().message()));
  if (*allowzero != 0) attrs.set("allowzero", *allowzero);
  return ctx.emit("Reshape", {ctx.input(0), ctx.add_ints(shape, "shape")}, {ctx.output(0)}, std::move(attrs));
}

// ---- Squeeze, Unsqueeze, Flatten, Identity ----

// The axes of Squeeze/Unsqueeze: the attribute before opset 13, the optional input from 13; `present` is false when
// neither is given.
Result<std::vector<int64_t>> read_axes(ConversionContext& ctx, bool* present) {
  *present = true;
  if (ctx.opset() < 13) {
    if (!ctx.attrs().has("axes")) {
      *present = false;
      return std::vector<int64_t>{};
    }
    Result<std::vector<int64_t>> axes = ctx.attrs().get_ints("axes");
    if (!axes.ok()) return ctx.error(fmt::format("attribute 'axes': {}", axes.status().message()));
    return axes;
  }
  if (!ctx.has_input(1)) {
    *present = false;
    return std::vector<int64_t>{};
  }
  return ctx.require_ints(1, "axes");
}

Status convert_squeeze(ConversionContext& ctx) {
  HXRT_ASSIGN_OR_RETURN(const graph::SymShape in, input_shape(ctx, 0));
  bool present = false;
  HXRT_ASSIGN_OR_RETURN(const std::vector<int64_t> axes, read_axes(ctx, &present));
  std::vector<bool> squeezed(static_cast<size_t>(in.rank()), false);
  if (present) {
    for (int64_t a : axes) {
      HXRT_ASSIGN_OR_RETURN(const int axis, axis_in(ctx, a, in.rank(), "axis"));
      const graph::Dim& dim = in.dims()[static_cast<size_t>(axis)];
      if (dim.is_static() && dim.value() != 1) {
        return ctx.error(fmt::format("cannot squeeze axis {} of {}: its length is not 1", a, in.to_string()));
      }
      squeezed[static_cast<size_t>(axis)] = true;
    }
  } else {
    for (int d = 0; d < in.rank(); ++d) {
      const graph::Dim& dim = in.dims()[static_cast<size_t>(d)];
      if (!dim.is_static()) {
        return ctx.unsupported(fmt::format("squeezing every axis of length 1 of {} needs static dims", in.to_string()));
      }
      squeezed[static_cast<size_t>(d)] = dim.value() == 1;
    }
  }
  std::vector<graph::Dim> out;
  for (int d = 0; d < in.rank(); ++d) {
    if (!squeezed[static_cast<size_t>(d)]) out.push_back(in.dims()[static_cast<size_t>(d)]);
  }
  return emit_reshape(ctx, in, out);
}

Status convert_unsqueeze(ConversionContext& ctx) {
  HXRT_ASSIGN_OR_RETURN(const graph::SymShape in, input_shape(ctx, 0));
  bool present = false;
  HXRT_ASSIGN_OR_RETURN(const std::vector<int64_t> axes, read_axes(ctx, &present));
  if (!present) return ctx.error("needs 'axes'");
  const int rank = in.rank() + static_cast<int>(axes.size());
  std::vector<bool> inserted(static_cast<size_t>(rank), false);
  for (int64_t a : axes) {
    HXRT_ASSIGN_OR_RETURN(const int axis, axis_in(ctx, a, rank, "axis"));
    if (inserted[static_cast<size_t>(axis)]) return ctx.error(fmt::format("axis {} repeats", a));
    inserted[static_cast<size_t>(axis)] = true;
  }
  std::vector<graph::Dim> out;
  size_t next = 0;
  for (int d = 0; d < rank; ++d) {
    out.push_back(inserted[static_cast<size_t>(d)] ? graph::Dim(1) : in.dims()[next++]);
  }
  return emit_reshape(ctx, in, out);
}

Status convert_flatten(ConversionContext& ctx) {
  HXRT_ASSIGN_OR_RETURN(const graph::SymShape in, input_shape(ctx, 0));
  Result<int64_t> axis_attr = ctx.attrs().get_int("axis", 1);
  if (!axis_attr.ok()) return ctx.error(fmt::format("attribute 'axis': {}", axis_attr.status().message()));
  // axis may equal the rank (everything in the outer dim).
  if (*axis_attr < -in.rank() || *axis_attr > in.rank()) {
    return ctx.error(fmt::format("attribute 'axis' = {} is out of range for {}", *axis_attr, in.to_string()));
  }
  const int axis = static_cast<int>(*axis_attr < 0 ? *axis_attr + in.rank() : *axis_attr);
  graph::Dim outer(1), inner(1);
  for (int d = 0; d < in.rank(); ++d) {
    graph::Dim& part = d < axis ? outer : inner;
    part = part * in.dims()[static_cast<size_t>(d)];
  }
  return emit_reshape(ctx, in, {outer, inner});
}

Status convert_identity(ConversionContext& ctx) {
  return ctx.alias_output(0, ctx.input(0));
}

// ---- Expand, Tile ----

// op(input 0, constant copy of input 1): the ops whose second input is a shape-deciding i64 vector.
ConvertFn with_constant_ints(std::string op_type, std::string what) {
  return [op_type, what](ConversionContext& ctx) -> Status {
    HXRT_ASSIGN_OR_RETURN(const std::vector<int64_t> values, ctx.require_ints(1, what));
    return ctx.emit(op_type, {ctx.input(0), ctx.add_ints(values, what)}, {ctx.output(0)});
  };
}

// ---- Pad ----

// A one-element constant of `dtype` holding `value`; Unimplemented for a dtype without a conversion.
Result<std::string> scalar_constant(ConversionContext& ctx, DType dtype, double value) {
  graph::TensorValue tensor{.dtype = dtype, .shape = Shape()};
  auto store = [&](auto v) {
    tensor.data.resize(sizeof v);
    std::memcpy(tensor.data.data(), &v, sizeof v);
  };
  switch (dtype) {
    case DType::kF32: store(static_cast<float>(value)); break;
    case DType::kI64: store(static_cast<int64_t>(value)); break;
    case DType::kI32: store(static_cast<int32_t>(value)); break;
    case DType::kI8: store(static_cast<int8_t>(value)); break;
    case DType::kU8: store(static_cast<uint8_t>(value)); break;
    case DType::kBool: store(static_cast<uint8_t>(value != 0.0)); break;
    default: return ctx.unsupported(fmt::format("a pad value for {} data", dtype));
  }
  return ctx.add_constant(std::move(tensor), "constant_value");
}

graph::AttributeMap pad_attrs(ConversionContext& ctx) {
  graph::AttributeMap attrs;
  if (const graph::Attribute* mode = ctx.attrs().find("mode")) attrs.set("mode", *mode);
  return attrs;
}

Status convert_pad_v2(ConversionContext& ctx) {
  Result<std::vector<int64_t>> pads = ctx.attrs().get_ints("pads");
  if (!pads.ok()) return ctx.error(fmt::format("attribute 'pads': {}", pads.status().message()));
  Result<double> value = ctx.attrs().get_float("value", 0.0);
  if (!value.ok()) return ctx.error(fmt::format("attribute 'value': {}", value.status().message()));
  std::vector<std::string> inputs = {ctx.input(0), ctx.add_ints(*pads, "pads")};
  if (*value != 0.0) {
    const graph::TensorDesc* desc = ctx.input_desc(0);
    if (desc == nullptr) return ctx.unsupported("the data's dtype is not known at import");
    HXRT_ASSIGN_OR_RETURN(std::string constant, scalar_constant(ctx, desc->dtype, *value));
    inputs.push_back(std::move(constant));
  }
  return ctx.emit("Pad", std::move(inputs), {ctx.output(0)}, pad_attrs(ctx));
}

Status convert_pad(ConversionContext& ctx) {
  Result<std::vector<int64_t>> pads_read = ctx.require_ints(1, "pads");
  Result<std::vector<int64_t>> axes_read = ctx.has_input(3) ? ctx.require_ints(3, "axes") : std::vector<int64_t>{};
  if (!pads_read.ok()) return pads_read.status();
  if (!axes_read.ok()) return axes_read.status();
  std::vector<int64_t> pads = std::move(pads_read).value();
  if (ctx.has_input(3)) {  // opset 18: pads for the listed axes only
    const std::vector<int64_t>& axes = *axes_read;
    HXRT_ASSIGN_OR_RETURN(const graph::SymShape in, input_shape(ctx, 0));
    const int rank = in.rank();
    if (pads.size() != 2 * axes.size()) {
      return ctx.error(fmt::format("{} pads for {} axes", pads.size(), axes.size()));
    }
    std::vector<int64_t> full(static_cast<size_t>(2 * rank), 0);
    for (size_t k = 0; k < axes.size(); ++k) {
      HXRT_ASSIGN_OR_RETURN(const int axis, axis_in(ctx, axes[k], rank, "axis"));
      full[static_cast<size_t>(axis)] = pads[k];
      full[static_cast<size_t>(axis + rank)] = pads[k + axes.size()];
    }
    pads = std::move(full);
  }
  std::vector<std::string> inputs = {ctx.input(0), ctx.add_ints(pads, "pads")};
  if (ctx.has_input(2)) inputs.push_back(ctx.input(2));
  return ctx.emit("Pad", std::move(inputs), {ctx.output(0)}, pad_attrs(ctx));
}

// ---- Split ----

Status emit_split(ConversionContext& ctx, const std::vector<int64_t>& split, int64_t axis) {
  std::vector<std::string> outputs;
  for (size_t k = 0; k < ctx.num_outputs(); ++k) {
    outputs.push_back(ctx.has_output(k) ? ctx.output(k) : ctx.temp(fmt::format("unused_{}", k)));
  }
  std::vector<std::string> inputs = {ctx.input(0)};
  if (!split.empty()) inputs.push_back(ctx.add_ints(split, "split"));
  graph::AttributeMap attrs;
  attrs.set("axis", axis);
  return ctx.emit("Split", std::move(inputs), std::move(outputs), std::move(attrs));
}

Status convert_split(ConversionContext& ctx) {
  Result<int64_t> axis = ctx.attrs().get_int("axis", 0);
  if (!axis.ok()) return ctx.error(fmt::format("attribute 'axis': {}", axis.status().message()));
  std::vector<int64_t> split;
  if (ctx.opset() < 13) {
    Result<std::vector<int64_t>> attr = ctx.attrs().get_ints("split", std::vector<int64_t>{});
    if (!attr.ok()) return ctx.error(fmt::format("attribute 'split': {}", attr.status().message()));
    split = std::move(attr).value();
  } else if (ctx.has_input(1)) {
    HXRT_ASSIGN_OR_RETURN(split, ctx.require_ints(1, "split"));
  } else if (ctx.attrs().has("num_outputs")) {
    // Opset 18: ceil(dim / num_outputs) per output, the last one smaller.
    Result<int64_t> n = ctx.attrs().get_int("num_outputs");
    if (!n.ok() || *n < 1) return ctx.error("attribute 'num_outputs' must be a positive int");
    HXRT_ASSIGN_OR_RETURN(const graph::SymShape in, input_shape(ctx, 0));
    HXRT_ASSIGN_OR_RETURN(const int a, axis_in(ctx, *axis, in.rank(), "axis"));
    const graph::Dim& dim = in.dims()[static_cast<size_t>(a)];
    if (!dim.is_static()) return ctx.unsupported("num_outputs on a symbolic axis");
    const int64_t chunk = (dim.value() + *n - 1) / *n;
    int64_t left = dim.value();
    for (int64_t k = 0; k < *n; ++k) {
      split.push_back(std::min(chunk, left));
      left -= split.back();
    }
  }
  return emit_split(ctx, split, *axis);
}

// ---- The remaining ops ----

// Emits `op_type` on the node's inputs and outputs with the listed attributes copied when present.
ConvertFn same_op(std::string op_type, std::vector<std::string> attr_names) {
  return [op_type, attr_names](ConversionContext& ctx) -> Status {
    graph::AttributeMap attrs;
    for (const std::string& name : attr_names) {
      if (const graph::Attribute* a = ctx.attrs().find(name)) attrs.set(name, *a);
    }
    return ctx.emit(op_type, all_inputs(ctx), {ctx.output(0)}, std::move(attrs));
  };
}

Status convert_range(ConversionContext& ctx) {
  // All three are asked for before returning, so that one bind-time import learns every value it needs.
  static constexpr std::string_view kNames[] = {"start", "limit", "delta"};
  std::vector<Result<graph::TensorValue>> values;
  for (size_t i = 0; i < 3; ++i) values.push_back(ctx.require_constant(i, kNames[i]));
  std::vector<std::string> inputs;
  for (size_t i = 0; i < 3; ++i) {
    if (!values[i].ok()) return values[i].status();
    inputs.push_back(ctx.add_constant(std::move(values[i]).value(), kNames[i]));
  }
  return ctx.emit("Range", std::move(inputs), {ctx.output(0)});
}

Status convert_constant_of_shape(ConversionContext& ctx) {
  HXRT_ASSIGN_OR_RETURN(const std::vector<int64_t> shape, ctx.require_ints(0, "input"));
  graph::AttributeMap attrs;
  if (const graph::Attribute* value = ctx.attrs().find("value")) attrs.set("value", *value);
  return ctx.emit("ConstantOfShape", {ctx.add_ints(shape, "shape")}, {ctx.output(0)}, std::move(attrs));
}

Status convert_onehot(ConversionContext& ctx) {
  HXRT_ASSIGN_OR_RETURN(const std::vector<double> depth, ctx.require_floats(1, "depth"));
  if (depth.size() != 1 || !std::isfinite(depth[0])) return ctx.error("input 'depth' must hold one finite value");
  graph::AttributeMap attrs;
  if (const graph::Attribute* axis = ctx.attrs().find("axis")) attrs.set("axis", *axis);
  return ctx.emit("OneHot",
                  {ctx.input(0), ctx.add_int_scalar(static_cast<int64_t>(depth[0]), "depth"), ctx.input(2)},
                  {ctx.output(0)}, std::move(attrs));
}

// Shape and Size of an input whose shape is static at import are constants (so that Reshapes fed by Shape -> Gather
// -> Concat chains see their target at import); otherwise the hxrt op computes them at run time.
ConverterDef def(std::string op_type, int since, int end, ConvertFn convert, std::string doc) {
  return ConverterDef{.op_type = std::move(op_type),
                      .since_version = since,
                      .end_version = end,
                      .convert = std::move(convert),
                      .doc = std::move(doc)};
}

}  // namespace

Status register_shape_ops_converters(ConverterRegistry& registry) {
  const std::vector<ConverterDef> defs = {
      def("Reshape", 1, 4, convert_reshape_v1, "Reshape(14) with attribute 'shape' as a constant input"),
      def("Reshape", 5, kMax, convert_reshape, "Reshape(14) with the required constant 'shape' (allowzero from 14)"),
      def("Squeeze", 1, kMax, convert_squeeze, "Reshape(14) to the input's shape without the squeezed axes"),
      def("Unsqueeze", 1, kMax, convert_unsqueeze, "Reshape(14) to the input's shape with axes of 1 inserted"),
      def("Flatten", 1, kMax, convert_flatten, "Reshape(14) to [prod(dims[:axis]), prod(dims[axis:])]"),
      def("Identity", 1, kMax, convert_identity, "a rename of the input"),
      def("Expand", 8, kMax, with_constant_ints("Expand", "shape"), "Expand(13) with a constant 'shape'"),
      def("Tile", 6, kMax, with_constant_ints("Tile", "repeats"), "Tile(13) with constant 'repeats'"),
      def("Pad", 2, 10, convert_pad_v2, "Pad(13) with attributes 'pads' and 'value' as constant inputs"),
      def("Pad", 11, kMax, convert_pad, "Pad(13) with constant 'pads' ('axes' of opset 18 expanded)"),
      def("Split", 2, kMax, convert_split,
          "Split(13) with constant sizes from the attribute (< 13), the input, or num_outputs (18)"),
      def("DepthToSpace", 1, kMax, same_op("DepthToSpace", {"blocksize", "mode"}), "DepthToSpace(13); DCR before 11"),
      def("SpaceToDepth", 1, kMax, same_op("SpaceToDepth", {"blocksize"}), "SpaceToDepth(13)"),
      def("Trilu", 14, kMax, same_op("Trilu", {"upper"}), "Trilu(14)"),
      def("Range", 11, kMax, convert_range, "Range(11) with constant start, limit and delta"),
      def("ConstantOfShape", 9, kMax, convert_constant_of_shape, "ConstantOfShape(9) with a constant shape"),
      def("OneHot", 11, kMax, convert_onehot, "OneHot(11) with a constant depth (as i64)"),
      // The importer folds them when the input's shape is static (Note [Shape values] in importer.cc).
      def("Shape", 1, kMax, same_op("Shape", {"start", "end"}), "Shape(15); a constant when the input's shape is static"),
      def("Size", 1, kMax, same_op("Size", {}), "Size(13); a constant when the input's shape is static"),
  };
  for (const ConverterDef& d : defs) HXRT_RETURN_IF_ERROR(registry.add(d));
  return ok_status();
}

}  // namespace hxrt::formats::onnx
