// The JIT backends' kernels of the block types with several scales per block or a non-uniform grid — q5_0, q5_1,
// iq4_nl and the K-quants q2_K..q6_K, iq4_xs — and q4_0's MatMulQ, written once: one device source for OpenCL and
// CUDA, whose first lines map a few names onto each (address spaces, work-item ids, the barrier, kernel arguments). The block layouts
// are base/quant_blocks.h's, the type codes ggml's type ids (QTYPE), as everywhere else.
//
//   gather_rows_q: GatherRows, one work-item per output element, widening it with ggml's float arithmetic
//                  (bit-identical to base/quant_types.cc's dequantize_row, so to the CPU kernel).
//   matmul_kq:     MatMulQ. A work-group of WG work-items owns WG output columns (W rows) and TILE_M activation
//                  rows, which it first quantizes into local memory exactly as the CPU's quantize_activation_row
//                  (scale at f16 precision, half sums). Each work-item then walks its W row run by run (Note [Runs]
//                  in kernels/cpu/quant_matmul_kquant.h) and keeps the CPU AVX2 kernel's eight float lanes: lane l
//                  accumulates fma(sc[l / 4] · Σ q·a over elements 4l..4l+3, d · d_a) and a scalar the min terms,
//                  reduced as hsum256 — so the result is the CPU's bit for bit wherever it runs its AVX2 or
//                  AVX-512 path (Note [CPU lanes] of the q8_0/q4_1 kernels). q4_0 and iq4_nl instead sum each
//                  block's lanes to one exact integer and take one float step per output and block (Note [Block
//                  integers] in kernels/cpu/quant_matmul_blockint.h), bit-identical to the CPU on every ISA.
// Grid of matmul_kq: (ceil(n / WG), ceil(m / TILE_M)); TILE_M is bucketed (1, 2, 4, 8) and lowered to keep the
// quantized activations within kLocalBudget.
#include <algorithm>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "hxrt/ops/params/llm.h"
#include "kernels/jit/jit_family.h"

namespace hxrt::kernels::jit {
namespace {

constexpr int64_t kGroup = 64;               // work-items per group of matmul_kq (output columns)
constexpr uint32_t kGatherGroup = 128;       // work-items per group of gather_rows_q
constexpr int64_t kMaxTileM = 8;
constexpr int64_t kLocalBudget = 32 * 1024;  // bytes of quantized activations per work-group
constexpr int64_t kActBytes = 32 + 4 + 2 * 4;  // one activation block in local memory: qs, d, two half sums

constexpr std::string_view kSource = R"SRC(
#ifndef QTYPE
#define QTYPE 12
#endif
#ifndef TILE_M
#define TILE_M 1
#endif
#ifndef NB
#define NB 8
#endif
#ifndef WG
#define WG 64
#endif
#ifndef HAS_BIAS
#define HAS_BIAS 0
#endif
#ifndef IDX_I64
#define IDX_I64 0
#endif
#ifndef WEIGHTED
#define WEIGHTED 0
#endif

// ---- the per-backend names ----
#ifdef __OPENCL_VERSION__
typedef uchar hxq_u8;
typedef char hxq_i8;
typedef ushort hxq_u16;
typedef uint hxq_u32;
typedef ulong hxq_u64;
#define HXQ_KERNEL __kernel void
#define HXQ_FN inline
#define HXQ_GLOBAL __global
#define HXQ_SHARED __local
#define HXQ_IN(type, name) __global const uchar* name##_buf, ulong name##_off
#define HXQ_OUT(type, name) __global uchar* name##_buf, ulong name##_off
#define HXQ_PTR(type, name) HX_AT(type, name##_buf, name##_off)
#define HXQ_CTL , __global volatile int* ctl
#define HXQ_LOCAL_ID ((int)get_local_id(0))
#define HXQ_GROUP_X ((int)get_group_id(0))
#define HXQ_GROUP_Y ((int)get_group_id(1))
#define HXQ_GLOBAL_ID ((int)get_global_id(0))
#define HXQ_SYNC() barrier(CLK_LOCAL_MEM_FENCE)
#define HXQ_FMA(a, b, c) fma(a, b, c)
#define hxq_rint rint
#define hxq_fabs fabs
#define hxq_fmax fmax
#define hxq_as_float as_float
HXQ_FN float hxq_half(const __global hxq_u8* p) {
  const ushort bits = (ushort)(p[0] | (p[1] << 8));
  return vload_half(0, (const __private half*)&bits);
}
#else  // CUDA (NVRTC, or the CUDA emulator)
typedef signed char hxq_i8;
typedef hx_u8 hxq_u8;
typedef hx_u16 hxq_u16;
typedef hx_u32 hxq_u32;
typedef hx_u64 hxq_u64;
#define HXQ_KERNEL extern "C" __global__ void
#define HXQ_FN __device__ __forceinline__
#define HXQ_GLOBAL
#define HXQ_SHARED __shared__
#define HXQ_IN(type, name) const type* name##_ptr
#define HXQ_OUT(type, name) type* name##_ptr
#define HXQ_PTR(type, name) (name##_ptr)
#define HXQ_CTL , volatile int* ctl
#define HXQ_LOCAL_ID ((int)threadIdx.x)
#define HXQ_GROUP_X ((int)blockIdx.x)
#define HXQ_GROUP_Y ((int)blockIdx.y)
#define HXQ_GLOBAL_ID ((int)(blockIdx.x * blockDim.x + threadIdx.x))
#define HXQ_SYNC() __syncthreads()
#define HXQ_FMA(a, b, c) fmaf(a, b, c)
#define hxq_rint rintf
#define hxq_fabs fabsf
#define hxq_fmax fmaxf
#define hxq_as_float __uint_as_float
HXQ_FN float hxq_half(const hxq_u8* p) { return hx_half_to_float((hx_u16)(p[0] | (p[1] << 8))); }
#endif

// ---- the block types (base/quant_blocks.h) ----
#if QTYPE == 6  // q5_0: d, qh[4], qs[16]
#define BLOCK_BYTES 22
#define RUNS 1
#elif QTYPE == 7  // q5_1: d, m, qh[4], qs[16]
#define BLOCK_BYTES 24
#define RUNS 1
#elif QTYPE == 20  // iq4_nl: d, qs[16]
#define BLOCK_BYTES 18
#define RUNS 1
#elif QTYPE == 10  // q2_K: scales[16], qs[64], d, dmin
#define BLOCK_BYTES 84
#define RUNS 8
#elif QTYPE == 11  // q3_K: hmask[32], qs[64], scales[12], d
#define BLOCK_BYTES 110
#define RUNS 8
#elif QTYPE == 12  // q4_K: d, dmin, scales[12], qs[128]
#define BLOCK_BYTES 144
#define RUNS 8
#elif QTYPE == 13  // q5_K: d, dmin, scales[12], qh[32], qs[128]
#define BLOCK_BYTES 176
#define RUNS 8
#elif QTYPE == 14  // q6_K: ql[128], qh[64], scales[16], d
#define BLOCK_BYTES 210
#define RUNS 8
#elif QTYPE == 23  // iq4_xs: d, scales_h, scales_l[4], qs[128]
#define BLOCK_BYTES 136
#define RUNS 8
#elif QTYPE == 8  // q8_0: d, qs[32]
#define BLOCK_BYTES 34
#define RUNS 1
#elif QTYPE == 2  // q4_0: d, qs[16]
#define BLOCK_BYTES 18
#define RUNS 1
#elif QTYPE == 3  // q4_1: d, m, qs[16]
#define BLOCK_BYTES 20
#define RUNS 1
#elif QTYPE == 0  // f32 (for matmul_experts; a "block" of one value)
#define BLOCK_BYTES 4
#define BLOCK_VALUES 1
#define RUNS 1
#elif QTYPE == 1 || QTYPE == 30  // f16, bf16
#define BLOCK_BYTES 2
#define BLOCK_VALUES 1
#define RUNS 1
#endif
#ifndef BLOCK_VALUES
#define BLOCK_VALUES (32 * RUNS)
#endif
// The types whose runs have mins (their q are unsigned): the others skip the min terms, as the CPU kernel does.
#define HAS_MINS (QTYPE == 7 || QTYPE == 10 || QTYPE == 12 || QTYPE == 13)
// The types of Note [Block integers] (kernels/cpu/quant_matmul_blockint.h): one exact integer and one float step per
// output and block, instead of the eight lanes.
#define BLOCK_INTEGERS (QTYPE == 2 || QTYPE == 20)

HXQ_FN int hxq_iq4(int nibble) {
  switch (nibble) {
    case 0: return -127; case 1: return -104; case 2: return -83; case 3: return -65;
    case 4: return -49; case 5: return -35; case 6: return -22; case 7: return -10;
    case 8: return 1; case 9: return 13; case 10: return 25; case 11: return 38;
    case 12: return 53; case 13: return 69; case 14: return 89; default: return 113;
  }
}

HXQ_FN hxq_u32 hxq_le32(const HXQ_GLOBAL hxq_u8* p) {
  return (hxq_u32)p[0] | ((hxq_u32)p[1] << 8) | ((hxq_u32)p[2] << 16) | ((hxq_u32)p[3] << 24);
}

// Sub-block j's 6-bit scale and min of q4_K/q5_K (ggml's get_scale_min_k4); `q` the 12 packed bytes.
HXQ_FN void hxq_scale_min_k4(int j, const HXQ_GLOBAL hxq_u8* q, int* sc, int* mn) {
  if (j < 4) {
    *sc = q[j] & 63;
    *mn = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
    *mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Group g's 6-bit q3_K scale, minus 32.
HXQ_FN int hxq_scale_q3_k(const HXQ_GLOBAL hxq_u8* packed, int g) {
  const int low = g < 8 ? packed[g] & 0x0F : packed[g - 8] >> 4;
  const int high = (packed[8 + g % 4] >> (2 * (g / 4))) & 3;
  return (low | (high << 4)) - 32;
}

HXQ_FN int hxq_ls_iq4_xs(const HXQ_GLOBAL hxq_u8* b, int j) {
  const int scales_h = b[2] | (b[3] << 8);
  return ((b[4 + j / 2] >> (4 * (j % 2))) & 0x0F) | (((scales_h >> (2 * j)) & 3) << 4);
}

// Value i of a block, with ggml's float arithmetic (dequantize_row_* operation for operation).
HXQ_FN float hxq_value(const HXQ_GLOBAL hxq_u8* b, int i) {
#if QTYPE == 0
  (void)i;
  return hxq_as_float(hxq_le32(b));
#elif QTYPE == 1
  (void)i;
  return hxq_half(b);
#elif QTYPE == 30
  (void)i;
  return hxq_as_float(((hxq_u32)b[0] | ((hxq_u32)b[1] << 8)) << 16);
#elif QTYPE == 8
  return (float)((const HXQ_GLOBAL hxq_i8*)(b + 2))[i] * hxq_half(b);
#elif QTYPE == 2 || QTYPE == 3 || QTYPE == 20
  const int at = QTYPE == 3 ? 4 : 2;
  const int nibble = i < 16 ? (b[at + i] & 0x0F) : (b[at + i - 16] >> 4);
#if QTYPE == 2
  return (float)(nibble - 8) * hxq_half(b);
#elif QTYPE == 3
  return (float)nibble * hxq_half(b) + hxq_half(b + 2);
#else
  return hxq_half(b) * (float)hxq_iq4(nibble);
#endif
#elif QTYPE == 6 || QTYPE == 7
  const int at = QTYPE == 7 ? 4 : 2;
  const int nibble = i < 16 ? (b[at + 4 + i] & 0x0F) : (b[at + 4 + i - 16] >> 4);
  const int q = nibble | (int)(((hxq_le32(b + at) >> i) & 1) << 4);
#if QTYPE == 6
  return (float)(q - 16) * hxq_half(b);
#else
  return (float)q * hxq_half(b) + hxq_half(b + 2);
#endif
#elif QTYPE == 10
  const int g = i / 16;
  const int sc = b[g];
  const float dl = hxq_half(b + 80) * (float)(sc & 0x0F);
  const float ml = hxq_half(b + 82) * (float)(sc >> 4);
  const int q = (b[16 + 32 * (i / 128) + i % 32] >> (2 * ((i / 32) % 4))) & 3;
  return dl * (float)q - ml;
#elif QTYPE == 11
  const float dl = hxq_half(b + 108) * (float)hxq_scale_q3_k(b + 96, i / 16);
  const int j = i / 32;
  const int q = ((b[32 + 32 * (i / 128) + i % 32] >> (2 * (j % 4))) & 3) - ((b[i % 32] >> j) & 1 ? 0 : 4);
  return dl * (float)q;
#elif QTYPE == 12 || QTYPE == 13
  const int j = i / 32;
  int sc, mn;
  hxq_scale_min_k4(j, b + 4, &sc, &mn);
  const float d1 = hxq_half(b) * (float)sc;
  const float m1 = hxq_half(b + 2) * (float)mn;
#if QTYPE == 12
  const int byte = b[16 + 32 * (j / 2) + i % 32];
  const int q = j % 2 == 0 ? byte & 0x0F : byte >> 4;
#else
  const int byte = b[48 + 32 * (j / 2) + i % 32];
  const int q = (j % 2 == 0 ? byte & 0x0F : byte >> 4) + (((b[16 + i % 32] >> j) & 1) << 4);
#endif
  return d1 * (float)q - m1;
#elif QTYPE == 14
  const int h = i / 128, t = (i / 32) % 4, l = i % 32;
  const int byte = b[64 * h + 32 * (t % 2) + l];
  const int q = ((t < 2 ? byte & 0x0F : byte >> 4) | (((b[128 + 32 * h + l] >> (2 * t)) & 3) << 4)) - 32;
  const int sc = ((const HXQ_GLOBAL hxq_i8*)(b + 192))[8 * h + 2 * t + l / 16];
  return hxq_half(b + 208) * (float)sc * (float)q;
#elif QTYPE == 23
  const int j = i / 32, l = i % 32;
  const float dl = hxq_half(b) * (float)(hxq_ls_iq4_xs(b, j) - 32);
  const int nibble = l < 16 ? (b[8 + 16 * j + l] & 0x0F) : (b[8 + 16 * j + l - 16] >> 4);
  return dl * (float)hxq_iq4(nibble);
#endif
}

// Run j of a block for the integer dot product (Note [Runs]): q[32] and the integer scales of its halves; the
// 32-value types' d and float mins mn, or the super-block types' block d, dmin (in mn[0]) and integer mins mi
// (Note [Super-block sums]).
HXQ_FN void hxq_run(const HXQ_GLOBAL hxq_u8* b, int j, int* q, int* sc, float* d, float* mn, int* mi) {
  sc[0] = 1;
  sc[1] = 1;
  mn[0] = 0.0f;
  mn[1] = 0.0f;
  mi[0] = 0;
  mi[1] = 0;
#if QTYPE == 6 || QTYPE == 7
  const int at = QTYPE == 7 ? 4 : 2;
  const hxq_u32 qh = hxq_le32(b + at);
  for (int l = 0; l < 32; ++l) {
    const int nibble = l < 16 ? (b[at + 4 + l] & 0x0F) : (b[at + 4 + l - 16] >> 4);
    q[l] = (nibble | (int)(((qh >> l) & 1) << 4)) - (QTYPE == 6 ? 16 : 0);
  }
  *d = hxq_half(b);
#if QTYPE == 7
  mn[0] = -hxq_half(b + 2);
  mn[1] = mn[0];
#endif
#elif QTYPE == 20
  for (int l = 0; l < 16; ++l) {
    q[l] = hxq_iq4(b[2 + l] & 0x0F);
    q[l + 16] = hxq_iq4(b[2 + l] >> 4);
  }
  *d = hxq_half(b);
#elif QTYPE == 2
  for (int l = 0; l < 16; ++l) {
    q[l] = (b[2 + l] & 0x0F) - 8;
    q[l + 16] = (b[2 + l] >> 4) - 8;
  }
  *d = hxq_half(b);
#elif QTYPE == 10
  for (int l = 0; l < 32; ++l) q[l] = (b[16 + 32 * (j / 4) + l] >> (2 * (j % 4))) & 3;
  sc[0] = b[2 * j] & 0x0F;
  sc[1] = b[2 * j + 1] & 0x0F;
  mi[0] = b[2 * j] >> 4;
  mi[1] = b[2 * j + 1] >> 4;
  mn[0] = hxq_half(b + 82);
  *d = hxq_half(b + 80);
#elif QTYPE == 11
  for (int l = 0; l < 32; ++l) q[l] = ((b[32 + 32 * (j / 4) + l] >> (2 * (j % 4))) & 3) - ((b[l] >> j) & 1 ? 0 : 4);
  sc[0] = hxq_scale_q3_k(b + 96, 2 * j);
  sc[1] = hxq_scale_q3_k(b + 96, 2 * j + 1);
  *d = hxq_half(b + 108);
#elif QTYPE == 12 || QTYPE == 13
  int s, m;
  hxq_scale_min_k4(j, b + 4, &s, &m);
  for (int l = 0; l < 32; ++l) {
#if QTYPE == 12
    const int byte = b[16 + 32 * (j / 2) + l];
    q[l] = j % 2 == 0 ? byte & 0x0F : byte >> 4;
#else
    const int byte = b[48 + 32 * (j / 2) + l];
    q[l] = (j % 2 == 0 ? byte & 0x0F : byte >> 4) | (((b[16 + l] >> j) & 1) << 4);
#endif
  }
  sc[0] = s;
  sc[1] = s;
  mi[0] = m;
  mi[1] = m;
  *d = hxq_half(b);
  mn[0] = hxq_half(b + 2);
#elif QTYPE == 14
  const int h = j / 4, t = j % 4;
  for (int l = 0; l < 32; ++l) {
    const int byte = b[64 * h + 32 * (t % 2) + l];
    q[l] = ((t < 2 ? byte & 0x0F : byte >> 4) | (((b[128 + 32 * h + l] >> (2 * t)) & 3) << 4)) - 32;
  }
  sc[0] = ((const HXQ_GLOBAL hxq_i8*)(b + 192))[2 * j];
  sc[1] = ((const HXQ_GLOBAL hxq_i8*)(b + 192))[2 * j + 1];
  *d = hxq_half(b + 208);
#elif QTYPE == 23
  for (int l = 0; l < 16; ++l) {
    q[l] = hxq_iq4(b[8 + 16 * j + l] & 0x0F);
    q[l + 16] = hxq_iq4(b[8 + 16 * j + l] >> 4);
  }
  sc[0] = hxq_ls_iq4_xs(b, j) - 32;
  sc[1] = sc[0];
  *d = hxq_half(b);
#endif
}

// data [n_rows, row_size] of QTYPE blocks, row_bytes bytes per row; y [n, row_size] f32.
HXQ_KERNEL gather_rows_q(HXQ_IN(hxq_u8, data), HXQ_IN(int, indices), HXQ_OUT(float, y), int n, int n_rows,
                         int row_size, hxq_u64 row_bytes HXQ_CTL) {
  const int gid = HXQ_GLOBAL_ID;
  if (gid >= n * row_size) return;
  const int i = gid / row_size;
  const int e = gid % row_size;
#if IDX_I64
  const long row = ((const HXQ_GLOBAL long*)HXQ_PTR(const int, indices))[i];
#else
  const long row = HXQ_PTR(const int, indices)[i];
#endif
  if (row < 0 || row >= n_rows) {
    ctl[1] = HX_INVALID_ARGUMENT;
    return;
  }
  const HXQ_GLOBAL hxq_u8* src = HXQ_PTR(const hxq_u8, data) + (hxq_u64)row * row_bytes;
  HXQ_PTR(float, y)[gid] = hxq_value(src + (e / BLOCK_VALUES) * BLOCK_BYTES, e % BLOCK_VALUES);
}

// ((l0 + l4) + (l1 + l5)) + ((l2 + l6) + (l3 + l7)): the CPU's hsum256.
HXQ_FN float hxq_sum_lanes8(const float* v) {
  const float a0 = v[0] + v[4], a1 = v[1] + v[5], a2 = v[2] + v[6], a3 = v[3] + v[7];
  return (a0 + a1) + (a2 + a3);
}

// a [m, k] f32, w [n, k] QTYPE rows, bias [n] (HAS_BIAS), y [m, n] f32; k = NB · 32. The activations are quantized
// in groups of RUNS blocks (one scale per 32 values, or per super-block: the CPU's activation_group) and each W
// block's runs summed in integers before its one float step (Note [Super-block sums]).
HXQ_KERNEL matmul_kq(HXQ_IN(float, a), HXQ_IN(hxq_u8, w), HXQ_IN(float, bias), HXQ_OUT(float, y), int m, int n) {
  HXQ_SHARED hxq_i8 act_q[TILE_M * NB * 32];  // (TILE_M, NB, 32) quantized activations
  HXQ_SHARED float act_d[TILE_M * NB];        // (TILE_M, NB) their scales
#if HAS_MINS
  HXQ_SHARED int act_sum[TILE_M * NB * 2];    // (TILE_M, NB, 2) Σ q over each half, exactly
#endif
  const int tid = HXQ_LOCAL_ID;
  const int i0 = HXQ_GROUP_Y * TILE_M;
  const int rows = min(TILE_M, m - i0);
  const HXQ_GLOBAL float* a_rows = HXQ_PTR(const float, a) + (long)i0 * (NB * 32);
  for (int grp = tid; grp < rows * (NB / RUNS); grp += WG) {
    const HXQ_GLOBAL float* x = a_rows + (long)grp * (32 * RUNS);
    float amax = 0.0f;
    for (int i = 0; i < 32 * RUNS; ++i) amax = hxq_fmax(amax, hxq_fabs(x[i]));
    // 32-value groups keep d at f16 precision, super-block groups the float, as the CPU's quantize_activation_row.
    const float d = RUNS == 1 ? hx_round_half(amax / 127.0f) : amax / 127.0f;
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int blk = grp * RUNS; blk < (grp + 1) * RUNS; ++blk) {
      int half_sum[2] = {0, 0};
      for (int i = 0; i < 32; ++i) {
        const int q = min(127, max(-127, (int)hxq_rint(x[(blk - grp * RUNS) * 32 + i] * inv)));
        act_q[blk * 32 + i] = (hxq_i8)q;
        half_sum[i / 16] += q;
      }
      act_d[blk] = d;
#if HAS_MINS
      act_sum[2 * blk] = half_sum[0];
      act_sum[2 * blk + 1] = half_sum[1];
#else
      (void)half_sum;
#endif
    }
  }
  HXQ_SYNC();
  const int j = HXQ_GROUP_X * WG + tid;
  if (j >= n) return;
  float acc[TILE_M][8];  // the CPU's lanes: lane l sums d·d_a·(Σ_runs sc·(q·a over elements 4l..4l+3)) across blocks
#if !BLOCK_INTEGERS
  float extra[TILE_M];   // the min terms
#endif
  for (int r = 0; r < TILE_M; ++r) {
    for (int l = 0; l < 8; ++l) acc[r][l] = 0.0f;
#if !BLOCK_INTEGERS
    extra[r] = 0.0f;
#endif
  }
  const HXQ_GLOBAL hxq_u8* w_row = HXQ_PTR(const hxq_u8, w) + (long)j * (NB / RUNS) * BLOCK_BYTES;
  int q[32];
  int sc[2];
  float mn[2];
  int mi[2];
  for (int b = 0; b < NB / RUNS; ++b) {
    int isum[TILE_M][8];
#if HAS_MINS && RUNS > 1
    int imin[TILE_M];  // the runs' integer min sums (types without mins or with 32-value blocks have none)
    for (int r = 0; r < TILE_M; ++r) imin[r] = 0;
#endif
    for (int r = 0; r < TILE_M; ++r) {
      for (int l = 0; l < 8; ++l) isum[r][l] = 0;
    }
    float d = 0.0f;
    for (int run = 0; run < RUNS; ++run) {
      hxq_run(w_row + b * BLOCK_BYTES, run, q, sc, &d, mn, mi);
      for (int r = 0; r < TILE_M; ++r) {
        if (r >= rows) break;
        const int ab = r * NB + b * RUNS + run;
        for (int l = 0; l < 8; ++l) {
          int s = 0;
          for (int e = 4 * l; e < 4 * l + 4; ++e) s += q[e] * (int)act_q[ab * 32 + e];
          isum[r][l] += sc[l / 4] * s;
        }
#if HAS_MINS && RUNS == 1
        const float da = act_d[ab];
        const float mins = HXQ_FMA(mn[0], (float)act_sum[2 * ab], mn[1] * (float)act_sum[2 * ab + 1]);
        extra[r] = HXQ_FMA(-da, mins, extra[r]);  // the CPU's minus_min_term
#elif HAS_MINS
        imin[r] += mi[0] * act_sum[2 * ab] + mi[1] * act_sum[2 * ab + 1];  // the CPU's run_mins
#endif
      }
    }
    for (int r = 0; r < TILE_M; ++r) {
      if (r >= rows) break;
      const float da = act_d[r * NB + b * RUNS];
      const float scale = d * da;
#if BLOCK_INTEGERS
      int total = 0;  // exact, so the order of this sum does not matter
      for (int l = 0; l < 8; ++l) total += isum[r][l];
      acc[r][0] = HXQ_FMA((float)total, scale, acc[r][0]);
#else
      for (int l = 0; l < 8; ++l) acc[r][l] = HXQ_FMA((float)isum[r][l], scale, acc[r][l]);
#endif
#if HAS_MINS && RUNS > 1
      extra[r] = HXQ_FMA(-(mn[0] * da), (float)imin[r], extra[r]);  // the CPU's minus_block_mins
#endif
    }
  }
#if HAS_BIAS
  const float bj = HXQ_PTR(const float, bias)[j];
#else
  const float bj = 0.0f;
#endif
#if BLOCK_INTEGERS
  for (int r = 0; r < rows; ++r) HXQ_PTR(float, y)[(long)(i0 + r) * n + j] = acc[r][0] + bj;
#else
  for (int r = 0; r < rows; ++r) HXQ_PTR(float, y)[(long)(i0 + r) * n + j] = (hxq_sum_lanes8(acc[r]) + extra[r]) + bj;
#endif
}

// ---- mixture of experts (Note [Device experts]) ----

// MoeRoute: one work-item per token. probs = softmax(logits) (max-subtracted hx_exp, summed left to right); the k
// best by probability, the lower id first on ties; weights their probabilities (/ their sum when normalize, clamped
// at 2^-14; · scale when scale is neither 0 nor 1).
HXQ_KERNEL moe_route(HXQ_IN(float, logits), HXQ_OUT(int, ids), HXQ_OUT(float, weights), int n_tokens, int n_experts,
                     int k, int normalize, float scale) {
  const int t = HXQ_GLOBAL_ID;
  if (t >= n_tokens) return;
  const HXQ_GLOBAL float* x = HXQ_PTR(const float, logits) + (long)t * n_experts;
  HXQ_GLOBAL int* out_ids = HXQ_PTR(int, ids) + (long)t * k;
  HXQ_GLOBAL float* out_w = HXQ_PTR(float, weights) + (long)t * k;
  float max = x[0];
  for (int e = 1; e < n_experts; ++e) max = hxq_fmax(max, x[e]);
  float sum = 0.0f;
  for (int e = 0; e < n_experts; ++e) sum += hx_exp(x[e] - max);
  const float inv = 1.0f / sum;
  float chosen = 0.0f;
  for (int s = 0; s < k; ++s) {
    int best = -1;
    float best_p = 0.0f;
    for (int e = 0; e < n_experts; ++e) {
      bool taken = false;
      for (int u = 0; u < s; ++u) taken = taken || out_ids[u] == e;
      const float p = hx_exp(x[e] - max) * inv;
      if (!taken && (best < 0 || p > best_p)) {
        best = e;
        best_p = p;
      }
    }
    out_ids[s] = best;
    out_w[s] = best_p;
    chosen += best_p;
  }
  const float denominator = hxq_fmax(chosen, 6.103515625e-5f);
  for (int s = 0; s < k; ++s) {
    float w = out_w[s];
    if (normalize) w = w / denominator;
    if (scale != 0.0f && scale != 1.0f) w = w * scale;
    out_w[s] = w;
  }
}

// MatMulQExperts: one work-item per output element. Unweighted: y[t, s, j] = A[t (, s)] · W[ids[t, s]][j];
// WEIGHTED: y[t, j] = Σ_s weights[t, s] · (A[t (, s)] · W[ids[t, s]][j]) in slot order. The dot products run in
// float over W's values widened with ggml's arithmetic (hxq_value), element by element.
HXQ_KERNEL matmul_experts(HXQ_IN(float, a), HXQ_IN(hxq_u8, w), HXQ_IN(int, ids), HXQ_IN(float, weights),
                          HXQ_OUT(float, y), int n_tokens, int n_slots, int n, int k, int n_experts, int per_slot_a,
                          hxq_u64 row_bytes HXQ_CTL) {
  const int gid = HXQ_GLOBAL_ID;
#if WEIGHTED
  if (gid >= n_tokens * n) return;
  const int t = gid / n;
  const int j = gid % n;
  const int first = 0, last = n_slots;
#else
  if (gid >= n_tokens * n_slots * n) return;
  const int t = gid / (n_slots * n);
  const int j = gid % n;
  const int first = (gid / n) % n_slots, last = first + 1;
#endif
  float out = 0.0f;
  for (int s = first; s < last; ++s) {
    const int e = HXQ_PTR(const int, ids)[t * n_slots + s];
    if (e < 0 || e >= n_experts) {
      ctl[1] = HX_INVALID_ARGUMENT;
      return;
    }
    const HXQ_GLOBAL float* x = HXQ_PTR(const float, a) + (long)(per_slot_a ? t * n_slots + s : t) * k;
    const HXQ_GLOBAL hxq_u8* row = HXQ_PTR(const hxq_u8, w) + ((hxq_u64)e * n + j) * row_bytes;
    float dot = 0.0f;
    for (int i = 0; i < k; ++i) dot += x[i] * hxq_value(row + (i / BLOCK_VALUES) * BLOCK_BYTES, i % BLOCK_VALUES);
#if WEIGHTED
    const float ws = HXQ_PTR(const float, weights)[t * n_slots + s];
    out = s == 0 ? ws * dot : out + ws * dot;
#else
    out = dot;
#endif
  }
  HXQ_PTR(float, y)[gid] = out;
}
)SRC";

// The block types these kernels take (the others have their per-backend kernels).
bool block_type(DType dtype) {
  switch (dtype) {
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kIQ4_NL:
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kIQ4_XS: return true;
    default: return false;
  }
}

// MatMulQ's types here: the block types and q4_0 (Note [Block integers]; GatherRows of q4_0 is the per-backend one).
bool matmul_type(DType dtype) { return block_type(dtype) || dtype == DType::kQ4_0; }

std::vector<DType> types_where(bool (*pred)(DType)) {
  std::vector<DType> out;
  for (int i = 0; i < kDTypeCount; ++i) {
    if (pred(static_cast<DType>(i))) out.push_back(static_cast<DType>(i));
  }
  return out;
}

int qtype(DType dtype) { return static_cast<int>(*dtype_info(dtype).ggml_type); }

ops::KernelDef gather_rows_kernel(const Backend& backend, std::shared_ptr<const Program> program) {
  ops::KernelDef def = make_def(backend, "GatherRows", "hxrt", 1, "GatherRowsBlocks",
                                "one work-item per element, widening q5/iq4/K-quant rows with ggml's arithmetic");
  def.input_dtypes = {types_where(&block_type), {DType::kI32, DType::kI64}};
  def.tiling = [](const ops::TilingQuery& query) -> Result<ops::Tiling> {
    const int64_t elements = query.outputs.empty() ? 0 : query.outputs[0].num_elements();
    HXRT_RETURN_IF_ERROR(check_int32(elements, "GatherRows outputs"));
    ops::Tiling tiling;
    tiling.launch = launch_1d(elements, kGatherGroup);
    tiling.values = {{"wg", kGatherGroup}};
    return tiling;
  };
  def.launch = [backend, program](hal::Stream& stream, const ops::KernelLaunch& launch) -> Status {
    const ops::TensorRef& data = launch.inputs[0];
    const ops::TensorRef& indices = launch.inputs[1];
    const ops::TensorRef& y = launch.outputs[0];
    if (data.shape.rank() != 2 || !block_type(data.dtype)) {
      return invalid_argument("GatherRows: data must be a [n_rows, row_size] table of a block type, got {} {}",
                              data.dtype, data.shape);
    }
    const int64_t row_size = data.shape.dim(1);
    HXRT_ASSIGN_OR_RETURN(const uint64_t row_bytes, storage_bytes(data.dtype, static_cast<uint64_t>(row_size)));
    if (y.num_elements() == 0) return ok_status();
    std::vector<hal::KernelArg> args;
    backend.add_tensor_arg(args, data);
    backend.add_tensor_arg(args, indices);
    backend.add_tensor_arg(args, y);
    for (int64_t v : {indices.num_elements(), data.shape.dim(0), row_size}) {
      args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(v)));
    }
    args.push_back(hal::KernelArg::scalar(row_bytes));
    return launch_program(stream, *program, "gather_rows_q",
                          quant_gather_options(qtype(data.dtype), indices.dtype == DType::kI64),
                          launch.tiling->launch, args);
  };
  return def;
}

struct KqGeometry {
  int64_t m = 0, k = 0, n = 0;
};

Result<KqGeometry> kq_geometry(const Shape& a, const Shape& w) {
  if (a.rank() < 1 || w.rank() != 2 || w.dim(1) != a.dim(-1)) {
    return invalid_argument("MatMulQ: A {} and W {} are not [..., K] and [N, K]", a, w);
  }
  KqGeometry g{.m = 1, .k = a.dim(-1), .n = w.dim(0)};
  for (int i = 0; i + 1 < a.rank(); ++i) g.m *= a.dim(i);
  return g;
}

// Activation rows per work-group: the bucket of m (1, 2, 4, 8), lowered to fit kLocalBudget.
int64_t tile_rows(int64_t m, int64_t nb) {
  int64_t tile = 1;
  while (tile < kMaxTileM && tile < m) tile *= 2;
  while (tile > 1 && tile * nb * kActBytes > kLocalBudget) tile /= 2;
  return tile;
}

ops::KernelDef matmul_kernel(const Backend& backend, std::shared_ptr<const Program> program) {
  ops::KernelDef def = make_def(backend, "MatMulQ", "hxrt", 1, "MatMulQBlocks",
                                "q4_0/q5/iq4/K-quant W: q8 activations in local memory, the CPU's arithmetic "
                                "(bit-identical)");
  def.input_dtypes = {{DType::kF32}, types_where(&matmul_type), {DType::kF32}};
  def.tiling = [](const ops::TilingQuery& query) -> Result<ops::Tiling> {
    if (query.inputs.size() < 2) return invalid_argument("MatMulQ tiling needs A and W");
    HXRT_ASSIGN_OR_RETURN(const KqGeometry g, kq_geometry(query.inputs[0].shape, query.inputs[1].shape));
    HXRT_RETURN_IF_ERROR(check_int32(g.m * g.n, "MatMulQ outputs"));
    const int64_t nb = g.k / 32;
    const int64_t tile = tile_rows(g.m, nb);
    if (tile * nb * kActBytes > kLocalBudget) {
      return unimplemented("MatMulQ: K={} needs {} bytes of local memory for one activation row, more than {}", g.k,
                           nb * kActBytes, kLocalBudget);
    }
    ops::Tiling tiling;
    tiling.values = {{"wg", kGroup}, {"tile_m", tile}, {"nb", nb}};
    tiling.launch.grid = {static_cast<uint32_t>(std::max<int64_t>(1, (g.n + kGroup - 1) / kGroup)),
                          static_cast<uint32_t>(std::max<int64_t>(1, (g.m + tile - 1) / tile)), 1};
    tiling.launch.block = {static_cast<uint32_t>(kGroup), 1, 1};
    return tiling;
  };
  def.launch = [backend, program](hal::Stream& stream, const ops::KernelLaunch& launch) -> Status {
    const ops::TensorRef& a = launch.inputs[0];
    const ops::TensorRef& w = launch.inputs[1];
    const ops::TensorRef& y = launch.outputs[0];
    if (a.dtype != DType::kF32 || y.dtype != DType::kF32 || !matmul_type(w.dtype)) {
      return invalid_argument("MatMulQ: A, Y must be f32 and W a block type, got {}, {}, {}", a.dtype, y.dtype,
                              w.dtype);
    }
    HXRT_ASSIGN_OR_RETURN(const KqGeometry g, kq_geometry(a.shape, w.shape));
    if (g.k % dtype_info(w.dtype).block_elements != 0) {
      return invalid_argument("MatMulQ: K={} is not a whole number of {} blocks", g.k, w.dtype);
    }
    if (y.num_elements() != g.m * g.n) return invalid_argument("MatMulQ: output {} does not hold {} x {}", y.shape, g.m, g.n);
    if (g.m == 0 || g.n == 0) return ok_status();
    const bool has_bias = launch.inputs.size() > 2 && launch.inputs[2].view.buffer != nullptr;
    if (has_bias && (launch.inputs[2].dtype != DType::kF32 || launch.inputs[2].num_elements() != g.n)) {
      return invalid_argument("MatMulQ: bias must be f32 [{}], got {} {}", g.n, launch.inputs[2].dtype,
                              launch.inputs[2].shape);
    }
    std::vector<hal::KernelArg> args;
    backend.add_tensor_arg(args, a);
    backend.add_tensor_arg(args, w);
    backend.add_tensor_arg(args, has_bias ? launch.inputs[2] : a);  // an unread stand-in without bias
    backend.add_tensor_arg(args, y);
    args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(g.m)));
    args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(g.n)));
    const int64_t tile = launch.tiling->get("tile_m", 1);
    return launch_program(stream, *program, "matmul_kq", quant_matmul_options(qtype(w.dtype), tile, g.k / 32, has_bias),
                          launch.tiling->launch, args);
  };
  return def;
}

// Note [Device experts]
// The MoE kernels are correct first: MoeRoute is one work-item per token, MatMulQExperts one per output element
// dotting f32 activations with W's widened values. The CPU's MatMulQExperts quantizes the activations to q8 as its
// MatMulQ does, so the two agree to that quantization's error (~1e-3 relative), not bit for bit; the routing agrees
// exactly unless two experts' probabilities tie to the last bit. A tiled, q8-activation version is the speed step.
bool experts_weight_type(DType dtype) {
  switch (dtype) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_1: return true;
    default: return block_type(dtype);
  }
}

ops::KernelDef moe_route_kernel(const Backend& backend, std::shared_ptr<const Program> program) {
  ops::KernelDef def = make_def(backend, "MoeRoute", "hxrt", 1, "MoeRouteSoftmaxTopK",
                                "one work-item per token: softmax over the experts, stable top-k, normalisation, scale");
  def.input_dtypes = {{DType::kF32}};
  def.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_moe_route_params(node));
  };
  def.tiling = [](const ops::TilingQuery& query) -> Result<ops::Tiling> {
    const int64_t n_tokens = query.inputs[0].shape.rank() == 2 ? query.inputs[0].shape.dim(0) : 0;
    HXRT_RETURN_IF_ERROR(check_int32(n_tokens, "MoeRoute tokens"));
    ops::Tiling tiling;
    tiling.launch = launch_1d(n_tokens, kGatherGroup);
    tiling.values = {{"wg", kGatherGroup}};
    return tiling;
  };
  def.launch = [backend, program](hal::Stream& stream, const ops::KernelLaunch& launch) -> Status {
    const auto& params = launch.params_as<ops::MoeRouteParams>();
    const ops::TensorRef& logits = launch.inputs[0];
    if (logits.dtype != DType::kF32 || logits.shape.rank() != 2 || params.k > logits.shape.dim(1)) {
      return invalid_argument("MoeRoute: logits must be f32 [n_tokens, n_experts >= k = {}], got {} {}", params.k,
                              logits.dtype, logits.shape);
    }
    if (logits.shape.dim(0) == 0) return ok_status();
    std::vector<hal::KernelArg> args;
    backend.add_tensor_arg(args, logits);
    backend.add_tensor_arg(args, launch.outputs[0]);
    backend.add_tensor_arg(args, launch.outputs[1]);
    for (int64_t v : {logits.shape.dim(0), logits.shape.dim(1), params.k, int64_t{params.normalize ? 1 : 0}}) {
      args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(v)));
    }
    args.push_back(hal::KernelArg::scalar(params.scale));
    return launch_program(stream, *program, "moe_route", "", launch.tiling->launch, args);
  };
  return def;
}

ops::KernelDef matmul_experts_kernel(const Backend& backend, std::shared_ptr<const Program> program) {
  ops::KernelDef def = make_def(backend, "MatMulQExperts", "hxrt", 1, "MatMulQExperts",
                                "one work-item per output: f32 activations · W's widened values (Note [Device experts])");
  std::vector<DType> types;
  for (int i = 0; i < kDTypeCount; ++i) {
    if (experts_weight_type(static_cast<DType>(i))) types.push_back(static_cast<DType>(i));
  }
  def.input_dtypes = {{DType::kF32}, types, {DType::kI32}, {DType::kF32}};
  def.tiling = [](const ops::TilingQuery& query) -> Result<ops::Tiling> {
    const int64_t elements = query.outputs.empty() ? 0 : query.outputs[0].num_elements();
    HXRT_RETURN_IF_ERROR(check_int32(elements, "MatMulQExperts outputs"));
    ops::Tiling tiling;
    tiling.launch = launch_1d(elements, kGatherGroup);
    tiling.values = {{"wg", kGatherGroup}};
    return tiling;
  };
  def.launch = [backend, program](hal::Stream& stream, const ops::KernelLaunch& launch) -> Status {
    const ops::TensorRef& a = launch.inputs[0];
    const ops::TensorRef& w = launch.inputs[1];
    const ops::TensorRef& ids = launch.inputs[2];
    const bool weighted = launch.inputs.size() > 3 && launch.inputs[3].view.buffer != nullptr;
    HXRT_ASSIGN_OR_RETURN(const ops::ExpertsGeometry g,
                          ops::experts_geometry(a.shape, w.shape, ids.shape, weighted ? &launch.inputs[3].shape : nullptr));
    if (a.dtype != DType::kF32 || ids.dtype != DType::kI32 || !experts_weight_type(w.dtype)) {
      return invalid_argument("MatMulQExperts: A f32, ids i32 and a supported W, got {}, {}, {}", a.dtype, ids.dtype,
                              w.dtype);
    }
    if (g.k % dtype_info(w.dtype).block_elements != 0) {
      return invalid_argument("MatMulQExperts: K={} is not a whole number of {} blocks", g.k, w.dtype);
    }
    HXRT_ASSIGN_OR_RETURN(const uint64_t row_bytes, storage_bytes(w.dtype, static_cast<uint64_t>(g.k)));
    if (launch.outputs[0].num_elements() == 0) return ok_status();
    std::vector<hal::KernelArg> args;
    backend.add_tensor_arg(args, a);
    backend.add_tensor_arg(args, w);
    backend.add_tensor_arg(args, ids);
    backend.add_tensor_arg(args, weighted ? launch.inputs[3] : a);  // an unread stand-in without weights
    backend.add_tensor_arg(args, launch.outputs[0]);
    for (int64_t v : {g.n_tokens, g.n_slots, g.n, g.k, g.n_experts, int64_t{g.per_slot_a ? 1 : 0}}) {
      args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(v)));
    }
    args.push_back(hal::KernelArg::scalar(row_bytes));
    return launch_program(stream, *program, "matmul_experts", experts_options(qtype(w.dtype), weighted),
                          launch.tiling->launch, args);
  };
  return def;
}

}  // namespace

std::string experts_options(int ggml_type, bool weighted) {
  return fmt::format("-D QTYPE={} -D WEIGHTED={}", ggml_type, weighted ? 1 : 0);
}

std::string_view quant_blocks_source() { return kSource; }

std::string quant_gather_options(int ggml_type, bool i64_indices) {
  return fmt::format("-D QTYPE={} -D IDX_I64={}", ggml_type, i64_indices ? 1 : 0);
}

std::string quant_matmul_options(int ggml_type, int64_t tile_m, int64_t nb, bool has_bias) {
  return fmt::format("-D QTYPE={} -D TILE_M={} -D NB={} -D WG={} -D HAS_BIAS={}", ggml_type, tile_m, nb, kGroup,
                     has_bias ? 1 : 0);
}

Status register_quant_blocks(ops::KernelRegistry& registry, const Backend& backend,
                             std::shared_ptr<const Program> program) {
  HXRT_RETURN_IF_ERROR(registry.add(gather_rows_kernel(backend, program)));
  HXRT_RETURN_IF_ERROR(registry.add(matmul_kernel(backend, program)));
  HXRT_RETURN_IF_ERROR(registry.add(moe_route_kernel(backend, program)));
  return registry.add(matmul_experts_kernel(backend, program));
}

}  // namespace hxrt::kernels::jit
