// CUDA MemcpyToHost / MemcpyFromHost: the copies the planner inserts between the CUDA device and its host fallback
// device (Note [Heterogeneous split] in runtime/execution_plan.cc). Both run on the CUDA stream: the host side is a
// host-addressable buffer of the fallback device, which the stream copies from or to with cuMemcpy*Async.
#include <string>

#include "kernels/cuda/registration.h"

namespace hxrt::kernels::cuda {
namespace {

ops::KernelDef memcpy_kernel(std::string op_type, std::string description) {
  ops::KernelDef def = cuda_def(op_type, "hxrt", 1, op_type, std::move(description));
  def.tiling = copy_bytes_tiling;
  def.launch = [op_type](hal::Stream& stream, const ops::KernelLaunch& launch) -> Status {
    const ops::TensorRef& x = launch.inputs[0];
    const ops::TensorRef& y = launch.outputs[0];
    if (x.dtype != y.dtype || x.shape != y.shape) {
      return invalid_argument("{}: input {}{} and output {}{} differ", op_type, x.dtype, x.shape, y.dtype, y.shape);
    }
    HXRT_ASSIGN_OR_RETURN(const uint64_t bytes, storage_bytes(x.dtype, static_cast<uint64_t>(x.num_elements())));
    if (bytes == 0) return ok_status();
    return stream.copy(y.view.subview(0, bytes), x.view.subview(0, bytes));
  };
  return def;
}

}  // namespace

Status register_memcpy(ops::KernelRegistry& registry) {
  HXRT_RETURN_IF_ERROR(
      registry.add(memcpy_kernel("MemcpyToHost", "CUDA device memory → host fallback memory, on the CUDA stream")));
  return registry.add(memcpy_kernel("MemcpyFromHost", "host fallback memory → CUDA device memory, on the CUDA stream"));
}

}  // namespace hxrt::kernels::cuda
