// Schemas of the pooling and resampling ops (docs/onnx_ops/pool.md): AveragePool MaxPool GlobalAveragePool
// GlobalMaxPool MaxUnpool Resize GridSample RoiAlign. ConvTranspose is in conv.cc.

#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hxrt/ops/params/pool.h"
#include "ops/schemas/schemas.h"

namespace hxrt::ops::schemas {

namespace {

const std::vector<DType>& i64_type() {
  static const std::vector<DType> types = {DType::kI64};
  return types;
}

// The values of constant input `i` (f32 or an integer type; rank 1) as doubles, or as int64 with `ints`; the
// errors name the input. An input with no elements reads as empty.
Result<std::vector<double>> constant_values(InferenceContext& ctx, size_t i, std::string_view name) {
  HXRT_ASSIGN_OR_RETURN(const graph::WeightData* weight, require_constant(ctx, i, name));
  const graph::TensorDesc& desc = ctx.input(i);
  if (!desc.shape.is_static() || desc.shape.rank() > 1) {
    return ctx.error(fmt::format("input '{}' {} must be a static 1-D tensor", name, desc.to_string()));
  }
  const int64_t n = desc.shape.rank() == 0 ? 1 : desc.shape.dim(0).value();
  const size_t element = desc.dtype == DType::kI64                                  ? 8
                         : (desc.dtype == DType::kF32 || desc.dtype == DType::kI32) ? 4
                                                                                    : 0;
  if (element == 0) return ctx.error(fmt::format("input '{}' must be f32, i32 or i64, got {}", name, desc.dtype));
  if (weight->size != static_cast<uint64_t>(n) * element) {
    return ctx.error(fmt::format("input '{}' {} holds {} bytes", name, desc.to_string(), weight->size));
  }
  std::vector<double> values(static_cast<size_t>(n));
  for (size_t k = 0; k < values.size(); ++k) {
    const std::byte* p = weight->data + k * element;
    if (desc.dtype == DType::kI64) {
      int64_t v;
      std::memcpy(&v, p, 8);
      values[k] = static_cast<double>(v);
    } else if (desc.dtype == DType::kI32) {
      int32_t v;
      std::memcpy(&v, p, 4);
      values[k] = v;
    } else {
      float v;
      std::memcpy(&v, p, 4);
      values[k] = v;
    }
  }
  return values;
}

std::vector<int64_t> to_ints(const std::vector<double>& values) {
  std::vector<int64_t> out;
  out.reserve(values.size());
  for (double v : values) out.push_back(static_cast<int64_t>(v));
  return out;
}

// `in` + `offset` (either sign) as a Dim.
graph::Dim add_offset(const graph::Dim& in, int64_t offset) {
  return offset >= 0 ? in + graph::Dim(offset) : in - graph::Dim(-offset);
}

Status infer_pool(InferenceContext& ctx) {
  HXRT_ASSIGN_OR_RETURN(const PoolParams p, parse_pool_params(ctx.node()));
  const graph::SymShape& x = ctx.input(0).shape;
  const size_t k = p.kernel_shape.size();
  if (static_cast<size_t>(x.rank()) != k + 2) {
    return ctx.error(
        fmt::format("input 'X' {} must have rank {} ([N, C] and the {} kernel_shape axes)", x.to_string(), k + 2, k));
  }
  std::vector<graph::Dim> out = {x.dim(0), x.dim(1)};
  for (size_t i = 0; i < k; ++i) {
    const graph::Dim& in = x.dim(static_cast<int>(i) + 2);
    if (in.is_static()) {
      Result<PoolAxis> a = pool_axis(p, i, in.value());
      if (!a.ok()) return ctx.error(a.status().message());
      out.emplace_back(a->out);
      continue;
    }
    const int64_t stride = p.strides[i];
    const int64_t dilated = p.dilations[i] * (p.kernel_shape[i] - 1) + 1;
    if (p.auto_pad == "SAME_UPPER" || p.auto_pad == "SAME_LOWER") {
      out.push_back((in + graph::Dim(stride - 1)) / graph::Dim(stride));
    } else if (!p.ceil_mode) {
      const int64_t pads = p.auto_pad == "VALID" ? 0 : p.pads[i] + p.pads[i + k];
      out.push_back(add_offset(in, pads - dilated) / graph::Dim(stride) + graph::Dim(1));
    } else {
      return ctx.error(fmt::format("ceil_mode needs a static extent on axis {} of 'X' {}", i + 2, x.to_string()));
    }
  }
  graph::SymShape shape(std::move(out));
  if (ctx.num_outputs() > 1) ctx.set_output(1, graph::TensorDesc{DType::kI64, shape});
  ctx.set_output(0, graph::TensorDesc{ctx.input(0).dtype, std::move(shape)});
  return ok_status();
}

Status infer_global_pool(InferenceContext& ctx) {
  const graph::SymShape& x = ctx.input(0).shape;
  if (x.rank() < 3) return ctx.error(fmt::format("input 'X' {} must have rank >= 3 [N, C, spatial...]", x.to_string()));
  std::vector<graph::Dim> out = {x.dim(0), x.dim(1)};
  out.resize(static_cast<size_t>(x.rank()), graph::Dim(1));
  ctx.set_output(0, graph::TensorDesc{ctx.input(0).dtype, graph::SymShape(std::move(out))});
  return ok_status();
}

Status infer_max_unpool(InferenceContext& ctx) {
  HXRT_ASSIGN_OR_RETURN(const PoolParams p, parse_pool_params(ctx.node()));
  const graph::SymShape& x = ctx.input(0).shape;
  const size_t k = p.kernel_shape.size();
  if (static_cast<size_t>(x.rank()) != k + 2) {
    return ctx.error(fmt::format("input 'X' {} must have rank {}", x.to_string(), k + 2));
  }
  if (!(ctx.input(1).shape == x)) {
    HXRT_RETURN_IF_ERROR(
        ctx.require_equal(ctx.input(1).shape.num_elements(), x.num_elements(), "element counts of 'X' and 'I'"));
  }
  if (ctx.has_input(2)) {
    HXRT_ASSIGN_OR_RETURN(const std::vector<double> values, constant_values(ctx, 2, "output_shape"));
    const std::vector<int64_t> shape = to_ints(values);
    if (shape.size() != k + 2) {
      return ctx.error(fmt::format("input 'output_shape' [{}] must have {} values", fmt::join(shape, ", "), k + 2));
    }
    std::vector<graph::Dim> out;
    for (int64_t v : shape) {
      if (v < 0) return ctx.error(fmt::format("input 'output_shape' [{}] is negative", fmt::join(shape, ", ")));
      out.emplace_back(v);
    }
    ctx.set_output(0, graph::TensorDesc{ctx.input(0).dtype, graph::SymShape(std::move(out))});
    return ok_status();
  }
  std::vector<graph::Dim> out = {x.dim(0), x.dim(1)};
  for (size_t i = 0; i < k; ++i) {
    const graph::Dim& in = x.dim(static_cast<int>(i) + 2);
    // (in - 1) · stride + kernel - pads
    out.push_back(
        add_offset(in * graph::Dim(p.strides[i]), p.kernel_shape[i] - p.strides[i] - p.pads[i] - p.pads[i + k]));
  }
  ctx.set_output(0, graph::TensorDesc{ctx.input(0).dtype, graph::SymShape(std::move(out))});
  return ok_status();
}

Status infer_resize(InferenceContext& ctx) {
  HXRT_ASSIGN_OR_RETURN(const ResizeParams p, parse_resize_params(ctx.node()));
  const graph::SymShape& x = ctx.input(0).shape;
  std::vector<double> scales;
  std::vector<int64_t> sizes;
  if (ctx.has_input(2)) {
    HXRT_ASSIGN_OR_RETURN(scales, constant_values(ctx, 2, "scales"));
  }
  if (ctx.has_input(3)) {
    HXRT_ASSIGN_OR_RETURN(const std::vector<double> values, constant_values(ctx, 3, "sizes"));
    sizes = to_ints(values);
  }
  if (p.coordinate_transformation_mode == "tf_crop_and_resize") {
    if (!ctx.has_input(1)) return ctx.error("coordinate_transformation_mode tf_crop_and_resize needs input 'roi'");
    const graph::SymShape& roi = ctx.input(1).shape;
    if (roi.rank() != 1) return ctx.error(fmt::format("input 'roi' {} must be 1-D", roi.to_string()));
    HXRT_RETURN_IF_ERROR(ctx.require_equal(roi.dim(0), graph::Dim(2 * x.rank()), "length of 'roi' and 2 · rank of X"));
  }
  if (x.is_static()) {
    HXRT_ASSIGN_OR_RETURN(const Shape in, x.resolve({}));
    Result<ResizeShape> r = resize_shape(in, scales, sizes);
    if (!r.ok()) return ctx.error(r.status().message());
    ctx.set_output(0, graph::TensorDesc{ctx.input(0).dtype, graph::SymShape::from(r->output)});
    return ok_status();
  }
  // Symbolic X: sizes are the output; a symbolic axis keeps a whole scale.
  std::vector<graph::Dim> out;
  if (scales.empty() == sizes.empty()) return ctx.error("needs exactly one of 'scales' and 'sizes'");
  const size_t rank = static_cast<size_t>(x.rank());
  if ((!sizes.empty() && sizes.size() != rank) || (!scales.empty() && scales.size() != rank)) {
    return ctx.error(fmt::format("'scales' or 'sizes' must have {} values", rank));
  }
  for (size_t i = 0; i < rank; ++i) {
    const graph::Dim& in = x.dim(static_cast<int>(i));
    if (!sizes.empty()) {
      out.emplace_back(sizes[i]);
    } else if (in.is_static()) {
      out.emplace_back(static_cast<int64_t>(std::floor(static_cast<double>(in.value()) * scales[i])));
    } else if (scales[i] >= 1.0 && scales[i] == std::floor(scales[i])) {
      out.push_back(in * graph::Dim(static_cast<int64_t>(scales[i])));
    } else {
      return ctx.error(
          fmt::format("scale {} of symbolic axis {} of 'X' {} must be a whole number", scales[i], i, x.to_string()));
    }
  }
  ctx.set_output(0, graph::TensorDesc{ctx.input(0).dtype, graph::SymShape(std::move(out))});
  return ok_status();
}

Status infer_grid_sample(InferenceContext& ctx) {
  HXRT_RETURN_IF_ERROR(parse_grid_sample_params(ctx.node()).status());
  const graph::SymShape& x = ctx.input(0).shape;
  const graph::SymShape& grid = ctx.input(1).shape;
  if (x.rank() != 4 || grid.rank() != 4) {
    return ctx.error(
        fmt::format("'X' {} must be [N, C, H, W] and 'grid' {} [N, H_out, W_out, 2]", x.to_string(), grid.to_string()));
  }
  HXRT_RETURN_IF_ERROR(ctx.require_equal(grid.dim(0), x.dim(0), "batch N of 'grid' and 'X'"));
  HXRT_RETURN_IF_ERROR(ctx.require_equal(grid.dim(3), graph::Dim(2), "last dim of 'grid' (x, y)"));
  ctx.set_output(0,
                 graph::TensorDesc{ctx.input(0).dtype, graph::SymShape{x.dim(0), x.dim(1), grid.dim(1), grid.dim(2)}});
  return ok_status();
}

Status infer_roi_align(InferenceContext& ctx) {
  HXRT_ASSIGN_OR_RETURN(const RoiAlignParams p, parse_roi_align_params(ctx.node()));
  const graph::SymShape& x = ctx.input(0).shape;
  const graph::SymShape& rois = ctx.input(1).shape;
  const graph::SymShape& batch = ctx.input(2).shape;
  if (x.rank() != 4 || rois.rank() != 2 || batch.rank() != 1) {
    return ctx.error(fmt::format("'X' {} must be [N, C, H, W], 'rois' {} [R, 4] and 'batch_indices' {} [R]",
                                 x.to_string(), rois.to_string(), batch.to_string()));
  }
  HXRT_RETURN_IF_ERROR(ctx.require_equal(rois.dim(1), graph::Dim(4), "second dim of 'rois' (x1, y1, x2, y2)"));
  HXRT_RETURN_IF_ERROR(ctx.require_equal(rois.dim(0), batch.dim(0), "R of 'rois' and 'batch_indices'"));
  ctx.set_output(0, graph::TensorDesc{ctx.input(0).dtype,
                                      graph::SymShape{rois.dim(0), x.dim(1), p.output_height, p.output_width}});
  return ok_status();
}

std::vector<AttrSpec> pool_attrs(bool max_pool) {
  std::vector<AttrSpec> attrs = {
      {"kernel_shape", graph::AttrType::kInts, true, std::nullopt},
      {"strides", graph::AttrType::kInts, false, std::nullopt},
      {"pads", graph::AttrType::kInts, false, std::nullopt},
      {"auto_pad", graph::AttrType::kString, false, graph::Attribute("NOTSET")},
      {"ceil_mode", graph::AttrType::kInt, false, graph::Attribute(int64_t{0})},
  };
  if (max_pool) {
    attrs.push_back({"dilations", graph::AttrType::kInts, false, std::nullopt});
    attrs.push_back({"storage_order", graph::AttrType::kInt, false, graph::Attribute(int64_t{0})});
  } else {
    attrs.push_back({"count_include_pad", graph::AttrType::kInt, false, graph::Attribute(int64_t{0})});
  }
  return attrs;
}

}  // namespace

Status register_pool(OpSchemaRegistry& registry) {
  OpSchema average;
  average.op_type = "AveragePool";
  average.since_version = 11;
  average.inputs = {{"X"}};
  average.outputs = {{"Y"}};
  average.attrs = pool_attrs(false);
  average.type_constraints = {{"T", float_types()}};
  average.infer = infer_pool;
  average.doc = "mean over each window of the spatial dims (1-D to 3-D); padding excluded unless count_include_pad";
  HXRT_RETURN_IF_ERROR(registry.add(std::move(average)));

  OpSchema max;
  max.op_type = "MaxPool";
  max.since_version = 12;
  max.inputs = {{"X"}};
  max.outputs = {{"Y"}, {"Indices", "I"}};
  max.attrs = pool_attrs(true);
  max.type_constraints = {{"T", {DType::kF32, DType::kI8, DType::kU8}}, {"I", i64_type()}};
  max.infer = infer_pool;
  max.doc = "max over each (dilated) window of the spatial dims (1-D to 3-D); Indices: flat index into X of each max";
  HXRT_RETURN_IF_ERROR(registry.add(std::move(max)));

  for (const char* name : {"GlobalAveragePool", "GlobalMaxPool"}) {
    OpSchema global;
    global.op_type = name;
    global.since_version = 1;
    global.inputs = {{"X"}};
    global.outputs = {{"Y"}};
    global.type_constraints = {{"T", float_types()}};
    global.infer = infer_global_pool;
    global.doc = "mean or max over all spatial dims: [N, C, D...] -> [N, C, 1...]";
    HXRT_RETURN_IF_ERROR(registry.add(std::move(global)));
  }

  OpSchema unpool;
  unpool.op_type = "MaxUnpool";
  unpool.since_version = 11;
  unpool.inputs = {{"X"}, {"I", "I"}, {.name = "output_shape", .type_var = "I", .optional = true}};
  unpool.outputs = {{"Y"}};
  unpool.attrs = {{"kernel_shape", graph::AttrType::kInts, true, std::nullopt},
                  {"strides", graph::AttrType::kInts, false, std::nullopt},
                  {"pads", graph::AttrType::kInts, false, std::nullopt}};
  unpool.type_constraints = {{"T", float_types()}, {"I", i64_type()}};
  unpool.infer = infer_max_unpool;
  unpool.doc =
      "zeros with X scattered to the flat output indices I; output_shape (a constant) or (in-1)·stride + "
      "kernel - pads";
  HXRT_RETURN_IF_ERROR(registry.add(std::move(unpool)));

  OpSchema resize;
  resize.op_type = "Resize";
  resize.since_version = 13;
  resize.inputs = {{"X"},
                   {.name = "roi", .type_var = "T2", .optional = true},
                   {.name = "scales", .type_var = "T3", .optional = true},
                   {.name = "sizes", .type_var = "I", .optional = true}};
  resize.outputs = {{"Y"}};
  resize.attrs = {{"mode", graph::AttrType::kString, false, graph::Attribute("nearest")},
                  {"coordinate_transformation_mode", graph::AttrType::kString, false, graph::Attribute("half_pixel")},
                  {"nearest_mode", graph::AttrType::kString, false, graph::Attribute("round_prefer_floor")},
                  {"cubic_coeff_a", graph::AttrType::kFloat, false, graph::Attribute(-0.75)},
                  {"exclude_outside", graph::AttrType::kInt, false, graph::Attribute(int64_t{0})},
                  {"extrapolation_value", graph::AttrType::kFloat, false, graph::Attribute(0.0)}};
  resize.type_constraints = {{"T", float_types()}, {"T2", float_types()}, {"T3", float_types()}, {"I", i64_type()}};
  resize.infer = infer_resize;
  resize.doc = "nearest / linear / cubic resampling of every axis; scales or sizes (constants) give the output";
  HXRT_RETURN_IF_ERROR(registry.add(std::move(resize)));

  OpSchema grid;
  grid.op_type = "GridSample";
  grid.since_version = 16;
  grid.inputs = {{"X"}, {"grid"}};
  grid.outputs = {{"Y"}};
  grid.attrs = {{"mode", graph::AttrType::kString, false, graph::Attribute("bilinear")},
                {"padding_mode", graph::AttrType::kString, false, graph::Attribute("zeros")},
                {"align_corners", graph::AttrType::kInt, false, graph::Attribute(int64_t{0})}};
  grid.type_constraints = {{"T", float_types()}};
  grid.infer = infer_grid_sample;
  grid.doc = "samples X [N, C, H, W] at the normalised (x, y) of grid [N, H_out, W_out, 2]";
  HXRT_RETURN_IF_ERROR(registry.add(std::move(grid)));

  OpSchema roi;
  roi.op_type = "RoiAlign";
  roi.since_version = 16;
  roi.inputs = {{"X"}, {"rois"}, {"batch_indices", "I"}};
  roi.outputs = {{"Y"}};
  roi.attrs = {{"coordinate_transformation_mode", graph::AttrType::kString, false, graph::Attribute("half_pixel")},
               {"mode", graph::AttrType::kString, false, graph::Attribute("avg")},
               {"output_height", graph::AttrType::kInt, false, graph::Attribute(int64_t{1})},
               {"output_width", graph::AttrType::kInt, false, graph::Attribute(int64_t{1})},
               {"sampling_ratio", graph::AttrType::kInt, false, graph::Attribute(int64_t{0})},
               {"spatial_scale", graph::AttrType::kFloat, false, graph::Attribute(1.0)}};
  roi.type_constraints = {{"T", float_types()}, {"I", i64_type()}};
  roi.infer = infer_roi_align;
  roi.doc = "bilinear-sampled average (or max) of each region of interest over output_height x output_width bins";
  return registry.add(std::move(roi));
}

}  // namespace hxrt::ops::schemas
