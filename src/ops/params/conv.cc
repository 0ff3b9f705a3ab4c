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

}  // namespace hxrt::ops
