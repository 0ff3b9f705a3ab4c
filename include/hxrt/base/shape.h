// Shape: a concrete tensor shape of at most kMaxRank dimensions, stored inline (no allocation).
//
// Symbolic dimensions (`batch`, `seq`) belong to graph/TensorDesc; by the time a shape reaches a kernel or an
// allocator every dimension is a known non-negative integer.
//
// Thread-safety: value type (thread-compatible).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

#include "hxrt/base/status.h"

namespace hxrt {

class Shape {
 public:
  static constexpr int kMaxRank = 8;

  Shape() = default;  // rank 0: a scalar with one element
  // Aborts on rank > kMaxRank or a negative dimension; use Shape::make for untrusted input.
  Shape(std::initializer_list<int64_t> dims);
  // Validates untrusted dimensions: rank, non-negative dims, and an element count that fits in int64.
  static Result<Shape> make(std::span<const int64_t> dims);

  int rank() const { return rank_; }
  int64_t dim(int axis) const;  // negative axes count from the end
  std::span<const int64_t> dims() const { return {dims_.data(), static_cast<size_t>(rank_)}; }
  // Product of dims; 1 for a scalar. Validated not to overflow at construction.
  int64_t num_elements() const;
  // Row-major strides in elements.
  std::array<int64_t, kMaxRank> strides() const;

  std::string to_string() const;  // "[2, 3, 4]"
  bool operator==(const Shape& other) const;

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

}  // namespace hxrt

template <>
struct fmt::formatter<hxrt::Shape> : fmt::formatter<std::string> {
  auto format(const hxrt::Shape& s, format_context& ctx) const {
    return fmt::formatter<std::string>::format(s.to_string(), ctx);
  }
};
