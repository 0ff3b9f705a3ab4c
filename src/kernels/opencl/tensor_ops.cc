// OpenCL tensor ops: the OpenCL C of Gather and of the strided copies (Transpose, Slice, Concat) that the shared
// launch code in kernels/jit/tensor_ops.cc runs (its comment has the geometry). Gather's word and index type are build
// options; the copy kernels come in one program for the four element widths (1, 2, 4, 8 bytes).
#include <memory>
#include <string_view>

#include "kernels/opencl/jit_program.h"
#include "kernels/opencl/registration.h"

namespace hxrt::kernels::opencl {
namespace {

constexpr std::string_view kSource = R"CLC(
#ifndef WORD_BYTES
#define WORD_BYTES 4
#endif
#ifndef IDX_I64
#define IDX_I64 0
#endif
#if WORD_BYTES == 4
typedef uint word_t;
#elif WORD_BYTES == 2
typedef ushort word_t;
#else
typedef uchar word_t;
#endif

// y[o, k, :] = data[o, indices[k], :] for units u = o * n_indices + k, copied as words_per_row words per row.
__kernel void gather(__global const uchar* d_buf, ulong d_off, __global const uchar* i_buf, ulong i_off,
                     __global uchar* y_buf, ulong y_off, int n_units, int n_indices, int axis_dim, int words_per_row,
                     __global volatile int* ctl) {
  const int gid = get_global_id(0);
  if (gid >= n_units * words_per_row) return;
  const int unit = gid / words_per_row;
  const int word = gid % words_per_row;
  const int o = unit / n_indices;
  const int k = unit % n_indices;
#if IDX_I64
  long index = HX_AT(const long, i_buf, i_off)[k];
#else
  long index = HX_AT(const int, i_buf, i_off)[k];
#endif
  if (index < 0) index += axis_dim;
  if (index < 0 || index >= axis_dim) {
    ctl[1] = HX_OUT_OF_RANGE;
    return;
  }
  const ulong src = ((ulong)o * axis_dim + (ulong)index) * words_per_row + word;
  HX_AT(word_t, y_buf, y_off)[(ulong)gid] = HX_AT(const word_t, d_buf, d_off)[src];
}
)CLC";

constexpr std::string_view kCopySource = R"CLC(
// The source element of output element i: base + Σ c[d]·stride[d] with c = i's index in the dims (outermost first:
// hi.x .. hi.w, lo.x .. lo.w; unused leading dims are 1 with stride 0).
inline long source_index(int i, int4 dims_hi, int4 dims_lo, int4 strides_hi, int4 strides_lo, int base) {
  int rest = i;
  long s = base;
  s += (long)(rest % dims_lo.w) * strides_lo.w;
  rest /= dims_lo.w;
  s += (long)(rest % dims_lo.z) * strides_lo.z;
  rest /= dims_lo.z;
  s += (long)(rest % dims_lo.y) * strides_lo.y;
  rest /= dims_lo.y;
  s += (long)(rest % dims_lo.x) * strides_lo.x;
  rest /= dims_lo.x;
  s += (long)(rest % dims_hi.w) * strides_hi.w;
  rest /= dims_hi.w;
  s += (long)(rest % dims_hi.z) * strides_hi.z;
  rest /= dims_hi.z;
  s += (long)(rest % dims_hi.y) * strides_hi.y;
  rest /= dims_hi.y;
  return s + (long)rest * strides_hi.x;
}

// strided_copy_<bytes>: y[i] = x[source_index(i)] for the n output elements.
// concat_part_<bytes>: one input of Concat, viewed as rows of `row` elements, copied into the output rows of y_row
// elements starting at element y_start of each.
#define COPY_KERNELS(BYTES, T)                                                                                     \
  __kernel void strided_copy_##BYTES(__global const uchar* x_buf, ulong x_off, __global uchar* y_buf, ulong y_off, \
                                     int n, int4 dims_hi, int4 dims_lo, int4 strides_hi, int4 strides_lo,          \
                                     int base) {                                                                   \
    const int i = get_global_id(0);                                                                                \
    if (i >= n) return;                                                                                            \
    HX_AT(T, y_buf, y_off)[i] =                                                                                    \
        HX_AT(const T, x_buf, x_off)[source_index(i, dims_hi, dims_lo, strides_hi, strides_lo, base)];             \
  }                                                                                                                \
  __kernel void concat_part_##BYTES(__global const uchar* x_buf, ulong x_off, __global uchar* y_buf, ulong y_off,  \
                                    int n, int row, int y_row, int y_start) {                                      \
    const int i = get_global_id(0);                                                                                \
    if (i >= n) return;                                                                                            \
    HX_AT(T, y_buf, y_off)[(long)(i / row) * y_row + y_start + i % row] = HX_AT(const T, x_buf, x_off)[i];         \
  }

COPY_KERNELS(1, uchar)
COPY_KERNELS(2, ushort)
COPY_KERNELS(4, uint)
COPY_KERNELS(8, ulong)
)CLC";

}  // namespace

Status register_tensor_ops(ops::KernelRegistry& registry) {
  return jit::register_tensor_ops(registry, opencl_backend(),
                                  std::make_shared<const JitProgram>("hxrt_tensor_ops", kSource),
                                  std::make_shared<const JitProgram>("hxrt_copy", kCopySource));
}

}  // namespace hxrt::kernels::opencl
