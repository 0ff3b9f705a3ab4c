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

// Resize's roi, scales and sizes (11+) as values; an empty scales (or sizes) tensor counts as absent.
struct ResizeValues {
  bool crop = false;  // tf_crop_and_resize: roi is an input
  std::vector<double> roi;
  std::vector<double> scales;  // empty when sizes are given
  std::vector<int64_t> sizes;
};

// Every needed value is asked for before returning, so one bind-time import learns them all.
Result<ResizeValues> read_resize_values(ConversionContext& ctx, const std::string& transform) {
  Result<std::vector<double>> roi = std::vector<double>{};
  if (transform == "tf_crop_and_resize") roi = ctx.require_floats(1, "roi");
  Result<std::vector<int64_t>> sizes = std::vector<int64_t>{};
  if (ctx.has_input(3)) sizes = ctx.require_ints(3, "sizes");
  Result<std::vector<double>> scales = std::vector<double>{};
  if (ctx.has_input(2) && (!sizes.ok() || sizes->empty())) scales = ctx.require_floats(2, "scales");
  HXRT_RETURN_IF_ERROR(roi.status());
  HXRT_RETURN_IF_ERROR(sizes.status());
  HXRT_RETURN_IF_ERROR(scales.status());
  if (sizes->empty() && scales->empty()) return ctx.error("needs a non-empty input 'scales' or 'sizes'");
  if (!sizes->empty()) scales->clear();
  return ResizeValues{.crop = transform == "tf_crop_and_resize",
                      .roi = std::move(roi).value(),
                      .scales = std::move(scales).value(),
                      .sizes = std::move(sizes).value()};
}

Result<std::string> read_transform(ConversionContext& ctx) {
  Result<std::string> transform = ctx.attrs().get_string("coordinate_transformation_mode", "half_pixel");
  if (!transform.ok()) return ctx.error(transform.status().message());
  return transform;
}

Status emit_resize(ConversionContext& ctx, const ResizeValues& values, graph::AttributeMap attrs) {
  std::vector<std::string> inputs = {ctx.input(0), "", "", ""};
  if (values.crop) inputs[1] = add_floats(ctx, values.roi, "roi");
  if (!values.sizes.empty()) {
    inputs[3] = ctx.add_ints(values.sizes, "sizes");
  } else {
    inputs[2] = add_floats(ctx, values.scales, "scales");
  }
  while (inputs.back().empty()) inputs.pop_back();
  return ctx.emit("Resize", std::move(inputs), {ctx.output(0)}, std::move(attrs));
}

// Resize 11 to 17: roi, scales and sizes become constants.
Status convert_resize(ConversionContext& ctx) {
  HXRT_ASSIGN_OR_RETURN(const std::string transform, read_transform(ctx));
  HXRT_ASSIGN_OR_RETURN(const ResizeValues values, read_resize_values(ctx, transform));
  return emit_resize(ctx, values, ctx.attrs());
}

// Note [Resize from opset 18]
// Resize-18 adds the attribute `axes`: roi, scales and sizes then cover the listed axes only. The converter expands
// them to every axis (roi [0, 1], scale 1 and the input's own length, which must be static, for the others), so
// hxrt's Resize(13) needs no `axes`. keep_aspect_ratio_policy other than stretch (sizes rounded from one common
// scale, and that scale, not out/in, in the coordinate transform) and antialias (a wider filter when downsampling
// in linear/cubic mode) have no Resize(13) equivalent and are refused.
Status convert_resize_18(ConversionContext& ctx) {
  graph::AttributeMap attrs = ctx.attrs();
  Result<int64_t> antialias = attrs.get_int("antialias", 0);
  if (!antialias.ok()) return ctx.error(antialias.status().message());
  HXRT_ASSIGN_OR_RETURN(const std::string mode, read_mode(ctx));
  if (*antialias != 0 && mode != "nearest") return ctx.unsupported("antialias = 1 in linear or cubic mode");
  Result<std::string> policy = attrs.get_string("keep_aspect_ratio_policy", "stretch");
  if (!policy.ok()) return ctx.error(policy.status().message());
  if (*policy != "stretch" && ctx.has_input(3)) {
    return ctx.unsupported(fmt::format("keep_aspect_ratio_policy '{}' (only stretch)", *policy));
  }
  Result<std::vector<int64_t>> axes = attrs.get_ints("axes", std::vector<int64_t>{});
  if (!axes.ok()) return ctx.error(fmt::format("attribute 'axes': {}", axes.status().message()));
  for (const char* name : {"axes", "antialias", "keep_aspect_ratio_policy"}) attrs.erase(name);
  HXRT_ASSIGN_OR_RETURN(const std::string transform, read_transform(ctx));
  HXRT_ASSIGN_OR_RETURN(ResizeValues values, read_resize_values(ctx, transform));
  if (axes->empty()) return emit_resize(ctx, values, std::move(attrs));

  const graph::TensorDesc* desc = ctx.input_desc(0);
  if (desc == nullptr) return ctx.unsupported("attribute 'axes' needs the rank of input 'X'");
  const int64_t rank = desc->shape.rank();
  const size_t n = axes->size();
  std::vector<int64_t> listed(static_cast<size_t>(rank), -1);  // axis -> its index in `axes`, -1 when not listed
  for (size_t k = 0; k < n; ++k) {
    const int64_t a = (*axes)[k];
    if (a < -rank || a >= rank) return ctx.error(fmt::format("axis {} is out of range for rank {}", a, rank));
    int64_t& slot = listed[static_cast<size_t>(a < 0 ? a + rank : a)];
    if (slot >= 0) return ctx.error(fmt::format("axis {} repeats in 'axes'", a));
    slot = static_cast<int64_t>(k);
  }
  auto check_count = [&](size_t count, size_t per_axis, std::string_view what) -> Status {
    if (count == per_axis * n) return ok_status();
    return ctx.error(fmt::format("'{}' has {} values for {} axes", what, count, n));
  };
  ResizeValues full{.crop = values.crop};
  if (!values.roi.empty()) {
    HXRT_RETURN_IF_ERROR(check_count(values.roi.size(), 2, "roi"));
    full.roi.assign(static_cast<size_t>(rank), 0.0);
    full.roi.resize(static_cast<size_t>(2 * rank), 1.0);
  }
  if (!values.scales.empty()) {
    HXRT_RETURN_IF_ERROR(check_count(values.scales.size(), 1, "scales"));
    full.scales.assign(static_cast<size_t>(rank), 1.0);
  }
  if (!values.sizes.empty()) HXRT_RETURN_IF_ERROR(check_count(values.sizes.size(), 1, "sizes"));
  for (int64_t d = 0; d < rank; ++d) {
    const auto axis = static_cast<size_t>(d);
    const int64_t k = listed[axis];
    if (k >= 0) {
      const auto at = static_cast<size_t>(k);
      if (!full.roi.empty()) {
        full.roi[axis] = values.roi[at];
        full.roi[axis + static_cast<size_t>(rank)] = values.roi[at + n];
      }
      if (!full.scales.empty()) full.scales[axis] = values.scales[at];
      if (!values.sizes.empty()) full.sizes.push_back(values.sizes[at]);
    } else if (!values.sizes.empty()) {
      const graph::Dim& dim = desc->shape.dims()[axis];
      if (!dim.is_static()) {
        return ctx.unsupported(
            fmt::format("'sizes' for some axes of {} leaves a symbolic axis {} unlisted", desc->shape.to_string(), d));
      }
      full.sizes.push_back(dim.value());
    }
  }
  return emit_resize(ctx, full, std::move(attrs));
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
  defs.push_back(make_converter("Resize", 11, 17, convert_resize, "Resize(13) with roi, scales and sizes as constants"));
  defs.push_back(make_converter("Resize", 18, kMax, convert_resize_18,
                                "Resize(13) with roi, scales and sizes as constants, 'axes' expanded to every axis"));
  defs.push_back(make_converter("GridSample", 16, kMax, same_op("GridSample"), "GridSample(16)"));
  defs.push_back(make_converter("RoiAlign", 10, 15, convert_roi_align_10, "RoiAlign(16) with output_half_pixel coordinates"));
  defs.push_back(make_converter("RoiAlign", 16, kMax, same_op("RoiAlign"), "RoiAlign(16)"));
  for (ConverterDef& d : defs) HXRT_RETURN_IF_ERROR(registry.add(std::move(d)));
  return ok_status();
}

}  // namespace hxrt::formats::onnx
