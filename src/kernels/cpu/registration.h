// CPU kernel registration, one function per op family (one file each in this folder);
// register_cpu_kernels() in cpu_kernels.cc calls them all.
#pragma once

#include <string>
#include <utility>

#include "hxrt/ops/kernel_registry.h"

namespace hxrt::kernels::cpu {

// A CPU kernel of `op_type` in `domain` named `name`; the caller sets its dtypes, attribute parser and launch.
inline ops::KernelDef cpu_kernel_def(std::string op_type, std::string domain, std::string name,
                                     std::string description) {
  ops::KernelDef def;
  def.op_type = std::move(op_type);
  def.domain = std::move(domain);
  def.name = std::move(name);
  def.description = std::move(description);
  return def;
}

Status register_elementwise(ops::KernelRegistry& registry);   // elementwise.cc
Status register_normalization(ops::KernelRegistry& registry); // normalization.cc
Status register_tensor_ops(ops::KernelRegistry& registry);    // tensor_ops.cc
Status register_linear(ops::KernelRegistry& registry);        // matmul.cc, quant_matmul.cc
Status register_conv(ops::KernelRegistry& registry);          // conv.cc
Status register_fused(ops::KernelRegistry& registry);         // fused.cc
Status register_llm_ops(ops::KernelRegistry& registry);       // llm_ops.cc
Status register_moe(ops::KernelRegistry& registry);           // moe.cc
Status register_math(ops::KernelRegistry& registry);  // math.cc
Status register_logic(ops::KernelRegistry& registry);  // logic.cc
Status register_reduce(ops::KernelRegistry& registry);  // reduce.cc
Status register_shape_ops(ops::KernelRegistry& registry);  // shape_ops.cc
Status register_indexing(ops::KernelRegistry& registry);  // indexing.cc
Status register_pool(ops::KernelRegistry& registry);  // pool.cc
Status register_sequence(ops::KernelRegistry& registry);  // sequence.cc

}  // namespace hxrt::kernels::cpu
