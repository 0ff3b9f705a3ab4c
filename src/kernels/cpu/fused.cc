#include "kernels/cpu/fused.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "kernels/cpu/conv.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/normalization.h"
#include "kernels/cpu/registration.h"

namespace hxrt::kernels::cpu {

void bias_activation(float* c, int64_t rows, int64_t n, int64_t ldc, const float* bias, Activation activation) {
  for (int64_t i = 0; i < rows; ++i) {
    float* row = c + i * ldc;
    for (int64_t j = 0; j < n; ++j) row[j] += bias[j];
    switch (activation) {
      case Activation::kNone: break;
      case Activation::kGelu: gelu(row, row, n, /*tanh_approximation=*/false); break;
      case Activation::kGeluTanh: gelu(row, row, n, /*tanh_approximation=*/true); break;
    }
  }
}

void rmsnorm_mul(const float* x, const float* weight, int64_t rows, int64_t d, float epsilon, float* y,
                 ThreadPool* pool) {
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, d));
  run_chunks(pool, rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) rms_norm_mul_row(x + r * d, weight, y + r * d, d, epsilon);
  });
}

void swiglu(const float* gate, const float* up, int64_t count, float* y, ThreadPool* pool) {
  run_chunks(pool, count, 16384, [&](int64_t begin, int64_t end) {
    silu_mul(gate + begin, up + begin, y + begin, end - begin);
  });
}

// ---------------------------------------------------------------------------------------------------------------
// Kernels
namespace {

constexpr std::string_view kFusedDomain = "hxrt.fused";

Status require_f32(const ops::TensorRef& t, std::string_view name) {
  if (t.dtype != DType::kF32) return invalid_argument("input '{}' must be f32, got {}", name, t.dtype);
  return ok_status();
}

// ConvBnRelu: inputs X, W, B (optional), scale, bias, mean, var.
Status conv_bn_relu_compute(const ops::CpuComputeContext& ctx) {
  const auto& params = ctx.params<ops::ConvBnReluParams>();
  HXRT_ASSIGN_OR_RETURN(const Conv2dGeometry g,
                        ops::conv2d_geometry(params.conv, ctx.input(0).shape, ctx.input(1).shape));
  static constexpr std::string_view kNames[] = {"X", "W", "B", "scale", "bias", "mean", "var"};
  for (size_t i = 0; i < 7; ++i) {
    if (i == 2 && !ctx.has_input(2)) continue;
    HXRT_RETURN_IF_ERROR(require_f32(ctx.input(i), kNames[i]));
    if (i >= 2 && ctx.input(i).num_elements() != g.m) {
      return invalid_argument("ConvBnRelu input '{}' {} must have M={} values", kNames[i], ctx.input(i).shape, g.m);
    }
  }
  const ops::TensorRef& y = ctx.output(0);
  if (y.dtype != DType::kF32 || !(y.shape == g.output_shape())) {
    return invalid_argument("ConvBnRelu output is {} {}, expected f32 {}", y.dtype, y.shape, g.output_shape());
  }
  // (M) folded BatchNormalization: y = (conv + B) · scale' + shift'.
  std::vector<float> scale(static_cast<size_t>(g.m));
  std::vector<float> shift(static_cast<size_t>(g.m));
  batchnorm_fold(g.m, ctx.input(3).data<float>(), ctx.input(4).data<float>(), ctx.input(5).data<float>(),
                 ctx.input(6).data<float>(), params.epsilon, scale.data(), shift.data());
  ChannelEpilogue epilogue;
  epilogue.bias = ctx.has_input(2) ? ctx.input(2).data<float>() : nullptr;
  epilogue.scale = scale.data();
  epilogue.shift = shift.data();
  epilogue.relu = params.relu;
  conv2d_nchw(g, ctx.input(0).data<float>(), ctx.input(1).data<float>(), epilogue, y.data<float>(),
              ctx.tiling().get("tile_cols", 256), &ctx.pool());
  return ok_status();
}

Status matmul_bias_compute(const ops::CpuComputeContext& ctx) {
  const auto& params = ctx.params<ops::MatMulBiasParams>();
  const ops::TensorRef& b = ctx.input(1);
  const ops::TensorRef& bias = ctx.input(2);
  HXRT_RETURN_IF_ERROR(require_f32(bias, "bias"));
  if (b.shape.rank() < 2 || bias.num_elements() != b.shape.dim(-1)) {
    return invalid_argument("MatMulBias bias {} must have N values for B {}", bias.shape, b.shape);
  }
  const float* bias_data = bias.data<float>();
  const Activation activation = params.activation;
  const RowBlockEpilogue epilogue = [bias_data, activation](float* c, int64_t rows, int64_t cols, int64_t ldc,
                                                             int64_t col0) {
    bias_activation(c, rows, cols, ldc, bias_data + col0, activation);
  };
  return matmul_compute(ctx, MatMulImpl::kAuto, &epilogue);
}

Status rmsnorm_mul_compute(const ops::CpuComputeContext& ctx) {
  const float epsilon = ctx.params<ops::EpsilonParams>().epsilon;
  const ops::TensorRef& x = ctx.input(0);
  const ops::TensorRef& weight = ctx.input(1);
  const ops::TensorRef& y = ctx.output(0);
  HXRT_RETURN_IF_ERROR(require_f32(x, "X"));
  HXRT_RETURN_IF_ERROR(require_f32(weight, "weight"));
  if (x.shape.rank() < 1 || weight.num_elements() != x.shape.dim(-1) || !(y.shape == x.shape)) {
    return invalid_argument("RMSNormMul: X {}, weight {} and Y {} do not fit", x.shape, weight.shape, y.shape);
  }
  const int64_t d = x.shape.dim(-1);
  const int64_t rows = d == 0 ? 0 : x.num_elements() / d;
  rmsnorm_mul(x.data<float>(), weight.data<float>(), rows, d, epsilon, y.data<float>(), &ctx.pool());
  return ok_status();
}

Status swiglu_compute(const ops::CpuComputeContext& ctx) {
  const ops::TensorRef& gate = ctx.input(0);
  const ops::TensorRef& up = ctx.input(1);
  const ops::TensorRef& y = ctx.output(0);
  HXRT_RETURN_IF_ERROR(require_f32(gate, "gate"));
  HXRT_RETURN_IF_ERROR(require_f32(up, "up"));
  if (!(gate.shape == up.shape) || !(y.shape == gate.shape)) {
    return invalid_argument("SwiGLU: gate {}, up {} and Y {} must have one shape", gate.shape, up.shape, y.shape);
  }
  swiglu(gate.data<float>(), up.data<float>(), gate.num_elements(), y.data<float>(), &ctx.pool());
  return ok_status();
}

ops::KernelDef fused_def(std::string op_type, size_t inputs, std::string description) {
  ops::KernelDef def;
  def.op_type = op_type;
  def.domain = std::string(kFusedDomain);
  def.device = hal::DeviceKind::kCpu;
  def.input_dtypes.assign(inputs, {DType::kF32});
  def.kind = ops::KernelKind::kFused;
  def.name = std::move(op_type);
  def.priority = 10;
  def.description = std::move(description);
  return def;
}

}  // namespace

Status register_fused(ops::KernelRegistry& registry) {
  ops::KernelDef conv = fused_def("ConvBnRelu", 7, "im2col + sgemm with BN folded (and Relu) in the tile epilogue");
  conv.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_conv_bn_relu_params(node));
  };
  conv.tiling = [](const ops::TilingQuery& query) {
    return conv_tiling(query.params_as<ops::ConvBnReluParams>().conv, query);
  };
  conv.launch = ops::cpu_launch("ConvBnRelu", conv_bn_relu_compute);
  HXRT_RETURN_IF_ERROR(registry.add(std::move(conv)));

  ops::KernelDef matmul_bias =
      fused_def("MatMulBias", 3, "MatMul's sgemm per M- and N-block, bias and activation applied to each block in "
                                 "cache");
  matmul_bias.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_matmul_bias_params(node));
  };
  matmul_bias.tiling = matmul_tiling;
  matmul_bias.launch = ops::cpu_launch("MatMulBias", matmul_bias_compute);
  HXRT_RETURN_IF_ERROR(registry.add(std::move(matmul_bias)));

  ops::KernelDef rms = fused_def("RMSNormMul", 2, "RMSNorm and the weight multiply in one pass per row");
  rms.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_epsilon_params(node));
  };
  rms.launch = ops::cpu_launch("RMSNormMul", rmsnorm_mul_compute);
  HXRT_RETURN_IF_ERROR(registry.add(std::move(rms)));

  ops::KernelDef swiglu_def = fused_def("SwiGLU", 2, "silu(gate) · up in one pass");
  swiglu_def.launch = ops::cpu_launch("SwiGLU", swiglu_compute);
  return registry.add(std::move(swiglu_def));
}

}  // namespace hxrt::kernels::cpu
