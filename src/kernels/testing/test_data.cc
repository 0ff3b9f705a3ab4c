#include "kernels/testing/test_data.h"

#include <cstddef>

namespace hxrt::kernels::testing {

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
