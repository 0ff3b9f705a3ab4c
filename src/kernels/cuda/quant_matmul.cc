// PLACEHOLDER: being written; registers nothing yet.
#include "kernels/cuda/registration.h"

namespace hxrt::kernels::cuda {

Status register_quant_matmul(ops::KernelRegistry& /*registry*/) { return ok_status(); }
std::vector<ProgramBuild> quant_matmul_builds() { return {}; }

}  // namespace hxrt::kernels::cuda
