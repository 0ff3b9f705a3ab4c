// Pipeline parallelism's pieces (Note [Pipeline-parallel engine] in pipeline_parallel.cc): each rank's layer range
// and the split of a step into micro-batches.
#pragma once

#include <vector>

#include "hxrt/base/status.h"
#include "hxrt/llm/model_family.h"
#include "hxrt/runtime/executor.h"

namespace hxrt::llm::pp {

struct Stage {
  int first_layer = 0;
  int end_layer = 0;  // exclusive
};
// Rank `rank` of `size`'s layers: contiguous, as even as they divide (the first ranks take one more).
// InvalidArgument when there are more ranks than layers.
Result<Stage> pipeline_stage(const ModelConfig& config, int rank, int size);

// One micro-batch of a step: the step's inputs restricted to a contiguous run of its sequences, their token and
// logit rows renumbered from 0.
struct MicroBatch {
  runtime::TensorMap inputs;
  int64_t n_tokens = 0;
  int64_t n_outputs = 0;  // logit rows
};
// The step's sequences split into at most `parts` contiguous runs of about equal token counts (fewer when it has
// fewer sequences). The micro-batches' logit rows, concatenated, are the step's.
Result<std::vector<MicroBatch>> split_micro_batches(const runtime::TensorMap& inputs, int parts);

}  // namespace hxrt::llm::pp
