// MatMulQ on OpenCL: Y[m, n] = A[m, k] · W[n, k]ᵀ (+ bias[n]) with W in a GGUF layout (q8_0, q4_1, f16, f32;
// q4_0 and the other block types are kernels/jit/quant_blocks.cc's).
//
// Geometry: a work-group of WG work-items owns WG · COLS output columns (W rows) and TILE_M activation rows; each
// work-item computes COLS adjacent columns for those rows, so every activation block it loads serves COLS weight
// blocks, and every weight block TILE_M rows. Grid = (ceil(n / (WG · COLS)), ceil(m / TILE_M)).
//
// Quantized W uses the CPU kernel's arithmetic (kernels/cpu/quant_matmul.h): the group first quantizes its TILE_M
// activation rows into local memory as quantize_activation_row does (q = rint(x · 127 / max|x|), d = max|x| / 127 and
// s = d · Σq kept at f16 precision), then each W block contributes d_w · d_a · Σ w·q (exact integer products) plus
// c_w · s_a (c_w = m for q4_1), accumulated in the CPU's lane order (Note [CPU lanes]); f16/f32 W are float dot
// products in the same way. Where the CPU kernel takes its AVX2 or AVX-512 path the results are
// bit-identical to it; against its scalar path they differ by float rounding (normalised error ~1e-7).
//
// Build options come from the tiling: WTYPE, WG, COLS, TILE_M, NB (= k / 32, which sizes the local arrays) and
// HAS_BIAS. TILE_M is bucketed (1, 2, 4, 8) so that prefill lengths share programs.
#include <algorithm>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "kernels/opencl/jit_program.h"
#include "kernels/opencl/registration.h"

namespace hxrt::kernels::opencl {
namespace {

constexpr int64_t kQuantBlock = 32;
constexpr int64_t kMaxGroup = 64;            // work-items per work-group
constexpr int64_t kMinGroup = 8;
constexpr int64_t kGroupsPerUnit = 4;        // groups per compute unit the group size is lowered for
constexpr int64_t kQuantCols = 4;            // output columns per work-item (quantized W)
constexpr int64_t kMaxTileM = 8;             // activation rows per work-group
constexpr int64_t kLocalBudget = 32 * 1024;  // bytes of quantized activations per work-group
constexpr int64_t kQ8ABytes = 32 + 2 * 4;    // one quantized activation block in local memory: qs, d, s

constexpr std::string_view kSource = R"CLC(
// WTYPE: 0 q8_0, 2 q4_1, 3 f16, 4 f32.
#ifndef WTYPE
#define WTYPE 0
#endif
#ifndef WG
#define WG 64
#endif
#ifndef TILE_M
#define TILE_M 1
#endif
#ifndef NB
#define NB 1
#endif
#ifndef HAS_BIAS
#define HAS_BIAS 0
#endif
#ifndef COLS
#define COLS 1
#endif
#if WTYPE == 0
#define BLOCK_BYTES 34
#define QS_OFFSET 2
#else
#define BLOCK_BYTES 20
#define QS_OFFSET 4
#endif

// An f16 value from its bits, exactly (subnormals included; no Inf/NaN in weight scales). PoCL's vload_half is a
// longer software sequence on x86, and this runs twice per weight block.
inline float half_to_float(uint h) {
  const uint magnitude = h & 0x7fffu;
  const float normal = as_float((magnitude << 13) + 0x38000000u);  // exponent rebiased from 15 to 127
  const float subnormal = (float)magnitude * 0x1.0p-24f;
  const float value = magnitude >= 0x0400u ? normal : subnormal;
  return (h & 0x8000u) ? -value : value;
}

// Note [CPU lanes]: the CPU kernel's AVX2 and AVX-512 VNNI paths (kernels/cpu/quant_matmul.cc) keep 8 float lanes,
// lane l accumulating fma(integer sum of elements 4l..4l+3 of a block, d_w·d_a) over the blocks, and reduce them as
// hsum256: ((l0 + l4) + (l1 + l5)) + ((l2 + l6) + (l3 + l7)). Doing the same here makes the results bit-identical to
// those paths (and within float rounding of the scalar one). Its float-W path is 16 lanes, folded to 8 (lo + hi).

// Σ w·a over each four consecutive elements, exactly: products summed in adjacent pairs (x86: vpmaddwd), then pairs.
inline int4 dot_quads(short16 w, short16 a) {
  const int8 pairs = convert_int8(w.even) * convert_int8(a.even) + convert_int8(w.odd) * convert_int8(a.odd);
  return pairs.even + pairs.odd;
}

inline float sum_lanes8(float8 v) {
  const float4 a = v.lo + v.hi;
  return (a.x + a.y) + (a.z + a.w);
}

#if WTYPE < 3
__kernel void matmul_q(__global const uchar* a_buf, ulong a_off, __global const uchar* w_buf, ulong w_off,
                       __global const uchar* bias_buf, ulong bias_off, __global uchar* y_buf, ulong y_off, int m,
                       int n, int k, __global volatile int* ctl) {
  __local char act_q[TILE_M * NB * 32];  // (TILE_M, NB, 32) quantized activations
  __local float act_d[TILE_M * NB];      // (TILE_M, NB) their scales
  __local float act_s[TILE_M * NB];      // (TILE_M, NB) scale · sum of the block's integers
  __local int stop;
  const int lid = get_local_id(0);
  const int i0 = get_group_id(1) * TILE_M;
  const int rows = min(TILE_M, m - i0);
  if (lid == 0) stop = ctl[0];
  __global const float* a = HX_AT(const float, a_buf, a_off) + (long)i0 * (NB * 32);
  for (int blk = lid; blk < rows * NB; blk += WG) {
    __global const float* x = a + (long)blk * 32;
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = fmax(amax, fabs(x[i]));
    const float d = amax / 127.0f;
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    int total = 0;
    for (int i = 0; i < 32; ++i) {
      const int q = clamp((int)rint(x[i] * inv), -127, 127);
      act_q[blk * 32 + i] = (char)q;
      total += q;
    }
    act_d[blk] = hx_round_half(d);  // kept at f16 precision, as the CPU's quantize_activation_row
    act_s[blk] = hx_round_half(d * (float)total);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (stop != 0) {
    if (lid == 0) ctl[1] = HX_ABORTED;
    return;
  }
  const int j0 = (get_group_id(0) * WG + lid) * COLS;
  if (j0 >= n) return;
  __global const uchar* w = HX_AT(const uchar, w_buf, w_off);
  float8 acc[TILE_M][COLS];  // Note [CPU lanes]: lane l sums d_w·d_a·(w·q over elements 4l..4l+3) across blocks
  float extra[TILE_M][COLS];
#pragma unroll
  for (int r = 0; r < TILE_M; ++r) {
#pragma unroll
    for (int c = 0; c < COLS; ++c) {
      acc[r][c] = (float8)(0.0f);
      extra[r][c] = 0.0f;
    }
  }
  for (int b = 0; b < NB; ++b) {
    short16 a0[TILE_M];
    short16 a1[TILE_M];
#pragma unroll
    for (int r = 0; r < TILE_M; ++r) {
      __local const char* q = act_q + (min(r, rows - 1) * NB + b) * 32;  // rows past m repeat the last, unstored
      a0[r] = convert_short16(vload16(0, q));
      a1[r] = convert_short16(vload16(1, q));
    }
#pragma unroll
    for (int c = 0; c < COLS; ++c) {
      // Columns past n read the last row again and are never stored.
      __global const uchar* block = w + ((ulong)min(j0 + c, n - 1) * NB + b) * BLOCK_BYTES;
      const ushort2 scales = vload2(0, (__global const ushort*)block);  // d (and m for q4_1)
      const float dw = half_to_float(scales.x);
#if WTYPE == 0
      const short16 w0 = convert_short16(vload16(0, (__global const char*)(block + QS_OFFSET)));
      const short16 w1 = convert_short16(vload16(1, (__global const char*)(block + QS_OFFSET)));
      const float cw = 0.0f;
#else
      const uchar16 raw = vload16(0, block + QS_OFFSET);
      const short16 w0 = convert_short16(raw & (uchar16)(0x0F));  // elements 0..15
      const short16 w1 = convert_short16(raw >> (uchar16)(4));    // elements 16..31
      const float cw = half_to_float(scales.y);  // q4_1's m
#endif
#pragma unroll
      for (int r = 0; r < TILE_M; ++r) {
        const int row = min(r, rows - 1);
        const int8 lanes = (int8)(dot_quads(w0, a0[r]), dot_quads(w1, a1[r]));  // exact integers
        acc[r][c] = fma(convert_float8(lanes), (float8)(dw * act_d[row * NB + b]), acc[r][c]);
        extra[r][c] = fma(cw, act_s[row * NB + b], extra[r][c]);
      }
    }
  }
#if HAS_BIAS
  __global const float* bias = HX_AT(const float, bias_buf, bias_off);
#endif
  __global float* y = HX_AT(float, y_buf, y_off);
  for (int r = 0; r < TILE_M; ++r) {
    for (int c = 0; c < COLS; ++c) {
      if (r < rows && j0 + c < n) {
#if HAS_BIAS
        y[(long)(i0 + r) * n + j0 + c] = (sum_lanes8(acc[r][c]) + extra[r][c]) + bias[j0 + c];
#else
        y[(long)(i0 + r) * n + j0 + c] = sum_lanes8(acc[r][c]) + extra[r][c];
#endif
      }
    }
  }
}
#else
// Float W: lane l of a 16-lane accumulator sums a[i]·w[i] for i = l mod 16, as the CPU's AVX-512 dot product.
__kernel void matmul_q(__global const uchar* a_buf, ulong a_off, __global const uchar* w_buf, ulong w_off,
                       __global const uchar* bias_buf, ulong bias_off, __global uchar* y_buf, ulong y_off, int m,
                       int n, int k, __global volatile int* ctl) {
  const int i0 = get_group_id(1) * TILE_M;
  const int rows = min(TILE_M, m - i0);
  const int j = get_group_id(0) * WG + get_local_id(0);
  if (ctl[0] != 0) {
    ctl[1] = HX_ABORTED;
    return;
  }
  if (j >= n) return;
  __global const float* a = HX_AT(const float, a_buf, a_off) + (long)i0 * k;
#if WTYPE == 3
  __global const half* w = HX_AT(const half, w_buf, w_off) + (long)j * k;
#else
  __global const float* w = HX_AT(const float, w_buf, w_off) + (long)j * k;
#endif
  float16 acc[TILE_M];
#pragma unroll
  for (int r = 0; r < TILE_M; ++r) acc[r] = (float16)(0.0f);
  int kk = 0;
  for (; kk + 16 <= k; kk += 16) {
#if WTYPE == 3
    const float16 wv = vload_half16(0, w + kk);
#else
    const float16 wv = vload16(0, w + kk);
#endif
#pragma unroll
    for (int r = 0; r < TILE_M; ++r) {
      if (r < rows) acc[r] = fma(vload16(0, a + (long)r * k + kk), wv, acc[r]);
    }
  }
  if (kk < k) {  // the tail, zero-padded like the CPU's masked loads
    float tail_w[16];
    for (int i = 0; i < 16; ++i) {
#if WTYPE == 3
      tail_w[i] = kk + i < k ? vload_half(kk + i, w) : 0.0f;
#else
      tail_w[i] = kk + i < k ? w[kk + i] : 0.0f;
#endif
    }
    const float16 wv = vload16(0, tail_w);
#pragma unroll
    for (int r = 0; r < TILE_M; ++r) {
      if (r < rows) {
        float tail_a[16];
        for (int i = 0; i < 16; ++i) tail_a[i] = kk + i < k ? a[(long)r * k + kk + i] : 0.0f;
        acc[r] = fma(vload16(0, tail_a), wv, acc[r]);
      }
    }
  }
#if HAS_BIAS
  const float bias = HX_AT(const float, bias_buf, bias_off)[j];
#else
  const float bias = 0.0f;
#endif
  __global float* y = HX_AT(float, y_buf, y_off);
  for (int r = 0; r < TILE_M; ++r) {
    if (r < rows) y[(long)(i0 + r) * n + j] = sum_lanes8(acc[r].lo + acc[r].hi) + bias;
  }
}
#endif
)CLC";

// The WTYPE build option of a weight dtype; -1 when MatMulQ does not take it.
int weight_code(DType w) {
  switch (w) {
    case DType::kQ8_0: return 0;
    case DType::kQ4_1: return 2;
    case DType::kF16: return 3;
    case DType::kF32: return 4;
    default: return -1;
  }
}

// A [..., K], W [N, K] → Y [..., N] with M the product of A's leading dims.
struct Geometry {
  int64_t m = 0, k = 0, n = 0;
};

Result<Geometry> geometry(const ops::TensorRef& a, const ops::TensorRef& w) {
  if (a.shape.rank() < 1) return invalid_argument("MatMulQ: A must have rank >= 1, got {}", a.shape);
  if (w.shape.rank() != 2) return invalid_argument("MatMulQ: W must be [N, K], got {}", w.shape);
  if (weight_code(w.dtype) < 0) {
    return invalid_argument("MatMulQ: weight type {} is not supported (q8_0, q4_1, f16, f32)", w.dtype);
  }
  Geometry g;
  g.k = a.shape.dim(-1);
  g.n = w.shape.dim(0);
  if (w.shape.dim(1) != g.k) return invalid_argument("MatMulQ: A {} has K={} but W {} has K={}", a.shape, g.k, w.shape, w.shape.dim(1));
  g.m = g.k == 0 ? 0 : a.num_elements() / g.k;
  if (dtype_info(w.dtype).is_quantized && g.k % kQuantBlock != 0) {
    return invalid_argument("MatMulQ: K={} is not a multiple of {} for a {} weight", g.k, kQuantBlock, w.dtype);
  }
  HXRT_RETURN_IF_ERROR(check_int32(g.m * g.n, "MatMulQ outputs"));
  HXRT_RETURN_IF_ERROR(check_int32(g.m * g.k, "MatMulQ activations"));
  return g;
}

Result<ops::Tiling> matmul_tiling(const ops::TilingQuery& query) {
  if (query.inputs.size() < 2) return invalid_argument("MatMulQ tiling needs A and W");
  HXRT_ASSIGN_OR_RETURN(const Geometry g, geometry(query.inputs[0], query.inputs[1]));
  const bool quantized = dtype_info(query.inputs[1].dtype).is_quantized;
  const int64_t nb = quantized ? g.k / kQuantBlock : 0;
  int64_t tile_m = std::min(kMaxTileM, next_power_of_two(std::max<int64_t>(1, g.m)));
  while (quantized && tile_m > 1 && tile_m * nb * kQ8ABytes > kLocalBudget) tile_m /= 2;
  const int64_t cols = quantized ? kQuantCols : 1;
  // Work-items per group: at most kMaxGroup, fewer when that leaves some groups per compute unit.
  const int64_t units = query.device != nullptr && query.device->compute_units > 0 ? query.device->compute_units : 1;
  int64_t group = std::min(kMaxGroup, next_power_of_two(std::max<int64_t>(1, (g.n + cols - 1) / cols)));
  while (group > kMinGroup && (g.n + group * cols - 1) / (group * cols) < kGroupsPerUnit * units) group /= 2;
  const int64_t tile_n = group * cols;
  ops::Tiling tiling;
  tiling.launch.grid = {static_cast<uint32_t>(std::max<int64_t>(1, (g.n + tile_n - 1) / tile_n)),
                        static_cast<uint32_t>(std::max<int64_t>(1, (g.m + tile_m - 1) / tile_m)), 1};
  tiling.launch.block = {static_cast<uint32_t>(group), 1, 1};
  tiling.values = {{"wg", group}, {"cols", cols}, {"tile_m", tile_m}, {"nb", nb}};
  return tiling;
}

Status matmul_launch(hal::Stream& stream, const JitProgram& program, const ops::KernelLaunch& launch) {
  const ops::TensorRef& a = launch.inputs[0];
  const ops::TensorRef& w = launch.inputs[1];
  const ops::TensorRef& y = launch.outputs[0];
  if (a.dtype != DType::kF32 || y.dtype != DType::kF32) {
    return invalid_argument("MatMulQ: A and Y must be f32, got {} and {}", a.dtype, y.dtype);
  }
  HXRT_ASSIGN_OR_RETURN(const Geometry g, geometry(a, w));
  if (y.num_elements() != g.m * g.n) return invalid_argument("MatMulQ: output {} does not hold {} x {}", y.shape, g.m, g.n);
  HXRT_ASSIGN_OR_RETURN(const uint64_t w_bytes, storage_bytes(w.dtype, static_cast<uint64_t>(g.n * g.k)));
  if (w.view.size < w_bytes) {
    return invalid_argument("MatMulQ: W {} {} needs {} bytes, its view holds {}", w.dtype, w.shape, w_bytes, w.view.size);
  }
  const bool has_bias = launch.inputs.size() > 2 && launch.inputs[2].view.buffer != nullptr;
  if (has_bias && (launch.inputs[2].dtype != DType::kF32 || launch.inputs[2].num_elements() != g.n)) {
    return invalid_argument("MatMulQ: bias must be f32 [{}], got {} {}", g.n, launch.inputs[2].dtype, launch.inputs[2].shape);
  }
  if (g.m == 0 || g.n == 0) return ok_status();
  std::vector<hal::KernelArg> args;
  add_tensor_arg(args, a);
  add_tensor_arg(args, w);
  add_tensor_arg(args, has_bias ? launch.inputs[2] : a);  // unread without a bias
  add_tensor_arg(args, y);
  for (int64_t v : {g.m, g.n, g.k}) args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(v)));
  const std::string options = fmt::format("-D WTYPE={} -D HAS_BIAS={}{}", weight_code(w.dtype), has_bias ? 1 : 0,
                                          tiling_defines(*launch.tiling, {"wg", "cols", "tile_m", "nb"}));
  return launch_kernel(stream, program, "matmul_q", options, launch.tiling->launch, args);
}

}  // namespace

Status register_quant_matmul(ops::KernelRegistry& registry) {
  auto program = std::make_shared<const JitProgram>("hxrt_matmulq", kSource);
  ops::KernelDef def = opencl_def("MatMulQ", "hxrt", 1, "MatMulQ",
                                  "q8 activations × GGUF blocks with integer dot products (as the CPU kernel); f16/f32 "
                                  "W in float; WG columns × TILE_M rows per work-group");
  def.input_dtypes = {{DType::kF32}, {DType::kQ8_0, DType::kQ4_1, DType::kF16, DType::kF32}, {DType::kF32}};
  def.priority = 10;
  def.tiling = matmul_tiling;
  def.launch = [program](hal::Stream& stream, const ops::KernelLaunch& launch) {
    return matmul_launch(stream, *program, launch);
  };
  HXRT_RETURN_IF_ERROR(registry.add(std::move(def)));
  // The other block types: one source for every JIT backend (kernels/jit/quant_blocks.cc).
  return jit::register_quant_blocks(
      registry, opencl_backend(), std::make_shared<const JitProgram>("hxrt_quant_blocks", jit::quant_blocks_source()));
}

}  // namespace hxrt::kernels::opencl
