// CPU kernels of the LLM ops (docs/ops.md, "LLM ops"): GatherRows and PagedAttention.
//
// PagedAttention works per (sequence, query head), one task each, over the positions each token sees (0..p, or the
// last `window` of them on a sliding-window layer), reading the cached keys and values where they lie
// (an f16 cache is widened eight values at a time inside the dot product and the accumulation, never copied). Each
// token's output is a fixed sequence of float operations over its own sequence's cache — dot products with eight
// partial sums combined in a fixed order, a max-subtracted softmax summed left to right, V accumulated left to
// right — so it does not depend on which other sequences or tokens share the launch (Note [Batch invariance] in
// quant_matmul.h): prefill, decode and batched decode agree bit for bit.

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "hxrt/base/quant_types.h"
#include "hxrt/base/float16.h"
#include "hxrt/ops/params/llm.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/cpu/registration.h"
#include "kernels/cpu/vector_exp.h"

namespace hxrt::kernels::cpu {
namespace {

int64_t index_at(const ops::TensorRef& t, int64_t i) {
  return t.dtype == DType::kI64 ? t.data<const int64_t>()[i] : static_cast<int64_t>(t.data<const int32_t>()[i]);
}

Status compute_gather_rows(const ops::CpuComputeContext& ctx) {
  const ops::TensorRef& data = ctx.input(0);
  const ops::TensorRef& indices = ctx.input(1);
  const ops::TensorRef& out = ctx.output(0);
  const int64_t n_rows = data.shape.dim(0);
  const int64_t row_size = data.shape.dim(1);
  HXRT_ASSIGN_OR_RETURN(const uint64_t row_bytes, storage_bytes(data.dtype, static_cast<uint64_t>(row_size)));
  const int64_t n = indices.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t row = index_at(indices, i);
    if (row < 0 || row >= n_rows) {
      return invalid_argument("GatherRows: indices[{}] = {} is outside the table's {} rows", i, row, n_rows);
    }
  }
  const auto* base = data.data<const std::byte>();
  float* y = out.data<float>();
  Status failure = ok_status();
  std::mutex failure_mutex;
  ctx.pool().parallel_for(n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const auto row = static_cast<uint64_t>(index_at(indices, i));
      Status s = dequantize_row(data.dtype, base + row * row_bytes, row_size, y + i * row_size);
      if (!s.ok()) {
        std::lock_guard lock(failure_mutex);
        if (failure.ok()) failure = std::move(s);
        return;
      }
    }
  });
  return failure;
}

// The attention's inner loops: dot products with eight partial sums combined in a fixed order, and y += p·v, over
// f32 rows or f16 rows widened exactly on the fly (bit-identical to widening them first). The AVX2 versions keep
// the same order per lane; the ISA is chosen once per process, so every launch (and every batch composition) runs
// the same instructions.
inline float widen(float x) {
  return x;
}
inline float widen(uint16_t h) {
  return f16_to_f32(h);
}

// ((p0 + p1) + (p2 + p3)) + ((p4 + p5) + (p6 + p7)): the one reduction order of every dot product here.
inline float reduce8(const float* p) {
  return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
}

template <typename T>
float dot_scalar(const float* a, const T* b, int64_t n) {
  float partial[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) partial[j] += a[i + j] * widen(b[i + j]);
  }
  for (; i < n; ++i) partial[i % 8] += a[i] * widen(b[i]);
  return reduce8(partial);
}

template <typename T>
void axpy_scalar(float p, const T* x, float* y, int64_t n) {
  for (int64_t d = 0; d < n; ++d) y[d] += p * widen(x[d]);
}

__attribute__((target("avx2,fma,f16c"))) inline __m256 load8(const float* p) {
  return _mm256_loadu_ps(p);
}
__attribute__((target("avx2,fma,f16c"))) inline __m256 load8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

template <typename T>
__attribute__((target("avx2,fma,f16c"))) float dot_avx2(const float* a, const T* b, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), load8(b + i), acc);
  alignas(32) float partial[8];
  _mm256_store_ps(partial, acc);
  for (; i < n; ++i) partial[i % 8] += a[i] * widen(b[i]);
  return reduce8(partial);
}

template <typename T>
__attribute__((target("avx2,fma,f16c"))) void axpy_avx2(float p, const T* x, float* y, int64_t n) {
  const __m256 pv = _mm256_set1_ps(p);
  int64_t d = 0;
  for (; d + 8 <= n; d += 8) _mm256_storeu_ps(y + d, _mm256_fmadd_ps(pv, load8(x + d), _mm256_loadu_ps(y + d)));
  for (; d < n; ++d) y[d] += p * widen(x[d]);
}

// Note [Score softcap]: softcap · tanh(score / softcap), written with exp as softcap · (1 - 2 / (exp(2x) + 1)) so that
// the JIT kernels, whose hx_exp is glibc's expf, give the same bits (tanh has no such twin there). The
// cancellation near 0 costs at most softcap · 2^-24 absolute, far below the scores' own rounding.
inline float capped(float score, float softcap) {
  if (softcap <= 0.0f) return score;
  const float e = std::exp(2.0f * (score / softcap));
  return softcap * (1.0f - 2.0f / (e + 1.0f));
}

// Note [Attention fast path]
// One query against an f16 cache, head_dim = 8·kVecs: the same float operations as the generic dot_f16 / softmax /
// axpy_f16 sequence in compute_paged_attention, key for key and lane for lane, so the results are bit-identical
// (PagedAttentionTest.TheFastPathIsBitIdenticalToTheGenericLoops); what changes is that four keys' dot products run
// side by side (their eight-lane sums reduced together by two hadds, which pair the lanes exactly as
// dot_avx2's reduction does), the probabilities are rounded to f16 eight at a time, and y stays in registers
// over the keys. HXRT_GENERIC_ATTENTION=1 runs the generic loops instead.
//
// Note [Widened prefill rows]: a prefill chunk's queries all read the same keys and values, and widening an f16 row
// costs as much as the multiply-adds that use it. So a task of several queries of one sequence first widens the
// rows they see, once, into contiguous f32 rows (exactly: f16 → f32 is lossless), and the fast path reads those;
// the float operations, and so the bits, are those of the f16 path. A decode (one query per sequence) reads the
// cache in place.

// Where the fast path finds position j's key and value: f16 rows in the paged cache, or widened f32 rows.
struct HalfRows {
  const std::byte* kc;
  const std::byte* vc;
  const int64_t* rows;  // byte offset of each position's (slot, kv head) row
  const uint16_t* key(int64_t j) const { return reinterpret_cast<const uint16_t*>(kc + rows[j]); }
  const uint16_t* value(int64_t j) const { return reinterpret_cast<const uint16_t*>(vc + rows[j]); }
};
struct FloatRows {
  const float* k;
  const float* v;
  int64_t dim;
  const float* key(int64_t j) const { return k + j * dim; }
  const float* value(int64_t j) const { return v + j * dim; }
};

// y[offset, offset + 8·kN) = Σ_j p[j] · v_j[offset, offset + 8·kN), j = 0, 1, ... in order.
template <int kN, typename Rows>
__attribute__((target("avx2,fma,f16c"))) inline void accumulate_values(const float* p, const Rows& rows,
                                                                      int64_t n_visible, int64_t offset, float* y) {
  __m256 acc[kN];
#pragma GCC unroll 8
  for (int i = 0; i < kN; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t j = 0; j < n_visible; ++j) {
    const __m256 pj = _mm256_broadcast_ss(p + j);
    const auto* v = rows.value(j) + offset;
#pragma GCC unroll 8
    for (int i = 0; i < kN; ++i) acc[i] = _mm256_fmadd_ps(pj, load8(v + 8 * i), acc[i]);
  }
#pragma GCC unroll 8
  for (int i = 0; i < kN; ++i) _mm256_storeu_ps(y + offset + 8 * i, acc[i]);
}

// The softmax of one query's scores (their maximum given) at f16 precision, then y = Σ_j p[j] · v_j: the generic
// loop's operations (exp eight at a time with std::exp's bits, Note [Exact vector exp]; the sum left to right).
template <int kVecs, typename Rows>
__attribute__((target("avx2,fma,f16c"))) void softmax_values_avx2(float* scores, float max_score, const Rows& rows,
                                                                  int64_t n_visible, float* y) {
  const __m256 max8 = _mm256_set1_ps(max_score);
  int64_t j = 0;
  for (; j + 8 <= n_visible; j += 8) {
    _mm256_storeu_ps(scores + j, exp_exact_avx2(_mm256_sub_ps(_mm256_loadu_ps(scores + j), max8)));
  }
  for (; j < n_visible; ++j) scores[j] = std::exp(scores[j] - max_score);
  float sum = 0.0f;
  for (j = 0; j < n_visible; ++j) sum += scores[j];
  const float inv = 1.0f / sum;
  // The probabilities at f16 precision, eight at a time (VCVTPS2PH rounds to nearest even, as f32_to_f16 does).
  const __m256 inv8 = _mm256_set1_ps(inv);
  for (j = 0; j + 8 <= n_visible; j += 8) {
    const __m256 p = _mm256_mul_ps(_mm256_loadu_ps(scores + j), inv8);
    _mm256_storeu_ps(scores + j, _mm256_cvtph_ps(_mm256_cvtps_ph(p, _MM_FROUND_TO_NEAREST_INT)));
  }
  for (; j < n_visible; ++j) scores[j] = f16_to_f32(f32_to_f16(scores[j] * inv));
  // y += p·v, 64 values of y at a time in registers (every value still sums its terms in position order).
  for (int c = 0; c + 8 <= kVecs; c += 8) accumulate_values<8>(scores, rows, n_visible, 8 * c, y);
  if constexpr (kVecs % 8 != 0) accumulate_values<kVecs % 8>(scores, rows, n_visible, 8 * (kVecs / 8 * 8), y);
}

// Four dot products' eight-lane sums reduced together by two hadds, which pair the lanes exactly as dot_avx2's
// reduction does: lane i of the result is accumulator i's dot product.
__attribute__((target("avx2,fma,f16c"))) inline __m128 reduce4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  const __m256 pairs = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  return _mm_add_ps(_mm256_castps256_ps128(pairs), _mm256_extractf128_ps(pairs, 1));
}

// Scores scaled and capped (Note [Score softcap]), four at a time.
__attribute__((target("avx2,fma,f16c"))) inline __m128 scaled_scores(__m128 dots, float scale, float softcap) {
  __m128 scaled = _mm_mul_ps(dots, _mm_set1_ps(scale));
  if (softcap > 0.0f) {
    alignas(16) float d[4];
    _mm_store_ps(d, scaled);
    for (float& x : d) x = capped(x, softcap);
    scaled = _mm_load_ps(d);
  }
  return scaled;
}

template <int kVecs, typename Rows>
__attribute__((target("avx2,fma,f16c"))) void attend_avx2(const float* q, const Rows& rows, int64_t n_visible,
                                                          float scale, float softcap, float* scores, float* y) {
  constexpr int64_t kDim = 8 * kVecs;
  __m256 qv[kVecs];
  for (int i = 0; i < kVecs; ++i) qv[i] = _mm256_loadu_ps(q + 8 * i);
  const auto key = [&](int64_t j) { return rows.key(j); };
  float max_score = -INFINITY;
  __m128 max4 = _mm_set1_ps(-INFINITY);
  int64_t j = 0;
  for (; j + 4 <= n_visible; j += 4) {
    const auto* k0 = key(j);
    const auto* k1 = key(j + 1);
    const auto* k2 = key(j + 2);
    const auto* k3 = key(j + 3);
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int i = 0; i < kVecs; ++i) {
      a0 = _mm256_fmadd_ps(qv[i], load8(k0 + 8 * i), a0);
      a1 = _mm256_fmadd_ps(qv[i], load8(k1 + 8 * i), a1);
      a2 = _mm256_fmadd_ps(qv[i], load8(k2 + 8 * i), a2);
      a3 = _mm256_fmadd_ps(qv[i], load8(k3 + 8 * i), a3);
    }
    const __m128 scaled = scaled_scores(reduce4(a0, a1, a2, a3), scale, softcap);
    _mm_storeu_ps(scores + j, scaled);
    max4 = _mm_max_ps(max4, scaled);
  }
  // The maximum only offsets the exponents (a NaN score makes every output NaN whichever way it is taken), so the
  // lanes' maxima give the generic loop's exps.
  alignas(16) float lanes[4];
  _mm_store_ps(lanes, max4);
  for (float x : lanes) max_score = std::max(max_score, x);
  for (; j < n_visible; ++j) {
    scores[j] = capped(dot_avx2(q, key(j), kDim) * scale, softcap);
    max_score = std::max(max_score, scores[j]);
  }
  softmax_values_avx2<kVecs>(scores, max_score, rows, n_visible, y);
}

// Note [Wide grouped values]: on a CPU with AVX-512 the grouped heads' softmax and values (Note [Grouped heads]) run
// together instead of head by head: the heads' exponentials as before, their sums in one loop (independent chains,
// each still left to right), and y_h += p_h[j] · v_j for all the heads in one pass over the value rows, sixteen
// dimensions to a register (each row read once for the group, where the eight-wide loop read it once per head).
// Every lane is the same chain of fused multiply-adds over j in order, so the bits are softmax_values_avx2's.
#define HXRT_ATTENTION512_TARGET __attribute__((target("avx512f,avx512vl,avx2,fma,f16c")))

HXRT_ATTENTION512_TARGET inline __m512 load16(const float* p) {
  return _mm512_loadu_ps(p);
}
// (GCC 12's false -Wmaybe-uninitialized inside the conversion intrinsic is silenced as in quant_simd.h.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
HXRT_ATTENTION512_TARGET inline __m512 load16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
#pragma GCC diagnostic pop

// y_h[offset, offset + 16·kZ) = Σ_j p_h[j] · v_j[offset, offset + 16·kZ) for the kHeads heads, j = 0, 1, ... in order.
template <int kZ, int kHeads, typename Rows>
HXRT_ATTENTION512_TARGET inline void accumulate_values_heads(const float* p, int64_t stride, const Rows& rows,
                                                             int64_t n_visible, int64_t offset, float* const* y) {
  __m512 acc[kHeads][kZ];
#pragma GCC unroll 4
  for (int h = 0; h < kHeads; ++h) {
#pragma GCC unroll 4
    for (int z = 0; z < kZ; ++z) acc[h][z] = _mm512_setzero_ps();
  }
  for (int64_t j = 0; j < n_visible; ++j) {
    const auto* v = rows.value(j) + offset;
    __m512 vz[kZ];
#pragma GCC unroll 4
    for (int z = 0; z < kZ; ++z) vz[z] = load16(v + 16 * z);
#pragma GCC unroll 4
    for (int h = 0; h < kHeads; ++h) {
      const __m512 pj = _mm512_set1_ps(p[h * stride + j]);
#pragma GCC unroll 4
      for (int z = 0; z < kZ; ++z) acc[h][z] = _mm512_fmadd_ps(pj, vz[z], acc[h][z]);
    }
  }
#pragma GCC unroll 4
  for (int h = 0; h < kHeads; ++h) {
#pragma GCC unroll 4
    for (int z = 0; z < kZ; ++z) _mm512_storeu_ps(y[h] + offset + 16 * z, acc[h][z]);
  }
}

// softmax_values_avx2 for kHeads heads at once (their scores at scores + h · n_visible), Note [Wide grouped values].
template <int kVecs, int kHeads, typename Rows>
HXRT_ATTENTION512_TARGET __attribute__((noinline)) void softmax_values_heads512(float* scores,
                                                                               const float* max_score,
                                                                               const Rows& rows, int64_t n_visible,
                                                                               float* const* y) {
  static_assert(kVecs % 2 == 0, "head_dim a multiple of 16");
  for (int h = 0; h < kHeads; ++h) {
    float* s = scores + h * n_visible;
    const __m256 max8 = _mm256_set1_ps(max_score[h]);
    int64_t j = 0;
    for (; j + 8 <= n_visible; j += 8) {
      _mm256_storeu_ps(s + j, exp_exact_avx2(_mm256_sub_ps(_mm256_loadu_ps(s + j), max8)));
    }
    for (; j < n_visible; ++j) s[j] = std::exp(s[j] - max_score[h]);
  }
  float sum[kHeads] = {};
  for (int64_t j = 0; j < n_visible; ++j) {
#pragma GCC unroll 4
    for (int h = 0; h < kHeads; ++h) sum[h] += scores[h * n_visible + j];
  }
  for (int h = 0; h < kHeads; ++h) {
    float* s = scores + h * n_visible;
    const float inv = 1.0f / sum[h];
    const __m256 inv8 = _mm256_set1_ps(inv);
    int64_t j = 0;
    for (; j + 8 <= n_visible; j += 8) {
      const __m256 p = _mm256_mul_ps(_mm256_loadu_ps(s + j), inv8);
      _mm256_storeu_ps(s + j, _mm256_cvtph_ps(_mm256_cvtps_ph(p, _MM_FROUND_TO_NEAREST_INT)));
    }
    for (; j < n_visible; ++j) s[j] = f16_to_f32(f32_to_f16(s[j] * inv));
  }
  constexpr int kZmm = kVecs / 2;  // sixteen dimensions each
  for (int z = 0; z + 4 <= kZmm; z += 4) accumulate_values_heads<4, kHeads>(scores, n_visible, rows, n_visible, 16 * z, y);
  if constexpr (kZmm % 4 != 0) {
    accumulate_values_heads<kZmm % 4, kHeads>(scores, n_visible, rows, n_visible, 16 * (kZmm / 4 * 4), y);
  }
}

// HXRT_NARROW_ATTENTION=1 keeps the eight-wide values loop (read at every launch: tests compare the two bit for bit).
bool wide_grouped_values() {
  static const bool supported = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl");
  const char* env = std::getenv("HXRT_NARROW_ATTENTION");
  return supported && !(env != nullptr && env[0] == '1');
}

// Note [Grouped heads]: the query heads of one KV head read the same keys and values, so a task attends up to four
// of them for the same token together: their scores come from one pass over the keys, kKeys keys at a time, each
// key row loaded once for all the heads (kHeads × kKeys independent accumulators: eight chains of fused multiply-adds
// where one head alone keeps four busy). Every (head, key) dot product is still one eight-lane chain over the
// dimensions in order, reduced as dot_avx2 reduces it, and each head's softmax and values are attend_avx2's, so the
// results are bit-identical to attending the heads one by one.
template <int kVecs, int kHeads, typename Rows, bool kWide>
__attribute__((target("avx2,fma,f16c"))) void attend_heads_avx2(const float* q, const Rows& rows, int64_t n_visible,
                                                                float scale, float softcap, float* scores,
                                                                float* const* y) {
  constexpr int64_t kDim = 8 * kVecs;
  constexpr int kKeys = kHeads == 2 ? 4 : 2;  // keys per pass: eight accumulators (six for three heads)
  constexpr int kAcc = kHeads * kKeys;
  static_assert(kAcc % 2 == 0 && kAcc <= 8);
  float max_score[kHeads];
  for (float& m : max_score) m = -INFINITY;
  int64_t j = 0;
  for (; j + kKeys <= n_visible; j += kKeys) {
    decltype(rows.key(0)) k[kKeys];
#pragma GCC unroll 4
    for (int c = 0; c < kKeys; ++c) k[c] = rows.key(j + c);
    __m256 acc[8];
#pragma GCC unroll 8
    for (int a = 0; a < 8; ++a) acc[a] = _mm256_setzero_ps();
    for (int i = 0; i < kVecs; ++i) {
      __m256 kv[kKeys];
#pragma GCC unroll 4
      for (int c = 0; c < kKeys; ++c) kv[c] = load8(k[c] + 8 * i);
#pragma GCC unroll 4
      for (int h = 0; h < kHeads; ++h) {
        const __m256 qv = _mm256_loadu_ps(q + h * kDim + 8 * i);
#pragma GCC unroll 4
        for (int c = 0; c < kKeys; ++c) acc[h * kKeys + c] = _mm256_fmadd_ps(qv, kv[c], acc[h * kKeys + c]);
      }
    }
    // Accumulator h · kKeys + c is (head h, key j + c); four at a time through reduce4.
    alignas(16) float dots[8];
    _mm_store_ps(dots, scaled_scores(reduce4(acc[0], acc[1], acc[2], acc[3]), scale, softcap));
    if constexpr (kAcc > 4) _mm_store_ps(dots + 4, scaled_scores(reduce4(acc[4], acc[5], acc[6], acc[7]), scale,
                                                                   softcap));
#pragma GCC unroll 4
    for (int h = 0; h < kHeads; ++h) {
#pragma GCC unroll 4
      for (int c = 0; c < kKeys; ++c) {
        const float x = dots[h * kKeys + c];
        scores[h * n_visible + j + c] = x;
        max_score[h] = std::max(max_score[h], x);
      }
    }
  }
  for (; j < n_visible; ++j) {
    for (int h = 0; h < kHeads; ++h) {
      const float x = capped(dot_avx2(q + h * kDim, rows.key(j), kDim) * scale, softcap);
      scores[h * n_visible + j] = x;
      max_score[h] = std::max(max_score[h], x);
    }
  }
  if constexpr (kWide) {
    softmax_values_heads512<kVecs, kHeads>(scores, max_score, rows, n_visible, y);  // Note [Wide grouped values]
    return;
  }
  for (int h = 0; h < kHeads; ++h) {
    softmax_values_avx2<kVecs>(scores + h * n_visible, max_score[h], rows, n_visible, y[h]);
  }
}

// HXRT_GENERIC_ATTENTION=1 turns the fast path off (read at every launch: tests compare the two bit for bit).
bool generic_attention_only() {
  const char* env = std::getenv("HXRT_GENERIC_ATTENTION");
  return env != nullptr && env[0] == '1';
}

template <typename Rows>
using AttendFn = void (*)(const float*, const Rows&, int64_t, float, float, float*, float*);

// The fast path for this head size on this CPU, or null (then the generic loops run).
template <typename Rows>
AttendFn<Rows> attend_fast(int64_t head_dim) {
  static const bool supported =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  if (!supported) return nullptr;
  // Every multiple of 8 up to 128, then the larger head sizes models use (Gemma's 256).
  static constexpr AttendFn<Rows> kByVecs[] = {
      &attend_avx2<1, Rows>,  &attend_avx2<2, Rows>,  &attend_avx2<3, Rows>,  &attend_avx2<4, Rows>,
      &attend_avx2<5, Rows>,  &attend_avx2<6, Rows>,  &attend_avx2<7, Rows>,  &attend_avx2<8, Rows>,
      &attend_avx2<9, Rows>,  &attend_avx2<10, Rows>, &attend_avx2<11, Rows>, &attend_avx2<12, Rows>,
      &attend_avx2<13, Rows>, &attend_avx2<14, Rows>, &attend_avx2<15, Rows>, &attend_avx2<16, Rows>};
  if (head_dim == 192) return &attend_avx2<24, Rows>;
  if (head_dim == 256) return &attend_avx2<32, Rows>;
  if (head_dim % 8 != 0 || head_dim < 8 || head_dim > 128) return nullptr;
  return kByVecs[head_dim / 8 - 1];
}

template <typename Rows>
using AttendHeadsFn = void (*)(const float*, const Rows&, int64_t, float, float, float*, float* const*);

// The grouped fast path (Note [Grouped heads]) for `heads` (2..4) query heads of this size, or null (the heads are
// then attended one by one): the head sizes models use.
template <typename Rows, bool kWide>
AttendHeadsFn<Rows> attend_heads_table(int64_t head_dim, int heads) {
  using Table = std::array<AttendHeadsFn<Rows>, 3>;
  static constexpr Table k64 = {&attend_heads_avx2<8, 2, Rows, kWide>, &attend_heads_avx2<8, 3, Rows, kWide>,
                                &attend_heads_avx2<8, 4, Rows, kWide>};
  static constexpr Table k80 = {&attend_heads_avx2<10, 2, Rows, kWide>, &attend_heads_avx2<10, 3, Rows, kWide>,
                                &attend_heads_avx2<10, 4, Rows, kWide>};
  static constexpr Table k96 = {&attend_heads_avx2<12, 2, Rows, kWide>, &attend_heads_avx2<12, 3, Rows, kWide>,
                                &attend_heads_avx2<12, 4, Rows, kWide>};
  static constexpr Table k128 = {&attend_heads_avx2<16, 2, Rows, kWide>, &attend_heads_avx2<16, 3, Rows, kWide>,
                                 &attend_heads_avx2<16, 4, Rows, kWide>};
  static constexpr Table k256 = {&attend_heads_avx2<32, 2, Rows, kWide>, &attend_heads_avx2<32, 3, Rows, kWide>,
                                 &attend_heads_avx2<32, 4, Rows, kWide>};
  const auto at = static_cast<size_t>(heads - 2);
  switch (head_dim) {
    case 64: return k64[at];
    case 80: return k80[at];
    case 96: return k96[at];
    case 128: return k128[at];
    case 256: return k256[at];
    default: return nullptr;
  }
}

// The grouped fast path (Note [Grouped heads]) for `heads` (2..4) query heads of this size, or null (the heads are
// then attended one by one): the head sizes models use; `wide`: with the AVX-512 values loop (Note [Wide grouped
// values]; the caller checks wide_grouped_values()).
template <typename Rows>
AttendHeadsFn<Rows> attend_heads_fast(int64_t head_dim, int heads, bool wide) {
  if (attend_fast<Rows>(head_dim) == nullptr || heads < 2 || heads > 4) return nullptr;
  return wide ? attend_heads_table<Rows, true>(head_dim, heads) : attend_heads_table<Rows, false>(head_dim, heads);
}

// `rows` f16 rows (offsets[j]: row j's byte offset in `base`; dim a multiple of 8) widened into out[rows][dim].
__attribute__((target("avx2,fma,f16c"))) void widen_rows(const std::byte* base, const int64_t* offsets, int64_t rows,
                                                    int64_t dim, float* out) {
  for (int64_t j = 0; j < rows; ++j) {
    const auto* src = reinterpret_cast<const uint16_t*>(base + offsets[j]);
    for (int64_t d = 0; d < dim; d += 8) _mm256_storeu_ps(out + j * dim + d, load8(src + d));
  }
}

struct AttentionIsa {
  float (*dot)(const float*, const float*, int64_t);
  void (*axpy)(float, const float*, float*, int64_t);
  float (*dot_f16)(const float*, const uint16_t*, int64_t);
  void (*axpy_f16)(float, const uint16_t*, float*, int64_t);
};

const AttentionIsa& attention_isa() {
  static const AttentionIsa isa =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")
          ? AttentionIsa{dot_avx2<float>, axpy_avx2<float>, dot_avx2<uint16_t>, axpy_avx2<uint16_t>}
          : AttentionIsa{dot_scalar<float>, axpy_scalar<float>, dot_scalar<uint16_t>, axpy_scalar<uint16_t>};
  return isa;
}

// f16 rows eight values at a time: VCVTPS2PH rounds to nearest even as f32_to_f16 does (a NaN stays a NaN, with
// its payload's high bits where f32_to_f16 writes the canonical one).
__attribute__((target("avx2,f16c"))) void store_f16_avx2(const float* src, int64_t n, uint16_t* dst) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) dst[i] = f32_to_f16(src[i]);
}

// y[i] = f16_to_f32(f32_to_f16(x[i])) (a NaN stays a NaN, as in store_f16_avx2).
__attribute__((target("avx2,f16c"))) void round_to_half_avx2(const float* x, int64_t n, float* y) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT)));
  }
  for (; i < n; ++i) y[i] = f16_to_f32(f32_to_f16(x[i]));
}

void round_to_half(const float* x, int64_t n, float* y) {
  static const bool f16c = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  if (f16c) {
    round_to_half_avx2(x, n, y);
    return;
  }
  for (int64_t i = 0; i < n; ++i) y[i] = f16_to_f32(f32_to_f16(x[i]));
}

void store_row(DType dtype, const float* src, int64_t n, std::byte* dst) {
  if (dtype == DType::kF32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  auto* p = reinterpret_cast<uint16_t*>(dst);
  static const bool f16c = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  if (f16c) {
    store_f16_avx2(src, n, p);
    return;
  }
  for (int64_t i = 0; i < n; ++i) p[i] = f32_to_f16(src[i]);
}

// Shapes: q [T, H, D], k/v [T, G, D], caches [L, NB, BS, G, D], block_tables [S, MB], token_seq/positions [T].
Status compute_paged_attention(const ops::CpuComputeContext& ctx) {
  const auto& params = ctx.params<ops::PagedAttentionParams>();
  const ops::TensorRef& q = ctx.input(0);
  const ops::TensorRef& k = ctx.input(1);
  const ops::TensorRef& v = ctx.input(2);
  const ops::TensorRef& k_cache = ctx.input(3);
  const ops::TensorRef& v_cache = ctx.input(4);
  const ops::TensorRef& tables = ctx.input(5);
  const ops::TensorRef& token_seq = ctx.input(6);
  const ops::TensorRef& positions = ctx.input(7);
  const ops::TensorRef& out = ctx.output(0);
  const int64_t n_tokens = q.shape.dim(0), n_heads = q.shape.dim(1), head_dim = q.shape.dim(2);
  const int64_t n_kv = k.shape.dim(1);
  const int64_t n_layers = k_cache.shape.dim(0), n_blocks = k_cache.shape.dim(1), block_size = k_cache.shape.dim(2);
  const int64_t n_seqs = tables.shape.dim(0), max_blocks = tables.shape.dim(1);
  if (n_kv <= 0 || n_heads % n_kv != 0) {
    return invalid_argument("PagedAttention: n_heads {} is not a multiple of n_kv_heads {}", n_heads, n_kv);
  }
  if (params.layer >= n_layers) {
    return invalid_argument("PagedAttention: layer {} is outside the cache's {} layers", params.layer, n_layers);
  }
  const int32_t* table = tables.data<const int32_t>();
  const int32_t* seq_of = token_seq.data<const int32_t>();
  const int32_t* pos_of = positions.data<const int32_t>();
  // Validate every index before touching memory: a bad binding is an error naming the token, never a stray write.
  std::vector<int64_t> context(static_cast<size_t>(n_seqs), 0);  // (n_seqs) tokens of context each sequence needs
  // (n_seqs) the first position some token of the sequence sees: blocks before it (given back by a sliding-window
  // cache, Note [Sliding-window cache] in llm/engine.cc) are never read, so never checked.
  std::vector<int64_t> first_seen(static_cast<size_t>(n_seqs), INT64_MAX);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int64_t s = seq_of[t], p = pos_of[t];
    if (s < 0 || s >= n_seqs) return invalid_argument("PagedAttention: token_seq[{}] = {} is outside [0, {})", t, s, n_seqs);
    if (p < 0 || p / block_size >= max_blocks) {
      return invalid_argument("PagedAttention: positions[{}] = {} does not fit a block table of {} blocks of {}", t, p,
                              max_blocks, block_size);
    }
    context[static_cast<size_t>(s)] = std::max(context[static_cast<size_t>(s)], p + 1);
    const int64_t first = params.window > 0 ? std::max<int64_t>(0, p - params.window + 1) : 0;
    first_seen[static_cast<size_t>(s)] = std::min(first_seen[static_cast<size_t>(s)], first);
  }
  for (int64_t s = 0; s < n_seqs; ++s) {
    const int64_t used_blocks = (context[static_cast<size_t>(s)] + block_size - 1) / block_size;
    for (int64_t b = context[static_cast<size_t>(s)] > 0 ? first_seen[static_cast<size_t>(s)] / block_size : 0;
         b < used_blocks; ++b) {
      const int32_t block = table[s * max_blocks + b];
      if (block < 0 || block >= n_blocks) {
        return invalid_argument("PagedAttention: block_tables[{}][{}] = {} is outside the cache's {} blocks", s, b,
                                block, n_blocks);
      }
    }
  }
  const DType cache_type = k_cache.dtype;
  const auto elem = static_cast<int64_t>(dtype_info(cache_type).block_bytes);
  const int64_t row_bytes = head_dim * elem;                        // one (slot, kv head) row
  const int64_t slot_bytes = n_kv * row_bytes;
  const int64_t layer_bytes = n_blocks * block_size * slot_bytes;
  std::byte* kc = k_cache.data<std::byte>() + params.layer * layer_bytes;
  std::byte* vc = v_cache.data<std::byte>() + params.layer * layer_bytes;
  auto slot_of = [&](int64_t s, int64_t p) {
    return static_cast<int64_t>(table[s * max_blocks + p / block_size]) * block_size + p % block_size;
  };

  // 1. Write this launch's keys and values into their slots.
  const float* pk = k.data<const float>();
  const float* pv = v.data<const float>();
  ctx.pool().parallel_for(n_tokens, 16, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t slot = slot_of(seq_of[t], pos_of[t]);
      for (int64_t g = 0; g < n_kv; ++g) {
        store_row(cache_type, pk + (t * n_kv + g) * head_dim, head_dim, kc + slot * slot_bytes + g * row_bytes);
        store_row(cache_type, pv + (t * n_kv + g) * head_dim, head_dim, vc + slot * slot_bytes + g * row_bytes);
      }
    }
  });

  // 2. Attend, one task per (chunk of a sequence's tokens, batch of query heads of one KV head).
  std::vector<std::vector<int64_t>> tokens_of(static_cast<size_t>(n_seqs));  // (n_seqs) token indices
  for (int64_t t = 0; t < n_tokens; ++t) tokens_of[static_cast<size_t>(seq_of[t])].push_back(t);
  struct Chunk {
    int64_t s;
    size_t begin;  // tokens_of[s][begin, end)
    size_t end;
  };
  constexpr size_t kChunkTokens = 16;  // queries of one task (Note [Widened prefill rows])
  std::vector<Chunk> chunks;
  for (int64_t s = 0; s < n_seqs; ++s) {
    const size_t count = tokens_of[static_cast<size_t>(s)].size();
    for (size_t i = 0; i < count; i += kChunkTokens) chunks.push_back({s, i, std::min(count, i + kChunkTokens)});
  }
  const int64_t group = n_heads / n_kv;
  const float scale = params.scale != 0.0f ? params.scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
  const float* pq = q.data<const float>();
  float* py = out.data<float>();
  const AttentionIsa& isa = attention_isa();
  // Note [Half-precision products]: with an f16 cache the products are those of a half-precision GEMM, as in
  // llama.cpp: the query enters q·k, and the probabilities enter p·v, rounded to f16; sums stay f32.
  const bool half_products = cache_type == DType::kF16;
  const bool fast_ok = half_products && !generic_attention_only();
  const AttendFn<HalfRows> fast_half = fast_ok ? attend_fast<HalfRows>(head_dim) : nullptr;
  const AttendFn<FloatRows> fast_float = fast_ok ? attend_fast<FloatRows>(head_dim) : nullptr;
  const bool wide_values = fast_ok && wide_grouped_values();
  // Heads per task (Note [Grouped heads]): up to four of a KV head's group, fewer when the tasks would not keep the
  // pool's threads busy (a decode step of one sequence on a model with one KV head).
  int64_t batch_heads = fast_float != nullptr ? std::min<int64_t>(group, 4) : 1;
  const auto chunk_count = static_cast<int64_t>(chunks.size());
  const auto tasks_for = [&](int64_t heads) { return chunk_count * n_kv * ((group + heads - 1) / heads); };
  while (batch_heads > 1 && tasks_for(batch_heads) < 2 * ctx.pool().num_threads()) batch_heads /= 2;
  const int64_t batches_per_group = (group + batch_heads - 1) / batch_heads;
  const int64_t n_tasks = tasks_for(batch_heads);
  const auto first_visible = [&](int64_t t) {
    // The visible positions [first, pos]: all of them, or the last `window` (a sliding-window layer).
    return params.window > 0 ? std::max<int64_t>(0, pos_of[t] - params.window + 1) : int64_t{0};
  };
  ctx.pool().parallel_for(n_tasks, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scores, query;  // (heads × ctx), (heads × head_dim)
    std::vector<int64_t> rows;         // (hi - lo) byte offset of each position's (slot, kv head) row
    std::vector<float> wide_k, wide_v; // (hi - lo, head_dim) the rows widened (Note [Widened prefill rows])
    for (int64_t task = begin; task < end; ++task) {
      const Chunk& chunk = chunks[static_cast<size_t>(task / (n_kv * batches_per_group))];
      const int64_t s = chunk.s;
      const int64_t g = (task / batches_per_group) % n_kv;
      const int64_t h0 = g * group + (task % batches_per_group) * batch_heads;
      const int64_t h1 = std::min(h0 + batch_heads, (g + 1) * group);
      const std::vector<int64_t>& tokens = tokens_of[static_cast<size_t>(s)];
      // The positions [lo, hi) some query of the chunk sees.
      int64_t lo = INT64_MAX;
      int64_t hi = 0;
      for (size_t i = chunk.begin; i < chunk.end; ++i) {
        lo = std::min(lo, first_visible(tokens[i]));
        hi = std::max<int64_t>(hi, pos_of[tokens[i]] + 1);
      }
      scores.resize(static_cast<size_t>((h1 - h0) * (hi - lo)));
      rows.resize(static_cast<size_t>(hi - lo));
      for (int64_t j = lo; j < hi;) {  // block by block: one table read per block
        const int64_t block_end = std::min(hi, (j / block_size + 1) * block_size);
        const int64_t at = slot_of(s, j) * slot_bytes + g * row_bytes;
        for (int64_t i = 0; i < block_end - j; ++i) rows[static_cast<size_t>(j - lo + i)] = at + i * slot_bytes;
        j = block_end;
      }
      const bool widened = fast_float != nullptr && chunk.end - chunk.begin > 1;
      if (widened) {
        wide_k.resize(static_cast<size_t>((hi - lo) * head_dim));
        wide_v.resize(static_cast<size_t>((hi - lo) * head_dim));
        widen_rows(kc, rows.data(), hi - lo, head_dim, wide_k.data());
        widen_rows(vc, rows.data(), hi - lo, head_dim, wide_v.data());
      }
      const int heads = static_cast<int>(h1 - h0);
      const AttendHeadsFn<FloatRows> grouped_float =
          widened ? attend_heads_fast<FloatRows>(head_dim, heads, wide_values) : nullptr;
      const AttendHeadsFn<HalfRows> grouped_half =
          fast_half != nullptr && !widened ? attend_heads_fast<HalfRows>(head_dim, heads, wide_values) : nullptr;
      for (size_t i = chunk.begin; i < chunk.end; ++i) {
        const int64_t t = tokens[i];
        const int64_t first = first_visible(t);
        const int64_t n_visible = pos_of[t] + 1 - first;
        const int64_t* visible = rows.data() + (first - lo);
        const FloatRows wide = widened ? FloatRows{wide_k.data() + (first - lo) * head_dim,
                                                   wide_v.data() + (first - lo) * head_dim, head_dim}
                                       : FloatRows{nullptr, nullptr, head_dim};
        if (half_products) {
          query.resize(static_cast<size_t>(heads * head_dim));
          round_to_half(pq + (t * n_heads + h0) * head_dim, heads * head_dim, query.data());
        }
        if (grouped_float != nullptr || grouped_half != nullptr) {
          float* y[4] = {};
          for (int j = 0; j < heads; ++j) y[j] = py + (t * n_heads + h0 + j) * head_dim;
          if (grouped_float != nullptr) {
            grouped_float(query.data(), wide, n_visible, scale, params.softcap, scores.data(), y);
          } else {
            grouped_half(query.data(), HalfRows{kc, vc, visible}, n_visible, scale, params.softcap, scores.data(), y);
          }
          continue;
        }
        for (int64_t h = h0; h < h1; ++h) {
          const float* qh = half_products ? query.data() + (h - h0) * head_dim : pq + (t * n_heads + h) * head_dim;
          float* yh = py + (t * n_heads + h) * head_dim;
          if (widened) {
            fast_float(qh, wide, n_visible, scale, params.softcap, scores.data(), yh);
            continue;
          }
          if (fast_half != nullptr) {
            fast_half(qh, HalfRows{kc, vc, visible}, n_visible, scale, params.softcap, scores.data(), yh);
            continue;
          }
          float max_score = -INFINITY;
          for (int64_t j = 0; j < n_visible; ++j) {
            const std::byte* key = kc + visible[j];
            const float score = half_products ? isa.dot_f16(qh, reinterpret_cast<const uint16_t*>(key), head_dim)
                                              : isa.dot(qh, reinterpret_cast<const float*>(key), head_dim);
            scores[static_cast<size_t>(j)] = capped(score * scale, params.softcap);
            max_score = std::max(max_score, scores[static_cast<size_t>(j)]);
          }
          float sum = 0.0f;
          for (int64_t j = 0; j < n_visible; ++j) {
            scores[static_cast<size_t>(j)] = std::exp(scores[static_cast<size_t>(j)] - max_score);
            sum += scores[static_cast<size_t>(j)];
          }
          const float inv = 1.0f / sum;
          std::fill(yh, yh + head_dim, 0.0f);
          for (int64_t j = 0; j < n_visible; ++j) {
            float p = scores[static_cast<size_t>(j)] * inv;
            const std::byte* value = vc + visible[j];
            if (half_products) {
              p = f16_to_f32(f32_to_f16(p));
              isa.axpy_f16(p, reinterpret_cast<const uint16_t*>(value), yh, head_dim);
            } else {
              isa.axpy(p, reinterpret_cast<const float*>(value), yh, head_dim);
            }
          }
        }
      }
    }
  });
  return ok_status();
}

}  // namespace

Status register_llm_ops(ops::KernelRegistry& registry) {
  ops::KernelDef gather_rows =
      cpu_kernel_def("GatherRows", "hxrt", "GatherRowsDequant",
                     "row lookup widening f32/f16/bf16 and every GGUF block type to f32 (ggml's arithmetic)");
  gather_rows.input_dtypes = {row_dequantizable_types(), {DType::kI32, DType::kI64}};
  gather_rows.launch = ops::cpu_launch(gather_rows.name, compute_gather_rows);
  HXRT_RETURN_IF_ERROR(registry.add(std::move(gather_rows)));

  ops::KernelDef attention =
      cpu_kernel_def("PagedAttention", "hxrt", "PagedAttentionF32",
                     "f32 math over an f16/f32 paged cache, one task per (sequence, kv head), batch invariant");
  attention.input_dtypes = {{DType::kF32}, {DType::kF32}, {DType::kF32}, {DType::kF16, DType::kF32},
                            {DType::kF16, DType::kF32}, {DType::kI32}, {DType::kI32}, {DType::kI32}};
  attention.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_paged_attention_params(node));
  };
  attention.launch = ops::cpu_launch(attention.name, compute_paged_attention);
  return registry.add(std::move(attention));
}

}  // namespace hxrt::kernels::cpu
