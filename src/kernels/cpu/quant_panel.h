// Decoded W panels for the AVX-512 VNNI pair kernels of MatMulQ (internal to quant_matmul_vnni.cc and
// quant_matmul_kquant.cc).
//
// Note [Decoded panels]: the pair kernels (Note [VNNI-512 pairs], Note [K-quant pairs]) decode a pair of W rows —
// the integers of each 32-value run into one zmm, d spread over the lanes, the integer scales and the offsets or
// mins — once per call, and a call covers at most four activation rows, so a prefill tile of 32 rows decodes every
// W block eight times. For a tile of more rows, panel_tile decodes kPanelPairs pairs at a time into PairRun records
// (a thread-local panel: 256 bytes a run, 12 KiB a pair of 1536-value rows) and runs every row of the tile against
// them, while the next panel's W rows are prefetched (prefetch_rows in quant_simd.h). A PairRun holds exactly the
// registers the pair kernel would have computed, and panel_kernel does the pair kernel's arithmetic on them in the
// same order, so the results keep their bits (Avx512VnniGivesTheAvx2Bits runs both paths). Decode-sized calls (four rows or fewer) keep the direct kernels, which need no store and reload.
//
// Thread-safety: every function is reentrant (the panel is thread-local).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cpu/quant_matmul_vnni.h"
#include "kernels/cpu/quant_simd.h"

namespace hxrt::kernels::cpu::vnni512 {

// One 32-value run of a pair of W rows, decoded.
struct alignas(64) PairRun {
  int8_t wq[64];   // row c's 32 integers, then row c + 1's (q + 128 for the biased forms)
  float dw[16];    // the run's d over row c's eight lanes, then over row c + 1's
  int32_t sc[16];  // the integer scales lane by lane (scaled forms)
  float mn[2][4];  // lanes 0 and 1: the pair's offsets (kOffset) or the mins of the run's halves 0 and 1 (kMin)
};

// What the accumulator update does besides Σ d_w·d_a · (integer dot) (Note [VNNI-512 pairs]).
enum class PanelTerm : uint8_t {
  kNone,    // nothing (q8_0, q5_0, the signed K-quants)
  kOffset,  // ext += c_w · s_a (q4_1)
  kMin,     // ext = ext − d_a · (mn0 · sum0 + mn1 · sum1) (q5_1, q2_K, q4_K, q5_K)
};
struct PanelForm {
  bool biased = false;  // the integers are q + 128 against an accumulator started at ActBlock::corr
  bool scaled = false;  // the lane sums are multiplied by integer scales (q2_K, q3_K, q6_K)
  PanelTerm term = PanelTerm::kNone;
};

#define HXRT_PANEL_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))

// RA activation rows (nb blocks apiece) × P decoded pairs (pair p's nb runs at panel + p · nb), cols <= 2P.
template <PanelForm F, int RA, int P>
HXRT_PANEL_TARGET void panel_kernel(const ActBlock* act, int64_t nb, const PairRun* panel, int64_t cols,
                                    const float* bias, float* y, int64_t ldy) {
  PairAccumulators<RA, P> tile;
  tile.zero();
  for (int64_t g = 0; g < nb; ++g) {
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      const PairRun& run = panel[p * nb + g];
      const __m512i wq = _mm512_load_si512(run.wq);
      const __m512 dw = _mm512_load_ps(run.dw);
#pragma GCC unroll 4
      for (int r = 0; r < RA; ++r) {
        const ActBlock& a = act[r * nb + g];
        const __m512i init = F.biased ? a.corr2() : _mm512_setzero_si512();
        __m512i idot = _mm512_dpbusd_epi32(init, wq, a.values2());
        if constexpr (F.scaled) idot = _mm512_mullo_epi32(idot, _mm512_load_si512(run.sc));
        tile.acc[r][p] = _mm512_fmadd_ps(to_float(idot), _mm512_mul_ps(dw, _mm512_set1_ps(a.d)), tile.acc[r][p]);
        if constexpr (F.term == PanelTerm::kOffset) {
          tile.ext[r][p] = _mm_fmadd_ps(_mm_load_ps(run.mn[0]), _mm_set1_ps(a.s), tile.ext[r][p]);
        } else if constexpr (F.term == PanelTerm::kMin) {
          tile.ext[r][p] = minus_min_lanes(tile.ext[r][p], _mm_load_ps(run.mn[0]), _mm_load_ps(run.mn[1]), a.d,
                                           a.sum[0], a.sum[1]);
        }
      }
    }
  }
  tile.store(cols, bias, y, ldy);
}
#undef HXRT_PANEL_TARGET

inline constexpr int kPanelPairs = 2;  // pairs decoded at a time (4 rows × 2 pairs of accumulators)

// Decodes W rows row0 and row1 (the same row for an odd last one), nb runs, into out[0 .. nb).
using PairDecoder = void (*)(const std::byte* row0, const std::byte* row1, int64_t nb, PairRun* out);

// y[i * ldy + j] = dot(activation row i, W row j) (+ bias[j]) for i < rows, j < cols, through decoded panels.
template <PanelForm F>
void panel_tile(PairDecoder decode, const ActBlock* act, int64_t rows, const std::byte* w, uint64_t row_bytes,
                int64_t nb, int64_t cols, const float* bias, float* y, int64_t ldy) {
  using Kernel = void (*)(const ActBlock*, int64_t, const PairRun*, int64_t, const float*, float*, int64_t);
  static constexpr std::array<std::array<Kernel, kPanelPairs>, kMaxRows> kKernels = {{
      {&panel_kernel<F, 1, 1>, &panel_kernel<F, 1, 2>},
      {&panel_kernel<F, 2, 1>, &panel_kernel<F, 2, 2>},
      {&panel_kernel<F, 3, 1>, &panel_kernel<F, 3, 2>},
      {&panel_kernel<F, 4, 1>, &panel_kernel<F, 4, 2>},
  }};
  thread_local std::vector<PairRun> panel;
  panel.resize(static_cast<size_t>(kPanelPairs * nb));
  for (int64_t j = 0; j < cols; j += 2 * kPanelPairs) {
    const int64_t width = std::min<int64_t>(2 * kPanelPairs, cols - j);
    const int pairs = static_cast<int>((width + 1) / 2);
    for (int p = 0; p < pairs; ++p) {
      const int64_t c = j + 2 * p;
      const std::byte* row0 = w + static_cast<uint64_t>(c) * row_bytes;
      decode(row0, c + 1 < cols ? row0 + row_bytes : row0, nb, panel.data() + p * nb);
    }
    prefetch_rows(w, j + 2 * kPanelPairs, std::min<int64_t>(cols, j + 4 * kPanelPairs), row_bytes);
    for (int64_t i = 0; i < rows; i += kMaxRows) {
      const int ra = static_cast<int>(std::min<int64_t>(kMaxRows, rows - i));
      kKernels[static_cast<size_t>(ra - 1)][static_cast<size_t>(pairs - 1)](
          act + i * nb, nb, panel.data(), width, bias != nullptr ? bias + j : nullptr, y + i * ldy + j, ldy);
    }
  }
}

}  // namespace hxrt::kernels::cpu::vnni512
