// The step messages of a tensor-parallel engine (Note [Tensor-parallel engine] in tensor_parallel.cc): what the
// leader broadcasts before each forward so that the followers run the same one.
#pragma once

#include <optional>

#include "hxrt/base/status.h"
#include "hxrt/comm/communicator.h"
#include "hxrt/runtime/executor.h"
#include "llm/step_message.h"

namespace hxrt::llm::tp {

using step::Step;

// Leader: this step's forward inputs (the decoder's i32 inputs) to every follower.
Status send_step(comm::Communicator& group, const runtime::TensorMap& inputs, bool decode_only);
// Leader: no more steps (the leader's engine is going away).
Status send_stop(comm::Communicator& group);
// Follower: the next step, or nullopt when the leader stopped.
Result<std::optional<Step>> receive_step(comm::Communicator& group);

}  // namespace hxrt::llm::tp
