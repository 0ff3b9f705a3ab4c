// OpenCL LLM ops: the OpenCL C of GatherRows and PagedAttention (kv_write, attend) that the shared launch code in
// kernels/jit/llm_ops.cc runs (its comment has the geometry and the float order).
#include <memory>
#include <string_view>

#include "kernels/opencl/jit_program.h"
#include "kernels/opencl/registration.h"

namespace hxrt::kernels::opencl {
namespace {

constexpr std::string_view kSource = R"CLC(
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

__kernel void gather_rows(__global const uchar* d_buf, ulong d_off, __global const uchar* i_buf, ulong i_off,
                          __global uchar* y_buf, ulong y_off, int n, int n_rows, int row_size, ulong row_bytes,
                          __global volatile int* ctl) {
  const int gid = get_global_id(0);
  if (gid >= n * row_size) return;
  const int i = gid / row_size;
  const int e = gid % row_size;
#if IDX_I64
  const long row = HX_AT(const long, i_buf, i_off)[i];
#else
  const long row = HX_AT(const int, i_buf, i_off)[i];
#endif
  if (row < 0 || row >= n_rows) {
    ctl[1] = HX_INVALID_ARGUMENT;
    return;
  }
  __global const uchar* src = HX_AT(const uchar, d_buf, d_off) + (ulong)row * row_bytes;
#if DTYPE == 0
  const float v = ((__global const float*)src)[e];
#elif DTYPE == 1
  const float v = vload_half(e, (__global const half*)src);
#elif DTYPE == 2
  const float v = as_float((uint)(((__global const ushort*)src)[e]) << 16);
#elif DTYPE == 3
  __global const uchar* block = src + (e / 32) * 34;
  const float v = vload_half(0, (__global const half*)block) * (float)(((__global const char*)(block + 2))[e % 32]);
#else
  const int q = e % 32;
#if DTYPE == 4
  __global const uchar* block = src + (e / 32) * 18;
  const uchar byte = block[2 + (q & 15)];
#else
  __global const uchar* block = src + (e / 32) * 20;
  const uchar byte = block[4 + (q & 15)];
#endif
  const int nibble = q < 16 ? (byte & 0x0F) : (byte >> 4);
  const float d = vload_half(0, (__global const half*)block);
#if DTYPE == 4
  const float v = d * (float)(nibble - 8);
#else
  const float v = d * (float)nibble + vload_half(1, (__global const half*)block);
#endif
#endif
  HX_AT(float, y_buf, y_off)[gid] = v;
}

#if CACHE_F16
#define CACHE_LOAD(cache, index) vload_half((index), (__global const half*)(cache))
#define CACHE_STORE(value, cache, index) vstore_half((value), (index), (__global half*)(cache))
#else
#define CACHE_LOAD(cache, index) (((__global const float*)(cache))[index])
#define CACHE_STORE(value, cache, index) (((__global float*)(cache))[index] = (value))
#endif

// Shapes: k/v [n_tokens, n_kv, head_dim]; caches [n_layers, n_blocks, block_size, n_kv, head_dim];
// block_tables [n_seqs, max_blocks]; token_seq/positions [n_tokens].
__kernel void kv_write(__global const uchar* k_buf, ulong k_off, __global const uchar* v_buf, ulong v_off,
                       __global uchar* kc_buf, ulong kc_off, __global uchar* vc_buf, ulong vc_off,
                       __global const uchar* tab_buf, ulong tab_off, __global const uchar* seq_buf, ulong seq_off,
                       __global const uchar* pos_buf, ulong pos_off, int n_tokens, int n_kv, int head_dim,
                       int n_blocks, int block_size, int max_blocks, int n_seqs, int layer,
                       __global volatile int* ctl) {
  const int gid = get_global_id(0);
  if (gid >= n_tokens * n_kv * head_dim) return;
  const int t = gid / (n_kv * head_dim);
  const int s = HX_AT(const int, seq_buf, seq_off)[t];
  const int p = HX_AT(const int, pos_buf, pos_off)[t];
  if (s < 0 || s >= n_seqs || p < 0 || p / block_size >= max_blocks) {
    ctl[1] = HX_INVALID_ARGUMENT;
    return;
  }
  const int block = HX_AT(const int, tab_buf, tab_off)[s * max_blocks + p / block_size];
  if (block < 0 || block >= n_blocks) {
    ctl[1] = HX_INVALID_ARGUMENT;
    return;
  }
  const long slot = (long)layer * n_blocks * block_size + (long)block * block_size + p % block_size;
  const long index = slot * n_kv * head_dim + gid % (n_kv * head_dim);
  CACHE_STORE(HX_AT(const float, k_buf, k_off)[gid], HX_AT(uchar, kc_buf, kc_off), index);
  CACHE_STORE(HX_AT(const float, v_buf, v_off)[gid], HX_AT(uchar, vc_buf, vc_off), index);
}

// One group per (token, query head); q/out [n_tokens, n_heads, head_dim]. Note [Attention arithmetic].
__kernel void attend(__global const uchar* q_buf, ulong q_off, __global const uchar* kc_buf, ulong kc_off,
                     __global const uchar* vc_buf, ulong vc_off, __global const uchar* tab_buf, ulong tab_off,
                     __global const uchar* seq_buf, ulong seq_off, __global const uchar* pos_buf, ulong pos_off,
                     __global uchar* out_buf, ulong out_off, int n_heads, int n_kv, int n_blocks, int block_size,
                     int max_blocks, int n_seqs, int layer, float scale, int window, float softcap,
                     __global volatile int* ctl) {
  __local float scores[MAX_CTX];  // (n_visible) scores, then their exponentials
  __local float query[HEAD_DIM];
  __local float maxima[WG];
  __local float inv_sum;
  __local int stop;
  const int lid = get_local_id(0);
  const int t = get_group_id(0) / n_heads;
  const int h = get_group_id(0) % n_heads;
  const int g = h / (n_heads / n_kv);
  const int s = HX_AT(const int, seq_buf, seq_off)[t];
  const int p = HX_AT(const int, pos_buf, pos_off)[t];
  if (s < 0 || s >= n_seqs || p < 0 || p / block_size >= max_blocks || p >= MAX_CTX) {
    if (lid == 0) ctl[1] = HX_INVALID_ARGUMENT;
    return;  // uniform: every work-item of the group read the same token
  }
  if (lid == 0) stop = ctl[0];
  __global const float* qh = HX_AT(const float, q_buf, q_off) + ((long)t * n_heads + h) * HEAD_DIM;
  // Note [PoCL strided loops]: PoCL 3.1 (LLVM 15) compiles `for (d = lid; d < HEAD_DIM; d += WG)` with a constant
  // HEAD_DIM < WG into one unguarded iteration for every work-item in some builds of this kernel (adding two scalar
  // arguments was enough): work-items past HEAD_DIM then wrote y[lid]. The loops over head dims step from a common
  // base and break instead, which it compiles as written.
  for (int d0 = 0; d0 < HEAD_DIM; d0 += WG) {
    const int d = d0 + lid;
    if (d >= HEAD_DIM) break;
    query[d] = CACHE_F16 ? hx_round_half(qh[d]) : qh[d];
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  // The visible positions [first, p]: all of them, or the last `window` (a sliding-window layer); scores[i] is
  // position first + i's.
  const int first = window > 0 ? max(0, p - window + 1) : 0;
  const int n_visible = p + 1 - first;
  __global const int* table = HX_AT(const int, tab_buf, tab_off) + (long)s * max_blocks;
  __global const uchar* kc = HX_AT(const uchar, kc_buf, kc_off);
  __global const uchar* vc = HX_AT(const uchar, vc_buf, vc_off);
  const long layer_slot = (long)layer * n_blocks * block_size;

  float local_max = -INFINITY;
  for (int i = lid; i < n_visible; i += WG) {
    const int j = first + i;
    const int block = table[j / block_size];
    float score = 0.0f;
    if (block < 0 || block >= n_blocks) {
      ctl[1] = HX_INVALID_ARGUMENT;
    } else {
      const long row = ((layer_slot + (long)block * block_size + j % block_size) * n_kv + g) * HEAD_DIM;
      float partial[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
      int d = 0;
      for (; d + 8 <= HEAD_DIM; d += 8) {
        for (int u = 0; u < 8; ++u) {
#if HX_CPU_FMA
          partial[u] = fma(query[d + u], CACHE_LOAD(kc, row + d + u), partial[u]);
#else
          partial[u] += query[d + u] * CACHE_LOAD(kc, row + d + u);
#endif
        }
      }
      for (; d < HEAD_DIM; ++d) partial[d % 8] += query[d] * CACHE_LOAD(kc, row + d);
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
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < stride && maxima[lid + stride] > maxima[lid]) maxima[lid] = maxima[lid + stride];
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (stop != 0) {
    if (lid == 0) ctl[1] = HX_ABORTED;
    return;
  }
  const float max_score = maxima[0];
  for (int i = lid; i < n_visible; i += WG) scores[i] = hx_exp(scores[i] - max_score);
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid == 0) {
    float sum = 0.0f;
    for (int i = 0; i < n_visible; ++i) sum += scores[i];
    inv_sum = 1.0f / sum;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  const float inv = inv_sum;
  __global float* yh = HX_AT(float, out_buf, out_off) + ((long)t * n_heads + h) * HEAD_DIM;
  for (int d0 = 0; d0 < HEAD_DIM; d0 += WG) {  // Note [PoCL strided loops]
    const int d = d0 + lid;
    if (d >= HEAD_DIM) break;
    const bool fused = HX_CPU_FMA && d < (HEAD_DIM & ~7);  // the CPU's AVX2 axpy fuses all but the tail
    float acc = 0.0f;
    for (int i = 0; i < n_visible; ++i) {
      const int j = first + i;
      const int block = table[j / block_size];
      if (block < 0 || block >= n_blocks) continue;
      const long row = ((layer_slot + (long)block * block_size + j % block_size) * n_kv + g) * HEAD_DIM;
      const float prob = CACHE_F16 ? hx_round_half(scores[i] * inv) : scores[i] * inv;
      const float v = CACHE_LOAD(vc, row + d);
      acc = fused ? fma(prob, v, acc) : acc + prob * v;
    }
    yh[d] = acc;
  }
}
)CLC";

}  // namespace

Status register_llm_ops(ops::KernelRegistry& registry) {
  return jit::register_llm_ops(registry, opencl_backend(), std::make_shared<const JitProgram>("hxrt_llm_ops", kSource));
}

}  // namespace hxrt::kernels::opencl
