// JIT modules of the OpenCL device: programs built from OpenCL C (with the in-memory and on-disk binary cache) and
// their kernels.
//
// Thread-safety: OpenClModule is immutable after creation. clSetKernelArg is not thread-safe per cl_kernel, so
// streams setting arguments of one OpenClKernel hold its launch_mutex() from the first clSetKernelArg to the end of
// clEnqueueNDRangeKernel (arguments are captured at enqueue).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hal/opencl/cl_common.h"
#include "hxrt/hal/kernel.h"
#include "hxrt/hal/opencl/opencl_driver.h"

namespace hxrt::hal::opencl {

class OpenClDevice;

class OpenClKernel final : public Kernel {
 public:
  OpenClKernel(std::string qualified_name, ClKernelHandle kernel, cl_uint num_args)
      : Kernel(std::move(qualified_name), DeviceKind::kOpenCL), kernel_(std::move(kernel)), num_args_(num_args) {}

  cl_kernel get() const { return kernel_.get(); }
  cl_uint num_args() const { return num_args_; }
  std::mutex& launch_mutex() const { return launch_mutex_; }

 private:
  ClKernelHandle kernel_;
  cl_uint num_args_;
  mutable std::mutex launch_mutex_;
};

class OpenClModule final : public Module {
 public:
  OpenClModule(std::string name, ClProgram program, std::vector<std::unique_ptr<OpenClKernel>> kernels,
               OpenClModuleStats stats)
      : name_(std::move(name)), program_(std::move(program)), kernels_(std::move(kernels)), stats_(std::move(stats)) {}

  // `name` is the OpenCL function name.
  Result<const Kernel*> kernel(std::string_view name) const override;
  const OpenClModuleStats& stats() const { return stats_; }

 private:
  std::string name_;
  ClProgram program_;
  std::vector<std::unique_ptr<OpenClKernel>> kernels_;
  OpenClModuleStats stats_;
};

Result<std::unique_ptr<Module>> load_opencl_module(OpenClDevice& device, const ModuleSource& source);

// The on-disk cache directory for `options` (OpenClDriverOptions::cache_dir, then the environment chain).
std::string opencl_cache_dir(const OpenClDriverOptions& options);

}  // namespace hxrt::hal::opencl
