// The OpenCL device's built-in kernels, registered into a KernelRegistry (see cpu_kernels.h for the CPU's).
//
// Each kernel is OpenCL C compiled at run time: its tiling function picks the launch geometry, and the tile sizes
// and dtypes become build options (-D WG=64 -D TILE_M=4 ...). The first launch of a (device, build options) pair
// loads the module through Device::load_module (the driver's in-memory and on-disk program caches make later
// processes cheap); the module is then kept in state owned by the registry's KernelDefs.
//
// Lifetime: because of that cache, a registry holding these kernels must be destroyed before any OpenCL device it
// launched kernels on, like every other object made by a device (hal/device.h).
//
// Thread-safety: registration is thread-compatible (as KernelRegistry::add); the registered kernels are reentrant.
#pragma once

#include "hxrt/base/status.h"
#include "hxrt/ops/kernel_registry.h"

namespace hxrt::kernels {

Status register_opencl_kernels(ops::KernelRegistry& registry);

}  // namespace hxrt::kernels
