#include "kernels/cpu/quant_matmul_vnni.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "hxrt/base/check.h"
#include "kernels/cpu/quant_panel.h"
#include "kernels/cpu/quant_simd.h"

namespace hxrt::kernels::cpu::vnni512 {
namespace {

// Where a block's fields sit, and how many blocks make a step (Note [VNNI-512 pairs]).
template <DType W>
struct Layout;
template <>
struct Layout<DType::kQ4_1> {
  using Block = BlockQ4_1;
  static constexpr int kStepBlocks = 4;
  static constexpr int kOffsetWord = 1;  // c = m
};
template <>
struct Layout<DType::kQ8_0> {
  using Block = BlockQ8_0;
  static constexpr int kStepBlocks = 2;
  static constexpr int kOffsetWord = 0;  // no offset
};
// The q5 steps are three blocks: their d (and m) words lie in a step's first 64 bytes, which the step fills.
template <>
struct Layout<DType::kQ5_0> {
  using Block = BlockQ5_0;
  static constexpr int kStepBlocks = 3;
  static constexpr int kOffsetWord = 0;  // no offset
};
template <>
struct Layout<DType::kQ5_1> {
  using Block = BlockQ5_1;
  static constexpr int kStepBlocks = 3;
  static constexpr int kOffsetWord = 1;  // the min term of quant_matmul_kquant.cc, with mn = -m
};

// The types whose integers go in as q + 128 against an accumulator started at ActBlock::corr (signed × signed).
constexpr bool biased(DType w) {
  return w == DType::kQ8_0 || w == DType::kQ5_0;
}
// The types with a high bit per value in qh (bit i of the little-endian uint32 is bit 4 of value i).
constexpr bool five_bit(DType w) {
  return w == DType::kQ5_0 || w == DType::kQ5_1;
}

inline uint32_t le32(const std::byte* p) {
  uint32_t v = 0;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

struct alignas(64) WordIndex {
  uint16_t word[32];
};
struct alignas(64) LaneIndex {
  int32_t lane[16];
};

// Permute indices: `header` gathers, from the first 64 bytes of a step of rows c (words 0..31) and c + 1 (32..63),
// d of c for blocks g in words g, d of c + 1 in 4 + g, and the offset words in 8 + g and 12 + g; after conversion,
// `scale[g]` spreads block g's d over the pair's lanes and `offset[g]` puts its two offsets in lanes 0 and 1.
template <DType W>
struct PairIndex {
  using L = Layout<W>;
  static constexpr int kBlockWords = static_cast<int>(sizeof(typename L::Block)) / 2;
  static constexpr WordIndex make_header() {
    WordIndex idx{};
    for (int g = 0; g < L::kStepBlocks; ++g) {
      idx.word[g] = static_cast<uint16_t>(g * kBlockWords);
      idx.word[4 + g] = static_cast<uint16_t>(32 + g * kBlockWords);
      idx.word[8 + g] = static_cast<uint16_t>(g * kBlockWords + L::kOffsetWord);
      idx.word[12 + g] = static_cast<uint16_t>(32 + g * kBlockWords + L::kOffsetWord);
    }
    return idx;
  }
  static constexpr LaneIndex make_scale(int g) {
    LaneIndex idx{};
    for (int l = 0; l < 16; ++l) idx.lane[l] = l < 8 ? g : 4 + g;
    return idx;
  }
  static constexpr LaneIndex make_offset(int g) {
    LaneIndex idx{};
    idx.lane[0] = 8 + g;
    idx.lane[1] = 12 + g;
    return idx;
  }
  static constexpr WordIndex kHeader = make_header();
  static constexpr LaneIndex kScale[4] = {make_scale(0), make_scale(1), make_scale(2), make_scale(3)};
  static constexpr LaneIndex kOffset[4] = {make_offset(0), make_offset(1), make_offset(2), make_offset(3)};
};

// Shift counts for the q4 nibbles: 0 in 128-bit lanes 0 and 2 (low nibbles), 4 in lanes 1 and 3 (high nibbles).
constexpr WordIndex make_nibble_shifts() {
  WordIndex shifts{};
  for (int w = 0; w < 32; ++w) shifts.word[w] = (w / 8) % 2 == 1 ? 4 : 0;
  return shifts;
}
constexpr WordIndex kNibbleShifts = make_nibble_shifts();

#define HXRT_VNNI512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))

// More wrappers of AVX-512 intrinsics that GCC 12 warns in (as those of quant_simd.h).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
HXRT_VNNI512_TARGET inline __m256i low256(__m512i v) {
  return _mm512_castsi512_si256(v);
}
HXRT_VNNI512_TARGET inline __m512 permute(__m512i idx, __m512 v) {
  return _mm512_permutexvar_ps(idx, v);
}
HXRT_VNNI512_TARGET inline __m512i broadcast128(const std::byte* p) {
  return _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
#pragma GCC diagnostic pop


constexpr int kPrefetchPairs = 4;  // prefetch distance, in pairs of W rows

// How a pair of W rows decodes (Note [VNNI-512 pairs]); the direct micro-kernels and the decoded panels (Note
// [Decoded panels] in quant_panel.h) share it.
template <DType W>
struct PairDecode {
  using L = Layout<W>;
  using Index = PairIndex<W>;
  static constexpr int kBlockBytes = static_cast<int>(sizeof(typename L::Block));
  static constexpr int kStepBytes = L::kStepBlocks * kBlockBytes;
  static constexpr int kQsByte = static_cast<int>(offsetof(typename L::Block, qs));
  static constexpr int kQhByte = [] {
    if constexpr (five_bit(W)) return static_cast<int>(offsetof(typename L::Block, qh));
    return 0;
  }();

  // d of both rows for a step's `blocks` blocks (r0, r1 at the step) in lanes 0..7, their offsets in lanes 8..15.
  HXRT_VNNI512_TARGET static __m512 header(const std::byte* r0, const std::byte* r1, int blocks) {
    // The offset words times -1 for q5_1 (mn = -m).
    constexpr float kOffsetScale = W == DType::kQ5_1 ? -1.0f : 1.0f;
    const __m512 header_scale =
        _mm512_mask_blend_ps(__mmask16{0xFF00}, _mm512_set1_ps(1.0f), _mm512_set1_ps(kOffsetScale));
    const int64_t head_bytes = std::min<int64_t>(64, int64_t{blocks} * kBlockBytes);
    // A step's first 64 bytes, read with a plain load whenever they lie in the step: on AMD Zen 5 the masked
    // load of the same bytes (which a partial last step needs, not to read past W) stalls until its cache
    // lines arrive and stops the loads behind it, and was half of a batch-1 decode's time in this kernel.
    const bool full = head_bytes == 64;
    const __mmask64 head_mask = full ? ~__mmask64{0} : (__mmask64{1} << head_bytes) - 1;
    const __m512i head0 = full ? _mm512_loadu_si512(r0) : _mm512_maskz_loadu_epi8(head_mask, r0);
    const __m512i head1 = full ? _mm512_loadu_si512(r1) : _mm512_maskz_loadu_epi8(head_mask, r1);
    const __m512i words = _mm512_permutex2var_epi16(head0, _mm512_load_si512(Index::kHeader.word), head1);
    return _mm512_mul_ps(_mm512_maskz_cvtph_ps(__mmask16{0xFFFF}, low256(words)), header_scale);
  }

  // Both rows' integers of one block (b0, b1 at the block): row c in bytes 0..31, row c + 1 in 32..63.
  HXRT_VNNI512_TARGET static __m512i ints(const std::byte* b0, const std::byte* b1) {
    const std::byte* q0 = b0 + kQsByte;
    const std::byte* q1 = b1 + kQsByte;
    __m512i wq;
    if constexpr (W == DType::kQ8_0) {
      wq = from_halves(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q0)),
                       _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q1)));
      wq = _mm512_xor_si512(wq, _mm512_set1_epi8(static_cast<char>(0x80)));
    } else {
      wq = broadcast128(q0);
      wq = _mm512_mask_broadcast_i32x4(wq, __mmask16{0xFF00}, _mm_loadu_si128(reinterpret_cast<const __m128i*>(q1)));
      wq = _mm512_and_si512(_mm512_srlv_epi16(wq, _mm512_load_si512(kNibbleShifts.word)), _mm512_set1_epi8(0x0F));
      if constexpr (five_bit(W)) {
        // Byte i of the pair's zmm is value i of row c (i < 32) or value i - 32 of row c + 1: one mask of both qh.
        const uint64_t qh = uint64_t{le32(b0 + kQhByte)} | uint64_t{le32(b1 + kQhByte)} << 32;
        if constexpr (W == DType::kQ5_0) wq = _mm512_add_epi8(wq, _mm512_set1_epi8(112));  // q + 128
        wq = _mm512_mask_add_epi8(wq, _cvtu64_mask64(qh), wq, _mm512_set1_epi8(16));
      }
    }
    return wq;
  }

  // Block g's d over the pair's lanes, and its two offsets in lanes 0 and 1.
  HXRT_VNNI512_TARGET static __m512 scale(__m512 header, int g) {
    return permute(_mm512_load_si512(Index::kScale[g].lane), header);
  }
  HXRT_VNNI512_TARGET static __m128 offset(__m512 header, int g) {
    return low128(permute(_mm512_load_si512(Index::kOffset[g].lane), header));
  }
};

// RA activation rows × P pairs of W rows (cols <= 2P of them; Note [VNNI-512 pairs]).
template <DType W, int RA, int P>
HXRT_VNNI512_TARGET void micro_kernel(const ActBlock* act, int64_t nb, const std::byte* w, uint64_t row_bytes,
                                      int64_t cols, const float* bias, float* y, int64_t ldy) {
  using D = PairDecode<W>;
  using L = Layout<W>;
  const std::byte* rows[P][2];
  for (int p = 0; p < P; ++p) {
    rows[p][0] = w + static_cast<uint64_t>(2 * p) * row_bytes;
    rows[p][1] = 2 * p + 1 < cols ? rows[p][0] + row_bytes : rows[p][0];
  }
  PairAccumulators<RA, P> tile;
  tile.zero();
  for (int64_t b0 = 0; b0 < nb; b0 += L::kStepBlocks) {
    const int blocks = static_cast<int>(std::min<int64_t>(L::kStepBlocks, nb - b0));
    const uint64_t step = static_cast<uint64_t>(b0 / L::kStepBlocks) * D::kStepBytes;
    __m512 header[P];
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      const std::byte* r0 = rows[p][0] + step;
      const std::byte* r1 = rows[p][1] + step;
      _mm_prefetch(reinterpret_cast<const char*>(r0 + kPrefetchPairs * 2 * row_bytes), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(r0 + kPrefetchPairs * 2 * row_bytes + D::kStepBytes - 1),
                   _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(r1 + kPrefetchPairs * 2 * row_bytes), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(r1 + kPrefetchPairs * 2 * row_bytes + D::kStepBytes - 1),
                   _MM_HINT_T0);
      header[p] = D::header(r0, r1, blocks);
    }
    for (int g = 0; g < blocks; ++g) {
      const int64_t b = b0 + g;
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        const uint64_t at = step + static_cast<uint64_t>(g) * D::kBlockBytes;
        const __m512i wq = D::ints(rows[p][0] + at, rows[p][1] + at);
        const __m512 dw = D::scale(header[p], g);
        const __m128 cw = D::offset(header[p], g);
#pragma GCC unroll 4
        for (int r = 0; r < RA; ++r) {
          const ActBlock& a = act[r * nb + b];
          const __m512i init = biased(W) ? a.corr2() : _mm512_setzero_si512();
          const __m512i idot = _mm512_dpbusd_epi32(init, wq, a.values2());
          tile.acc[r][p] = _mm512_fmadd_ps(to_float(idot), _mm512_mul_ps(dw, _mm512_set1_ps(a.d)), tile.acc[r][p]);
          if constexpr (W == DType::kQ4_1) {
            tile.ext[r][p] = _mm_fmadd_ps(cw, _mm_set1_ps(a.s), tile.ext[r][p]);
          } else if constexpr (W == DType::kQ5_1) {
            tile.ext[r][p] = minus_min_lanes(tile.ext[r][p], cw, cw, a.d, a.sum[0], a.sum[1]);
          }
        }
      }
    }
  }
  tile.store(cols, bias, y, ldy);
}

// A pair's blocks decoded for the panels (Note [Decoded panels] in quant_panel.h): micro_kernel's registers, stored.
template <DType W>
HXRT_VNNI512_TARGET void decode_pair(const std::byte* w0, const std::byte* w1, int64_t nb, PairRun* out) {
  using D = PairDecode<W>;
  using L = Layout<W>;
  for (int64_t b0 = 0; b0 < nb; b0 += L::kStepBlocks) {
    const int blocks = static_cast<int>(std::min<int64_t>(L::kStepBlocks, nb - b0));
    const uint64_t step = static_cast<uint64_t>(b0 / L::kStepBlocks) * D::kStepBytes;
    const __m512 header = D::header(w0 + step, w1 + step, blocks);
    for (int g = 0; g < blocks; ++g) {
      PairRun& run = out[b0 + g];
      const uint64_t at = step + static_cast<uint64_t>(g) * D::kBlockBytes;
      _mm512_store_si512(run.wq, D::ints(w0 + at, w1 + at));
      _mm512_store_ps(run.dw, D::scale(header, g));
      const __m128 cw = D::offset(header, g);
      _mm_store_ps(run.mn[0], cw);
      _mm_store_ps(run.mn[1], cw);
    }
  }
}

template <DType W>
constexpr PanelForm panel_form() {
  const PanelTerm term = W == DType::kQ4_1 ? PanelTerm::kOffset : W == DType::kQ5_1 ? PanelTerm::kMin : PanelTerm::kNone;
  return {.biased = biased(W), .scaled = false, .term = term};
}

template <DType W>
void tile_impl(const ActBlock* act, int64_t rows, const std::byte* w, uint64_t row_bytes, int64_t nb, int64_t cols,
               const float* bias, float* y, int64_t ldy) {
  if (rows > kMaxRows) {
    panel_tile<panel_form<W>()>(&decode_pair<W>, act, rows, w, row_bytes, nb, cols, bias, y, ldy);
    return;
  }
  // Two pairs share each activation load (registers hold 4 rows × 2 pairs): 1.1-1.4x faster prefill than one pair
  // on Sapphire Rapids.
  constexpr int kPairs = 2;
  static constexpr MicroKernelTable kKernels = {{
      {&micro_kernel<W, 1, 1>, &micro_kernel<W, 1, kPairs>},
      {&micro_kernel<W, 2, 1>, &micro_kernel<W, 2, kPairs>},
      {&micro_kernel<W, 3, 1>, &micro_kernel<W, 3, kPairs>},
      {&micro_kernel<W, 4, 1>, &micro_kernel<W, 4, kPairs>},
  }};
  run_tile(kKernels, kPairs, act, rows, w, row_bytes, nb, cols, bias, y, ldy);
}

}  // namespace

void run_tile(const MicroKernelTable& kernels, int wide_pairs, const ActBlock* act, int64_t rows,
              const std::byte* w, uint64_t row_bytes, int64_t nb, int64_t cols, const float* bias, float* y,
              int64_t ldy) {
  for (int64_t i = 0; i < rows; i += kMaxRows) {
    const int ra = static_cast<int>(std::min<int64_t>(kMaxRows, rows - i));
    const int64_t wide = 2 * wide_pairs;
    int64_t j = 0;
    for (; j + wide <= cols; j += wide) {
      kernels[ra - 1][1](act + i * nb, nb, w + static_cast<uint64_t>(j) * row_bytes, row_bytes, wide,
                         bias != nullptr ? bias + j : nullptr, y + i * ldy + j, ldy);
    }
    for (; j < cols; j += 2) {
      kernels[ra - 1][0](act + i * nb, nb, w + static_cast<uint64_t>(j) * row_bytes, row_bytes,
                         std::min<int64_t>(2, cols - j), bias != nullptr ? bias + j : nullptr, y + i * ldy + j, ldy);
    }
  }
}

void pack_activation_row(DType w_type, const BlockQ8A* row, int64_t nb, ActBlock* out) {
  for (int64_t b = 0; b < nb; ++b) {
    ActBlock& block = out[b];
    std::memcpy(block.qs, row[b].qs, 32);
    block.d = row[b].d;
    block.s = row[b].s;
    block.sum[0] = static_cast<float>(row[b].sum[0]);
    block.sum[1] = static_cast<float>(row[b].sum[1]);
    if (biased(w_type) || w_type == DType::kQ3_K || w_type == DType::kQ6_K || w_type == DType::kIQ4_XS) {
      for (int l = 0; l < 8; ++l) {
        block.corr[l] = -128 * (block.qs[4 * l] + block.qs[4 * l + 1] + block.qs[4 * l + 2] + block.qs[4 * l + 3]);
      }
    }
  }
}

bool handles(DType w_type) {
  switch (w_type) {
    case DType::kQ8_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1: return true;
    default: return false;
  }
}

void tile(DType w_type, const ActBlock* act, int64_t rows, const std::byte* w, uint64_t row_bytes, int64_t nb,
          int64_t cols, const float* bias, float* y, int64_t ldy) {
  switch (w_type) {
    case DType::kQ8_0: tile_impl<DType::kQ8_0>(act, rows, w, row_bytes, nb, cols, bias, y, ldy); return;
    case DType::kQ4_1: tile_impl<DType::kQ4_1>(act, rows, w, row_bytes, nb, cols, bias, y, ldy); return;
    case DType::kQ5_0: tile_impl<DType::kQ5_0>(act, rows, w, row_bytes, nb, cols, bias, y, ldy); return;
    case DType::kQ5_1: tile_impl<DType::kQ5_1>(act, rows, w, row_bytes, nb, cols, bias, y, ldy); return;
    default: HXRT_CHECK(false, "vnni512::tile: {} is not a block type", w_type);
  }
}

}  // namespace hxrt::kernels::cpu::vnni512
