// Launch helpers every JIT-compiled kernel family shares (OpenCL and CUDA): build options from tilings, 1-D launch
// geometry, 32-bit index checks, and the merging of broadcast dims into a few strided ones.
//
// Thread-safety: reentrant functions.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

#include "hxrt/base/status.h"
#include "hxrt/hal/kernel.h"
#include "hxrt/ops/kernel_def.h"

namespace hxrt::kernels {

// " -D NAME=value" for each named tiling value (name upper-cased), in the order given; a missing value is 0.
std::string tiling_defines(const ops::Tiling& tiling, std::initializer_list<std::string_view> names);

// A 1-D launch of at least `items` work-items in groups of `group` (the kernel checks bounds).
hal::LaunchConfig launch_1d(int64_t items, uint32_t group);

// The smallest power of two >= n (n >= 1).
int64_t next_power_of_two(int64_t n);

// InvalidArgument unless 0 <= value < 2^31: kernels index with 32-bit ints where that keeps the code vectorisable.
Status check_int32(int64_t value, std::string_view what);

// Tiling of an op that is one copy command of its first input's bytes: {"copy_bytes", n}.
Result<ops::Tiling> copy_bytes_tiling(const ops::TilingQuery& query);

// Two operands broadcast numpy-style over right-aligned dims, merged (innermost first) wherever both step through
// adjacent dims contiguously or stay put, into at most kMaxMergedDims dims, right-aligned (outermost first, leading
// dims 1). Strides are in elements; `a_inner` / `b_inner` are what one step of the innermost dim skips (1 for an
// elementwise op, one matrix for MatMul's batch dims). A broadcast dim has stride 0.
inline constexpr int kMaxMergedDims = 4;
struct MergedBroadcast {
  std::array<int32_t, kMaxMergedDims> dims{1, 1, 1, 1};
  std::array<int32_t, kMaxMergedDims> a_strides{0, 0, 0, 0};
  std::array<int32_t, kMaxMergedDims> b_strides{0, 0, 0, 0};
  int merged_rank = 0;  // dims needed after merging; the arrays are filled only when <= kMaxMergedDims
};
MergedBroadcast merge_broadcast_dims(std::span<const int64_t> a_dims, std::span<const int64_t> b_dims, int64_t a_inner,
                                     int64_t b_inner);

}  // namespace hxrt::kernels
