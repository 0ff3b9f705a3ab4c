// MatMulQ dot products for the weight types that carry several scales per block or a non-uniform grid: q5_0, q5_1,
// iq4_nl (32-value blocks) and the 256-value super-blocks q2_K, q3_K, q4_K, q5_K, q6_K and iq4_xs (internal to
// quant_matmul.cc and its tests).
//
// Note [Runs]: every type is computed as a sequence of 32-value runs, each matching one activation block (BlockQ8A):
// run value i = d · sc[i / 16] · q[i] − mn[i / 16], with q a small integer (signed, or unsigned with a min), sc the
// run's integer scales of its two 16-value halves and d, mn floats. A run's contribution to a dot product is then
//     d · d_a · (sc[0] · Σ_{i<16} q·a + sc[1] · Σ_{i≥16} q·a) − d_a · (mn[0] · sum[0] + mn[1] · sum[1])
// with the integer sums exact (vpmaddubsw, then vpmaddwd against the scales) and sum[h] the activation's exact
// half sums. Types with one scale per 32 values fold it into d (d · sc is exact in float: an f16 times six bits).
// The activations keep one scale per 32 values — finer than llama.cpp's q8_K (one per 256) — so the error bound of
// Note [Error bounds] (base/quant_types.cc) holds for every type.
//
// Each (activation row, W row) runs the same instructions whatever the number of rows computed together, so
// Note [Batch invariance] holds for these types too.
//
// Thread-safety: every function is reentrant.
#pragma once

#include "hxrt/base/dtype.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/cpu/quant_matmul_vnni.h"

namespace hxrt::kernels::cpu::kquant {

// True for the types these kernels compute.
bool handles(DType w_type);

// out[r] = dot(W row, activation row r) for r < rows (1..kQuantTileRows); activation rows are nb blocks of 32 apart.
using RowsFn = void (*)(const void* w_row, const BlockQ8A* a, int64_t nb, float* out);

// The kernel for `rows` rows on `isa` (AVX-512 VNNI: 256-bit vpdpbusd, bit-identical to AVX2); nullptr for a type it
// does not handle.
RowsFn rows_kernel(DType w_type, QuantIsa isa, int rows);

// AVX2, for prefill tiles of more than kQuantTileRows rows, of these types and q8_0, q4_0, q4_1: W decoded once per
// tile (Note [AVX2 decoded rows] in the .cc), bit-identical to the rows kernels: y[i * ldy + j] = dot(activation
// row i, W row j) (+ bias[j]) for i < rows, j < cols; activation row i is a + i · nb.
void panel_tile_avx2(DType w_type, const BlockQ8A* a, int64_t rows, const std::byte* w, uint64_t row_bytes, int64_t nb,
                     int64_t cols, const float* bias, float* y, int64_t ldy);

// True for the super-block types pair_tile computes (q2_K..q6_K, iq4_xs).
bool handles_pairs(DType w_type);

// AVX-512 VNNI, two W rows per zmm (Note [K-quant pairs] in the .cc), bit-identical to the AVX2 rows kernels:
// y[i * ldy + j] = dot(activation row i, W row j) (+ bias[j]) for i < rows, j < cols, as vnni512::tile. Needs
// quant_isa_supported(QuantIsa::kAvx512Vnni).
void pair_tile(DType w_type, const vnni512::ActBlock* act, int64_t rows, const std::byte* w, uint64_t row_bytes,
               int64_t nb, int64_t cols, const float* bias, float* y, int64_t ldy);

}  // namespace hxrt::kernels::cpu::kquant
