// ONNX converters of the sequence family (converter.h): RNN GRU LSTM DFT STFT Det NonMaxSuppression
// NegativeLogLikelihoodLoss SoftmaxCrossEntropyLoss Dropout, and the linear ops MatMul and Gemm.

#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "formats/onnx/converter.h"

namespace hxrt::formats::onnx {

namespace {

// The node's outputs up to the last one present; an omitted one before it (hxrt outputs are a prefix) and an
// omitted first output get a temp name.
std::vector<std::string> output_prefix(ConversionContext& ctx, std::initializer_list<std::string_view> names) {
  size_t count = 1;
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    if (ctx.has_output(i)) count = i + 1;
  }
  std::vector<std::string> outputs;
  auto name = names.begin();
  for (size_t i = 0; i < count; ++i, ++name) {
    outputs.push_back(ctx.has_output(i) ? ctx.output(i) : ctx.temp(name != names.end() ? *name : "unused"));
  }
  return outputs;
}

// Input `i` as an initializer holding its value, which the hxrt op needs at plan time; "" when omitted.
Result<std::string> constant_input(ConversionContext& ctx, size_t i, std::string_view what) {
  if (!ctx.has_input(i)) return std::string();
  HXRT_ASSIGN_OR_RETURN(graph::TensorValue value, ctx.require_constant(i, what));
  return ctx.add_constant(std::move(value), what);
}

// An integer scalar input as an i64 scalar initializer; "" when omitted.
Result<std::string> constant_int_input(ConversionContext& ctx, size_t i, std::string_view what) {
  if (!ctx.has_input(i)) return std::string();
  HXRT_ASSIGN_OR_RETURN(const std::vector<int64_t> values, ctx.require_ints(i, what));
  if (values.size() != 1) return ctx.error(fmt::format("input '{}' must hold one value, got {}", what, values.size()));
  return ctx.add_int_scalar(values[0], what);
}

// ---- Linear -----------------------------------------------------------------------------------------------------

Status convert_matmul(ConversionContext& ctx) {
  return ctx.emit("MatMul", {ctx.input(0), ctx.input(1)}, {ctx.output(0)});
}

// Gemm at every opset: hxrt's Gemm broadcasts C (opset 1-6 asked for that with `broadcast`, and without it C had
// the full shape, which broadcasting reads the same way) and takes it optional (required at opset 7-10).
ConvertFn gemm_converter(bool c_required) {
  return [c_required](ConversionContext& ctx) -> Status {
    if (c_required && !ctx.has_input(2)) return ctx.error("input 'C' is required at this opset");
    std::vector<std::string> inputs = {ctx.input(0), ctx.input(1)};
    if (ctx.has_input(2)) inputs.push_back(ctx.input(2));
    return ctx.emit("Gemm", std::move(inputs), {ctx.output(0)}, attrs_without(ctx, {"broadcast"}));
  };
}

// ---- Recurrent --------------------------------------------------------------------------------------------------

// RNN/GRU/LSTM: opset 1-6 had `output_sequence` (Y is optional anyway) and no layout (0); later opsets differ only
// in types and the layout attribute (14), whose default is the old behaviour.
ConvertFn recurrent_converter(std::string op_type) {
  return [op_type](ConversionContext& ctx) -> Status {
    std::vector<std::string> outputs =
        op_type == "LSTM" ? output_prefix(ctx, {"Y", "Y_h", "Y_c"}) : output_prefix(ctx, {"Y", "Y_h"});
    return ctx.emit(op_type, all_inputs(ctx), std::move(outputs), attrs_without(ctx, {"output_sequence"}));
  };
}

// ---- Spectral ---------------------------------------------------------------------------------------------------

Status convert_dft(ConversionContext& ctx) {
  HXRT_ASSIGN_OR_RETURN(const std::string dft_length, constant_int_input(ctx, 1, "dft_length"));
  std::vector<std::string> inputs = {ctx.input(0)};
  if (!dft_length.empty()) inputs.push_back(dft_length);
  return ctx.emit("DFT", std::move(inputs), {ctx.output(0)}, ctx.attrs());
}

Status convert_stft(ConversionContext& ctx) {
  // Both asked for before either failure returns (one bind-time import learns both).
  Result<std::string> frame_step = constant_int_input(ctx, 1, "frame_step");
  Result<std::string> frame_length = constant_int_input(ctx, 3, "frame_length");
  if (!frame_step.ok()) return frame_step.status();
  if (!frame_length.ok()) return frame_length.status();
  if (frame_step->empty()) return ctx.error("input 'frame_step' is required");
  std::vector<std::string> inputs = {ctx.input(0), *frame_step, ctx.input(2)};
  if (!frame_length->empty()) inputs.push_back(*frame_length);
  return ctx.emit("STFT", std::move(inputs), {ctx.output(0)}, ctx.attrs());
}

// ---- NonMaxSuppression ------------------------------------------------------------------------------------------

// Every input is a value the output's length depends on: all must be known when the graph is planned. Each is
// asked for before returning a failure, so that one bind-time import learns every value it needs.
Status convert_nms(ConversionContext& ctx) {
  constexpr std::string_view kNames[] = {"boxes", "scores", "max_output_boxes_per_class", "iou_threshold",
                                         "score_threshold"};
  std::vector<std::string> inputs;
  Status first_failure = ok_status();
  for (size_t i = 0; i < ctx.num_inputs() && i < std::size(kNames); ++i) {
    Result<std::string> name = constant_input(ctx, i, kNames[i]);
    if (!name.ok()) {
      if (first_failure.ok()) first_failure = name.status();
      continue;
    }
    inputs.push_back(std::move(name).value());
  }
  HXRT_RETURN_IF_ERROR(first_failure);
  return ctx.emit("NonMaxSuppression", std::move(inputs), {ctx.output(0)}, ctx.attrs());
}

// ---- Losses -----------------------------------------------------------------------------------------------------

ConvertFn loss_converter(std::string op_type) {
  return [op_type](ConversionContext& ctx) -> Status {
    std::vector<std::string> outputs =
        op_type == "SoftmaxCrossEntropyLoss" ? output_prefix(ctx, {"loss", "log_prob"}) : output_prefix(ctx, {"loss"});
    return ctx.emit(op_type, all_inputs(ctx), std::move(outputs), ctx.attrs());
  };
}

// ---- Dropout ----------------------------------------------------------------------------------------------------

// Opset 12+: ratio and training_mode are inputs; the op runs in inference unless training_mode is true.
Status convert_dropout(ConversionContext& ctx) {
  return ctx.emit("Dropout", all_inputs(ctx), output_prefix(ctx, {"output", "mask"}), ctx.attrs());
}

// Opset 1-11: `ratio` an attribute, inference when `is_test` (opset 1-6) is set; the mask is bool from opset 10,
// of the data's type before (a Cast of the bool mask).
Status convert_dropout_old(ConversionContext& ctx) {
  if (ctx.opset() <= 6) {
    Result<int64_t> is_test = ctx.attrs().get_int("is_test", 0);
    if (!is_test.ok()) return is_test.status();
    Result<double> ratio = ctx.attrs().get_float("ratio", 0.5);
    if (!ratio.ok()) return ratio.status();
    if (*is_test == 0 && *ratio != 0.0) {
      return ctx.unsupported("training mode (is_test = 0) with ratio > 0; only inference is supported");
    }
  }
  if (!ctx.has_output(1)) return ctx.emit("Dropout", {ctx.input(0)}, {ctx.output(0)});
  if (ctx.opset() >= 10) return ctx.emit("Dropout", {ctx.input(0)}, {ctx.output(0), ctx.output(1)});
  const std::string mask = ctx.temp("mask");
  HXRT_RETURN_IF_ERROR(ctx.emit("Dropout", {ctx.input(0)}, {ctx.output(0), mask}));
  graph::AttributeMap cast;
  cast.set("to", int64_t{1});  // TensorProto FLOAT
  return ctx.emit("Cast", {mask}, {ctx.output(1)}, std::move(cast));
}

}  // namespace

Status register_sequence_converters(ConverterRegistry& registry) {
  constexpr int kMax = ops::kMaxOpVersion;
  HXRT_RETURN_IF_ERROR(registry.add(make_converter("MatMul", 1, kMax, convert_matmul, "MatMul(13)")));
  HXRT_RETURN_IF_ERROR(
      registry.add(make_converter("Gemm", 1, 6, gemm_converter(true), "Gemm(13); `broadcast` dropped (C always broadcasts)")));
  HXRT_RETURN_IF_ERROR(registry.add(make_converter("Gemm", 7, 10, gemm_converter(true), "Gemm(13) with the required C")));
  HXRT_RETURN_IF_ERROR(registry.add(make_converter("Gemm", 11, kMax, gemm_converter(false), "Gemm(13)")));

  for (const char* op : {"RNN", "GRU", "LSTM"}) {
    HXRT_RETURN_IF_ERROR(registry.add(
        make_converter(op, 1, 6, recurrent_converter(op), fmt::format("{}(14); `output_sequence` dropped", op))));
    HXRT_RETURN_IF_ERROR(registry.add(make_converter(op, 7, kMax, recurrent_converter(op), fmt::format("{}(14)", op))));
  }
  HXRT_RETURN_IF_ERROR(
      registry.add(make_converter("DFT", 17, 19, convert_dft, "DFT(17) with dft_length a constant (needed at plan time)")));
  HXRT_RETURN_IF_ERROR(registry.add(
      make_converter("STFT", 17, kMax, convert_stft, "STFT(17) with frame_step and frame_length constants (plan time)")));
  HXRT_RETURN_IF_ERROR(registry.add(make_converter("Det", 11, kMax, [](ConversionContext& ctx) {
    return ctx.emit("Det", {ctx.input(0)}, {ctx.output(0)});
  }, "Det(11)")));
  HXRT_RETURN_IF_ERROR(registry.add(
      make_converter("NonMaxSuppression", 10, kMax, convert_nms, "NonMaxSuppression(11) on constants (output length)")));
  HXRT_RETURN_IF_ERROR(registry.add(make_converter("NegativeLogLikelihoodLoss", 12, kMax,
                                        loss_converter("NegativeLogLikelihoodLoss"), "NegativeLogLikelihoodLoss(13)")));
  HXRT_RETURN_IF_ERROR(registry.add(make_converter("SoftmaxCrossEntropyLoss", 12, kMax, loss_converter("SoftmaxCrossEntropyLoss"),
                                        "SoftmaxCrossEntropyLoss(13)")));
  HXRT_RETURN_IF_ERROR(
      registry.add(make_converter("Dropout", 1, 11, convert_dropout_old, "Dropout(13) in inference; an f32 mask Cast before 10")));
  return registry.add(make_converter("Dropout", 12, kMax, convert_dropout, "Dropout(13)"));
}

}  // namespace hxrt::formats::onnx
