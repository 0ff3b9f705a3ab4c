// CUDA elementwise kernels: Add, Sub, Mul, Div with numpy broadcasting, the activations (Relu, Gelu, Sigmoid, Tanh,
// Silu, LeakyRelu) and the fused SwiGLU, one thread per output element. The launch code is shared with the OpenCL
// backend (kernels/jit/elementwise.cc); this file is the CUDA C++ it launches, the same float expressions in the same
// order as the CPU kernels (Note [Matching the CPU kernels on CUDA]).
#include <memory>
#include <string_view>
#include <vector>

#include "kernels/cuda/registration.h"

namespace hxrt::kernels::cuda {
namespace {

constexpr std::string_view kSource = R"CUDA(
#ifndef BINARY_OP
#define BINARY_OP 0
#endif
#ifndef UNARY_OP
#define UNARY_OP 0
#endif
#ifndef SAME_SHAPE
#define SAME_SHAPE 1
#endif

__device__ __forceinline__ float binary_op(float a, float b) {
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

__device__ __forceinline__ float silu(float x) { return x / (1.0f + hx_exp(-x)); }

__device__ __forceinline__ float unary_op(float x) {
#if UNARY_OP == 0
  return x > 0.0f ? x : 0.0f;
#elif UNARY_OP == 1
  return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
#elif UNARY_OP == 2
  return x / (1.0f + hx_exp(-2.0f * (0.79788456080286536f * (x + 0.044715f * x * x * x))));  // the CPU's gelu_tanh
#elif UNARY_OP == 3
  return 1.0f / (1.0f + hx_exp(-x));
#elif UNARY_OP == 4
  return tanhf(x);
#else
  return silu(x);
#endif
}

// The element of this thread. Unsigned: the last block of a grid covering 2^31 - 1 elements reaches past INT_MAX.
__device__ __forceinline__ unsigned element_index() { return blockIdx.x * blockDim.x + threadIdx.x; }

// dims (outermost first), sa and sb: the merged broadcast (element strides, 0 = broadcast).
extern "C" __global__ void binary(const float* a, const float* b, float* y, int n, int4 dims, int4 sa, int4 sb) {
  const unsigned u = element_index();
  if (u >= (unsigned)n) return;
  const int i = (int)u;
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

extern "C" __global__ void unary(const float* x, float* y, int n) {
  const unsigned u = element_index();
  if (u >= (unsigned)n) return;
  y[u] = unary_op(x[u]);
}

extern "C" __global__ void leaky_relu(const float* x, float* y, int n, float alpha) {
  const unsigned u = element_index();
  if (u >= (unsigned)n) return;
  const float v = x[u];
  y[u] = v < 0.0f ? alpha * v : v;
}

extern "C" __global__ void swiglu(const float* gate, const float* up, float* y, int n) {
  const unsigned u = element_index();
  if (u >= (unsigned)n) return;
  y[u] = silu(gate[u]) * up[u];
}
)CUDA";

std::shared_ptr<const CudaProgram> elementwise_program() {
  static const auto program = std::make_shared<const CudaProgram>("hxrt_elementwise", kSource);
  return program;
}

}  // namespace

Status register_elementwise(ops::KernelRegistry& registry) {
  return jit::register_elementwise(registry, cuda_backend(), elementwise_program());
}

std::vector<ProgramBuild> elementwise_builds() {
  const CudaProgram* program = elementwise_program().get();
  std::vector<ProgramBuild> builds;
  for (const jit::BinaryOp op : {jit::BinaryOp::kAdd, jit::BinaryOp::kSub, jit::BinaryOp::kMul, jit::BinaryOp::kDiv}) {
    for (const bool same_shape : {false, true}) builds.push_back({program, jit::binary_options(op, same_shape), {"binary"}});
  }
  for (const jit::UnaryOp op : {jit::UnaryOp::kRelu, jit::UnaryOp::kGeluErf, jit::UnaryOp::kGeluTanh,
                                jit::UnaryOp::kSigmoid, jit::UnaryOp::kTanh, jit::UnaryOp::kSilu}) {
    builds.push_back({program, jit::unary_options(op), {"unary"}});
  }
  builds.push_back({program, "", {"leaky_relu", "swiglu"}});
  return builds;
}

}  // namespace hxrt::kernels::cuda
