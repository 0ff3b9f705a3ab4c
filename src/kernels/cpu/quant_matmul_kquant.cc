#include "kernels/cpu/quant_matmul_kquant.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "hxrt/base/check.h"
#include "hxrt/base/float16.h"
#include "hxrt/base/quant_blocks.h"
#include "kernels/cpu/quant_kquant_traits.h"
#include "kernels/cpu/quant_simd.h"

namespace hxrt::kernels::cpu::kquant {
namespace {

// extra − d_a · (mn[0] · sum[0] + mn[1] · sum[1]) for one run of a 32-value type and its activation block, with
// explicit fused operations so that no compiler contracts them differently (the JIT backends repeat them:
// kernels/jit/quant_blocks.cc).
inline float minus_min_term(float extra, const RunInfo& run, const BlockQ8A& a) {
  const float mins = std::fma(run.mn[0], static_cast<float>(a.sum[0]), run.mn[1] * static_cast<float>(a.sum[1]));
  return std::fma(-a.d, mins, extra);
}

// m[0] · sum[0] + m[1] · sum[1], exactly: a super-block run's integer mins against its activation block.
template <typename T>
inline int32_t run_mins(const RunInfo& run, const BlockQ8A& a) {
  if constexpr (run_scale<T>()) return int32_t{run.m[0]} * (int32_t{a.sum[0]} + int32_t{a.sum[1]});
  return int32_t{run.m[0]} * int32_t{a.sum[0]} + int32_t{run.m[1]} * int32_t{a.sum[1]};
}

// The run's integer scales as the 16 int16 lanes vpmaddwd takes (halves 0 and 1).
template <typename T>
__attribute__((target("avx2"))) inline __m256i scales_epi16(const RunInfo& run) {
  if constexpr (run_scale<T>()) return _mm256_set1_epi16(run.sc[0]);
  return _mm256_set_m128i(_mm_set1_epi16(run.sc[1]), _mm_set1_epi16(run.sc[0]));
}

// Note [Run scale vectors]: a super-block's sixteen half scales as int16 words (word 2j: run j's first half, 2j + 1
// its second) come from Traits::half_scales once per block, straight from the block's bytes into a register;
// run_scales16/32 then give each run's scale vectors in two instructions. Building them per run from RunInfo's
// scalars (general registers, moved through the stack) was most of a decode step's time for the types with sixteen
// scales: a 1536 x 576 GEMV on one Zen 5 core took q3_K 74 us, iq4_xs 40, q6_K 33 that way, and 23, 21 and 26 with
// the scales taken as constants. (A stack array filled from RunInfo, loaded once per block, was slower still: its
// sixteen two-byte stores cannot forward to the one load.) The 32-value types' runs have scale 1 for both halves.
template <DType W>
__attribute__((target("avx2"), always_inline)) inline __m256i block_half_scales(const typename Traits<W>::Block& b) {
  if constexpr (kSuper<W>) return Traits<W>::half_scales(b);
  return _mm256_set1_epi16(1);
}
// Run j's scales from the half scales, half 0's in the low 128 bits and half 1's in the high: as the int16 lanes
// vpmaddwd takes, and as int32 lanes.
__attribute__((target("avx2"))) inline __m256i run_pair(__m256i halves, int j) {
  return _mm256_permutevar8x32_epi32(halves, _mm256_set1_epi32(j));  // (word 2j, word 2j + 1) in every dword
}
__attribute__((target("avx2"))) inline __m256i run_scales16(__m256i halves, int j) {
  return _mm256_shuffle_epi8(run_pair(halves, j), _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,  //
                                                    2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3));
}
__attribute__((target("avx2"))) inline __m256i run_scales32(__m256i halves, int j) {
  const __m256i high_words = _mm256_shuffle_epi8(
      run_pair(halves, j), _mm256_setr_epi8(-1, -1, 0, 1, -1, -1, 0, 1, -1, -1, 0, 1, -1, -1, 0, 1,  //
                             -1, -1, 2, 3, -1, -1, 2, 3, -1, -1, 2, 3, -1, -1, 2, 3));
  return _mm256_srai_epi32(high_words, 16);  // sign-extended
}

// extra − dmin · d_a · imin: a super-block's min term (the JIT backends repeat it).
inline float minus_block_mins(float extra, float dmin, float da, int32_t imin) {
  return std::fma(-(dmin * da), static_cast<float>(imin), extra);
}

template <DType W, int R>
void rows_scalar(const void* w_row, const BlockQ8A* a, const HalfSums*, int64_t nb, float* out) {
  using T = Traits<W>;
  const auto* w = static_cast<const typename T::Block*>(w_row);
  const int64_t blocks = nb / T::kRuns;
  float sum[R] = {};
  float extra[R] = {};
  int8_t q[32];
  for (int64_t b = 0; b < blocks; ++b) {
    const typename T::Scales s = T::scales(w[b]);
    int32_t isum[R] = {};
    int32_t imin[R] = {};
    RunInfo run;
    for (int j = 0; j < T::kRuns; ++j) {
      run = T::info(w[b], s, j);
      T::q_scalar(w[b], j, q);
      for (int r = 0; r < R; ++r) {
        const BlockQ8A& ab = a[r * nb + b * T::kRuns + j];
        int32_t half[2] = {0, 0};
        for (int l = 0; l < 32; ++l) half[l / 16] += int32_t{q[l]} * int32_t{ab.qs[l]};
        isum[r] += run.sc[0] * half[0] + run.sc[1] * half[1];
        if constexpr (!T::kSigned && kSuper<W>) imin[r] += run_mins<T>(run, ab);
        if constexpr (!T::kSigned && !kSuper<W>) extra[r] = minus_min_term(extra[r], run, ab);
      }
    }
    for (int r = 0; r < R; ++r) {
      const float da = a[r * nb + b * T::kRuns].d;
      sum[r] += run.d * da * static_cast<float>(isum[r]);
      if constexpr (!T::kSigned && kSuper<W>) extra[r] = minus_block_mins(extra[r], run.dmin, da, imin[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r] = sum[r] + extra[r];
}

// Σ of the eight int32 lanes, exactly.
__attribute__((target("avx2"))) inline int32_t hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// The eight int32 lanes of one run and one activation block, lane l = sc[l / 4] · Σ q·a over values 4l..4l+3:
// AVX2 through vpmaddubsw and vpmaddwd against the scales; AVX-512 VNNI (256-bit) through one vpdpbusd, times the
// scales where the type has them. The same integers either way, so both ISAs give the same bits.
__attribute__((target("avx2"))) inline __m256i lanes_avx2(__m256i u, __m256i a, __m256i scales16, __m256i) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, a), scales16);
}
template <bool kScaled>
__attribute__((target("avx2,avx512vl,avx512vnni"))) inline __m256i lanes_vnni(__m256i u, __m256i a, __m256i,
                                                                               __m256i scales32) {
  const __m256i sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, a);
  return kScaled ? _mm256_mullo_epi32(sums, scales32) : sums;
}

// Note [One body per ISA]: a target attribute cannot depend on a template parameter, so the run loop is written
// once here and stamped out for each ISA with its lane function. Per block: the runs' lanes summed in integers
// (one run for the 32-value types, eight for the super-block types), then one float step d · d_a.
#define HXRT_KQUANT_ROWS(NAME, TARGET, LANES)                                                                    \
  template <DType W, int R>                                                                                     \
  __attribute__((target(TARGET))) void NAME(const void* w_row, const BlockQ8A* a, const HalfSums* hs, int64_t nb, \
                                             float* out) {                                                      \
    using T = Traits<W>;                                                                                        \
    const auto* w = static_cast<const typename T::Block*>(w_row);                                               \
    const int64_t blocks = nb / T::kRuns;                                                                       \
    __m256 acc[R];                                                                                              \
    float extra[R];                                                                                             \
    for (int r = 0; r < R; ++r) {                                                                               \
      acc[r] = _mm256_setzero_ps();                                                                             \
      extra[r] = 0.0f;                                                                                          \
    }                                                                                                           \
    for (int64_t b = 0; b < blocks; ++b) {                                                                      \
      const typename T::Scales s = T::scales(w[b]);                                                             \
      const __m256i halves = block_half_scales<W>(w[b]); /* Note [Run scale vectors] */                       \
      __m256i isum[R];                                                                                          \
      int32_t imin[R];                                                                                          \
      for (int r = 0; r < R; ++r) {                                                                             \
        isum[r] = _mm256_setzero_si256();                                                                       \
        imin[r] = 0;                                                                                            \
      }                                                                                                         \
      RunInfo run;                                                                                              \
      _Pragma("GCC unroll 8") for (int j = 0; j < T::kRuns; ++j) {                                              \
        run = T::info(w[b], s, j);                                                                              \
        const __m256i q = T::q_avx2(w[b], j);                                                                   \
        const __m256i u = T::kSigned ? _mm256_sign_epi8(q, q) : q; /* |q| for the signed types */               \
        const __m256i scales16 = run_scales16(halves, j);                                                       \
        const __m256i scales32 = run_scales32(halves, j);                                                       \
        for (int r = 0; r < R; ++r) {                                                                           \
          const BlockQ8A& ab = a[r * nb + b * T::kRuns + j];                                                    \
          __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.qs));                             \
          if constexpr (T::kSigned) av = _mm256_sign_epi8(av, q);                                               \
          isum[r] = _mm256_add_epi32(isum[r], LANES(u, av, scales16, scales32));                                \
          if constexpr (!T::kSigned && !kSuper<W>) extra[r] = minus_min_term(extra[r], run, ab);                \
        }                                                                                                       \
      }                                                                                                         \
      if constexpr (kSuperMins<W>) {                                                                            \
        const __m256i mins = mins_avx2<W>(w[b], s);                                                             \
        for (int r = 0; r < R; ++r) {                                                                           \
          imin[r] = hsum_epi32(_mm256_madd_epi16(                                                               \
              _mm256_load_si256(reinterpret_cast<const __m256i*>(hs[r * blocks + b].s)), mins));                \
        }                                                                                                       \
      }                                                                                                         \
      for (int r = 0; r < R; ++r) {                                                                             \
        const float da = a[r * nb + b * T::kRuns].d;                                                            \
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), _mm256_set1_ps(run.d * da), acc[r]);              \
        if constexpr (kSuperMins<W>) extra[r] = minus_block_mins(extra[r], run.dmin, da, imin[r]);              \
      }                                                                                                         \
    }                                                                                                           \
    for (int r = 0; r < R; ++r) out[r] = hsum256(acc[r]) + extra[r];                                            \
  }

HXRT_KQUANT_ROWS(rows_avx2, "avx2,fma,f16c", lanes_avx2)
HXRT_KQUANT_ROWS(rows_vnni256, "avx2,fma,f16c,avx512vl,avx512vnni", lanes_vnni<kSuper<W>>)
#undef HXRT_KQUANT_ROWS

// ---- AVX2: decoded rows for the prefill tiles -------------------------------------------------------------------
// Note [AVX2 decoded rows]: rows_avx2 decodes a W run — its integers, RunInfo and scale vector, often more
// instructions than the dot products they feed — once per call, and a call covers at most four activation rows,
// so a 64-row prefill tile decodes each W run sixteen times. panel_tile_avx2 decodes kPanelRows W rows at a time
// into RowRun records and runs every row of the tile against them, kPanelRows W rows per micro-kernel call (the
// activation block is loaded once for them). Each (activation row, W row) still executes rows_avx2's operations in
// the same order on the same values, so the results keep their bits (RowsAreBatchInvariantBitForBit compares
// against the one-row kernel).

// One 32-value run of a W row, decoded.
struct alignas(64) RowRun {
  int8_t q[32];  // the run's integers (signed, or unsigned with a min)
  RunInfo info;
};

constexpr int kPanelRows = 2;  // W rows decoded and computed together

// A W row's runs into out, and for the types with super-block mins its mins into mins (nb / 8 of them).
template <DType W>
__attribute__((target("avx2,fma,f16c"))) void decode_row(const std::byte* row, int64_t nb, RowRun* out,
                                                         HalfSums* mins) {
  using T = Traits<W>;
  const auto* w = reinterpret_cast<const typename T::Block*>(row);
  for (int64_t b = 0; b < nb / T::kRuns; ++b) {
    const typename T::Scales s = T::scales(w[b]);
    if constexpr (kSuperMins<W>) _mm256_store_si256(reinterpret_cast<__m256i*>(mins[b].s), mins_avx2<W>(w[b], s));
#pragma GCC unroll 8
    for (int j = 0; j < T::kRuns; ++j) {
      RowRun& run = out[b * T::kRuns + j];
      _mm256_store_si256(reinterpret_cast<__m256i*>(run.q), T::q_avx2(w[b], j));
      run.info = T::info(w[b], s, j);
    }
  }
}

// RA activation rows × P decoded W rows (W row p's nb runs at panel + p · nb): rows_avx2's operations per pair. For
// the types with super-block mins, the mins' integer comes once per super-block from the activation rows' half sums
// (hs, nsb apiece) against the W rows' mins (mins, nsb apiece), one vpmaddwd instead of a scalar product per run:
// the same integer, so the same bits.
template <DType W, int RA, int P>
__attribute__((target("avx2,fma,f16c"))) void panel_kernel_avx2(const BlockQ8A* a, const HalfSums* hs, int64_t nb,
                                                                const RowRun* panel, const HalfSums* mins,
                                                                int64_t cols, const float* bias, float* y,
                                                                int64_t ldy) {
  using T = Traits<W>;
  __m256 acc[RA][P];
  float extra[RA][P];
  for (int r = 0; r < RA; ++r) {
    for (int p = 0; p < P; ++p) {
      acc[r][p] = _mm256_setzero_ps();
      extra[r][p] = 0.0f;
    }
  }
  const int64_t nsb = nb / T::kRuns;
  for (int64_t b = 0; b < nsb; ++b) {
    __m256i isum[RA][P];
    for (int r = 0; r < RA; ++r) {
      for (int p = 0; p < P; ++p) isum[r][p] = _mm256_setzero_si256();
    }
    for (int j = 0; j < T::kRuns; ++j) {
      const int64_t g = b * T::kRuns + j;
      __m256i av[RA];
#pragma GCC unroll 4
      for (int r = 0; r < RA; ++r) av[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[r * nb + g].qs));
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        const RowRun& run = panel[p * nb + g];
        const __m256i q = _mm256_load_si256(reinterpret_cast<const __m256i*>(run.q));
        const __m256i u = T::kSigned ? _mm256_sign_epi8(q, q) : q;
        const __m256i scales16 = scales_epi16<T>(run.info);
#pragma GCC unroll 4
        for (int r = 0; r < RA; ++r) {
          const BlockQ8A& ab = a[r * nb + g];
          const __m256i idot = lanes_avx2(u, T::kSigned ? _mm256_sign_epi8(av[r], q) : av[r], scales16, scales16);
          isum[r][p] = _mm256_add_epi32(isum[r][p], idot);
          if constexpr (offset_term(W)) {
            extra[r][p] = std::fma(run.info.mn[0], ab.s, extra[r][p]);
          } else if constexpr (!T::kSigned && !kSuper<W>) {
            extra[r][p] = minus_min_term(extra[r][p], run.info, ab);
          }
        }
      }
    }
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      const RunInfo& info = panel[p * nb + b * T::kRuns].info;
#pragma GCC unroll 4
      for (int r = 0; r < RA; ++r) {
        const float da = a[r * nb + b * T::kRuns].d;
        acc[r][p] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r][p]), _mm256_set1_ps(info.d * da), acc[r][p]);
        if constexpr (kSuperMins<W>) {
          const int32_t imin = hsum_epi32(_mm256_madd_epi16(
              _mm256_load_si256(reinterpret_cast<const __m256i*>(hs[r * nsb + b].s)),
              _mm256_load_si256(reinterpret_cast<const __m256i*>(mins[p * nsb + b].s))));
          extra[r][p] = minus_block_mins(extra[r][p], info.dmin, da, imin);
        }
      }
    }
  }
  for (int r = 0; r < RA; ++r) {
    for (int p = 0; p < P && p < cols; ++p) {
      y[r * ldy + p] = (hsum256(acc[r][p]) + extra[r][p]) + (bias != nullptr ? bias[p] : 0.0f);
    }
  }
}

template <DType W>
void panel_tile_avx2(const BlockQ8A* a, int64_t rows, const std::byte* w, uint64_t row_bytes, int64_t nb,
                     int64_t cols, const float* bias, float* y, int64_t ldy) {
  using Kernel = void (*)(const BlockQ8A*, const HalfSums*, int64_t, const RowRun*, const HalfSums*, int64_t,
                          const float*, float*, int64_t);
  static constexpr std::array<std::array<Kernel, kPanelRows>, kQuantTileRows> kKernels = {{
      {&panel_kernel_avx2<W, 1, 1>, &panel_kernel_avx2<W, 1, 2>},
      {&panel_kernel_avx2<W, 2, 1>, &panel_kernel_avx2<W, 2, 2>},
      {&panel_kernel_avx2<W, 3, 1>, &panel_kernel_avx2<W, 3, 2>},
      {&panel_kernel_avx2<W, 4, 1>, &panel_kernel_avx2<W, 4, 2>},
  }};
  thread_local std::vector<RowRun> panel;
  thread_local std::vector<HalfSums> halves;  // kSuperMins: the activation rows' half sums
  thread_local std::vector<HalfSums> mins;    // kSuperMins: the decoded W rows' mins
  panel.resize(static_cast<size_t>(kPanelRows * nb));
  const int64_t nsb = nb / Traits<W>::kRuns;
  if constexpr (kSuperMins<W>) {
    halves.resize(static_cast<size_t>(rows * nsb));
    half_sums(a, rows, nsb, halves.data());
    mins.resize(static_cast<size_t>(kPanelRows * nsb));
  }
  for (int64_t j = 0; j < cols; j += kPanelRows) {
    const int width = static_cast<int>(std::min<int64_t>(kPanelRows, cols - j));
    for (int p = 0; p < width; ++p) {
      const std::byte* row = w + static_cast<uint64_t>(j + p) * row_bytes;
      decode_row<W>(row, nb, panel.data() + p * nb, kSuperMins<W> ? mins.data() + p * nsb : nullptr);
    }
    prefetch_rows(w, j + kPanelRows, std::min<int64_t>(cols, j + 2 * kPanelRows), row_bytes);
    for (int64_t i = 0; i < rows; i += kQuantTileRows) {
      const int ra = static_cast<int>(std::min<int64_t>(kQuantTileRows, rows - i));
      kKernels[static_cast<size_t>(ra - 1)][static_cast<size_t>(width - 1)](
          a + i * nb, kSuperMins<W> ? halves.data() + i * nsb : nullptr, nb, panel.data(),
          kSuperMins<W> ? mins.data() : nullptr, width, bias != nullptr ? bias + j : nullptr, y + i * ldy + j, ldy);
    }
  }
}

template <DType W>
RowsFn pick(QuantIsa isa, int rows) {
  static constexpr RowsFn kScalar[kQuantTileRows + 1] = {nullptr, &rows_scalar<W, 1>, &rows_scalar<W, 2>,
                                                         &rows_scalar<W, 3>, &rows_scalar<W, 4>};
  static constexpr RowsFn kAvx2[kQuantTileRows + 1] = {nullptr, &rows_avx2<W, 1>, &rows_avx2<W, 2>,
                                                       &rows_avx2<W, 3>, &rows_avx2<W, 4>};
  static constexpr RowsFn kVnni[kQuantTileRows + 1] = {nullptr, &rows_vnni256<W, 1>, &rows_vnni256<W, 2>,
                                                       &rows_vnni256<W, 3>, &rows_vnni256<W, 4>};
  if (rows < 1 || rows > kQuantTileRows) return nullptr;
  switch (isa) {
    case QuantIsa::kScalar: return kScalar[rows];
    case QuantIsa::kAvx2: return kAvx2[rows];
    case QuantIsa::kAvx512Vnni: return kVnni[rows];
  }
  return nullptr;
}

}  // namespace

void half_sums(const BlockQ8A* a, int64_t rows, int64_t nsb, HalfSums* out) {
  for (int64_t i = 0; i < rows * nsb; ++i) {
    const BlockQ8A* blocks = a + i * kSuperBlockRuns;
    for (int j = 0; j < kSuperBlockRuns; ++j) {
      out[i].s[2 * j] = blocks[j].sum[0];
      out[i].s[2 * j + 1] = blocks[j].sum[1];
    }
  }
}

bool has_super_mins(DType w_type) {
  return w_type == DType::kQ2_K || w_type == DType::kQ4_K || w_type == DType::kQ5_K;
}

bool handles(DType w_type) {
  switch (w_type) {
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kIQ4_XS: return true;
    default: return false;
  }
}

void panel_tile_avx2(DType w_type, const BlockQ8A* a, int64_t rows, const std::byte* w, uint64_t row_bytes, int64_t nb,
                     int64_t cols, const float* bias, float* y, int64_t ldy) {
  switch (w_type) {
    case DType::kQ8_0: panel_tile_avx2<DType::kQ8_0>(a, rows, w, row_bytes, nb, cols, bias, y, ldy); return;
    case DType::kQ4_1: panel_tile_avx2<DType::kQ4_1>(a, rows, w, row_bytes, nb, cols, bias, y, ldy); return;
    case DType::kQ5_0: panel_tile_avx2<DType::kQ5_0>(a, rows, w, row_bytes, nb, cols, bias, y, ldy); return;
    case DType::kQ5_1: panel_tile_avx2<DType::kQ5_1>(a, rows, w, row_bytes, nb, cols, bias, y, ldy); return;
    case DType::kQ2_K: panel_tile_avx2<DType::kQ2_K>(a, rows, w, row_bytes, nb, cols, bias, y, ldy); return;
    case DType::kQ3_K: panel_tile_avx2<DType::kQ3_K>(a, rows, w, row_bytes, nb, cols, bias, y, ldy); return;
    case DType::kQ4_K: panel_tile_avx2<DType::kQ4_K>(a, rows, w, row_bytes, nb, cols, bias, y, ldy); return;
    case DType::kQ5_K: panel_tile_avx2<DType::kQ5_K>(a, rows, w, row_bytes, nb, cols, bias, y, ldy); return;
    case DType::kQ6_K: panel_tile_avx2<DType::kQ6_K>(a, rows, w, row_bytes, nb, cols, bias, y, ldy); return;
    case DType::kIQ4_XS: panel_tile_avx2<DType::kIQ4_XS>(a, rows, w, row_bytes, nb, cols, bias, y, ldy); return;
    default: HXRT_CHECK(false, "kquant::panel_tile_avx2: {} is not a quantized block type", w_type);
  }
}

RowsFn rows_kernel(DType w_type, QuantIsa isa, int rows) {
  switch (w_type) {
    case DType::kQ5_0: return pick<DType::kQ5_0>(isa, rows);
    case DType::kQ5_1: return pick<DType::kQ5_1>(isa, rows);
    case DType::kQ2_K: return pick<DType::kQ2_K>(isa, rows);
    case DType::kQ3_K: return pick<DType::kQ3_K>(isa, rows);
    case DType::kQ4_K: return pick<DType::kQ4_K>(isa, rows);
    case DType::kQ5_K: return pick<DType::kQ5_K>(isa, rows);
    case DType::kQ6_K: return pick<DType::kQ6_K>(isa, rows);
    case DType::kIQ4_XS: return pick<DType::kIQ4_XS>(isa, rows);
    default: return nullptr;
  }
}

}  // namespace hxrt::kernels::cpu::kquant
