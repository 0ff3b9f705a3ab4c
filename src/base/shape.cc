#include "hxrt/base/shape.h"

#include <fmt/ranges.h>

#include "hxrt/base/check.h"

namespace hxrt {

Shape::Shape(std::initializer_list<int64_t> dims) {
  Result<Shape> made = make(std::span<const int64_t>(dims.begin(), dims.size()));
  HXRT_CHECK(made.ok(), "{}", made.status().to_string());
  *this = *made;
}

Result<Shape> Shape::make(std::span<const int64_t> dims) {
  if (dims.size() > static_cast<size_t>(kMaxRank)) {
    return invalid_argument("rank {} exceeds the maximum rank {}", dims.size(), kMaxRank);
  }
  Shape shape;
  int64_t elements = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0) return invalid_argument("dimension {} is negative ({})", i, dims[i]);
    if (__builtin_mul_overflow(elements, dims[i], &elements)) {
      return out_of_range("shape [{}] has more elements than fit in int64", fmt::join(dims, ", "));
    }
    shape.dims_[i] = dims[i];
  }
  shape.rank_ = static_cast<int>(dims.size());
  return shape;
}

int64_t Shape::dim(int axis) const {
  const int resolved = axis < 0 ? axis + rank_ : axis;
  HXRT_CHECK(resolved >= 0 && resolved < rank_, "axis {} out of range for rank {}", axis, rank_);
  return dims_[static_cast<size_t>(resolved)];
}

int64_t Shape::num_elements() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[static_cast<size_t>(i)];
  return n;
}

std::array<int64_t, Shape::kMaxRank> Shape::strides() const {
  std::array<int64_t, kMaxRank> strides{};
  int64_t stride = 1;
  for (int i = rank_ - 1; i >= 0; --i) {
    strides[static_cast<size_t>(i)] = stride;
    stride *= dims_[static_cast<size_t>(i)];
  }
  return strides;
}

std::string Shape::to_string() const { return fmt::format("[{}]", fmt::join(dims(), ", ")); }

bool Shape::operator==(const Shape& other) const {
  if (rank_ != other.rank_) return false;
  for (int i = 0; i < rank_; ++i) {
    if (dims_[static_cast<size_t>(i)] != other.dims_[static_cast<size_t>(i)]) return false;
  }
  return true;
}

}  // namespace hxrt
