// The 512-bit AVX-512 VNNI kernels of MatMulQ for quantized W (internal to quant_matmul.cc and its tests).
//
// Note [VNNI-512 pairs]: the results are bit-identical to the 256-bit AVX2 kernels (quant_matmul.cc for q8_0 and
// q4_1; quant_matmul_kquant.cc for q5_0, q5_1) and so to the OpenCL and CUDA kernels, which mirror their
// lanes: for every (activation row, W row) eight float lanes, lane l accumulating
// fma(Σ w·a over elements 4l..4l+3 of the block, d_w·d_a) block after block, reduced as hsum256, plus the offset
// term c_w·s_a accumulated by a scalar fma chain. What changes is how much one instruction does:
//   - two W rows share a zmm: lanes 0..7 belong to row c, lanes 8..15 to row c + 1. For q4 the zmm holds
//     [low nibbles of c | high nibbles of c | low of c + 1 | high of c + 1] (one broadcast load, one merge-masked
//     broadcast, one shift, one and) and the activation block is broadcast into both halves (ActBlock::values2), so one
//     vpdpbusd gives both rows' eight lane sums;
//   - the f16 scales and offsets of both rows for a whole step of blocks (4 of q4_1, 3 of q5_0/q5_1, 2 of
//     q8_0: at most 64 bytes of a row) come from one load per row, one word permute and one conversion; per block a
//     float permute spreads d_w over its eight lanes;
//   - q8_0 is signed × signed, which vpdpbusd does not take: W goes in as the unsigned w + 128 and the sum starts at
//     -128·Σa over the lane's four activations (ActBlock::corr), so the integer is exactly Σ w·a. q5_0
//     does the same (its integers are signed too, and the AVX2 kernels sum them exactly, without an offset term);
//   - q5_0/q5_1 add their fifth bits with one byte mask of both rows' qh; q5_1's min term is
//     quant_matmul_kquant.cc's, lane by lane for the pair;
// A micro-kernel computes RA activation rows × P pairs of W rows, loading each W block once for the RA rows; every
// (row, column) runs the same instructions whatever RA, P, the tiling or the thread split, so Note [Batch invariance]
// holds. An odd last W row is paired with itself and its second half discarded.
//
// Thread-safety: every function is reentrant.
#pragma once

#include <immintrin.h>

#include <array>
#include <cstddef>
#include <cstdint>

#include "hxrt/base/dtype.h"
#include "kernels/cpu/quant_matmul.h"

namespace hxrt::kernels::cpu::vnni512 {

// One quantized activation block in the layout the kernels read (Note [VNNI-512 pairs]). Both halves of a pair's
// zmm meet the same activation, so the kernels broadcast its 32 values and eight corrections into both (one load
// each): 96 bytes a block, which the prefill tiles stream from L2 once per group of W rows.
struct alignas(32) ActBlock {
  int8_t qs[32];    // the block's 32 values
  int32_t corr[8];  // the biased types (q8_0, q5_0, the signed K-quants): -128 · Σ qs[4l .. 4l + 4), lane l
  float d;          // scale
  float s;          // scaled sum
  float sum[2];     // the exact half sums of BlockQ8A, as floats (the min terms)

  // The values, and the corrections, for both rows of a pair. (GCC 12's false -Wmaybe-uninitialized inside the
  // broadcast intrinsic is silenced as in quant_simd.h.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
  __attribute__((target("avx512f"), always_inline)) __m512i values2() const {
    return _mm512_broadcast_i64x4(_mm256_load_si256(reinterpret_cast<const __m256i*>(qs)));
  }
  __attribute__((target("avx512f"), always_inline)) __m512i corr2() const {
    return _mm512_broadcast_i64x4(_mm256_load_si256(reinterpret_cast<const __m256i*>(corr)));
  }
#pragma GCC diagnostic pop
};
static_assert(sizeof(ActBlock) == 96);

// True for the W types tile() computes: q8_0, q4_1, q5_0, q5_1 (q4_0 and iq4_nl: quant_matmul_blockint.h).
bool handles(DType w_type);

// A micro-kernel: RA activation rows (act, nb blocks apiece) × the W rows [0, cols) of a tile (cols <= 2P), writing
// y[r * ldy + c] (+ bias[c]; bias may be null).
using MicroKernel = void (*)(const ActBlock* act, int64_t nb, const std::byte* w, uint64_t row_bytes, int64_t cols,
                             const float* bias, float* y, int64_t ldy);
inline constexpr int kMaxRows = 4;  // activation rows per micro-kernel
// [RA - 1][0]: RA rows × one pair (the tail); [RA - 1][1]: RA rows × `wide_pairs` pairs.
using MicroKernelTable = std::array<std::array<MicroKernel, 2>, kMaxRows>;

// Covers rows × cols of a tile with the table's micro-kernels (the driver tile() and the K-quant pairs of
// quant_matmul_kquant.cc share): wide kernels of `wide_pairs` pairs, then one pair at a time.
void run_tile(const MicroKernelTable& kernels, int wide_pairs, const ActBlock* act, int64_t rows,
              const std::byte* w, uint64_t row_bytes, int64_t nb, int64_t cols, const float* bias, float* y,
              int64_t ldy);

// Lays out one quantized activation row of nb blocks (w_type picks whether corr is filled).
void pack_activation_row(DType w_type, const BlockQ8A* row, int64_t nb, ActBlock* out);

// y[i * ldy + j] = dot(activation row i, W row j) (+ bias[j]) for i < rows, j < cols, bit-identical to the AVX2
// kernel. `act` holds the rows' nb blocks apiece; `w` points at W row 0 of the tile, rows `row_bytes` apart; bias
// may be null. Needs quant_isa_supported(QuantIsa::kAvx512Vnni).
void tile(DType w_type, const ActBlock* act, int64_t rows, const std::byte* w, uint64_t row_bytes, int64_t nb,
          int64_t cols, const float* bias, float* y, int64_t ldy);

}  // namespace hxrt::kernels::cpu::vnni512
