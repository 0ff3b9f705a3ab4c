// ONNX converters of the logic family (converter.h): the broadcast binary ops Add Sub Mul Div Pow Mod PRelu, the
// comparisons and logical ops, the variadic Max Min Sum Mean, Where and Clip. Each emits the hxrt op of the same
// name at its newest version. Where the ONNX API changed:
//   opsets 1-6 of Add Sub Mul Div Pow And Or Xor Equal Greater Less broadcast only with the attribute broadcast=1,
//   B aligned to A's trailing dims or, with `axis`, to A's dims from `axis` on: B is reshaped to A's rank (its dims
//   followed by 1s) so numpy broadcasting gives the same result; versions before 6 also carry `consumed_inputs`;
//   Max Min Sum Mean 1-7 required equal shapes (a case of numpy broadcasting) and 1-5 carry `consumed_inputs`;
//   Clip 1-10 took min and max as attributes (defaults: no bound), 11+ as optional inputs.

#include <array>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "formats/onnx/converter.h"

namespace hxrt::formats::onnx {

namespace {

// Emits `op_type` on `inputs` and the node's outputs with its attributes, less `drop`.
Status emit_with(ConversionContext& ctx, std::string_view op_type, std::vector<std::string> inputs,
                 std::initializer_list<std::string_view> drop) {
  return ctx.emit(std::string(op_type), std::move(inputs), all_outputs(ctx), attrs_without(ctx, drop));
}

// Opsets 1-6 of the binary ops: B broadcast to A only with broadcast=1; with `axis`, B's dims align to A's from
// `axis`, so B is reshaped to [B's dims (0 = copy), 1 ...] of A's rank.
Status convert_legacy_binary(ConversionContext& ctx, const std::string& op_type) {
  Result<int64_t> broadcast = ctx.attrs().get_int("broadcast", 0);
  if (!broadcast.ok()) return ctx.error(fmt::format("attribute 'broadcast': {}", broadcast.status().message()));
  std::string b = ctx.input(1);
  if (*broadcast != 0 && ctx.attrs().has("axis")) {
    Result<int64_t> axis = ctx.attrs().get_int("axis");
    if (!axis.ok()) return ctx.error(fmt::format("attribute 'axis': {}", axis.status().message()));
    const graph::TensorDesc* a_desc = ctx.input_desc(0);
    const graph::TensorDesc* b_desc = ctx.input_desc(1);
    if (a_desc == nullptr || b_desc == nullptr) return ctx.error("broadcast with an axis needs the ranks of A and B");
    const int64_t a_rank = a_desc->shape.rank();
    const int64_t b_rank = b_desc->shape.rank();
    const int64_t start = *axis < 0 ? *axis + a_rank : *axis;
    if (start < 0 || start + b_rank > a_rank) {
      return ctx.error(fmt::format("axis {} does not place B (rank {}) inside A (rank {})", *axis, b_rank, a_rank));
    }
    const int64_t trailing = a_rank - start - b_rank;
    if (trailing > 0) {
      std::vector<int64_t> shape(static_cast<size_t>(b_rank), 0);
      shape.insert(shape.end(), static_cast<size_t>(trailing), 1);
      const std::string reshaped = ctx.temp("b_aligned");
      HXRT_RETURN_IF_ERROR(ctx.emit("Reshape", {b, ctx.add_ints(shape, "b_shape")}, {reshaped}));
      b = reshaped;
    }
  }
  return emit_with(ctx, op_type, {ctx.input(0), b}, {"broadcast", "axis", "consumed_inputs"});
}

// Clip 1-10: min and max attributes become constant inputs; an absent one stays omitted.
Status convert_clip_v1(ConversionContext& ctx) {
  std::vector<std::string> inputs = {ctx.input(0), "", ""};
  const std::array<std::string_view, 2> names = {"min", "max"};
  for (size_t i = 0; i < names.size(); ++i) {
    if (!ctx.attrs().has(names[i])) continue;
    Result<double> value = ctx.attrs().get_float(names[i]);
    if (!value.ok()) return ctx.error(fmt::format("attribute '{}': {}", names[i], value.status().message()));
    inputs[i + 1] = ctx.add_float_scalar(static_cast<float>(*value), names[i]);
  }
  if (inputs[2].empty()) inputs.pop_back();
  if (inputs.size() == 2 && inputs[1].empty()) inputs.pop_back();
  return ctx.emit("Clip", std::move(inputs), {ctx.output(0)});
}

struct OpRange {
  std::string_view op_type;
  int first_version;  // the first ai.onnx version
  int modern_since;   // the first version converted as it is (earlier ones need a legacy converter)
  enum Legacy : uint8_t { kNone, kBroadcastAttr, kConsumedInputs } legacy;
};

constexpr std::array<OpRange, 20> kRanges = {{
    {"Add", 1, 7, OpRange::kBroadcastAttr},         {"Sub", 1, 7, OpRange::kBroadcastAttr},
    {"Mul", 1, 7, OpRange::kBroadcastAttr},         {"Div", 1, 7, OpRange::kBroadcastAttr},
    {"Pow", 1, 7, OpRange::kBroadcastAttr},         {"And", 1, 7, OpRange::kBroadcastAttr},
    {"Or", 1, 7, OpRange::kBroadcastAttr},          {"Xor", 1, 7, OpRange::kBroadcastAttr},
    {"Equal", 1, 7, OpRange::kBroadcastAttr},       {"Greater", 1, 7, OpRange::kBroadcastAttr},
    {"Less", 1, 7, OpRange::kBroadcastAttr},        {"GreaterOrEqual", 12, 12, OpRange::kNone},
    {"LessOrEqual", 12, 12, OpRange::kNone},        {"Mod", 10, 10, OpRange::kNone},
    {"PRelu", 1, 6, OpRange::kConsumedInputs},      {"Where", 9, 9, OpRange::kNone},
    {"Max", 1, 6, OpRange::kConsumedInputs},        {"Min", 1, 6, OpRange::kConsumedInputs},
    {"Sum", 1, 6, OpRange::kConsumedInputs},        {"Mean", 1, 6, OpRange::kConsumedInputs},
}};

}  // namespace

Status register_logic_converters(ConverterRegistry& registry) {
  for (const OpRange& range : kRanges) {
    const std::string op(range.op_type);
    if (range.legacy == OpRange::kBroadcastAttr) {
      HXRT_RETURN_IF_ERROR(registry.add(
          {.op_type = op,
           .since_version = range.first_version,
           .end_version = range.modern_since - 1,
           .convert = [op](ConversionContext& ctx) { return convert_legacy_binary(ctx, op); },
           .doc = fmt::format("{}; legacy broadcast=1 / axis by reshaping B to A's rank", op)}));
    } else if (range.legacy == OpRange::kConsumedInputs) {
      HXRT_RETURN_IF_ERROR(registry.add(
          {.op_type = op,
           .since_version = range.first_version,
           .end_version = range.modern_since - 1,
           .convert = [op](ConversionContext& ctx) { return emit_with(ctx, op, all_inputs(ctx), {"consumed_inputs"}); },
           .doc = fmt::format("{} (legacy consumed_inputs dropped)", op)}));
    }
    HXRT_RETURN_IF_ERROR(
        registry.add({.op_type = op,
                      .since_version = range.modern_since,
                      .convert = [op](ConversionContext& ctx) { return emit_with(ctx, op, all_inputs(ctx), {}); },
                      .doc = fmt::format("{} as it is", op)}));
  }
  HXRT_RETURN_IF_ERROR(registry.add({.op_type = "Clip",
                                     .since_version = 1,
                                     .end_version = 10,
                                     .convert = convert_clip_v1,
                                     .doc = "Clip; min and max attributes become constant inputs"}));
  HXRT_RETURN_IF_ERROR(
      registry.add({.op_type = "Clip",
                    .since_version = 11,
                    .convert = [](ConversionContext& ctx) { return emit_with(ctx, "Clip", all_inputs(ctx), {}); },
                    .doc = "Clip as it is"}));
  return ok_status();
}

}  // namespace hxrt::formats::onnx
