// CUDA elementwise kernels: Add, Sub, Mul, Div with numpy broadcasting, the activations (Relu, LeakyRelu, Gelu,
// Sigmoid, Tanh, Silu) and the fused SwiGLU. One thread per output element, in blocks of kBlock threads.
//
// Broadcasting: the host merges the broadcast into at most four dims (adjacent dims merge when both operands step
// through them contiguously, or both stay put) and passes the dims and the operands' element strides (0 along a
// broadcast dim) as int4 arguments; SAME_SHAPE skips the index arithmetic when no operand broadcasts.
//
// Numerics (Note [Matching the CPU kernels on CUDA]): each element repeats the CPU kernel's float expression in the
// same order, uncontracted; exp is hx_exp (glibc's expf), so Sigmoid, Silu and SwiGLU give the CPU's bits; erff and
// tanhf are CUDA's, within an ulp or two of glibc's.
#include <array>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "hxrt/ops/params/elementwise.h"
#include "kernels/cuda/registration.h"

namespace hxrt::kernels::cuda {
namespace {

constexpr uint32_t kBlock = 256;
constexpr int kMaxMergedRank = kMaxMergedDims;

constexpr std::string_view kSource = R"CUDA(
#ifndef BINARY_OP
#define BINARY_OP 0
#endif
#ifndef UNARY_OP
#define UNARY_OP 0
#endif
#ifndef SAME_SHAPE
#define SAME_SHAPE 1
#endif

__device__ __forceinline__ float binary_op(float a, float b) {
#if BINARY_OP == 0
  return a + b;
#elif BINARY_OP == 1
  return a - b;
#elif BINARY_OP == 2
  return a * b;
#else
  return a / b;
#endif
}

__device__ __forceinline__ float silu(float x) { return x / (1.0f + hx_exp(-x)); }

__device__ __forceinline__ float unary_op(float x) {
#if UNARY_OP == 0
  return x > 0.0f ? x : 0.0f;
#elif UNARY_OP == 1
  return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
#elif UNARY_OP == 2
  return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
#elif UNARY_OP == 3
  return 1.0f / (1.0f + hx_exp(-x));
#elif UNARY_OP == 4
  return tanhf(x);
#else
  return silu(x);
#endif
}

// The element of this thread. Unsigned: the last block of a grid covering 2^31 - 1 elements reaches past INT_MAX.
__device__ __forceinline__ unsigned element_index() { return blockIdx.x * blockDim.x + threadIdx.x; }

// dims (outermost first), sa and sb: the merged broadcast (element strides, 0 = broadcast).
extern "C" __global__ void binary(const float* a, const float* b, float* y, int n, int4 dims, int4 sa, int4 sb) {
  const unsigned u = element_index();
  if (u >= (unsigned)n) return;
  const int i = (int)u;
#if SAME_SHAPE
  y[i] = binary_op(a[i], b[i]);
#else
  int rest = i;
  const int c3 = rest % dims.w;
  rest /= dims.w;
  const int c2 = rest % dims.z;
  rest /= dims.z;
  const int c1 = rest % dims.y;
  const int c0 = rest / dims.y;
  const int ia = c0 * sa.x + c1 * sa.y + c2 * sa.z + c3 * sa.w;
  const int ib = c0 * sb.x + c1 * sb.y + c2 * sb.z + c3 * sb.w;
  y[i] = binary_op(a[ia], b[ib]);
#endif
}

extern "C" __global__ void unary(const float* x, float* y, int n) {
  const unsigned u = element_index();
  if (u >= (unsigned)n) return;
  y[u] = unary_op(x[u]);
}

extern "C" __global__ void leaky_relu(const float* x, float* y, int n, float alpha) {
  const unsigned u = element_index();
  if (u >= (unsigned)n) return;
  const float v = x[u];
  y[u] = v < 0.0f ? alpha * v : v;
}

extern "C" __global__ void swiglu(const float* gate, const float* up, float* y, int n) {
  const unsigned u = element_index();
  if (u >= (unsigned)n) return;
  y[u] = silu(gate[u]) * up[u];
}
)CUDA";

enum class BinaryOp : int { kAdd = 0, kSub = 1, kMul = 2, kDiv = 3 };
enum class UnaryOp : int { kRelu = 0, kGeluErf = 1, kGeluTanh = 2, kSigmoid = 3, kTanh = 4, kSilu = 5 };

const CudaProgram& elementwise_program() {
  static const CudaProgram program("hxrt_elementwise", kSource);
  return program;
}

struct OpCodeParams final : ops::TypedParams<OpCodeParams> {
  static constexpr std::string_view kName = "cuda::OpCodeParams";
  OpCodeParams(std::string_view op_name, int op_code) : name(op_name), code(op_code) {}
  std::string to_string() const override { return fmt::format("op={}", name); }
  std::string name;
  int code;
};

using Int4 = std::array<int32_t, 4>;  // passed as the kernels' int4

// A numpy broadcast merged into at most kMaxMergedRank dims, outermost first (leading dims padded with 1).
struct Broadcast final : ops::TypedGeometry<Broadcast> {
  static constexpr std::string_view kName = "cuda::Broadcast";
  Int4 dims{1, 1, 1, 1};
  Int4 a_strides{0, 0, 0, 0};
  Int4 b_strides{0, 0, 0, 0};
  bool same_shape = false;
};

Result<Broadcast> merge_broadcast(const Shape& a, const Shape& b, const Shape& out) {
  Broadcast result;
  if (a.num_elements() == out.num_elements() && b.num_elements() == out.num_elements()) {
    result.same_shape = true;  // equal counts: the shapes differ at most by dims of 1, the layout is the same
    result.dims[3] = static_cast<int32_t>(out.num_elements());
    return result;
  }
  const MergedBroadcast merged = merge_broadcast_dims(a.dims(), b.dims(), 1, 1);
  if (merged.merged_rank > kMaxMergedRank) {
    return unimplemented("CUDA binary ops: the broadcast of {} and {} into {} needs {} dims after merging (at most {})",
                         a, b, out, merged.merged_rank, kMaxMergedRank);
  }
  result.dims = merged.dims;
  result.a_strides = merged.a_strides;
  result.b_strides = merged.b_strides;
  return result;
}

Result<ops::Tiling> elementwise_tiling(const ops::TilingQuery& query) {
  const int64_t n = query.outputs.empty() ? 0 : query.outputs[0].num_elements();
  HXRT_RETURN_IF_ERROR(check_int32(n, "elements"));
  ops::Tiling tiling;
  tiling.launch = launch_1d(n, kBlock);
  tiling.values = {{"wg", kBlock}};
  if (query.inputs.size() == 2 && !query.outputs.empty()) {
    HXRT_ASSIGN_OR_RETURN(const Broadcast broadcast,
                          merge_broadcast(query.inputs[0].shape, query.inputs[1].shape, query.outputs[0].shape));
    tiling.values.emplace_back("same_shape", broadcast.same_shape ? 1 : 0);
    tiling.geometry = std::make_shared<Broadcast>(broadcast);
  }
  return tiling;
}

Status require_f32(const ops::KernelLaunch& launch) {
  for (const ops::TensorRef& t : launch.inputs) {
    if (t.dtype != DType::kF32) return invalid_argument("CUDA elementwise kernels take f32, got {}", t.dtype);
  }
  return ok_status();
}

ops::ParseAttrsFn fixed_params(std::string_view name, int code) {
  return [name = std::string(name), code](const graph::Graph&,
                                          const graph::Node&) -> Result<std::unique_ptr<ops::KernelParams>> {
    return std::unique_ptr<ops::KernelParams>(std::make_unique<OpCodeParams>(name, code));
  };
}

std::string binary_options(int op_code, int same_shape) {
  return fmt::format("-D BINARY_OP={} -D SAME_SHAPE={}", op_code, same_shape);
}

std::string unary_options(int op_code) {
  return fmt::format("-D UNARY_OP={}", op_code);
}

ops::KernelDef binary_kernel(const CudaProgram* program, std::string_view op_type, BinaryOp op) {
  ops::KernelDef def = cuda_def(std::string(op_type), "", 14, fmt::format("{}F32", op_type),
                                "f32 numpy broadcast, merged to at most 4 dims");
  def.input_dtypes = {{DType::kF32}, {DType::kF32}};
  def.parse_attrs = fixed_params(op_type, static_cast<int>(op));
  def.tiling = elementwise_tiling;
  def.launch = [program](hal::Stream& stream, const ops::KernelLaunch& launch) -> Status {
    HXRT_RETURN_IF_ERROR(require_f32(launch));
    const ops::TensorRef& y = launch.outputs[0];
    const int64_t n = y.num_elements();
    if (n == 0) return ok_status();
    const auto& broadcast = launch.tiling->geometry_as<Broadcast>();
    const auto& params = launch.params_as<OpCodeParams>();
    const std::string options = binary_options(params.code, static_cast<int>(launch.tiling->get("same_shape", 0)));
    std::vector<hal::KernelArg> args;
    add_tensor_arg(args, launch.inputs[0]);
    add_tensor_arg(args, launch.inputs[1]);
    add_tensor_arg(args, y);
    args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(n)));
    args.push_back(hal::KernelArg::scalar(broadcast.dims));
    args.push_back(hal::KernelArg::scalar(broadcast.a_strides));
    args.push_back(hal::KernelArg::scalar(broadcast.b_strides));
    return launch_kernel(stream, *program, "binary", options, launch.tiling->launch, args);
  };
  return def;
}

Status launch_unary(hal::Stream& stream, const CudaProgram& program, const ops::KernelLaunch& launch) {
  HXRT_RETURN_IF_ERROR(require_f32(launch));
  const int64_t n = launch.outputs[0].num_elements();
  if (n == 0) return ok_status();
  const auto& params = launch.params_as<OpCodeParams>();
  std::vector<hal::KernelArg> args;
  add_tensor_arg(args, launch.inputs[0]);
  add_tensor_arg(args, launch.outputs[0]);
  args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(n)));
  return launch_kernel(stream, program, "unary", unary_options(params.code), launch.tiling->launch, args);
}

ops::KernelDef unary_kernel(const CudaProgram* program, std::string_view op_type, std::string_view domain,
                            int since_version, UnaryOp op) {
  ops::KernelDef def = cuda_def(std::string(op_type), std::string(domain), since_version, fmt::format("{}F32", op_type),
                                "f32 elementwise activation");
  def.input_dtypes = {{DType::kF32}};
  if (op == UnaryOp::kGeluErf) {
    def.parse_attrs = [](const graph::Graph&, const graph::Node& node) -> Result<std::unique_ptr<ops::KernelParams>> {
      HXRT_ASSIGN_OR_RETURN(const ops::GeluApproximation approximation, ops::parse_gelu_approximation(node));
      const bool tanh = approximation == ops::GeluApproximation::kTanh;
      return std::unique_ptr<ops::KernelParams>(std::make_unique<OpCodeParams>(
          tanh ? "GeluTanh" : "Gelu", static_cast<int>(tanh ? UnaryOp::kGeluTanh : UnaryOp::kGeluErf)));
    };
  } else {
    def.parse_attrs = fixed_params(op_type, static_cast<int>(op));
  }
  def.tiling = elementwise_tiling;
  def.launch = [program](hal::Stream& stream, const ops::KernelLaunch& launch) {
    return launch_unary(stream, *program, launch);
  };
  return def;
}

ops::KernelDef leaky_relu_kernel(const CudaProgram* program) {
  ops::KernelDef def = cuda_def("LeakyRelu", "", 16, "LeakyReluF32", "f32 x < 0 ? alpha·x : x, one thread each");
  def.input_dtypes = {{DType::kF32}};
  def.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_leaky_relu_params(node));
  };
  def.tiling = elementwise_tiling;
  def.launch = [program](hal::Stream& stream, const ops::KernelLaunch& launch) -> Status {
    HXRT_RETURN_IF_ERROR(require_f32(launch));
    const int64_t n = launch.outputs[0].num_elements();
    if (n == 0) return ok_status();
    std::vector<hal::KernelArg> args;
    add_tensor_arg(args, launch.inputs[0]);
    add_tensor_arg(args, launch.outputs[0]);
    args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(n)));
    args.push_back(hal::KernelArg::scalar(launch.params_as<ops::LeakyReluParams>().alpha));
    return launch_kernel(stream, *program, "leaky_relu", "", launch.tiling->launch, args);
  };
  return def;
}

ops::KernelDef swiglu_kernel(const CudaProgram* program) {
  ops::KernelDef def = cuda_def("SwiGLU", "hxrt.fused", 1, "SwiGLU", "silu(gate) · up in one pass");
  def.kind = ops::KernelKind::kFused;
  def.priority = 10;
  def.input_dtypes = {{DType::kF32}, {DType::kF32}};
  def.tiling = elementwise_tiling;
  def.launch = [program](hal::Stream& stream, const ops::KernelLaunch& launch) -> Status {
    HXRT_RETURN_IF_ERROR(require_f32(launch));
    const ops::TensorRef& y = launch.outputs[0];
    if (!(launch.inputs[0].shape == launch.inputs[1].shape) || !(y.shape == launch.inputs[0].shape)) {
      return invalid_argument("SwiGLU: gate {}, up {} and Y {} must have one shape", launch.inputs[0].shape,
                              launch.inputs[1].shape, y.shape);
    }
    const int64_t n = y.num_elements();
    if (n == 0) return ok_status();
    std::vector<hal::KernelArg> args;
    add_tensor_arg(args, launch.inputs[0]);
    add_tensor_arg(args, launch.inputs[1]);
    add_tensor_arg(args, y);
    args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(n)));
    return launch_kernel(stream, *program, "swiglu", "", launch.tiling->launch, args);
  };
  return def;
}

}  // namespace

Status register_elementwise(ops::KernelRegistry& registry) {
  const CudaProgram* program = &elementwise_program();
  HXRT_RETURN_IF_ERROR(registry.add(binary_kernel(program, "Add", BinaryOp::kAdd)));
  HXRT_RETURN_IF_ERROR(registry.add(binary_kernel(program, "Sub", BinaryOp::kSub)));
  HXRT_RETURN_IF_ERROR(registry.add(binary_kernel(program, "Mul", BinaryOp::kMul)));
  HXRT_RETURN_IF_ERROR(registry.add(binary_kernel(program, "Div", BinaryOp::kDiv)));
  HXRT_RETURN_IF_ERROR(registry.add(unary_kernel(program, "Relu", "", 14, UnaryOp::kRelu)));
  HXRT_RETURN_IF_ERROR(registry.add(leaky_relu_kernel(program)));
  HXRT_RETURN_IF_ERROR(registry.add(unary_kernel(program, "Gelu", "", 20, UnaryOp::kGeluErf)));
  HXRT_RETURN_IF_ERROR(registry.add(unary_kernel(program, "Sigmoid", "", 13, UnaryOp::kSigmoid)));
  HXRT_RETURN_IF_ERROR(registry.add(unary_kernel(program, "Tanh", "", 13, UnaryOp::kTanh)));
  HXRT_RETURN_IF_ERROR(registry.add(unary_kernel(program, "Silu", "hxrt", 1, UnaryOp::kSilu)));
  return registry.add(swiglu_kernel(program));
}

std::vector<ProgramBuild> elementwise_builds() {
  const CudaProgram* program = &elementwise_program();
  std::vector<ProgramBuild> builds;
  for (const BinaryOp op : {BinaryOp::kAdd, BinaryOp::kSub, BinaryOp::kMul, BinaryOp::kDiv}) {
    for (const int same_shape : {0, 1}) {
      builds.push_back({program, binary_options(static_cast<int>(op), same_shape), {"binary"}});
    }
  }
  for (const UnaryOp op :
       {UnaryOp::kRelu, UnaryOp::kGeluErf, UnaryOp::kGeluTanh, UnaryOp::kSigmoid, UnaryOp::kTanh, UnaryOp::kSilu}) {
    builds.push_back({program, unary_options(static_cast<int>(op)), {"unary"}});
  }
  builds.push_back({program, "", {"leaky_relu", "swiglu"}});
  return builds;
}

}  // namespace hxrt::kernels::cuda
