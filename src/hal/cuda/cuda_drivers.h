// The two implementations behind make_cuda_driver(): the hardware driver (cuda_device.cc, or cuda_unavailable.cc in a
// build without the toolkit) and the emulator (cuda_emulator.cc). make_cuda_driver (cuda_driver.cc) picks one.
//
// Thread-safety: as Driver.
#pragma once

#include <memory>

#include "hxrt/hal/cuda/cuda_driver.h"

namespace hxrt::hal::cuda {

std::unique_ptr<Driver> make_hardware_driver(const CudaDriverOptions& options);
std::unique_ptr<Driver> make_emulator_driver(const CudaDriverOptions& options);

}  // namespace hxrt::hal::cuda
