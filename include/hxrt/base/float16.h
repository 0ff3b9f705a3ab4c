// IEEE half (f16) and bfloat16 conversions. Storage types only: arithmetic happens in float.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <cstring>

namespace hxrt {

// f16 bits → float, exact (handles subnormals, infinities and NaN). The normal halves — every quantization scale in
// practice — take one compare and an integer add (the kernels call this once per block, where the branchy
// normalisation loop it replaced cost more than the block's dot product); subnormals are m · 2^-24, computed
// exactly in float without relying on denormal arithmetic.
inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t magnitude = h & 0x7FFFu;  // exponent and mantissa
  uint32_t bits;
  if (magnitude - 0x0400u < 0x7800u) {  // exponent 1..30: rebias 15 → 127
    bits = sign | ((magnitude << 13) + (112u << 23));
  } else if (magnitude >= 0x7C00u) {
    bits = sign | 0x7F800000u | ((magnitude & 0x3FFu) << 13);  // inf / NaN, payload kept
  } else {
    const float f = static_cast<float>(magnitude) * 0x1p-24f;  // ±0 and subnormals, exact
    std::memcpy(&bits, &f, sizeof bits);
    bits |= sign;
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// float → f16 bits, round to nearest even; overflow gives ±inf, NaN stays NaN.
inline uint16_t f32_to_f16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t abs = bits & 0x7FFFFFFFu;
  if (abs >= 0x7F800000u) return static_cast<uint16_t>(sign | 0x7C00u | (abs > 0x7F800000u ? 0x200u : 0u));
  if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds past the largest half
  if (abs < 0x38800000u) {  // result is subnormal or zero
    if (abs < 0x33000001u) return static_cast<uint16_t>(sign);
    const uint32_t exponent = abs >> 23;
    const uint32_t mantissa = (abs & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126 - exponent;  // 14..24
    uint32_t half = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = ((abs - 0x38000000u) >> 13);
  const uint32_t rest = abs & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
  return static_cast<uint16_t>(sign | half);
}

inline float bf16_to_f32(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// float → bf16 bits, round to nearest even; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

}  // namespace hxrt
