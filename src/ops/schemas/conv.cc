// Schemas of the convolution ops (docs/ops.md, "Convolution"): Conv (2-D), BatchNormalization (inference) and
// ConvTranspose (1-D to 3-D, docs/onnx_ops/pool.md).
// infer_conv2d_shape is shared with the fused ConvBnRelu (fused.cc).

#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hxrt/ops/params/conv.h"
#include "ops/schemas/schemas.h"

namespace hxrt::ops::schemas {

namespace {

// One spatial output dim: floor((in + pads - effective kernel) / stride) + 1, or ceil(in / stride) for SAME.
Result<graph::Dim> spatial_dim(InferenceContext& ctx, const graph::Dim& in, int64_t pad_sum, int64_t effective_kernel,
                               int64_t stride, bool same, int axis) {
  if (same) return (in + graph::Dim(stride - 1)) / graph::Dim(stride);
  const int64_t offset = pad_sum - effective_kernel;
  if (in.is_static()) {
    if (in.value() + offset < 0) {
      return ctx.error(fmt::format("kernel (effective size {}) is larger than the padded input ({}) on axis {}",
                                   effective_kernel, in.value() + pad_sum, axis));
    }
    return graph::Dim((in.value() + offset) / stride + 1);
  }
  const graph::Dim span = offset >= 0 ? in + graph::Dim(offset) : in - graph::Dim(-offset);
  return span / graph::Dim(stride) + graph::Dim(1);
}

}  // namespace

// Output shape of a 2-D Conv-like node: X (input 0) [N, C, H, W], W (input 1) [M, C/group, kH, kW] and Conv's
// attributes. Also used by fused.cc.
Result<graph::SymShape> infer_conv2d_shape(InferenceContext& ctx) {
  const graph::SymShape& x = ctx.input(0).shape;
  const graph::SymShape& w = ctx.input(1).shape;
  if (x.rank() != 4 || w.rank() != 4) {
    return ctx.error(fmt::format("Conv is 2-D NCHW: 'X' {} must be [N, C, H, W] and 'W' {} [M, C/group, kH, kW]",
                                 x.to_string(), w.to_string()));
  }
  HXRT_ASSIGN_OR_RETURN(const ConvParams conv, parse_conv_params(ctx.node()));
  const std::vector<int64_t>& strides = conv.strides;
  const std::vector<int64_t>& dilations = conv.dilations;
  const std::vector<int64_t>& pads = conv.pads;
  // Kernel size: from W, which must be static there, cross-checked with kernel_shape when given.
  if (!w.dim(2).is_static() || !w.dim(3).is_static()) {
    return ctx.error(fmt::format("'W' {} must have static kernel dims", w.to_string()));
  }
  const int64_t kh = w.dim(2).value();
  const int64_t kw = w.dim(3).value();
  if (ctx.attrs().has("kernel_shape")) {
    HXRT_ASSIGN_OR_RETURN(const std::vector<int64_t> kernel_shape,
                          parse_conv_ints(ctx.node(), "kernel_shape", {}, 2, 1));
    if (kernel_shape[0] != kh || kernel_shape[1] != kw) {
      return ctx.error(fmt::format("attribute 'kernel_shape' [{}] differs from 'W' {}", fmt::join(kernel_shape, ", "),
                                   w.to_string()));
    }
  }
  HXRT_RETURN_IF_ERROR(ctx.require_equal(x.dim(1), w.dim(1) * graph::Dim(conv.group),
                                         fmt::format("channels C of 'X' {} and C/group·group of 'W' {} (group {})",
                                                     x.to_string(), w.to_string(), conv.group)));
  if (w.dim(0).is_static() && w.dim(0).value() % conv.group != 0) {
    return ctx.error(fmt::format("'W' {} has M={} output channels, not a multiple of group {}", w.to_string(),
                                 w.dim(0).value(), conv.group));
  }
  const bool same = conv.auto_pad == "SAME_UPPER" || conv.auto_pad == "SAME_LOWER";
  const bool valid = conv.auto_pad == "VALID";
  HXRT_ASSIGN_OR_RETURN(graph::Dim oh, spatial_dim(ctx, x.dim(2), valid ? 0 : pads[0] + pads[2],
                                                   dilations[0] * (kh - 1) + 1, strides[0], same, 2));
  HXRT_ASSIGN_OR_RETURN(graph::Dim ow, spatial_dim(ctx, x.dim(3), valid ? 0 : pads[1] + pads[3],
                                                   dilations[1] * (kw - 1) + 1, strides[1], same, 3));
  return graph::SymShape{x.dim(0), w.dim(0), std::move(oh), std::move(ow)};
}

namespace {

Status infer_conv(InferenceContext& ctx) {
  HXRT_ASSIGN_OR_RETURN(graph::SymShape out, infer_conv2d_shape(ctx));
  if (ctx.has_input(2)) {
    const graph::SymShape& b = ctx.input(2).shape;
    if (b.rank() != 1) return ctx.error(fmt::format("input 'B' {} must be [M]", b.to_string()));
    HXRT_RETURN_IF_ERROR(ctx.require_equal(b.dim(0), out.dim(1), "length of 'B' and output channels M of 'W'"));
  }
  ctx.set_output(0, graph::TensorDesc{ctx.input(0).dtype, std::move(out)});
  return ok_status();
}

Status infer_batchnorm(InferenceContext& ctx) {
  const graph::SymShape& x = ctx.input(0).shape;
  if (x.rank() < 2) return ctx.error(fmt::format("input 'X' {} must have rank >= 2 (N, C, ...)", x.to_string()));
  Result<int64_t> training = ctx.attrs().get_int("training_mode", 0);
  if (!training.ok()) return ctx.error(training.status().message());
  if (*training != 0) return ctx.error("training_mode = 1 is not supported (inference only)");
  static constexpr std::string_view kNames[] = {"scale", "B", "input_mean", "input_var"};
  for (size_t i = 1; i < 5; ++i) {
    const graph::SymShape& p = ctx.input(i).shape;
    if (p.rank() != 1) return ctx.error(fmt::format("input '{}' {} must be [C]", kNames[i - 1], p.to_string()));
    HXRT_RETURN_IF_ERROR(
        ctx.require_equal(p.dim(0), x.dim(1), fmt::format("length of '{}' and channels C of 'X'", kNames[i - 1])));
  }
  ctx.set_output(0, ctx.input(0));
  return ok_status();
}

Status infer_conv_transpose(InferenceContext& ctx) {
  HXRT_ASSIGN_OR_RETURN(const ConvTransposeParams p, parse_conv_transpose_params(ctx.node()));
  const graph::SymShape& x = ctx.input(0).shape;
  const graph::SymShape& w = ctx.input(1).shape;
  if (x.rank() < 3 || x.rank() > 2 + kMaxPoolSpatialDims || w.rank() != x.rank()) {
    return ctx.error(fmt::format("'X' {} must be [N, C, D1..Dk] (k = 1..3) and 'W' {} [C, M/group, k1..kk]",
                                 x.to_string(), w.to_string()));
  }
  if (!w.is_static()) return ctx.error(fmt::format("'W' {} must have a static shape", w.to_string()));
  HXRT_RETURN_IF_ERROR(ctx.require_equal(x.dim(1), w.dim(0), "channels C of 'X' and first dim of 'W'"));
  HXRT_ASSIGN_OR_RETURN(const Shape ws, w.resolve({}));
  // Resolve the geometry on X with its symbolic dims set to 1, then put back the symbolic dims that the output
  // depends on linearly (N; a spatial extent without output_shape).
  std::vector<int64_t> probe(static_cast<size_t>(x.rank()));
  for (int i = 0; i < x.rank(); ++i) probe[static_cast<size_t>(i)] = x.dim(i).is_static() ? x.dim(i).value() : 1;
  probe[1] = ws.dim(0);
  HXRT_ASSIGN_OR_RETURN(const Shape xs, Shape::make(probe));
  Result<ConvTransposeGeometry> g = conv_transpose_geometry(p, xs, ws);
  if (!g.ok()) return ctx.error(g.status().message());
  std::vector<graph::Dim> out = {x.dim(0), graph::Dim(g->m)};
  for (int i = 2; i < x.rank(); ++i) {
    const int64_t static_out = g->output_shape.dim(i);
    const graph::Dim& in = x.dim(i);
    if (in.is_static() || !p.output_shape.empty()) {
      out.emplace_back(static_out);
      continue;
    }
    // The extent is stride · in + (what it is for in = 1) - stride.
    const size_t slot = static_cast<size_t>(kMaxPoolSpatialDims - x.rank() + i);
    const int64_t stride = g->stride[slot];
    const int64_t offset = static_out - stride;
    const graph::Dim scaled = in * graph::Dim(stride);
    out.push_back(offset >= 0 ? scaled + graph::Dim(offset) : scaled - graph::Dim(-offset));
  }
  if (ctx.has_input(2)) {
    const graph::SymShape& b = ctx.input(2).shape;
    if (b.rank() != 1) return ctx.error(fmt::format("input 'B' {} must be [M]", b.to_string()));
    HXRT_RETURN_IF_ERROR(ctx.require_equal(b.dim(0), graph::Dim(g->m), "length of 'B' and output channels M"));
  }
  ctx.set_output(0, graph::TensorDesc{ctx.input(0).dtype, graph::SymShape(std::move(out))});
  return ok_status();
}

}  // namespace

// The attributes of Conv, also declared by ConvBnRelu (fused.cc).
std::vector<AttrSpec> conv2d_attr_specs() {
  return {{"strides", graph::AttrType::kInts, false, graph::Attribute(std::vector<int64_t>{1, 1})},
          {"pads", graph::AttrType::kInts, false, graph::Attribute(std::vector<int64_t>{0, 0, 0, 0})},
          {"dilations", graph::AttrType::kInts, false, graph::Attribute(std::vector<int64_t>{1, 1})},
          {"group", graph::AttrType::kInt, false, graph::Attribute(int64_t{1})},
          {"kernel_shape", graph::AttrType::kInts, false, std::nullopt},
          {"auto_pad", graph::AttrType::kString, false, graph::Attribute("NOTSET")}};
}

Status register_conv(OpSchemaRegistry& registry) {
  OpSchema conv;
  conv.op_type = "Conv";
  conv.since_version = 11;
  conv.inputs = {{"X"}, {"W"}, {.name = "B", .optional = true}};
  conv.outputs = {{"Y"}};
  conv.attrs = conv2d_attr_specs();
  conv.type_constraints = {{"T", float_types()}};
  conv.infer = infer_conv;
  conv.doc = "ONNX Conv, 2-D NCHW: strides, pads [top, left, bottom, right], dilations, group, auto_pad";
  HXRT_RETURN_IF_ERROR(registry.add(std::move(conv)));

  OpSchema bn;
  bn.op_type = "BatchNormalization";
  bn.since_version = 15;
  bn.inputs = {{"X"}, {"scale"}, {"B"}, {"input_mean"}, {"input_var"}};
  bn.outputs = {{"Y"}};
  bn.attrs = {{"epsilon", graph::AttrType::kFloat, false, graph::Attribute(1e-5)},
              {"momentum", graph::AttrType::kFloat, false, graph::Attribute(0.9)},
              {"training_mode", graph::AttrType::kInt, false, graph::Attribute(int64_t{0})}};
  bn.type_constraints = {{"T", float_types()}};
  bn.infer = infer_batchnorm;
  bn.doc = "inference: y = (x - mean) / sqrt(var + epsilon) · scale + B per channel (axis 1); momentum is ignored";
  HXRT_RETURN_IF_ERROR(registry.add(std::move(bn)));

  OpSchema transpose;
  transpose.op_type = "ConvTranspose";
  transpose.since_version = 11;
  transpose.inputs = {{"X"}, {"W"}, {.name = "B", .optional = true}};
  transpose.outputs = {{"Y"}};
  transpose.attrs = {{"kernel_shape", graph::AttrType::kInts, false, std::nullopt},
                     {"strides", graph::AttrType::kInts, false, std::nullopt},
                     {"pads", graph::AttrType::kInts, false, std::nullopt},
                     {"dilations", graph::AttrType::kInts, false, std::nullopt},
                     {"output_padding", graph::AttrType::kInts, false, std::nullopt},
                     {"output_shape", graph::AttrType::kInts, false, std::nullopt},
                     {"group", graph::AttrType::kInt, false, graph::Attribute(int64_t{1})},
                     {"auto_pad", graph::AttrType::kString, false, graph::Attribute("NOTSET")}};
  transpose.type_constraints = {{"T", float_types()}};
  transpose.infer = infer_conv_transpose;
  transpose.doc =
      "ONNX ConvTranspose, 1-D to 3-D: X [N, C, D...], W [C, M/group, k...]; strides, pads, dilations, "
      "output_padding, output_shape, group, auto_pad";
  return registry.add(std::move(transpose));
}

}  // namespace hxrt::ops::schemas
