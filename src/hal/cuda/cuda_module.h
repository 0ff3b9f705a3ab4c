// CUDA modules: NVRTC-compiled (or loaded) CUmodules and their kernels, the cubin cache, and library modules (cuBLAS)
// whose kernels are host functions that call the library on the stream.
//
// Thread-safety: modules and kernels are thread-safe (kernels are resolved once, under the module's lock).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>

#include "hal/cuda/cuda_api.h"
#include "hxrt/hal/kernel.h"

namespace hxrt::hal::cuda {

class CudaDevice;
class CudaStream;

// A __global__ function of a loaded module.
class CudaKernel final : public Kernel {
 public:
  CudaKernel(std::string name, CUfunction function, int param_count)
      : Kernel(std::move(name), DeviceKind::kCuda), function_(function), param_count_(param_count) {}
  CUfunction function() const { return function_; }
  // The number of parameters the function declares, or -1 when the driver cannot tell (then no ctl is passed).
  int param_count() const { return param_count_; }

 private:
  CUfunction function_;
  int param_count_;
};

// An entry point of a vendor library, run by the stream's worker with the stream's CUDA handles.
class CudaLibraryKernel : public Kernel {
 public:
  // Checks the arguments when the launch is enqueued (the enqueue call returns the error).
  virtual Status check(std::span<const KernelArg> args) const = 0;
  // Submits the work to `stream`'s CUstream (asynchronously).
  virtual Status run(CudaStream& stream, std::span<const KernelArg> args) const = 0;

 protected:
  explicit CudaLibraryKernel(std::string name) : Kernel(std::move(name), DeviceKind::kCuda) {}
};

// Loads CUDA C++ (compiled with NVRTC for the device's arch, through the cubin caches), PTX or a cubin/fatbin, or a
// library module ("cublas").
Result<std::unique_ptr<Module>> load_cuda_module(CudaDevice& device, const ModuleSource& source);

}  // namespace hxrt::hal::cuda
