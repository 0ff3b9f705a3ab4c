// The CPU device's built-in kernels, registered into a KernelRegistry. Adding a device kind adds one such header
// and one registration call where devices are set up.
#pragma once

#include "hxrt/base/status.h"
#include "hxrt/ops/kernel_registry.h"

namespace hxrt::kernels {

Status register_cpu_kernels(ops::KernelRegistry& registry);

}  // namespace hxrt::kernels
