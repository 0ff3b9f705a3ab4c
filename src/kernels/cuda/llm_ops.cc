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
#include <memory>
#include <string_view>
#include <vector>

#include "kernels/cuda/registration.h"

namespace hxrt::kernels::cuda {
namespace {

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
                                                        int window, float softcap, volatile int* ctl) {
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
  // The visible positions [first, p]: all of them, or the last `window` (a sliding-window layer); scores[i] is
  // position first + i's.
  const int first = window > 0 ? max(0, p - window + 1) : 0;
  const int n_visible = p + 1 - first;
  const int* table = tables + (long long)s * max_blocks;
  const long long layer_slot = (long long)layer * n_blocks * block_size;

  float local_max = __int_as_float(0xff800000);  // -inf
  for (int i = lid; i < n_visible; i += WG) {
    const int j = first + i;
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
      if (softcap > 0.0f) {  // Note [Score softcap] in kernels/cpu/llm_ops.cc
        const float e = hx_exp(2.0f * (score / softcap));
        score = softcap * (1.0f - 2.0f / (e + 1.0f));
      }
    }
    scores[i] = score;
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
  for (int i = lid; i < n_visible; i += WG) scores[i] = hx_exp(scores[i] - max_score);
  __syncthreads();
  if (lid == 0) {
    float sum = 0.0f;
    for (int i = 0; i < n_visible; ++i) sum = sum + scores[i];
    inv_sum = 1.0f / sum;
  }
  __syncthreads();
  const float inv = inv_sum;
  float* yh = out + ((long long)t * n_heads + h) * HEAD_DIM;
  for (int d = lid; d < HEAD_DIM; d += WG) {
    const bool fused = HX_CPU_FMA && d < (HEAD_DIM & ~7);  // the CPU's AVX2 axpy fuses all but the tail
    float acc = 0.0f;
    for (int i = 0; i < n_visible; ++i) {
      const int j = first + i;
      const int block = table[j / block_size];
      if (block < 0 || block >= n_blocks) continue;
      const long long row = ((layer_slot + (long long)block * block_size + j % block_size) * n_kv + g) * HEAD_DIM;
      const float prob = CACHE_F16 ? hx_round_half(scores[i] * inv) : scores[i] * inv;
      const float v = CACHE_LOAD(v_cache, row + d);
      acc = fused ? fmaf(prob, v, acc) : acc + prob * v;
    }
    yh[d] = acc;
  }
}
)CUDA";

std::shared_ptr<const CudaProgram> llm_program() {
  static const auto program = std::make_shared<const CudaProgram>("hxrt_llm_ops", kSource);
  return program;
}

}  // namespace

Status register_llm_ops(ops::KernelRegistry& registry) {
  return jit::register_llm_ops(registry, cuda_backend(), llm_program());
}

std::vector<ProgramBuild> llm_ops_builds() {
  const CudaProgram* program = llm_program().get();
  std::vector<ProgramBuild> builds;
  for (int code = 0; code <= 5; ++code) {
    for (bool i64 : {false, true}) builds.push_back({program, jit::gather_rows_options(code, i64), {"gather_rows"}});
  }
  for (bool cache_f16 : {true, false}) {
    for (bool cpu_fma : {true, false}) {
      for (int64_t max_ctx : {int64_t{256}, cuda_backend().max_attention_context}) {
        builds.push_back({program, jit::attention_options(cache_f16, cpu_fma, max_ctx, 64), {"kv_write", "attend"}});
      }
    }
  }
  for (int64_t head_dim : {40, 36, 128}) {
    builds.push_back({program, jit::attention_options(true, true, 256, head_dim), {"kv_write", "attend"}});
  }
  return builds;
}

}  // namespace hxrt::kernels::cuda
