// Cast on the JIT backends: one work-item (thread) per element converts between f32 f16 bf16 i8 u8 i32 i64 bool with
// the CPU kernel's rounding and saturation (bit-identical); a cast to the same dtype is a device copy.
#include <memory>
#include <string>

#include "hxrt/ops/params/elementwise.h"
#include "kernels/jit/jit_family.h"

namespace hxrt::kernels::jit {
namespace {

constexpr uint32_t kGroup = 256;

// The kernel's type code of a dtype; -1 when Cast does not take it.
int type_code(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 0;
    case DType::kF16: return 1;
    case DType::kBF16: return 2;
    case DType::kI8: return 3;
    case DType::kU8: return 4;
    case DType::kI32: return 5;
    case DType::kI64: return 6;
    case DType::kBool: return 7;
    default: return -1;
  }
}

}  // namespace

Status register_cast(ops::KernelRegistry& registry, const Backend& backend, std::shared_ptr<const Program> program) {
  ops::KernelDef def = make_def(backend, "Cast", "", 19, "Cast",
                                  "converts between f32 f16 bf16 i8 u8 i32 i64 bool, "
                                  "bit-identical to the CPU kernel");
  def.input_dtypes = {
      {DType::kF32, DType::kF16, DType::kBF16, DType::kI8, DType::kU8, DType::kI32, DType::kI64, DType::kBool}};
  def.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_cast_params(node));
  };
  def.tiling = [](const ops::TilingQuery& query) -> Result<ops::Tiling> {
    const int64_t n = query.outputs.empty() ? 0 : query.outputs[0].num_elements();
    HXRT_RETURN_IF_ERROR(check_int32(n, "elements"));
    ops::Tiling tiling;
    tiling.launch = launch_1d(n, kGroup);
    tiling.values = {{"wg", kGroup}};
    return tiling;
  };
  def.launch = [backend, program](hal::Stream& stream, const ops::KernelLaunch& launch) -> Status {
    const ops::TensorRef& x = launch.inputs[0];
    const ops::TensorRef& y = launch.outputs[0];
    const int from = type_code(x.dtype);
    const int to = type_code(y.dtype);
    if (from < 0 || to < 0) return invalid_argument("Cast from {} to {} is not supported", x.dtype, y.dtype);
    if (x.num_elements() != y.num_elements()) {
      return invalid_argument("Cast: input {} and output {} differ in size", x.shape, y.shape);
    }
    const int64_t n = y.num_elements();
    if (n == 0) return ok_status();
    HXRT_RETURN_IF_ERROR(check_int32(n, "Cast elements"));
    if (from == to) {
      HXRT_ASSIGN_OR_RETURN(const uint64_t bytes, storage_bytes(x.dtype, static_cast<uint64_t>(n)));
      if (x.view.buffer == y.view.buffer && x.view.offset == y.view.offset) return ok_status();
      return stream.copy(y.view.subview(0, bytes), x.view.subview(0, bytes));
    }
    std::vector<hal::KernelArg> args;
    backend.add_tensor_arg(args, x);
    backend.add_tensor_arg(args, y);
    args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(n)));
    args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(from)));
    args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(to)));
    return launch_program(stream, *program, "cast", "", launch.tiling->launch, args);
  };
  return registry.add(std::move(def));
}

}  // namespace hxrt::kernels::jit
