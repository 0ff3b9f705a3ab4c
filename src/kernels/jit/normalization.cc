// The JIT backends' normalization and position kernels: RMSNorm, the fused RMSNormMul, Softmax, LayerNormalization and RoPE.
//
// RMSNorm(Mul), LayerNormalization and Softmax over the last axis run one work-group per row: the work-items stride
// through the row, then reduce in local memory (sums in acc_t, i.e. double where the device has it, as the CPU
// kernels do; LayerNormalization's row is every dim from its axis on). Softmax
// over an inner axis runs one work-item per (outer, column) walking the axis. RoPE runs one work-item per (token row,
// pair), computing the pair's angle once in acc_t like the CPU's rope_cos_sin and rotating it in every head.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "hxrt/ops/params/normalization.h"
#include "kernels/jit/jit_family.h"

namespace hxrt::kernels::jit {
namespace {

constexpr int64_t kMaxRowGroup = 128;  // work-items per row of a row reduction
constexpr uint32_t kGroup = 128;       // work-items per group of the per-element kernels


// Work-items per row: a power of two, at most kMaxRowGroup, about a quarter of the row.
int64_t row_group(int64_t row) { return std::clamp<int64_t>(next_power_of_two(std::max<int64_t>(1, row / 4)), 1, kMaxRowGroup); }

// One group per row of the last axis.
Result<ops::Tiling> last_axis_tiling(const ops::TilingQuery& query) {
  const Shape& x = query.inputs[0].shape;
  const int64_t d = x.rank() == 0 ? 1 : x.dim(-1);
  const int64_t rows = d == 0 ? 0 : x.num_elements() / d;
  HXRT_RETURN_IF_ERROR(check_int32(rows, "rows"));
  HXRT_RETURN_IF_ERROR(check_int32(d, "row length"));
  const int64_t group = row_group(d);
  ops::Tiling tiling;
  tiling.launch.grid = {static_cast<uint32_t>(std::max<int64_t>(1, rows)), 1, 1};
  tiling.launch.block = {static_cast<uint32_t>(group), 1, 1};
  tiling.values = {{"wg", group}};
  return tiling;
}

ops::KernelDef rms_kernel(const Backend& backend, std::shared_ptr<const Program> program, bool fused) {
  ops::KernelDef def = fused ? make_def(backend, "RMSNormMul", "hxrt.fused", 1, "RMSNormMul",
                                          "one group per row: sum of squares in double, weight multiply in the same pass")
                             : make_def(backend, "RMSNorm", "hxrt", 1, "RMSNormF32", "one group per row, sum of squares in double");
  if (fused) {
    def.kind = ops::KernelKind::kFused;
    def.priority = 10;
  }
  def.input_dtypes.assign(fused ? 2 : 1, {DType::kF32});
  def.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_epsilon_params(node));
  };
  def.tiling = last_axis_tiling;
  def.launch = [backend, program, fused](hal::Stream& stream, const ops::KernelLaunch& launch) -> Status {
    const ops::TensorRef& x = launch.inputs[0];
    const ops::TensorRef& y = launch.outputs[0];
    if (x.shape.rank() < 1 || !(y.shape == x.shape)) return invalid_argument("RMSNorm: X {} and Y {} do not fit", x.shape, y.shape);
    const int64_t d = x.shape.dim(-1);
    if (fused && launch.inputs[1].num_elements() != d) {
      return invalid_argument("RMSNormMul: weight {} must hold the {} values of X's last axis", launch.inputs[1].shape, d);
    }
    if (y.num_elements() == 0) return ok_status();
    const ops::TensorRef& w = fused ? launch.inputs[1] : x;  // unread without a weight
    std::vector<hal::KernelArg> args;
    backend.add_tensor_arg(args, x);
    backend.add_tensor_arg(args, w);
    backend.add_tensor_arg(args, y);
    args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(d)));
    args.push_back(hal::KernelArg::scalar(launch.params_as<ops::EpsilonParams>().epsilon));
    return launch_program(stream, *program, "rms_norm", rms_norm_options(fused, launch.tiling->get("wg", 0)),
                          launch.tiling->launch, args);
  };
  return def;
}

ops::KernelDef softmax_kernel(const Backend& backend, std::shared_ptr<const Program> program) {
  ops::KernelDef def = make_def(backend, "Softmax", "", 13, "SoftmaxF32",
                                  "one group per row (last axis) or one work-item per column; sums in double");
  def.input_dtypes = {{DType::kF32}};
  def.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_axis_params(node, -1));
  };
  def.tiling = [](const ops::TilingQuery& query) -> Result<ops::Tiling> {
    const Shape& x = query.inputs[0].shape;
    HXRT_ASSIGN_OR_RETURN(const ops::SoftmaxGeometry g,
                          ops::softmax_geometry(x, query.params_as<ops::AxisParams>().axis));
    HXRT_RETURN_IF_ERROR(check_int32(x.num_elements(), "elements"));
    ops::Tiling tiling;
    tiling.geometry = std::make_shared<ops::SoftmaxGeometry>(g);
    if (g.inner == 1) {
      const int64_t group = row_group(g.axis_len);
      tiling.launch.grid = {static_cast<uint32_t>(std::max<int64_t>(1, g.outer)), 1, 1};
      tiling.launch.block = {static_cast<uint32_t>(group), 1, 1};
      tiling.values = {{"rows", 1}, {"wg", group}};
    } else {
      tiling.launch = launch_1d(g.outer * g.inner, kGroup);
      tiling.values = {{"rows", 0}, {"wg", kGroup}};
    }
    return tiling;
  };
  def.launch = [backend, program](hal::Stream& stream, const ops::KernelLaunch& launch) -> Status {
    const ops::TensorRef& x = launch.inputs[0];
    const ops::TensorRef& y = launch.outputs[0];
    if (y.num_elements() == 0) return ok_status();
    const auto& g = launch.tiling->geometry_as<ops::SoftmaxGeometry>();
    std::vector<hal::KernelArg> args;
    backend.add_tensor_arg(args, x);
    backend.add_tensor_arg(args, y);
    if (launch.tiling->get("rows") == 1) {
      args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(g.axis_len)));
      return launch_program(stream, *program, "softmax_rows", tiling_defines(*launch.tiling, {"wg"}), launch.tiling->launch,
                           args);
    }
    args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(g.outer)));
    args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(g.axis_len)));
    args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(g.inner)));
    return launch_program(stream, *program, "softmax_columns", "", launch.tiling->launch, args);
  };
  return def;
}

ops::KernelDef layer_norm_kernel(const Backend& backend, std::shared_ptr<const Program> program) {
  ops::KernelDef def = make_def(backend, "LayerNormalization", "", 17, "LayerNormalizationF32",
                                  "one group per row of dims axis..end, mean and variance in double");
  def.input_dtypes = {{DType::kF32}, {DType::kF32}, {DType::kF32}};
  // Y only: the optional Mean and InvStdDev outputs (training graphs) are the CPU kernel's.
  def.supports = [backend](const graph::Graph& graph, const graph::Node& node, std::string* why_not) {
    for (size_t i = 1; i < node.outputs.size(); ++i) {
      if (!graph.value(node.outputs[i]).consumers.empty() || graph.value(node.outputs[i]).is_output) {
        *why_not = fmt::format("the Mean and InvStdDev outputs are not computed by the {} kernel", backend.name);
        return false;
      }
    }
    return true;
  };
  def.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_layer_norm_params(node));
  };
  def.tiling = [](const ops::TilingQuery& query) -> Result<ops::Tiling> {
    HXRT_ASSIGN_OR_RETURN(
        const ops::LayerNormGeometry g,
        ops::layer_norm_geometry(query.inputs[0].shape, query.params_as<ops::LayerNormParams>().axis));
    HXRT_RETURN_IF_ERROR(check_int32(g.rows, "rows"));
    HXRT_RETURN_IF_ERROR(check_int32(g.d, "row length"));
    const int64_t group = row_group(g.d);
    ops::Tiling tiling;
    tiling.geometry = std::make_shared<ops::LayerNormGeometry>(g);
    tiling.launch.grid = {static_cast<uint32_t>(std::max<int64_t>(1, g.rows)), 1, 1};
    tiling.launch.block = {static_cast<uint32_t>(group), 1, 1};
    tiling.values = {{"wg", group}};
    return tiling;
  };
  def.launch = [backend, program](hal::Stream& stream, const ops::KernelLaunch& launch) -> Status {
    const auto& params = launch.params_as<ops::LayerNormParams>();
    const ops::TensorRef& x = launch.inputs[0];
    const ops::TensorRef& scale = launch.inputs[1];
    const ops::TensorRef& y = launch.outputs[0];
    if (!(y.shape == x.shape)) return invalid_argument("LayerNormalization: X {} and Y {} differ", x.shape, y.shape);
    if (y.num_elements() == 0) return ok_status();
    const auto& g = launch.tiling->geometry_as<ops::LayerNormGeometry>();
    if (scale.num_elements() != g.d) {
      return invalid_argument("LayerNormalization: Scale {} has {} elements, the normalised dims of X {} have {}",
                              scale.shape, scale.num_elements(), x.shape, g.d);
    }
    const bool has_bias = launch.inputs.size() > 2 && launch.inputs[2].view.buffer != nullptr;
    if (has_bias && launch.inputs[2].num_elements() != g.d) {
      return invalid_argument("LayerNormalization: B {} has {} elements, the normalised dims of X {} have {}",
                              launch.inputs[2].shape, launch.inputs[2].num_elements(), x.shape, g.d);
    }
    std::vector<hal::KernelArg> args;
    backend.add_tensor_arg(args, x);
    backend.add_tensor_arg(args, scale);
    backend.add_tensor_arg(args, has_bias ? launch.inputs[2] : scale);  // unread without a bias
    backend.add_tensor_arg(args, y);
    args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(g.d)));
    args.push_back(hal::KernelArg::scalar(params.epsilon));
    args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(has_bias ? 1 : 0)));
    return launch_program(stream, *program, "layer_norm", tiling_defines(*launch.tiling, {"wg"}), launch.tiling->launch,
                         args);
  };
  return def;
}

int64_t rope_items(const ops::RopeGeometry& g) {
  return g.rows * ((g.head_dim + 1) / 2);
}

ops::KernelDef rope_kernel(const Backend& backend, std::shared_ptr<const Program> program) {
  ops::KernelDef def = make_def(backend, "RoPE", "hxrt", 1, "RoPEF32",
                                  "one work-item per (row, pair) over all heads, angle in double; normal or neox, i32/i64 positions, frequency "
                                  "factors, linear and YaRN scaling");
  def.input_dtypes = {{DType::kF32}, {DType::kI32, DType::kI64}, {DType::kF32}};
  def.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_rope_params(node));
  };
  def.tiling = [](const ops::TilingQuery& query) -> Result<ops::Tiling> {
    HXRT_ASSIGN_OR_RETURN(const ops::RopeGeometry g, ops::rope_geometry(query.params_as<ops::RopeParams>(),
                                                                        query.inputs[0].shape, query.inputs[1].shape));
    HXRT_RETURN_IF_ERROR(check_int32(rope_items(g), "RoPE work-items"));
    ops::Tiling tiling;
    tiling.launch = launch_1d(rope_items(g), kGroup);
    tiling.values = {{"wg", kGroup}};
    tiling.geometry = std::make_shared<ops::RopeGeometry>(g);
    return tiling;
  };
  def.launch = [backend, program](hal::Stream& stream, const ops::KernelLaunch& launch) -> Status {
    const auto& params = launch.params_as<ops::RopeParams>();
    const ops::TensorRef& x = launch.inputs[0];
    const ops::TensorRef& positions = launch.inputs[1];
    const auto& g = launch.tiling->geometry_as<ops::RopeGeometry>();
    if (rope_items(g) == 0) return ok_status();
    const bool has_factors = launch.inputs.size() > 2 && launch.inputs[2].view.buffer != nullptr;
    if (has_factors) {
      HXRT_RETURN_IF_ERROR(ops::check_rope_freq_factors(g, launch.inputs[2].dtype, launch.inputs[2].shape));
    }
    std::vector<hal::KernelArg> args;
    backend.add_tensor_arg(args, x);
    backend.add_tensor_arg(args, positions);
    backend.add_tensor_arg(args, has_factors ? launch.inputs[2] : positions);  // unread without factors
    backend.add_tensor_arg(args, launch.outputs[0]);
    for (int64_t v : {g.rows, g.n_tokens, g.n_heads, g.head_dim, g.rotary_dims}) {
      args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(v)));
    }
    for (float v : {params.theta, params.freq_scale, params.ext_factor, params.attn_factor, g.corr_low, g.corr_high}) {
      args.push_back(hal::KernelArg::scalar(v));
    }
    return launch_program(stream, *program, "rope",
                          rope_options(params.mode == ops::RopeMode::kNeox, positions.dtype == DType::kI64, has_factors),
                          launch.tiling->launch, args);
  };
  return def;
}

}  // namespace

std::string rms_norm_options(bool weighted, int64_t group) {
  return fmt::format("-D HAS_WEIGHT={} -D WG={}", weighted ? 1 : 0, group);
}

std::string rope_options(bool neox, bool i64_positions, bool freq_factors) {
  return fmt::format("-D NEOX={} -D POS_I64={} -D HAS_FACTORS={}", neox ? 1 : 0, i64_positions ? 1 : 0,
                     freq_factors ? 1 : 0);
}

std::vector<int64_t> row_groups() {
  std::vector<int64_t> groups;
  for (int64_t group = 1; group <= kMaxRowGroup; group *= 2) groups.push_back(group);
  return groups;
}

Status register_normalization(ops::KernelRegistry& registry, const Backend& backend,
                              std::shared_ptr<const Program> program) {
  HXRT_RETURN_IF_ERROR(registry.add(rms_kernel(backend, program, /*fused=*/false)));
  HXRT_RETURN_IF_ERROR(registry.add(rms_kernel(backend, program, /*fused=*/true)));
  HXRT_RETURN_IF_ERROR(registry.add(softmax_kernel(backend, program)));
  HXRT_RETURN_IF_ERROR(registry.add(layer_norm_kernel(backend, program)));
  return registry.add(rope_kernel(backend, program));
}

}  // namespace hxrt::kernels::jit
