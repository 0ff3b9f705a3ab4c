#include "hxrt/base/dtype.h"

#include "hxrt/base/check.h"

#include <array>

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
}};

}  // namespace

const DTypeInfo& dtype_info(DType dtype) {
  const auto index = static_cast<size_t>(dtype);
  HXRT_CHECK(index < kTable.size(), "invalid DType {}", index);
  return kTable[index];
}

Result<DType> dtype_from_name(std::string_view name) {
  for (const DTypeInfo& info : kTable) {
    if (info.name == name) return info.dtype;
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
