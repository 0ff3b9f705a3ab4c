// Schemas of the reductions and normalisations (docs/ops.md): Reduce* ArgMax ArgMin LogSoftmax Hardmax MeanVarianceNormalization LRN InstanceNormalization.

#include "ops/schemas/schemas.h"

namespace hxrt::ops::schemas {

Status register_reduce(OpSchemaRegistry& registry) {
  (void)registry;
  return ok_status();
}

}  // namespace hxrt::ops::schemas
