// Inputs and index arithmetic shared by the kernel tests: random values that are never zero (Guideline 10: tests
// compare against a reference on random inputs, never zeros) and row-major index conversions for references that
// walk a tensor element by element.
//
// Thread-safety: pure functions; the generator passed in is the caller's.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "hxrt/base/dtype.h"
#include "hxrt/base/host_tensor.h"
#include "hxrt/base/shape.h"

namespace hxrt::kernels::testing {

// n magnitudes uniform in [lo, hi), each negated with probability 1/2 when `signed_values`; never zero for lo > 0.
std::vector<float> random_values(int64_t n, std::mt19937& rng, float lo, float hi, bool signed_values = true);

// n values uniform in [lo, hi), redrawn when exactly zero (the values of HostTensor::random_f32).
std::vector<float> random_floats(int64_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f);

// A bool tensor of `shape` with each element true with probability 1/2.
HostTensor random_bools(const Shape& shape, std::mt19937& rng);

// Fills `bytes` (a whole number of `dtype` blocks, any quantized type of dtype.h) with random bits, then sets every
// block's f16 scale fields (d, and m / dmin where the type has one) so that its values are of order 0.1-1 and finite.
void fill_random_blocks(DType dtype, std::span<std::byte> bytes, std::mt19937& rng);

// The dims of `shape` as a vector (for comparisons and for index arithmetic on modified dims).
std::vector<int64_t> dims_of(const Shape& shape);

// Row-major flat index `i` → its multi-index in `dims`, and back.
std::vector<int64_t> unravel(int64_t i, std::span<const int64_t> dims);
std::vector<int64_t> unravel(int64_t i, const Shape& shape);
int64_t ravel(std::span<const int64_t> index, const Shape& shape);

}  // namespace hxrt::kernels::testing
