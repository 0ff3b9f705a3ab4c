#include <chrono>

#include "hal_conformance/conformance.h"
#include "hxrt/hal/cpu/cpu_driver.h"
#include "hxrt/hal/cpu/cpu_kernel.h"

namespace hxrt::hal::cts {
namespace {

class CpuTestKernels final : public TestKernels {
 public:
  const Kernel* increment() const override { return &increment_; }
  const Kernel* spin() const override { return &spin_; }
  const Kernel* fail() const override { return &fail_; }

 private:
  CpuKernel increment_{"cts.increment", [](const CpuLaunchContext& ctx) {
                         auto* data = ctx.buffer<float>(0);
                         const auto count = ctx.scalar<uint32_t>(1);
                         ctx.pool().parallel_for(count, 1024, [&](int64_t begin, int64_t end) {
                           for (int64_t i = begin; i < end; ++i) data[i] += 1.0f;
                         });
                         return ok_status();
                       }};
  CpuKernel spin_{"cts.spin", [](const CpuLaunchContext& ctx) {
                    const auto end = std::chrono::steady_clock::now() +
                                     std::chrono::microseconds(ctx.scalar<uint64_t>(0));
                    while (std::chrono::steady_clock::now() < end) {
                      if (ctx.cancelled()) return aborted("cts.spin cancelled");
                    }
                    return ok_status();
                  }};
  CpuKernel fail_{"cts.fail", [](const CpuLaunchContext&) { return internal_error("cts.fail failed on purpose"); }};
};

}  // namespace

Backend cpu_backend() {
  static std::unique_ptr<Driver> driver = make_cpu_driver(CpuDriverOptions{.num_threads = 2});
  return Backend{
      .name = "cpu",
      .open = [] { return driver->open_device(0); },
      .make_kernels = [](Device&) -> Result<std::unique_ptr<TestKernels>> {
        return std::unique_ptr<TestKernels>(std::make_unique<CpuTestKernels>());
      },
  };
}

}  // namespace hxrt::hal::cts
