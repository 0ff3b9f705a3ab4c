// expf eight floats at a time, bit-identical to glibc's expf (internal to the CPU kernels).
//
// Note [Exact vector exp]: the CPU kernels' softmaxes, GELU and SiLU call std::exp, and the JIT kernels' hx_exp
// repeats glibc's algorithm (kernels/opencl/jit_program.cc, kernels/cuda/cuda_program.cc) so that the backends
// agree bit for bit. That algorithm is all double arithmetic — z = x · 32/ln 2, k = round(z) through the 1.5·2^52
// shift, r = z − k, 2^(k/32) from a 32-entry table plus k << 47 in the exponent, a degree-3 polynomial in r by
// fused multiply-adds, one rounding to float at the end — so it vectorises exactly: four doubles per AVX2 register,
// the same operations in the same order, the table read by a gather. The results equal std::exp's for every float
// (ExactVectorExpTest checks a dense sample of the whole range and the thresholds; an exhaustive run over all 2^32
// inputs found no difference on Sapphire Rapids), at about a tenth of the cost of the scalar call.
//
// Thread-safety: pure functions.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "hxrt/base/expf_table.h"

namespace hxrt::kernels::cpu {

// Four of glibc's expf core in double (no special cases): x as doubles in, the results as doubles out.
__attribute__((target("avx2,fma"))) inline __m256d exp_core_pd(__m256d xd) {
  const __m256d shift = _mm256_set1_pd(0x1.8p52);
  const __m256d z = _mm256_mul_pd(_mm256_set1_pd(0x1.71547652b82fep5), xd);  // x · 32 / ln 2
  __m256d kd = _mm256_add_pd(z, shift);
  const __m256i ki = _mm256_castpd_si256(kd);
  kd = _mm256_sub_pd(kd, shift);
  const __m256d r = _mm256_sub_pd(z, kd);
  const __m256i index = _mm256_and_si256(ki, _mm256_set1_epi64x(31));
  const __m256i t = _mm256_add_epi64(
      _mm256_i64gather_epi64(reinterpret_cast<const long long*>(kExp2fTable), index, 8), _mm256_slli_epi64(ki, 47));
  const __m256d s = _mm256_castsi256_pd(t);
  const __m256d p = _mm256_fmadd_pd(_mm256_set1_pd(0x1.c6af84b912394p-5 / (32.0 * 32.0 * 32.0)), r,
                                    _mm256_set1_pd(0x1.ebfce50fac4f3p-3 / (32.0 * 32.0)));
  const __m256d q = _mm256_fmadd_pd(_mm256_set1_pd(0x1.62e42ff0c52d6p-1 / 32.0), r, _mm256_set1_pd(1.0));
  return _mm256_mul_pd(_mm256_fmadd_pd(p, _mm256_mul_pd(r, r), q), s);
}

// std::exp of eight floats, bit for bit (Note [Exact vector exp]).
__attribute__((target("avx2,fma"))) inline __m256 exp_exact_avx2(__m256 x) {
  const __m128 lo = _mm256_cvtpd_ps(exp_core_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(x))));
  const __m128 hi = _mm256_cvtpd_ps(exp_core_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(x, 1))));
  __m256 y = _mm256_set_m128(hi, lo);
  // glibc's special cases: overflow to +inf, underflow to +0, NaN through.
  y = _mm256_blendv_ps(y, _mm256_set1_ps(__builtin_inff()), _mm256_cmp_ps(x, _mm256_set1_ps(0x1.62e42ep6f), _CMP_GT_OQ));
  y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, _mm256_set1_ps(-0x1.9fe368p6f), _CMP_LT_OQ));
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

// y[i] = F(x[i]) for i < n, eight at a time, the tail through a zero-padded register (x and y may be the same
// array). Needs AVX2.
template <__m256 (*F)(__m256)>
__attribute__((target("avx2,fma"))) inline void map8_avx2(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, F(_mm256_loadu_ps(x + i)));
  if (i < n) {
    alignas(32) float tail[8] = {};
    for (int64_t j = i; j < n; ++j) tail[j - i] = x[j];
    _mm256_store_ps(tail, F(_mm256_load_ps(tail)));
    for (int64_t j = i; j < n; ++j) y[j] = tail[j - i];
  }
}

// y[i] = std::exp(x[i]) for i < n, bit for bit (x and y may be the same array). Needs AVX2 and FMA.
__attribute__((target("avx2,fma"))) inline void exp_exact_array(const float* x, float* y, int64_t n) {
  map8_avx2<exp_exact_avx2>(x, y, n);
}

}  // namespace hxrt::kernels::cpu
