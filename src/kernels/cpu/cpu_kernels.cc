#include "hxrt/kernels/cpu_kernels.h"

#include "kernels/cpu/registration.h"

namespace hxrt::kernels {

Status register_cpu_kernels(ops::KernelRegistry& registry) {
  HXRT_RETURN_IF_ERROR(cpu::register_elementwise(registry));
  HXRT_RETURN_IF_ERROR(cpu::register_normalization(registry));
  HXRT_RETURN_IF_ERROR(cpu::register_tensor_ops(registry));
  HXRT_RETURN_IF_ERROR(cpu::register_linear(registry));
  HXRT_RETURN_IF_ERROR(cpu::register_conv(registry));
  HXRT_RETURN_IF_ERROR(cpu::register_fused(registry));
  HXRT_RETURN_IF_ERROR(cpu::register_llm_ops(registry));
  HXRT_RETURN_IF_ERROR(cpu::register_moe(registry));
  HXRT_RETURN_IF_ERROR(cpu::register_math(registry));
  HXRT_RETURN_IF_ERROR(cpu::register_logic(registry));
  HXRT_RETURN_IF_ERROR(cpu::register_reduce(registry));
  HXRT_RETURN_IF_ERROR(cpu::register_shape_ops(registry));
  HXRT_RETURN_IF_ERROR(cpu::register_indexing(registry));
  HXRT_RETURN_IF_ERROR(cpu::register_pool(registry));
  HXRT_RETURN_IF_ERROR(cpu::register_sequence(registry));
  return ok_status();
}

}  // namespace hxrt::kernels
