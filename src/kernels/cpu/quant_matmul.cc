#include "kernels/cpu/quant_matmul.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "hxrt/base/check.h"
#include "hxrt/base/float16.h"
#include "hxrt/ops/kernel_def.h"
#include "kernels/cpu/quant_matmul_blockint.h"
#include "kernels/cpu/quant_matmul_kquant.h"
#include "kernels/cpu/quant_simd.h"
#include "kernels/cpu/quant_matmul_vnni.h"

namespace hxrt::kernels::cpu {

std::string_view quant_isa_name(QuantIsa isa) {
  switch (isa) {
    case QuantIsa::kScalar: return "scalar";
    case QuantIsa::kAvx2: return "avx2";
    case QuantIsa::kAvx512Vnni: return "avx512vnni";
  }
  return "unknown";
}

bool quant_isa_supported(QuantIsa isa) {
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  switch (isa) {
    case QuantIsa::kScalar: return true;
    case QuantIsa::kAvx2: return avx2;
    case QuantIsa::kAvx512Vnni:
      return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  }
  return false;
}

QuantIsa quant_best_isa() {
  static const QuantIsa best = [] {
    if (quant_isa_supported(QuantIsa::kAvx512Vnni)) return QuantIsa::kAvx512Vnni;
    if (quant_isa_supported(QuantIsa::kAvx2)) return QuantIsa::kAvx2;
    return QuantIsa::kScalar;
  }();
  return best;
}

bool matmulq_weight_supported(DType w_type) {
  switch (w_type) {
    case DType::kQ8_0:
    case DType::kQ4_1:
    case DType::kF16:
    case DType::kBF16:
    case DType::kF32: return true;
    default: return blockint::handles(w_type) || kquant::handles(w_type);
  }
}

const std::vector<DType>& matmulq_weight_types() {
  static const std::vector<DType> types = [] {
    std::vector<DType> out;
    for (int i = 0; i < kDTypeCount; ++i) {
      if (matmulq_weight_supported(static_cast<DType>(i))) out.push_back(static_cast<DType>(i));
    }
    return out;
  }();
  return types;
}

// As llama.cpp's activation blocks, so hxrt's logits track llama.cpp's on the same file: q8_0/q8_1 for group 1 (the
// scale and the scaled sum stored at f16 precision), q8_K for group kSuperBlockRuns (one float scale per 256 values);
// the values are rounded half to even at 127 / max|x|.
namespace {

// The scale of each block of a group: group 1 keeps d at f16 precision, a super-block group keeps the float.
inline float block_scale(float amax, int group) {
  const float d = amax / 127.0f;
  return group == 1 ? f16_to_f32(f32_to_f16(d)) : d;
}

void quantize_row_scalar(const float* x, int64_t k, BlockQ8A* out, int group) {
  const int64_t nb = k / kQuantBlock;
  for (int64_t g = 0; g < nb; g += group) {
    float amax = 0.0f;
    for (int64_t i = g * kQuantBlock; i < (g + group) * kQuantBlock; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = block_scale(amax, group);
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int64_t b = g; b < g + group; ++b) {
      const float* xb = x + b * kQuantBlock;
      int half[2] = {0, 0};
      for (int64_t i = 0; i < kQuantBlock; ++i) {
        const int q = static_cast<int>(std::nearbyint(xb[i] * inv));
        out[b].qs[i] = static_cast<int8_t>(std::clamp(q, -127, 127));
        half[i / 16] += out[b].qs[i];
      }
      const int sum = half[0] + half[1];
      out[b].sum[0] = static_cast<int16_t>(half[0]);
      out[b].sum[1] = static_cast<int16_t>(half[1]);
      out[b].d = d;
      out[b].s = f16_to_f32(f32_to_f16(amax / 127.0f * static_cast<float>(sum)));
    }
  }
}

__attribute__((target("avx2"))) inline int hsum8_epi32(__m256i x) {
  __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1));
  s4 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
  return _mm_cvtsi128_si32(_mm_add_epi32(s4, _mm_shuffle_epi32(s4, 1)));
}

// The same operations eight lanes at a time: max|x| is exact in any order, x · inv is the same product, and
// vcvtps2dq rounds half to even (the default MXCSR mode, as nearbyint's) — so the blocks are bit-identical.
__attribute__((target("avx2,fma,f16c"))) void quantize_row_avx2(const float* x, int64_t k, BlockQ8A* out,
                                                                 int group) {
  const int64_t nb = k / kQuantBlock;
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256i lo = _mm256_set1_epi32(-127);
  const __m256i hi = _mm256_set1_epi32(127);
  const __m256i unshuffle = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);  // undoes the packs' lane interleave
  for (int64_t g = 0; g < nb; g += group) {
    __m256 amax8 = _mm256_setzero_ps();
    for (int64_t i = g * kQuantBlock; i < (g + group) * kQuantBlock; i += 8) {
      amax8 = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + i), abs_mask), amax8);  // a NaN x is skipped
    }
    __m128 amax4 = _mm_max_ps(_mm256_castps256_ps128(amax8), _mm256_extractf128_ps(amax8, 1));
    amax4 = _mm_max_ps(amax4, _mm_movehl_ps(amax4, amax4));
    const float amax = _mm_cvtss_f32(_mm_max_ss(amax4, _mm_movehdup_ps(amax4)));
    const float d = block_scale(amax, group);
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int64_t b = g; b < g + group; ++b) {
      const float* xb = x + b * kQuantBlock;
      __m256i q[4];
      for (int j = 0; j < 4; ++j) {
        q[j] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + 8 * j), _mm256_set1_ps(inv)));
        q[j] = _mm256_min_epi32(_mm256_max_epi32(q[j], lo), hi);
      }
      const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].qs), _mm256_permutevar8x32_epi32(packed, unshuffle));
      // Values 0..15 are q[0] and q[1], values 16..31 q[2] and q[3].
      const int half0 = hsum8_epi32(_mm256_add_epi32(q[0], q[1]));
      const int half1 = hsum8_epi32(_mm256_add_epi32(q[2], q[3]));
      const int sum = half0 + half1;
      out[b].sum[0] = static_cast<int16_t>(half0);
      out[b].sum[1] = static_cast<int16_t>(half1);
      out[b].d = d;
      out[b].s = f16_to_f32(f32_to_f16(amax / 127.0f * static_cast<float>(sum)));
    }
  }
}

}  // namespace

int activation_group(DType w_type) {
  return kquant::handles(w_type) && dtype_info(w_type).block_elements == kSuperBlockRuns * kQuantBlock
             ? kSuperBlockRuns
             : 1;
}

void quantize_activation_row(const float* x, int64_t k, BlockQ8A* out, QuantIsa isa, int group) {
  HXRT_CHECK(group >= 1 && k % (group * kQuantBlock) == 0, "quantize_activation_row: k={} is not a multiple of {}",
             k, group * kQuantBlock);
  if (isa == QuantIsa::kScalar) {
    quantize_row_scalar(x, k, out, group);
  } else {
    quantize_row_avx2(x, k, out, group);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Quantized dot products of q8_0 and q4_1 (q4_0 and iq4_nl: quant_matmul_blockint.h; the others:
// quant_matmul_kquant.h). Each W block contributes  d_w·d_a·Σ u·q  +  c_w·s_a  where u are the block's unsigned
// integers (nibbles, or |q| for q8_0 with the activation's signs flipped to match), and c_w is the offset term: m
// for q4_1, 0 for q8_0. See Note [Batch invariance] in the header for why the multi-row
// kernels keep each row's operation sequence identical to the one-row kernel. This file holds the scalar and AVX2
// kernels; the AVX-512 VNNI ones, which read several blocks per instruction, are in quant_matmul_vnni.cc.
namespace {

constexpr int kMaxRows = kQuantTileRows;

template <DType W>
struct WeightBlock;
template <>
struct WeightBlock<DType::kQ8_0> {
  using Type = BlockQ8_0;
};
template <>
struct WeightBlock<DType::kQ4_1> {
  using Type = BlockQ4_1;
};

// --- scalar ---------------------------------------------------------------------------------------------------

template <DType W>
float dot_scalar(const void* w_row, const BlockQ8A* a, int64_t nb) {
  const auto* w = static_cast<const typename WeightBlock<W>::Type*>(w_row);
  float sum = 0.0f;
  float extra = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    int32_t isum = 0;
    const float dw = f16_to_f32(w[b].d);
    if constexpr (W == DType::kQ8_0) {
      for (int i = 0; i < 32; ++i) isum += int32_t{w[b].qs[i]} * int32_t{a[b].qs[i]};
    } else {
      for (int j = 0; j < 16; ++j) {
        isum += int32_t{static_cast<uint8_t>(w[b].qs[j] & 0x0F)} * int32_t{a[b].qs[j]};
        isum += int32_t{static_cast<uint8_t>(w[b].qs[j] >> 4)} * int32_t{a[b].qs[j + 16]};
      }
    }
    sum += dw * a[b].d * static_cast<float>(isum);
    if constexpr (W == DType::kQ4_1) extra += f16_to_f32(w[b].m) * a[b].s;
  }
  return sum + extra;
}

template <DType W>
void rows_scalar(int rows, const void* w_row, const BlockQ8A* a, int64_t nb, float* out) {
  for (int r = 0; r < rows; ++r) out[r] = dot_scalar<W>(w_row, a + r * nb, nb);
}

// --- AVX2 -------------------------------------------------------------------------------------------------------

// Unsigned W integers of one block, the sign source for q8_0, the scale and the offset coefficient.
struct DecodedBlock {
  __m256i u;
  __m256i sign;
  float d;
  float c;
};

template <DType W>
__attribute__((target("avx2,f16c"))) inline DecodedBlock decode_block(const typename WeightBlock<W>::Type& block) {
  DecodedBlock out;
  out.d = _cvtsh_ss(block.d);
  if constexpr (W == DType::kQ8_0) {
    out.sign = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block.qs));
    out.u = _mm256_sign_epi8(out.sign, out.sign);  // |q|; -128 becomes the unsigned 128
    out.c = 0.0f;
  } else {
    out.u = expand_nibbles(block.qs);
    out.sign = _mm256_setzero_si256();
    if constexpr (W == DType::kQ4_1) out.c = _cvtsh_ss(block.m);
  }
  return out;
}

template <DType W>
__attribute__((target("avx2"))) inline __m256i signed_activation(const DecodedBlock& wb, const BlockQ8A& a) {
  const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs));
  if constexpr (W == DType::kQ8_0) return _mm256_sign_epi8(q, wb.sign);
  return q;
}

template <DType W, int R>
__attribute__((target("avx2,fma,f16c"))) void rows_avx2(const void* w_row, const BlockQ8A* a, int64_t nb,
                                                         float* out) {
  const auto* w = static_cast<const typename WeightBlock<W>::Type*>(w_row);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[R];
  float extra[R];
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm256_setzero_ps();
    extra[r] = 0.0f;
  }
  for (int64_t b = 0; b < nb; ++b) {
    const DecodedBlock wb = decode_block<W>(w[b]);
    for (int r = 0; r < R; ++r) {
      const BlockQ8A& ab = a[r * nb + b];
      const __m256i pairs = _mm256_maddubs_epi16(wb.u, signed_activation<W>(wb, ab));
      const __m256i idot = _mm256_madd_epi16(pairs, ones);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(idot), _mm256_set1_ps(wb.d * ab.d), acc[r]);
      extra[r] = std::fma(wb.c, ab.s, extra[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r] = hsum256(acc[r]) + extra[r];
}

// out[r] = dot(W row, activation row r) for r < rows (<= kMaxRows); the activation rows are nb blocks apart.
using RowsFn = void (*)(const void* w_row, const BlockQ8A* a, int64_t nb, float* out);

// AVX2 only: quantized W on AVX-512 VNNI goes through vnni512::tile (quant_matmul_vnni.h).
template <DType W>
RowsFn rows_kernel(QuantIsa isa, int rows) {
  static constexpr RowsFn kAvx2[kMaxRows + 1] = {nullptr, &rows_avx2<W, 1>, &rows_avx2<W, 2>, &rows_avx2<W, 3>,
                                                 &rows_avx2<W, 4>};
  return isa == QuantIsa::kAvx2 ? kAvx2[rows] : nullptr;
}

// --- float W (f32, f16): one row at a time on f32 activations ---------------------------------------------------

template <DType W>
float dot_float_scalar(const void* w_row, const float* a, int64_t k) {
  float sum = 0.0f;
  for (int64_t i = 0; i < k; ++i) {
    float wv;
    if constexpr (W == DType::kF32) {
      wv = static_cast<const float*>(w_row)[i];
    } else if constexpr (W == DType::kBF16) {
      wv = bf16_to_f32(static_cast<const uint16_t*>(w_row)[i]);
    } else {
      wv = f16_to_f32(static_cast<const uint16_t*>(w_row)[i]);
    }
    sum += wv * a[i];
  }
  return sum;
}

template <DType W>
__attribute__((target("avx2,fma,f16c"))) float dot_float_avx2(const void* w_row, const float* a, int64_t k) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    __m256 wv;
    if constexpr (W == DType::kF32) {
      wv = _mm256_loadu_ps(static_cast<const float*>(w_row) + i);
    } else if constexpr (W == DType::kBF16) {
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(w_row) + i));
      wv = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    } else {
      wv = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(w_row) + i)));
    }
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), wv, acc);
  }
  if (i < k) {  // tail: zero-padded copies
    alignas(32) float at[8] = {};
    alignas(32) float wt[8] = {};
    for (int64_t j = i; j < k; ++j) {
      at[j - i] = a[j];
      if constexpr (W == DType::kF32) {
        wt[j - i] = static_cast<const float*>(w_row)[j];
      } else if constexpr (W == DType::kBF16) {
        wt[j - i] = bf16_to_f32(static_cast<const uint16_t*>(w_row)[j]);
      } else {
        wt[j - i] = _cvtsh_ss(static_cast<const uint16_t*>(w_row)[j]);
      }
    }
    acc = _mm256_fmadd_ps(_mm256_load_ps(at), _mm256_load_ps(wt), acc);
  }
  return hsum256(acc);
}

template <DType W>
__attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c"))) float dot_float_avx512(const void* w_row,
                                                                                          const float* a,
                                                                                          int64_t k) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < k; i += 16) {
    const int64_t left = k - i;
    const __mmask16 mask = left >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << left) - 1u);
    __m512 wv;
    if constexpr (W == DType::kF32) {
      wv = _mm512_maskz_loadu_ps(mask, static_cast<const float*>(w_row) + i);
    } else if constexpr (W == DType::kBF16) {
      const __m256i h = _mm256_maskz_loadu_epi16(mask, static_cast<const uint16_t*>(w_row) + i);
      wv = _mm512_castsi512_ps(
          _mm512_maskz_slli_epi32(__mmask16{0xFFFF}, _mm512_maskz_cvtepu16_epi32(__mmask16{0xFFFF}, h), 16));
    } else {
      // The maskz forms avoid GCC 12's false -Wuninitialized on the unmasked intrinsics' undefined sources.
      wv = _mm512_maskz_cvtph_ps(__mmask16{0xFFFF},
                                 _mm256_maskz_loadu_epi16(mask, static_cast<const uint16_t*>(w_row) + i));
    }
    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, a + i), wv, acc);
  }
  // Reduced through memory: GCC 12 reports a false -Wuninitialized inside the 512→256 extract intrinsics.
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, acc);
  return hsum256(_mm256_add_ps(_mm256_load_ps(lanes), _mm256_load_ps(lanes + 8)));
}

using FloatDotFn = float (*)(const void* w_row, const float* a, int64_t k);

template <DType W>
FloatDotFn float_dot_kernel(QuantIsa isa) {
  switch (isa) {
    case QuantIsa::kAvx512Vnni: return &dot_float_avx512<W>;
    case QuantIsa::kAvx2: return &dot_float_avx2<W>;
    case QuantIsa::kScalar: break;
  }
  return &dot_float_scalar<W>;
}

// Computes rows [i0, i0 + rows) × W rows [j0, j1) of Y for a W of quant_matmul_kquant.h.
void kquant_tile(DType w_type, QuantIsa isa, const BlockQ8A* aq, int64_t nb, const std::byte* w, uint64_t w_row_bytes,
                 int64_t n, const float* bias, float* y, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  float res[kMaxRows];
  const bool mins = kquant::has_super_mins(w_type);
  const int64_t nsb = nb / kSuperBlockRuns;
  thread_local std::vector<kquant::HalfSums> halves;  // the rows' half sums (has_super_mins types)
  for (int64_t i = i0; i < i1; i += kMaxRows) {
    const int rows = static_cast<int>(std::min<int64_t>(kMaxRows, i1 - i));
    const BlockQ8A* a = aq + i * nb;
    kquant::HalfSums* hs = nullptr;
    if (mins) {
      halves.resize(static_cast<size_t>(rows * nsb));
      hs = halves.data();
      kquant::half_sums(a, rows, nsb, hs);
    }
    const kquant::RowsFn fn = kquant::rows_kernel(w_type, isa, rows);
    for (int64_t j = j0; j < j1; ++j) {
      fn(w + static_cast<uint64_t>(j) * w_row_bytes, a, hs, nb, res);
      const float b = bias != nullptr ? bias[j] : 0.0f;
      for (int r = 0; r < rows; ++r) y[(i + r) * n + j] = res[r] + b;
    }
  }
}

// Computes rows [i0, i0 + rows) × W rows [j0, j1) of Y for a q8_0, q4_0 or q4_1 W.
template <DType W>
void quant_tile(QuantIsa isa, const BlockQ8A* aq, int64_t nb, const std::byte* w, uint64_t w_row_bytes, int64_t n,
                const float* bias, float* y, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  float res[kMaxRows];
  for (int64_t i = i0; i < i1; i += kMaxRows) {
    const int rows = static_cast<int>(std::min<int64_t>(kMaxRows, i1 - i));
    const BlockQ8A* a = aq + i * nb;
    const RowsFn fn = rows_kernel<W>(isa, rows);
    for (int64_t j = j0; j < j1; ++j) {
      const void* w_row = w + static_cast<uint64_t>(j) * w_row_bytes;
      if (fn != nullptr) {
        fn(w_row, a, nb, res);
      } else {
        rows_scalar<W>(rows, w_row, a, nb, res);
      }
      const float b = bias != nullptr ? bias[j] : 0.0f;
      for (int r = 0; r < rows; ++r) y[(i + r) * n + j] = res[r] + b;
    }
  }
}

template <DType W>
void float_tile(QuantIsa isa, const float* a, int64_t k, const std::byte* w, uint64_t w_row_bytes, int64_t n,
                const float* bias, float* y, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  const FloatDotFn fn = float_dot_kernel<W>(isa);
  for (int64_t i = i0; i < i1; ++i) {
    for (int64_t j = j0; j < j1; ++j) {
      const float b = bias != nullptr ? bias[j] : 0.0f;
      y[i * n + j] = fn(w + static_cast<uint64_t>(j) * w_row_bytes, a + i * k, k) + b;
    }
  }
}

template <typename Body>
void run_tasks(ThreadPool* pool, int64_t count, Body&& body) {
  if (pool != nullptr && count > 1) {
    pool->parallel_for(count, 1, body);
  } else if (count > 0) {
    body(0, count);
  }
}

}  // namespace

QuantMatMulTiles quant_matmul_tiles(int64_t m, int64_t n, int64_t units) {
  QuantMatMulTiles tiles;
  // 64 rows: each decoded W panel (Note [Decoded panels]) serves 64 activation rows; 4% faster prefill than 32.
  tiles.tile_m = m <= 2 * kMaxRows ? std::max<int64_t>(1, m) : 64;
  const int64_t m_tiles = (m + tiles.tile_m - 1) / tiles.tile_m;
  const int64_t wanted_n_tiles = std::max<int64_t>(1, (4 * units + m_tiles - 1) / m_tiles);
  tiles.tile_n = std::clamp<int64_t>((n + wanted_n_tiles - 1) / wanted_n_tiles, 16, 128);
  return tiles;
}

Status quant_matmul(DType w_type, const float* a, int64_t m, int64_t k, const void* w, int64_t n, const float* bias,
                    float* y, QuantMatMulTiles tiles, QuantIsa isa, ThreadPool* pool) {
  const QuantMatMulOutput output{.w = w, .n = n, .bias = bias, .y = y};
  return quant_matmul_group(w_type, a, m, k, std::span<const QuantMatMulOutput>(&output, 1), tiles, isa, pool);
}

Status quant_matmul_group(DType w_type, const float* a, int64_t m, int64_t k,
                          std::span<const QuantMatMulOutput> outputs, QuantMatMulTiles tiles, QuantIsa isa,
                          ThreadPool* pool) {
  if (!matmulq_weight_supported(w_type)) {
    return invalid_argument("MatMulQ: weight type {} is not supported ({})", w_type,
                            fmt::join(matmulq_weight_types(), ", "));
  }
  const bool quantized = dtype_info(w_type).is_quantized;
  const int64_t block = dtype_info(w_type).block_elements;
  if (quantized && k % block != 0) {
    return invalid_argument("MatMulQ: K={} is not a multiple of {} for a {} weight", k, block, w_type);
  }
  if (!quant_isa_supported(isa)) return invalid_argument("MatMulQ: ISA {} is not supported here", quant_isa_name(isa));
  if (m == 0 || outputs.empty()) return ok_status();
  HXRT_ASSIGN_OR_RETURN(const uint64_t w_row_bytes, storage_bytes(w_type, static_cast<uint64_t>(k)));
  const int64_t tile_m = std::max<int64_t>(1, tiles.tile_m);
  const int64_t tile_n = std::max<int64_t>(1, tiles.tile_n);
  const int64_t m_tiles = (m + tile_m - 1) / tile_m;
  // The outputs' tasks in one range: output o owns tasks [first_task[o], first_task[o + 1]), m_tiles × its n-tiles.
  std::vector<int64_t> first_task(outputs.size() + 1, 0);
  for (size_t o = 0; o < outputs.size(); ++o) {
    first_task[o + 1] = first_task[o] + m_tiles * ((outputs[o].n + tile_n - 1) / tile_n);
  }

  std::vector<BlockQ8A> aq;  // (m, k / 32) quantized activations
  const int64_t nb = k / kQuantBlock;
  // AVX-512 VNNI: the activations in the kernels' layout, (m, nb) (Note [VNNI-512 pairs] in quant_matmul_vnni.h).
  const bool blockint_w = blockint::handles(w_type);  // Note [Block integers] in quant_matmul_blockint.h
  const bool kquant_w = kquant::handles(w_type);
  const int group = activation_group(w_type);
  const bool vnni512 = vnni512::handles(w_type) && isa == QuantIsa::kAvx512Vnni;
  // The AVX2 decoded rows serve prefill tiles on AVX2 and, for the super-block types, on AVX-512 VNNI too (the same
  // bits as their 256-bit VNNI rows kernels).
  const bool panels = quantized && (isa == QuantIsa::kAvx2 || (isa == QuantIsa::kAvx512Vnni && group > 1));
  std::vector<vnni512::ActBlock> act(vnni512 ? static_cast<size_t>(m * nb) : 0);
  if (quantized) {
    aq.resize(static_cast<size_t>(m * nb));
    run_tasks(pool, m, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        quantize_activation_row(a + i * k, k, aq.data() + i * nb, isa, group);
        if (vnni512) vnni512::pack_activation_row(w_type, aq.data() + i * nb, nb, act.data() + i * nb);
      }
    });
  }
  run_tasks(pool, first_task.back(), [&](int64_t begin, int64_t end) {
    size_t o = 0;
    for (int64_t task = begin; task < end; ++task) {
      while (task >= first_task[o + 1]) ++o;
      const QuantMatMulOutput& out = outputs[o];
      const int64_t n = out.n;
      const int64_t n_tiles = (n + tile_n - 1) / tile_n;
      const int64_t local = task - first_task[o];
      const int64_t i0 = (local / n_tiles) * tile_m;
      const int64_t j0 = (local % n_tiles) * tile_n;
      const int64_t i1 = std::min(m, i0 + tile_m);
      const int64_t j1 = std::min(n, j0 + tile_n);
      const auto* wb = static_cast<const std::byte*>(out.w);
      const float* bias = out.bias;
      float* y = out.y;
      if (blockint_w) {
        blockint::tile(w_type, isa, aq.data() + i0 * nb, i1 - i0, wb + static_cast<uint64_t>(j0) * w_row_bytes,
                       w_row_bytes, nb, j1 - j0, bias != nullptr ? bias + j0 : nullptr, y + i0 * n + j0, n);
        continue;
      }
      if (vnni512) {
        vnni512::tile(w_type, act.data() + i0 * nb, i1 - i0, wb + static_cast<uint64_t>(j0) * w_row_bytes,
                      w_row_bytes, nb, j1 - j0, bias != nullptr ? bias + j0 : nullptr, y + i0 * n + j0, n);
        continue;
      }
      // Prefill tiles: the rows kernels' bits through decoded W rows (Note [AVX2 decoded rows] in
      // quant_matmul_kquant.cc).
      if (panels && i1 - i0 > kMaxRows && isa == QuantIsa::kAvx512Vnni) {
        kquant::panel_tile_vnni512(w_type, aq.data() + i0 * nb, i1 - i0, wb + static_cast<uint64_t>(j0) * w_row_bytes,
                                   w_row_bytes, nb, j1 - j0, bias != nullptr ? bias + j0 : nullptr, y + i0 * n + j0, n);
        continue;
      }
      if (panels && i1 - i0 > kMaxRows) {
        kquant::panel_tile_avx2(w_type, aq.data() + i0 * nb, i1 - i0, wb + static_cast<uint64_t>(j0) * w_row_bytes,
                                w_row_bytes, nb, j1 - j0, bias != nullptr ? bias + j0 : nullptr, y + i0 * n + j0, n);
        continue;
      }
      if (kquant_w) {
        kquant_tile(w_type, isa, aq.data(), nb, wb, w_row_bytes, n, bias, y, i0, i1, j0, j1);
        continue;
      }
      switch (w_type) {
        case DType::kQ8_0:
          quant_tile<DType::kQ8_0>(isa, aq.data(), nb, wb, w_row_bytes, n, bias, y, i0, i1, j0, j1);
          break;
        case DType::kQ4_1:
          quant_tile<DType::kQ4_1>(isa, aq.data(), nb, wb, w_row_bytes, n, bias, y, i0, i1, j0, j1);
          break;
        case DType::kF16: float_tile<DType::kF16>(isa, a, k, wb, w_row_bytes, n, bias, y, i0, i1, j0, j1); break;
        case DType::kBF16: float_tile<DType::kBF16>(isa, a, k, wb, w_row_bytes, n, bias, y, i0, i1, j0, j1); break;
        case DType::kF32: float_tile<DType::kF32>(isa, a, k, wb, w_row_bytes, n, bias, y, i0, i1, j0, j1); break;
        default: break;
      }
    }
  });
  return ok_status();
}

// ---------------------------------------------------------------------------------------------------------------
// Kernel
namespace {

// Geometry of a MatMulQ launch from concrete shapes: A [..., K], W [N, K] → Y [..., N].
struct QuantGeometry {
  int64_t m = 0;
  int64_t k = 0;
  int64_t n = 0;
};

Result<QuantGeometry> quant_geometry(const Shape& a, const Shape& w) {
  if (a.rank() < 1) return invalid_argument("MatMulQ: A must have rank >= 1, got {}", a);
  if (w.rank() != 2) return invalid_argument("MatMulQ: W must be [N, K], got {}", w);
  QuantGeometry g;
  g.k = a.dim(-1);
  g.n = w.dim(0);
  if (w.dim(1) != g.k) return invalid_argument("MatMulQ: A {} has K={} but W {} has K={}", a, g.k, w, w.dim(1));
  g.m = 1;
  for (int i = 0; i + 1 < a.rank(); ++i) g.m *= a.dim(i);
  return g;
}


// Tiles for an [m, n] output on `device`, as MatMulQ and MatMulQGroup launch them.
ops::Tiling tiling_for(int64_t m, int64_t n, const hal::DeviceInfo* device) {
  const int64_t units = device != nullptr && device->compute_units > 0 ? device->compute_units : 1;
  const QuantMatMulTiles tiles = quant_matmul_tiles(m, n, units);
  ops::Tiling tiling;
  tiling.values = {{"tile_m", tiles.tile_m}, {"tile_n", tiles.tile_n}};
  tiling.launch.grid = {static_cast<uint32_t>(std::max<int64_t>(1, (n + tiles.tile_n - 1) / tiles.tile_n)),
                        static_cast<uint32_t>(std::max<int64_t>(1, (m + tiles.tile_m - 1) / tiles.tile_m)), 1};
  return tiling;
}

Result<ops::Tiling> quant_tiling(const ops::TilingQuery& query) {
  if (query.inputs.size() < 2) return invalid_argument("MatMulQ tiling needs A and W");
  HXRT_ASSIGN_OR_RETURN(const QuantGeometry g, quant_geometry(query.inputs[0].shape, query.inputs[1].shape));
  return tiling_for(g.m, g.n, query.device);
}

Status quant_compute(const ops::CpuComputeContext& ctx) {
  if (ctx.num_inputs() < 2) return invalid_argument("MatMulQ needs inputs A and W");
  const ops::TensorRef& a = ctx.input(0);
  const ops::TensorRef& w = ctx.input(1);
  const ops::TensorRef& y = ctx.output(0);
  if (a.dtype != DType::kF32 || y.dtype != DType::kF32) {
    return invalid_argument("MatMulQ: A and Y must be f32, got {} and {}", a.dtype, y.dtype);
  }
  HXRT_ASSIGN_OR_RETURN(const QuantGeometry g, quant_geometry(a.shape, w.shape));
  std::vector<int64_t> out_dims(a.shape.dims().begin(), a.shape.dims().end());
  out_dims.back() = g.n;
  HXRT_ASSIGN_OR_RETURN(const Shape expected, Shape::make(out_dims));
  if (!(y.shape == expected)) return invalid_argument("MatMulQ: output shape {} is not {}", y.shape, expected);
  HXRT_ASSIGN_OR_RETURN(const uint64_t w_bytes, storage_bytes(w.dtype, static_cast<uint64_t>(g.n * g.k)));
  if (w.view.size < w_bytes) {
    return invalid_argument("MatMulQ: W {} {} needs {} bytes, buffer holds {}", w.dtype, w.shape, w_bytes,
                            w.view.size);
  }
  const float* bias = nullptr;
  if (ctx.has_input(2)) {
    const ops::TensorRef& b = ctx.input(2);
    if (b.dtype != DType::kF32 || b.num_elements() != g.n) {
      return invalid_argument("MatMulQ: bias must be f32 [{}], got {} {}", g.n, b.dtype, b.shape);
    }
    bias = b.data<float>();
  }
  QuantMatMulTiles tiles;
  tiles.tile_m = ctx.tiling().get("tile_m", 32);
  tiles.tile_n = ctx.tiling().get("tile_n", 64);
  return quant_matmul(w.dtype, a.data<float>(), g.m, g.k, w.data(), g.n, bias, y.data<float>(), tiles,
                      quant_best_isa(), &ctx.pool());
}

// MatMulQGroup: A [..., K] and W_o [N_o, K] (one dtype) → Y_o [..., N_o], one output per weight.
Result<ops::Tiling> group_tiling(const ops::TilingQuery& query) {
  if (query.inputs.size() < 2) return invalid_argument("MatMulQGroup tiling needs A and at least one W");
  QuantGeometry total;
  for (size_t i = 1; i < query.inputs.size(); ++i) {
    HXRT_ASSIGN_OR_RETURN(const QuantGeometry g, quant_geometry(query.inputs[0].shape, query.inputs[i].shape));
    total.m = g.m;
    total.n += g.n;
  }
  return tiling_for(total.m, total.n, query.device);
}

Status group_compute(const ops::CpuComputeContext& ctx) {
  const size_t n_weights = ctx.num_inputs() - 1;
  if (ctx.num_inputs() < 2 || ctx.launch().outputs.size() != n_weights) {
    return invalid_argument("MatMulQGroup needs A, one W per output ({} inputs, {} outputs)", ctx.num_inputs(),
                            ctx.launch().outputs.size());
  }
  const ops::TensorRef& a = ctx.input(0);
  if (a.dtype != DType::kF32) return invalid_argument("MatMulQGroup: A must be f32, got {}", a.dtype);
  const DType w_type = ctx.input(1).dtype;
  std::vector<QuantMatMulOutput> outputs(n_weights);
  QuantGeometry g;
  for (size_t o = 0; o < n_weights; ++o) {
    const ops::TensorRef& w = ctx.input(o + 1);
    const ops::TensorRef& y = ctx.output(o);
    if (w.dtype != w_type) return invalid_argument("MatMulQGroup: W {} is {}, W 0 is {}", o, w.dtype, w_type);
    if (y.dtype != DType::kF32) return invalid_argument("MatMulQGroup: Y {} must be f32, got {}", o, y.dtype);
    HXRT_ASSIGN_OR_RETURN(g, quant_geometry(a.shape, w.shape));
    if (y.num_elements() != g.m * g.n) {
      return invalid_argument("MatMulQGroup: output {} {} does not hold {} x {}", o, y.shape, g.m, g.n);
    }
    HXRT_ASSIGN_OR_RETURN(const uint64_t w_bytes, storage_bytes(w.dtype, static_cast<uint64_t>(g.n * g.k)));
    if (w.view.size < w_bytes) {
      return invalid_argument("MatMulQGroup: W {} {} {} needs {} bytes, buffer holds {}", o, w.dtype, w.shape, w_bytes,
                              w.view.size);
    }
    outputs[o] = {.w = w.data(), .n = g.n, .bias = nullptr, .y = y.data<float>()};
  }
  QuantMatMulTiles tiles;
  tiles.tile_m = ctx.tiling().get("tile_m", 32);
  tiles.tile_n = ctx.tiling().get("tile_n", 64);
  return quant_matmul_group(w_type, a.data<float>(), g.m, g.k, outputs, tiles, quant_best_isa(), &ctx.pool());
}

// MatMulQ and MatMulQGroup: the same kernel family, device and weight formats.
ops::KernelDef quant_kernel_def(std::string op_type) {
  ops::KernelDef def;
  def.name = op_type;
  def.op_type = std::move(op_type);
  def.domain = "hxrt";
  def.device = hal::DeviceKind::kCpu;
  def.priority = 10;
  return def;
}

}  // namespace

Status register_quant_matmul(ops::KernelRegistry& registry) {
  const std::vector<DType>& weight_types = matmulq_weight_types();
  ops::KernelDef def = quant_kernel_def("MatMulQ");
  def.input_dtypes = {{DType::kF32}, weight_types, {DType::kF32}};
  def.description = fmt::format("q8 activations × GGUF blocks, integer dot products ({}), batch invariant",
                                quant_isa_name(quant_best_isa()));
  def.tiling = quant_tiling;
  def.launch = ops::cpu_launch("MatMulQ", quant_compute);
  HXRT_RETURN_IF_ERROR(registry.add(std::move(def)));

  ops::KernelDef group = quant_kernel_def("MatMulQGroup");
  group.input_dtypes = {{DType::kF32}};
  for (int i = 0; i < kMaxGroupWeights; ++i) group.input_dtypes.push_back(weight_types);
  group.description = fmt::format("MatMulQ of several weights on one quantized activation, one parallel loop ({})",
                                  quant_isa_name(quant_best_isa()));
  group.tiling = group_tiling;
  group.launch = ops::cpu_launch("MatMulQGroup", group_compute);
  return registry.add(std::move(group));
}

}  // namespace hxrt::kernels::cpu
