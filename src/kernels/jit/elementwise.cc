// Elementwise kernels of the JIT backends: Add, Sub, Mul, Div with numpy broadcasting, the activations (Relu, Gelu,
// Sigmoid, Tanh, Silu, LeakyRelu) and the fused SwiGLU. One work-item (thread) per output element, in groups of
// kGroup.
//
// Broadcasting: the host merges the broadcast into at most four dims (adjacent dims merge when both operands step
// through them contiguously, or both stay put) and passes the dims and the operands' element strides (0 along a
// broadcast dim) as int4 arguments; SAME_SHAPE skips the index arithmetic when no operand broadcasts.
#include <array>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "hxrt/ops/params/elementwise.h"
#include "kernels/jit/jit_family.h"

namespace hxrt::kernels::jit {
namespace {

constexpr uint32_t kGroup = 256;
constexpr int kMaxMergedRank = kMaxMergedDims;

struct OpCodeParams final : ops::TypedParams<OpCodeParams> {
  static constexpr std::string_view kName = "jit::OpCodeParams";
  OpCodeParams(std::string_view op_name, int op_code) : name(op_name), code(op_code) {}
  std::string to_string() const override { return fmt::format("op={}", name); }
  std::string name;
  int code;
};

using Int4 = std::array<int32_t, 4>;  // an int4 kernel argument, passed by its bytes

// A numpy broadcast merged into at most kMaxMergedRank dims, outermost first (leading dims padded with 1).
struct Broadcast final : ops::TypedGeometry<Broadcast> {
  static constexpr std::string_view kName = "jit::Broadcast";
  Int4 dims{1, 1, 1, 1};
  Int4 a_strides{0, 0, 0, 0};
  Int4 b_strides{0, 0, 0, 0};
  bool same_shape = false;
};

Result<Broadcast> merge_broadcast(const Backend& backend, const Shape& a, const Shape& b, const Shape& out) {
  Broadcast result;
  if (a.num_elements() == out.num_elements() && b.num_elements() == out.num_elements()) {
    result.same_shape = true;  // equal counts: the shapes differ at most by dims of 1, the layout is the same
    result.dims[3] = static_cast<int32_t>(out.num_elements());
    return result;
  }
  const MergedBroadcast merged = merge_broadcast_dims(a.dims(), b.dims(), 1, 1);
  if (merged.merged_rank > kMaxMergedRank) {
    return unimplemented("{} binary ops: the broadcast of {} and {} into {} needs {} dims after merging (at most {})",
                         backend.name, a, b, out, merged.merged_rank, kMaxMergedRank);
  }
  result.dims = merged.dims;
  result.a_strides = merged.a_strides;
  result.b_strides = merged.b_strides;
  return result;
}

ops::TilingFn elementwise_tiling(const Backend& backend) {
  return [backend](const ops::TilingQuery& query) -> Result<ops::Tiling> {
    const int64_t n = query.outputs.empty() ? 0 : query.outputs[0].num_elements();
    HXRT_RETURN_IF_ERROR(check_int32(n, "elements"));
    ops::Tiling tiling;
    tiling.launch = launch_1d(n, kGroup);
    tiling.values = {{"wg", kGroup}};
    if (query.inputs.size() == 2 && !query.outputs.empty()) {
      HXRT_ASSIGN_OR_RETURN(const Broadcast broadcast, merge_broadcast(backend, query.inputs[0].shape,
                                                                       query.inputs[1].shape, query.outputs[0].shape));
      tiling.values.emplace_back("same_shape", broadcast.same_shape ? 1 : 0);
      tiling.geometry = std::make_shared<Broadcast>(broadcast);
    }
    return tiling;
  };
}

Status require_f32(const Backend& backend, const ops::KernelLaunch& launch) {
  for (const ops::TensorRef& t : launch.inputs) {
    if (t.dtype != DType::kF32) return invalid_argument("{} elementwise kernels take f32, got {}", backend.name, t.dtype);
  }
  return ok_status();
}

ops::ParseAttrsFn fixed_params(std::string_view name, int code) {
  return [name = std::string(name), code](const graph::Graph&,
                                          const graph::Node&) -> Result<std::unique_ptr<ops::KernelParams>> {
    return std::unique_ptr<ops::KernelParams>(std::make_unique<OpCodeParams>(name, code));
  };
}

ops::KernelDef binary_kernel(const Backend& backend, std::shared_ptr<const Program> program, std::string_view op_type,
                             BinaryOp op) {
  ops::KernelDef def = make_def(backend, std::string(op_type), "", 14, fmt::format("{}F32", op_type),
                                "f32 numpy broadcast, merged to at most 4 dims");
  def.input_dtypes = {{DType::kF32}, {DType::kF32}};
  def.parse_attrs = fixed_params(op_type, static_cast<int>(op));
  def.tiling = elementwise_tiling(backend);
  def.launch = [backend, program](hal::Stream& stream, const ops::KernelLaunch& launch) -> Status {
    HXRT_RETURN_IF_ERROR(require_f32(backend, launch));
    const ops::TensorRef& y = launch.outputs[0];
    const int64_t n = y.num_elements();
    if (n == 0) return ok_status();
    const auto& broadcast = launch.tiling->geometry_as<Broadcast>();
    const auto& params = launch.params_as<OpCodeParams>();
    std::vector<hal::KernelArg> args;
    backend.add_tensor_arg(args, launch.inputs[0]);
    backend.add_tensor_arg(args, launch.inputs[1]);
    backend.add_tensor_arg(args, y);
    args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(n)));
    args.push_back(hal::KernelArg::scalar(broadcast.dims));
    args.push_back(hal::KernelArg::scalar(broadcast.a_strides));
    args.push_back(hal::KernelArg::scalar(broadcast.b_strides));
    return launch_program(stream, *program, "binary",
                  binary_options(static_cast<BinaryOp>(params.code), launch.tiling->get("same_shape", 0) != 0),
                  launch.tiling->launch, args);
  };
  return def;
}

ops::KernelDef unary_kernel(const Backend& backend, std::shared_ptr<const Program> program, std::string_view op_type,
                            std::string_view domain, int since_version, UnaryOp op) {
  ops::KernelDef def = make_def(backend, std::string(op_type), std::string(domain), since_version,
                                fmt::format("{}F32", op_type), "f32 elementwise activation");
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
  def.tiling = elementwise_tiling(backend);
  def.launch = [backend, program](hal::Stream& stream, const ops::KernelLaunch& launch) -> Status {
    HXRT_RETURN_IF_ERROR(require_f32(backend, launch));
    const int64_t n = launch.outputs[0].num_elements();
    if (n == 0) return ok_status();
    const auto& params = launch.params_as<OpCodeParams>();
    std::vector<hal::KernelArg> args;
    backend.add_tensor_arg(args, launch.inputs[0]);
    backend.add_tensor_arg(args, launch.outputs[0]);
    args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(n)));
    return launch_program(stream, *program, "unary", unary_options(static_cast<UnaryOp>(params.code)), launch.tiling->launch,
                  args);
  };
  return def;
}

ops::KernelDef leaky_relu_kernel(const Backend& backend, std::shared_ptr<const Program> program) {
  ops::KernelDef def = make_def(backend, "LeakyRelu", "", 16, "LeakyReluF32", "f32 x < 0 ? alpha·x : x, one per element");
  def.input_dtypes = {{DType::kF32}};
  def.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_leaky_relu_params(node));
  };
  def.tiling = elementwise_tiling(backend);
  def.launch = [backend, program](hal::Stream& stream, const ops::KernelLaunch& launch) -> Status {
    HXRT_RETURN_IF_ERROR(require_f32(backend, launch));
    const int64_t n = launch.outputs[0].num_elements();
    if (n == 0) return ok_status();
    std::vector<hal::KernelArg> args;
    backend.add_tensor_arg(args, launch.inputs[0]);
    backend.add_tensor_arg(args, launch.outputs[0]);
    args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(n)));
    args.push_back(hal::KernelArg::scalar(launch.params_as<ops::LeakyReluParams>().alpha));
    return launch_program(stream, *program, "leaky_relu", "", launch.tiling->launch, args);
  };
  return def;
}

ops::KernelDef swiglu_kernel(const Backend& backend, std::shared_ptr<const Program> program) {
  ops::KernelDef def = make_def(backend, "SwiGLU", "hxrt.fused", 1, "SwiGLU", "silu(gate) · up in one pass");
  def.kind = ops::KernelKind::kFused;
  def.priority = 10;
  def.input_dtypes = {{DType::kF32}, {DType::kF32}};
  def.tiling = elementwise_tiling(backend);
  def.launch = [backend, program](hal::Stream& stream, const ops::KernelLaunch& launch) -> Status {
    HXRT_RETURN_IF_ERROR(require_f32(backend, launch));
    const ops::TensorRef& y = launch.outputs[0];
    if (!(launch.inputs[0].shape == launch.inputs[1].shape) || !(y.shape == launch.inputs[0].shape)) {
      return invalid_argument("SwiGLU: gate {}, up {} and Y {} must have one shape", launch.inputs[0].shape,
                              launch.inputs[1].shape, y.shape);
    }
    const int64_t n = y.num_elements();
    if (n == 0) return ok_status();
    std::vector<hal::KernelArg> args;
    backend.add_tensor_arg(args, launch.inputs[0]);
    backend.add_tensor_arg(args, launch.inputs[1]);
    backend.add_tensor_arg(args, y);
    args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(n)));
    return launch_program(stream, *program, "swiglu", "", launch.tiling->launch, args);
  };
  return def;
}

}  // namespace

std::string binary_options(BinaryOp op, bool same_shape) {
  return fmt::format("-D BINARY_OP={} -D SAME_SHAPE={}", static_cast<int>(op), same_shape ? 1 : 0);
}

std::string unary_options(UnaryOp op) { return fmt::format("-D UNARY_OP={}", static_cast<int>(op)); }

Status register_elementwise(ops::KernelRegistry& registry, const Backend& backend,
                            std::shared_ptr<const Program> program) {
  for (const auto& [op_type, op] : {std::pair<std::string_view, BinaryOp>{"Add", BinaryOp::kAdd},
                                    {"Sub", BinaryOp::kSub},
                                    {"Mul", BinaryOp::kMul},
                                    {"Div", BinaryOp::kDiv}}) {
    HXRT_RETURN_IF_ERROR(registry.add(binary_kernel(backend, program, op_type, op)));
  }
  HXRT_RETURN_IF_ERROR(registry.add(unary_kernel(backend, program, "Relu", "", 14, UnaryOp::kRelu)));
  HXRT_RETURN_IF_ERROR(registry.add(leaky_relu_kernel(backend, program)));
  HXRT_RETURN_IF_ERROR(registry.add(unary_kernel(backend, program, "Gelu", "", 20, UnaryOp::kGeluErf)));
  HXRT_RETURN_IF_ERROR(registry.add(unary_kernel(backend, program, "Sigmoid", "", 13, UnaryOp::kSigmoid)));
  HXRT_RETURN_IF_ERROR(registry.add(unary_kernel(backend, program, "Tanh", "", 13, UnaryOp::kTanh)));
  HXRT_RETURN_IF_ERROR(registry.add(unary_kernel(backend, program, "Silu", "hxrt", 1, UnaryOp::kSilu)));
  return registry.add(swiglu_kernel(backend, program));
}

}  // namespace hxrt::kernels::jit
