#include "hxrt/kernels/cuda_kernels.h"

#include "kernels/cuda/registration.h"

namespace hxrt::kernels {

Status register_cuda_kernels(ops::KernelRegistry& registry) {
  HXRT_RETURN_IF_ERROR(cuda::register_elementwise(registry));
  HXRT_RETURN_IF_ERROR(cuda::register_cast(registry));
  HXRT_RETURN_IF_ERROR(cuda::register_normalization(registry));
  HXRT_RETURN_IF_ERROR(cuda::register_tensor_ops(registry));
  HXRT_RETURN_IF_ERROR(cuda::register_linear(registry));
  HXRT_RETURN_IF_ERROR(cuda::register_quant_matmul(registry));
  HXRT_RETURN_IF_ERROR(cuda::register_llm_ops(registry));
  HXRT_RETURN_IF_ERROR(cuda::register_memcpy(registry));
  return ok_status();
}

}  // namespace hxrt::kernels
