// ONNX converters of the indexing family (converter.h): GatherElements GatherND ScatterElements Scatter ScatterND
// Compress NonZero Unique ReverseSequence, and the tensor-movement ops Gather Concat Slice Transpose. Each emits the
// hxrt op at its newest version (docs/onnx_ops/indexing.md lists the opset ranges).

#include <array>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "formats/onnx/converter.h"

namespace hxrt::formats::onnx {

namespace {

// The same op, inputs, outputs and attributes: the ONNX op at these opsets is the hxrt op.
ConvertFn same_op(std::string op_type) {
  return [op_type = std::move(op_type)](ConversionContext& ctx) {
    return ctx.emit(op_type, all_inputs(ctx), all_outputs(ctx), ctx.attrs());
  };
}

// Ops whose output shape depends on the values of some inputs (Note [Data-dependent output shapes] in
// ops/schemas/indexing.cc): those inputs must be known at import, and reach the hxrt node as initializers.
ConvertFn with_constant_input(std::string op_type, size_t input, std::string name) {
  return [op_type = std::move(op_type), input, name = std::move(name)](ConversionContext& ctx) -> Status {
    HXRT_RETURN_IF_ERROR(ctx.require_constant(input, name).status());
    return ctx.emit(op_type, all_inputs(ctx), all_outputs(ctx), ctx.attrs());
  };
}

// Concat-1..3: axis is optional, default 1.
Status convert_concat_v1(ConversionContext& ctx) {
  graph::AttributeMap attrs = ctx.attrs();
  if (!attrs.has("axis")) attrs.set("axis", int64_t{1});
  return ctx.emit("Concat", all_inputs(ctx), all_outputs(ctx), std::move(attrs));
}

// Slice-1..9: starts, ends and (optional) axes are attributes; no steps.
Status convert_slice_v1(ConversionContext& ctx) {
  Result<std::vector<int64_t>> starts = ctx.attrs().get_ints("starts");
  Result<std::vector<int64_t>> ends = ctx.attrs().get_ints("ends");
  if (!starts.ok() || !ends.ok()) return ctx.error("attributes 'starts' and 'ends' are required ints");
  std::vector<std::string> inputs = {ctx.input(0), ctx.add_ints(*starts, "starts"), ctx.add_ints(*ends, "ends")};
  if (ctx.attrs().has("axes")) {
    Result<std::vector<int64_t>> axes = ctx.attrs().get_ints("axes");
    if (!axes.ok()) return ctx.error(fmt::format("attribute 'axes': {}", axes.status().message()));
    inputs.push_back(ctx.add_ints(*axes, "axes"));
  }
  return ctx.emit("Slice", std::move(inputs), {ctx.output(0)});
}

// Slice-10+: starts, ends, axes, steps are inputs; hxrt's Slice needs their values when planning. Every one is
// asked for before a failure is returned, so that one bind-time import can supply them all.
Status convert_slice_v10(ConversionContext& ctx) {
  static const std::array<std::string_view, 4> kNames = {"starts", "ends", "axes", "steps"};
  std::vector<std::string> inputs = {ctx.input(0)};
  Status missing = ok_status();
  for (size_t i = 1; i <= kNames.size(); ++i) {
    if (!ctx.has_input(i)) {
      inputs.emplace_back();
      continue;
    }
    Result<std::vector<int64_t>> values = ctx.require_ints(i, kNames[i - 1]);
    if (!values.ok()) {
      if (missing.ok()) missing = values.status();
      continue;
    }
    inputs.push_back(ctx.add_ints(*values, kNames[i - 1]));
  }
  HXRT_RETURN_IF_ERROR(missing);
  while (inputs.size() > 3 && inputs.back().empty()) inputs.pop_back();
  return ctx.emit("Slice", std::move(inputs), {ctx.output(0)});
}

}  // namespace

Status register_indexing_converters(ConverterRegistry& registry) {
  constexpr int kAny = ops::kMaxOpVersion;
  const std::vector<ConverterDef> defs = {
      make_converter("GatherElements", 11, kAny, same_op("GatherElements"), "GatherElements(13)"),
      make_converter("GatherND", 11, kAny, same_op("GatherND"), "GatherND(13); batch_dims defaults to 0 before opset 12"),
      make_converter("ScatterElements", 11, kAny, same_op("ScatterElements"),
                "ScatterElements(16); reduction defaults to none before opset 16"),
      make_converter("Scatter", 9, 10, same_op("ScatterElements"), "ScatterElements(16) without a reduction"),
      make_converter("ScatterND", 11, kAny, same_op("ScatterND"), "ScatterND(16); reduction defaults to none before 16"),
      make_converter("Compress", 9, kAny, with_constant_input("Compress", 1, "condition"),
                "Compress(11) with the condition as a constant (needed at import)"),
      make_converter("NonZero", 9, kAny, with_constant_input("NonZero", 0, "X"),
                "NonZero(13) with X as a constant (needed at import)"),
      make_converter("Unique", 11, kAny, with_constant_input("Unique", 0, "X"),
                "Unique(11) with X as a constant (needed at import)"),
      make_converter("ReverseSequence", 10, kAny, same_op("ReverseSequence"), "ReverseSequence(10)"),
      make_converter("Gather", 1, kAny, same_op("Gather"), "Gather(13)"),
      make_converter("Concat", 1, 3, convert_concat_v1, "Concat(13) with axis defaulting to 1"),
      make_converter("Concat", 4, kAny, same_op("Concat"), "Concat(13)"),
      make_converter("Slice", 1, 9, convert_slice_v1, "Slice(13) with starts/ends/axes attributes as constant inputs"),
      make_converter("Slice", 10, kAny, convert_slice_v10, "Slice(13) with starts/ends/axes/steps needed at import"),
      make_converter("Transpose", 1, kAny, same_op("Transpose"), "Transpose(13)"),
  };
  for (const ConverterDef& def : defs) HXRT_RETURN_IF_ERROR(registry.add(def));
  return ok_status();
}

}  // namespace hxrt::formats::onnx
