// The HAL conformance suite: tests written against the HAL contract only, run against every backend.
//
// A backend joins by adding a Backend entry in backends.cc that opens a device and provides three test kernels:
//   increment(buffer f32 data, scalar u32 count): data[i] += 1 for i < count
//   spin(scalar u64 microseconds): stays busy that long; stops early when its stream is aborted, where possible
//   fail(): completes with an error; null where the backend cannot make a kernel fail
// A backend whose driver is unavailable on this machine skips every test (it does not fail).
#pragma once

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "hxrt/hal/device.h"
#include "hxrt/hal/kernel.h"

namespace hxrt::hal::cts {

class TestKernels {
 public:
  virtual ~TestKernels() = default;
  virtual const Kernel* increment() const = 0;
  virtual const Kernel* spin() const = 0;
  virtual const Kernel* fail() const = 0;
};

struct Backend {
  std::string name;
  std::function<Result<std::unique_ptr<Device>>()> open;
  std::function<Result<std::unique_ptr<TestKernels>>(Device&)> make_kernels;
};

// gtest prints parameters into test names and ctest listings; print the backend name, not its bytes.
inline void PrintTo(const Backend& backend, std::ostream* os) { *os << backend.name; }

const std::vector<Backend>& conformance_backends();

// Backends, one function each (backends.cc lists them).
Backend cpu_backend();
Backend opencl_backend();
Backend cuda_backend();

}  // namespace hxrt::hal::cts
