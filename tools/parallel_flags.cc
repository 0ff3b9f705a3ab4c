#include "parallel_flags.h"

namespace hxrt::tools {

void add_parallel_flags(CLI::App* cmd, int* tp, int* pp) {
  cmd->add_option("--tp", *tp,
                  "tensor-parallel ranks: run as one of N processes started by `mpirun -np N` (rank 0 prints and "
                  "answers; docs/scale-out.md)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--pp", *pp,
                  "pipeline-parallel ranks (layers split among N processes started by `mpirun -np N`; any head count)")
      ->check(CLI::PositiveNumber);
}

Result<bool> follow_if_follower(llm::Llm& loaded) {
  if (loaded.leader()) return false;
  HXRT_RETURN_IF_ERROR(loaded.follow());
  return true;
}

}  // namespace hxrt::tools
