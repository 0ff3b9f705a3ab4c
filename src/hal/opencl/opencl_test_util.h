// Shared setup of the OpenCL driver's unit tests: opens opencl:0 or skips when no OpenCL device exists.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "hxrt/hal/opencl/opencl_driver.h"

namespace hxrt::hal::opencl {

// The value of a Result that must be OK (aborts the test binary with the Status otherwise).
template <typename T>
T take(Result<T> result) {
  return std::move(result).value();
}

class OpenClTest : public testing::Test {
 protected:
  void open(const OpenClDriverOptions& options = {.disk_cache = false}) {
    driver_ = make_opencl_driver(options);
    Result<std::unique_ptr<Device>> device = driver_->open_device(0);
    if (!device.ok() && device.status().code() == StatusCode::kUnavailable) {
      GTEST_SKIP() << "no OpenCL device: " << device.status().to_string();
    }
    ASSERT_TRUE(device.ok()) << device.status().to_string();
    device_ = std::move(device).value();
  }
  void SetUp() override { open(); }

  std::unique_ptr<Module> load(const std::string& name, const std::string& code, const std::string& options = "") {
    Result<std::unique_ptr<Module>> module = device_->load_module(
        ModuleSource{.language = ModuleSource::Language::kOpenCLC, .name = name, .code = code, .options = options});
    EXPECT_TRUE(module.ok()) << module.status().to_string();
    return module.ok() ? std::move(module).value() : nullptr;
  }

  std::unique_ptr<Driver> driver_;
  std::unique_ptr<Device> device_;
};

}  // namespace hxrt::hal::opencl
