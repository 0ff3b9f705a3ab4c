// ONNX converters of the pool family (converter.h): Conv, AveragePool, MaxPool, GlobalAveragePool, GlobalMaxPool,
// MaxUnpool, ConvTranspose, Resize, Upsample, GridSample and RoiAlign (docs/onnx_ops/pool.md).
//
// Note [Resize before opset 11]
// Resize-10 and Upsample (7, 9) map output pixel x to x / scale (asymmetric) and, in nearest mode, take the floor
// when upsampling and the ceiling when downsampling (the "simple" nearest mode of ONNX Runtime; ONNX's tests:
// upsample [1, 1, 2, 3] picks 0, 0, 0, 1, 1, 1). hxrt's Resize has one nearest_mode for every axis, so the
// converters emit floor or ceil from the direction of the resized axes (axes of scale 1 map to whole coordinates
// and do not care) and reject a resize that goes up on one axis and down on another.

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "formats/onnx/converter.h"

namespace hxrt::formats::onnx {

namespace {

std::string add_floats(ConversionContext& ctx, const std::vector<double>& values, std::string_view hint) {
  graph::TensorValue value{.dtype = DType::kF32, .shape = Shape({static_cast<int64_t>(values.size())})};
  value.data.resize(values.size() * sizeof(float));
  for (size_t i = 0; i < values.size(); ++i) {
    const float v = static_cast<float>(values[i]);
    std::memcpy(value.data.data() + i * sizeof(float), &v, sizeof v);
  }
  return ctx.add_constant(std::move(value), hint);
}

// The node's outputs that are present, in order (a missing middle output stays "").
std::vector<std::string> present_outputs(const ConversionContext& ctx) {
  std::vector<std::string> outputs;
  for (size_t i = 0; i < ctx.num_outputs(); ++i) outputs.push_back(ctx.output(i));
  while (!outputs.empty() && outputs.back().empty()) outputs.pop_back();
  return outputs;
}

// Emits `op` on the node's inputs and outputs with its attributes unchanged.
ConvertFn same_op(std::string op) {
  return [op = std::move(op)](ConversionContext& ctx) {
    return ctx.emit(op, all_inputs(ctx), present_outputs(ctx), ctx.attrs());
  };
}

Status convert_conv(ConversionContext& ctx) {
  const graph::TensorDesc* x = ctx.input_desc(0);
  if (x != nullptr && x->shape.rank() != 4) {
    return ctx.unsupported(fmt::format("only 2-D convolutions (X of rank 4) are supported, got X {}", x->to_string()));
  }
  std::vector<std::string> inputs = {ctx.input(0), ctx.input(1)};
  if (ctx.has_input(2)) inputs.push_back(ctx.input(2));
  return ctx.emit("Conv", std::move(inputs), {ctx.output(0)}, ctx.attrs());
}

Status convert_max_unpool(ConversionContext& ctx) {
  std::vector<std::string> inputs = {ctx.input(0), ctx.input(1)};
  if (ctx.has_input(2)) {
    HXRT_ASSIGN_OR_RETURN(const std::vector<int64_t> shape, ctx.require_ints(2, "output_shape"));
    inputs.push_back(ctx.add_ints(shape, "output_shape"));
  }
  return ctx.emit("MaxUnpool", std::move(inputs), {ctx.output(0)}, ctx.attrs());
}

// Resize(13) of input 0 with `scales` (Note [Resize before opset 11]).
Status emit_simple_resize(ConversionContext& ctx, const std::vector<double>& scales, const std::string& mode) {
  bool up = false;
  bool down = false;
  for (double s : scales) {
    up = up || s > 1.0;
    down = down || s < 1.0;
  }
  if (mode == "nearest" && up && down) {
    return ctx.unsupported("nearest resampling that enlarges one axis and shrinks another");
  }
  graph::AttributeMap attrs;
  attrs.set("coordinate_transformation_mode", "asymmetric");
  if (mode == "nearest") {
    attrs.set("mode", "nearest");
    attrs.set("nearest_mode", down ? "ceil" : "floor");
  } else if (mode == "linear" || mode == "bilinear") {
    attrs.set("mode", "linear");
  } else {
    return ctx.error(fmt::format("attribute 'mode' must be nearest or linear, got '{}'", mode));
  }
  return ctx.emit("Resize", {ctx.input(0), "", add_floats(ctx, scales, "scales")}, {ctx.output(0)}, std::move(attrs));
}

Result<std::string> read_mode(ConversionContext& ctx) {
  Result<std::string> mode = ctx.attrs().get_string("mode", "nearest");
  if (!mode.ok()) return ctx.error(mode.status().message());
  return mode;
}

Status convert_upsample_7(ConversionContext& ctx) {
  HXRT_ASSIGN_OR_RETURN(const std::string mode, read_mode(ctx));
  Result<std::vector<double>> scales = ctx.attrs().get_floats("scales");
  if (!scales.ok()) return ctx.error(fmt::format("attribute 'scales': {}", scales.status().message()));
  return emit_simple_resize(ctx, *scales, mode);
}

// Upsample-9 and Resize-10: X and scales.
Status convert_scales_input_resize(ConversionContext& ctx) {
  HXRT_ASSIGN_OR_RETURN(const std::string mode, read_mode(ctx));
  HXRT_ASSIGN_OR_RETURN(const std::vector<double> scales, ctx.require_floats(1, "scales"));
  return emit_simple_resize(ctx, scales, mode);
}

// Resize 11 to 13+: roi, scales and sizes become constants; an empty scales (or sizes) tensor counts as absent.
// Every needed value is asked for before returning, so one bind-time import learns them all.
Status convert_resize(ConversionContext& ctx) {
  Result<std::string> transform = ctx.attrs().get_string("coordinate_transformation_mode", "half_pixel");
  if (!transform.ok()) return ctx.error(transform.status().message());
  std::vector<std::string> inputs = {ctx.input(0), "", "", ""};
  Result<std::vector<double>> roi = std::vector<double>{};
  if (*transform == "tf_crop_and_resize") roi = ctx.require_floats(1, "roi");
  Result<std::vector<int64_t>> sizes = std::vector<int64_t>{};
  if (ctx.has_input(3)) sizes = ctx.require_ints(3, "sizes");
  Result<std::vector<double>> scales = std::vector<double>{};
  if (ctx.has_input(2) && (!sizes.ok() || sizes->empty())) scales = ctx.require_floats(2, "scales");
  HXRT_RETURN_IF_ERROR(roi.status());
  HXRT_RETURN_IF_ERROR(sizes.status());
  HXRT_RETURN_IF_ERROR(scales.status());
  if (*transform == "tf_crop_and_resize") inputs[1] = add_floats(ctx, *roi, "roi");
  if (!sizes->empty()) {
    inputs[3] = ctx.add_ints(*sizes, "sizes");
  } else {
    if (scales->empty()) return ctx.error("needs a non-empty input 'scales' or 'sizes'");
    inputs[2] = add_floats(ctx, *scales, "scales");
  }
  while (inputs.back().empty()) inputs.pop_back();
  return ctx.emit("Resize", std::move(inputs), {ctx.output(0)}, ctx.attrs());
}

// RoiAlign-10 has no coordinate_transformation_mode: its coordinates are RoiAlign-16's output_half_pixel.
Status convert_roi_align_10(ConversionContext& ctx) {
  graph::AttributeMap attrs = ctx.attrs();
  attrs.set("coordinate_transformation_mode", "output_half_pixel");
  return ctx.emit("RoiAlign", {ctx.input(0), ctx.input(1), ctx.input(2)}, {ctx.output(0)}, std::move(attrs));
}

}  // namespace

Status register_pool_converters(ConverterRegistry& registry) {
  constexpr int kMax = ops::kMaxOpVersion;
  std::vector<ConverterDef> defs;
  defs.push_back(make_converter("Conv", 1, kMax, convert_conv, "Conv(11), 2-D only"));
  defs.push_back(make_converter("AveragePool", 1, kMax, same_op("AveragePool"), "AveragePool(11), attributes as they are"));
  defs.push_back(make_converter("MaxPool", 1, kMax, same_op("MaxPool"), "MaxPool(12), attributes as they are; Indices output"));
  defs.push_back(make_converter("GlobalAveragePool", 1, kMax, same_op("GlobalAveragePool"), "GlobalAveragePool(1)"));
  defs.push_back(make_converter("GlobalMaxPool", 1, kMax, same_op("GlobalMaxPool"), "GlobalMaxPool(1)"));
  defs.push_back(make_converter("MaxUnpool", 9, kMax, convert_max_unpool, "MaxUnpool(11) with output_shape as a constant"));
  defs.push_back(make_converter("ConvTranspose", 1, kMax, same_op("ConvTranspose"), "ConvTranspose(11), attributes as they are"));
  defs.push_back(
      make_converter("Upsample", 7, 8, convert_upsample_7, "Resize(13) asymmetric with the scales attribute as a constant input"));
  defs.push_back(make_converter("Upsample", 9, 9, convert_scales_input_resize, "Resize(13) asymmetric, scales as a constant"));
  defs.push_back(make_converter("Resize", 10, 10, convert_scales_input_resize, "Resize(13) asymmetric, scales as a constant"));
  defs.push_back(make_converter("Resize", 11, kMax, convert_resize, "Resize(13) with roi, scales and sizes as constants"));
  defs.push_back(make_converter("GridSample", 16, kMax, same_op("GridSample"), "GridSample(16)"));
  defs.push_back(make_converter("RoiAlign", 10, 15, convert_roi_align_10, "RoiAlign(16) with output_half_pixel coordinates"));
  defs.push_back(make_converter("RoiAlign", 16, kMax, same_op("RoiAlign"), "RoiAlign(16)"));
  for (ConverterDef& d : defs) HXRT_RETURN_IF_ERROR(registry.add(std::move(d)));
  return ok_status();
}

}  // namespace hxrt::formats::onnx
