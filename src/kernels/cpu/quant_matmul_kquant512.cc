// Note [K-quant pairs]: the 512-bit AVX-512 VNNI prefill tiles of the super-block types (q2_K, q3_K, q4_K, q5_K,
// q6_K, iq4_xs). They compute what the rows kernels of quant_matmul_kquant.cc compute (Note [Super-block sums]), bit
// for bit, with twice the work per instruction:
//   - two W rows share a zmm, as in Note [VNNI-512 pairs]: bytes 0..31 are run j of row c, bytes 32..63 run j of row
//     c + 1, and the activation block is broadcast into both halves. Per run, vpmaddubsw gives the int16 sums of
//     value pairs and vpdpwssd multiplies them by the run's integer scales and adds them to the super-block's int32
//     lanes: lane l of a row = Σ_runs sc[l / 4] · Σ q·a over values 4l..4l+3, exactly the integers the rows kernels
//     sum (vpmaddubsw cannot saturate: |q| ≤ 127 and |a| ≤ 127). AVX-512 has no vpsignb, so the signed types keep
//     |q| and flip the activation's sign under a byte mask of q's negative values (one masked subtract);
//   - per super-block one float step per pair: acc += float(lanes) · (d_w · d_a), d_w spread over each row's eight
//     lanes, the products d_w · d_a rounded lane by lane as the rows kernels round their scalar product;
//   - the mins (q2_K, q4_K, q5_K) once per super-block instead of once per run: the activation's sixteen exact
//     16-value sums against the row's sixteen integer mins (a run's min repeated for both halves where the type has
//     one per run), one vpmaddwd for the pair, each row's eight int32 lanes added up exactly, then
//     ext = ext − (dmin · d_a) · float(Σ) with one rounding, as the rows kernels' fma.
// Each super-block of a pair is decoded once per tile into a SuperPair and serves every activation row of the tile
// (the next pairs' W rows prefetched meanwhile, prefetch_rows in quant_simd.h); every (row, column) runs the same operations whatever the tiling, so Note [Batch invariance] holds, and the
// results equal the 256-bit kernels' (Avx512VnniGivesTheAvx2Bits, RowsAreBatchInvariantBitForBit).
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "hxrt/base/check.h"
#include "kernels/cpu/quant_kquant_traits.h"
#include "kernels/cpu/quant_matmul_kquant.h"
#include "kernels/cpu/quant_simd.h"

namespace hxrt::kernels::cpu::kquant {
namespace {

// GCC 12 reports a false -Wmaybe-uninitialized inside AVX-512 intrinsics (their _mm512_undefined_* sources; see
// quant_simd.h): silenced for the kernels of this file.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#define HXRT_K512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))

// One super-block of a pair of W rows, decoded.
struct alignas(64) SuperPair {
  int8_t q[kSuperBlockRuns][64];    // per run: row c's 32 integers, then row c + 1's (|q| for the signed types)
  int16_t sc[kSuperBlockRuns][32];  // per run: the scale of each int16 pair sum, row c's 16 words then row c + 1's
  uint64_t neg[kSuperBlockRuns];    // signed types: bit i set where q[j][i] was negative
  float d[16];                      // row c's d over lanes 0..7, row c + 1's over lanes 8..15
  float dmin[16];                   // types with mins: as d (lanes 0 and 8 are the ones used)
  int16_t mins[32];                 // types with mins: the 16-value halves' integer mins, row c's then row c + 1's
};

// Decodes super-block b of W rows row0 and row1 (the same row for an odd last one).
template <DType W>
HXRT_K512_TARGET void decode_pair(const std::byte* row0, const std::byte* row1, int64_t b, SuperPair* out) {
  using T = Traits<W>;
  const typename T::Block* blocks[2] = {reinterpret_cast<const typename T::Block*>(row0) + b,
                                        reinterpret_cast<const typename T::Block*>(row1) + b};
  for (int h = 0; h < 2; ++h) {
    const typename T::Block& blk = *blocks[h];
    const typename T::Scales s = T::scales(blk);
    if constexpr (kSuperMins<W>) {
      _mm256_store_si256(reinterpret_cast<__m256i*>(out->mins + 16 * h), mins_avx2<W>(blk, s));
    }
#pragma GCC unroll 8
    for (int j = 0; j < kSuperBlockRuns; ++j) {
      const RunInfo run = T::info(blk, s, j);
      __m256i q = T::q_avx2(blk, j);
      if constexpr (T::kSigned) {
        const auto neg = static_cast<uint32_t>(_mm256_movemask_epi8(q));
        out->neg[j] = h == 0 ? neg : (out->neg[j] | (uint64_t{neg} << 32));
        q = _mm256_abs_epi8(q);
      }
      _mm256_store_si256(reinterpret_cast<__m256i*>(out->q[j] + 32 * h), q);
      _mm256_store_si256(reinterpret_cast<__m256i*>(out->sc[j] + 16 * h),
                         _mm256_set_m128i(_mm_set1_epi16(run.sc[1]), _mm_set1_epi16(run.sc[0])));
      if (j == 0) {
        _mm256_store_ps(out->d + 8 * h, _mm256_set1_ps(run.d));
        _mm256_store_ps(out->dmin + 8 * h, _mm256_set1_ps(run.dmin));
      }
    }
  }
}

// The eight int32 lanes of each row of a pair added up, exactly: row c's total in lane 0, row c + 1's in lane 8.
HXRT_K512_TARGET inline __m512i pair_totals(__m512i v) {
  v = _mm512_add_epi32(v, _mm512_shuffle_epi32(v, _MM_PERM_BADC));  // lanes i and i ^ 2 of each 128-bit lane
  v = _mm512_add_epi32(v, _mm512_shuffle_epi32(v, _MM_PERM_CDAB));  // and i ^ 1
  return _mm512_add_epi32(v, _mm512_shuffle_i32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1)));  // and the other 128-bit lane
}

// RA activation rows (nb blocks apiece, their half sums at hs, nsb apiece) × P decoded pairs (pair p's nsb
// super-blocks at panel + p · nsb), cols <= 2P.
template <DType W, int RA, int P>
HXRT_K512_TARGET void pair_kernel(const BlockQ8A* a, const HalfSums* hs, int64_t nb, const SuperPair* panel,
                                  int64_t cols, const float* bias, float* y, int64_t ldy) {
  using T = Traits<W>;
  constexpr bool kMins = !T::kSigned;
  const int64_t nsb = nb / kSuperBlockRuns;
  __m512 acc[RA][P];
  __m512 ext[RA][P];
  for (int r = 0; r < RA; ++r) {
    for (int p = 0; p < P; ++p) {
      acc[r][p] = _mm512_setzero_ps();
      ext[r][p] = _mm512_setzero_ps();
    }
  }
  for (int64_t b = 0; b < nsb; ++b) {
    __m512i isum[RA][P];
    for (int r = 0; r < RA; ++r) {
      for (int p = 0; p < P; ++p) isum[r][p] = _mm512_setzero_si512();
    }
#pragma GCC unroll 2
    for (int j = 0; j < kSuperBlockRuns; ++j) {
      const int64_t g = b * kSuperBlockRuns + j;
      __m512i av[RA];
#pragma GCC unroll 4
      for (int r = 0; r < RA; ++r) {
        av[r] = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[r * nb + g].qs)));
      }
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        const SuperPair& sp = panel[p * nsb + b];
        const __m512i q = _mm512_load_si512(sp.q[j]);
        const __m512i sc = _mm512_load_si512(sp.sc[j]);
#pragma GCC unroll 4
        for (int r = 0; r < RA; ++r) {
          __m512i x = av[r];
          if constexpr (T::kSigned) x = _mm512_mask_sub_epi8(x, sp.neg[j], _mm512_setzero_si512(), x);
          isum[r][p] = _mm512_dpwssd_epi32(isum[r][p], _mm512_maddubs_epi16(q, x), sc);
        }
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < RA; ++r) {
      const __m512 da = _mm512_set1_ps(a[r * nb + b * kSuperBlockRuns].d);
      __m512i halves = _mm512_setzero_si512();  // the row's half sums, in both halves
      if constexpr (kMins) {
        halves = _mm512_broadcast_i64x4(_mm256_load_si256(reinterpret_cast<const __m256i*>(hs[r * nsb + b].s)));
      }
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        const SuperPair& sp = panel[p * nsb + b];
        acc[r][p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r][p]), _mm512_mul_ps(_mm512_load_ps(sp.d), da),
                                    acc[r][p]);
        if constexpr (kMins) {
          const __m512i imin = pair_totals(_mm512_madd_epi16(halves, _mm512_load_si512(sp.mins)));
          ext[r][p] = _mm512_fnmadd_ps(_mm512_mul_ps(_mm512_load_ps(sp.dmin), da), _mm512_cvtepi32_ps(imin),
                                       ext[r][p]);
        }
      }
    }
  }
  for (int r = 0; r < RA; ++r) {
    for (int p = 0; p < P; ++p) {
      alignas(64) float e[16];
      _mm512_store_ps(e, ext[r][p]);
      store_pair(acc[r][p], _mm_setr_ps(e[0], e[8], 0.0f, 0.0f), cols - 2 * p, bias, 2 * p, y + r * ldy);
    }
  }
}

constexpr int kPairs = 2;     // pairs decoded and computed together
constexpr int kMaxRowsK = 4;  // activation rows per kernel call

template <DType W>
void panel_tile(const BlockQ8A* a, int64_t rows, const std::byte* w, uint64_t row_bytes, int64_t nb, int64_t cols,
                const float* bias, float* y, int64_t ldy) {
  using Kernel = void (*)(const BlockQ8A*, const HalfSums*, int64_t, const SuperPair*, int64_t, const float*, float*,
                          int64_t);
  static constexpr std::array<std::array<Kernel, kPairs>, kMaxRowsK> kKernels = {{
      {&pair_kernel<W, 1, 1>, &pair_kernel<W, 1, 2>},
      {&pair_kernel<W, 2, 1>, &pair_kernel<W, 2, 2>},
      {&pair_kernel<W, 3, 1>, &pair_kernel<W, 3, 2>},
      {&pair_kernel<W, 4, 1>, &pair_kernel<W, 4, 2>},
  }};
  const int64_t nsb = nb / kSuperBlockRuns;
  thread_local std::vector<SuperPair> panel;
  thread_local std::vector<HalfSums> halves;
  panel.resize(static_cast<size_t>(kPairs * nsb));
  if constexpr (kSuperMins<W>) {
    halves.resize(static_cast<size_t>(rows * nsb));
    half_sums(a, rows, nsb, halves.data());
  }
  for (int64_t c0 = 0; c0 < cols; c0 += 2 * kPairs) {
    const int64_t width = std::min<int64_t>(2 * kPairs, cols - c0);
    const int pairs = static_cast<int>((width + 1) / 2);
    for (int p = 0; p < pairs; ++p) {
      const int64_t c = c0 + 2 * p;
      const std::byte* row0 = w + static_cast<uint64_t>(c) * row_bytes;
      const std::byte* row1 = c + 1 < cols ? row0 + row_bytes : row0;
      for (int64_t b = 0; b < nsb; ++b) decode_pair<W>(row0, row1, b, panel.data() + p * nsb + b);
    }
    prefetch_rows(w, c0 + 2 * kPairs, std::min<int64_t>(cols, c0 + 4 * kPairs), row_bytes);
    for (int64_t i = 0; i < rows; i += kMaxRowsK) {
      const int ra = static_cast<int>(std::min<int64_t>(kMaxRowsK, rows - i));
      const HalfSums* hs = Traits<W>::kSigned ? nullptr : halves.data() + i * nsb;
      kKernels[static_cast<size_t>(ra - 1)][static_cast<size_t>(pairs - 1)](
          a + i * nb, hs, nb, panel.data(), width, bias != nullptr ? bias + c0 : nullptr,
          y + i * ldy + c0, ldy);
    }
  }
}

#undef HXRT_K512_TARGET
#pragma GCC diagnostic pop

}  // namespace

void panel_tile_vnni512(DType w_type, const BlockQ8A* a, int64_t rows, const std::byte* w, uint64_t row_bytes,
                        int64_t nb, int64_t cols, const float* bias, float* y, int64_t ldy) {
  switch (w_type) {
    case DType::kQ2_K: panel_tile<DType::kQ2_K>(a, rows, w, row_bytes, nb, cols, bias, y, ldy); return;
    case DType::kQ3_K: panel_tile<DType::kQ3_K>(a, rows, w, row_bytes, nb, cols, bias, y, ldy); return;
    case DType::kQ4_K: panel_tile<DType::kQ4_K>(a, rows, w, row_bytes, nb, cols, bias, y, ldy); return;
    case DType::kQ5_K: panel_tile<DType::kQ5_K>(a, rows, w, row_bytes, nb, cols, bias, y, ldy); return;
    case DType::kQ6_K: panel_tile<DType::kQ6_K>(a, rows, w, row_bytes, nb, cols, bias, y, ldy); return;
    case DType::kIQ4_XS: panel_tile<DType::kIQ4_XS>(a, rows, w, row_bytes, nb, cols, bias, y, ldy); return;
    default: HXRT_CHECK(false, "kquant::panel_tile_vnni512: {} is not a super-block type", w_type);
  }
}

}  // namespace hxrt::kernels::cpu::kquant
