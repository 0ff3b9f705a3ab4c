// Shared by the CUDA kernel tests: the device comparisons of kernels/testing/device_compare.h on "cuda", skipped where
// no CUDA device exists (every CI machine here; scripts/device_check.sh runs them on a GPU).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "hxrt/hal/cuda/cuda_driver.h"
#include "kernels/testing/device_compare.h"

namespace hxrt::kernels::cuda {

using testing::HostTensor;
using testing::OpCall;
using testing::OpResult;
using testing::random_quantized;
using testing::random_signed;

// True when the CUDA driver finds a GPU.
inline bool cuda_available() {
  static const bool available = [] {
    std::unique_ptr<hal::Driver> driver = hal::make_cuda_driver({.disk_cache = false});
    Result<std::vector<hal::DeviceInfo>> devices = driver->enumerate();
    return devices.ok() && !devices->empty();
  }();
  return available;
}

#define HXRT_SKIP_WITHOUT_CUDA() \
  if (!::hxrt::kernels::cuda::cuda_available()) GTEST_SKIP() << "no CUDA device"

inline void expect_close_to_cpu(const OpCall& call, const std::string& kernel, double tolerance) {
  testing::expect_close_to_cpu(call, "cuda", kernel, tolerance);
}
inline void expect_same_bytes(OpCall call, const std::string& kernel) {
  testing::expect_same_bytes(std::move(call), "cuda", kernel);
}
inline Status cuda_status(OpCall call) { return testing::device_status(std::move(call), "cuda"); }

}  // namespace hxrt::kernels::cuda
