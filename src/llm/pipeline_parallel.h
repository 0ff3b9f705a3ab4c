// Pipeline parallelism (Note [Pipeline-parallel engine] in pipeline_parallel.cc): each rank's layer range. The split
// of a step into micro-batches is step::split_micro_batches (step_message.h).
#pragma once

#include "hxrt/base/status.h"
#include "hxrt/llm/model_family.h"

namespace hxrt::llm::pp {

struct Stage {
  int first_layer = 0;
  int end_layer = 0;  // exclusive
};
// Rank `rank` of `size`'s layers: contiguous, as even as they divide (the first ranks take one more).
// InvalidArgument when there are more ranks than layers.
Result<Stage> pipeline_stage(const ModelConfig& config, int rank, int size);

}  // namespace hxrt::llm::pp
