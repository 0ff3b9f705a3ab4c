// Element types, including GGUF's block-quantized types.
//
// A quantized type stores `block_elements` values in `block_bytes` bytes; a plain type is a block of one. Sizes of
// rows and tensors are computed through `storage_bytes`, which rejects element counts that are not a whole number of
// blocks and sizes that overflow.
//
// Thread-safety: immutable tables; safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "hxrt/base/status.h"

namespace hxrt {

enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kI8,
  kI32,
  kI64,
  kU8,
  kBool,
  kQ8_0,  // 32 values: f16 scale d, 32 x int8;            value = d * q
  kQ4_0,  // 32 values: f16 scale d, 16 bytes of nibbles;   value = d * (q - 8)
  kQ4_1,  // 32 values: f16 scale d, f16 min m, 16 bytes;   value = d * q + m
  // The layouts of these are in quant_blocks.h, their reference arithmetic in quant_types.h.
  kQ5_0,
  kQ5_1,
  kIQ4_NL,
  kQ2_K,
  kQ3_K,
  kQ4_K,
  kQ5_K,
  kQ6_K,
  kIQ4_XS,
};

inline constexpr int kDTypeCount = 20;

struct DTypeInfo {
  DType dtype;
  std::string_view name;     // "f32", "q4_1", "q4_K", ... (ggml's spelling)
  uint32_t block_elements;   // values per block (1 for plain types)
  uint32_t block_bytes;      // bytes per block
  bool is_quantized;
  bool is_float;             // f32, f16, bf16 (quantized types dequantize to float but are not float storage)
  std::optional<uint32_t> ggml_type;  // GGUF/ggml type id, where one exists
};

const DTypeInfo& dtype_info(DType dtype);
inline std::string_view dtype_name(DType dtype) { return dtype_info(dtype).name; }

// Parses "f32", "q4_1", "q4_K", ... (the names above; the K of the K-quants in either case).
Result<DType> dtype_from_name(std::string_view name);
// Maps a GGUF/ggml tensor type id; NotFound for types hxrt does not support (the message names the id).
Result<DType> dtype_from_ggml_type(uint32_t ggml_type);

// Bytes needed for `elements` values of `dtype`. InvalidArgument when `elements` is not a multiple of the block
// size; OutOfRange when the size overflows 64 bits.
Result<uint64_t> storage_bytes(DType dtype, uint64_t elements);

}  // namespace hxrt

template <>
struct fmt::formatter<hxrt::DType> : fmt::formatter<std::string_view> {
  auto format(hxrt::DType d, format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(hxrt::dtype_name(d), ctx);
  }
};
