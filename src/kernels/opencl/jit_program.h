// What every OpenCL kernel family shares: JitProgram (a family's OpenCL C source and its compiled modules, one per
// device and build options), the argument convention, and small launch helpers.
//
// Note [Tensor arguments]
// A tensor is passed to a kernel as two arguments: its whole buffer and the byte offset of its view (a ulong). A view
// of the arena, of a pool block or of the KV cache then needs no sub-buffer, whose origin OpenCL requires to be a
// multiple of the device's base address alignment; the kernel adds the offset itself with HX_AT (kClPrelude).
//
// Note [Kernel status words]
// Kernels that validate indices, and long kernels that can be aborted, take the stream's control words as their last
// parameter (`__global volatile int* ctl`, see hal/opencl/opencl_driver.h). A bad index makes the work-item skip its
// memory access and store a StatusCode (HX_INVALID_ARGUMENT, HX_OUT_OF_RANGE) into ctl[1], which fails the stream
// with that code; long kernels read ctl[0] once per work-group and stop (HX_ABORTED) when the stream was aborted.
// The device cannot say which index was bad, so those errors name the kernel and the check, not the value.
//
// Thread-safety: JitProgram is thread-safe; the helpers are reentrant.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hxrt/base/status.h"
#include "hxrt/hal/device.h"
#include "hxrt/hal/kernel.h"
#include "hxrt/hal/stream.h"
#include "hxrt/ops/kernel_def.h"
#include "kernels/jit/jit_family.h"
#include "kernels/launch_util.h"

namespace hxrt::kernels::opencl {

// OpenCL C prepended to every program: HX_AT(type, buffer, byte_offset), the HX_* status codes, and acc_t, the
// accumulation type of reductions (double where the device has cl_khr_fp64, as the CPU kernels use, else float).
extern const char* const kClPrelude;

class JitProgram final : public jit::Program {
 public:
  // `source` is the family's OpenCL C, without the prelude; `name` names its modules (and the cache entries).
  JitProgram(std::string name, std::string_view source);
  JitProgram(const JitProgram&) = delete;
  JitProgram& operator=(const JitProgram&) = delete;

  // The kernel `function` of this program built with `options` on `device`: compiled (or loaded from the driver's
  // program caches) on the first request for that pair, then kept by the device (Device::shared_module) until the
  // device is destroyed. The JitProgram and the device may be destroyed in either order.
  Result<const hal::Kernel*> kernel(hal::Device& device, const std::string& options,
                                    std::string_view function) const override;
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::string source_;  // prelude + family source
  std::string key_;     // name, and a digest of source_: with the build options, the device's module key
};

// Appends a tensor's two arguments: its buffer and the byte offset of its view (Note [Tensor arguments]).
void add_tensor_arg(std::vector<hal::KernelArg>& args, const ops::TensorRef& tensor);

// Enqueues `function` of `program`, built with `options` for the stream's device, on `stream`.
Status launch_kernel(hal::Stream& stream, const JitProgram& program, std::string_view function,
                     const std::string& options, const hal::LaunchConfig& config, std::span<const hal::KernelArg> args);

// The OpenCL backend of the shared launch code (kernels/jit/jit_family.h): tensors as (buffer, byte offset).
const jit::Backend& opencl_backend();

// A KernelDef for the OpenCL device with the common fields set; the caller adds dtypes, tiling and launch.
ops::KernelDef opencl_def(std::string op_type, std::string domain, int since_version, std::string name,
                          std::string description);

}  // namespace hxrt::kernels::opencl
