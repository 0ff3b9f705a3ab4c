// OpenCL normalization and position kernels: RMSNorm, the fused RMSNormMul, Softmax, LayerNormalization and RoPE.
//
// RMSNorm(Mul), LayerNormalization and Softmax over the last axis run one work-group per row: the work-items stride
// through the row, then reduce in local memory (sums in acc_t, i.e. double where the device has it, as the CPU
// kernels do; LayerNormalization's row is every dim from its axis on). Softmax
// over an inner axis runs one work-item per (outer, column) walking the axis. RoPE runs one work-item per (token row,
// pair), computing the pair's angle once in acc_t like the CPU's rope_cos_sin and rotating it in every head.
#include <algorithm>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "hxrt/ops/params/normalization.h"
#include "kernels/opencl/jit_program.h"
#include "kernels/opencl/registration.h"

namespace hxrt::kernels::opencl {
namespace {

constexpr int64_t kMaxRowGroup = 128;  // work-items per row of a row reduction
constexpr uint32_t kGroup = 128;       // work-items per group of the per-element kernels

constexpr std::string_view kSource = R"CLC(
#ifndef WG
#define WG 64
#endif
#ifndef HAS_WEIGHT
#define HAS_WEIGHT 1
#endif
#ifndef NEOX
#define NEOX 0
#endif
#ifndef POS_I64
#define POS_I64 0
#endif

// partial[0] = the sum of partial[0..WG); every work-item of the group must call it.
inline void reduce_sum(__local acc_t* partial) {
  const int lid = get_local_id(0);
  for (int stride = WG / 2; stride > 0; stride /= 2) {
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < stride) partial[lid] += partial[lid + stride];
  }
  barrier(CLK_LOCAL_MEM_FENCE);
}

// y[row, :] = x[row, :] / sqrt(mean(x²) + epsilon) (· weight when HAS_WEIGHT); one group per row.
__kernel void rms_norm(__global const uchar* x_buf, ulong x_off, __global const uchar* w_buf, ulong w_off,
                       __global uchar* y_buf, ulong y_off, int d, float epsilon) {
  __local acc_t partial[WG];
  const int lid = get_local_id(0);
  const long row = get_group_id(0);
  __global const float* x = HX_AT(const float, x_buf, x_off) + row * d;
  __global float* y = HX_AT(float, y_buf, y_off) + row * d;
  acc_t sum = 0;
  for (int i = lid; i < d; i += WG) {
    const acc_t v = x[i];
    sum += v * v;
  }
  partial[lid] = sum;
  reduce_sum(partial);
  const float inv = (float)((acc_t)1 / sqrt(partial[0] / (acc_t)d + (acc_t)epsilon));
#if HAS_WEIGHT
  __global const float* w = HX_AT(const float, w_buf, w_off);
  for (int i = lid; i < d; i += WG) y[i] = x[i] * inv * w[i];
#else
  for (int i = lid; i < d; i += WG) y[i] = x[i] * inv;
#endif
}

// LayerNormalization over rows of d values: mean, then the sum of squared deviations (two passes, in acc_t, as the
// CPU's layer_norm_row), y = (x - mean) · inv · scale (+ bias); one group per row.
__kernel void layer_norm(__global const uchar* x_buf, ulong x_off, __global const uchar* s_buf, ulong s_off,
                         __global const uchar* b_buf, ulong b_off, __global uchar* y_buf, ulong y_off, int d,
                         float epsilon, int has_bias) {
  __local acc_t partial[WG];
  const int lid = get_local_id(0);
  const long row = get_group_id(0);
  __global const float* x = HX_AT(const float, x_buf, x_off) + row * d;
  __global float* y = HX_AT(float, y_buf, y_off) + row * d;
  acc_t sum = 0;
  for (int i = lid; i < d; i += WG) sum += (acc_t)x[i];
  partial[lid] = sum;
  reduce_sum(partial);
  const acc_t mean = partial[0] / (acc_t)d;
  barrier(CLK_LOCAL_MEM_FENCE);  // every work-item has read partial[0] before it is overwritten
  acc_t squares = 0;
  for (int i = lid; i < d; i += WG) {
    const acc_t deviation = (acc_t)x[i] - mean;
    squares += deviation * deviation;
  }
  partial[lid] = squares;
  reduce_sum(partial);
  const float inv = (float)((acc_t)1 / sqrt(partial[0] / (acc_t)d + (acc_t)epsilon));
  const float mean_f = (float)mean;
  __global const float* scale = HX_AT(const float, s_buf, s_off);
  if (has_bias) {
    __global const float* bias = HX_AT(const float, b_buf, b_off);
    for (int i = lid; i < d; i += WG) y[i] = (x[i] - mean_f) * inv * scale[i] + bias[i];
  } else {
    for (int i = lid; i < d; i += WG) y[i] = (x[i] - mean_f) * inv * scale[i];
  }
}

// Softmax over the last axis (inner == 1); one group per row.
__kernel void softmax_rows(__global const uchar* x_buf, ulong x_off, __global uchar* y_buf, ulong y_off, int n) {
  __local float maxima[WG];
  __local acc_t partial[WG];
  const int lid = get_local_id(0);
  const long row = get_group_id(0);
  __global const float* x = HX_AT(const float, x_buf, x_off) + row * n;
  __global float* y = HX_AT(float, y_buf, y_off) + row * n;
  float m = -INFINITY;
  for (int i = lid; i < n; i += WG) m = x[i] > m ? x[i] : m;
  maxima[lid] = m;
  for (int stride = WG / 2; stride > 0; stride /= 2) {
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < stride && maxima[lid + stride] > maxima[lid]) maxima[lid] = maxima[lid + stride];
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  m = maxima[0];
  acc_t sum = 0;
  for (int i = lid; i < n; i += WG) {
    const float e = hx_exp(x[i] - m);
    y[i] = e;
    sum += e;
  }
  partial[lid] = sum;
  reduce_sum(partial);
  const float inv = (float)((acc_t)1 / partial[0]);
  for (int i = lid; i < n; i += WG) y[i] *= inv;
}

// Softmax over an inner axis: one work-item per (outer, column), walking axis_len values `inner` apart.
__kernel void softmax_columns(__global const uchar* x_buf, ulong x_off, __global uchar* y_buf, ulong y_off,
                              int outer, int axis_len, int inner) {
  const int gid = get_global_id(0);
  if (gid >= outer * inner) return;
  const long base = (long)(gid / inner) * axis_len * inner + gid % inner;
  __global const float* x = HX_AT(const float, x_buf, x_off) + base;
  __global float* y = HX_AT(float, y_buf, y_off) + base;
  float m = x[0];
  for (int a = 1; a < axis_len; ++a) m = x[(long)a * inner] > m ? x[(long)a * inner] : m;
  acc_t sum = 0;
  for (int a = 0; a < axis_len; ++a) {
    const float e = hx_exp(x[(long)a * inner] - m);
    y[(long)a * inner] = e;
    sum += e;
  }
  const float inv = (float)((acc_t)1 / sum);
  for (int a = 0; a < axis_len; ++a) y[(long)a * inner] *= inv;
}

// RoPE: one work-item per (row, pair p): p < rotary_dims / 2 computes its angle once and rotates that pair of every
// head; later p copy two tail values of every head.
__kernel void rope(__global const uchar* x_buf, ulong x_off, __global const uchar* pos_buf, ulong pos_off,
                   __global uchar* y_buf, ulong y_off, int rows, int n_tokens, int n_heads, int head_dim,
                   int rotary_dims, float theta) {
  const int pairs = (head_dim + 1) / 2;
  const int gid = get_global_id(0);
  if (gid >= rows * pairs) return;
  const int p = gid % pairs;
  const int row = gid / pairs;
  const int t = row % n_tokens;
  __global const float* x = HX_AT(const float, x_buf, x_off) + (long)row * n_heads * head_dim;
  __global float* y = HX_AT(float, y_buf, y_off) + (long)row * n_heads * head_dim;
  const int half_dims = rotary_dims / 2;
  if (p < half_dims) {
#if POS_I64
    const long position = HX_AT(const long, pos_buf, pos_off)[t];
#else
    const long position = HX_AT(const int, pos_buf, pos_off)[t];
#endif
    const acc_t freq = pow((acc_t)theta, (acc_t)(-2.0) * (acc_t)p / (acc_t)rotary_dims);
    const acc_t angle = (acc_t)position * freq;
    const float c = (float)cos(angle);
    const float s = (float)sin(angle);
    const int i0 = NEOX ? p : 2 * p;
    const int i1 = i0 + (NEOX ? half_dims : 1);
    for (int h = 0; h < n_heads; ++h) {
      const float x0 = x[h * head_dim + i0];
      const float x1 = x[h * head_dim + i1];
      y[h * head_dim + i0] = x0 * c - x1 * s;
      y[h * head_dim + i1] = x0 * s + x1 * c;
    }
  } else {
    const int e = rotary_dims + 2 * (p - half_dims);
    for (int h = 0; h < n_heads; ++h) {
      if (e < head_dim) y[h * head_dim + e] = x[h * head_dim + e];
      if (e + 1 < head_dim) y[h * head_dim + e + 1] = x[h * head_dim + e + 1];
    }
  }
}
)CLC";

// Work-items per row: a power of two, at most kMaxRowGroup, about a quarter of the row.
int64_t row_group(int64_t row) { return std::clamp<int64_t>(next_power_of_two(std::max<int64_t>(1, row / 4)), 1, kMaxRowGroup); }

// One group per row of the last axis.
Result<ops::Tiling> last_axis_tiling(const ops::TilingQuery& query) {
  const Shape& x = query.inputs[0].shape;
  const int64_t d = x.rank() == 0 ? 1 : x.dim(-1);
  const int64_t rows = d == 0 ? 0 : x.num_elements() / d;
  HXRT_RETURN_IF_ERROR(check_int32(rows, "rows"));
  HXRT_RETURN_IF_ERROR(check_int32(d, "row length"));
  const int64_t group = row_group(d);
  ops::Tiling tiling;
  tiling.launch.grid = {static_cast<uint32_t>(std::max<int64_t>(1, rows)), 1, 1};
  tiling.launch.block = {static_cast<uint32_t>(group), 1, 1};
  tiling.values = {{"wg", group}};
  return tiling;
}

ops::KernelDef rms_kernel(std::shared_ptr<const JitProgram> program, bool fused) {
  ops::KernelDef def = fused ? opencl_def("RMSNormMul", "hxrt.fused", 1, "RMSNormMul",
                                          "one group per row: sum of squares in double, weight multiply in the same pass")
                             : opencl_def("RMSNorm", "hxrt", 1, "RMSNormF32", "one group per row, sum of squares in double");
  if (fused) {
    def.kind = ops::KernelKind::kFused;
    def.priority = 10;
  }
  def.input_dtypes.assign(fused ? 2 : 1, {DType::kF32});
  def.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_epsilon_params(node));
  };
  def.tiling = last_axis_tiling;
  def.launch = [program, fused](hal::Stream& stream, const ops::KernelLaunch& launch) -> Status {
    const ops::TensorRef& x = launch.inputs[0];
    const ops::TensorRef& y = launch.outputs[0];
    if (x.shape.rank() < 1 || !(y.shape == x.shape)) return invalid_argument("RMSNorm: X {} and Y {} do not fit", x.shape, y.shape);
    const int64_t d = x.shape.dim(-1);
    if (fused && launch.inputs[1].num_elements() != d) {
      return invalid_argument("RMSNormMul: weight {} must hold the {} values of X's last axis", launch.inputs[1].shape, d);
    }
    if (y.num_elements() == 0) return ok_status();
    const ops::TensorRef& w = fused ? launch.inputs[1] : x;  // unread without a weight
    std::vector<hal::KernelArg> args;
    add_tensor_arg(args, x);
    add_tensor_arg(args, w);
    add_tensor_arg(args, y);
    args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(d)));
    args.push_back(hal::KernelArg::scalar(launch.params_as<ops::EpsilonParams>().epsilon));
    const std::string options = fmt::format("-D HAS_WEIGHT={}{}", fused ? 1 : 0, tiling_defines(*launch.tiling, {"wg"}));
    return launch_kernel(stream, *program, "rms_norm", options, launch.tiling->launch, args);
  };
  return def;
}

ops::KernelDef softmax_kernel(std::shared_ptr<const JitProgram> program) {
  ops::KernelDef def = opencl_def("Softmax", "", 13, "SoftmaxF32",
                                  "one group per row (last axis) or one work-item per column; sums in double");
  def.input_dtypes = {{DType::kF32}};
  def.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_axis_params(node, -1));
  };
  def.tiling = [](const ops::TilingQuery& query) -> Result<ops::Tiling> {
    const Shape& x = query.inputs[0].shape;
    HXRT_ASSIGN_OR_RETURN(const ops::SoftmaxGeometry g,
                          ops::softmax_geometry(x, query.params_as<ops::AxisParams>().axis));
    HXRT_RETURN_IF_ERROR(check_int32(x.num_elements(), "elements"));
    ops::Tiling tiling;
    tiling.geometry = std::make_shared<ops::SoftmaxGeometry>(g);
    if (g.inner == 1) {
      const int64_t group = row_group(g.axis_len);
      tiling.launch.grid = {static_cast<uint32_t>(std::max<int64_t>(1, g.outer)), 1, 1};
      tiling.launch.block = {static_cast<uint32_t>(group), 1, 1};
      tiling.values = {{"rows", 1}, {"wg", group}};
    } else {
      tiling.launch = launch_1d(g.outer * g.inner, kGroup);
      tiling.values = {{"rows", 0}, {"wg", kGroup}};
    }
    return tiling;
  };
  def.launch = [program](hal::Stream& stream, const ops::KernelLaunch& launch) -> Status {
    const ops::TensorRef& x = launch.inputs[0];
    const ops::TensorRef& y = launch.outputs[0];
    if (y.num_elements() == 0) return ok_status();
    const auto& g = launch.tiling->geometry_as<ops::SoftmaxGeometry>();
    std::vector<hal::KernelArg> args;
    add_tensor_arg(args, x);
    add_tensor_arg(args, y);
    if (launch.tiling->get("rows") == 1) {
      args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(g.axis_len)));
      return launch_kernel(stream, *program, "softmax_rows", tiling_defines(*launch.tiling, {"wg"}), launch.tiling->launch,
                           args);
    }
    args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(g.outer)));
    args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(g.axis_len)));
    args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(g.inner)));
    return launch_kernel(stream, *program, "softmax_columns", "", launch.tiling->launch, args);
  };
  return def;
}

ops::KernelDef layer_norm_kernel(std::shared_ptr<const JitProgram> program) {
  ops::KernelDef def = opencl_def("LayerNormalization", "", 17, "LayerNormalizationF32",
                                  "one group per row of dims axis..end, mean and variance in double");
  def.input_dtypes = {{DType::kF32}, {DType::kF32}, {DType::kF32}};
  // Y only: the optional Mean and InvStdDev outputs (training graphs) are the CPU kernel's.
  def.supports = [](const graph::Graph& graph, const graph::Node& node, std::string* why_not) {
    for (size_t i = 1; i < node.outputs.size(); ++i) {
      if (!graph.value(node.outputs[i]).consumers.empty() || graph.value(node.outputs[i]).is_output) {
        *why_not = "the Mean and InvStdDev outputs are not computed by the OpenCL kernel";
        return false;
      }
    }
    return true;
  };
  def.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_layer_norm_params(node));
  };
  def.tiling = [](const ops::TilingQuery& query) -> Result<ops::Tiling> {
    HXRT_ASSIGN_OR_RETURN(
        const ops::LayerNormGeometry g,
        ops::layer_norm_geometry(query.inputs[0].shape, query.params_as<ops::LayerNormParams>().axis));
    HXRT_RETURN_IF_ERROR(check_int32(g.rows, "rows"));
    HXRT_RETURN_IF_ERROR(check_int32(g.d, "row length"));
    const int64_t group = row_group(g.d);
    ops::Tiling tiling;
    tiling.geometry = std::make_shared<ops::LayerNormGeometry>(g);
    tiling.launch.grid = {static_cast<uint32_t>(std::max<int64_t>(1, g.rows)), 1, 1};
    tiling.launch.block = {static_cast<uint32_t>(group), 1, 1};
    tiling.values = {{"wg", group}};
    return tiling;
  };
  def.launch = [program](hal::Stream& stream, const ops::KernelLaunch& launch) -> Status {
    const auto& params = launch.params_as<ops::LayerNormParams>();
    const ops::TensorRef& x = launch.inputs[0];
    const ops::TensorRef& scale = launch.inputs[1];
    const ops::TensorRef& y = launch.outputs[0];
    if (!(y.shape == x.shape)) return invalid_argument("LayerNormalization: X {} and Y {} differ", x.shape, y.shape);
    if (y.num_elements() == 0) return ok_status();
    const auto& g = launch.tiling->geometry_as<ops::LayerNormGeometry>();
    if (scale.num_elements() != g.d) {
      return invalid_argument("LayerNormalization: Scale {} has {} elements, the normalised dims of X {} have {}",
                              scale.shape, scale.num_elements(), x.shape, g.d);
    }
    const bool has_bias = launch.inputs.size() > 2 && launch.inputs[2].view.buffer != nullptr;
    if (has_bias && launch.inputs[2].num_elements() != g.d) {
      return invalid_argument("LayerNormalization: B {} has {} elements, the normalised dims of X {} have {}",
                              launch.inputs[2].shape, launch.inputs[2].num_elements(), x.shape, g.d);
    }
    std::vector<hal::KernelArg> args;
    add_tensor_arg(args, x);
    add_tensor_arg(args, scale);
    add_tensor_arg(args, has_bias ? launch.inputs[2] : scale);  // unread without a bias
    add_tensor_arg(args, y);
    args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(g.d)));
    args.push_back(hal::KernelArg::scalar(params.epsilon));
    args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(has_bias ? 1 : 0)));
    return launch_kernel(stream, *program, "layer_norm", tiling_defines(*launch.tiling, {"wg"}), launch.tiling->launch,
                         args);
  };
  return def;
}

int64_t rope_items(const ops::RopeGeometry& g) {
  return g.rows * ((g.head_dim + 1) / 2);
}

ops::KernelDef rope_kernel(std::shared_ptr<const JitProgram> program) {
  ops::KernelDef def = opencl_def("RoPE", "hxrt", 1, "RoPEF32",
                                  "one work-item per (row, pair) over all heads, angle in double; normal or neox, i32/i64 positions");
  def.input_dtypes = {{DType::kF32}, {DType::kI32, DType::kI64}};
  def.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_rope_params(node));
  };
  def.tiling = [](const ops::TilingQuery& query) -> Result<ops::Tiling> {
    HXRT_ASSIGN_OR_RETURN(const ops::RopeGeometry g, ops::rope_geometry(query.params_as<ops::RopeParams>(),
                                                                        query.inputs[0].shape, query.inputs[1].shape));
    HXRT_RETURN_IF_ERROR(check_int32(rope_items(g), "RoPE work-items"));
    ops::Tiling tiling;
    tiling.launch = launch_1d(rope_items(g), kGroup);
    tiling.values = {{"wg", kGroup}};
    tiling.geometry = std::make_shared<ops::RopeGeometry>(g);
    return tiling;
  };
  def.launch = [program](hal::Stream& stream, const ops::KernelLaunch& launch) -> Status {
    const auto& params = launch.params_as<ops::RopeParams>();
    const ops::TensorRef& x = launch.inputs[0];
    const ops::TensorRef& positions = launch.inputs[1];
    const auto& g = launch.tiling->geometry_as<ops::RopeGeometry>();
    if (rope_items(g) == 0) return ok_status();
    std::vector<hal::KernelArg> args;
    add_tensor_arg(args, x);
    add_tensor_arg(args, positions);
    add_tensor_arg(args, launch.outputs[0]);
    for (int64_t v : {g.rows, g.n_tokens, g.n_heads, g.head_dim, g.rotary_dims}) {
      args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(v)));
    }
    args.push_back(hal::KernelArg::scalar(params.theta));
    const std::string options = fmt::format("-D NEOX={} -D POS_I64={}", params.mode == ops::RopeMode::kNeox ? 1 : 0,
                                            positions.dtype == DType::kI64 ? 1 : 0);
    return launch_kernel(stream, *program, "rope", options, launch.tiling->launch, args);
  };
  return def;
}

}  // namespace

Status register_normalization(ops::KernelRegistry& registry) {
  auto program = std::make_shared<const JitProgram>("hxrt_normalization", kSource);
  HXRT_RETURN_IF_ERROR(registry.add(rms_kernel(program, /*fused=*/false)));
  HXRT_RETURN_IF_ERROR(registry.add(rms_kernel(program, /*fused=*/true)));
  HXRT_RETURN_IF_ERROR(registry.add(softmax_kernel(program)));
  HXRT_RETURN_IF_ERROR(registry.add(layer_norm_kernel(program)));
  return registry.add(rope_kernel(program));
}

}  // namespace hxrt::kernels::opencl
