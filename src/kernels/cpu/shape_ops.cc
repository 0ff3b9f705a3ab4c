// CPU kernels of the shape and layout ops (docs/ops.md).

#include "kernels/cpu/registration.h"

namespace hxrt::kernels::cpu {

Status register_shape_ops(ops::KernelRegistry& registry) {
  (void)registry;
  return ok_status();
}

}  // namespace hxrt::kernels::cpu
