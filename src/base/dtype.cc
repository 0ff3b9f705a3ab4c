#include "hxrt/base/dtype.h"

#include "hxrt/base/check.h"
#include "hxrt/base/quant_blocks.h"

#include <array>
#include <cctype>

namespace hxrt {
namespace {

// Block layouts follow ggml's definitions (GGUF specification, "ggml_type").
constexpr std::array<DTypeInfo, kDTypeCount> kTable = {{
    {DType::kF32, "f32", 1, 4, false, true, 0},
    {DType::kF16, "f16", 1, 2, false, true, 1},
    {DType::kBF16, "bf16", 1, 2, false, true, 30},
    {DType::kI8, "i8", 1, 1, false, false, 24},
    {DType::kI32, "i32", 1, 4, false, false, 26},
    {DType::kI64, "i64", 1, 8, false, false, 27},
    {DType::kU8, "u8", 1, 1, false, false, std::nullopt},
    {DType::kBool, "bool", 1, 1, false, false, std::nullopt},
    {DType::kQ8_0, "q8_0", 32, 2 + 32, true, false, 8},
    {DType::kQ4_0, "q4_0", 32, 2 + 16, true, false, 2},
    {DType::kQ4_1, "q4_1", 32, 2 + 2 + 16, true, false, 3},
    {DType::kQ5_0, "q5_0", 32, sizeof(BlockQ5_0), true, false, 6},
    {DType::kQ5_1, "q5_1", 32, sizeof(BlockQ5_1), true, false, 7},
    {DType::kIQ4_NL, "iq4_nl", 32, sizeof(BlockIQ4_NL), true, false, 20},
    {DType::kQ2_K, "q2_K", 256, sizeof(BlockQ2_K), true, false, 10},
    {DType::kQ3_K, "q3_K", 256, sizeof(BlockQ3_K), true, false, 11},
    {DType::kQ4_K, "q4_K", 256, sizeof(BlockQ4_K), true, false, 12},
    {DType::kQ5_K, "q5_K", 256, sizeof(BlockQ5_K), true, false, 13},
    {DType::kQ6_K, "q6_K", 256, sizeof(BlockQ6_K), true, false, 14},
    {DType::kIQ4_XS, "iq4_xs", 256, sizeof(BlockIQ4_XS), true, false, 23},
}};

}  // namespace

const DTypeInfo& dtype_info(DType dtype) {
  const auto index = static_cast<size_t>(dtype);
  HXRT_CHECK(index < kTable.size(), "invalid DType {}", index);
  return kTable[index];
}

Result<DType> dtype_from_name(std::string_view name) {
  auto same = [](std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
    }
    return true;
  };
  for (const DTypeInfo& info : kTable) {
    if (same(info.name, name)) return info.dtype;
  }
  return invalid_argument("unknown dtype '{}'", name);
}

Result<DType> dtype_from_ggml_type(uint32_t ggml_type) {
  for (const DTypeInfo& info : kTable) {
    if (info.ggml_type == ggml_type) return info.dtype;
  }
  return not_found("ggml tensor type {} is not supported by hxrt", ggml_type);
}

Result<uint64_t> storage_bytes(DType dtype, uint64_t elements) {
  const DTypeInfo& info = dtype_info(dtype);
  if (elements % info.block_elements != 0) {
    return invalid_argument("{} values of {} are not a whole number of {}-value blocks", elements, info.name,
                            info.block_elements);
  }
  const uint64_t blocks = elements / info.block_elements;
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(blocks, static_cast<uint64_t>(info.block_bytes), &bytes)) {
    return out_of_range("{} values of {} overflow a 64-bit size", elements, info.name);
  }
  return bytes;
}

}  // namespace hxrt
