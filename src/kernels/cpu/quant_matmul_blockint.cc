#include "kernels/cpu/quant_matmul_blockint.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <vector>

#include "hxrt/base/check.h"
#include "hxrt/base/float16.h"
#include "hxrt/base/quant_blocks.h"
#include "kernels/cpu/quant_kquant_traits.h"
#include "kernels/cpu/quant_simd.h"

namespace hxrt::kernels::cpu::blockint {
namespace {

// Both types are {f16 d; 16 bytes of nibbles}; only the nibbles' integers differ.
static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockIQ4_NL) == 18);
static_assert(offsetof(BlockQ4_0, qs) == 2 && offsetof(BlockIQ4_NL, qs) == 2);
constexpr int64_t kBlockBytes = 18;

constexpr int64_t kLanes = 16;      // W rows (columns of Y) per zmm in the AVX-512 kernel
constexpr int kDirectRows = 8;      // activation rows one AVX-512 micro-kernel call takes (its accumulators)
constexpr int64_t kAvx2Rows = 16;   // activation rows one decoded AVX2 block serves

// Note [Block integers]: the signed integer v of nibble n, and the bias that makes it unsigned for vpdpbusd.
template <DType W>
struct Grid;
template <>
struct Grid<DType::kQ4_0> {
  static constexpr int kBias = 8;
  static int value(int n) { return n - 8; }
};
template <>
struct Grid<DType::kIQ4_NL> {
  static constexpr int kBias = 128;
  static int value(int n) { return kIQ4NLValues[static_cast<size_t>(n)]; }
};

// kIQ4NLValues + 128, the unsigned integers the AVX-512 kernel looks iq4_nl's nibbles up in.
constexpr std::array<uint8_t, 16> kIQ4NLBiased = [] {
  std::array<uint8_t, 16> out{};
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(kIQ4NLValues[i] + 128);
  return out;
}();

inline const BlockQ4_0& block_at(const std::byte* w_row, int64_t b) {
  return *reinterpret_cast<const BlockQ4_0*>(w_row + b * kBlockBytes);
}

// The exact Σ q of an activation block.
inline int32_t block_sum(const BlockQ8A& a) { return int32_t{a.sum[0]} + int32_t{a.sum[1]}; }

// --- scalar: the definition, written out -------------------------------------------------------------------------

template <DType W>
float dot_scalar(const std::byte* w_row, const BlockQ8A* a, int64_t nb) {
  float acc = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ4_0& block = block_at(w_row, b);
    int32_t isum = 0;
    for (int j = 0; j < 16; ++j) {
      isum += Grid<W>::value(block.qs[j] & 0x0F) * int32_t{a[b].qs[j]};
      isum += Grid<W>::value(block.qs[j] >> 4) * int32_t{a[b].qs[j + 16]};
    }
    const float scale = f16_to_f32(block.d) * a[b].d;
    acc = std::fma(static_cast<float>(isum), scale, acc);
  }
  return acc;
}

template <DType W>
void tile_scalar(const BlockQ8A* a, int64_t rows, const std::byte* w, uint64_t row_bytes, int64_t nb, int64_t cols,
                 const float* bias, float* y, int64_t ldy) {
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      const float b = bias != nullptr ? bias[j] : 0.0f;
      y[i * ldy + j] = dot_scalar<W>(w + static_cast<uint64_t>(j) * row_bytes, a + i * nb, nb) + b;
    }
  }
}

// A group's W rows (sixteen, or the AVX2 kernel's eight) are one stretch of memory read that many places at a time,
// which the hardware prefetchers do not follow: the kernels reading them in place call this every third block,
// fetching the lines the next group will read at the same place. (Prefetching the whole next group at once, as the
// stored panels do, leaves a one-row decode three times slower: 63 against 20 us for 1536 x 576 q4_0 on a Zen 5.)
inline void prefetch_next_group(const std::byte* first_row, uint64_t row_bytes, int64_t b, int64_t group = kLanes) {
  const std::byte* next = first_row + static_cast<uint64_t>(group) * row_bytes + b * kBlockBytes;
  for (int64_t c = 0; c < group; ++c) {
    _mm_prefetch(reinterpret_cast<const char*>(next + static_cast<uint64_t>(c) * row_bytes), _MM_HINT_T0);
  }
}

// --- AVX2: eight W rows, one block at a time, each row's integer reduced across its lanes ---------------------------

// A block's 32 integers for vpmaddubsw (values 0..15 in the low lane): q4_0's nibbles as they are, unsigned and
// small enough not to saturate against any activation (its bias of 8 is taken off after the sum); iq4_nl's signed
// values, whose magnitudes go in unsigned against the activation with their signs.
template <DType W>
__attribute__((target("avx2"))) inline __m256i values_avx2(const BlockQ4_0& block) {
  const __m256i nibbles = expand_nibbles(block.qs);
  if constexpr (W == DType::kQ4_0) return nibbles;
  return kquant::iq4_lookup(nibbles);
}

// Lane c = the sum of p[c]'s eight lanes, exactly.
__attribute__((target("avx2"))) inline __m256i sum_each_of_8(const __m256i* p) {
  const __m256i s0 = _mm256_hadd_epi32(p[0], p[1]);
  const __m256i s1 = _mm256_hadd_epi32(p[2], p[3]);
  const __m256i s2 = _mm256_hadd_epi32(p[4], p[5]);
  const __m256i s3 = _mm256_hadd_epi32(p[6], p[7]);
  const __m256i t0 = _mm256_hadd_epi32(s0, s1);  // p0..p3: sums of the low 128-bit lanes, then of the high
  const __m256i t1 = _mm256_hadd_epi32(s2, s3);  // p4..p7 the same
  return _mm256_add_epi32(_mm256_permute2x128_si256(t0, t1, 0x20), _mm256_permute2x128_si256(t0, t1, 0x31));
}

// The f16 scales of eight rows' blocks (at first + offsets[c]) as floats, by one dword gather: eight two-byte
// stores read back as one vector cannot be forwarded, and that stall was the AVX2 decode's largest cost.
__attribute__((target("avx2,f16c"))) inline __m256 scales8(const std::byte* first, __m256i offsets) {
  const __m256i words = _mm256_and_si256(_mm256_i32gather_epi32(reinterpret_cast<const int*>(first), offsets, 1),
                                         _mm256_set1_epi32(0xFFFF));
  const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(words), _mm256_extracti128_si256(words, 1));
  return _mm256_cvtph_ps(packed);
}

template <DType W>
__attribute__((target("avx2,fma,f16c"))) void tile_avx2(const BlockQ8A* a, int64_t rows, const std::byte* w,
                                                        uint64_t row_bytes, int64_t nb, int64_t cols,
                                                        const float* bias, float* y, int64_t ldy) {
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t j0 = 0; j0 < cols; j0 += 8) {
    const int64_t nc = std::min<int64_t>(8, cols - j0);
    const std::byte* w_rows[8];  // columns past cols repeat the last one and are not stored
    for (int64_t c = 0; c < 8; ++c) w_rows[c] = w + static_cast<uint64_t>(j0 + std::min(c, nc - 1)) * row_bytes;
    alignas(32) float b8[8] = {};
    for (int64_t c = 0; c < nc && bias != nullptr; ++c) b8[c] = bias[j0 + c];
    alignas(32) int32_t offsets[8];  // row c's distance from row 0, for the scales' gather
    for (int c = 0; c < 8; ++c) offsets[c] = static_cast<int32_t>(w_rows[c] - w_rows[0]);
    const __m256i offs = _mm256_load_si256(reinterpret_cast<const __m256i*>(offsets));
    for (int64_t i0 = 0; i0 < rows; i0 += kAvx2Rows) {
      const int64_t nr = std::min(kAvx2Rows, rows - i0);
      __m256 acc[kAvx2Rows];
      for (__m256& v : acc) v = _mm256_setzero_ps();
      if (nr == 1) {  // decode: each W row's products right after its decode, the accumulator in a register
        __m256 acc1 = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
          if (b % 3 == 0) prefetch_next_group(w_rows[0], row_bytes, b, 8);
          const BlockQ8A& ab = a[i0 * nb + b];
          const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.qs));
          __m256i p[8];
          for (int c = 0; c < 8; ++c) {
            const __m256i v = values_avx2<W>(block_at(w_rows[c], b));
            if constexpr (W == DType::kQ4_0) {
              p[c] = _mm256_madd_epi16(_mm256_maddubs_epi16(v, q), ones);
            } else {
              p[c] = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(v), _mm256_sign_epi8(q, v)), ones);
            }
          }
          __m256i isum = sum_each_of_8(p);
          if constexpr (W == DType::kQ4_0) isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(8 * block_sum(ab)));
          const __m256 dw = scales8(w_rows[0] + b * kBlockBytes, offs);
          acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, _mm256_set1_ps(ab.d)), acc1);
        }
        acc[0] = acc1;
      }
      for (int64_t b = 0; b < nb && nr > 1; ++b) {
        if (b % 3 == 0) prefetch_next_group(w_rows[0], row_bytes, b, 8);
        __m256i v[8];
        __m256i mag[8];
        for (int c = 0; c < 8; ++c) {
          v[c] = values_avx2<W>(block_at(w_rows[c], b));
          mag[c] = W == DType::kQ4_0 ? v[c] : _mm256_abs_epi8(v[c]);
        }
        const __m256 dw = scales8(w_rows[0] + b * kBlockBytes, offs);
        for (int64_t r = 0; r < nr; ++r) {
          const BlockQ8A& ab = a[(i0 + r) * nb + b];
          const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.qs));
          __m256i p[8];
          for (int c = 0; c < 8; ++c) {
            const __m256i qs = W == DType::kQ4_0 ? q : _mm256_sign_epi8(q, v[c]);
            p[c] = _mm256_madd_epi16(_mm256_maddubs_epi16(mag[c], qs), ones);
          }
          __m256i isum = sum_each_of_8(p);
          if constexpr (W == DType::kQ4_0) isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(8 * block_sum(ab)));
          const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(ab.d));
          acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), scale, acc[r]);
        }
      }
      for (int64_t r = 0; r < nr; ++r) {
        alignas(32) float out[8];
        _mm256_store_ps(out, _mm256_add_ps(acc[r], _mm256_load_ps(b8)));
        std::memcpy(y + (i0 + r) * ldy + j0, out, static_cast<size_t>(nc) * sizeof(float));
      }
    }
  }
}

// --- AVX-512 VNNI: sixteen W rows as the lanes of a zmm ---------------------------------------------------------
// (GCC 12's false -Wmaybe-uninitialized inside the AVX-512 intrinsics is silenced as in quant_simd.h.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// One block of sixteen W rows: lane c of u[k] holds column c's biased integers of values 4k..4k+3 (k < 4: the low
// nibbles of qs[4k..4k+3]; k >= 4: the high nibbles of qs[4(k-4)..]), lane c of d its scale.
struct alignas(64) PanelBlock {
  __m512i u[8];
  __m512 d;
};

// The f16 scales of sixteen rows' blocks (at first + offsets[c]) as floats, by one dword gather.
__attribute__((target("avx512f,avx512bw"), always_inline)) inline __m512 scales16(const std::byte* first,
                                                                                  __m512i offsets) {
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_i32gather_epi32(offsets, first, 1)));
}

// Rows x and y of a block as vpdpbusd's unsigned bytes: [low nibbles of x | high of x | low of y | high of y], i.e.
// values 0..31 of x in the low 256 bits and of y in the high.
template <DType W>
__attribute__((target("avx512f,avx512bw"), always_inline)) inline __m512i pair_block(const BlockQ4_0& x,
                                                                                     const BlockQ4_0& y) {
  const __m128i qx = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x.qs));
  const __m128i qy = _mm_loadu_si128(reinterpret_cast<const __m128i*>(y.qs));
  const __m512i raw = _mm512_mask_broadcast_i32x4(_mm512_broadcast_i32x4(qx), __mmask16{0xFF00}, qy);
  const __m512i u = _mm512_and_si512(_mm512_mask_srli_epi16(raw, 0xFF00FF00u, raw, 4), _mm512_set1_epi8(0x0F));
  if constexpr (W == DType::kIQ4_NL) {
    return _mm512_shuffle_epi8(
        _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4NLBiased.data()))), u);
  }
  return u;
}

// Block b of the sixteen W rows at rows[0..15] (rows past the tile repeat the last): rows p and p + 8 decoded as one
// pair, then the eight pairs' dwords transposed, an 8 x 8 transpose in each 256-bit half (which keeps rows 0..7 in
// lanes 0..7 and rows 8..15 in lanes 8..15); the scales by one gather (offsets[c]: row c's distance from rows[0]).
template <DType W>
__attribute__((target("avx512f,avx512bw"), always_inline)) inline void decode16(const std::byte* const* rows,
                                                                                 int64_t b, __m512i offsets,
                                                                                 PanelBlock& out) {
  __m512i t[8];
#pragma GCC unroll 4
  for (int p = 0; p < 8; p += 2) {
    const __m512i x = pair_block<W>(block_at(rows[p], b), block_at(rows[p + 8], b));
    const __m512i y = pair_block<W>(block_at(rows[p + 1], b), block_at(rows[p + 9], b));
    t[p] = _mm512_unpacklo_epi32(x, y);
    t[p + 1] = _mm512_unpackhi_epi32(x, y);
  }
  __m512i u[8];
#pragma GCC unroll 2
  for (int h = 0; h < 8; h += 4) {  // rows 0..3 (h = 0) and 4..7 (h = 4) of each half
    u[h] = _mm512_unpacklo_epi64(t[h], t[h + 2]);      // dwords 0 and 4
    u[h + 1] = _mm512_unpackhi_epi64(t[h], t[h + 2]);  // 1 and 5
    u[h + 2] = _mm512_unpacklo_epi64(t[h + 1], t[h + 3]);  // 2 and 6
    u[h + 3] = _mm512_unpackhi_epi64(t[h + 1], t[h + 3]);  // 3 and 7
  }
  const __m512i first = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
  const __m512i second = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    out.u[k] = _mm512_permutex2var_epi64(u[k], first, u[4 + k]);
    out.u[k + 4] = _mm512_permutex2var_epi64(u[k], second, u[4 + k]);
  }
  out.d = scales16(rows[0] + b * kBlockBytes, offsets);
}

// Activation values 4k..4k+3 of a block in every lane, broadcast straight from memory (copying them to ints first
// became GPR loads, shifts and GPR-to-vector broadcasts, the prefill kernel's bottleneck).
__attribute__((target("avx512f"), always_inline)) inline __m512i quad(const BlockQ8A& a, int k) {
  return _mm512_broadcastd_epi32(_mm_loadu_si32(a.qs + 4 * k));
}

// One block for R activation rows (row r's block at a[r · nb]): acc[r] = fma(Σ v·q, d_w · d_a, acc[r]) in 16 lanes.
template <DType W, int R>
__attribute__((target("avx512f,avx512bw,avx512vnni"), always_inline)) inline void block_step(const PanelBlock& p,
                                                                                            const BlockQ8A* a,
                                                                                            int64_t nb,
                                                                                            __m512* acc) {
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const BlockQ8A& ab = a[r * nb];
    // Two chains of four (an integer sum in any order is the same): half the dependent vpdpbusd latency.
    __m512i even = _mm512_set1_epi32(-Grid<W>::kBias * block_sum(ab));
    __m512i odd = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int k = 0; k < 8; k += 2) {
      even = _mm512_dpbusd_epi32(even, p.u[k], quad(ab, k));
      odd = _mm512_dpbusd_epi32(odd, p.u[k + 1], quad(ab, k + 1));
    }
    const __m512i isum = _mm512_add_epi32(even, odd);
    const __m512 scale = _mm512_mul_ps(p.d, _mm512_set1_ps(ab.d));
    acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), scale, acc[r]);
  }
}

// R activation rows × a group of sixteen W rows: from its stored panel when there is one, else each block decoded
// in registers (rows[c]: W row c of the group, offsets[c] its distance from rows[0]). y[r · ldy + c] = acc + bias
// for the lanes in mask.
template <DType W, int R>
__attribute__((target("avx512f,avx512bw,avx512vnni,f16c"))) void panel_rows(const PanelBlock* panel,
                                                                            const std::byte* const* rows,
                                                                            uint64_t row_bytes, __m512i offsets,
                                                                            const BlockQ8A* a,
                                                                            int64_t nb, __mmask16 mask, __m512 bias,
                                                                            float* y, int64_t ldy) {
  __m512 acc[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    if (panel != nullptr) {
      block_step<W, R>(panel[b], a + b, nb, acc);
    } else {
      if (b % 3 == 0) prefetch_next_group(rows[0], row_bytes, b);
      PanelBlock p;
      decode16<W>(rows, b, offsets, p);
      block_step<W, R>(p, a + b, nb, acc);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(y + r * ldy, mask, _mm512_add_ps(acc[r], bias));
}

// One activation row (a decode step): per block, the eight pairs' vpdpbusd lanes are reduced to one integer per W
// row, which costs fewer instructions than decode16's transpose when only one row uses them. Pair p holds rows
// (p, p + 4) for p < 4 and (p + 4, p + 8) above, so that the reduction's output lane L is W row L.
//
// Lane L = the sum of the eight lanes of W row L in z (pairs as above), exactly: three levels of unpack-and-add.
__attribute__((target("avx512f"), always_inline)) inline __m512i reduce_pairs(const __m512i* z) {
  __m512i l1[4];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    l1[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(z[2 * i], z[2 * i + 1]),
                             _mm512_unpackhi_epi32(z[2 * i], z[2 * i + 1]));
  }
  __m512i l2[2];
#pragma GCC unroll 2
  for (int i = 0; i < 2; ++i) {
    l2[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(l1[2 * i], l1[2 * i + 1]),
                             _mm512_unpackhi_epi64(l1[2 * i], l1[2 * i + 1]));
  }
  return _mm512_add_epi32(_mm512_shuffle_i32x4(l2[0], l2[1], _MM_SHUFFLE(2, 0, 2, 0)),
                          _mm512_shuffle_i32x4(l2[0], l2[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// The activation row a × the sixteen W rows at rows[0..15]: y[c] = acc + bias for the lanes in mask.
template <DType W>
__attribute__((target("avx512f,avx512bw,avx512vnni,f16c"))) void gemv_row(const std::byte* const* rows,
                                                                          uint64_t row_bytes, __m512i offsets,
                                                                          const BlockQ8A* a,
                                                                          int64_t nb, __mmask16 mask, __m512 bias,
                                                                          float* y) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    if (b % 3 == 0) prefetch_next_group(rows[0], row_bytes, b);
    const BlockQ8A& ab = a[b];
    const __m512i q2 = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.qs)));
    __m512i z[8];
#pragma GCC unroll 8
    for (int p = 0; p < 8; ++p) {
      const int x = p < 4 ? p : p + 4;
      z[p] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), pair_block<W>(block_at(rows[x], b), block_at(rows[x + 4], b)),
                                 q2);
    }
    const __m512i isum = _mm512_sub_epi32(reduce_pairs(z), _mm512_set1_epi32(Grid<W>::kBias * block_sum(ab)));
    const __m512 dw = scales16(rows[0] + b * kBlockBytes, offsets);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, _mm512_set1_ps(ab.d)), acc);
  }
  _mm512_mask_storeu_ps(y, mask, _mm512_add_ps(acc, bias));
}

template <DType W>
__attribute__((target("avx512f,avx512bw,avx512vnni,f16c"))) void tile_vnni512(const BlockQ8A* a, int64_t rows,
                                                                              const std::byte* w,
                                                                              uint64_t row_bytes, int64_t nb,
                                                                              int64_t cols, const float* bias,
                                                                              float* y, int64_t ldy) {
  HXRT_CHECK(row_bytes * (kLanes - 1) <= static_cast<uint64_t>(std::numeric_limits<int32_t>::max()),
             "blockint: W rows of {} bytes are too long for 32-bit gather offsets", row_bytes);
  using PanelFn = void (*)(const PanelBlock*, const std::byte* const*, uint64_t, __m512i, const BlockQ8A*, int64_t,
                           __mmask16, __m512, float*, int64_t);
  static constexpr PanelFn kPanel[kDirectRows] = {&panel_rows<W, 1>, &panel_rows<W, 2>, &panel_rows<W, 3>,
                                                  &panel_rows<W, 4>, &panel_rows<W, 5>, &panel_rows<W, 6>,
                                                  &panel_rows<W, 7>, &panel_rows<W, 8>};
  thread_local std::vector<PanelBlock> panel;  // a group's blocks, decoded once for all its activation rows
  for (int64_t j0 = 0; j0 < cols; j0 += kLanes) {
    const int64_t nc = std::min(kLanes, cols - j0);
    alignas(64) int32_t offsets[kLanes];  // columns past cols read the last one again and are not stored
    const std::byte* w_rows[kLanes];
    for (int64_t c = 0; c < kLanes; ++c) {
      offsets[c] = static_cast<int32_t>(std::min(c, nc - 1) * row_bytes);
      w_rows[c] = w + static_cast<uint64_t>(j0) * row_bytes + static_cast<uint64_t>(offsets[c]);
    }
    const __m512i offs = _mm512_load_si512(offsets);
    const auto mask = static_cast<__mmask16>((1u << nc) - 1);
    const __m512 b16 = bias != nullptr ? _mm512_maskz_loadu_ps(mask, bias + j0) : _mm512_setzero_ps();
    if (rows == 1) {
      gemv_row<W>(w_rows, row_bytes, offs, a, nb, mask, b16, y + j0);
      continue;
    }
    if (rows <= kDirectRows) {
      kPanel[rows - 1](nullptr, w_rows, row_bytes, offs, a, nb, mask, b16, y + j0, ldy);
      continue;
    }
    prefetch_rows(w, j0 + kLanes, std::min(cols, j0 + 2 * kLanes), row_bytes);
    panel.resize(static_cast<size_t>(nb));
    for (int64_t b = 0; b < nb; ++b) decode16<W>(w_rows, b, offs, panel[static_cast<size_t>(b)]);
    for (int64_t i0 = 0; i0 < rows; i0 += kDirectRows) {
      const int64_t nr = std::min<int64_t>(kDirectRows, rows - i0);
      kPanel[nr - 1](panel.data(), w_rows, row_bytes, offs, a + i0 * nb, nb, mask, b16, y + i0 * ldy + j0, ldy);
    }
  }
}

#pragma GCC diagnostic pop

template <DType W>
void tile_for(QuantIsa isa, const BlockQ8A* a, int64_t rows, const std::byte* w, uint64_t row_bytes, int64_t nb,
              int64_t cols, const float* bias, float* y, int64_t ldy) {
  switch (isa) {
    case QuantIsa::kAvx512Vnni: tile_vnni512<W>(a, rows, w, row_bytes, nb, cols, bias, y, ldy); return;
    case QuantIsa::kAvx2: tile_avx2<W>(a, rows, w, row_bytes, nb, cols, bias, y, ldy); return;
    case QuantIsa::kScalar: tile_scalar<W>(a, rows, w, row_bytes, nb, cols, bias, y, ldy); return;
  }
}

}  // namespace

bool handles(DType w_type) { return w_type == DType::kQ4_0 || w_type == DType::kIQ4_NL; }

void tile(DType w_type, QuantIsa isa, const BlockQ8A* a, int64_t rows, const std::byte* w, uint64_t row_bytes,
          int64_t nb, int64_t cols, const float* bias, float* y, int64_t ldy) {
  switch (w_type) {
    case DType::kQ4_0: tile_for<DType::kQ4_0>(isa, a, rows, w, row_bytes, nb, cols, bias, y, ldy); return;
    case DType::kIQ4_NL: tile_for<DType::kIQ4_NL>(isa, a, rows, w, row_bytes, nb, cols, bias, y, ldy); return;
    default: HXRT_CHECK(false, "blockint::tile: {} is not q4_0 or iq4_nl", w_type);
  }
}

}  // namespace hxrt::kernels::cpu::blockint
