#include "hxrt/base/float16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace hxrt {
namespace {

// Reference: round float to the nearest representable half by exhaustive search over the 65536 halves.
TEST(Float16, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f))));
      continue;
    }
    ASSERT_EQ(f32_to_f16(f), static_cast<uint16_t>(h)) << "half 0x" << std::hex << h;
  }
}

// Every half against its value computed in double from the fields (sign · 2^(e-15) · 1.m, sign · 2^-14 · 0.m), and
// infinities and NaNs bit for bit (payload in the top mantissa bits).
TEST(Float16, EveryHalfHasItsExactValue) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const uint32_t e = (h >> 10) & 0x1Fu;
    const uint32_t m = h & 0x3FFu;
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    uint32_t bits = 0;
    std::memcpy(&bits, &f, sizeof bits);
    if (e == 0x1F) {
      ASSERT_EQ(bits, ((h & 0x8000u) << 16) | 0x7F800000u | (m << 13)) << "half 0x" << std::hex << h;
      continue;
    }
    const double magnitude = e == 0 ? std::ldexp(static_cast<double>(m), -24)
                                    : std::ldexp(1.0 + static_cast<double>(m) / 1024.0, static_cast<int>(e) - 15);
    const double want = (h & 0x8000u) != 0 ? -magnitude : magnitude;
    ASSERT_EQ(static_cast<double>(f), want) << "half 0x" << std::hex << h;
    ASSERT_EQ(std::signbit(f), (h & 0x8000u) != 0) << "half 0x" << std::hex << h;
  }
}

TEST(Float16, KnownValuesAndRounding) {
  EXPECT_EQ(f16_to_f32(0x3C00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xC000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x7BFF), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);          // rounds to inf
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // halfway, rounds to even
  EXPECT_EQ(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // halfway to the smallest subnormal: even = 0
  EXPECT_EQ(f32_to_f16(std::ldexp(1.5f, -25)), 0x0001);
}

TEST(BFloat16, RoundTripAndRounding) {
  for (float f : {0.0f, 1.0f, -3.5f, std::ldexp(1.0f, 100), -std::ldexp(1.5f, -100)}) EXPECT_EQ(bf16_to_f32(f32_to_bf16(f)), f);
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);  // halfway, even
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

}  // namespace
}  // namespace hxrt
