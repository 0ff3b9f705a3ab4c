// AVX2 helpers the MatMulQ kernels share (quant_matmul.cc, quant_matmul_kquant.cc); internal.
//
// Thread-safety: pure functions.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace hxrt::kernels::cpu {

// The 32 nibbles of a 16-byte q4_0-style run: low nibbles are values 0..15 (low lane), high nibbles 16..31.
__attribute__((target("avx2"))) inline __m256i expand_nibbles(const uint8_t* qs) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(raw, 4), raw);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
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

}  // namespace hxrt::kernels::cpu
