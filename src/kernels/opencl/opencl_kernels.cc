#include "hxrt/kernels/opencl_kernels.h"

#include "kernels/opencl/registration.h"

namespace hxrt::kernels {

Status register_opencl_kernels(ops::KernelRegistry& registry) {
  HXRT_RETURN_IF_ERROR(opencl::register_elementwise(registry));
  HXRT_RETURN_IF_ERROR(opencl::register_cast(registry));
  HXRT_RETURN_IF_ERROR(opencl::register_normalization(registry));
  HXRT_RETURN_IF_ERROR(opencl::register_tensor_ops(registry));
  HXRT_RETURN_IF_ERROR(opencl::register_linear(registry));
  HXRT_RETURN_IF_ERROR(opencl::register_quant_matmul(registry));
  HXRT_RETURN_IF_ERROR(opencl::register_conv(registry));
  HXRT_RETURN_IF_ERROR(opencl::register_llm_ops(registry));
  HXRT_RETURN_IF_ERROR(opencl::register_memcpy(registry));
  return ok_status();
}

}  // namespace hxrt::kernels
