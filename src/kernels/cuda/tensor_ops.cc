// CUDA tensor ops: Reshape (a device-to-device copy on the stream, none when the planner made input and output one
// view), Gather (a row copy by words: one thread per word of a gathered row, any plain dtype or whole quantized rows),
// and the strided copies Transpose, Slice and Concat (any plain dtype, one thread per element), launched by the code
// shared with OpenCL (kernels/jit/tensor_ops.cc); every op is a copy, so outputs are the CPU's bytes.
//
// Gather runs in blocks of 256 threads; its word (4, 2 or 1 bytes) is the widest that divides the row size and both
// views' device addresses, and the index type (i32/i64) is a build option, so six builds in all. An index outside
// [-axis_dim, axis_dim) skips its word and fails the stream with OUT_OF_RANGE (Note [CUDA kernel status words]).
#include <memory>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "kernels/cuda/registration.h"

namespace hxrt::kernels::cuda {
namespace {

constexpr std::string_view kSource = R"CUDA(
#ifndef WORD_BYTES
#define WORD_BYTES 4
#endif
#ifndef IDX_I64
#define IDX_I64 0
#endif
#if WORD_BYTES == 4
typedef hx_u32 word_t;
#elif WORD_BYTES == 2
typedef hx_u16 word_t;
#else
typedef hx_u8 word_t;
#endif
#if IDX_I64
typedef long long index_t;
#else
typedef int index_t;
#endif

// y[o, k, :] = data[o, indices[k], :] for units u = o * n_indices + k, copied as words_per_row words per row.
extern "C" __global__ void gather(const word_t* data, const index_t* indices, word_t* y, int n_units, int n_indices,
                                  int axis_dim, int words_per_row, volatile int* ctl) {
  const int gid = blockIdx.x * blockDim.x + threadIdx.x;
  if (gid >= n_units * words_per_row) return;
  const int unit = gid / words_per_row;
  const int word = gid % words_per_row;
  const int o = unit / n_indices;
  const int k = unit % n_indices;
  long long index = indices[k];
  if (index < 0) index += axis_dim;
  if (index < 0 || index >= axis_dim) {
    ctl[1] = HX_OUT_OF_RANGE;
    return;
  }
  const hx_u64 src = ((hx_u64)o * axis_dim + (hx_u64)index) * words_per_row + word;
  y[gid] = data[src];
}
)CUDA";

constexpr std::string_view kCopySource = R"CUDA(
// The source element of output element i: base + Σ c[d]·stride[d] with c = i's index in the dims (outermost first:
// hi.x .. hi.w, lo.x .. lo.w; unused leading dims are 1 with stride 0).
__device__ __forceinline__ long long source_index(int i, int4 dims_hi, int4 dims_lo, int4 strides_hi,
                                                  int4 strides_lo, int base) {
  int rest = i;
  long long s = base;
  s += (long long)(rest % dims_lo.w) * strides_lo.w;
  rest /= dims_lo.w;
  s += (long long)(rest % dims_lo.z) * strides_lo.z;
  rest /= dims_lo.z;
  s += (long long)(rest % dims_lo.y) * strides_lo.y;
  rest /= dims_lo.y;
  s += (long long)(rest % dims_lo.x) * strides_lo.x;
  rest /= dims_lo.x;
  s += (long long)(rest % dims_hi.w) * strides_hi.w;
  rest /= dims_hi.w;
  s += (long long)(rest % dims_hi.z) * strides_hi.z;
  rest /= dims_hi.z;
  s += (long long)(rest % dims_hi.y) * strides_hi.y;
  rest /= dims_hi.y;
  return s + (long long)rest * strides_hi.x;
}

// strided_copy_<bytes>: y[i] = x[source_index(i)] for the n output elements.
// concat_part_<bytes>: one input of Concat, viewed as rows of `row` elements, copied into the output rows of y_row
// elements starting at element y_start of each.
#define COPY_KERNELS(BYTES, T)                                                                                      \
  extern "C" __global__ void strided_copy_##BYTES(const T* x, T* y, int n, int4 dims_hi, int4 dims_lo,            \
                                                  int4 strides_hi, int4 strides_lo, int base) {                   \
    const int i = blockIdx.x * blockDim.x + threadIdx.x;                                                          \
    if (i >= n) return;                                                                                           \
    y[i] = x[source_index(i, dims_hi, dims_lo, strides_hi, strides_lo, base)];                                    \
  }                                                                                                               \
  extern "C" __global__ void concat_part_##BYTES(const T* x, T* y, int n, int row, int y_row, int y_start) {     \
    const int i = blockIdx.x * blockDim.x + threadIdx.x;                                                          \
    if (i >= n) return;                                                                                           \
    y[(long long)(i / row) * y_row + y_start + i % row] = x[i];                                                   \
  }

COPY_KERNELS(1, hx_u8)
COPY_KERNELS(2, hx_u16)
COPY_KERNELS(4, hx_u32)
COPY_KERNELS(8, hx_u64)
)CUDA";

std::shared_ptr<const CudaProgram> gather_program() {
  static const auto program = std::make_shared<const CudaProgram>("hxrt_tensor_ops", kSource);
  return program;
}

std::shared_ptr<const CudaProgram> copy_program() {
  static const auto program = std::make_shared<const CudaProgram>("hxrt_copy", kCopySource);
  return program;
}

}  // namespace

Status register_tensor_ops(ops::KernelRegistry& registry) {
  return jit::register_tensor_ops(registry, cuda_backend(), gather_program(), copy_program());
}

std::vector<ProgramBuild> tensor_ops_builds() {
  std::vector<ProgramBuild> builds;
  for (uint64_t word : {4u, 2u, 1u}) {
    for (bool i64 : {false, true}) builds.push_back({gather_program().get(), jit::gather_options(word, i64), {"gather"}});
  }
  ProgramBuild copies{copy_program().get(), "", {}};
  for (int bytes : {1, 2, 4, 8}) {
    copies.functions.push_back(fmt::format("strided_copy_{}", bytes));
    copies.functions.push_back(fmt::format("concat_part_{}", bytes));
  }
  builds.push_back(std::move(copies));
  return builds;
}

}  // namespace hxrt::kernels::cuda
