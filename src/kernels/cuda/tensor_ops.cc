// PLACEHOLDER: being written; registers nothing yet.
#include "kernels/cuda/registration.h"

namespace hxrt::kernels::cuda {

Status register_tensor_ops(ops::KernelRegistry& /*registry*/) { return ok_status(); }
std::vector<ProgramBuild> tensor_ops_builds() { return {}; }

}  // namespace hxrt::kernels::cuda
