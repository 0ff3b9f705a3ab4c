// The registries bundle (hxrt/ops/registries.h) filled in one call: built-in schemas, the kernels of every device
// kind hxrt has kernels for, and the built-in fusion patterns. This is where a new device kind adds its one
// registration line; everything that plans graphs (tools, the LLM engine, runtime::Model, tests, benchmarks) starts
// from here instead of assembling registries itself.
//
// The OpenCL and CUDA kernels are registered whether or not such a device is present: they compile on first launch,
// and selection only offers them for a device of their kind.
//
// Thread-safety: make_builtin_registries is reentrant; the bundle is as hxrt/ops/registries.h says.
#pragma once

#include <memory>

#include "hxrt/base/status.h"
#include "hxrt/ops/registries.h"

namespace hxrt::kernels {

struct BuiltinRegistriesOptions {
  bool cpu_kernels = true;
  bool opencl_kernels = true;
  bool cuda_kernels = true;
  bool fusions = true;  // false: no fusion pattern is registered (plans then never fuse)
};

Result<std::unique_ptr<ops::Registries>> make_builtin_registries(const BuiltinRegistriesOptions& options = {});

}  // namespace hxrt::kernels
