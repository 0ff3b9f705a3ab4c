// The weight types of quant_matmul_kquant.cc as the MatMulQ kernels read them (internal to quant_matmul_kquant*.cc):
// per type its block, runs per block, whether its integers are signed, its per-block scales and each 32-value run's
// RunInfo (Note [Runs] in quant_matmul_kquant.h) and integers, in scalar code and in one AVX2 register.
//
// Thread-safety: pure functions.
#pragma once

#include <immintrin.h>

#include <array>
#include <cstdint>
#include <cstring>

#include "hxrt/base/dtype.h"
#include "hxrt/base/float16.h"
#include "hxrt/base/quant_blocks.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/cpu/quant_matmul_kquant.h"
#include "kernels/cpu/quant_simd.h"

namespace hxrt::kernels::cpu::kquant {

// The floats and integer scales of one run (Note [Runs] in quant_matmul_kquant.h). The 32-value types: the run's d and float
// mins mn. The super-block types (Note [Super-block sums]): the block's d and dmin, and per 16-value half the
// integer scale sc and integer min m.
struct RunInfo {
  float d = 0.0f;
  int16_t sc[2] = {1, 1};
  float mn[2] = {0.0f, 0.0f};
  float dmin = 0.0f;
  int16_t m[2] = {0, 0};
};

// ---- Per-type traits ------------------------------------------------------------------------------------------
// Each type: its block, runs per block, whether q is signed (the unsigned types are those with mins), the per-block
// decoded scales (Scales, from scales()), a run's RunInfo (info()), its 32 integers in scalar code (q_scalar()) and
// in one AVX2 register (q_avx2()).

// Byte i is 0xFF where bit i of `bits` is set.
__attribute__((target("avx2"))) inline __m256i bits_to_bytes(uint32_t bits) {
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(0x8040201008040201LL);
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}

__attribute__((target("avx2"))) inline __m256i iq4_lookup(__m256i nibbles) {
  const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4NLValues.data()));
  return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(table), nibbles);
}

__attribute__((target("avx2"))) inline __m256i load32(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// Bits `shift`..`shift + width` of every byte of v, as bytes.
__attribute__((target("avx2"))) inline __m256i byte_bits(__m256i v, int shift, int mask) {
  return _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(shift)), _mm256_set1_epi8(static_cast<char>(mask)));
}

inline uint32_t le32(const uint8_t* p) {
  uint32_t v = 0;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline uint64_t le64(const uint8_t* p) {
  uint64_t v = 0;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

struct NoScales {};

template <DType W>
struct Traits;

// q8_0 and q4_1 take the decoded rows of the AVX2 prefill tiles only (Note [AVX2 decoded rows]); their rows kernels
// are quant_matmul.cc's, whose arithmetic these repeat: q8_0 signed, q4_1 unsigned nibbles with the offset term
// c · s_a (c = m, kept in mn[0]).
template <>
struct Traits<DType::kQ8_0> {
  using Block = BlockQ8_0;
  using Scales = NoScales;
  static constexpr int kRuns = 1;
  static constexpr bool kSigned = true;
  static Scales scales(const Block&) { return {}; }
  static RunInfo info(const Block& b, const Scales&, int) { return {.d = f16_to_f32(b.d)}; }
  __attribute__((target("avx2"))) static __m256i q_avx2(const Block& b, int) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
  }
};

template <>
struct Traits<DType::kQ4_1> {
  using Block = BlockQ4_1;
  using Scales = NoScales;
  static constexpr int kRuns = 1;
  static constexpr bool kSigned = false;
  static Scales scales(const Block&) { return {}; }
  static RunInfo info(const Block& b, const Scales&, int) {
    return {.d = f16_to_f32(b.d), .mn = {f16_to_f32(b.m), 0.0f}};
  }
  __attribute__((target("avx2"))) static __m256i q_avx2(const Block& b, int) { return expand_nibbles(b.qs); }
};

// The types whose extra term is the offset c · s_a (quant_matmul.cc) rather than the mins of Note [Runs].
constexpr bool offset_term(DType w) { return w == DType::kQ4_1; }

template <>
struct Traits<DType::kQ5_0> {
  using Block = BlockQ5_0;
  using Scales = NoScales;
  static constexpr int kRuns = 1;
  static constexpr bool kSigned = true;
  static Scales scales(const Block&) { return {}; }
  static RunInfo info(const Block& b, const Scales&, int) { return {.d = f16_to_f32(b.d)}; }
  static void q_scalar(const Block& b, int, int8_t* q) {
    const uint32_t qh = le32(b.qh);
    for (int j = 0; j < 16; ++j) {
      q[j] = static_cast<int8_t>(((b.qs[j] & 0x0F) | (((qh >> j) & 1) << 4)) - 16);
      q[j + 16] = static_cast<int8_t>(((b.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16);
    }
  }
  __attribute__((target("avx2"))) static __m256i q_avx2(const Block& b, int) {
    const __m256i high = _mm256_and_si256(bits_to_bytes(le32(b.qh)), _mm256_set1_epi8(0x10));
    return _mm256_sub_epi8(_mm256_or_si256(expand_nibbles(b.qs), high), _mm256_set1_epi8(16));
  }
};

template <>
struct Traits<DType::kQ5_1> {
  using Block = BlockQ5_1;
  using Scales = NoScales;
  static constexpr int kRuns = 1;
  static constexpr bool kSigned = false;
  static Scales scales(const Block&) { return {}; }
  static RunInfo info(const Block& b, const Scales&, int) {
    const float m = f16_to_f32(b.m);
    return {.d = f16_to_f32(b.d), .mn = {-m, -m}};
  }
  static void q_scalar(const Block& b, int, int8_t* q) {
    const uint32_t qh = le32(b.qh);
    for (int j = 0; j < 16; ++j) {
      q[j] = static_cast<int8_t>((b.qs[j] & 0x0F) | (((qh >> j) & 1) << 4));
      q[j + 16] = static_cast<int8_t>((b.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
    }
  }
  __attribute__((target("avx2"))) static __m256i q_avx2(const Block& b, int) {
    const __m256i high = _mm256_and_si256(bits_to_bytes(le32(b.qh)), _mm256_set1_epi8(0x10));
    return _mm256_or_si256(expand_nibbles(b.qs), high);
  }
};

template <>
struct Traits<DType::kQ2_K> {
  using Block = BlockQ2_K;
  struct Scales {
    float d;
    float dmin;
  };
  static constexpr int kRuns = 8;
  static constexpr bool kSigned = false;
  static Scales scales(const Block& b) { return {f16_to_f32(b.d), f16_to_f32(b.dmin)}; }
  __attribute__((target("avx2"), always_inline)) static __m256i half_scales(const Block& b) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
    return _mm256_cvtepu8_epi16(_mm_and_si128(bytes, _mm_set1_epi8(0x0F)));
  }
  static RunInfo info(const Block& b, const Scales& s, int j) {
    const uint8_t lo = b.scales[2 * j];
    const uint8_t hi = b.scales[2 * j + 1];
    return {.d = s.d,
            .sc = {static_cast<int16_t>(lo & 0x0F), static_cast<int16_t>(hi & 0x0F)},
            .dmin = s.dmin,
            .m = {static_cast<int16_t>(lo >> 4), static_cast<int16_t>(hi >> 4)}};
  }
  static void q_scalar(const Block& b, int j, int8_t* q) {
    const uint8_t* src = b.qs + 32 * (j / 4);
    const int shift = 2 * (j % 4);
    for (int l = 0; l < 32; ++l) q[l] = static_cast<int8_t>((src[l] >> shift) & 3);
  }
  __attribute__((target("avx2"))) static __m256i q_avx2(const Block& b, int j) {
    return byte_bits(load32(b.qs + 32 * (j / 4)), 2 * (j % 4), 3);
  }
};

template <>
struct Traits<DType::kQ3_K> {
  using Block = BlockQ3_K;
  struct Scales {
    float d;
    std::array<int8_t, 16> sc;
  };
  static constexpr int kRuns = 8;
  static constexpr bool kSigned = true;
  static Scales scales(const Block& b) { return {f16_to_f32(b.d), unpack_scales_q3_k(b.scales)}; }
  // unpack_scales_q3_k's arithmetic, its two halves moved straight into a register.
  __attribute__((target("avx2"), always_inline)) static __m256i half_scales(const Block& b) {
    constexpr uint64_t kNibbles = 0x0F0F0F0F0F0F0F0Full;
    const uint64_t low = le64(b.scales);
    const uint64_t high = le32(b.scales + 8);
    const auto pairs = [high](int q) { return (high >> (2 * q)) & 0x03030303u; };
    const uint64_t first = (low & kNibbles) | ((pairs(0) | pairs(1) << 32) << 4);
    const uint64_t second = ((low >> 4) & kNibbles) | ((pairs(2) | pairs(3) << 32) << 4);
    const __m128i bytes = _mm_set_epi64x(static_cast<int64_t>(second), static_cast<int64_t>(first));
    return _mm256_cvtepi8_epi16(_mm_sub_epi8(bytes, _mm_set1_epi8(32)));
  }
  static RunInfo info(const Block&, const Scales& s, int j) {
    return {.d = s.d, .sc = {s.sc[static_cast<size_t>(2 * j)], s.sc[static_cast<size_t>(2 * j + 1)]}};
  }
  static void q_scalar(const Block& b, int j, int8_t* q) {
    const uint8_t* src = b.qs + 32 * (j / 4);
    const int shift = 2 * (j % 4);
    for (int l = 0; l < 32; ++l) {
      q[l] = static_cast<int8_t>(((src[l] >> shift) & 3) - ((b.hmask[l] >> j) & 1 ? 0 : 4));
    }
  }
  __attribute__((target("avx2"))) static __m256i q_avx2(const Block& b, int j) {
    const __m256i low = byte_bits(load32(b.qs + 32 * (j / 4)), 2 * (j % 4), 3);
    const __m256i bit = _mm256_and_si256(load32(b.hmask), _mm256_set1_epi8(static_cast<char>(1 << j)));
    const __m256i minus4 = _mm256_and_si256(_mm256_cmpeq_epi8(bit, _mm256_setzero_si256()), _mm256_set1_epi8(4));
    return _mm256_sub_epi8(low, minus4);
  }
};

// q4_K and q5_K share their scales: d, dmin and eight 6-bit (sc, mn) pairs, one per run.
struct ScalesK4 {
  float d;
  float dmin;
  uint8_t sc[8];
  uint8_t mn[8];
};
// unpack_scale_min_k4 for all eight runs, four bytes at a time: runs 0..3 keep the low six bits of bytes 0..3
// (scales) and 4..7 (mins); runs 4..7 take the nibbles of bytes 8..11 and the top two bits of bytes 0..7.
// The eight scales (mins = false) or mins as the bytes of one little-endian word.
inline uint64_t k4_bytes(const uint8_t* packed, bool mins) {
  const uint32_t own = le32(packed + (mins ? 4 : 0));
  const uint32_t high = le32(packed + 8) >> (mins ? 4 : 0);
  return (own & 0x3F3F3F3Fu) | uint64_t{(high & 0x0F0F0F0Fu) | (((own >> 6) & 0x03030303u) << 4)} << 32;
}
inline ScalesK4 scales_k4(uint16_t d16, uint16_t dmin16, const uint8_t* packed) {
  ScalesK4 s{.d = f16_to_f32(d16), .dmin = f16_to_f32(dmin16)};
  const uint64_t sc = k4_bytes(packed, false);
  const uint64_t mn = k4_bytes(packed, true);
  std::memcpy(s.sc, &sc, sizeof(sc));
  std::memcpy(s.mn, &mn, sizeof(mn));
  return s;
}

// What q4_K and q5_K share: the block's scales and mins, and the nibbles of run j.
template <typename B>
struct TraitsK4 {
  using Block = B;
  using Scales = ScalesK4;
  static constexpr int kRuns = 8;
  static constexpr bool kSigned = false;
  static constexpr bool kRunScale = true;
  static Scales scales(const Block& b) { return scales_k4(b.d, b.dmin, b.scales); }
  // scales_k4's eight scales, each repeated for both halves of its run.
  __attribute__((target("avx2"), always_inline)) static __m256i half_scales(const Block& b) {
    const __m128i bytes = _mm_cvtsi64_si128(static_cast<int64_t>(k4_bytes(b.scales, false)));
    return _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(bytes, bytes));
  }
  static RunInfo info(const Block&, const Scales& s, int j) {
    const auto sc = static_cast<int16_t>(s.sc[j]);
    const auto mn = static_cast<int16_t>(s.mn[j]);
    return {.d = s.d, .sc = {sc, sc}, .dmin = s.dmin, .m = {mn, mn}};
  }
  static void nibbles_scalar(const Block& b, int j, int8_t* q) {
    const uint8_t* src = b.qs + 32 * (j / 2);
    for (int l = 0; l < 32; ++l) q[l] = static_cast<int8_t>(j % 2 == 0 ? src[l] & 0x0F : src[l] >> 4);
  }
  __attribute__((target("avx2"))) static __m256i nibbles_avx2(const Block& b, int j) {
    return byte_bits(load32(b.qs + 32 * (j / 2)), 4 * (j % 2), 0x0F);
  }
};

template <>
struct Traits<DType::kQ4_K> : TraitsK4<BlockQ4_K> {
  static void q_scalar(const Block& b, int j, int8_t* q) { nibbles_scalar(b, j, q); }
  __attribute__((target("avx2"))) static __m256i q_avx2(const Block& b, int j) { return nibbles_avx2(b, j); }
};

template <>
struct Traits<DType::kQ5_K> : TraitsK4<BlockQ5_K> {
  static void q_scalar(const Block& b, int j, int8_t* q) {
    nibbles_scalar(b, j, q);
    for (int l = 0; l < 32; ++l) q[l] = static_cast<int8_t>(q[l] | (((b.qh[l] >> j) & 1) << 4));
  }
  __attribute__((target("avx2"))) static __m256i q_avx2(const Block& b, int j) {
    const __m256i high = _mm256_slli_epi16(byte_bits(load32(b.qh), j, 1), 4);
    return _mm256_or_si256(nibbles_avx2(b, j), high);
  }
};

template <>
struct Traits<DType::kQ6_K> {
  using Block = BlockQ6_K;
  struct Scales {
    float d;
  };
  static constexpr int kRuns = 8;
  static constexpr bool kSigned = true;
  static Scales scales(const Block& b) { return {f16_to_f32(b.d)}; }
  __attribute__((target("avx2"), always_inline)) static __m256i half_scales(const Block& b) {
    return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
  }
  static RunInfo info(const Block& b, const Scales& s, int j) {
    // Run j = 4·h + t covers groups 8·h + 2·t and 8·h + 2·t + 1, i.e. 2·j and 2·j + 1.
    return {.d = s.d, .sc = {b.scales[2 * j], b.scales[2 * j + 1]}};
  }
  static void q_scalar(const Block& b, int j, int8_t* q) {
    const int h = j / 4;
    const int t = j % 4;
    const uint8_t* ql = b.ql + 64 * h + 32 * (t % 2);
    const uint8_t* qh = b.qh + 32 * h;
    for (int l = 0; l < 32; ++l) {
      const int nibble = t < 2 ? ql[l] & 0x0F : ql[l] >> 4;
      q[l] = static_cast<int8_t>((nibble | (((qh[l] >> (2 * t)) & 3) << 4)) - 32);
    }
  }
  __attribute__((target("avx2"))) static __m256i q_avx2(const Block& b, int j) {
    const int h = j / 4;
    const int t = j % 4;
    const __m256i nibbles = byte_bits(load32(b.ql + 64 * h + 32 * (t % 2)), t < 2 ? 0 : 4, 0x0F);
    const __m256i high = _mm256_slli_epi16(byte_bits(load32(b.qh + 32 * h), 2 * t, 3), 4);
    return _mm256_sub_epi8(_mm256_or_si256(nibbles, high), _mm256_set1_epi8(32));
  }
};

template <>
struct Traits<DType::kIQ4_XS> {
  using Block = BlockIQ4_XS;
  struct Scales {
    float d;
    int16_t ls[8];  // the runs' scales, minus 32
  };
  static constexpr int kRuns = 8;
  static constexpr bool kSigned = true;
  static constexpr bool kRunScale = true;
  static Scales scales(const Block& b) {
    Scales s{.d = f16_to_f32(b.d)};
    for (int j = 0; j < 8; ++j) {
      const int ls = ((b.scales_l[j / 2] >> (4 * (j % 2))) & 0x0F) | (((b.scales_h >> (2 * j)) & 3) << 4);
      s.ls[j] = static_cast<int16_t>(ls - 32);
    }
    return s;
  }
  static RunInfo info(const Block&, const Scales& s, int j) { return {.d = s.d, .sc = {s.ls[j], s.ls[j]}}; }
  // scales()'s ls, each repeated for both halves: the low nibbles of scales_l interleaved, the two high bits of each
  // run spread to a byte apiece.
  __attribute__((target("avx2"), always_inline)) static __m256i half_scales(const Block& b) {
    const uint32_t nibbles = le32(b.scales_l);
    const __m128i low = _mm_unpacklo_epi8(_mm_cvtsi32_si128(static_cast<int>(nibbles & 0x0F0F0F0Fu)),
                                          _mm_cvtsi32_si128(static_cast<int>((nibbles >> 4) & 0x0F0F0F0Fu)));
    uint64_t high = 0;
    for (int j = 0; j < 8; ++j) high |= uint64_t{(b.scales_h >> (2 * j)) & 3u} << (8 * j + 4);
    const __m128i ls = _mm_sub_epi8(_mm_or_si128(low, _mm_cvtsi64_si128(static_cast<int64_t>(high))), _mm_set1_epi8(32));
    return _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(ls, ls));
  }
  static void q_scalar(const Block& b, int j, int8_t* q) {
    const uint8_t* qs = b.qs + 16 * j;
    for (int l = 0; l < 16; ++l) {
      q[l] = kIQ4NLValues[qs[l] & 0x0F];
      q[l + 16] = kIQ4NLValues[qs[l] >> 4];
    }
  }
  __attribute__((target("avx2"))) static __m256i q_avx2(const Block& b, int j) {
    return iq4_lookup(expand_nibbles(b.qs + 16 * j));
  }
};

// The super-block types (Note [Super-block sums] in quant_matmul_kquant.h): their activation blocks share one scale per block.
template <DType W>
constexpr bool kSuper = Traits<W>::kRuns == kSuperBlockRuns;

// The types whose runs have one integer scale (and min) for both halves: q4_K, q5_K, iq4_xs.
template <typename T>
constexpr bool run_scale() {
  if constexpr (requires { T::kRunScale; }) {
    return T::kRunScale;
  } else {
    return false;
  }
}

// The types whose super-blocks have integer mins (q2_K, q4_K, q5_K: the unsigned super-block types).
template <DType W>
constexpr bool kSuperMins = kSuper<W> && !Traits<W>::kSigned;

// A super-block's sixteen integer mins as int16 lanes (HalfSums layout, quant_matmul_kquant.h), from the bytes that
// hold them: q4_K/q5_K's eight 6-bit mins (already unpacked in their Scales) each repeated for both halves of its
// run, q2_K's sixteen high nibbles. Every kernel takes the mins' integer once per super-block from these, one
// vpmaddwd against the activation's half sums, instead of one scalar product per run: the same integer.
template <DType W>
__attribute__((target("avx2"))) inline __m256i mins_avx2(const typename Traits<W>::Block& b,
                                                         const typename Traits<W>::Scales& s) {
  static_assert(kSuperMins<W>);
  if constexpr (W == DType::kQ2_K) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
    return _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(bytes, 4), _mm_set1_epi8(0x0F)));
  } else {
    const __m128i mn = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(s.mn));
    return _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mn, mn));
  }
}

}  // namespace hxrt::kernels::cpu::kquant
