// The OpenCL backend of the conformance suite: the first OpenCL device, and the three test kernels in OpenCL C.
//
// OpenCL C 1.2 has no clock, so `spin` counts loop iterations: it is built with HXRT_SPIN_ITERS_PER_US measured
// once per process (calibrate_spin below) and polls the stream's cancel word (ctl[0]) every iteration, which also
// keeps the loop from being optimised away. `fail` stores StatusCode::kInternal (12) into ctl[1].
#include <algorithm>
#include <chrono>
#include <cmath>

#include "hal_conformance/conformance.h"
#include "hxrt/hal/opencl/opencl_driver.h"

namespace hxrt::hal::cts {
namespace {

constexpr const char* kSource = R"CLC(
#ifndef HXRT_SPIN_ITERS_PER_US
#define HXRT_SPIN_ITERS_PER_US 1
#endif
__kernel void increment(__global float* data, uint count) {
  for (uint i = get_global_id(0); i < count; i += get_global_size(0)) data[i] += 1.0f;
}
__kernel void spin(ulong microseconds, __global volatile int* ctl) {
  const ulong iterations = microseconds * (ulong)HXRT_SPIN_ITERS_PER_US;
  for (ulong i = 0; i < iterations; ++i) {
    if (ctl[0] != 0) {
      ctl[1] = 9; /* StatusCode::kAborted */
      return;
    }
  }
}
__kernel void fail(__global volatile int* ctl) { ctl[1] = 12; /* StatusCode::kInternal */ }
)CLC";

class OpenClTestKernels final : public TestKernels {
 public:
  explicit OpenClTestKernels(std::unique_ptr<Module> module) : module_(std::move(module)) {}
  const Kernel* increment() const override { return *module_->kernel("increment"); }
  const Kernel* spin() const override { return *module_->kernel("spin"); }
  const Kernel* fail() const override { return *module_->kernel("fail"); }

 private:
  std::unique_ptr<Module> module_;
};

Result<std::unique_ptr<Module>> load(Device& device, uint64_t iterations_per_us) {
  return device.load_module(ModuleSource{.language = ModuleSource::Language::kOpenCLC,
                                         .name = "cts",
                                         .code = kSource,
                                         .options = fmt::format("-D HXRT_SPIN_ITERS_PER_US={}", iterations_per_us)});
}

// Loop iterations per microsecond of `spin`, from the fastest of a few timed runs (a loaded machine then makes
// spins longer, never shorter), rounded up to a step of 2^(1/4) so that runs share a few program-cache entries.
Result<uint64_t> calibrate_spin(Device& device) {
  constexpr uint64_t kIterations = 20'000'000;
  HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Module> module, load(device, 1));
  HXRT_ASSIGN_OR_RETURN(const Kernel* spin, module->kernel("spin"));
  HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Stream> stream, device.create_stream(StreamOptions{.name = "calibration"}));
  HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Event> start, device.create_event());
  HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Event> end, device.create_event());
  double best_ns = 1e30;
  for (int i = 0; i < 4; ++i) {
    const KernelArg args[] = {KernelArg::scalar(kIterations)};
    HXRT_RETURN_IF_ERROR(stream->record(*start));
    HXRT_RETURN_IF_ERROR(stream->launch(*spin, LaunchConfig{}, args));
    HXRT_RETURN_IF_ERROR(stream->record(*end));
    HXRT_RETURN_IF_ERROR(stream->synchronize());
    HXRT_ASSIGN_OR_RETURN(const Duration elapsed, end->elapsed_since(*start));
    if (i > 0) best_ns = std::min(best_ns, static_cast<double>(elapsed.count()));  // run 0 warms PoCL's cache
  }
  const double per_us = static_cast<double>(kIterations) / (best_ns / 1000.0);
  const double quarter_octaves = std::ceil(4.0 * std::log2(std::max(1.0, per_us)));
  return static_cast<uint64_t>(std::ceil(std::exp2(quarter_octaves / 4.0)));
}

}  // namespace

Backend opencl_backend() {
  static std::unique_ptr<Driver> driver = make_opencl_driver();
  return Backend{
      .name = "opencl",
      .open = [] { return driver->open_device(0); },
      .make_kernels = [](Device& device) -> Result<std::unique_ptr<TestKernels>> {
        static const Result<uint64_t> iterations_per_us = calibrate_spin(device);
        if (!iterations_per_us.ok()) return iterations_per_us.status();
        HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Module> module, load(device, *iterations_per_us));
        for (const char* name : {"increment", "spin", "fail"}) HXRT_RETURN_IF_ERROR(module->kernel(name).status());
        return std::unique_ptr<TestKernels>(std::make_unique<OpenClTestKernels>(std::move(module)));
      },
  };
}

}  // namespace hxrt::hal::cts
