// Shared by the device kernel tests of kernels/jit (one test body, run on each JIT backend's device): the
// comparisons of kernels/testing/device_compare.h with the device as the test's parameter, and a skip where that
// device is absent (OpenCL without a platform; CUDA without a GPU unless HXRT_CUDA_EMULATOR=1).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "hxrt/hal/cuda/cuda_driver.h"
#include "hxrt/hal/opencl/opencl_driver.h"
#include "kernels/testing/device_compare.h"

namespace hxrt::kernels::jit {

using testing::device_status;
using testing::expect_close_to_cpu;
using testing::expect_same_bytes;
using testing::HostTensor;
using testing::OpCall;
using testing::OpResult;
using testing::random_quantized;
using testing::random_signed;

// True when the driver of `device` ("opencl", "cuda") finds a device.
inline bool device_available(const std::string& device) {
  const auto probe = [](std::unique_ptr<hal::Driver> driver) {
    Result<std::vector<hal::DeviceInfo>> devices = driver->enumerate();
    return devices.ok() && !devices->empty();
  };
  if (device == "opencl") {
    static const bool opencl = probe(hal::make_opencl_driver({.disk_cache = false}));
    return opencl;
  }
  static const bool cuda = probe(hal::make_cuda_driver({.disk_cache = false}));
  return cuda;
}

// Every test of these suites runs once per JIT backend; the parameter is the device spec.
class DeviceKernelTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!device_available(GetParam())) GTEST_SKIP() << "no " << GetParam() << " device";
  }
  const std::string& device() const { return GetParam(); }
};

#define HXRT_DEVICE_KERNEL_TESTS(suite)                                                                    \
  INSTANTIATE_TEST_SUITE_P(Devices, suite, ::testing::Values(std::string("opencl"), std::string("cuda")), \
                           [](const ::testing::TestParamInfo<std::string>& param_info) { return param_info.param; })

}  // namespace hxrt::kernels::jit
