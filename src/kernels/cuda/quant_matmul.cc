// MatMulQ on CUDA: Y[m, n] = A[m, k] · W[n, k]ᵀ (+ bias[n]) with W in a GGUF layout (q8_0, q4_1, f16, f32;
// q4_0 and the other block types are kernels/jit/quant_blocks.cc's).
//
// Geometry: a block of WG threads owns WG output columns (W rows) and TILE_M activation rows; thread t computes
// column blockIdx.x · WG + t for those rows, so every activation block it reads from shared memory serves TILE_M
// rows. Grid = (ceil(n / WG), ceil(m / TILE_M)).
//
// Quantized W uses the CPU kernel's arithmetic (kernels/cpu/quant_matmul.h), as the OpenCL kernel does: the block
// first quantizes its TILE_M activation rows into shared memory as quantize_activation_row does (q = rint(x · 127 /
// max|x|), d = max|x| / 127 and s = d · Σq kept at f16 precision), then each W block contributes d_w · d_a · Σ w·q
// (exact integer products) plus c_w · s_a (c_w = m for q4_1), accumulated in the CPU's eight lanes
// (Note [CPU lanes] in kernels/opencl/quant_matmul.cc: lane l sums elements 4l..4l+3 of every block, reduced as
// ((l0 + l4) + (l1 + l5)) + ((l2 + l6) + (l3 + l7))); f16/f32 W are float dot products in sixteen lanes, folded to
// eight. So on CUDA, as on OpenCL, the results are bit-identical to the CPU's AVX2/AVX-512 paths.
//
// The kernel takes no control words: it cannot fail on the device and runs for microseconds, so its launches are
// submitted back to back without being awaited (Note [CUDA stream submission]); abort() discards what is not yet
// submitted.
//
// Build options come from the tiling: WTYPE, WG, TILE_M, NB (= k / 32, which sizes the shared arrays) and HAS_BIAS.
// TILE_M is bucketed (1, 2, 4) so that prefill lengths share programs; one column per thread keeps the 8 × TILE_M
// accumulators in registers.
#include <algorithm>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "kernels/cuda/registration.h"

namespace hxrt::kernels::cuda {
namespace {

constexpr int64_t kQuantBlock = 32;
constexpr int64_t kMaxGroup = 128;           // threads per block
constexpr int64_t kMinGroup = 32;            // one warp
constexpr int64_t kGroupsPerUnit = 2;        // blocks per SM the group size is lowered for
constexpr int64_t kMaxTileM = 4;             // activation rows per block
constexpr int64_t kSharedBudget = 32 * 1024;  // bytes of quantized activations per block
constexpr int64_t kSharedLimit = 48 * 1024;   // static shared memory a CUDA block may declare
constexpr int64_t kQ8ABytes = 32 + 2 * 4;     // one quantized activation block in shared memory: qs, d, s

constexpr std::string_view kSource = R"CUDA(
// WTYPE: 0 q8_0, 2 q4_1, 3 f16, 4 f32.
#ifndef WTYPE
#define WTYPE 0
#endif
#ifndef WG
#define WG 128
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
#if WTYPE == 0
#define BLOCK_BYTES 34
#define QS_OFFSET 2
#else
#define BLOCK_BYTES 20
#define QS_OFFSET 4
#endif

// ((l0 + l4) + (l1 + l5)) + ((l2 + l6) + (l3 + l7)): the CPU's hsum256.
__device__ __forceinline__ float sum_lanes8(const float* v) {
  const float a0 = v[0] + v[4], a1 = v[1] + v[5], a2 = v[2] + v[6], a3 = v[3] + v[7];
  return (a0 + a1) + (a2 + a3);
}

#if WTYPE < 3
extern "C" __global__ void matmul_q(const float* __restrict__ a, const hx_u8* __restrict__ w,
                                    const float* __restrict__ bias, float* __restrict__ y, int m, int n, int k) {
  __shared__ signed char act_q[TILE_M * NB * 32];  // (TILE_M, NB, 32) quantized activations
  __shared__ float act_d[TILE_M * NB];             // (TILE_M, NB) their scales
  __shared__ float act_s[TILE_M * NB];             // (TILE_M, NB) scale · sum of the block's integers
  const int tid = threadIdx.x;
  const int i0 = blockIdx.y * TILE_M;
  const int rows = min(TILE_M, m - i0);
  const float* a_rows = a + (long long)i0 * (NB * 32);
  for (int blk = tid; blk < rows * NB; blk += WG) {
    const float* x = a_rows + (long long)blk * 32;
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = fmaxf(amax, fabsf(x[i]));
    const float d = amax / 127.0f;
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    int total = 0;
    for (int i = 0; i < 32; ++i) {
      const int q = min(127, max(-127, (int)rintf(x[i] * inv)));
      act_q[blk * 32 + i] = (signed char)q;
      total += q;
    }
    act_d[blk] = hx_round_half(d);  // kept at f16 precision, as the CPU's quantize_activation_row
    act_s[blk] = hx_round_half(d * (float)total);
  }
  __syncthreads();
  const int j = blockIdx.x * WG + tid;
  if (j >= n) return;
  float acc[TILE_M][8];  // Note [CPU lanes]: lane l sums d_w·d_a·(w·q over elements 4l..4l+3) across blocks
  float extra[TILE_M];
#pragma unroll
  for (int r = 0; r < TILE_M; ++r) {
#pragma unroll
    for (int l = 0; l < 8; ++l) acc[r][l] = 0.0f;
    extra[r] = 0.0f;
  }
  const hx_u8* w_row = w + (long long)j * NB * BLOCK_BYTES;
  for (int b = 0; b < NB; ++b) {
    const hx_u8* block = w_row + b * BLOCK_BYTES;
    const float dw = hx_half_to_float((hx_u16)(block[0] | (block[1] << 8)));
#if WTYPE == 2
    const float cw = hx_half_to_float((hx_u16)(block[2] | (block[3] << 8)));
#else
    const float cw = 0.0f;
#endif
    int wv[32];  // the block's 32 weights as integers, in element order
#if WTYPE == 0
#pragma unroll
    for (int i = 0; i < 32; ++i) wv[i] = (int)(signed char)block[QS_OFFSET + i];
#else
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const int byte = block[QS_OFFSET + i];
      wv[i] = byte & 0x0F;    // elements 0..15
      wv[16 + i] = byte >> 4;  // elements 16..31
    }
#endif
#pragma unroll
    for (int r = 0; r < TILE_M; ++r) {
      const int row = min(r, rows - 1);  // rows past m repeat the last, unstored
      const signed char* q = act_q + (row * NB + b) * 32;
      const float scale = dw * act_d[row * NB + b];
#pragma unroll
      for (int l = 0; l < 8; ++l) {
        // Σ w·a over elements 4l..4l+3, exactly: products summed in adjacent pairs, then the pairs (x86 vpmaddwd).
        const int p0 = wv[4 * l] * q[4 * l] + wv[4 * l + 1] * q[4 * l + 1];
        const int p1 = wv[4 * l + 2] * q[4 * l + 2] + wv[4 * l + 3] * q[4 * l + 3];
        acc[r][l] = fmaf((float)(p0 + p1), scale, acc[r][l]);
      }
      extra[r] = fmaf(cw, act_s[row * NB + b], extra[r]);
    }
  }
  for (int r = 0; r < rows; ++r) {
#if HAS_BIAS
    y[(long long)(i0 + r) * n + j] = (sum_lanes8(acc[r]) + extra[r]) + bias[j];
#else
    y[(long long)(i0 + r) * n + j] = sum_lanes8(acc[r]) + extra[r];
#endif
  }
}
#else
// Float W: lane l of a 16-lane accumulator sums a[i]·w[i] for i = l mod 16, as the CPU's AVX-512 dot product; the
// lanes fold to eight (lo + hi) and reduce as sum_lanes8. The tail is zero-padded like the CPU's masked loads.
__device__ __forceinline__ float weight_at(const hx_u8* w, long long index) {
#if WTYPE == 3
  const hx_u16* h = (const hx_u16*)w;
  return hx_half_to_float(h[index]);
#else
  return ((const float*)w)[index];
#endif
}

extern "C" __global__ void matmul_q(const float* __restrict__ a, const hx_u8* __restrict__ w,
                                    const float* __restrict__ bias, float* __restrict__ y, int m, int n, int k) {
  const int i0 = blockIdx.y * TILE_M;
  const int rows = min(TILE_M, m - i0);
  const int j = blockIdx.x * WG + threadIdx.x;
  if (j >= n) return;
  const long long w_row = (long long)j * k;
  const float* a_rows = a + (long long)i0 * k;
  float acc[TILE_M][16];
#pragma unroll
  for (int r = 0; r < TILE_M; ++r) {
#pragma unroll
    for (int l = 0; l < 16; ++l) acc[r][l] = 0.0f;
  }
  for (int kk = 0; kk < k; kk += 16) {
    float wv[16];
#pragma unroll
    for (int l = 0; l < 16; ++l) wv[l] = kk + l < k ? weight_at(w, w_row + kk + l) : 0.0f;
#pragma unroll
    for (int r = 0; r < TILE_M; ++r) {
      if (r < rows) {
#pragma unroll
        for (int l = 0; l < 16; ++l) {
          const float av = kk + l < k ? a_rows[(long long)r * k + kk + l] : 0.0f;
          acc[r][l] = fmaf(av, wv[l], acc[r][l]);
        }
      }
    }
  }
#if HAS_BIAS
  const float b = bias[j];
#else
  const float b = 0.0f;
#endif
  for (int r = 0; r < rows; ++r) {
    float folded[8];
#pragma unroll
    for (int l = 0; l < 8; ++l) folded[l] = acc[r][l] + acc[r][l + 8];
    y[(long long)(i0 + r) * n + j] = sum_lanes8(folded) + b;
  }
}
#endif
)CUDA";

const CudaProgram& program() {
  static const CudaProgram instance("hxrt_matmulq", kSource);
  return instance;
}

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
  if (w.shape.dim(1) != g.k) {
    return invalid_argument("MatMulQ: A {} has K={} but W {} has K={}", a.shape, g.k, w.shape, w.shape.dim(1));
  }
  g.m = g.k == 0 ? 0 : a.num_elements() / g.k;
  if (dtype_info(w.dtype).is_quantized) {
    if (g.k % kQuantBlock != 0) {
      return invalid_argument("MatMulQ: K={} is not a multiple of {} for a {} weight", g.k, kQuantBlock, w.dtype);
    }
    if (g.k / kQuantBlock * kQ8ABytes > kSharedLimit) {
      return invalid_argument("MatMulQ on CUDA: K={} needs {} bytes of shared memory for one activation row (at most {})",
                              g.k, g.k / kQuantBlock * kQ8ABytes, kSharedLimit);
    }
  }
  HXRT_RETURN_IF_ERROR(check_int32(g.m * g.n, "MatMulQ outputs"));
  HXRT_RETURN_IF_ERROR(check_int32(g.m * g.k, "MatMulQ activations"));
  HXRT_RETURN_IF_ERROR(check_int32(g.n * g.k, "MatMulQ weights"));
  return g;
}

Result<ops::Tiling> matmul_tiling(const ops::TilingQuery& query) {
  if (query.inputs.size() < 2) return invalid_argument("MatMulQ tiling needs A and W");
  HXRT_ASSIGN_OR_RETURN(const Geometry g, geometry(query.inputs[0], query.inputs[1]));
  const bool quantized = dtype_info(query.inputs[1].dtype).is_quantized;
  const int64_t nb = quantized ? g.k / kQuantBlock : 0;
  int64_t tile_m = std::min(kMaxTileM, next_power_of_two(std::max<int64_t>(1, g.m)));
  while (quantized && tile_m > 1 && tile_m * nb * kQ8ABytes > kSharedBudget) tile_m /= 2;
  // Threads per block: at most kMaxGroup, fewer when that leaves some blocks per SM.
  const int64_t units = query.device != nullptr && query.device->compute_units > 0 ? query.device->compute_units : 1;
  int64_t group = std::min(kMaxGroup, std::max(kMinGroup, next_power_of_two(std::max<int64_t>(1, g.n))));
  while (group > kMinGroup && (g.n + group - 1) / group < kGroupsPerUnit * units) group /= 2;
  ops::Tiling tiling;
  tiling.launch.grid = {static_cast<uint32_t>(std::max<int64_t>(1, (g.n + group - 1) / group)),
                        static_cast<uint32_t>(std::max<int64_t>(1, (g.m + tile_m - 1) / tile_m)), 1};
  tiling.launch.block = {static_cast<uint32_t>(group), 1, 1};
  tiling.values = {{"wg", group}, {"tile_m", tile_m}, {"nb", nb}};
  return tiling;
}

std::string build_options(int wtype, bool has_bias, const ops::Tiling& tiling) {
  return fmt::format("-D WTYPE={} -D HAS_BIAS={}{}", wtype, has_bias ? 1 : 0,
                     tiling_defines(tiling, {"wg", "tile_m", "nb"}));
}

Status matmul_launch(hal::Stream& stream, const ops::KernelLaunch& launch) {
  const ops::TensorRef& a = launch.inputs[0];
  const ops::TensorRef& w = launch.inputs[1];
  const ops::TensorRef& y = launch.outputs[0];
  if (a.dtype != DType::kF32 || y.dtype != DType::kF32) {
    return invalid_argument("MatMulQ: A and Y must be f32, got {} and {}", a.dtype, y.dtype);
  }
  HXRT_ASSIGN_OR_RETURN(const Geometry g, geometry(a, w));
  if (y.num_elements() != g.m * g.n) {
    return invalid_argument("MatMulQ: output {} does not hold {} x {}", y.shape, g.m, g.n);
  }
  HXRT_ASSIGN_OR_RETURN(const uint64_t w_bytes, storage_bytes(w.dtype, static_cast<uint64_t>(g.n * g.k)));
  if (w.view.size < w_bytes) {
    return invalid_argument("MatMulQ: W {} {} needs {} bytes, its view holds {}", w.dtype, w.shape, w_bytes, w.view.size);
  }
  const bool has_bias = launch.inputs.size() > 2 && launch.inputs[2].view.buffer != nullptr;
  if (has_bias && (launch.inputs[2].dtype != DType::kF32 || launch.inputs[2].num_elements() != g.n)) {
    return invalid_argument("MatMulQ: bias must be f32 [{}], got {} {}", g.n, launch.inputs[2].dtype,
                            launch.inputs[2].shape);
  }
  if (g.m == 0 || g.n == 0) return ok_status();
  std::vector<hal::KernelArg> args;
  add_tensor_arg(args, a);
  add_tensor_arg(args, w);
  add_tensor_arg(args, has_bias ? launch.inputs[2] : a);  // unread without a bias
  add_tensor_arg(args, y);
  for (int64_t v : {g.m, g.n, g.k}) args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(v)));
  return launch_kernel(stream, program(), "matmul_q", build_options(weight_code(w.dtype), has_bias, *launch.tiling),
                       launch.tiling->launch, args);
}

std::shared_ptr<const CudaProgram> quant_blocks_program() {
  static const auto program = std::make_shared<const CudaProgram>("hxrt_quant_blocks", jit::quant_blocks_source());
  return program;
}

}  // namespace

Status register_quant_matmul(ops::KernelRegistry& registry) {
  ops::KernelDef def = cuda_def("MatMulQ", "hxrt", 1, "MatMulQ",
                                "q8 activations × GGUF blocks with integer dot products in the CPU's lane order; f16/f32 "
                                "W in float; WG columns × TILE_M rows per block");
  def.input_dtypes = {{DType::kF32}, {DType::kQ8_0, DType::kQ4_1, DType::kF16, DType::kF32}, {DType::kF32}};
  def.priority = 10;
  def.tiling = matmul_tiling;
  def.launch = matmul_launch;
  HXRT_RETURN_IF_ERROR(registry.add(std::move(def)));
  // The other block types: one source for every JIT backend (kernels/jit/quant_blocks.cc).
  return jit::register_quant_blocks(registry, cuda_backend(), quant_blocks_program());
}

std::vector<ProgramBuild> quant_matmul_builds() {
  std::vector<ProgramBuild> builds;
  // Every block type of kernels/jit/quant_blocks.cc, at a decode and a prefill tile.
  for (int qtype : {2, 6, 7, 20, 10, 11, 12, 13, 14, 23}) {
    if (qtype != 2) {  // q4_0's GatherRows is the per-backend one (kernels/jit/llm_ops.cc)
      builds.push_back({quant_blocks_program().get(), jit::quant_gather_options(qtype, false), {"gather_rows_q"}});
    }
    builds.push_back({quant_blocks_program().get(), jit::quant_matmul_options(qtype, 1, 48, true), {"matmul_kq"}});
    builds.push_back({quant_blocks_program().get(), jit::quant_matmul_options(qtype, 4, 48, false), {"matmul_kq"}});
  }
  // The MoE kernels, for every weight type they take.
  builds.push_back({quant_blocks_program().get(), "", {"moe_route"}});
  for (int qtype : {0, 1, 30, 8, 2, 3, 6, 7, 20, 10, 11, 12, 13, 14, 23}) {
    for (const bool weighted : {false, true}) {
      builds.push_back({quant_blocks_program().get(), jit::experts_options(qtype, weighted), {"matmul_experts"}});
    }
  }
  // SmolLM2's shapes: K = 576 (NB 18) and 1536 (NB 48), decode (TILE_M 1) and prefill (TILE_M 4) tiles.
  for (int wtype : {0, 2, 3, 4}) {
    for (const auto& [tile_m, nb] : {std::pair<int, int>{1, 18}, {4, 48}}) {
      ops::Tiling tiling;
      tiling.values = {{"wg", kMaxGroup}, {"tile_m", tile_m}, {"nb", wtype < 3 ? nb : 0}};
      builds.push_back(ProgramBuild{&program(), build_options(wtype, tile_m == 4, tiling), {"matmul_q"}});
    }
  }
  return builds;
}

}  // namespace hxrt::kernels::cuda
