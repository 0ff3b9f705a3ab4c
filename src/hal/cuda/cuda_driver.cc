#include <cstdlib>
#include <cstring>

#include "hal/cuda/cuda_drivers.h"

namespace hxrt::hal {

std::unique_ptr<Driver> make_cuda_driver(const CudaDriverOptions& options) {
  const char* emulate = std::getenv("HXRT_CUDA_EMULATOR");
  if (options.emulate || (emulate != nullptr && std::strcmp(emulate, "1") == 0)) {
    return cuda::make_emulator_driver(options);
  }
  return cuda::make_hardware_driver(options);
}

}  // namespace hxrt::hal
