// OpenCL kernel registration, one function per op family (one file each in this folder);
// register_opencl_kernels() in opencl_kernels.cc calls them all.
#pragma once

#include "hxrt/ops/kernel_registry.h"

namespace hxrt::kernels::opencl {

Status register_elementwise(ops::KernelRegistry& registry);   // elementwise.cc: binary, unary, SwiGLU
Status register_cast(ops::KernelRegistry& registry);          // cast.cc: Cast
// normalization.cc: RMSNorm(Mul), Softmax, LayerNormalization, RoPE
Status register_normalization(ops::KernelRegistry& registry);
// tensor_ops.cc: Reshape, Gather, Transpose, Slice, Concat
Status register_tensor_ops(ops::KernelRegistry& registry);
Status register_linear(ops::KernelRegistry& registry);        // matmul.cc: MatMul, Gemm, MatMulBias
Status register_quant_matmul(ops::KernelRegistry& registry);  // quant_matmul.cc: MatMulQ
Status register_conv(ops::KernelRegistry& registry);          // conv.cc: Conv, BatchNormalization, ConvBnRelu
Status register_llm_ops(ops::KernelRegistry& registry);       // llm_ops.cc: GatherRows, PagedAttention
Status register_memcpy(ops::KernelRegistry& registry);        // memcpy.cc: MemcpyToHost, MemcpyFromHost

}  // namespace hxrt::kernels::opencl
