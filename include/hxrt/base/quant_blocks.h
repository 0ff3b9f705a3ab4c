// The GGUF/ggml quantization blocks, one struct per type, each with its size asserted beside it (ggml-common.h's
// layouts, byte for byte). f16 fields are raw bits. These structs and the table in quant_types.h are the only place
// the rest of hxrt learns a block's layout.
//
// Two families:
//   - 32-value blocks (q4_0, q4_1, q5_0, q5_1, q8_0, iq4_nl): one f16 scale (and min) per block. Nibble types put
//     element j in the low nibble of qs[j] and element j + 16 in its high nibble.
//   - 256-value super-blocks (the K-quants q2_K..q6_K and iq4_xs): eight 32-value sub-blocks (or sixteen of 16
//     values) with small integer scales, times one f16 super-scale. Their bit layouts are spelled out per struct.
//
// Thread-safety: plain data.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>

namespace hxrt {

inline constexpr int kQK = 32;   // values of a 32-value block
inline constexpr int kQKK = 256; // values of a K-quant super-block
inline constexpr int kKScaleBytes = 12;  // packed 6-bit scales and mins of q4_K and q5_K

struct BlockQ8_0 {
  uint16_t d;       // scale
  int8_t qs[32];    // value i = d · qs[i]
};
struct BlockQ4_0 {
  uint16_t d;       // scale
  uint8_t qs[16];   // value i = d · (nibble i − 8)
};
struct BlockQ4_1 {
  uint16_t d;       // scale
  uint16_t m;       // minimum
  uint8_t qs[16];   // value i = d · nibble i + m
};
struct BlockQ5_0 {
  uint16_t d;       // scale
  uint8_t qh[4];    // bit i (of the little-endian uint32) is bit 4 of element i
  uint8_t qs[16];   // value i = d · ((nibble i | high bit i << 4) − 16)
};
struct BlockQ5_1 {
  uint16_t d;       // scale
  uint16_t m;       // minimum
  uint8_t qh[4];    // as q5_0
  uint8_t qs[16];   // value i = d · (nibble i | high bit i << 4) + m
};
struct BlockIQ4_NL {
  uint16_t d;       // scale
  uint8_t qs[16];   // value i = d · kIQ4NLValues[nibble i]
};

// Sixteen 16-value groups; value = d · (scales[g] & 15) · q − dmin · (scales[g] >> 4), q the 2-bit integer.
// Values 128·h + 32·j + l (h < 2, j < 4, l < 32) take bits 2j..2j+1 of qs[32·h + l]; group g = 8·h + 2·j + l / 16.
struct BlockQ2_K {
  uint8_t scales[16];  // low nibble scale, high nibble min of each group
  uint8_t qs[64];
  uint16_t d;          // super-scale of the scales
  uint16_t dmin;       // super-scale of the mins
};
// Sixteen 16-value groups; value = d · (scale[g] − 32) · (q − (high bit ? 0 : 4)), q the low 2 bits. Values
// 128·h + 32·j + l take bits 2j..2j+1 of qs[32·h + l] and bit 4·h + j of hmask[l]; the 6-bit scales are packed in
// 12 bytes (low 4 bits of groups 0..7 in the low nibbles of bytes 0..7, of groups 8..15 in their high nibbles; the
// high 2 bits of group g in bits 2·(g / 4)..+1 of byte 8 + g % 4).
struct BlockQ3_K {
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint16_t d;
};
// Eight 32-value sub-blocks; value = d · sc[j] · q − dmin · mn[j], q a nibble. Sub-block 2p takes the low nibbles of
// qs[32·p .. 32·p + 32), sub-block 2p + 1 their high nibbles. The 6-bit sc and mn are packed in `scales`
// (quant_types.h: unpack_scale_min_k4).
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[128];
};
// As q4_K with a fifth bit: bit j of qh[l] is bit 4 of value l of sub-block j.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[32];
  uint8_t qs[128];
};
// Sixteen 16-value groups; value = d · scales[g] · (q − 32), q six bits. Values 128·h + 32·t + l (t < 4) take the
// low (t < 2) or high (t ≥ 2) nibble of ql[64·h + 32·(t % 2) + l] and bits 2t..2t+1 of qh[32·h + l];
// group g = 8·h + 2·t + l / 16.
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};
// Eight 32-value sub-blocks as iq4_nl; value = d · (ls[j] − 32) · kIQ4NLValues[nibble], ls six bits: the low four in
// scales_l[j / 2] (low nibble for even j), the high two in bits 2j..2j+1 of scales_h.
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[4];
  uint8_t qs[128];
};

static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24 && sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockIQ4_XS) == 136);

// The sixteen values of iq4_nl and iq4_xs nibbles (a non-uniform grid).
inline constexpr std::array<int8_t, 16> kIQ4NLValues = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                        1,    13,   25,  38,  53,  69,  89,  113};

// Sub-block j's 6-bit scale and min of a q4_K/q5_K block (ggml's get_scale_min_k4).
inline void unpack_scale_min_k4(int j, const uint8_t* q, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = static_cast<uint8_t>((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4));
    *min = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// The sixteen 6-bit scales of a q3_K block, minus 32 (signed). Eight bytes at a time (the kernels unpack these once
// per block; a loop over the groups cost more than the block's dot products): group g takes the low nibble of
// byte g (g < 8) or the high nibble of byte g - 8, and bits 2·(g / 4)..+1 of byte 8 + g % 4 as its bits 4..5.
inline std::array<int8_t, 16> unpack_scales_q3_k(const uint8_t* packed) {
  constexpr uint64_t kNibbles = 0x0F0F0F0F0F0F0F0Full;
  constexpr uint32_t kPairs = 0x03030303u;
  uint64_t low = 0;
  uint32_t high = 0;
  std::memcpy(&low, packed, sizeof(low));
  std::memcpy(&high, packed + 8, sizeof(high));
  // Byte l of group_high(q) is bits 2q..2q+1 of byte 8 + l, i.e. the high bits of group 4q + l.
  const auto group_high = [high](int q) { return static_cast<uint64_t>((high >> (2 * q)) & kPairs); };
  const uint64_t first = (low & kNibbles) | ((group_high(0) | group_high(1) << 32) << 4);           // groups 0..7
  const uint64_t second = ((low >> 4) & kNibbles) | ((group_high(2) | group_high(3) << 32) << 4);  // groups 8..15
  std::array<uint8_t, 16> bytes{};
  std::memcpy(bytes.data(), &first, sizeof(first));
  std::memcpy(bytes.data() + 8, &second, sizeof(second));
  std::array<int8_t, 16> out{};
  for (size_t g = 0; g < 16; ++g) out[g] = static_cast<int8_t>(bytes[g] - 32);
  return out;
}

}  // namespace hxrt
