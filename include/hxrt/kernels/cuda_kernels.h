// The CUDA device's built-in kernels, registered into a KernelRegistry (see opencl_kernels.h for the same scheme).
//
// hxrt's own kernels are CUDA C++ compiled at run time with NVRTC for the device's architecture: the tiling picks the
// launch geometry, and tile sizes and dtypes become build options (-D WTYPE=2 ...). The first launch of a (device,
// build options) pair loads the module through Device::shared_module (the driver's cubin caches make later processes
// cheap). Dense f32/f16 GEMMs (MatMul, Gemm) call cuBLAS through the device's "cublas" library module.
//
// Lifetime: a registry holding these kernels and the devices it launched on may be destroyed in either order.
//
// Thread-safety: registration is thread-compatible (as KernelRegistry::add); the registered kernels are reentrant.
#pragma once

#include "hxrt/base/status.h"
#include "hxrt/ops/kernel_registry.h"

namespace hxrt::kernels {

Status register_cuda_kernels(ops::KernelRegistry& registry);

}  // namespace hxrt::kernels
