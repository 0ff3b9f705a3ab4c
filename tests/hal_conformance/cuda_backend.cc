// The CUDA backend of the conformance suite: the first CUDA device, and the three test kernels in CUDA C++. Where the
// CUDA driver is unavailable (no GPU) every conformance test skips; the kernels' source still compiles here through
// NVRTC for sm_90 (CudaConformanceKernels.CompileForSm90), which needs no GPU.
//
// `spin` reads the GPU's global timer (nanoseconds) and polls the stream's cancel word (ctl[0]) every iteration;
// `fail` stores StatusCode::kInternal (12) into ctl[1].
#include <gtest/gtest.h>

#include "hal_conformance/conformance.h"
#include "hxrt/hal/cuda/cuda_driver.h"

namespace hxrt::hal::cts {
namespace {

constexpr const char* kSource = R"CUDA(
extern "C" __global__ void increment(float* data, unsigned count) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) data[i] += 1.0f;
}
__device__ unsigned long long global_ns() {
#ifdef HXRT_CUDA_EMULATION
  return hxemu_global_ns();
#else
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#endif
}
extern "C" __global__ void spin(unsigned long long microseconds, volatile int* ctl) {
  const unsigned long long end = global_ns() + microseconds * 1000ull;
  while (global_ns() < end) {
    if (ctl[0] != 0) {
      ctl[1] = 9; /* StatusCode::kAborted */
      return;
    }
  }
}
extern "C" __global__ void fail(volatile int* ctl) { ctl[1] = 12; /* StatusCode::kInternal */ }
)CUDA";

class CudaTestKernels final : public TestKernels {
 public:
  explicit CudaTestKernels(std::unique_ptr<Module> module) : module_(std::move(module)) {}
  const Kernel* increment() const override { return *module_->kernel("increment"); }
  const Kernel* spin() const override { return *module_->kernel("spin"); }
  const Kernel* fail() const override { return *module_->kernel("fail"); }

 private:
  std::unique_ptr<Module> module_;
};

TEST(CudaConformanceKernels, CompileForSm90) {
  Result<CudaCompiled> compiled = cuda_compile("cts", kSource, "", "sm_90");
  if (!compiled.ok() && compiled.status().code() == StatusCode::kUnavailable) {
    GTEST_SKIP() << compiled.status().to_string();
  }
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  ASSERT_GE(compiled->cubin.size(), 4u);
  EXPECT_EQ(compiled->cubin.substr(0, 4), std::string("\x7f" "ELF"));
}

}  // namespace

Backend cuda_backend() {
  static std::unique_ptr<Driver> driver = make_cuda_driver(CudaDriverOptions{.disk_cache = false});
  return Backend{
      .name = "cuda",
      .open = [] { return driver->open_device(0); },
      .make_kernels = [](Device& device) -> Result<std::unique_ptr<TestKernels>> {
        HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Module> module,
                              device.load_module(ModuleSource{.language = ModuleSource::Language::kCudaCpp,
                                                              .name = "cts",
                                                              .code = kSource}));
        for (const char* name : {"increment", "spin", "fail"}) HXRT_RETURN_IF_ERROR(module->kernel(name).status());
        return std::unique_ptr<TestKernels>(std::make_unique<CudaTestKernels>(std::move(module)));
      },
  };
}

}  // namespace hxrt::hal::cts
