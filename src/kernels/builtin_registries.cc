#include "hxrt/kernels/builtin_registries.h"

#include "hxrt/kernels/cpu_kernels.h"
#include "hxrt/kernels/cuda_kernels.h"
#include "hxrt/kernels/opencl_kernels.h"
#include "kernels/collectives.h"

namespace hxrt::kernels {

Result<std::unique_ptr<ops::Registries>> make_builtin_registries(const BuiltinRegistriesOptions& options) {
  HXRT_ASSIGN_OR_RETURN(std::unique_ptr<ops::Registries> registries,
                        ops::make_registries(ops::RegistriesOptions{.builtin_fusions = options.fusions}));
  if (options.cpu_kernels) {
    HXRT_RETURN_IF_ERROR_CTX(register_cpu_kernels(registries->kernels), "registering the CPU kernels");
    HXRT_RETURN_IF_ERROR_CTX(register_collective_kernels(registries->kernels, hal::DeviceKind::kCpu),
                             "registering the CPU collective kernels");
  }
  if (options.opencl_kernels) {
    HXRT_RETURN_IF_ERROR_CTX(register_opencl_kernels(registries->kernels), "registering the OpenCL kernels");
    HXRT_RETURN_IF_ERROR_CTX(register_collective_kernels(registries->kernels, hal::DeviceKind::kOpenCL),
                             "registering the OpenCL collective kernels");
  }
  if (options.cuda_kernels) {
    HXRT_RETURN_IF_ERROR_CTX(register_cuda_kernels(registries->kernels), "registering the CUDA kernels");
  }
  return registries;
}

}  // namespace hxrt::kernels
