// --tp N / --pp N: tensor- or pipeline-parallel decoding for the commands that run the LLM engine (generate,
// perplexity, serve), under `mpirun -np N` (docs/scale-out.md).
#pragma once

#include <CLI/CLI.hpp>

#include "hxrt/base/status.h"
#include "hxrt/llm/llm.h"

namespace hxrt::tools {

void add_parallel_flags(CLI::App* cmd, int* tp, int* pp);
// On a follower rank (> 0) runs the leader's steps until it stops and returns true: the command is then done (it
// prints nothing). False on the leader and without --tp.
Result<bool> follow_if_follower(llm::Llm& loaded);

}  // namespace hxrt::tools
