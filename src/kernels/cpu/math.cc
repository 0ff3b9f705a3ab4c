// CPU kernels of the unary math and activations (docs/ops.md).

#include "kernels/cpu/registration.h"

namespace hxrt::kernels::cpu {

Status register_math(ops::KernelRegistry& registry) {
  (void)registry;
  return ok_status();
}

}  // namespace hxrt::kernels::cpu
