// Helpers shared by the CPU kernel families: running a body over chunks of a range, and the pieces of the kernels
// that move elements by size (the byte width of a plain dtype, chunks of a parallel copy, i32/i64 index inputs).
//
// Thread-safety: pure functions; run_chunks calls `body` concurrently on disjoint ranges.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "hxrt/base/dtype.h"
#include "hxrt/base/status.h"
#include "hxrt/base/thread_pool.h"
#include "hxrt/ops/kernel_def.h"

namespace hxrt::kernels::cpu {

// Runs body(begin, end) over [0, n) on `pool` in chunks of at least `grain`, or inline as one chunk when there is no
// pool or n <= grain. Nothing runs when n <= 0.
template <typename Body>
void run_chunks(ThreadPool* pool, int64_t n, int64_t grain, Body&& body) {
  if (pool != nullptr && n > grain) {
    pool->parallel_for(n, grain, body);
  } else if (n > 0) {
    body(0, n);
  }
}

// Bytes per chunk of a parallel copy: large enough to amortise scheduling, small enough to spread a few MiB over
// the cores. A kernel's tiling may override it with the value "grain_bytes".
inline constexpr int64_t kCopyGrainBytes = 256 * 1024;

// Copy units of `unit_bytes` per chunk under `tiling` (at least 1).
int64_t copy_units_per_chunk(const ops::Tiling& tiling, int64_t unit_bytes);

// The tiling of a kernel that copies its output 0: chunks of "grain_bytes" (kCopyGrainBytes) of that output.
ops::TilingFn copy_tiling();

// Bytes per element of `dtype`; InvalidArgument naming `op` for a block-quantized dtype.
Result<size_t> plain_element_bytes(DType dtype, std::string_view op);

// The values of an i32 or i64 tensor (indices, pads, Slice's starts); InvalidArgument naming `op` and the input
// `name` for another dtype.
Result<std::vector<int64_t>> read_int_values(const ops::TensorRef& t, std::string_view op, std::string_view name);

}  // namespace hxrt::kernels::cpu
