// Schemas of the recurrent, spectral and remaining ops (docs/onnx_ops/sequence.md): RNN GRU LSTM DFT STFT Det
// NonMaxSuppression NegativeLogLikelihoodLoss SoftmaxCrossEntropyLoss Dropout.
//
// Inputs whose values decide output shapes (DFT's dft_length, STFT's frame_step and frame_length, every input of
// NonMaxSuppression) must be initializers when the graph is planned; inference reads them and names the input
// when one is not.

#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "hxrt/ops/params/sequence.h"
#include "ops/schemas/schemas.h"

namespace hxrt::ops::schemas {

namespace {

// The weight of constant input `i`, checked to hold its desc's static element count; the error names the input.
Result<const graph::WeightData*> constant_weight(InferenceContext& ctx, size_t i, std::string_view name,
                                                 int64_t* elements) {
  HXRT_ASSIGN_OR_RETURN(const graph::WeightData* weight, require_constant(ctx, i, name));
  const graph::TensorDesc& desc = ctx.input(i);
  int64_t count = 1;
  for (const graph::Dim& dim : desc.shape.dims()) {
    if (!dim.is_static()) return ctx.error(fmt::format("constant input '{}' {} has a symbolic dim", name, desc.to_string()));
    count *= dim.value();
  }
  const uint64_t element = dtype_info(desc.dtype).block_bytes;
  if (weight->size != static_cast<uint64_t>(count) * element) {
    return ctx.error(fmt::format("constant input '{}' {} holds {} bytes", name, desc.to_string(), weight->size));
  }
  *elements = count;
  return weight;
}

// The values of constant integer input `i` (i32 or i64, any rank).
Result<std::vector<int64_t>> constant_ints(InferenceContext& ctx, size_t i, std::string_view name) {
  int64_t count = 0;
  HXRT_ASSIGN_OR_RETURN(const graph::WeightData* weight, constant_weight(ctx, i, name, &count));
  const DType dtype = ctx.input(i).dtype;
  if (dtype != DType::kI64 && dtype != DType::kI32) {
    return ctx.error(fmt::format("input '{}' must be i32 or i64, got {}", name, dtype));
  }
  return weight_ints(*weight, dtype, static_cast<size_t>(count));
}

// The values of constant f32 input `i`.
Result<std::vector<float>> constant_floats(InferenceContext& ctx, size_t i, std::string_view name) {
  int64_t count = 0;
  HXRT_ASSIGN_OR_RETURN(const graph::WeightData* weight, constant_weight(ctx, i, name, &count));
  if (ctx.input(i).dtype != DType::kF32) {
    return ctx.error(fmt::format("input '{}' must be f32, got {}", name, ctx.input(i).dtype));
  }
  std::vector<float> values(static_cast<size_t>(count));
  if (count > 0) std::memcpy(values.data(), weight->data, values.size() * sizeof(float));
  return values;
}

// The single value of a constant integer input (a scalar or a one-element tensor).
Result<int64_t> constant_int_scalar(InferenceContext& ctx, size_t i, std::string_view name) {
  HXRT_ASSIGN_OR_RETURN(const std::vector<int64_t> values, constant_ints(ctx, i, name));
  if (values.size() != 1) return ctx.error(fmt::format("input '{}' must hold one value, got {}", name, values.size()));
  return values[0];
}

Result<Shape> static_shape(InferenceContext& ctx, size_t i, std::string_view name) {
  std::vector<int64_t> dims;
  for (const graph::Dim& dim : ctx.input(i).shape.dims()) {
    if (!dim.is_static()) {
      return ctx.error(fmt::format("input '{}' {} must have a static shape", name, ctx.input(i).to_string()));
    }
    dims.push_back(dim.value());
  }
  return Shape::make(dims);
}

// ---- RNN / GRU / LSTM -------------------------------------------------------------------------------------------

Status require_shape(InferenceContext& ctx, size_t i, std::string_view name, const std::vector<graph::Dim>& dims) {
  const graph::SymShape& shape = ctx.input(i).shape;
  if (shape.rank() != static_cast<int>(dims.size())) {
    return ctx.error(fmt::format("input '{}' {} must have rank {}", name, shape.to_string(), dims.size()));
  }
  for (size_t d = 0; d < dims.size(); ++d) {
    HXRT_RETURN_IF_ERROR(ctx.require_equal(shape.dim(static_cast<int>(d)), dims[d],
                                           fmt::format("dim {} of input '{}' {}", d, name, shape.to_string())));
  }
  return ok_status();
}

Status infer_recurrent(InferenceContext& ctx, RecurrentKind kind) {
  HXRT_ASSIGN_OR_RETURN(const RecurrentParams params, parse_recurrent_params(ctx.node(), kind));
  const graph::SymShape& x = ctx.input(0).shape;
  if (x.rank() != 3) return ctx.error(fmt::format("input 'X' {} must have rank 3", x.to_string()));
  const graph::Dim seq = params.batch_major ? x.dim(1) : x.dim(0);
  const graph::Dim batch = params.batch_major ? x.dim(0) : x.dim(1);
  const graph::Dim input_size = x.dim(2);
  const graph::Dim dirs = params.num_directions;
  const graph::Dim hidden = params.hidden_size;
  const graph::Dim gate_rows = hidden * recurrent_gates(kind);
  HXRT_RETURN_IF_ERROR(require_shape(ctx, 1, "W", {dirs, gate_rows, input_size}));
  HXRT_RETURN_IF_ERROR(require_shape(ctx, 2, "R", {dirs, gate_rows, hidden}));
  if (ctx.has_input(3)) HXRT_RETURN_IF_ERROR(require_shape(ctx, 3, "B", {dirs, gate_rows * 2}));
  if (ctx.has_input(4)) HXRT_RETURN_IF_ERROR(require_shape(ctx, 4, "sequence_lens", {batch}));
  const std::vector<graph::Dim> state =
      params.batch_major ? std::vector<graph::Dim>{batch, dirs, hidden} : std::vector<graph::Dim>{dirs, batch, hidden};
  if (ctx.has_input(5)) HXRT_RETURN_IF_ERROR(require_shape(ctx, 5, "initial_h", state));
  if (kind == RecurrentKind::kLstm) {
    if (ctx.has_input(6)) HXRT_RETURN_IF_ERROR(require_shape(ctx, 6, "initial_c", state));
    if (ctx.has_input(7)) HXRT_RETURN_IF_ERROR(require_shape(ctx, 7, "P", {dirs, hidden * 3}));
  }
  const DType dtype = ctx.input(0).dtype;
  const graph::SymShape y = params.batch_major ? graph::SymShape{batch, seq, dirs, hidden}
                                               : graph::SymShape{seq, dirs, batch, hidden};
  ctx.set_output(0, graph::TensorDesc{dtype, y});
  for (size_t i = 1; i < ctx.num_outputs(); ++i) ctx.set_output(i, graph::TensorDesc{dtype, graph::SymShape(state)});
  return ok_status();
}

OpSchema recurrent_schema(RecurrentKind kind) {
  OpSchema schema;
  schema.op_type = std::string(recurrent_kind_name(kind));
  schema.since_version = 14;
  schema.inputs = {{"X"},
                   {"W"},
                   {"R"},
                   {.name = "B", .optional = true},
                   {.name = "sequence_lens", .type_var = "T1", .optional = true},
                   {.name = "initial_h", .optional = true}};
  schema.outputs = {{"Y"}, {"Y_h"}};
  schema.attrs = {{"activation_alpha", graph::AttrType::kFloats, false, std::nullopt},
                  {"activation_beta", graph::AttrType::kFloats, false, std::nullopt},
                  {"activations", graph::AttrType::kStrings, false, std::nullopt},
                  {"clip", graph::AttrType::kFloat, false, std::nullopt},
                  {"direction", graph::AttrType::kString, false, graph::Attribute("forward")},
                  {"hidden_size", graph::AttrType::kInt, true, std::nullopt},
                  {"layout", graph::AttrType::kInt, false, graph::Attribute(int64_t{0})}};
  schema.type_constraints = {{"T", float_types()}, {"T1", index_types()}};
  switch (kind) {
    case RecurrentKind::kRnn:
      schema.infer = [](InferenceContext& ctx) { return infer_recurrent(ctx, RecurrentKind::kRnn); };
      schema.doc = "Elman RNN: H_t = f(X_t·Wᵀ + H_{t-1}·Rᵀ + Wb + Rb); Y [seq, dirs, batch, hidden], Y_h the last";
      break;
    case RecurrentKind::kGru:
      schema.attrs.push_back({"linear_before_reset", graph::AttrType::kInt, false, graph::Attribute(int64_t{0})});
      schema.infer = [](InferenceContext& ctx) { return infer_recurrent(ctx, RecurrentKind::kGru); };
      schema.doc = "GRU, gates z r h; Y [seq, dirs, batch, hidden], Y_h the last hidden state";
      break;
    case RecurrentKind::kLstm:
      schema.inputs.push_back({.name = "initial_c", .optional = true});
      schema.inputs.push_back({.name = "P", .optional = true});
      schema.outputs.push_back({"Y_c"});
      schema.attrs.push_back({"input_forget", graph::AttrType::kInt, false, graph::Attribute(int64_t{0})});
      schema.infer = [](InferenceContext& ctx) { return infer_recurrent(ctx, RecurrentKind::kLstm); };
      schema.doc = "LSTM, gates i o f c with peepholes P; Y [seq, dirs, batch, hidden], Y_h and Y_c the last states";
      break;
  }
  return schema;
}

// ---- DFT / STFT -------------------------------------------------------------------------------------------------

Status infer_dft(InferenceContext& ctx) {
  HXRT_ASSIGN_OR_RETURN(const DftParams params, parse_dft_params(ctx.node()));
  const graph::SymShape& x = ctx.input(0).shape;
  Result<int> axis = dft_axis(params.axis, x.rank());
  if (!axis.ok()) return ctx.error(axis.status().message());
  const graph::Dim& last = x.dim(-1);
  if (last.is_static() && last.value() != 1 && last.value() != 2) {
    return ctx.error(fmt::format("input 'input' {} must end in 1 (real) or 2 (complex)", x.to_string()));
  }
  graph::Dim length = x.dim(*axis);
  if (ctx.has_input(1)) {
    HXRT_ASSIGN_OR_RETURN(const int64_t dft_length, constant_int_scalar(ctx, 1, "dft_length"));
    if (dft_length <= 0) return ctx.error(fmt::format("input 'dft_length' must be > 0, got {}", dft_length));
    length = dft_length;
  }
  std::vector<graph::Dim> out = x.dims();
  out[static_cast<size_t>(*axis)] = params.onesided ? length / 2 + 1 : length;
  out.back() = 2;
  ctx.set_output(0, graph::TensorDesc{ctx.input(0).dtype, graph::SymShape(std::move(out))});
  return ok_status();
}

Status infer_stft(InferenceContext& ctx) {
  HXRT_ASSIGN_OR_RETURN(const StftParams params, parse_stft_params(ctx.node()));
  const graph::SymShape& signal = ctx.input(0).shape;
  if (signal.rank() != 3) {
    return ctx.error(fmt::format("input 'signal' {} must be [batch, length, 1|2]", signal.to_string()));
  }
  HXRT_ASSIGN_OR_RETURN(const int64_t frame_step, constant_int_scalar(ctx, 1, "frame_step"));
  std::optional<int64_t> frame_length;
  if (ctx.has_input(3)) {
    HXRT_ASSIGN_OR_RETURN(frame_length, constant_int_scalar(ctx, 3, "frame_length"));
  }
  if (ctx.has_input(2)) {
    const graph::SymShape& window = ctx.input(2).shape;
    if (window.rank() != 1 || !window.dim(0).is_static()) {
      return ctx.error(fmt::format("input 'window' {} must be a static [frame_length]", window.to_string()));
    }
    if (frame_length.has_value() && *frame_length != window.dim(0).value()) {
      return ctx.error(fmt::format("input 'window' {} does not match frame_length {}", window.to_string(),
                                   *frame_length));
    }
    frame_length = window.dim(0).value();
  }
  if (!frame_length.has_value()) return ctx.error("needs input 'window' or input 'frame_length'");
  if (frame_step <= 0 || *frame_length <= 0) {
    return ctx.error(fmt::format("frame_step ({}) and frame_length ({}) must be > 0", frame_step, *frame_length));
  }
  graph::Dim frames = (signal.dim(1) - *frame_length) / frame_step + 1;
  if (signal.dim(1).is_static()) {
    Result<int64_t> count = stft_frames(signal.dim(1).value(), frame_step, *frame_length);
    if (!count.ok()) return ctx.error(count.status().message());
    frames = *count;
  }
  const graph::Dim bins = params.onesided ? *frame_length / 2 + 1 : *frame_length;
  ctx.set_output(0, graph::TensorDesc{ctx.input(0).dtype, graph::SymShape{signal.dim(0), frames, bins, 2}});
  return ok_status();
}

// ---- Det --------------------------------------------------------------------------------------------------------

Status infer_det(InferenceContext& ctx) {
  const graph::SymShape& x = ctx.input(0).shape;
  if (x.rank() < 2) return ctx.error(fmt::format("input 'X' {} must be [..., M, M]", x.to_string()));
  HXRT_RETURN_IF_ERROR(ctx.require_equal(x.dim(-2), x.dim(-1), fmt::format("Det: the matrices of {} must be square",
                                                                           x.to_string())));
  ctx.set_output(0, graph::TensorDesc{ctx.input(0).dtype,
                                      graph::SymShape(std::vector<graph::Dim>(x.dims().begin(), x.dims().end() - 2))});
  return ok_status();
}

// ---- NonMaxSuppression ------------------------------------------------------------------------------------------

Status infer_nms(InferenceContext& ctx) {
  HXRT_ASSIGN_OR_RETURN(const NmsParams params, parse_nms_params(ctx.node()));
  HXRT_ASSIGN_OR_RETURN(const Shape boxes_shape, static_shape(ctx, 0, "boxes"));
  HXRT_ASSIGN_OR_RETURN(const Shape scores_shape, static_shape(ctx, 1, "scores"));
  HXRT_ASSIGN_OR_RETURN(const std::vector<float> boxes, constant_floats(ctx, 0, "boxes"));
  HXRT_ASSIGN_OR_RETURN(const std::vector<float> scores, constant_floats(ctx, 1, "scores"));
  NmsLimits limits;
  if (ctx.has_input(2)) {
    HXRT_ASSIGN_OR_RETURN(limits.max_output_boxes_per_class,
                          constant_int_scalar(ctx, 2, "max_output_boxes_per_class"));
  }
  if (ctx.has_input(3)) {
    HXRT_ASSIGN_OR_RETURN(const std::vector<float> iou, constant_floats(ctx, 3, "iou_threshold"));
    if (iou.size() != 1) return ctx.error("input 'iou_threshold' must hold one value");
    limits.iou_threshold = iou[0];
  }
  if (ctx.has_input(4)) {
    HXRT_ASSIGN_OR_RETURN(const std::vector<float> score, constant_floats(ctx, 4, "score_threshold"));
    if (score.size() != 1) return ctx.error("input 'score_threshold' must hold one value");
    limits.score_threshold = score[0];
  }
  Result<std::vector<std::array<int64_t, 3>>> selected =
      non_max_suppression(boxes, boxes_shape, scores, scores_shape, limits, params.center_point_box);
  if (!selected.ok()) return ctx.error(selected.status().message());
  ctx.set_output(0, graph::TensorDesc{DType::kI64,
                                      graph::SymShape{static_cast<int64_t>(selected->size()), int64_t{3}}});
  return ok_status();
}

// ---- Losses -----------------------------------------------------------------------------------------------------

// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: input [N, C, d...], target [N, d...], weight [C].
Status infer_loss(InferenceContext& ctx) {
  HXRT_ASSIGN_OR_RETURN(const LossParams params, parse_loss_params(ctx.node()));
  const graph::SymShape& x = ctx.input(0).shape;
  const graph::SymShape& target = ctx.input(1).shape;
  if (x.rank() < 2) return ctx.error(fmt::format("input 0 {} must be [N, C, d1, ...]", x.to_string()));
  if (target.rank() != x.rank() - 1) {
    return ctx.error(fmt::format("target {} must be [N, d1, ...] for input {}", target.to_string(), x.to_string()));
  }
  for (int d = 0; d < target.rank(); ++d) {
    const graph::Dim& expected = d == 0 ? x.dim(0) : x.dim(d + 1);
    HXRT_RETURN_IF_ERROR(ctx.require_equal(target.dim(d), expected,
                                           fmt::format("dim {} of target {} and input {}", d, target.to_string(),
                                                       x.to_string())));
  }
  if (ctx.has_input(2)) {
    const graph::SymShape& weight = ctx.input(2).shape;
    if (weight.rank() != 1) return ctx.error(fmt::format("weight {} must be [C]", weight.to_string()));
    HXRT_RETURN_IF_ERROR(ctx.require_equal(weight.dim(0), x.dim(1), "weight length and C"));
  }
  const DType dtype = ctx.input(0).dtype;
  ctx.set_output(0, graph::TensorDesc{dtype, params.reduction == LossReduction::kNone ? target : graph::SymShape{}});
  if (ctx.num_outputs() > 1) ctx.set_output(1, graph::TensorDesc{dtype, x});
  return ok_status();
}

OpSchema loss_schema(std::string op_type, std::string first_input, std::string doc) {
  OpSchema schema;
  schema.op_type = std::move(op_type);
  schema.since_version = 13;
  schema.inputs = {{std::move(first_input)},
                   {.name = "target", .type_var = "Tind"},
                   {.name = "weight", .optional = true}};
  schema.outputs = {{"loss"}};
  schema.attrs = {{"ignore_index", graph::AttrType::kInt, false, std::nullopt},
                  {"reduction", graph::AttrType::kString, false, graph::Attribute("mean")}};
  schema.type_constraints = {{"T", float_types()}, {"Tind", index_types()}};
  schema.infer = infer_loss;
  schema.doc = std::move(doc);
  return schema;
}

// ---- Dropout ----------------------------------------------------------------------------------------------------

Status infer_dropout(InferenceContext& ctx) {
  HXRT_RETURN_IF_ERROR(parse_dropout_params(ctx.node()).status());
  if (ctx.has_input(1) && ctx.input(1).shape.rank() != 0) {
    return ctx.error(fmt::format("input 'ratio' {} must be a scalar", ctx.input(1).to_string()));
  }
  if (ctx.has_input(2) && ctx.input(2).shape.rank() != 0) {
    return ctx.error(fmt::format("input 'training_mode' {} must be a scalar", ctx.input(2).to_string()));
  }
  const graph::TensorDesc& x = ctx.input(0);
  ctx.set_output(0, x);
  if (ctx.num_outputs() > 1) ctx.set_output(1, graph::TensorDesc{DType::kBool, x.shape});
  return ok_status();
}

}  // namespace

Status register_sequence(OpSchemaRegistry& registry) {
  for (RecurrentKind kind : {RecurrentKind::kRnn, RecurrentKind::kGru, RecurrentKind::kLstm}) {
    HXRT_RETURN_IF_ERROR(registry.add(recurrent_schema(kind)));
  }

  OpSchema dft;
  dft.op_type = "DFT";
  dft.since_version = 17;
  dft.inputs = {{"input"}, {.name = "dft_length", .type_var = "T1", .optional = true}};
  dft.outputs = {{"output"}};
  dft.attrs = {{"axis", graph::AttrType::kInt, false, graph::Attribute(int64_t{1})},
               {"inverse", graph::AttrType::kInt, false, graph::Attribute(int64_t{0})},
               {"onesided", graph::AttrType::kInt, false, graph::Attribute(int64_t{0})}};
  dft.type_constraints = {{"T", float_types()}, {"T1", index_types()}};
  dft.infer = infer_dft;
  dft.doc = "discrete Fourier transform along axis of a real [..., 1] or complex [..., 2] signal; output complex";
  HXRT_RETURN_IF_ERROR(registry.add(std::move(dft)));

  OpSchema stft;
  stft.op_type = "STFT";
  stft.since_version = 17;
  stft.inputs = {{"signal"},
                 {.name = "frame_step", .type_var = "T1"},
                 {.name = "window", .optional = true},
                 {.name = "frame_length", .type_var = "T1", .optional = true}};
  stft.outputs = {{"output"}};
  stft.attrs = {{"onesided", graph::AttrType::kInt, false, graph::Attribute(int64_t{1})}};
  stft.type_constraints = {{"T", float_types()}, {"T1", index_types()}};
  stft.infer = infer_stft;
  stft.doc = "short-time Fourier transform: signal [batch, length, 1|2] → [batch, frames, bins, 2]";
  HXRT_RETURN_IF_ERROR(registry.add(std::move(stft)));

  OpSchema det;
  det.op_type = "Det";
  det.since_version = 11;
  det.inputs = {{"X"}};
  det.outputs = {{"Y"}};
  det.type_constraints = {{"T", float_types()}};
  det.infer = infer_det;
  det.doc = "determinants of the square matrices X [..., M, M] → [...]";
  HXRT_RETURN_IF_ERROR(registry.add(std::move(det)));

  OpSchema nms;
  nms.op_type = "NonMaxSuppression";
  nms.since_version = 11;
  nms.inputs = {{"boxes"},
                {"scores"},
                {.name = "max_output_boxes_per_class", .type_var = "T1", .optional = true},
                {.name = "iou_threshold", .optional = true},
                {.name = "score_threshold", .optional = true}};
  nms.outputs = {{.name = "selected_indices", .type_var = "T1"}};
  nms.attrs = {{"center_point_box", graph::AttrType::kInt, false, graph::Attribute(int64_t{0})}};
  nms.type_constraints = {{"T", float_types()}, {"T1", {DType::kI64}}};
  nms.infer = infer_nms;
  nms.doc = "greedy per-class box selection by IoU; every input a constant (the output length depends on them)";
  HXRT_RETURN_IF_ERROR(registry.add(std::move(nms)));

  HXRT_RETURN_IF_ERROR(registry.add(loss_schema(
      "NegativeLogLikelihoodLoss", "input",
      "loss[n, d] = -input[n, target[n, d], d] · weight[target]; reduced by none, sum or the weighted mean")));
  OpSchema sce = loss_schema("SoftmaxCrossEntropyLoss", "scores",
                             "NegativeLogLikelihoodLoss of log_softmax(scores, axis 1); log_prob the optional second "
                             "output");
  sce.outputs.push_back({"log_prob"});
  HXRT_RETURN_IF_ERROR(registry.add(std::move(sce)));

  OpSchema dropout;
  dropout.op_type = "Dropout";
  dropout.since_version = 13;
  dropout.inputs = {{"data"},
                    {.name = "ratio", .type_var = "T1", .optional = true},
                    {.name = "training_mode", .type_var = "T2", .optional = true}};
  dropout.outputs = {{"output"}, {.name = "mask", .type_var = "T2"}};
  dropout.attrs = {{"seed", graph::AttrType::kInt, false, std::nullopt}};
  dropout.type_constraints = {{"T", float_types()}, {"T1", float_types()}, {"T2", {DType::kBool}}};
  dropout.infer = infer_dropout;
  dropout.doc = "inference: output = data, mask all true (training_mode true with ratio > 0 is rejected)";
  return registry.add(std::move(dropout));
}

}  // namespace hxrt::ops::schemas
