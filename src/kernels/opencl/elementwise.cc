// OpenCL elementwise kernels: Add, Sub, Mul, Div with numpy broadcasting, the activations (Relu, Gelu, Sigmoid,
// Tanh, Silu, LeakyRelu) and the fused SwiGLU, one work-item per output element. The launch code is shared with the
// CUDA backend (kernels/jit/elementwise.cc); this file is the OpenCL C it launches.
#include <memory>
#include <string_view>

#include "kernels/opencl/jit_program.h"
#include "kernels/opencl/registration.h"

namespace hxrt::kernels::opencl {
namespace {

constexpr std::string_view kSource = R"CLC(
#ifndef BINARY_OP
#define BINARY_OP 0
#endif
#ifndef UNARY_OP
#define UNARY_OP 0
#endif
#ifndef SAME_SHAPE
#define SAME_SHAPE 1
#endif

inline float binary_op(float a, float b) {
#if BINARY_OP == 0
  return a + b;
#elif BINARY_OP == 1
  return a - b;
#elif BINARY_OP == 2
  return a * b;
#else
  return a / b;
#endif
}

inline float silu(float x) { return x / (1.0f + hx_exp(-x)); }

inline float unary_op(float x) {
#if UNARY_OP == 0
  return x > 0.0f ? x : 0.0f;
#elif UNARY_OP == 1
  return 0.5f * x * (1.0f + erf(x * 0.70710678118654752f));
#elif UNARY_OP == 2
  return x / (1.0f + hx_exp(-2.0f * (0.79788456080286536f * (x + 0.044715f * x * x * x))));  // the CPU's gelu_tanh
#elif UNARY_OP == 3
  return 1.0f / (1.0f + hx_exp(-x));
#elif UNARY_OP == 4
  return tanh(x);
#else
  return silu(x);
#endif
}

// dims (outermost first), sa and sb: the merged broadcast (element strides, 0 = broadcast).
__kernel void binary(__global const uchar* a_buf, ulong a_off, __global const uchar* b_buf, ulong b_off,
                     __global uchar* y_buf, ulong y_off, int n, int4 dims, int4 sa, int4 sb) {
  const int i = get_global_id(0);
  if (i >= n) return;
  __global const float* a = HX_AT(const float, a_buf, a_off);
  __global const float* b = HX_AT(const float, b_buf, b_off);
  __global float* y = HX_AT(float, y_buf, y_off);
#if SAME_SHAPE
  y[i] = binary_op(a[i], b[i]);
#else
  int rest = i;
  const int c3 = rest % dims.w;
  rest /= dims.w;
  const int c2 = rest % dims.z;
  rest /= dims.z;
  const int c1 = rest % dims.y;
  const int c0 = rest / dims.y;
  const int ia = c0 * sa.x + c1 * sa.y + c2 * sa.z + c3 * sa.w;
  const int ib = c0 * sb.x + c1 * sb.y + c2 * sb.z + c3 * sb.w;
  y[i] = binary_op(a[ia], b[ib]);
#endif
}

__kernel void unary(__global const uchar* x_buf, ulong x_off, __global uchar* y_buf, ulong y_off, int n) {
  const int i = get_global_id(0);
  if (i >= n) return;
  HX_AT(float, y_buf, y_off)[i] = unary_op(HX_AT(const float, x_buf, x_off)[i]);
}

__kernel void leaky_relu(__global const uchar* x_buf, ulong x_off, __global uchar* y_buf, ulong y_off, int n,
                         float alpha) {
  const int i = get_global_id(0);
  if (i >= n) return;
  const float v = HX_AT(const float, x_buf, x_off)[i];
  HX_AT(float, y_buf, y_off)[i] = v < 0.0f ? alpha * v : v;
}

__kernel void swiglu(__global const uchar* g_buf, ulong g_off, __global const uchar* u_buf, ulong u_off,
                     __global uchar* y_buf, ulong y_off, int n) {
  const int i = get_global_id(0);
  if (i >= n) return;
  HX_AT(float, y_buf, y_off)[i] = silu(HX_AT(const float, g_buf, g_off)[i]) * HX_AT(const float, u_buf, u_off)[i];
}
)CLC";

}  // namespace

Status register_elementwise(ops::KernelRegistry& registry) {
  return jit::register_elementwise(registry, opencl_backend(),
                                   std::make_shared<const JitProgram>("hxrt_elementwise", kSource));
}

}  // namespace hxrt::kernels::opencl
