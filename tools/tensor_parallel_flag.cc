#include "tensor_parallel_flag.h"

#include "hxrt/comm/communicator.h"

namespace hxrt::tools {

void add_tensor_parallel_flag(CLI::App* cmd, int* tp) {
  cmd->add_option("--tp", *tp,
                  "tensor-parallel ranks: run as one of N processes started by `mpirun -np N` (rank 0 prints and "
                  "answers; docs/scale-out.md)")
      ->check(CLI::PositiveNumber);
}

Status apply_tensor_parallel_flag(int tp, llm::EngineOptions& options) {
  if (tp <= 1) return ok_status();
  if (!comm::launched_by_mpi()) {
    return failed_precondition("--tp {} runs as {} processes: start it with `mpirun -np {} hxrt ...`", tp, tp, tp);
  }
  HXRT_ASSIGN_OR_RETURN(std::shared_ptr<comm::Communicator> world, comm::world({.backend = "mpi"}));
  if (world->size() != tp) {
    return invalid_argument("--tp {} but mpirun started {} ranks: they must be equal", tp, world->size());
  }
  options.tensor_parallel = std::move(world);
  return ok_status();
}

Result<bool> follow_if_follower(llm::Llm& loaded) {
  if (loaded.engine().leader()) return false;
  HXRT_RETURN_IF_ERROR(loaded.engine().follow());
  return true;
}

}  // namespace hxrt::tools
