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
  return ok_status();
}

}  // namespace hxrt::kernels
