#include "hxrt/base/dtype.h"

#include <gtest/gtest.h>

#include <random>

#include "hxrt/base/quant_blocks.h"

namespace hxrt {
namespace {

TEST(DType, BlockLayoutsMatchGgml) {
  EXPECT_EQ(dtype_info(DType::kQ8_0).block_elements, 32u);
  EXPECT_EQ(dtype_info(DType::kQ8_0).block_bytes, 34u);
  EXPECT_EQ(dtype_info(DType::kQ4_0).block_bytes, 18u);
  EXPECT_EQ(dtype_info(DType::kQ4_1).block_bytes, 20u);
  EXPECT_EQ(dtype_info(DType::kF16).block_bytes, 2u);
  EXPECT_TRUE(dtype_info(DType::kQ4_1).is_quantized);
  EXPECT_FALSE(dtype_info(DType::kBF16).is_quantized);
  // ggml-common.h's sizes.
  const std::pair<DType, uint32_t> sizes[] = {{DType::kQ5_0, 22},  {DType::kQ5_1, 24},  {DType::kIQ4_NL, 18},
                                              {DType::kQ2_K, 84},  {DType::kQ3_K, 110}, {DType::kQ4_K, 144},
                                              {DType::kQ5_K, 176}, {DType::kQ6_K, 210}, {DType::kIQ4_XS, 136}};
  for (const auto& [dtype, bytes] : sizes) EXPECT_EQ(dtype_info(dtype).block_bytes, bytes) << dtype_name(dtype);
  EXPECT_EQ(dtype_info(DType::kQ4_K).block_elements, 256u);
  EXPECT_EQ(*dtype_from_name("Q4_K"), DType::kQ4_K);
  EXPECT_EQ(*dtype_from_name("iq4_XS"), DType::kIQ4_XS);
}

TEST(DType, NamesRoundTrip) {
  for (int i = 0; i < kDTypeCount; ++i) {
    const auto dtype = static_cast<DType>(i);
    Result<DType> parsed = dtype_from_name(dtype_name(dtype));
    ASSERT_TRUE(parsed.ok()) << dtype_name(dtype);
    EXPECT_EQ(*parsed, dtype);
    EXPECT_EQ(dtype_info(dtype).dtype, dtype);
  }
  EXPECT_EQ(dtype_from_name("f128").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(fmt::format("{}", DType::kBF16), "bf16");
}

TEST(DType, GgmlTypeIds) {
  EXPECT_EQ(*dtype_from_ggml_type(0), DType::kF32);
  EXPECT_EQ(*dtype_from_ggml_type(1), DType::kF16);
  EXPECT_EQ(*dtype_from_ggml_type(2), DType::kQ4_0);
  EXPECT_EQ(*dtype_from_ggml_type(3), DType::kQ4_1);
  EXPECT_EQ(*dtype_from_ggml_type(8), DType::kQ8_0);
  EXPECT_EQ(*dtype_from_ggml_type(30), DType::kBF16);
  EXPECT_EQ(*dtype_from_ggml_type(14), DType::kQ6_K);
  EXPECT_EQ(*dtype_from_ggml_type(12), DType::kQ4_K);
  EXPECT_EQ(*dtype_from_ggml_type(23), DType::kIQ4_XS);
  Result<DType> unknown = dtype_from_ggml_type(16);  // iq2_xxs: a grid type hxrt does not compute
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("16"), std::string_view::npos);
}

TEST(DType, StorageBytes) {
  EXPECT_EQ(*storage_bytes(DType::kF32, 10), 40u);
  EXPECT_EQ(*storage_bytes(DType::kQ4_1, 64), 40u);
  EXPECT_EQ(*storage_bytes(DType::kQ8_0, 0), 0u);
  EXPECT_EQ(storage_bytes(DType::kQ4_0, 33).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(storage_bytes(DType::kI64, uint64_t{1} << 62).status().code(), StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace hxrt

namespace hxrt {
namespace {

// unpack_scales_q3_k against the layout read group by group (quant_blocks.h, BlockQ3_K), on random packed bytes.
TEST(QuantBlocks, Q3KScalesUnpackGroupByGroup) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int trial = 0; trial < 10000; ++trial) {
    uint8_t packed[12];
    for (uint8_t& b : packed) b = static_cast<uint8_t>(byte(rng));
    const std::array<int8_t, 16> got = unpack_scales_q3_k(packed);
    for (int g = 0; g < 16; ++g) {
      const int low = g < 8 ? packed[g] & 0x0F : packed[g - 8] >> 4;
      const int high = (packed[8 + g % 4] >> (2 * (g / 4))) & 3;
      ASSERT_EQ(got[static_cast<size_t>(g)], (low | (high << 4)) - 32) << "trial " << trial << " group " << g;
    }
  }
}

}  // namespace
}  // namespace hxrt
