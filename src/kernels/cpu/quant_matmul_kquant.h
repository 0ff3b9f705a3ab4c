// MatMulQ dot products for the weight types that carry several scales per block or a high bit: q5_0, q5_1
// (32-value blocks) and the 256-value super-blocks q2_K, q3_K, q4_K, q5_K, q6_K and iq4_xs (internal to
// quant_matmul.cc and its tests).
//
// Note [Runs]: every type is computed as a sequence of 32-value runs, each matching one activation block (BlockQ8A):
// run value i = d · sc[i / 16] · q[i] − min[i / 16], with q a small integer (signed, or unsigned with a min) and sc
// the run's integer scales of its two 16-value halves. A run's integer lanes are exact (vpmaddubsw, then vpmaddwd
// against the scales), lane l = sc[l / 4] · Σ q·a over values 4l..4l+3, against the activation's exact half sums for
// the mins.
//
// Note [Super-block sums]: the 32-value types (q5_0, q5_1) have one float d per run and one activation scale
// d_a per run, so each run contributes d · d_a · lanes − d_a · (mn[0] · sum[0] + mn[1] · sum[1]) in float. The
// super-block types (q2_K..q6_K, iq4_xs) have one float d (and dmin) per 256 values and integer sub-scales and
// mins, so MatMulQ quantizes their activations with one scale per super-block too (activation_group: llama.cpp's
// q8_K): the eight runs' lanes then add up in integers and the super-block contributes
//     d · d_a · Σ_runs lanes − dmin · d_a · Σ_runs (m[0] · sum[0] + m[1] · sum[1])
// — one float step per 256 values instead of eight. The integers are exact, and |Σ_runs lane| < 2²⁴ (q6_K's and
// iq4_xs's extremes) converts to float exactly. The error bound of Note [Error bounds] (base/quant_types.cc) takes
// max|a| over the activation group.
//
// Each (activation row, W row) runs the same instructions whatever the number of rows computed together, so
// Note [Batch invariance] holds for these types too.
//
// Thread-safety: every function is reentrant.
#pragma once

#include "hxrt/base/dtype.h"
#include "kernels/cpu/quant_matmul.h"

namespace hxrt::kernels::cpu::kquant {

// True for the types these kernels compute.
bool handles(DType w_type);

// The types whose super-blocks have integer mins: q2_K, q4_K, q5_K (their kernels take the activations' HalfSums).
bool has_super_mins(DType w_type);

// The sixteen exact 16-value sums of one super-block of an activation row, as int16 words; and, in the same
// layout, a W row's sixteen integer mins of one super-block (a run's min repeated for both halves where the type
// has one per run). Σ_h mins[h] · sums[h] is the super-block's min integer of Note [Super-block sums], which the
// kernels take in one vpmaddwd per super-block.
struct alignas(32) HalfSums {
  int16_t s[16];
};

// The half sums of `rows` activation rows of nsb super-blocks apiece (rows nsb · 8 blocks apart): out[r · nsb + b].
void half_sums(const BlockQ8A* a, int64_t rows, int64_t nsb, HalfSums* out);

// out[r] = dot(W row, activation row r) for r < rows (1..kQuantTileRows); activation rows are nb blocks of 32 apart,
// their half sums (has_super_mins types; otherwise unused, may be null) nb / 8 apart at hs.
using RowsFn = void (*)(const void* w_row, const BlockQ8A* a, const HalfSums* hs, int64_t nb, float* out);

// The kernel for `rows` rows on `isa` (AVX-512 VNNI: 256-bit vpdpbusd, bit-identical to AVX2); nullptr for a type it
// does not handle. Activation rows are quantized with activation_group(w_type).
RowsFn rows_kernel(DType w_type, QuantIsa isa, int rows);

// AVX2, for prefill tiles of more than kQuantTileRows rows, of these types and q8_0, q4_1: W decoded once per
// tile (Note [AVX2 decoded rows] in the .cc), bit-identical to the rows kernels: y[i * ldy + j] = dot(activation
// row i, W row j) (+ bias[j]) for i < rows, j < cols; activation row i is a + i · nb.
void panel_tile_avx2(DType w_type, const BlockQ8A* a, int64_t rows, const std::byte* w, uint64_t row_bytes, int64_t nb,
                     int64_t cols, const float* bias, float* y, int64_t ldy);

// AVX-512 VNNI (512-bit), for prefill tiles of more than kQuantTileRows rows of the super-block types (q2_K..q6_K,
// iq4_xs): two W rows per zmm, each super-block decoded once per tile (Note [K-quant pairs] in
// quant_matmul_kquant512.cc), bit-identical to the rows kernels; the arguments as panel_tile_avx2's, the activations
// quantized with activation_group(w_type). Needs quant_isa_supported(QuantIsa::kAvx512Vnni).
void panel_tile_vnni512(DType w_type, const BlockQ8A* a, int64_t rows, const std::byte* w, uint64_t row_bytes,
                        int64_t nb, int64_t cols, const float* bias, float* y, int64_t ldy);

}  // namespace hxrt::kernels::cpu::kquant
