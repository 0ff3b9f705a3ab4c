// ONNX converters of the reduce family (converter.h): Reduce*, ArgMax/ArgMin, TopK, Softmax/LogSoftmax/Hardmax,
// LayerNormalization, BatchNormalization (inference), InstanceNormalization, LRN, MeanVarianceNormalization.
//
// Note [Softmax before opset 13]
// Softmax, LogSoftmax and Hardmax before opset 13 view the input as 2-D, [prod(dims[:axis]), prod(dims[axis:])]
// (default axis 1), and normalise each row as a whole. With axis the last dim that is the opset-13 op; otherwise the
// converter emits Reshape to [-1, prod(dims[axis:])], the op over axis 1 and Reshape back. Reshape's shapes are
// constants, so dims[axis:] must be static and at most one of dims[:axis] symbolic (it becomes the -1).

#include <algorithm>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "formats/onnx/converter.h"
#include "hxrt/ops/params/reduce.h"

namespace hxrt::formats::onnx {

namespace {

// The named attributes the ONNX node has, as they are.
graph::AttributeMap pick(const ConversionContext& ctx, std::initializer_list<std::string_view> names) {
  graph::AttributeMap out;
  for (const std::string_view name : names) {
    if (const graph::Attribute* attr = ctx.attrs().find(name)) out.set(std::string(name), *attr);
  }
  return out;
}

// The ONNX outputs up to the last one present; an omitted one in between becomes a temp.
std::vector<std::string> present_outputs(ConversionContext& ctx) {
  size_t count = 0;
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    if (ctx.has_output(i)) count = i + 1;
  }
  std::vector<std::string> outputs;
  for (size_t i = 0; i < count; ++i) {
    outputs.push_back(ctx.has_output(i) ? ctx.output(i) : ctx.temp(fmt::format("unused_output_{}", i)));
  }
  return outputs;
}

// ---- Reduce* ----

// Opsets where `axes` is an attribute (ReduceSum before 13, the others before 18): it becomes the constant input.
Status convert_reduce_axes_attribute(ConversionContext& ctx) {
  std::vector<std::string> inputs = {ctx.input(0)};
  if (ctx.attrs().has("axes")) {
    Result<std::vector<int64_t>> axes = ctx.attrs().get_ints("axes");
    if (!axes.ok()) return ctx.error(fmt::format("attribute 'axes': {}", axes.status().message()));
    if (!axes->empty()) inputs.push_back(ctx.add_ints(*axes, "axes"));
  }
  return ctx.emit(ctx.node().op_type, std::move(inputs), {ctx.output(0)}, pick(ctx, {"keepdims"}));
}

// Opsets where `axes` is an optional input: its value must be known (Note [Values known at import]).
Status convert_reduce_axes_input(ConversionContext& ctx) {
  std::vector<std::string> inputs = {ctx.input(0)};
  if (ctx.has_input(1)) {
    HXRT_ASSIGN_OR_RETURN(const std::vector<int64_t> axes, ctx.require_ints(1, "axes"));
    if (!axes.empty()) inputs.push_back(ctx.add_ints(axes, "axes"));
  }
  return ctx.emit(ctx.node().op_type, std::move(inputs), {ctx.output(0)},
                  pick(ctx, {"keepdims", "noop_with_empty_axes"}));
}

Status convert_arg_reduce(ConversionContext& ctx) {
  return ctx.emit(ctx.node().op_type, {ctx.input(0)}, {ctx.output(0)},
                  pick(ctx, {"axis", "keepdims", "select_last_index"}));
}

// ---- TopK ----

Status emit_topk(ConversionContext& ctx, int64_t k, graph::AttributeMap attrs) {
  std::vector<std::string> outputs = present_outputs(ctx);
  if (outputs.empty()) outputs.push_back(ctx.temp("values"));
  return ctx.emit("TopK", {ctx.input(0), ctx.add_ints(std::vector<int64_t>{k}, "k")}, std::move(outputs),
                  std::move(attrs));
}

Status convert_topk_v1(ConversionContext& ctx) {
  Result<int64_t> k = ctx.attrs().get_int("k");
  if (!k.ok()) return ctx.error(fmt::format("attribute 'k': {}", k.status().message()));
  return emit_topk(ctx, *k, pick(ctx, {"axis"}));
}

Status convert_topk_k_input(ConversionContext& ctx) {
  HXRT_ASSIGN_OR_RETURN(const std::vector<int64_t> k, ctx.require_ints(1, "K"));
  if (k.size() != 1) return ctx.error(fmt::format("input 'K' must hold one value, got {}", k.size()));
  return emit_topk(ctx, k[0], pick(ctx, {"axis", "largest", "sorted"}));
}

// ---- Softmax, LogSoftmax, Hardmax ----

Status convert_softmax_v13(ConversionContext& ctx) {
  return ctx.emit(ctx.node().op_type, {ctx.input(0)}, {ctx.output(0)}, pick(ctx, {"axis"}));
}

// Note [Softmax before opset 13].
Status convert_softmax_v1(ConversionContext& ctx) {
  const std::string& op = ctx.node().op_type;
  const graph::TensorDesc* desc = ctx.input_desc(0);
  if (desc == nullptr) return ctx.unsupported("the rank of input 'input' must be known to coerce it to 2-D");
  const std::vector<graph::Dim>& dims = desc->shape.dims();
  const auto rank = static_cast<int64_t>(dims.size());
  Result<int64_t> axis_attr = ctx.attrs().get_int("axis", 1);
  if (!axis_attr.ok()) return ctx.error(fmt::format("attribute 'axis': {}", axis_attr.status().message()));
  int64_t axis = *axis_attr;
  if (rank == 0 || axis < -rank || axis >= rank) {
    return ctx.error(fmt::format("attribute 'axis' = {} is out of range for input {}", axis, desc->shape.to_string()));
  }
  if (axis < 0) axis += rank;
  graph::AttributeMap attrs;
  attrs.set("axis", int64_t{-1});
  if (axis == rank - 1) return ctx.emit(op, {ctx.input(0)}, {ctx.output(0)}, std::move(attrs));

  int64_t row = 1;  // prod(dims[axis:])
  for (int64_t d = axis; d < rank; ++d) {
    const graph::Dim& dim = dims[static_cast<size_t>(d)];
    if (!dim.is_static()) {
      return ctx.unsupported(fmt::format("coercing {} to 2-D at axis {} needs static dims from the axis on",
                                         desc->shape.to_string(), axis));
    }
    row *= dim.value();
  }
  if (row == 0) return ctx.emit(op, {ctx.input(0)}, {ctx.output(0)}, std::move(attrs));  // empty either way
  std::vector<int64_t> back;  // the input shape, its one symbolic dim as -1
  for (const graph::Dim& dim : dims) {
    if (dim.is_static()) {
      back.push_back(dim.value());
    } else if (std::find(back.begin(), back.end(), -1) == back.end()) {
      back.push_back(-1);
    } else {
      return ctx.unsupported(fmt::format("coercing {} to 2-D needs at most one symbolic dim", desc->shape.to_string()));
    }
  }
  const std::string flat = ctx.temp("flat");
  const std::string flat_out = ctx.temp("flat_out");
  const std::string shape_2d = ctx.add_ints(std::vector<int64_t>{-1, row}, "shape_2d");
  HXRT_RETURN_IF_ERROR(ctx.emit("Reshape", {ctx.input(0), shape_2d}, {flat}));
  HXRT_RETURN_IF_ERROR(ctx.emit(op, {flat}, {flat_out}, std::move(attrs)));
  return ctx.emit("Reshape", {flat_out, ctx.add_ints(back, "shape")}, {ctx.output(0)});
}

// ---- Normalisations ----

Status convert_layer_norm(ConversionContext& ctx) {
  std::vector<std::string> inputs = {ctx.input(0), ctx.input(1)};
  if (ctx.has_input(2)) inputs.push_back(ctx.input(2));
  return ctx.emit("LayerNormalization", std::move(inputs), present_outputs(ctx),
                  pick(ctx, {"axis", "epsilon", "stash_type"}));
}

// Note [BatchNormalization in training mode]
// From opset 14, training_mode = 1 normalises with the batch's statistics over every axis but 1 (population
// variance) and outputs running_mean = input_mean * momentum + mean * (1 - momentum), and running_var likewise.
// That is exactly a decomposition into existing ops: ReduceMean for the mean, Sub, Mul and ReduceMean for the
// variance, BatchNormalization (inference) with those statistics for Y, and Mul/Add for the running statistics.
Status convert_batch_norm_training(ConversionContext& ctx) {
  const graph::TensorDesc* desc = ctx.input_desc(0);
  if (desc == nullptr) return ctx.unsupported("training_mode = 1 needs the rank of input 'X'");
  if (desc->shape.rank() < 2)
    return ctx.error(fmt::format("input 'X' {} must have rank >= 2", desc->shape.to_string()));
  Result<double> momentum = ctx.attrs().get_float("momentum", 0.9);
  if (!momentum.ok()) return ctx.error(fmt::format("attribute 'momentum': {}", momentum.status().message()));
  std::vector<int64_t> axes = {0};
  for (int64_t d = 2; d < desc->shape.rank(); ++d) axes.push_back(d);
  const std::string axes_value = ctx.add_ints(axes, "axes");
  graph::AttributeMap keep;
  keep.set("keepdims", int64_t{1});
  graph::AttributeMap drop;
  drop.set("keepdims", int64_t{0});
  const std::string x = ctx.input(0);
  const std::string mean_kept = ctx.temp("batch_mean_kept");  // [1, C, 1, ...]
  const std::string centered = ctx.temp("centered");
  const std::string squares = ctx.temp("squares");
  const std::string mean = ctx.temp("batch_mean");  // [C]
  const std::string var = ctx.temp("batch_var");    // [C]
  HXRT_RETURN_IF_ERROR(ctx.emit("ReduceMean", {x, axes_value}, {mean_kept}, keep));
  HXRT_RETURN_IF_ERROR(ctx.emit("Sub", {x, mean_kept}, {centered}));
  HXRT_RETURN_IF_ERROR(ctx.emit("Mul", {centered, centered}, {squares}));
  HXRT_RETURN_IF_ERROR(ctx.emit("ReduceMean", {squares, axes_value}, {var}, drop));
  HXRT_RETURN_IF_ERROR(ctx.emit("ReduceMean", {x, axes_value}, {mean}, drop));
  HXRT_RETURN_IF_ERROR(ctx.emit("BatchNormalization", {x, ctx.input(1), ctx.input(2), mean, var}, {ctx.output(0)},
                                pick(ctx, {"epsilon"})));
  const std::string keep_factor = ctx.add_float_scalar(static_cast<float>(*momentum), "momentum");
  const std::string new_factor = ctx.add_float_scalar(static_cast<float>(1.0 - *momentum), "one_minus_momentum");
  const std::pair<size_t, std::string> running[] = {{1, mean}, {2, var}};
  for (const auto& [output, batch] : running) {
    if (!ctx.has_output(output)) continue;
    const std::string old_part = ctx.temp("running_old");
    const std::string new_part = ctx.temp("running_new");
    HXRT_RETURN_IF_ERROR(ctx.emit("Mul", {ctx.input(output + 2), keep_factor}, {old_part}));
    HXRT_RETURN_IF_ERROR(ctx.emit("Mul", {batch, new_factor}, {new_part}));
    HXRT_RETURN_IF_ERROR(ctx.emit("Add", {old_part, new_part}, {ctx.output(output)}));
  }
  return ok_status();
}

// BatchNormalization: Y from the given mean and variance (inference); training_mode = 1 from opset 14 is
// decomposed (Note [BatchNormalization in training mode]); the training outputs of older opsets are unsupported.
Status convert_batch_norm(ConversionContext& ctx) {
  if (ctx.attrs().has("training_mode")) {
    Result<int64_t> training = ctx.attrs().get_int("training_mode");
    if (!training.ok()) return ctx.error(fmt::format("attribute 'training_mode': {}", training.status().message()));
    if (*training != 0) return convert_batch_norm_training(ctx);
  }
  if (ctx.attrs().has("spatial")) {
    Result<int64_t> spatial = ctx.attrs().get_int("spatial");
    if (!spatial.ok()) return ctx.error(fmt::format("attribute 'spatial': {}", spatial.status().message()));
    if (*spatial != 1) return ctx.unsupported("spatial = 0 (per-activation statistics) is not supported");
  }
  for (size_t i = 1; i < ctx.num_outputs(); ++i) {
    if (ctx.has_output(i)) {
      return ctx.unsupported(
          fmt::format("output {} (running or saved mean/variance) is a training output; only Y is supported outside "
                      "training_mode = 1 (opset 14+)",
                      i));
    }
  }
  return ctx.emit("BatchNormalization", {ctx.input(0), ctx.input(1), ctx.input(2), ctx.input(3), ctx.input(4)},
                  {ctx.output(0)}, pick(ctx, {"epsilon"}));
}

Status convert_instance_norm(ConversionContext& ctx) {
  return ctx.emit("InstanceNormalization", {ctx.input(0), ctx.input(1), ctx.input(2)}, {ctx.output(0)},
                  pick(ctx, {"epsilon"}));
}

Status convert_lrn(ConversionContext& ctx) {
  return ctx.emit("LRN", {ctx.input(0)}, {ctx.output(0)}, pick(ctx, {"alpha", "beta", "bias", "size"}));
}

Status convert_mvn(ConversionContext& ctx) {
  return ctx.emit("MeanVarianceNormalization", {ctx.input(0)}, {ctx.output(0)}, pick(ctx, {"axes"}));
}

}  // namespace

Status register_reduce_converters(ConverterRegistry& registry) {
  auto add = [&](std::string op, int since, int end, ConvertFn fn, std::string doc) {
    return registry.add(ConverterDef{.op_type = std::move(op),
                                     .since_version = since,
                                     .end_version = end,
                                     .convert = std::move(fn),
                                     .doc = std::move(doc)});
  };
  constexpr int kLast = ops::kMaxOpVersion;
  for (const ops::ReduceKind kind : ops::kReduceKinds) {
    const std::string op(ops::reduce_op_type(kind));
    const int input_since = kind == ops::ReduceKind::kSum ? 13 : 18;
    HXRT_RETURN_IF_ERROR(add(op, 1, input_since - 1, convert_reduce_axes_attribute,
                             fmt::format("{} with attribute 'axes' as the constant input", op)));
    HXRT_RETURN_IF_ERROR(add(op, input_since, kLast, convert_reduce_axes_input,
                             fmt::format("{} with input 'axes' (its value known at import)", op)));
  }
  for (const char* op : {"ArgMax", "ArgMin"}) {
    HXRT_RETURN_IF_ERROR(add(op, 1, kLast, convert_arg_reduce, fmt::format("{}(13); select_last_index from 12", op)));
  }
  HXRT_RETURN_IF_ERROR(add("TopK", 1, 9, convert_topk_v1, "TopK(11) with attribute 'k' as the constant input K"));
  HXRT_RETURN_IF_ERROR(add("TopK", 10, 10, convert_topk_k_input, "TopK(11), largest and sorted at their defaults"));
  HXRT_RETURN_IF_ERROR(add("TopK", 11, kLast, convert_topk_k_input, "TopK(11), K known at import"));
  for (const char* op : {"Softmax", "LogSoftmax", "Hardmax"}) {
    HXRT_RETURN_IF_ERROR(add(op, 1, 12, convert_softmax_v1,
                             fmt::format("{}(13) over the input coerced to 2-D at axis (Reshape, op, Reshape)", op)));
    HXRT_RETURN_IF_ERROR(add(op, 13, kLast, convert_softmax_v13, fmt::format("{}(13)", op)));
  }
  HXRT_RETURN_IF_ERROR(add("LayerNormalization", 17, kLast, convert_layer_norm, "LayerNormalization(17)"));
  const std::pair<int, int> bn_ranges[] = {{6, 6}, {7, 8}, {9, 13}, {14, 14}, {15, kLast}};
  for (const auto& [since, end] : bn_ranges) {
    HXRT_RETURN_IF_ERROR(add("BatchNormalization", since, end, convert_batch_norm,
                             since >= 14 ? "BatchNormalization(15); training_mode = 1 as ReduceMean, Sub, Mul, "
                                           "BatchNormalization, Mul, Add"
                                         : "BatchNormalization(15) in inference: Y only"));
  }
  HXRT_RETURN_IF_ERROR(add("InstanceNormalization", 1, kLast, convert_instance_norm, "InstanceNormalization(6)"));
  HXRT_RETURN_IF_ERROR(add("LRN", 1, kLast, convert_lrn, "LRN(13)"));
  return add("MeanVarianceNormalization", 9, kLast, convert_mvn, "MeanVarianceNormalization(13)");
}

}  // namespace hxrt::formats::onnx
