// Schemas of the pooling, transposed convolution and resampling (docs/ops.md): AveragePool MaxPool GlobalAveragePool GlobalMaxPool MaxUnpool ConvTranspose Resize GridSample RoiAlign.

#include "ops/schemas/schemas.h"

namespace hxrt::ops::schemas {

Status register_pool(OpSchemaRegistry& registry) {
  (void)registry;
  return ok_status();
}

}  // namespace hxrt::ops::schemas
