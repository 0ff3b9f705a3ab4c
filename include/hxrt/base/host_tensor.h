// HostTensor: a tensor in host memory — dtype, shape and row-major bytes. The value type for inputs and outputs
// that cross the API (files, tests, the CLI); device tensors are BufferViews plus a desc.
//
// Thread-safety: value type (thread-compatible).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "hxrt/base/dtype.h"
#include "hxrt/base/shape.h"
#include "hxrt/base/status.h"

namespace hxrt {

struct HostTensor {
  DType dtype = DType::kF32;
  Shape shape;
  std::vector<std::byte> bytes;

  // Typed constructors; abort when the value count does not match the shape (programmer error).
  static HostTensor f32(Shape shape, const std::vector<float>& values);
  static HostTensor i64(Shape shape, const std::vector<int64_t>& values);
  static HostTensor i32(Shape shape, const std::vector<int32_t>& values);
  // Raw bytes of any dtype (quantized weights); aborts when the size does not match.
  static HostTensor raw(DType dtype, Shape shape, std::vector<std::byte> bytes);
  // Validated: InvalidArgument when the byte count does not match dtype and shape.
  static Result<HostTensor> make(DType dtype, Shape shape, std::vector<std::byte> bytes);
  // Uniform random floats in [lo, hi), never exactly zero.
  static HostTensor random_f32(Shape shape, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f);

  // Element values as float (f32, f16, bf16, integer and bool dtypes; aborts on quantized).
  std::vector<float> to_f32() const;
  // Element values as int64 (integer and bool dtypes; aborts otherwise).
  std::vector<int64_t> to_i64() const;
  bool operator==(const HostTensor& other) const = default;
};

}  // namespace hxrt
