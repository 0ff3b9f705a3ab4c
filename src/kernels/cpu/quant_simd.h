// AVX2 and AVX-512 helpers the MatMulQ kernels share (quant_matmul*.cc); internal.
//
// Thread-safety: pure functions.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace hxrt::kernels::cpu {

// The 32 nibbles of a 16-byte q4_0-style run: low nibbles are values 0..15 (low lane), high nibbles 16..31.
__attribute__((target("avx2"))) inline __m256i expand_nibbles(const uint8_t* qs) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(raw, 4), raw);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// Prefetches W rows [begin, end) (rows row_bytes apart from w) into L1. The decoded panels (Note [Decoded panels])
// fetch the next panel's rows while they compute on the current one: a W streamed from memory is otherwise first
// touched by the decode, which then waits on every line (Gemma 3's 262,144 x 640 q8_0 logits for 16 sequences on a
// Zen 5: 18.9 -> 14.1 ms on 2 threads, 37.3 -> 26.9 ms on 1).
// (An empty asm statement keeps each prefetch: GCC 12 deleted the loop as dead code when it was a function of its
// own, inlined.)
inline void prefetch_rows(const std::byte* w, int64_t begin, int64_t end, uint64_t row_bytes) {
  if (begin >= end) return;
  const std::byte* first = w + static_cast<uint64_t>(begin) * row_bytes;
  const uint64_t bytes = static_cast<uint64_t>(end - begin) * row_bytes;
  for (uint64_t at = 0; at < bytes; at += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(first + at), _MM_HINT_T0);
    asm volatile("" ::: "memory");
  }
}

// ((l0 + l4) + (l1 + l5)) + ((l2 + l6) + (l3 + l7)): the lane order every MatMulQ kernel (and its JIT mirror) keeps.
__attribute__((target("avx2"))) inline float hsum256(__m256 v) {
  __m128 lo = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  __m128 shuf = _mm_movehdup_ps(lo);
  __m128 sums = _mm_add_ps(lo, shuf);
  shuf = _mm_movehl_ps(shuf, sums);
  sums = _mm_add_ss(sums, shuf);
  return _mm_cvtss_f32(sums);
}

// GCC 12 reports a false -Wmaybe-uninitialized inside several AVX-512 intrinsics (their _mm512_undefined_* sources);
// these wrappers keep the plain instruction forms and silence it in one place.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f"))) inline __m128 low128(__m512 v) {
  return _mm512_castps512_ps128(v);
}
__attribute__((target("avx512f"))) inline __m128 lane1_128(__m512 v) {
  return _mm512_extractf32x4_ps(v, 1);
}
__attribute__((target("avx512f"))) inline __m512 to_float(__m512i v) {
  return _mm512_cvtepi32_ps(v);
}
__attribute__((target("avx512f"))) inline __m512i from_halves(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}
#pragma GCC diagnostic pop

// The min term of quant_matmul_kquant.cc (minus_min_term) for both rows of a pair at once, lane by lane:
// ext − d_a · (mn0 · sum0 + mn1 · sum1).
__attribute__((target("avx2,fma"))) inline __m128 minus_min_lanes(__m128 ext, __m128 mn0, __m128 mn1, float d_a,
                                                                  float sum0, float sum1) {
  const __m128 mins = _mm_fmadd_ps(mn0, _mm_set1_ps(sum0), _mm_mul_ps(mn1, _mm_set1_ps(sum1)));
  return _mm_fnmadd_ps(_mm_set1_ps(d_a), mins, ext);
}

// Writes the results of one pair of W rows (Note [VNNI-512 pairs] in quant_matmul_vnni.h): lanes 0..7 of acc and lane 0
// of ext are column col0, lanes 8..15 and lane 1 column col0 + 1 (when cols > 1); y[c] = (hsum256 + ext) + bias[c].
__attribute__((target("avx512f,avx2"))) inline void store_pair(__m512 acc, __m128 ext, int64_t cols, const float* bias,
                                                               int64_t col0, float* y) {
  alignas(64) float lanes[16];
  alignas(16) float extra[4];
  _mm512_store_ps(lanes, acc);
  _mm_store_ps(extra, ext);
  for (int64_t h = 0; h < 2 && h < cols; ++h) {
    const float b = bias != nullptr ? bias[col0 + h] : 0.0f;
    y[col0 + h] = (hsum256(_mm256_load_ps(lanes + 8 * h)) + extra[h]) + b;
  }
}

// The accumulator tile of the VNNI-512 pair kernels: RA activation rows × P pairs of W rows, zeroed at the start and
// written by store_pair at the end (quant_matmul_vnni.cc's micro_kernel, quant_matmul_kquant.cc's pair_kernel).
template <int RA, int P>
struct PairAccumulators {
  __m512 acc[RA][P];
  __m128 ext[RA][P];

  __attribute__((target("avx512f,avx2"), always_inline)) inline void zero() {
#pragma GCC unroll 4
    for (int r = 0; r < RA; ++r) {
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        acc[r][p] = _mm512_setzero_ps();
        ext[r][p] = _mm_setzero_ps();
      }
    }
  }
  // Row r's pair p is columns 2p and 2p + 1 of y + r · ldy (fewer when cols runs out).
  __attribute__((target("avx512f,avx2"), always_inline)) inline void store(int64_t cols, const float* bias, float* y,
                                                                           int64_t ldy) const {
#pragma GCC unroll 4
    for (int r = 0; r < RA; ++r) {
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) store_pair(acc[r][p], ext[r][p], cols - 2 * p, bias, 2 * p, y + r * ldy);
    }
  }
};

}  // namespace hxrt::kernels::cpu
