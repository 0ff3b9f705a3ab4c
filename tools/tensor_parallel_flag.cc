#include "tensor_parallel_flag.h"

namespace hxrt::tools {

void add_tensor_parallel_flag(CLI::App* cmd, int* tp) {
  cmd->add_option("--tp", *tp,
                  "tensor-parallel ranks: run as one of N processes started by `mpirun -np N` (rank 0 prints and "
                  "answers; docs/scale-out.md)")
      ->check(CLI::PositiveNumber);
}

Result<bool> follow_if_follower(llm::Llm& loaded) {
  if (loaded.leader()) return false;
  HXRT_RETURN_IF_ERROR(loaded.follow());
  return true;
}

}  // namespace hxrt::tools
