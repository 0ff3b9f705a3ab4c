// Kernels of the collective ops (ops/schemas/collective.cc) for devices whose streams run host tasks (cpu, opencl):
// each launch enqueues its communicator's collective on the stream (hxrt/comm/communicator.h).
#pragma once

#include "hxrt/hal/types.h"
#include "hxrt/ops/kernel_registry.h"

namespace hxrt::kernels {

Status register_collective_kernels(ops::KernelRegistry& registry, hal::DeviceKind device);

}  // namespace hxrt::kernels
