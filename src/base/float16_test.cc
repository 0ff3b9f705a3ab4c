#include "hxrt/base/float16.h"

#include <gtest/gtest.h>

#include <cmath>
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
