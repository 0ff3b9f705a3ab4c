#include "kernels/testing/test_data.h"

#include <cstddef>
#include <cstring>

#include "hxrt/base/check.h"
#include "hxrt/base/float16.h"
#include "hxrt/base/quant_blocks.h"

namespace hxrt::kernels::testing {

void fill_random_blocks(DType dtype, std::span<std::byte> bytes, std::mt19937& rng) {
  const DTypeInfo& info = dtype_info(dtype);
  HXRT_CHECK(info.is_quantized && bytes.size() % info.block_bytes == 0, "fill_random_blocks: {} bytes of {}",
             bytes.size(), dtype);
  std::uniform_int_distribution<int> byte(0, 255);
  for (std::byte& b : bytes) b = static_cast<std::byte>(byte(rng));
  // Where the f16 fields sit, and the typical |sc · q| they multiply (so d · sc · q is of order 0.1-1).
  struct Fields {
    size_t d;
    int d_range;
    int min_at;  // -1: no min
  };
  Fields f{0, 8, -1};
  switch (dtype) {
    case DType::kQ8_0: f = {offsetof(BlockQ8_0, d), 64, -1}; break;
    case DType::kQ4_0: f = {offsetof(BlockQ4_0, d), 8, -1}; break;
    case DType::kQ4_1: f = {offsetof(BlockQ4_1, d), 8, static_cast<int>(offsetof(BlockQ4_1, m))}; break;
    case DType::kQ5_0: f = {offsetof(BlockQ5_0, d), 16, -1}; break;
    case DType::kQ5_1: f = {offsetof(BlockQ5_1, d), 16, static_cast<int>(offsetof(BlockQ5_1, m))}; break;
    case DType::kIQ4_NL: f = {offsetof(BlockIQ4_NL, d), 64, -1}; break;
    case DType::kQ2_K: f = {offsetof(BlockQ2_K, d), 16, static_cast<int>(offsetof(BlockQ2_K, dmin))}; break;
    case DType::kQ3_K: f = {offsetof(BlockQ3_K, d), 64, -1}; break;
    case DType::kQ4_K: f = {offsetof(BlockQ4_K, d), 256, static_cast<int>(offsetof(BlockQ4_K, dmin))}; break;
    case DType::kQ5_K: f = {offsetof(BlockQ5_K, d), 512, static_cast<int>(offsetof(BlockQ5_K, dmin))}; break;
    case DType::kQ6_K: f = {offsetof(BlockQ6_K, d), 1024, -1}; break;
    case DType::kIQ4_XS: f = {offsetof(BlockIQ4_XS, d), 1024, -1}; break;
    default: HXRT_CHECK(false, "fill_random_blocks: no fields known for {}", dtype);
  }
  std::uniform_real_distribution<float> scale(0.2f, 1.0f);
  std::bernoulli_distribution negative(0.25);
  for (size_t at = 0; at < bytes.size(); at += info.block_bytes) {
    const float d = scale(rng) / static_cast<float>(f.d_range);
    const uint16_t d16 = f32_to_f16(negative(rng) ? -d : d);  // ggml scales may be negative
    std::memcpy(&bytes[at + f.d], &d16, sizeof(d16));
    if (f.min_at >= 0) {
      const float m = (scale(rng) - 0.6f) / static_cast<float>(f.d_range / 4 + 1);
      const uint16_t m16 = f32_to_f16(m);
      std::memcpy(&bytes[at + static_cast<size_t>(f.min_at)], &m16, sizeof(m16));
    }
  }
}

std::vector<float> random_values(int64_t n, std::mt19937& rng, float lo, float hi, bool signed_values) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::bernoulli_distribution sign(0.5);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng) * (signed_values && sign(rng) ? -1.0f : 1.0f);
  return v;
}

std::vector<float> random_floats(int64_t n, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) {
    do {
      x = dist(rng);
    } while (x == 0.0f);
  }
  return v;
}

HostTensor random_bools(const Shape& shape, std::mt19937& rng) {
  std::vector<std::byte> bytes(static_cast<size_t>(shape.num_elements()));
  for (std::byte& b : bytes) b = static_cast<std::byte>(rng() % 2);
  return HostTensor::raw(DType::kBool, shape, std::move(bytes));
}

std::vector<int64_t> dims_of(const Shape& shape) { return {shape.dims().begin(), shape.dims().end()}; }

std::vector<int64_t> unravel(int64_t i, std::span<const int64_t> dims) {
  std::vector<int64_t> index(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    index[d] = i % dims[d];
    i /= dims[d];
  }
  return index;
}

std::vector<int64_t> unravel(int64_t i, const Shape& shape) { return unravel(i, shape.dims()); }

int64_t ravel(std::span<const int64_t> index, const Shape& shape) {
  int64_t i = 0;
  for (size_t d = 0; d < index.size(); ++d) i = i * shape.dims()[d] + index[d];
  return i;
}

}  // namespace hxrt::kernels::testing
