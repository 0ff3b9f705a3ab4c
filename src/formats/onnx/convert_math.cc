// ONNX converters of the math family (converter.h): the unary math ops and activations of unary_math_ops()
// (hxrt/ops/params/math.h), and the existing activations Relu LeakyRelu Sigmoid Tanh Gelu and Cast. Each emits the
// hxrt op of the same name at its newest version; the opset ranges differ only where the ONNX API did:
//   opsets 1-5 of Abs Ceil Exp Floor Log Neg Reciprocal Sqrt Elu Selu HardSigmoid Relu LeakyRelu Sigmoid Tanh had a
//   legacy `consumed_inputs` attribute (an optimisation hint), which is dropped;
//   Cast 1-5 named its target type with a string ("FLOAT"), Cast 6+ with a TensorProto code; CastLike (15+) is a
//   Cast to its second input's dtype.

#include <array>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "formats/onnx/converter.h"
#include "hxrt/ops/params/elementwise.h"

namespace hxrt::formats::onnx {

namespace {

// Emits `op_type` on the node's inputs and outputs with its attributes, less `drop`.
Status emit_renamed(ConversionContext& ctx, std::string_view op_type, std::initializer_list<std::string_view> drop) {
  return ctx.emit(std::string(op_type), all_inputs(ctx), all_outputs(ctx), attrs_without(ctx, drop));
}

struct OpRange {
  std::string_view op_type;
  int first_version;   // the first ai.onnx version of the op
  bool consumed_inputs;  // versions before 6 carry the legacy attribute
};

// First ONNX versions of the ops converted here.
constexpr std::array<OpRange, 39> kRanges = {{
    {"Abs", 1, true},         {"Acos", 7, false},      {"Acosh", 9, false},      {"Asin", 7, false},
    {"Asinh", 9, false},      {"Atan", 7, false},      {"Atanh", 9, false},      {"Ceil", 1, true},
    {"Cos", 7, false},        {"Cosh", 9, false},      {"Erf", 9, false},        {"Exp", 1, true},
    {"Floor", 1, true},       {"Log", 1, true},        {"Neg", 1, true},         {"Reciprocal", 1, true},
    {"Round", 11, false},     {"Sign", 9, false},      {"Sin", 7, false},        {"Sinh", 9, false},
    {"Sqrt", 1, true},        {"Tan", 7, false},       {"IsInf", 10, false},     {"IsNaN", 9, false},
    {"Not", 1, false},        {"Celu", 12, false},     {"Elu", 1, true},         {"Selu", 1, true},
    {"HardSigmoid", 1, true}, {"HardSwish", 14, false}, {"Shrink", 9, false},    {"Softplus", 1, false},
    {"Softsign", 1, false},   {"ThresholdedRelu", 10, false}, {"Relu", 1, true}, {"LeakyRelu", 1, true},
    {"Sigmoid", 1, true},     {"Tanh", 1, true},       {"Gelu", 20, false},
}};

// Cast 1-5: the target type as a TensorProto.DataType name.
Status convert_cast_v1(ConversionContext& ctx) {
  Result<std::string> to = ctx.attrs().get_string("to");
  if (!to.ok()) return ctx.error(fmt::format("attribute 'to': {}", to.status().message()));
  static constexpr std::array<std::pair<std::string_view, int64_t>, 8> kCodes = {{{"FLOAT", 1},
                                                                                   {"UINT8", 2},
                                                                                   {"INT8", 3},
                                                                                   {"INT32", 6},
                                                                                   {"INT64", 7},
                                                                                   {"BOOL", 9},
                                                                                   {"FLOAT16", 10},
                                                                                   {"BFLOAT16", 16}}};
  for (const auto& [name, code] : kCodes) {
    if (*to != name) continue;
    graph::AttributeMap attrs;
    attrs.set("to", code);
    return ctx.emit("Cast", {ctx.input(0)}, {ctx.output(0)}, std::move(attrs));
  }
  return ctx.unsupported(fmt::format("Cast to '{}' is not supported", *to));
}

// CastLike (15+): Cast to the dtype of input 1 (`target_type`), whose desc the import knows.
Status convert_cast_like(ConversionContext& ctx) {
  const graph::TensorDesc* like = ctx.input_desc(1);
  if (like == nullptr) return ctx.error("the dtype of input 'target_type' is unknown");
  for (int64_t code : {1, 2, 3, 6, 7, 9, 10, 16}) {
    if (ops::dtype_from_onnx_code(code) != like->dtype) continue;
    graph::AttributeMap attrs;
    attrs.set("to", code);
    return ctx.emit("Cast", {ctx.input(0)}, {ctx.output(0)}, std::move(attrs));
  }
  return ctx.unsupported(fmt::format("CastLike to {} is not supported", like->dtype));
}

}  // namespace

Status register_math_converters(ConverterRegistry& registry) {
  for (const OpRange& range : kRanges) {
    const std::string op(range.op_type);
    if (range.consumed_inputs) {
      HXRT_RETURN_IF_ERROR(registry.add({.op_type = op,
                                         .since_version = range.first_version,
                                         .end_version = 5,
                                         .convert = [op](ConversionContext& ctx) {
                                           return emit_renamed(ctx, op, {"consumed_inputs"});
                                         },
                                         .doc = fmt::format("{} (legacy consumed_inputs dropped)", op)}));
    }
    HXRT_RETURN_IF_ERROR(registry.add({.op_type = op,
                                       .since_version = range.consumed_inputs ? 6 : range.first_version,
                                       .convert = [op](ConversionContext& ctx) { return emit_renamed(ctx, op, {}); },
                                       .doc = fmt::format("{} as it is", op)}));
  }
  HXRT_RETURN_IF_ERROR(registry.add(
      {.op_type = "Cast", .since_version = 1, .end_version = 5, .convert = convert_cast_v1, .doc = "Cast, `to` from its type name"}));
  HXRT_RETURN_IF_ERROR(registry.add({.op_type = "Cast",
                                     .since_version = 6,
                                     .convert = [](ConversionContext& ctx) { return emit_renamed(ctx, "Cast", {}); },
                                     .doc = "Cast as it is"}));
  HXRT_RETURN_IF_ERROR(registry.add({.op_type = "CastLike",
                                     .since_version = 15,
                                     .convert = convert_cast_like,
                                     .doc = "Cast to the dtype of input 1"}));
  return ok_status();
}

}  // namespace hxrt::formats::onnx
