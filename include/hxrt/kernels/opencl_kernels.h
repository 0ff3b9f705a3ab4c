// The OpenCL device's built-in kernels, registered into a KernelRegistry (see cpu_kernels.h for the CPU's).
//
// Each kernel is OpenCL C compiled at run time: its tiling function picks the launch geometry, and the tile sizes
// and dtypes become build options (-D WG=64 -D TILE_M=4 ...). The first launch of a (device, build options) pair
// loads the module through Device::shared_module (the driver's in-memory and on-disk program caches make later
// processes cheap); the device keeps the module, so the registry holds nothing a device made.
//
// Lifetime: a registry holding these kernels and the devices it launched on may be destroyed in either order.
//
// Thread-safety: registration is thread-compatible (as KernelRegistry::add); the registered kernels are reentrant.
#pragma once

#include "hxrt/base/status.h"
#include "hxrt/ops/kernel_registry.h"

namespace hxrt::kernels {

Status register_opencl_kernels(ops::KernelRegistry& registry);

}  // namespace hxrt::kernels
