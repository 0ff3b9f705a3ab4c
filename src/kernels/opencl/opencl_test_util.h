// Shared by the OpenCL kernel tests: the device comparisons of kernels/testing/device_compare.h on "opencl".
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "hxrt/base/float16.h"
#include "hxrt/hal/opencl/opencl_driver.h"
#include "kernels/testing/device_compare.h"

namespace hxrt::kernels::opencl {

using testing::HostTensor;
using testing::OpCall;
using testing::OpResult;

// True when the OpenCL driver finds a device (PoCL on CI); the tests skip otherwise.
inline bool opencl_available() {
  static const bool available = [] {
    std::unique_ptr<hal::Driver> driver = hal::make_opencl_driver({.disk_cache = false});
    Result<std::vector<hal::DeviceInfo>> devices = driver->enumerate();
    return devices.ok() && !devices->empty();
  }();
  return available;
}

#define HXRT_SKIP_WITHOUT_OPENCL() \
  if (!::hxrt::kernels::opencl::opencl_available()) GTEST_SKIP() << "no OpenCL platform"

using testing::Comparison;
using testing::random_quantized;
using testing::random_signed;

inline Result<Comparison> compare_with_cpu(OpCall call) { return testing::compare_with_cpu(std::move(call), "opencl"); }
inline void expect_close_to_cpu(const OpCall& call, const std::string& kernel, double tolerance) {
  testing::expect_close_to_cpu(call, "opencl", kernel, tolerance);
}
inline void expect_same_bytes(OpCall call, const std::string& kernel) {
  testing::expect_same_bytes(std::move(call), "opencl", kernel);
}
inline Status opencl_status(OpCall call) { return testing::device_status(std::move(call), "opencl"); }

}  // namespace hxrt::kernels::opencl
