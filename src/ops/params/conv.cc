#include "hxrt/ops/params/conv.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace hxrt::ops {

std::string ConvParams::to_string() const {
  return fmt::format("strides=[{}], pads=[{}], dilations=[{}], group={}, auto_pad={}", fmt::join(strides, ", "),
                     fmt::join(pads, ", "), fmt::join(dilations, ", "), group, auto_pad);
}

Result<std::vector<int64_t>> parse_conv_ints(const graph::Node& node, std::string_view name,
                                             std::vector<int64_t> fallback, size_t length, int64_t minimum) {
  Result<std::vector<int64_t>> values = node.attrs.get_ints(name, std::move(fallback));
  if (!values.ok()) return attr_read_error(node, name, values.status());
  if (values->size() != length) {
    return attr_error(node, name,
                      fmt::format("needs {} values for a 2-D Conv, got [{}]", length, fmt::join(*values, ", ")));
  }
  for (int64_t v : *values) {
    if (v < minimum) {
      return attr_error(node, name, fmt::format("values must be >= {}, got [{}]", minimum, fmt::join(*values, ", ")));
    }
  }
  return values;
}

Result<ConvParams> parse_conv_params(const graph::Node& node) {
  ConvParams out;
  HXRT_ASSIGN_OR_RETURN(out.strides, parse_conv_ints(node, "strides", {1, 1}, 2, 1));
  HXRT_ASSIGN_OR_RETURN(out.pads, parse_conv_ints(node, "pads", {0, 0, 0, 0}, 4, 0));
  HXRT_ASSIGN_OR_RETURN(out.dilations, parse_conv_ints(node, "dilations", {1, 1}, 2, 1));
  Result<int64_t> group = node.attrs.get_int("group", 1);
  if (!group.ok()) return attr_read_error(node, "group", group.status());
  if (*group < 1) return attr_error(node, "group", fmt::format("must be >= 1, got {}", *group));
  out.group = *group;
  Result<std::string> auto_pad = node.attrs.get_string("auto_pad", "NOTSET");
  if (!auto_pad.ok()) return attr_read_error(node, "auto_pad", auto_pad.status());
  if (*auto_pad != "NOTSET" && *auto_pad != "SAME_UPPER" && *auto_pad != "SAME_LOWER" && *auto_pad != "VALID") {
    return attr_error(node, "auto_pad",
                      fmt::format("must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got '{}'", *auto_pad));
  }
  out.auto_pad = *auto_pad;
  return out;
}

Result<Conv2dGeometry> conv2d_geometry(const ConvParams& attrs, const Shape& x, const Shape& w) {
  if (x.rank() != 4 || w.rank() != 4) {
    return invalid_argument("Conv is 2-D NCHW: X must be [N, C, H, W] and W [M, C/group, kH, kW], got X {} and W {}", x,
                            w);
  }
  Conv2dGeometry g;
  g.n = x.dim(0);
  g.c = x.dim(1);
  g.h = x.dim(2);
  g.w = x.dim(3);
  g.m = w.dim(0);
  g.kh = w.dim(2);
  g.kw = w.dim(3);
  g.group = attrs.group;
  g.stride_h = attrs.strides[0];
  g.stride_w = attrs.strides[1];
  g.dilation_h = attrs.dilations[0];
  g.dilation_w = attrs.dilations[1];
  if (g.c % g.group != 0 || g.m % g.group != 0 || w.dim(1) * g.group != g.c) {
    return invalid_argument("Conv channels: X {} has C={}, W {} has M={} and C/group={} with group={}", x, g.c, w, g.m,
                            w.dim(1), g.group);
  }
  const int64_t eff_kh = g.dilation_h * (g.kh - 1) + 1;
  const int64_t eff_kw = g.dilation_w * (g.kw - 1) + 1;
  if (attrs.auto_pad == "SAME_UPPER" || attrs.auto_pad == "SAME_LOWER") {
    g.oh = (g.h + g.stride_h - 1) / g.stride_h;
    g.ow = (g.w + g.stride_w - 1) / g.stride_w;
    const int64_t total_h = std::max<int64_t>(0, (g.oh - 1) * g.stride_h + eff_kh - g.h);
    const int64_t total_w = std::max<int64_t>(0, (g.ow - 1) * g.stride_w + eff_kw - g.w);
    const bool upper = attrs.auto_pad == "SAME_UPPER";  // the extra pad goes at the end
    g.pad_top = upper ? total_h / 2 : total_h - total_h / 2;
    g.pad_left = upper ? total_w / 2 : total_w - total_w / 2;
  } else {
    const bool valid = attrs.auto_pad == "VALID";
    g.pad_top = valid ? 0 : attrs.pads[0];
    g.pad_left = valid ? 0 : attrs.pads[1];
    const int64_t span_h = g.h + g.pad_top + (valid ? 0 : attrs.pads[2]) - eff_kh;
    const int64_t span_w = g.w + g.pad_left + (valid ? 0 : attrs.pads[3]) - eff_kw;
    if (span_h < 0 || span_w < 0) {
      return invalid_argument("Conv kernel {}x{} (dilated {}x{}) is larger than the padded input of X {}", g.kh, g.kw,
                              eff_kh, eff_kw, x);
    }
    g.oh = span_h / g.stride_h + 1;
    g.ow = span_w / g.stride_w + 1;
  }
  return g;
}

std::string ConvBnReluParams::to_string() const {
  return fmt::format("{}, epsilon={}, relu={}", conv.to_string(), epsilon, relu ? 1 : 0);
}

Result<ConvBnReluParams> parse_conv_bn_relu_params(const graph::Node& node) {
  ConvBnReluParams params;
  HXRT_ASSIGN_OR_RETURN(params.conv, parse_conv_params(node));
  HXRT_ASSIGN_OR_RETURN(params.epsilon, parse_epsilon(node));
  Result<int64_t> relu = node.attrs.get_int("relu", 1);
  if (!relu.ok()) return attr_read_error(node, "relu", relu.status());
  if (*relu != 0 && *relu != 1) return attr_error(node, "relu", fmt::format("must be 0 or 1, got {}", *relu));
  params.relu = *relu != 0;
  return params;
}

// ---------------------------------------------------------------------------------------------------------------
// ConvTranspose

namespace {

int64_t floor_half(int64_t v) {
  return v >= 0 ? v / 2 : -((-v + 1) / 2);
}

// Int-list attribute `name` ({} when absent): each value >= `minimum`, and its length `per_axis` times the spatial
// rank `*rank` (fixed by the first list present).
Result<std::vector<int64_t>> read_transpose_ints(const graph::Node& node, std::string_view name, int64_t minimum,
                                                 size_t per_axis, size_t* rank) {
  if (!node.attrs.has(name)) return std::vector<int64_t>{};
  Result<std::vector<int64_t>> values = node.attrs.get_ints(name);
  if (!values.ok()) return attr_read_error(node, name, values.status());
  for (int64_t v : *values) {
    if (v < minimum) {
      return attr_error(node, name, fmt::format("values must be >= {}, got [{}]", minimum, fmt::join(*values, ", ")));
    }
  }
  if (values->empty() || values->size() % per_axis != 0) {
    return attr_error(node, name,
                      fmt::format("needs {} value(s) per spatial axis, got [{}]", per_axis, fmt::join(*values, ", ")));
  }
  const size_t k = values->size() / per_axis;
  if (*rank != 0 && k != *rank) {
    return attr_error(node, name, fmt::format("has {} spatial axes where other attributes have {}", k, *rank));
  }
  *rank = k;
  return values;
}

}  // namespace

std::string ConvTransposeParams::to_string() const {
  return fmt::format(
      "kernel_shape=[{}], strides=[{}], pads=[{}], dilations=[{}], output_padding=[{}], "
      "output_shape=[{}], group={}, auto_pad={}",
      fmt::join(kernel_shape, ", "), fmt::join(strides, ", "), fmt::join(pads, ", "), fmt::join(dilations, ", "),
      fmt::join(output_padding, ", "), fmt::join(output_shape, ", "), group, auto_pad);
}

Result<ConvTransposeParams> parse_conv_transpose_params(const graph::Node& node) {
  ConvTransposeParams p;
  size_t rank = 0;
  HXRT_ASSIGN_OR_RETURN(p.kernel_shape, read_transpose_ints(node, "kernel_shape", 1, 1, &rank));
  HXRT_ASSIGN_OR_RETURN(p.strides, read_transpose_ints(node, "strides", 1, 1, &rank));
  HXRT_ASSIGN_OR_RETURN(p.pads, read_transpose_ints(node, "pads", 0, 2, &rank));
  HXRT_ASSIGN_OR_RETURN(p.dilations, read_transpose_ints(node, "dilations", 1, 1, &rank));
  HXRT_ASSIGN_OR_RETURN(p.output_padding, read_transpose_ints(node, "output_padding", 0, 1, &rank));
  // output_shape may also hold N and C in front: keep the spatial extents.
  Result<std::vector<int64_t>> output_shape = node.attrs.get_ints("output_shape", {});
  if (!output_shape.ok()) return attr_read_error(node, "output_shape", output_shape.status());
  p.output_shape = *output_shape;
  if (rank != 0 && p.output_shape.size() == rank + 2)
    p.output_shape.erase(p.output_shape.begin(), p.output_shape.begin() + 2);
  if (!p.output_shape.empty() && rank != 0 && p.output_shape.size() != rank) {
    return attr_error(
        node, "output_shape",
        fmt::format("has {} values where other attributes have {} spatial axes", p.output_shape.size(), rank));
  }
  for (int64_t v : p.output_shape) {
    if (v < 1) return attr_error(node, "output_shape", fmt::format("values must be >= 1, got {}", v));
  }
  Result<int64_t> group = node.attrs.get_int("group", 1);
  if (!group.ok()) return attr_read_error(node, "group", group.status());
  if (*group < 1) return attr_error(node, "group", fmt::format("must be >= 1, got {}", *group));
  p.group = *group;
  Result<std::string> auto_pad = node.attrs.get_string("auto_pad", "NOTSET");
  if (!auto_pad.ok()) return attr_read_error(node, "auto_pad", auto_pad.status());
  if (*auto_pad != "NOTSET" && *auto_pad != "SAME_UPPER" && *auto_pad != "SAME_LOWER" && *auto_pad != "VALID") {
    return attr_error(node, "auto_pad",
                      fmt::format("must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got '{}'", *auto_pad));
  }
  p.auto_pad = *auto_pad;
  return p;
}

Result<ConvTransposeGeometry> conv_transpose_geometry(const ConvTransposeParams& params, const Shape& x,
                                                      const Shape& w) {
  const int k = x.rank() - 2;
  if (k < 1 || k > kMaxPoolSpatialDims || w.rank() != x.rank()) {
    return invalid_argument(
        "ConvTranspose needs X [N, C, D1..Dk] and W [C, M/group, k1..kk] with k in 1..{}, got X {} "
        "and W {}",
        kMaxPoolSpatialDims, x, w);
  }
  const size_t ku = static_cast<size_t>(k);
  auto attr_rank_ok = [ku](const std::vector<int64_t>& v, size_t per_axis) {
    return v.empty() || v.size() == ku * per_axis;
  };
  if (!attr_rank_ok(params.kernel_shape, 1) || !attr_rank_ok(params.strides, 1) || !attr_rank_ok(params.pads, 2) ||
      !attr_rank_ok(params.dilations, 1) || !attr_rank_ok(params.output_padding, 1) ||
      !(attr_rank_ok(params.output_shape, 1) || params.output_shape.size() == ku + 2)) {
    return invalid_argument("ConvTranspose attributes ({}) do not have {} spatial axes like X {}", params.to_string(),
                            k, x);
  }
  ConvTransposeGeometry g;
  g.n = x.dim(0);
  g.c = x.dim(1);
  g.group = params.group;
  g.m = w.dim(1) * params.group;
  if (w.dim(0) != g.c || g.c % g.group != 0) {
    return invalid_argument("ConvTranspose channels: X {} has C={}, W {} must be [C, M/group, ...] with group={}", x,
                            g.c, w, g.group);
  }
  const size_t shape_offset = params.output_shape.size() == ku + 2 ? 2 : 0;  // output_shape with N and C
  std::vector<int64_t> out_dims = {g.n, g.m};
  for (size_t i = 0; i < ku; ++i) {
    const size_t slot = static_cast<size_t>(kMaxPoolSpatialDims) - ku + i;
    const int axis = static_cast<int>(i) + 2;
    const int64_t kernel = w.dim(axis);
    if (!params.kernel_shape.empty() && params.kernel_shape[i] != kernel) {
      return invalid_argument("ConvTranspose attribute 'kernel_shape' [{}] differs from W {}",
                              fmt::join(params.kernel_shape, ", "), w);
    }
    const int64_t in = x.dim(axis);
    const int64_t stride = params.strides.empty() ? 1 : params.strides[i];
    const int64_t dilation = params.dilations.empty() ? 1 : params.dilations[i];
    const int64_t extra = params.output_padding.empty() ? 0 : params.output_padding[i];
    const int64_t full = stride * (in - 1) + extra + dilation * (kernel - 1) + 1;  // the output without pads
    const bool same = params.auto_pad == "SAME_UPPER" || params.auto_pad == "SAME_LOWER";
    int64_t out = 0;
    int64_t pad_begin = 0;
    if (!params.output_shape.empty() || same) {
      out = !params.output_shape.empty() ? params.output_shape[shape_offset + i] : in * stride;
      const int64_t total = full - out;
      pad_begin = params.auto_pad == "SAME_UPPER" ? floor_half(total) : total - floor_half(total);
    } else if (params.auto_pad == "NOTSET" && !params.pads.empty()) {
      pad_begin = params.pads[i];
      out = full - params.pads[i] - params.pads[i + ku];
    } else {
      out = full;
    }
    if (out < 1) {
      return invalid_argument("ConvTranspose output extent {} on spatial axis {} is not positive (X {}, W {}, {})", out,
                              i, x, w, params.to_string());
    }
    g.in[slot] = in;
    g.out[slot] = out;
    g.kernel[slot] = kernel;
    g.stride[slot] = stride;
    g.dilation[slot] = dilation;
    g.pad_begin[slot] = pad_begin;
    out_dims.push_back(out);
  }
  HXRT_ASSIGN_OR_RETURN(g.output_shape, Shape::make(out_dims));
  return g;
}

}  // namespace hxrt::ops
