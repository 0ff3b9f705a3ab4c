#include "hxrt/base/host_tensor.h"

#include <cstring>

#include "hxrt/base/check.h"
#include "hxrt/base/float16.h"

namespace hxrt {
namespace {

template <typename T>
std::vector<std::byte> to_bytes(const std::vector<T>& values) {
  std::vector<std::byte> bytes(values.size() * sizeof(T));
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

template <typename T>
T load(const std::byte* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

void check_count(size_t count, const Shape& shape) {
  HXRT_CHECK(static_cast<int64_t>(count) == shape.num_elements(), "{} values for shape {}", count, shape);
}

}  // namespace

HostTensor HostTensor::f32(Shape shape, const std::vector<float>& values) {
  check_count(values.size(), shape);
  return HostTensor{DType::kF32, shape, to_bytes(values)};
}

HostTensor HostTensor::i64(Shape shape, const std::vector<int64_t>& values) {
  check_count(values.size(), shape);
  return HostTensor{DType::kI64, shape, to_bytes(values)};
}

HostTensor HostTensor::i32(Shape shape, const std::vector<int32_t>& values) {
  check_count(values.size(), shape);
  return HostTensor{DType::kI32, shape, to_bytes(values)};
}

Result<HostTensor> HostTensor::make(DType dtype, Shape shape, std::vector<std::byte> bytes) {
  HXRT_ASSIGN_OR_RETURN(uint64_t expected, storage_bytes(dtype, static_cast<uint64_t>(shape.num_elements())));
  if (expected != bytes.size()) {
    return invalid_argument("{} {} needs {} bytes, got {}", dtype, shape, expected, bytes.size());
  }
  return HostTensor{dtype, shape, std::move(bytes)};
}

HostTensor HostTensor::raw(DType dtype, Shape shape, std::vector<std::byte> bytes) {
  Result<HostTensor> made = make(dtype, shape, std::move(bytes));
  HXRT_CHECK(made.ok(), "{}", made.status().to_string());
  return std::move(made).value();
}

HostTensor HostTensor::random_f32(Shape shape, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> values(static_cast<size_t>(shape.num_elements()));
  for (float& v : values) {
    do {
      v = dist(rng);
    } while (v == 0.0f);
  }
  return f32(shape, values);
}

std::vector<float> HostTensor::to_f32() const {
  const auto n = static_cast<size_t>(shape.num_elements());
  std::vector<float> out(n);
  const std::byte* p = bytes.data();
  for (size_t i = 0; i < n; ++i) {
    switch (dtype) {
      case DType::kF32: out[i] = load<float>(p + 4 * i); break;
      case DType::kF16: out[i] = f16_to_f32(load<uint16_t>(p + 2 * i)); break;
      case DType::kBF16: out[i] = bf16_to_f32(load<uint16_t>(p + 2 * i)); break;
      case DType::kI8: out[i] = static_cast<float>(load<int8_t>(p + i)); break;
      case DType::kU8:
      case DType::kBool: out[i] = static_cast<float>(load<uint8_t>(p + i)); break;
      case DType::kI32: out[i] = static_cast<float>(load<int32_t>(p + 4 * i)); break;
      case DType::kI64: out[i] = static_cast<float>(load<int64_t>(p + 8 * i)); break;
      default: HXRT_CHECK(false, "to_f32 of {}", dtype);
    }
  }
  return out;
}

std::vector<int64_t> HostTensor::to_i64() const {
  const auto n = static_cast<size_t>(shape.num_elements());
  std::vector<int64_t> out(n);
  const std::byte* p = bytes.data();
  for (size_t i = 0; i < n; ++i) {
    switch (dtype) {
      case DType::kI8: out[i] = load<int8_t>(p + i); break;
      case DType::kU8:
      case DType::kBool: out[i] = load<uint8_t>(p + i); break;
      case DType::kI32: out[i] = load<int32_t>(p + 4 * i); break;
      case DType::kI64: out[i] = load<int64_t>(p + 8 * i); break;
      default: HXRT_CHECK(false, "to_i64 of {}", dtype);
    }
  }
  return out;
}

}  // namespace hxrt
