// CUDA kernel registration, one function per op family (one file each in this folder); register_cuda_kernels() in
// cuda_kernels.cc calls them all. Each family also lists the builds of its programs that the NVRTC check compiles
// for sm_90 on machines without a GPU (cuda_compile_test.cc).
#pragma once

#include <vector>

#include "hxrt/ops/kernel_registry.h"
#include "kernels/cuda/cuda_program.h"

namespace hxrt::kernels::cuda {

// elementwise.cc: binary (Add, Sub, Mul, Div with broadcasting), unary (Silu, ...), SwiGLU
Status register_elementwise(ops::KernelRegistry& registry);
std::vector<ProgramBuild> elementwise_builds();
Status register_cast(ops::KernelRegistry& registry);  // cast.cc: Cast
std::vector<ProgramBuild> cast_builds();
// normalization.cc: RMSNorm(Mul), Softmax, LayerNormalization, RoPE
Status register_normalization(ops::KernelRegistry& registry);
std::vector<ProgramBuild> normalization_builds();
// tensor_ops.cc: Reshape, Gather, Transpose, Slice, Concat
Status register_tensor_ops(ops::KernelRegistry& registry);
std::vector<ProgramBuild> tensor_ops_builds();
Status register_linear(ops::KernelRegistry& registry);  // matmul.cc: MatMul, Gemm, MatMulBias through cuBLAS
std::vector<ProgramBuild> linear_builds();
Status register_quant_matmul(ops::KernelRegistry& registry);  // quant_matmul.cc: MatMulQ
std::vector<ProgramBuild> quant_matmul_builds();
Status register_llm_ops(ops::KernelRegistry& registry);  // llm_ops.cc: GatherRows, PagedAttention
std::vector<ProgramBuild> llm_ops_builds();
Status register_memcpy(ops::KernelRegistry& registry);  // memcpy.cc: MemcpyToHost, MemcpyFromHost

}  // namespace hxrt::kernels::cuda
