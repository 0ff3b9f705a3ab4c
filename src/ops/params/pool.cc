#include "hxrt/ops/params/pool.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace hxrt::ops {

namespace {

// Int-list attribute `name`: `length` values (default `fallback`), each >= `minimum`.
Result<std::vector<int64_t>> read_ints(const graph::Node& node, std::string_view name, std::vector<int64_t> fallback,
                                       size_t length, int64_t minimum) {
  Result<std::vector<int64_t>> values = node.attrs.get_ints(name, std::move(fallback));
  if (!values.ok()) return attr_read_error(node, name, values.status());
  if (values->size() != length) {
    return attr_error(node, name, fmt::format("needs {} values, got [{}]", length, fmt::join(*values, ", ")));
  }
  for (int64_t v : *values) {
    if (v < minimum) {
      return attr_error(node, name, fmt::format("values must be >= {}, got [{}]", minimum, fmt::join(*values, ", ")));
    }
  }
  return values;
}

Result<int64_t> read_flag(const graph::Node& node, std::string_view name, int64_t fallback) {
  Result<int64_t> v = node.attrs.get_int(name, fallback);
  if (!v.ok()) return attr_read_error(node, name, v.status());
  if (*v != 0 && *v != 1) return attr_error(node, name, fmt::format("must be 0 or 1, got {}", *v));
  return v;
}

// String attribute `name` (default `fallback`) that must be one of `allowed`; returns its index there.
Result<size_t> read_choice(const graph::Node& node, std::string_view name, std::string fallback,
                           std::span<const std::string_view> allowed) {
  Result<std::string> v = node.attrs.get_string(name, std::move(fallback));
  if (!v.ok()) return attr_read_error(node, name, v.status());
  for (size_t i = 0; i < allowed.size(); ++i) {
    if (*v == allowed[i]) return i;
  }
  return attr_error(node, name, fmt::format("must be one of {}, got '{}'", fmt::join(allowed, ", "), *v));
}

}  // namespace

std::string PoolParams::to_string() const {
  return fmt::format(
      "kernel_shape=[{}], strides=[{}], pads=[{}], dilations=[{}], auto_pad={}, ceil_mode={}, "
      "count_include_pad={}, storage_order={}",
      fmt::join(kernel_shape, ", "), fmt::join(strides, ", "), fmt::join(pads, ", "), fmt::join(dilations, ", "),
      auto_pad, ceil_mode ? 1 : 0, count_include_pad ? 1 : 0, storage_order);
}

Result<PoolParams> parse_pool_params(const graph::Node& node) {
  PoolParams p;
  Result<std::vector<int64_t>> kernel = node.attrs.get_ints("kernel_shape");
  if (!kernel.ok()) return attr_read_error(node, "kernel_shape", kernel.status());
  const size_t k = kernel->size();
  if (k < 1 || k > static_cast<size_t>(kMaxPoolSpatialDims)) {
    return attr_error(node, "kernel_shape",
                      fmt::format("needs 1 to {} values, got [{}]", kMaxPoolSpatialDims, fmt::join(*kernel, ", ")));
  }
  HXRT_ASSIGN_OR_RETURN(p.kernel_shape, read_ints(node, "kernel_shape", {}, k, 1));
  HXRT_ASSIGN_OR_RETURN(p.strides, read_ints(node, "strides", std::vector<int64_t>(k, 1), k, 1));
  HXRT_ASSIGN_OR_RETURN(p.pads, read_ints(node, "pads", std::vector<int64_t>(2 * k, 0), 2 * k, 0));
  HXRT_ASSIGN_OR_RETURN(p.dilations, read_ints(node, "dilations", std::vector<int64_t>(k, 1), k, 1));
  static constexpr std::string_view kAutoPads[] = {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"};
  HXRT_ASSIGN_OR_RETURN(const size_t auto_pad, read_choice(node, "auto_pad", "NOTSET", kAutoPads));
  p.auto_pad = std::string(kAutoPads[auto_pad]);
  HXRT_ASSIGN_OR_RETURN(const int64_t ceil_mode, read_flag(node, "ceil_mode", 0));
  p.ceil_mode = ceil_mode != 0;
  HXRT_ASSIGN_OR_RETURN(const int64_t include_pad, read_flag(node, "count_include_pad", 0));
  p.count_include_pad = include_pad != 0;
  HXRT_ASSIGN_OR_RETURN(p.storage_order, read_flag(node, "storage_order", 0));
  return p;
}

Result<PoolAxis> pool_axis(const PoolParams& params, size_t axis, int64_t in) {
  const int64_t stride = params.strides[axis];
  const int64_t dilated = params.dilations[axis] * (params.kernel_shape[axis] - 1) + 1;
  const size_t k = params.kernel_shape.size();
  PoolAxis a;
  if (params.auto_pad == "SAME_UPPER" || params.auto_pad == "SAME_LOWER") {
    a.out = (in + stride - 1) / stride;
    const int64_t total = std::max<int64_t>(0, (a.out - 1) * stride + dilated - in);
    a.pad_begin = params.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    a.pad_end = total - a.pad_begin;
    return a;
  }
  if (params.auto_pad == "NOTSET") {
    a.pad_begin = params.pads[axis];
    a.pad_end = params.pads[axis + k];
  }
  const int64_t span = in + a.pad_begin + a.pad_end - dilated;
  if (span < 0) {
    return invalid_argument(
        "pooling window of {} (dilated) is larger than the padded input extent {} on spatial axis {}", dilated,
        in + a.pad_begin + a.pad_end, axis);
  }
  a.out = span / stride + 1;
  if (params.ceil_mode && params.auto_pad == "NOTSET" && span % stride != 0) {
    ++a.out;
    // The last window must start inside the input or the begin padding.
    if ((a.out - 1) * stride >= in + a.pad_begin) --a.out;
  }
  return a;
}

Result<PoolGeometry> pool_geometry(const PoolParams& params, const Shape& x) {
  const int k = static_cast<int>(params.kernel_shape.size());
  if (x.rank() != k + 2) {
    return invalid_argument("pooling with a {}-D kernel needs X of rank {} [N, C, spatial...], got {}", k, k + 2, x);
  }
  PoolGeometry g;
  g.planes = x.dim(0) * x.dim(1);
  std::vector<int64_t> out_dims = {x.dim(0), x.dim(1)};
  for (int i = 0; i < k; ++i) {
    const size_t slot = static_cast<size_t>(kMaxPoolSpatialDims - k + i);
    const size_t axis = static_cast<size_t>(i);
    HXRT_ASSIGN_OR_RETURN(const PoolAxis a, pool_axis(params, axis, x.dim(i + 2)));
    g.in[slot] = x.dim(i + 2);
    g.out[slot] = a.out;
    g.kernel[slot] = params.kernel_shape[axis];
    g.stride[slot] = params.strides[axis];
    g.dilation[slot] = params.dilations[axis];
    g.pad_begin[slot] = a.pad_begin;
    g.pad_end[slot] = a.pad_end;
    out_dims.push_back(a.out);
  }
  HXRT_ASSIGN_OR_RETURN(g.output_shape, Shape::make(out_dims));
  return g;
}

// ---------------------------------------------------------------------------------------------------------------
// Resize

std::string ResizeParams::to_string() const {
  static constexpr std::string_view kModes[] = {"nearest", "linear", "cubic"};
  return fmt::format(
      "mode={}, coordinate_transformation_mode={}, nearest_mode={}, cubic_coeff_a={}, "
      "exclude_outside={}, extrapolation_value={}",
      kModes[static_cast<size_t>(mode)], coordinate_transformation_mode, nearest_mode, cubic_coeff_a,
      exclude_outside ? 1 : 0, extrapolation_value);
}

Result<ResizeParams> parse_resize_params(const graph::Node& node) {
  ResizeParams p;
  static constexpr std::string_view kModes[] = {"nearest", "linear", "cubic"};
  HXRT_ASSIGN_OR_RETURN(const size_t mode, read_choice(node, "mode", "nearest", kModes));
  p.mode = static_cast<ResizeParams::Mode>(mode);
  static constexpr std::string_view kTransforms[] = {"half_pixel", "pytorch_half_pixel", "align_corners",
                                                     "asymmetric", "tf_crop_and_resize", "tf_half_pixel_for_nn"};
  HXRT_ASSIGN_OR_RETURN(const size_t transform,
                        read_choice(node, "coordinate_transformation_mode", "half_pixel", kTransforms));
  p.coordinate_transformation_mode = std::string(kTransforms[transform]);
  static constexpr std::string_view kNearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  HXRT_ASSIGN_OR_RETURN(const size_t nearest, read_choice(node, "nearest_mode", "round_prefer_floor", kNearest));
  p.nearest_mode = std::string(kNearest[nearest]);
  Result<double> a = node.attrs.get_float("cubic_coeff_a", -0.75);
  if (!a.ok()) return attr_read_error(node, "cubic_coeff_a", a.status());
  if (!std::isfinite(*a)) return attr_error(node, "cubic_coeff_a", fmt::format("must be finite, got {}", *a));
  p.cubic_coeff_a = *a;
  HXRT_ASSIGN_OR_RETURN(const int64_t exclude, read_flag(node, "exclude_outside", 0));
  p.exclude_outside = exclude != 0;
  Result<double> extrapolation = node.attrs.get_float("extrapolation_value", 0.0);
  if (!extrapolation.ok()) return attr_read_error(node, "extrapolation_value", extrapolation.status());
  p.extrapolation_value = *extrapolation;
  return p;
}

Result<ResizeShape> resize_shape(const Shape& x, std::span<const double> scales, std::span<const int64_t> sizes) {
  const size_t rank = static_cast<size_t>(x.rank());
  if (scales.empty() == sizes.empty()) {
    return invalid_argument("Resize needs exactly one of 'scales' and 'sizes', got {} scales and {} sizes",
                            scales.size(), sizes.size());
  }
  ResizeShape r;
  std::vector<int64_t> out(rank);
  r.scales.resize(rank);
  if (!sizes.empty()) {
    if (sizes.size() != rank) {
      return invalid_argument("Resize 'sizes' [{}] must have one value per axis of X {}", fmt::join(sizes, ", "), x);
    }
    for (size_t i = 0; i < rank; ++i) {
      if (sizes[i] < 0) return invalid_argument("Resize 'sizes' [{}] must not be negative", fmt::join(sizes, ", "));
      out[i] = sizes[i];
      const int64_t in = x.dims()[i];
      r.scales[i] = in == 0 ? 1.0 : static_cast<double>(sizes[i]) / static_cast<double>(in);
    }
  } else {
    if (scales.size() != rank) {
      return invalid_argument("Resize 'scales' [{}] must have one value per axis of X {}", fmt::join(scales, ", "), x);
    }
    for (size_t i = 0; i < rank; ++i) {
      if (!(scales[i] > 0.0) || !std::isfinite(scales[i])) {
        return invalid_argument("Resize 'scales' [{}] must be positive", fmt::join(scales, ", "));
      }
      r.scales[i] = scales[i];
      out[i] = static_cast<int64_t>(std::floor(static_cast<double>(x.dims()[i]) * scales[i]));
    }
  }
  HXRT_ASSIGN_OR_RETURN(r.output, Shape::make(out));
  return r;
}

// ---------------------------------------------------------------------------------------------------------------
// GridSample and RoiAlign

std::string GridSampleParams::to_string() const {
  static constexpr std::string_view kModes[] = {"bilinear", "nearest", "bicubic"};
  static constexpr std::string_view kPadding[] = {"zeros", "border", "reflection"};
  return fmt::format("mode={}, padding_mode={}, align_corners={}", kModes[static_cast<size_t>(mode)],
                     kPadding[static_cast<size_t>(padding_mode)], align_corners ? 1 : 0);
}

Result<GridSampleParams> parse_grid_sample_params(const graph::Node& node) {
  GridSampleParams p;
  static constexpr std::string_view kModes[] = {"bilinear", "nearest", "bicubic"};
  HXRT_ASSIGN_OR_RETURN(const size_t mode, read_choice(node, "mode", "bilinear", kModes));
  p.mode = static_cast<GridSampleParams::Mode>(mode);
  static constexpr std::string_view kPadding[] = {"zeros", "border", "reflection"};
  HXRT_ASSIGN_OR_RETURN(const size_t padding, read_choice(node, "padding_mode", "zeros", kPadding));
  p.padding_mode = static_cast<GridSampleParams::Padding>(padding);
  HXRT_ASSIGN_OR_RETURN(const int64_t align, read_flag(node, "align_corners", 0));
  p.align_corners = align != 0;
  return p;
}

std::string RoiAlignParams::to_string() const {
  return fmt::format(
      "coordinate_transformation_mode={}, mode={}, output_height={}, output_width={}, "
      "sampling_ratio={}, spatial_scale={}",
      half_pixel ? "half_pixel" : "output_half_pixel", max_mode ? "max" : "avg", output_height, output_width,
      sampling_ratio, spatial_scale);
}

Result<RoiAlignParams> parse_roi_align_params(const graph::Node& node) {
  RoiAlignParams p;
  static constexpr std::string_view kTransforms[] = {"half_pixel", "output_half_pixel"};
  HXRT_ASSIGN_OR_RETURN(const size_t transform,
                        read_choice(node, "coordinate_transformation_mode", "half_pixel", kTransforms));
  p.half_pixel = transform == 0;
  static constexpr std::string_view kModes[] = {"avg", "max"};
  HXRT_ASSIGN_OR_RETURN(const size_t mode, read_choice(node, "mode", "avg", kModes));
  p.max_mode = mode == 1;
  for (auto [name, field] :
       {std::pair{"output_height", &p.output_height}, std::pair{"output_width", &p.output_width}}) {
    Result<int64_t> v = node.attrs.get_int(name, 1);
    if (!v.ok()) return attr_read_error(node, name, v.status());
    if (*v < 1) return attr_error(node, name, fmt::format("must be >= 1, got {}", *v));
    *field = *v;
  }
  Result<int64_t> ratio = node.attrs.get_int("sampling_ratio", 0);
  if (!ratio.ok()) return attr_read_error(node, "sampling_ratio", ratio.status());
  if (*ratio < 0) return attr_error(node, "sampling_ratio", fmt::format("must be >= 0, got {}", *ratio));
  p.sampling_ratio = *ratio;
  Result<double> scale = node.attrs.get_float("spatial_scale", 1.0);
  if (!scale.ok()) return attr_read_error(node, "spatial_scale", scale.status());
  if (!(*scale > 0.0) || !std::isfinite(*scale)) {
    return attr_error(node, "spatial_scale", fmt::format("must be positive and finite, got {}", *scale));
  }
  p.spatial_scale = static_cast<float>(*scale);
  return p;
}

}  // namespace hxrt::ops
