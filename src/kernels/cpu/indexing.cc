// CPU kernels of the indexing and data-dependent ops (docs/ops.md).

#include "kernels/cpu/registration.h"

namespace hxrt::kernels::cpu {

Status register_indexing(ops::KernelRegistry& registry) {
  (void)registry;
  return ok_status();
}

}  // namespace hxrt::kernels::cpu
