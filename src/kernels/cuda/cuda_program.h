// What every CUDA kernel family shares: CudaProgram (a family's CUDA C++ source and its compiled modules, one per
// device and build options), the argument convention, and the list of builds the NVRTC check compiles.
//
// Note [CUDA tensor arguments]
// A tensor is passed as one argument, the device address of its view's first byte (CUDA needs no sub-buffers), typed
// in the kernel's signature (`const float* x`). Scalars follow as int (32-bit indices; the launch code checks they
// fit) or float.
//
// Note [CUDA kernel status words]
// As on OpenCL (Note [Kernel status words] in kernels/opencl/jit_program.h): a kernel that validates indices or can
// be aborted declares `volatile int* ctl` as its last parameter, which the launch does not pass (the stream does:
// hal/cuda/cuda_driver.h). A bad index stores HX_INVALID_ARGUMENT / HX_OUT_OF_RANGE into ctl[1] and skips the access;
// long kernels read ctl[0] once per block and return (storing HX_ABORTED) when the stream was aborted.
//
// Note [Matching the CPU kernels on CUDA]
// The CUDA kernels repeat the CPU kernels' float operations, as the OpenCL ones do (Note [Matching the CPU kernels] in
// kernels/opencl/jit_program.cc), so that a CUDA device gives the CPU's greedy tokens: every program is compiled with
// --fmad=false (no contraction; fmaf() exactly where the CPU uses FMA), hx_exp is glibc's expf algorithm in double,
// f16 conversions are the hardware's round-to-nearest-even (cvt.rn), reductions keep the CPU's lane order where the
// CPU kernel has one, and accumulate in double where the CPU does.
//
// Thread-safety: CudaProgram is thread-safe; the helpers are reentrant.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hxrt/base/status.h"
#include "hxrt/hal/device.h"
#include "hxrt/hal/kernel.h"
#include "hxrt/hal/stream.h"
#include "hxrt/ops/kernel_def.h"
#include "kernels/jit/jit_family.h"
#include "kernels/launch_util.h"

namespace hxrt::kernels::cuda {

// CUDA C++ prepended to every program: HX_* status codes, hx_half_to_float / hx_float_to_half / hx_round_half, hx_exp,
// and block reductions (hx_block_sum_double, hx_block_max).
extern const char* const kCudaPrelude;

class CudaProgram final : public jit::Program {
 public:
  // `source` is the family's CUDA C++ (extern "C" __global__ functions), without the prelude.
  CudaProgram(std::string name, std::string_view source);
  CudaProgram(const CudaProgram&) = delete;
  CudaProgram& operator=(const CudaProgram&) = delete;

  // The kernel `function` of this program built with `options` (e.g. "-D WTYPE=2") on `device`: compiled on the first
  // request for that pair (through the driver's cubin caches), then kept by the device (Device::shared_module).
  Result<const hal::Kernel*> kernel(hal::Device& device, const std::string& options,
                                    std::string_view function) const override;
  const std::string& name() const { return name_; }
  // Prelude + family source, as compiled.
  const std::string& source() const { return source_; }
  // The options every build adds to the caller's (Note [Matching the CPU kernels on CUDA]).
  static std::string build_options(const std::string& options);

 private:
  std::string name_;
  std::string source_;
  std::string key_;
};

// One build of a program that the NVRTC check (cuda_compile_test.cc) compiles for sm_90: the program, a set of build
// options a launch can produce, and the functions the launch code looks up in it.
struct ProgramBuild {
  const CudaProgram* program = nullptr;
  std::string options;
  std::vector<std::string> functions;
};

// Appends a tensor's argument: the device address of its view (Note [CUDA tensor arguments]).
void add_tensor_arg(std::vector<hal::KernelArg>& args, const ops::TensorRef& tensor);

// Enqueues `function` of `program`, built with `options` for the stream's device, on `stream`.
Status launch_kernel(hal::Stream& stream, const CudaProgram& program, std::string_view function,
                     const std::string& options, const hal::LaunchConfig& config, std::span<const hal::KernelArg> args);

// The CUDA backend of the shared launch code (kernels/jit/jit_family.h): a tensor is its view's device address.
const jit::Backend& cuda_backend();

// A KernelDef for the CUDA device with the common fields set; the caller adds dtypes, tiling and launch.
ops::KernelDef cuda_def(std::string op_type, std::string domain, int since_version, std::string name,
                        std::string description);

}  // namespace hxrt::kernels::cuda
