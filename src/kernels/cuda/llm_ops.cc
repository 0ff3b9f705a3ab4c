// CUDA kernels of the LLM ops (docs/ops.md, "LLM ops"): GatherRows and PagedAttention, the twins of
// kernels/opencl/llm_ops.cc with the same geometry and the same float operations.
//
// GatherRows: one thread per output element (blocks of 128), widening its row's element (f32, f16, bf16, q8_0, q4_0,
// q4_1) to f32 with the CPU kernel's arithmetic (bit-identical): a GGUF block is an f16 scale d (q4_1: then an f16
// minimum m) followed by 32 quants; q8_0 is d·q, q4_0 d·(nibble − 8), q4_1 d·nibble + m, where quant i < 16 is the low
// nibble of byte i and quant i ≥ 16 the high nibble of byte i − 16. DTYPE and the index type are build options.
//
// PagedAttention is two launches on the stream (Note [KV cache state inputs] in ops/schemas/llm.cc):
//   kv_write: one thread per (token, kv head, dim) stores this launch's k and v into their cache slots (f16 caches
//             through hx_float_to_half, round to nearest even as the CPU's f32_to_f16);
//   attend:   one block of 64 threads per (token, query head). The threads score the visible positions into shared
//             memory (MAX_CTX = a power of two >= max_blocks · block_size, at least 256, at most 8192: the scores
//             live in static shared memory, 48 KiB per block), thread 0 sums the exponentials left to right, and each
//             thread accumulates V for its dims.
// Bad indices (token_seq, positions, block table entries) are skipped and fail the stream with INVALID_ARGUMENT
// (Note [CUDA kernel status words] in cuda_program.h); valid tokens of such a launch may already have written their
// slots. attend reads the abort word once per block and stops with ABORTED.
//
// Note [CUDA attention arithmetic]
// attend repeats the CPU kernel's float operations per token (kernels/cpu/llm_ops.cc), as the OpenCL kernel does
// (Note [Attention arithmetic] in kernels/opencl/llm_ops.cc), so results are bit-identical to the CPU's and do not
// depend on the batch: q·k as eight lane sums combined ((0+1)+(2+3))+((4+5)+(6+7)), scaled; a max-subtracted exp
// (hx_exp, glibc's expf); the sum of the exponentials left to right in float; 1/sum once; y += p·v in position order.
// With an f16 cache the query and the probabilities are rounded to f16 first, as the CPU kernel's half-precision
// products. Where the CPU kernel runs its AVX2/FMA/F16C dot and axpy (chosen per host), HX_CPU_FMA makes the kernel
// fuse the same multiply-adds with fmaf (all but a head_dim tail of fewer than 8); everything else is unfused, since
// programs build with --fmad=false. The maximum is a tree of comparisons: order does not change a maximum.
#include <algorithm>
#include <cmath>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "hxrt/ops/params/llm.h"
#include "kernels/cuda/registration.h"

namespace hxrt::kernels::cuda {
namespace {

constexpr uint32_t kGroup = 128;      // threads per block of the per-element kernels
constexpr int64_t kAttendGroup = 64;  // threads per (token, head)
constexpr int64_t kMinContext = 256;  // smallest MAX_CTX, so that short contexts share one program
// Largest MAX_CTX: its float scores plus the query and the maxima must fit the 48 KiB of static shared memory.
constexpr int64_t kMaxContext = 8192;

constexpr std::string_view kSource = R"CUDA(
// DTYPE: 0 f32, 1 f16, 2 bf16, 3 q8_0, 4 q4_0, 5 q4_1.
#ifndef DTYPE
#define DTYPE 0
#endif
#ifndef IDX_I64
#define IDX_I64 0
#endif
#ifndef CACHE_F16
#define CACHE_F16 1
#endif
#ifndef WG
#define WG 64
#endif
#ifndef MAX_CTX
#define MAX_CTX 256
#endif
#ifndef HEAD_DIM
#define HEAD_DIM 64
#endif
#ifndef HX_CPU_FMA
#define HX_CPU_FMA 0
#endif
#if IDX_I64
typedef long long row_index_t;
#else
typedef int row_index_t;
#endif

// A block's f16 scale or minimum, read byte by byte: blocks of 34, 18 or 20 bytes leave it 2-byte aligned only when
// the table's view is, which nothing guarantees.
__device__ __forceinline__ float block_half(const hx_u8* p) {
  return hx_half_to_float((hx_u16)(p[0] | (p[1] << 8)));
}

// data [n_rows, row_size] in its dtype, row_bytes bytes per row; y [n, row_size] f32.
extern "C" __global__ void gather_rows(const hx_u8* data, const row_index_t* indices, float* y, int n, int n_rows,
                                       int row_size, hx_u64 row_bytes, volatile int* ctl) {
  const int gid = blockIdx.x * blockDim.x + threadIdx.x;
  if (gid >= n * row_size) return;
  const int i = gid / row_size;
  const int e = gid % row_size;
  const long long row = indices[i];
  if (row < 0 || row >= n_rows) {
    ctl[1] = HX_INVALID_ARGUMENT;
    return;
  }
  const hx_u8* src = data + (hx_u64)row * row_bytes;
#if DTYPE == 0
  const float v = ((const float*)src)[e];
#elif DTYPE == 1
  const float v = hx_half_to_float(((const hx_u16*)src)[e]);
#elif DTYPE == 2
  const float v = hx_bf16_to_float(((const hx_u16*)src)[e]);
#elif DTYPE == 3
  const hx_u8* block = src + (e / 32) * 34;
  const float v = block_half(block) * (float)((const signed char*)(block + 2))[e % 32];
#else
  const int q = e % 32;
#if DTYPE == 4
  const hx_u8* block = src + (e / 32) * 18;
  const hx_u8 byte = block[2 + (q & 15)];
#else
  const hx_u8* block = src + (e / 32) * 20;
  const hx_u8 byte = block[4 + (q & 15)];
#endif
  const int nibble = q < 16 ? (byte & 0x0F) : (byte >> 4);
  const float d = block_half(block);
#if DTYPE == 4
  const float v = d * (float)(nibble - 8);
#else
  const float v = d * (float)nibble + block_half(block + 2);
#endif
#endif
  y[gid] = v;
}

#if CACHE_F16
typedef hx_u16 cache_t;
#define CACHE_LOAD(cache, index) hx_half_to_float((cache)[index])
#define CACHE_STORE(value, cache, index) ((cache)[index] = hx_float_to_half(value))
#else
typedef float cache_t;
#define CACHE_LOAD(cache, index) ((cache)[index])
#define CACHE_STORE(value, cache, index) ((cache)[index] = (value))
#endif

// Shapes: k/v [n_tokens, n_kv, head_dim]; caches [n_layers, n_blocks, block_size, n_kv, head_dim];
// block_tables [n_seqs, max_blocks]; token_seq/positions [n_tokens].
extern "C" __global__ void kv_write(const float* k, const float* v, cache_t* k_cache, cache_t* v_cache,
                                    const int* tables, const int* token_seq, const int* positions, int n_tokens,
                                    int n_kv, int head_dim, int n_blocks, int block_size, int max_blocks, int n_seqs,
                                    int layer, volatile int* ctl) {
  const int gid = blockIdx.x * blockDim.x + threadIdx.x;
  if (gid >= n_tokens * n_kv * head_dim) return;
  const int t = gid / (n_kv * head_dim);
  const int s = token_seq[t];
  const int p = positions[t];
  if (s < 0 || s >= n_seqs || p < 0 || p / block_size >= max_blocks) {
    ctl[1] = HX_INVALID_ARGUMENT;
    return;
  }
  const int block = tables[s * max_blocks + p / block_size];
  if (block < 0 || block >= n_blocks) {
    ctl[1] = HX_INVALID_ARGUMENT;
    return;
  }
  const long long slot = (long long)layer * n_blocks * block_size + (long long)block * block_size + p % block_size;
  const long long index = slot * n_kv * head_dim + gid % (n_kv * head_dim);
  CACHE_STORE(k[gid], k_cache, index);
  CACHE_STORE(v[gid], v_cache, index);
}

// One block of WG threads per (token, query head); q/out [n_tokens, n_heads, head_dim]. Note [CUDA attention
// arithmetic].
extern "C" __global__ void __launch_bounds__(WG) attend(const float* q, const cache_t* k_cache,
                                                        const cache_t* v_cache, const int* tables,
                                                        const int* token_seq, const int* positions, float* out,
                                                        int n_heads, int n_kv, int n_blocks, int block_size,
                                                        int max_blocks, int n_seqs, int layer, float scale,
                                                        volatile int* ctl) {
  __shared__ float scores[MAX_CTX];  // (n_visible) scores, then their exponentials
  __shared__ float query[HEAD_DIM];
  __shared__ float maxima[WG];
  __shared__ float inv_sum;
  __shared__ int stop;
  const int lid = threadIdx.x;
  const int t = blockIdx.x / n_heads;
  const int h = blockIdx.x % n_heads;
  const int g = h / (n_heads / n_kv);
  const int s = token_seq[t];
  const int p = positions[t];
  if (s < 0 || s >= n_seqs || p < 0 || p / block_size >= max_blocks || p >= MAX_CTX) {
    if (lid == 0) ctl[1] = HX_INVALID_ARGUMENT;
    return;  // uniform: every thread of the block read the same token
  }
  if (lid == 0) stop = ctl[0];
  const float* qh = q + ((long long)t * n_heads + h) * HEAD_DIM;
  for (int d = lid; d < HEAD_DIM; d += WG) query[d] = CACHE_F16 ? hx_round_half(qh[d]) : qh[d];
  __syncthreads();
  const int n_visible = p + 1;
  const int* table = tables + (long long)s * max_blocks;
  const long long layer_slot = (long long)layer * n_blocks * block_size;

  float local_max = __int_as_float(0xff800000);  // -inf
  for (int j = lid; j < n_visible; j += WG) {
    const int block = table[j / block_size];
    float score = 0.0f;
    if (block < 0 || block >= n_blocks) {
      ctl[1] = HX_INVALID_ARGUMENT;
    } else {
      const long long row = ((layer_slot + (long long)block * block_size + j % block_size) * n_kv + g) * HEAD_DIM;
      float partial[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
      int d = 0;
      for (; d + 8 <= HEAD_DIM; d += 8) {
#pragma unroll
        for (int u = 0; u < 8; ++u) {
#if HX_CPU_FMA
          partial[u] = fmaf(query[d + u], CACHE_LOAD(k_cache, row + d + u), partial[u]);
#else
          partial[u] = partial[u] + query[d + u] * CACHE_LOAD(k_cache, row + d + u);
#endif
        }
      }
      for (; d < HEAD_DIM; ++d) partial[d % 8] = partial[d % 8] + query[d] * CACHE_LOAD(k_cache, row + d);
      score = (((partial[0] + partial[1]) + (partial[2] + partial[3])) +
               ((partial[4] + partial[5]) + (partial[6] + partial[7]))) * scale;
    }
    scores[j] = score;
    local_max = score > local_max ? score : local_max;
  }
  maxima[lid] = local_max;
  for (int stride = WG / 2; stride > 0; stride /= 2) {
    __syncthreads();
    if (lid < stride && maxima[lid + stride] > maxima[lid]) maxima[lid] = maxima[lid + stride];
  }
  __syncthreads();
  if (stop != 0) {
    if (lid == 0) ctl[1] = HX_ABORTED;
    return;  // uniform: stop was read before the barriers above
  }
  const float max_score = maxima[0];
  for (int j = lid; j < n_visible; j += WG) scores[j] = hx_exp(scores[j] - max_score);
  __syncthreads();
  if (lid == 0) {
    float sum = 0.0f;
    for (int j = 0; j < n_visible; ++j) sum = sum + scores[j];
    inv_sum = 1.0f / sum;
  }
  __syncthreads();
  const float inv = inv_sum;
  float* yh = out + ((long long)t * n_heads + h) * HEAD_DIM;
  for (int d = lid; d < HEAD_DIM; d += WG) {
    const bool fused = HX_CPU_FMA && d < (HEAD_DIM & ~7);  // the CPU's AVX2 axpy fuses all but the tail
    float acc = 0.0f;
    for (int j = 0; j < n_visible; ++j) {
      const int block = table[j / block_size];
      if (block < 0 || block >= n_blocks) continue;
      const long long row = ((layer_slot + (long long)block * block_size + j % block_size) * n_kv + g) * HEAD_DIM;
      const float prob = CACHE_F16 ? hx_round_half(scores[j] * inv) : scores[j] * inv;
      const float v = CACHE_LOAD(v_cache, row + d);
      acc = fused ? fmaf(prob, v, acc) : acc + prob * v;
    }
    yh[d] = acc;
  }
}
)CUDA";

const CudaProgram& llm_program() {
  static const CudaProgram program("hxrt_llm_ops", kSource);
  return program;
}

// The DTYPE build option of a GatherRows table; -1 when it is not supported.
int table_code(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 0;
    case DType::kF16: return 1;
    case DType::kBF16: return 2;
    case DType::kQ8_0: return 3;
    case DType::kQ4_0: return 4;
    case DType::kQ4_1: return 5;
    default: return -1;
  }
}

std::string gather_rows_options(int dtype_code, bool i64) {
  return fmt::format("-D DTYPE={} -D IDX_I64={}", dtype_code, i64 ? 1 : 0);
}

ops::KernelDef gather_rows_kernel(const CudaProgram* program) {
  ops::KernelDef def = cuda_def("GatherRows", "hxrt", 1, "GatherRowsDequant",
                                "one work-item per element, widening f32/f16/bf16/q8_0/q4_0/q4_1 rows to f32");
  def.input_dtypes = {{DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_1},
                      {DType::kI32, DType::kI64}};
  def.tiling = [](const ops::TilingQuery& query) -> Result<ops::Tiling> {
    const int64_t elements = query.outputs.empty() ? 0 : query.outputs[0].num_elements();
    HXRT_RETURN_IF_ERROR(check_int32(elements, "GatherRows outputs"));
    ops::Tiling tiling;
    tiling.launch = launch_1d(elements, kGroup);
    tiling.values = {{"wg", kGroup}};
    return tiling;
  };
  def.launch = [program](hal::Stream& stream, const ops::KernelLaunch& launch) -> Status {
    const ops::TensorRef& data = launch.inputs[0];
    const ops::TensorRef& indices = launch.inputs[1];
    const ops::TensorRef& y = launch.outputs[0];
    if (data.shape.rank() != 2 || table_code(data.dtype) < 0) {
      return invalid_argument(
          "GatherRows: data must be a [n_rows, row_size] table of f32/f16/bf16/q8_0/q4_0/q4_1, got {} {}", data.dtype,
          data.shape);
    }
    const int64_t row_size = data.shape.dim(1);
    if (dtype_info(data.dtype).is_quantized && row_size % 32 != 0) {
      return invalid_argument("GatherRows: rows of {} values are not whole {} blocks", row_size, data.dtype);
    }
    HXRT_ASSIGN_OR_RETURN(const uint64_t row_bytes, storage_bytes(data.dtype, static_cast<uint64_t>(row_size)));
    if (y.num_elements() == 0) return ok_status();
    std::vector<hal::KernelArg> args;
    add_tensor_arg(args, data);
    add_tensor_arg(args, indices);
    add_tensor_arg(args, y);
    for (int64_t v : {indices.num_elements(), data.shape.dim(0), row_size}) {
      args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(v)));
    }
    args.push_back(hal::KernelArg::scalar(row_bytes));
    return launch_kernel(stream, *program, "gather_rows",
                         gather_rows_options(table_code(data.dtype), indices.dtype == DType::kI64),
                         launch.tiling->launch, args);
  };
  return def;
}

// Whether the CPU kernel's attention takes its AVX2/FMA/F16C path on this host (attention_isa() and
// attend_f16_fast() in kernels/cpu/llm_ops.cc test exactly these three); the CUDA kernel then fuses the same products
// (Note [CUDA attention arithmetic]).
bool cpu_attention_fma() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool fma =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  return fma;
#else
  return false;
#endif
}

// Dims of one PagedAttention launch (shapes in llm.cc's schema).
struct AttentionGeometry final : ops::TypedGeometry<AttentionGeometry> {
  static constexpr std::string_view kName = "cuda::AttentionGeometry";
  int64_t n_tokens = 0, n_heads = 0, head_dim = 0, n_kv = 0;
  int64_t n_layers = 0, n_blocks = 0, block_size = 0, n_seqs = 0, max_blocks = 0;
};

Result<AttentionGeometry> attention_geometry(std::span<const ops::TensorRef> in) {
  if (in.size() < 8) return invalid_argument("PagedAttention takes 8 inputs, got {}", in.size());
  AttentionGeometry g;
  g.n_tokens = in[0].shape.dim(0);
  g.n_heads = in[0].shape.dim(1);
  g.head_dim = in[0].shape.dim(2);
  g.n_kv = in[1].shape.dim(1);
  g.n_layers = in[3].shape.dim(0);
  g.n_blocks = in[3].shape.dim(1);
  g.block_size = in[3].shape.dim(2);
  g.n_seqs = in[5].shape.dim(0);
  g.max_blocks = in[5].shape.dim(1);
  if (g.n_kv <= 0 || g.n_heads % g.n_kv != 0) {
    return invalid_argument("PagedAttention: n_heads {} is not a multiple of n_kv_heads {}", g.n_heads, g.n_kv);
  }
  if (g.block_size <= 0) return invalid_argument("PagedAttention: block_size {} must be positive", g.block_size);
  HXRT_RETURN_IF_ERROR(check_int32(g.n_tokens * g.n_kv * g.head_dim, "PagedAttention k/v elements"));
  HXRT_RETURN_IF_ERROR(check_int32(g.n_tokens * g.n_heads, "PagedAttention (token, head) groups"));
  HXRT_RETURN_IF_ERROR(check_int32(g.n_seqs * g.max_blocks, "PagedAttention block table entries"));
  HXRT_RETURN_IF_ERROR(check_int32(g.max_blocks * g.block_size, "PagedAttention context"));
  return g;
}

std::string attention_options(bool cache_f16, bool cpu_fma, int64_t max_ctx, int64_t head_dim) {
  return fmt::format("-D CACHE_F16={} -D HX_CPU_FMA={} -D WG={} -D MAX_CTX={} -D HEAD_DIM={}", cache_f16 ? 1 : 0,
                     cpu_fma ? 1 : 0, kAttendGroup, max_ctx, head_dim);
}

ops::KernelDef paged_attention_kernel(const CudaProgram* program) {
  ops::KernelDef def = cuda_def("PagedAttention", "hxrt", 1, "PagedAttentionF32",
                                "kv_write then one work-group per (token, head); f32 math over an f16/f32 paged "
                                "cache, batch invariant");
  def.input_dtypes = {
      {DType::kF32}, {DType::kF32}, {DType::kF32}, {DType::kF16, DType::kF32}, {DType::kF16, DType::kF32},
      {DType::kI32}, {DType::kI32}, {DType::kI32}};
  def.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_paged_attention_params(node));
  };
  def.tiling = [](const ops::TilingQuery& query) -> Result<ops::Tiling> {
    HXRT_ASSIGN_OR_RETURN(const AttentionGeometry g, attention_geometry(query.inputs));
    const int64_t max_ctx = next_power_of_two(std::max(kMinContext, g.max_blocks * g.block_size));
    if (max_ctx > kMaxContext) {
      return unimplemented(
          "PagedAttention: CUDA attends to at most {} positions (scores in static shared memory), "
          "the block tables span {}",
          kMaxContext, g.max_blocks * g.block_size);
    }
    ops::Tiling tiling;
    tiling.launch.grid = {static_cast<uint32_t>(std::max<int64_t>(1, g.n_tokens * g.n_heads)), 1, 1};
    tiling.launch.block = {static_cast<uint32_t>(kAttendGroup), 1, 1};
    tiling.values = {{"wg", kAttendGroup}, {"max_ctx", max_ctx}, {"head_dim", g.head_dim}};
    tiling.geometry = std::make_shared<AttentionGeometry>(g);
    return tiling;
  };
  def.launch = [program](hal::Stream& stream, const ops::KernelLaunch& launch) -> Status {
    const auto& params = launch.params_as<ops::PagedAttentionParams>();
    const auto& g = launch.tiling->geometry_as<AttentionGeometry>();
    if (params.layer >= g.n_layers) {
      return invalid_argument("PagedAttention: layer {} is outside the cache's {} layers", params.layer, g.n_layers);
    }
    if (g.n_tokens == 0) return ok_status();
    const std::span<const ops::TensorRef> in = launch.inputs;
    const float scale = params.scale != 0.0f ? params.scale : 1.0f / std::sqrt(static_cast<float>(g.head_dim));
    const std::string options = attention_options(in[3].dtype == DType::kF16, cpu_attention_fma(),
                                                  launch.tiling->get("max_ctx"), launch.tiling->get("head_dim"));
    const auto cache_dims = [&](std::vector<hal::KernelArg>& args) {
      for (int64_t v : {g.n_blocks, g.block_size, g.max_blocks, g.n_seqs, params.layer}) {
        args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(v)));
      }
    };

    std::vector<hal::KernelArg> write;  // k, v, caches, tables, token_seq, positions
    for (size_t i : {1, 2, 3, 4, 5, 6, 7}) add_tensor_arg(write, in[i]);
    for (int64_t v : {g.n_tokens, g.n_kv, g.head_dim}) write.push_back(hal::KernelArg::scalar(static_cast<int32_t>(v)));
    cache_dims(write);
    HXRT_RETURN_IF_ERROR(launch_kernel(stream, *program, "kv_write", options,
                                       launch_1d(g.n_tokens * g.n_kv * g.head_dim, kGroup), write));

    std::vector<hal::KernelArg> attend;  // q, caches, tables, token_seq, positions, out
    for (size_t i : {0, 3, 4, 5, 6, 7}) add_tensor_arg(attend, in[i]);
    add_tensor_arg(attend, launch.outputs[0]);
    for (int64_t v : {g.n_heads, g.n_kv}) attend.push_back(hal::KernelArg::scalar(static_cast<int32_t>(v)));
    cache_dims(attend);
    attend.push_back(hal::KernelArg::scalar(scale));
    return launch_kernel(stream, *program, "attend", options, launch.tiling->launch, attend);
  };
  return def;
}

}  // namespace

Status register_llm_ops(ops::KernelRegistry& registry) {
  HXRT_RETURN_IF_ERROR(registry.add(gather_rows_kernel(&llm_program())));
  return registry.add(paged_attention_kernel(&llm_program()));
}

std::vector<ProgramBuild> llm_ops_builds() {
  std::vector<ProgramBuild> builds;
  for (int code = 0; code <= 5; ++code) {
    for (bool i64 : {false, true}) {
      builds.push_back({&llm_program(), gather_rows_options(code, i64), {"gather_rows"}});
    }
  }
  // Both cache types and both CPU paths at SmolLM2's head size, with the smallest and the largest context; then the
  // tests' head sizes 40 and 36 (a dot-product tail of 4 lanes), and 128 (the largest of the CPU's f16 fast path).
  for (bool cache_f16 : {true, false}) {
    for (bool cpu_fma : {true, false}) {
      for (int64_t max_ctx : {kMinContext, kMaxContext}) {
        builds.push_back({&llm_program(), attention_options(cache_f16, cpu_fma, max_ctx, 64), {"kv_write", "attend"}});
      }
    }
  }
  for (int64_t head_dim : {40, 36, 128}) {
    builds.push_back({&llm_program(), attention_options(true, true, kMinContext, head_dim), {"kv_write", "attend"}});
  }
  return builds;
}

}  // namespace hxrt::kernels::cuda
