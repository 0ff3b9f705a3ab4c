#include "kernels/cpu/conv.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

#include <fmt/ranges.h>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/registration.h"

namespace hxrt::kernels::cpu {

std::string ConvAttrs::to_string() const {
  return fmt::format("strides=[{}], pads=[{}], dilations=[{}], group={}, auto_pad={}", fmt::join(strides, ", "),
                     fmt::join(pads, ", "), fmt::join(dilations, ", "), group, auto_pad);
}

Result<ConvAttrs> parse_conv_attrs(const graph::AttributeMap& attrs) {
  ConvAttrs out;
  HXRT_ASSIGN_OR_RETURN(out.strides, attrs.get_ints("strides", {1, 1}));
  HXRT_ASSIGN_OR_RETURN(out.pads, attrs.get_ints("pads", {0, 0, 0, 0}));
  HXRT_ASSIGN_OR_RETURN(out.dilations, attrs.get_ints("dilations", {1, 1}));
  HXRT_ASSIGN_OR_RETURN(out.group, attrs.get_int("group", 1));
  HXRT_ASSIGN_OR_RETURN(out.auto_pad, attrs.get_string("auto_pad", "NOTSET"));
  if (out.strides.size() != 2 || out.dilations.size() != 2 || out.pads.size() != 4) {
    return invalid_argument("Conv is 2-D: strides and dilations need 2 values and pads 4, got {}", out.to_string());
  }
  for (int64_t v : out.strides) {
    if (v < 1) return invalid_argument("Conv strides must be >= 1, got {}", out.to_string());
  }
  for (int64_t v : out.dilations) {
    if (v < 1) return invalid_argument("Conv dilations must be >= 1, got {}", out.to_string());
  }
  for (int64_t v : out.pads) {
    if (v < 0) return invalid_argument("Conv pads must be >= 0, got {}", out.to_string());
  }
  if (out.group < 1) return invalid_argument("Conv group must be >= 1, got {}", out.group);
  if (out.auto_pad != "NOTSET" && out.auto_pad != "SAME_UPPER" && out.auto_pad != "SAME_LOWER" &&
      out.auto_pad != "VALID") {
    return invalid_argument("Conv auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got '{}'", out.auto_pad);
  }
  return out;
}

Result<Conv2dGeometry> conv2d_geometry(const ConvAttrs& attrs, const Shape& x, const Shape& w) {
  if (x.rank() != 4 || w.rank() != 4) {
    return invalid_argument("Conv is 2-D NCHW: X must be [N, C, H, W] and W [M, C/group, kH, kW], got X {} and W {}",
                            x, w);
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

namespace {

// Unfolds the patches of output positions [p0, p0 + cols) of one group's input xg [cg, h, w] into
// col [(cg·kh·kw), cols].
void im2col(const Conv2dGeometry& g, const float* xg, int64_t cg, int64_t p0, int64_t cols, float* col) {
  for (int64_t ci = 0; ci < cg; ++ci) {
    const float* plane = xg + ci * g.h * g.w;
    for (int64_t ki = 0; ki < g.kh; ++ki) {
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        float* dst = col + ((ci * g.kh + ki) * g.kw + kj) * cols;
        int64_t oy = p0 / g.ow;
        int64_t ox = p0 % g.ow;
        for (int64_t idx = 0; idx < cols; ++idx) {
          const int64_t iy = oy * g.stride_h - g.pad_top + ki * g.dilation_h;
          const int64_t ix = ox * g.stride_w - g.pad_left + kj * g.dilation_w;
          dst[idx] = (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w) ? plane[iy * g.w + ix] : 0.0f;
          if (++ox == g.ow) {
            ox = 0;
            ++oy;
          }
        }
      }
    }
  }
}

void apply_epilogue(const ChannelEpilogue& e, int64_t channel, float* row, int64_t cols) {
  const float bias = e.bias != nullptr ? e.bias[channel] : 0.0f;
  const float scale = e.scale != nullptr ? e.scale[channel] : 1.0f;
  const float shift = e.shift != nullptr ? e.shift[channel] : 0.0f;
  if (e.bias == nullptr && e.scale == nullptr && e.shift == nullptr && !e.relu) return;
  for (int64_t i = 0; i < cols; ++i) {
    float v = (row[i] + bias) * scale + shift;
    if (e.relu) v = std::max(v, 0.0f);
    row[i] = v;
  }
}

}  // namespace

void conv2d_nchw(const Conv2dGeometry& g, const float* x, const float* w, const ChannelEpilogue& epilogue, float* y,
                 int64_t tile_cols, ThreadPool* pool) {
  const int64_t cg = g.c / g.group;
  const int64_t mg = g.m / g.group;
  const int64_t ckk = cg * g.kh * g.kw;
  const int64_t ohw = g.oh * g.ow;
  if (g.n == 0 || g.m == 0 || ohw == 0) return;
  tile_cols = std::clamp<int64_t>(tile_cols, 1, ohw);
  const int64_t col_blocks = (ohw + tile_cols - 1) / tile_cols;
  const bool direct = g.kh == 1 && g.kw == 1 && g.stride_h == 1 && g.stride_w == 1 && g.pad_top == 0 &&
                      g.pad_left == 0 && g.oh == g.h && g.ow == g.w;
  auto body = [&](int64_t begin, int64_t end) {
    std::vector<float> col(direct ? 0 : static_cast<size_t>(ckk * tile_cols));  // (ckk, tile_cols)
    for (int64_t task = begin; task < end; ++task) {
      const int64_t image = task / (g.group * col_blocks);
      const int64_t gi = (task / col_blocks) % g.group;
      const int64_t p0 = (task % col_blocks) * tile_cols;
      const int64_t cols = std::min(tile_cols, ohw - p0);
      const float* xg = x + (image * g.c + gi * cg) * g.h * g.w;
      const float* wg = w + gi * mg * ckk;
      float* yg = y + (image * g.m + gi * mg) * ohw + p0;
      if (direct) {
        sgemm_blas(mg, cols, ckk, wg, ckk, xg + p0, g.h * g.w, yg, ohw);
      } else {
        im2col(g, xg, cg, p0, cols, col.data());
        sgemm_blas(mg, cols, ckk, wg, ckk, col.data(), cols, yg, ohw);
      }
      for (int64_t oc = 0; oc < mg; ++oc) apply_epilogue(epilogue, gi * mg + oc, yg + oc * ohw, cols);
    }
  };
  const int64_t tasks = g.n * g.group * col_blocks;
  if (pool != nullptr && tasks > 1) {
    pool->parallel_for(tasks, 1, body);
  } else {
    body(0, tasks);
  }
}

void batchnorm_fold(int64_t channels, const float* scale, const float* b, const float* mean, const float* var,
                    float epsilon, float* folded_scale, float* folded_shift) {
  for (int64_t c = 0; c < channels; ++c) {
    const float s = scale[c] / std::sqrt(var[c] + epsilon);
    folded_scale[c] = s;
    folded_shift[c] = b[c] - mean[c] * s;
  }
}

void batchnorm_apply(int64_t n, int64_t channels, int64_t inner, const float* x, const float* folded_scale,
                     const float* folded_shift, float* y, ThreadPool* pool) {
  auto body = [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      const int64_t c = plane % channels;
      const float s = folded_scale[c];
      const float t = folded_shift[c];
      const float* xp = x + plane * inner;
      float* yp = y + plane * inner;
      for (int64_t i = 0; i < inner; ++i) yp[i] = xp[i] * s + t;
    }
  };
  const int64_t planes = n * channels;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, inner));
  if (pool != nullptr && planes > grain) {
    pool->parallel_for(planes, grain, body);
  } else {
    body(0, planes);
  }
}

Result<ops::Tiling> conv_tiling(const ConvAttrs& attrs, const ops::TilingQuery& query) {
  if (query.inputs.size() < 2) return invalid_argument("Conv tiling needs X and W");
  HXRT_ASSIGN_OR_RETURN(const Conv2dGeometry g, conv2d_geometry(attrs, query.inputs[0].shape, query.inputs[1].shape));
  const int64_t units = query.device != nullptr && query.device->compute_units > 0 ? query.device->compute_units : 1;
  const int64_t ohw = std::max<int64_t>(1, g.oh * g.ow);
  const int64_t ckk = std::max<int64_t>(1, g.c / g.group * g.kh * g.kw);
  // A few tasks per thread, and an unfolded block of at most ~512 KiB so it stays in L2.
  const int64_t images = std::max<int64_t>(1, g.n * g.group);
  const int64_t wanted_blocks = std::max<int64_t>(1, (4 * units + images - 1) / images);
  int64_t tile_cols = (ohw + wanted_blocks - 1) / wanted_blocks;
  tile_cols = std::min(tile_cols, std::max<int64_t>(16, (512 * 1024 / 4) / ckk));
  tile_cols = std::clamp<int64_t>(tile_cols, 1, ohw);
  ops::Tiling tiling;
  tiling.values = {{"tile_cols", tile_cols}};
  tiling.launch.grid = {static_cast<uint32_t>((ohw + tile_cols - 1) / tile_cols),
                        static_cast<uint32_t>(std::min<int64_t>(images, UINT32_MAX)), 1};
  return tiling;
}

// ---------------------------------------------------------------------------------------------------------------
// Kernels
namespace {

struct ConvParams final : ops::KernelParams {
  ConvAttrs attrs;
  std::string to_string() const override { return attrs.to_string(); }
};

Status check_f32_input(const ops::CpuComputeContext& ctx, size_t i, std::string_view name) {
  const ops::TensorRef& t = ctx.input(i);
  if (t.dtype != DType::kF32) return invalid_argument("input '{}' must be f32, got {}", name, t.dtype);
  return ok_status();
}

Status conv_compute(const ops::CpuComputeContext& ctx) {
  const auto& params = ctx.params<ConvParams>();
  HXRT_RETURN_IF_ERROR(check_f32_input(ctx, 0, "X"));
  HXRT_RETURN_IF_ERROR(check_f32_input(ctx, 1, "W"));
  HXRT_ASSIGN_OR_RETURN(const Conv2dGeometry g, conv2d_geometry(params.attrs, ctx.input(0).shape, ctx.input(1).shape));
  const ops::TensorRef& y = ctx.output(0);
  if (y.dtype != DType::kF32 || !(y.shape == g.output_shape())) {
    return invalid_argument("Conv output is {} {}, expected f32 {}", y.dtype, y.shape, g.output_shape());
  }
  ChannelEpilogue epilogue;
  if (ctx.has_input(2)) {
    HXRT_RETURN_IF_ERROR(check_f32_input(ctx, 2, "B"));
    if (ctx.input(2).num_elements() != g.m) {
      return invalid_argument("Conv bias B {} must have M={} values", ctx.input(2).shape, g.m);
    }
    epilogue.bias = ctx.input(2).data<float>();
  }
  conv2d_nchw(g, ctx.input(0).data<float>(), ctx.input(1).data<float>(), epilogue, y.data<float>(),
              ctx.tiling().get("tile_cols", 256), &ctx.pool());
  return ok_status();
}

struct BatchNormParams final : ops::KernelParams {
  float epsilon = 1e-5f;
  std::string to_string() const override { return fmt::format("epsilon={}", epsilon); }
};

Status batchnorm_compute(const ops::CpuComputeContext& ctx) {
  const auto& params = ctx.params<BatchNormParams>();
  const ops::TensorRef& x = ctx.input(0);
  const ops::TensorRef& y = ctx.output(0);
  static constexpr std::string_view kNames[] = {"X", "scale", "B", "input_mean", "input_var"};
  for (size_t i = 0; i < 5; ++i) HXRT_RETURN_IF_ERROR(check_f32_input(ctx, i, kNames[i]));
  if (x.shape.rank() < 2) return invalid_argument("BatchNormalization X must have rank >= 2, got {}", x.shape);
  const int64_t channels = x.shape.dim(1);
  for (size_t i = 1; i < 5; ++i) {
    if (ctx.input(i).num_elements() != channels) {
      return invalid_argument("BatchNormalization input '{}' {} must have C={} values", kNames[i], ctx.input(i).shape,
                              channels);
    }
  }
  if (!(y.shape == x.shape) || y.dtype != DType::kF32) {
    return invalid_argument("BatchNormalization output {} {} differs from X {}", y.dtype, y.shape, x.shape);
  }
  std::vector<float> scale(static_cast<size_t>(channels));
  std::vector<float> shift(static_cast<size_t>(channels));
  batchnorm_fold(channels, ctx.input(1).data<float>(), ctx.input(2).data<float>(), ctx.input(3).data<float>(),
                 ctx.input(4).data<float>(), params.epsilon, scale.data(), shift.data());
  const int64_t n = x.shape.dim(0);
  const int64_t inner = channels == 0 || n == 0 ? 0 : x.num_elements() / (n * channels);
  batchnorm_apply(n, channels, inner, x.data<float>(), scale.data(), shift.data(), y.data<float>(), &ctx.pool());
  return ok_status();
}

}  // namespace

Status register_conv(ops::KernelRegistry& registry) {
  ops::KernelDef conv;
  conv.op_type = "Conv";
  conv.device = hal::DeviceKind::kCpu;
  conv.input_dtypes = {{DType::kF32}, {DType::kF32}, {DType::kF32}};
  conv.name = "Conv";
  conv.priority = 10;
  conv.description = "2-D NCHW convolution: im2col per output-column block + OpenBLAS sgemm, bias in the epilogue";
  conv.parse_attrs = [](const graph::Graph&, const graph::Node& node) -> Result<std::unique_ptr<ops::KernelParams>> {
    auto params = std::make_unique<ConvParams>();
    HXRT_ASSIGN_OR_RETURN(params->attrs, parse_conv_attrs(node.attrs));
    return std::unique_ptr<ops::KernelParams>(std::move(params));
  };
  conv.tiling = [](const ops::TilingQuery& query) -> Result<ops::Tiling> {
    if (query.params == nullptr) return invalid_argument("Conv tiling needs its params");
    return conv_tiling(static_cast<const ConvParams&>(*query.params).attrs, query);
  };
  conv.launch = ops::cpu_launch("Conv", conv_compute);
  HXRT_RETURN_IF_ERROR(registry.add(std::move(conv)));

  ops::KernelDef bn;
  bn.op_type = "BatchNormalization";
  bn.device = hal::DeviceKind::kCpu;
  bn.input_dtypes = {{DType::kF32}, {DType::kF32}, {DType::kF32}, {DType::kF32}, {DType::kF32}};
  bn.name = "BatchNormalization";
  bn.priority = 10;
  bn.description = "inference BatchNormalization folded to one scale and shift per channel";
  bn.parse_attrs = [](const graph::Graph&, const graph::Node& node) -> Result<std::unique_ptr<ops::KernelParams>> {
    auto params = std::make_unique<BatchNormParams>();
    HXRT_ASSIGN_OR_RETURN(const double epsilon, node.attrs.get_float("epsilon", 1e-5));
    params->epsilon = static_cast<float>(epsilon);
    return std::unique_ptr<ops::KernelParams>(std::move(params));
  };
  bn.launch = ops::cpu_launch("BatchNormalization", batchnorm_compute);
  return registry.add(std::move(bn));
}

}  // namespace hxrt::kernels::cpu
