// OpenCL 2-D convolution (NCHW) and inference BatchNormalization, and the fused ConvBnRelu.
//
// Conv is a direct kernel: one work-item per output element (image, channel, row, column) sums its group's C/group ×
// kH × kW window with fma (skipping the padding), then applies the per-channel epilogue of the CPU kernel
// (kernels/cpu/conv.h): y = (conv + B[c]) · scale'[c] + shift'[c], then max(y, 0) when relu, where scale' and shift'
// are BatchNormalization folded as the CPU's batchnorm_fold (scale / sqrt(var + epsilon), b - mean · scale'). The
// fold is recomputed per work-item from the BN inputs: four loads and a sqrt, cheaper than a launch of its own.
// BatchNormalization alone is y = x · scale' + shift', one work-item per element.
//
// The geometry (strides, pads, dilations, group, auto_pad) comes from the CPU's parse_conv_attrs and
// conv2d_geometry, so both devices accept and reject the same convolutions. Shapes are kernel arguments, not build
// options: one program serves every convolution. The results differ from the CPU's im2col + sgemm only in the
// order of the window sums (normalised error ~1e-7).
#include <algorithm>
#include <array>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "hxrt/ops/params/conv.h"
#include "kernels/opencl/jit_program.h"
#include "kernels/opencl/registration.h"

namespace hxrt::kernels::opencl {
namespace {

constexpr uint32_t kGroup = 128;

constexpr std::string_view kSource = R"CLC(
#define EPI_BIAS 1
#define EPI_BN 2
#define EPI_RELU 4

// BatchNormalization folded for channel c: (scale', shift'), as the CPU's batchnorm_fold.
inline float2 bn_fold(__global const uchar* s_buf, ulong s_off, __global const uchar* b_buf, ulong b_off,
                      __global const uchar* m_buf, ulong m_off, __global const uchar* v_buf, ulong v_off, int c,
                      float epsilon) {
  const float s = HX_AT(const float, s_buf, s_off)[c] / sqrt(HX_AT(const float, v_buf, v_off)[c] + epsilon);
  return (float2)(s, HX_AT(const float, b_buf, b_off)[c] - HX_AT(const float, m_buf, m_off)[c] * s);
}

// x_dims: (n, c, h, w); y_dims: (m, oh, ow, group); window: (kh, kw, stride_h, stride_w); offsets: (pad_top,
// pad_left, dilation_h, dilation_w). epilogue: EPI_* bits; the BN inputs are read only with EPI_BN.
__kernel void conv2d(__global const uchar* x_buf, ulong x_off, __global const uchar* w_buf, ulong w_off,
                     __global const uchar* bias_buf, ulong bias_off, __global const uchar* s_buf, ulong s_off,
                     __global const uchar* b_buf, ulong b_off, __global const uchar* m_buf, ulong m_off,
                     __global const uchar* v_buf, ulong v_off, __global uchar* y_buf, ulong y_off, int total,
                     int4 x_dims, int4 y_dims, int4 window, int4 offsets, float epsilon, int epilogue) {
  const int gid = get_global_id(0);
  if (gid >= total) return;
  const int ox = gid % y_dims.z;
  const int oy = gid / y_dims.z % y_dims.y;
  const int oc = gid / (y_dims.z * y_dims.y) % y_dims.x;
  const int image = gid / (y_dims.z * y_dims.y * y_dims.x);
  const int cg = x_dims.y / y_dims.w;                    // input channels per group
  const int first_channel = oc / (y_dims.x / y_dims.w) * cg;
  const int iy0 = oy * window.z - offsets.x;
  const int ix0 = ox * window.w - offsets.y;
  __global const float* x =
      HX_AT(const float, x_buf, x_off) + ((long)image * x_dims.y + first_channel) * x_dims.z * x_dims.w;
  __global const float* w = HX_AT(const float, w_buf, w_off) + (long)oc * cg * window.x * window.y;
  float acc = 0.0f;
  for (int ci = 0; ci < cg; ++ci) {
    __global const float* plane = x + (long)ci * x_dims.z * x_dims.w;
    __global const float* filter = w + ci * window.x * window.y;
    for (int ki = 0; ki < window.x; ++ki) {
      const int iy = iy0 + ki * offsets.z;
      if (iy < 0 || iy >= x_dims.z) continue;
      for (int kj = 0; kj < window.y; ++kj) {
        const int ix = ix0 + kj * offsets.w;
        if (ix >= 0 && ix < x_dims.w) acc = fma(plane[iy * x_dims.w + ix], filter[ki * window.y + kj], acc);
      }
    }
  }
  if (epilogue & EPI_BIAS) acc += HX_AT(const float, bias_buf, bias_off)[oc];
  if (epilogue & EPI_BN) {
    const float2 folded = bn_fold(s_buf, s_off, b_buf, b_off, m_buf, m_off, v_buf, v_off, oc, epsilon);
    acc = acc * folded.x + folded.y;
  }
  if (epilogue & EPI_RELU) acc = fmax(acc, 0.0f);
  HX_AT(float, y_buf, y_off)[gid] = acc;
}

// y = x · scale'[c] + shift'[c] over X [n, channels, inner...].
__kernel void batch_norm(__global const uchar* x_buf, ulong x_off, __global const uchar* s_buf, ulong s_off,
                         __global const uchar* b_buf, ulong b_off, __global const uchar* m_buf, ulong m_off,
                         __global const uchar* v_buf, ulong v_off, __global uchar* y_buf, ulong y_off, int total,
                         int channels, int inner, float epsilon) {
  const int gid = get_global_id(0);
  if (gid >= total) return;
  const float2 folded = bn_fold(s_buf, s_off, b_buf, b_off, m_buf, m_off, v_buf, v_off, gid / inner % channels,
                                epsilon);
  HX_AT(float, y_buf, y_off)[gid] = HX_AT(const float, x_buf, x_off)[gid] * folded.x + folded.y;
}
)CLC";

using Int4 = std::array<int32_t, 4>;

constexpr int kEpilogueBias = 1;
constexpr int kEpilogueBatchNorm = 2;
constexpr int kEpilogueRelu = 4;

// Conv's params, alone or inside ConvBnRelu's.
const ops::ConvParams& conv_params(const ops::KernelParams* params, bool fused) {
  return fused ? ops::params_as<ops::ConvBnReluParams>(params).conv : ops::params_as<ops::ConvParams>(params);
}

Result<ops::Conv2dGeometry> conv_geometry(const ops::ConvParams& params, const Shape& x, const Shape& w) {
  HXRT_ASSIGN_OR_RETURN(const ops::Conv2dGeometry g, ops::conv2d_geometry(params, x, w));
  HXRT_RETURN_IF_ERROR(check_int32(g.n * g.c * g.h * g.w, "Conv input elements"));
  HXRT_RETURN_IF_ERROR(check_int32(g.output_shape().num_elements(), "Conv output elements"));
  HXRT_RETURN_IF_ERROR(check_int32(w.num_elements(), "Conv weight elements"));
  return g;
}

Status require_f32(const ops::TensorRef& t, std::string_view name) {
  if (t.dtype != DType::kF32) return invalid_argument("input '{}' must be f32, got {}", name, t.dtype);
  return ok_status();
}

// Appends the four BN inputs (scale, bias, mean, var) starting at launch input `first`, each checked to hold
// `channels` f32 values; `op` names the kernel in errors.
Status add_bn_args(std::vector<hal::KernelArg>& args, const ops::KernelLaunch& launch, size_t first, int64_t channels,
                   std::string_view op) {
  static constexpr std::string_view kNames[] = {"scale", "bias", "mean", "var"};
  if (launch.inputs.size() < first + 4) return invalid_argument("{} needs inputs scale, bias, mean and var", op);
  for (size_t i = 0; i < 4; ++i) {
    const ops::TensorRef& t = launch.inputs[first + i];
    HXRT_RETURN_IF_ERROR(require_f32(t, kNames[i]));
    if (t.view.buffer == nullptr || t.num_elements() != channels) {
      return invalid_argument("{} input '{}' {} must have {} values", op, kNames[i], t.shape, channels);
    }
    add_tensor_arg(args, t);
  }
  return ok_status();
}

Status conv_launch(hal::Stream& stream, const JitProgram& program, const ops::KernelLaunch& launch, bool fused) {
  const std::string_view op = fused ? "ConvBnRelu" : "Conv";
  const float epsilon = fused ? launch.params_as<ops::ConvBnReluParams>().epsilon : 1e-5f;  // unread without BN
  const bool relu = fused && launch.params_as<ops::ConvBnReluParams>().relu;
  const ops::TensorRef& x = launch.inputs[0];
  const ops::TensorRef& w = launch.inputs[1];
  const ops::TensorRef& y = launch.outputs[0];
  HXRT_RETURN_IF_ERROR(require_f32(x, "X"));
  HXRT_RETURN_IF_ERROR(require_f32(w, "W"));
  const auto& g = launch.tiling->geometry_as<ops::Conv2dGeometry>();
  if (y.dtype != DType::kF32 || !(y.shape == g.output_shape())) {
    return invalid_argument("{} output is {} {}, expected f32 {}", op, y.dtype, y.shape, g.output_shape());
  }
  const bool has_bias = launch.inputs.size() > 2 && launch.inputs[2].view.buffer != nullptr;
  if (has_bias) {
    HXRT_RETURN_IF_ERROR(require_f32(launch.inputs[2], "B"));
    if (launch.inputs[2].num_elements() != g.m) {
      return invalid_argument("{} bias B {} must have M={} values", op, launch.inputs[2].shape, g.m);
    }
  }
  std::vector<hal::KernelArg> args;
  add_tensor_arg(args, x);
  add_tensor_arg(args, w);
  add_tensor_arg(args, has_bias ? launch.inputs[2] : x);  // unread without a bias
  if (fused) {
    HXRT_RETURN_IF_ERROR(add_bn_args(args, launch, 3, g.m, op));
  } else {
    for (int i = 0; i < 4; ++i) add_tensor_arg(args, x);  // unread without BN
  }
  add_tensor_arg(args, y);
  const int64_t total = y.num_elements();
  if (total == 0) return ok_status();
  args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(total)));
  const auto int4 = [](int64_t a, int64_t b, int64_t c, int64_t d) {
    return Int4{static_cast<int32_t>(a), static_cast<int32_t>(b), static_cast<int32_t>(c), static_cast<int32_t>(d)};
  };
  args.push_back(hal::KernelArg::scalar(int4(g.n, g.c, g.h, g.w)));
  args.push_back(hal::KernelArg::scalar(int4(g.m, g.oh, g.ow, g.group)));
  args.push_back(hal::KernelArg::scalar(int4(g.kh, g.kw, g.stride_h, g.stride_w)));
  args.push_back(hal::KernelArg::scalar(int4(g.pad_top, g.pad_left, g.dilation_h, g.dilation_w)));
  args.push_back(hal::KernelArg::scalar(epsilon));
  const int epilogue = (has_bias ? kEpilogueBias : 0) | (fused ? kEpilogueBatchNorm : 0) | (relu ? kEpilogueRelu : 0);
  args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(epilogue)));
  return launch_kernel(stream, program, "conv2d", "", launch.tiling->launch, args);
}

// One work-item per output element.
Result<ops::Tiling> elementwise_tiling(const ops::TilingQuery& query) {
  const int64_t n = query.outputs.empty() ? 0 : query.outputs[0].num_elements();
  HXRT_RETURN_IF_ERROR(check_int32(n, "elements"));
  ops::Tiling tiling;
  tiling.launch = launch_1d(n, kGroup);
  tiling.values = {{"wg", kGroup}};
  return tiling;
}

ops::KernelDef conv_kernel(std::shared_ptr<const JitProgram> program, bool fused) {
  ops::KernelDef def =
      fused ? opencl_def("ConvBnRelu", "hxrt.fused", 1, "ConvBnRelu",
                         "direct convolution, one work-item per output, BN folded (and Relu) in the epilogue")
            : opencl_def("Conv", "", 11, "Conv",
                         "direct 2-D NCHW convolution, one work-item per output, bias in the epilogue");
  def.input_dtypes.assign(fused ? 7 : 3, {DType::kF32});
  def.priority = 10;
  if (fused) def.kind = ops::KernelKind::kFused;
  def.parse_attrs = [fused](const graph::Graph&,
                            const graph::Node& node) -> Result<std::unique_ptr<ops::KernelParams>> {
    if (fused) return ops::boxed(ops::parse_conv_bn_relu_params(node));
    return ops::boxed(ops::parse_conv_params(node));
  };
  def.tiling = [fused](const ops::TilingQuery& query) -> Result<ops::Tiling> {
    if (query.inputs.size() < 2) return invalid_argument("Conv tiling needs X and W");
    HXRT_ASSIGN_OR_RETURN(const ops::Conv2dGeometry g, conv_geometry(conv_params(query.params, fused),
                                                                     query.inputs[0].shape, query.inputs[1].shape));
    HXRT_ASSIGN_OR_RETURN(ops::Tiling tiling, elementwise_tiling(query));
    tiling.geometry = std::make_shared<ops::Conv2dGeometry>(g);
    return tiling;
  };
  def.launch = [program, fused](hal::Stream& stream, const ops::KernelLaunch& launch) {
    return conv_launch(stream, *program, launch, fused);
  };
  return def;
}

Status batch_norm_launch(hal::Stream& stream, const JitProgram& program, const ops::KernelLaunch& launch) {
  const ops::TensorRef& x = launch.inputs[0];
  const ops::TensorRef& y = launch.outputs[0];
  HXRT_RETURN_IF_ERROR(require_f32(x, "X"));
  if (x.shape.rank() < 2) return invalid_argument("BatchNormalization X must have rank >= 2, got {}", x.shape);
  if (!(y.shape == x.shape) || y.dtype != DType::kF32) {
    return invalid_argument("BatchNormalization output {} {} differs from X {}", y.dtype, y.shape, x.shape);
  }
  const int64_t channels = x.shape.dim(1);
  HXRT_RETURN_IF_ERROR(check_int32(x.num_elements(), "BatchNormalization elements"));
  std::vector<hal::KernelArg> args;
  add_tensor_arg(args, x);
  HXRT_RETURN_IF_ERROR(add_bn_args(args, launch, 1, channels, "BatchNormalization"));
  add_tensor_arg(args, y);
  const int64_t total = x.num_elements();
  if (total == 0) return ok_status();
  const int64_t inner = total / (x.shape.dim(0) * channels);
  for (int64_t v : {total, channels, inner}) args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(v)));
  args.push_back(hal::KernelArg::scalar(launch.params_as<ops::EpsilonParams>().epsilon));
  return launch_kernel(stream, program, "batch_norm", "", launch.tiling->launch, args);
}

ops::KernelDef batch_norm_kernel(std::shared_ptr<const JitProgram> program) {
  ops::KernelDef def = opencl_def("BatchNormalization", "", 15, "BatchNormalization",
                                  "inference form, one work-item per element, scale and shift folded per channel");
  def.input_dtypes.assign(5, {DType::kF32});
  def.priority = 10;
  def.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_epsilon_params(node));
  };
  def.tiling = elementwise_tiling;
  def.launch = [program](hal::Stream& stream, const ops::KernelLaunch& launch) {
    return batch_norm_launch(stream, *program, launch);
  };
  return def;
}

}  // namespace

Status register_conv(ops::KernelRegistry& registry) {
  auto program = std::make_shared<const JitProgram>("hxrt_conv", kSource);
  HXRT_RETURN_IF_ERROR(registry.add(conv_kernel(program, /*fused=*/false)));
  HXRT_RETURN_IF_ERROR(registry.add(conv_kernel(program, /*fused=*/true)));
  return registry.add(batch_norm_kernel(program));
}

}  // namespace hxrt::kernels::opencl
