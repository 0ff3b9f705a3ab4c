// CUDA normalization and position kernels: RMSNorm, the fused RMSNormMul, Softmax, LayerNormalization and RoPE; the
// twins of kernels/opencl/normalization.cc, with the same tiling, checks and arithmetic.
//
// Geometry: RMSNorm(Mul), LayerNormalization and Softmax over the last axis run one block per row, of WG threads (a
// power of two, at most 128, about a quarter of the row); the threads stride through the row, then reduce in shared
// memory (LayerNormalization's row is every dim from its axis on). Softmax over an inner axis runs one thread per
// (outer, column) walking the axis. RoPE runs one thread per (token row, pair), computing the pair's angle once and
// rotating that pair in every head.
//
// Numerics (Note [Matching the CPU kernels on CUDA] in cuda_program.h): the sums are in double, as the CPU kernels'
// and the OpenCL kernels' acc_t; the reductions are the OpenCL kernels' local-memory trees (hx_block_sum_double halves
// the block as reduce_sum halves the group); the maximum keeps the CPU's `>` comparison; exp is hx_exp; the inverse
// norm is 1 / sqrt(...) in double rounded to float once; RoPE's frequency, angle, cos and sin are in double like the
// CPU's rope_cos_sin. No float expression is contracted (--fmad=false), so x * inv * w stays two roundings.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "hxrt/ops/params/normalization.h"
#include "kernels/cuda/registration.h"

namespace hxrt::kernels::cuda {
namespace {

constexpr int64_t kMaxRowGroup = 128;  // threads per row of a row reduction
constexpr uint32_t kGroup = 128;       // threads per block of the per-element kernels

constexpr std::string_view kSource = R"CUDA(
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
#if POS_I64
typedef long long hx_pos_t;
#else
typedef int hx_pos_t;
#endif

// y[row, :] = x[row, :] / sqrt(mean(x²) + epsilon) (· weight when HAS_WEIGHT); one block of WG threads per row.
extern "C" __global__ void rms_norm(const float* x, const float* w, float* y, int d, float epsilon) {
  __shared__ double partial[WG];
  const int lid = threadIdx.x;
  const long long row = blockIdx.x;
  x += row * d;
  y += row * d;
  double sum = 0;
  for (int i = lid; i < d; i += WG) {
    const double v = x[i];
    sum += v * v;
  }
  const double total = hx_block_sum_double(sum, partial);
  const float inv = (float)(1.0 / sqrt(total / (double)d + (double)epsilon));
#if HAS_WEIGHT
  for (int i = lid; i < d; i += WG) y[i] = x[i] * inv * w[i];
#else
  (void)w;
  for (int i = lid; i < d; i += WG) y[i] = x[i] * inv;
#endif
}

// LayerNormalization over rows of d values: mean, then the sum of squared deviations (two passes, in double, as the
// CPU's layer_norm_row), y = (x - mean) · inv · scale (+ bias); one block per row.
extern "C" __global__ void layer_norm(const float* x, const float* scale, const float* bias, float* y, int d,
                                      float epsilon, int has_bias) {
  __shared__ double partial[WG];
  const int lid = threadIdx.x;
  const long long row = blockIdx.x;
  x += row * d;
  y += row * d;
  double sum = 0;
  for (int i = lid; i < d; i += WG) sum += (double)x[i];
  const double mean = hx_block_sum_double(sum, partial) / (double)d;
  double squares = 0;
  for (int i = lid; i < d; i += WG) {
    const double deviation = (double)x[i] - mean;
    squares += deviation * deviation;
  }
  const double total = hx_block_sum_double(squares, partial);
  const float inv = (float)(1.0 / sqrt(total / (double)d + (double)epsilon));
  const float mean_f = (float)mean;
  if (has_bias) {
    for (int i = lid; i < d; i += WG) y[i] = (x[i] - mean_f) * inv * scale[i] + bias[i];
  } else {
    for (int i = lid; i < d; i += WG) y[i] = (x[i] - mean_f) * inv * scale[i];
  }
}

// Softmax over the last axis (inner == 1); one block per row.
extern "C" __global__ void softmax_rows(const float* x, float* y, int n) {
  __shared__ float maxima[WG];
  __shared__ double partial[WG];
  const int lid = threadIdx.x;
  const long long row = blockIdx.x;
  x += row * n;
  y += row * n;
  float m = -__int_as_float(0x7f800000);  // -inf: NVRTC has no INFINITY without math headers
  for (int i = lid; i < n; i += WG) m = x[i] > m ? x[i] : m;
  // The OpenCL kernel's tree with the CPU's `>` comparison (hx_block_max's fmaxf may pick either of +0 and -0).
  maxima[lid] = m;
  for (int stride = WG / 2; stride > 0; stride /= 2) {
    __syncthreads();
    if (lid < stride && maxima[lid + stride] > maxima[lid]) maxima[lid] = maxima[lid + stride];
  }
  __syncthreads();
  m = maxima[0];
  double sum = 0;
  for (int i = lid; i < n; i += WG) {
    const float e = hx_exp(x[i] - m);
    y[i] = e;
    sum += e;
  }
  const float inv = (float)(1.0 / hx_block_sum_double(sum, partial));
  for (int i = lid; i < n; i += WG) y[i] *= inv;
}

// Softmax over an inner axis: one thread per (outer, column), walking axis_len values `inner` apart.
extern "C" __global__ void softmax_columns(const float* x, float* y, int outer, int axis_len, int inner) {
  const long long gid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (gid >= (long long)outer * inner) return;
  const long long base = (gid / inner) * axis_len * inner + gid % inner;
  x += base;
  y += base;
  float m = x[0];
  for (int a = 1; a < axis_len; ++a) m = x[(long long)a * inner] > m ? x[(long long)a * inner] : m;
  double sum = 0;
  for (int a = 0; a < axis_len; ++a) {
    const float e = hx_exp(x[(long long)a * inner] - m);
    y[(long long)a * inner] = e;
    sum += e;
  }
  const float inv = (float)(1.0 / sum);
  for (int a = 0; a < axis_len; ++a) y[(long long)a * inner] *= inv;
}

// RoPE: one thread per (row, pair p): p < rotary_dims / 2 computes its angle once and rotates that pair of every
// head; later p copy two tail values of every head.
extern "C" __global__ void rope(const float* x, const hx_pos_t* positions, float* y, int rows, int n_tokens,
                                int n_heads, int head_dim, int rotary_dims, float theta) {
  const int pairs = (head_dim + 1) / 2;
  const long long gid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (gid >= (long long)rows * pairs) return;
  const int p = (int)(gid % pairs);
  const int row = (int)(gid / pairs);
  const int t = row % n_tokens;
  x += (long long)row * n_heads * head_dim;
  y += (long long)row * n_heads * head_dim;
  const int half_dims = rotary_dims / 2;
  if (p < half_dims) {
    const long long position = positions[t];
    const double freq = pow((double)theta, -2.0 * (double)p / (double)rotary_dims);
    const double angle = (double)position * freq;
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
)CUDA";

// The family's program, shared by the kernels and normalization_builds().
const CudaProgram& program() {
  static const CudaProgram instance("hxrt_normalization", kSource);
  return instance;
}

// Threads per row: a power of two, at most kMaxRowGroup, about a quarter of the row.
int64_t row_group(int64_t row) {
  return std::clamp<int64_t>(next_power_of_two(std::max<int64_t>(1, row / 4)), 1, kMaxRowGroup);
}

// Every block size row_group can produce.
std::vector<int64_t> row_groups() {
  std::vector<int64_t> groups;
  for (int64_t group = 1; group <= kMaxRowGroup; group *= 2) groups.push_back(group);
  return groups;
}

std::string rms_options(bool fused, const std::string& wg_defines) {
  return fmt::format("-D HAS_WEIGHT={}{}", fused ? 1 : 0, wg_defines);
}

std::string rope_options(bool neox, bool i64_positions) {
  return fmt::format("-D NEOX={} -D POS_I64={}", neox ? 1 : 0, i64_positions ? 1 : 0);
}

// One block per row of the last axis.
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

ops::KernelDef rms_kernel(bool fused) {
  ops::KernelDef def =
      fused ? cuda_def("RMSNormMul", "hxrt.fused", 1, "RMSNormMul",
                       "one block per row: sum of squares in double, weight multiply in the same pass")
            : cuda_def("RMSNorm", "hxrt", 1, "RMSNormF32", "one block per row, sum of squares in double");
  if (fused) {
    def.kind = ops::KernelKind::kFused;
    def.priority = 10;
  }
  def.input_dtypes.assign(fused ? 2 : 1, {DType::kF32});
  def.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_epsilon_params(node));
  };
  def.tiling = last_axis_tiling;
  def.launch = [fused](hal::Stream& stream, const ops::KernelLaunch& launch) -> Status {
    const ops::TensorRef& x = launch.inputs[0];
    const ops::TensorRef& y = launch.outputs[0];
    if (x.shape.rank() < 1 || !(y.shape == x.shape)) {
      return invalid_argument("RMSNorm: X {} and Y {} do not fit", x.shape, y.shape);
    }
    const int64_t d = x.shape.dim(-1);
    if (fused && launch.inputs[1].num_elements() != d) {
      return invalid_argument("RMSNormMul: weight {} must hold the {} values of X's last axis", launch.inputs[1].shape,
                              d);
    }
    if (y.num_elements() == 0) return ok_status();
    const ops::TensorRef& w = fused ? launch.inputs[1] : x;  // unread without a weight
    std::vector<hal::KernelArg> args;
    add_tensor_arg(args, x);
    add_tensor_arg(args, w);
    add_tensor_arg(args, y);
    args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(d)));
    args.push_back(hal::KernelArg::scalar(launch.params_as<ops::EpsilonParams>().epsilon));
    return launch_kernel(stream, program(), "rms_norm", rms_options(fused, tiling_defines(*launch.tiling, {"wg"})),
                         launch.tiling->launch, args);
  };
  return def;
}

ops::KernelDef softmax_kernel() {
  ops::KernelDef def = cuda_def("Softmax", "", 13, "SoftmaxF32",
                                "one block per row (last axis) or one thread per column; sums in double");
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
  def.launch = [](hal::Stream& stream, const ops::KernelLaunch& launch) -> Status {
    const ops::TensorRef& x = launch.inputs[0];
    const ops::TensorRef& y = launch.outputs[0];
    if (y.num_elements() == 0) return ok_status();
    const auto& g = launch.tiling->geometry_as<ops::SoftmaxGeometry>();
    std::vector<hal::KernelArg> args;
    add_tensor_arg(args, x);
    add_tensor_arg(args, y);
    if (launch.tiling->get("rows") == 1) {
      args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(g.axis_len)));
      return launch_kernel(stream, program(), "softmax_rows", tiling_defines(*launch.tiling, {"wg"}),
                           launch.tiling->launch, args);
    }
    args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(g.outer)));
    args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(g.axis_len)));
    args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(g.inner)));
    return launch_kernel(stream, program(), "softmax_columns", "", launch.tiling->launch, args);
  };
  return def;
}

ops::KernelDef layer_norm_kernel() {
  ops::KernelDef def = cuda_def("LayerNormalization", "", 17, "LayerNormalizationF32",
                                "one block per row of dims axis..end, mean and variance in double");
  def.input_dtypes = {{DType::kF32}, {DType::kF32}, {DType::kF32}};
  // Y only: the optional Mean and InvStdDev outputs (training graphs) are the CPU kernel's.
  def.supports = [](const graph::Graph& graph, const graph::Node& node, std::string* why_not) {
    for (size_t i = 1; i < node.outputs.size(); ++i) {
      if (!graph.value(node.outputs[i]).consumers.empty() || graph.value(node.outputs[i]).is_output) {
        *why_not = "the Mean and InvStdDev outputs are not computed by the CUDA kernel";
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
  def.launch = [](hal::Stream& stream, const ops::KernelLaunch& launch) -> Status {
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
    return launch_kernel(stream, program(), "layer_norm", tiling_defines(*launch.tiling, {"wg"}), launch.tiling->launch,
                         args);
  };
  return def;
}

int64_t rope_items(const ops::RopeGeometry& g) {
  return g.rows * ((g.head_dim + 1) / 2);
}

ops::KernelDef rope_kernel() {
  ops::KernelDef def =
      cuda_def("RoPE", "hxrt", 1, "RoPEF32",
               "one thread per (row, pair) over all heads, angle in double; normal or neox, i32/i64 positions");
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
  def.launch = [](hal::Stream& stream, const ops::KernelLaunch& launch) -> Status {
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
    return launch_kernel(stream, program(), "rope",
                         rope_options(params.mode == ops::RopeMode::kNeox, positions.dtype == DType::kI64),
                         launch.tiling->launch, args);
  };
  return def;
}

}  // namespace

Status register_normalization(ops::KernelRegistry& registry) {
  HXRT_RETURN_IF_ERROR(registry.add(rms_kernel(/*fused=*/false)));
  HXRT_RETURN_IF_ERROR(registry.add(rms_kernel(/*fused=*/true)));
  HXRT_RETURN_IF_ERROR(registry.add(softmax_kernel()));
  HXRT_RETURN_IF_ERROR(registry.add(layer_norm_kernel()));
  return registry.add(rope_kernel());
}

// Every option string the launches build: rms_norm per weight flag and block size; one " -D WG=n" string per block
// size, which layer_norm and softmax_rows share; softmax_columns without options; rope per mode and position type.
std::vector<ProgramBuild> normalization_builds() {
  std::vector<ProgramBuild> builds;
  for (const int64_t group : row_groups()) {
    const std::string wg = fmt::format(" -D WG={}", group);
    for (const bool fused : {false, true}) builds.push_back({&program(), rms_options(fused, wg), {"rms_norm"}});
    builds.push_back({&program(), wg, {"layer_norm", "softmax_rows"}});
  }
  builds.push_back({&program(), "", {"softmax_columns"}});
  for (const bool neox : {false, true}) {
    for (const bool i64 : {false, true}) builds.push_back({&program(), rope_options(neox, i64), {"rope"}});
  }
  return builds;
}

}  // namespace hxrt::kernels::cuda
