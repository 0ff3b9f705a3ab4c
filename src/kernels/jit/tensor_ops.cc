// Tensor ops of the JIT backends: Reshape (a device-to-device copy on the stream, none when the planner made input
// and output one view), Gather (a row copy by words: one work-item per word of a gathered row, any plain dtype or
// whole quantized rows), and the strided copies Transpose, Slice and Concat (any plain dtype, one work-item per
// element). Each backend supplies the two programs (kernels/<dev>/tensor_ops.cc).
//
// Transpose and Slice are both the CPU's StridedCopy (kernels/cpu/tensor_ops.h): the output is written row-major
// while the source is read at base + Σ index[d]·stride[d]. The host drops dims of 1 and merges dims over which the
// source is contiguous, then passes at most 8 dims and strides (two int4 each) to `strided_copy_<bytes>`. Concat
// launches `concat_part_<bytes>` once per input, writing its rows into their place in the output rows. The copy
// kernels come in one program for the four element widths (1, 2, 4, 8 bytes), so a dtype needs no compile of its own.
// Slice reads its starts/ends/axes/steps from the graph's initializers when the plan is built (the schema requires
// constants) and computes each axis with the CPU's slice_axis, so clamping and negative steps are the CPU's.
#include <array>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hxrt/ops/params/tensor_ops.h"
#include "kernels/jit/jit_family.h"

namespace hxrt::kernels::jit {
namespace {

constexpr uint32_t kGroup = 256;


struct GatherGeometry final : ops::TypedGeometry<GatherGeometry> {
  static constexpr std::string_view kName = "jit::GatherGeometry";
  int64_t outer = 1, axis_dim = 0, n_indices = 0;
  uint64_t row_bytes = 0;
  int64_t units() const { return outer * n_indices; }
};

Result<GatherGeometry> gather_geometry(int64_t axis_attr, const ops::TensorRef& data, const ops::TensorRef& indices) {
  HXRT_ASSIGN_OR_RETURN(const int axis, ops::normalize_axis(axis_attr, data.shape.rank(), "Gather"));
  GatherGeometry g;
  g.outer = ops::dims_product(data.shape, 0, axis);
  const int64_t inner = ops::dims_product(data.shape, axis + 1, data.shape.rank());
  g.axis_dim = data.shape.dim(axis);
  g.n_indices = indices.num_elements();
  HXRT_ASSIGN_OR_RETURN(g.row_bytes, storage_bytes(data.dtype, static_cast<uint64_t>(inner)));
  HXRT_RETURN_IF_ERROR(check_int32(g.units() * static_cast<int64_t>(g.row_bytes), "Gather output bytes"));
  HXRT_RETURN_IF_ERROR(check_int32(g.outer * g.axis_dim, "Gather rows"));
  return g;
}

// The widest word (4, 2 or 1 bytes) dividing the row size and both byte offsets.
uint64_t word_bytes(uint64_t row_bytes, uint64_t data_offset, uint64_t out_offset) {
  for (uint64_t word : {4u, 2u}) {
    if (row_bytes % word == 0 && data_offset % word == 0 && out_offset % word == 0) return word;
  }
  return 1;
}

ops::KernelDef gather_kernel(const Backend& backend, std::shared_ptr<const Program> program) {
  ops::KernelDef def = make_def(backend, "Gather", "", 13, "Gather", "row copy by 4/2/1-byte words, any plain dtype");
  def.input_dtypes = {{}, {DType::kI32, DType::kI64}};
  def.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_axis_params(node, 0));
  };
  def.tiling = [](const ops::TilingQuery& query) -> Result<ops::Tiling> {
    HXRT_ASSIGN_OR_RETURN(const GatherGeometry g,
                          gather_geometry(query.params_as<ops::AxisParams>().axis, query.inputs[0], query.inputs[1]));
    const uint64_t word = word_bytes(g.row_bytes, 0, 0);  // views are aligned in practice; launch() re-checks
    ops::Tiling tiling;
    tiling.launch = launch_1d(g.units() * static_cast<int64_t>(g.row_bytes / word), kGroup);
    tiling.values = {{"wg", kGroup}, {"word_bytes", static_cast<int64_t>(word)}};
    tiling.geometry = std::make_shared<GatherGeometry>(g);
    return tiling;
  };
  def.launch = [backend, program](hal::Stream& stream, const ops::KernelLaunch& launch) -> Status {
    const ops::TensorRef& data = launch.inputs[0];
    const ops::TensorRef& indices = launch.inputs[1];
    const ops::TensorRef& y = launch.outputs[0];
    const auto& g = launch.tiling->geometry_as<GatherGeometry>();
    if (g.units() == 0 || g.row_bytes == 0) return ok_status();
    const uint64_t word = word_bytes(g.row_bytes, data.view.offset, y.view.offset);
    const int64_t words_per_row = static_cast<int64_t>(g.row_bytes / word);
    const hal::LaunchConfig config = static_cast<int64_t>(word) == launch.tiling->get("word_bytes")
                                         ? launch.tiling->launch
                                         : launch_1d(g.units() * words_per_row, kGroup);
    std::vector<hal::KernelArg> args;
    backend.add_tensor_arg(args, data);
    backend.add_tensor_arg(args, indices);
    backend.add_tensor_arg(args, y);
    for (int64_t v : {g.units(), g.n_indices, g.axis_dim, words_per_row}) {
      args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(v)));
    }
    return launch_program(stream, *program, "gather", gather_options(word, indices.dtype == DType::kI64), config, args);
  };
  return def;
}

ops::KernelDef reshape_kernel(const Backend& backend) {
  ops::KernelDef def = make_def(backend, "Reshape", "", 14, "Reshape", "device-to-device copy (none when input and output are one view)");
  def.input_dtypes = {{}, {DType::kI64}};
  def.tiling = copy_bytes_tiling;
  def.launch = [](hal::Stream& stream, const ops::KernelLaunch& launch) -> Status {
    const ops::TensorRef& x = launch.inputs[0];
    const ops::TensorRef& y = launch.outputs[0];
    if (x.num_elements() != y.num_elements()) {
      return invalid_argument("Reshape: input {} has {} elements but the output {} has {}", x.shape, x.num_elements(),
                              y.shape, y.num_elements());
    }
    HXRT_ASSIGN_OR_RETURN(const uint64_t bytes, storage_bytes(x.dtype, static_cast<uint64_t>(x.num_elements())));
    if (bytes == 0 || (x.view.buffer == y.view.buffer && x.view.offset == y.view.offset)) return ok_status();
    return stream.copy(y.view.subview(0, bytes), x.view.subview(0, bytes));
  };
  return def;
}

// ---- Strided copies: Transpose, Slice, Concat -----------------------------------------------------------------

constexpr int kCopyRank = 8;  // dims of a strided copy after merging (Shape::kMaxRank)


using Int4 = std::array<int32_t, 4>;

// A strided copy merged to at most kCopyRank dims, right-aligned (leading slots: dim 1, stride 0).
struct StridedPlan {
  std::array<int32_t, kCopyRank> dims{1, 1, 1, 1, 1, 1, 1, 1};
  std::array<int32_t, kCopyRank> strides{};
  int64_t base = 0;
  int64_t elements = 0;
};

// As cpu::StridedCopy::make: dims of 1 dropped, a dim merged into the previous kept one when the source is
// contiguous across both. `source_elements` bounds every index, so strides and base fit 32 bits when it does.
Result<StridedPlan> make_strided_plan(std::span<const int64_t> out_dims, std::span<const int64_t> src_strides,
                                      int64_t src_base, int64_t source_elements) {
  HXRT_RETURN_IF_ERROR(check_int32(source_elements, "strided copy source elements"));
  StridedPlan plan;
  plan.elements = 1;
  for (int64_t d : out_dims) plan.elements *= d;
  HXRT_RETURN_IF_ERROR(check_int32(plan.elements, "strided copy output elements"));
  plan.base = src_base;
  std::vector<std::pair<int64_t, int64_t>> merged;  // (dim, stride), outermost first
  for (size_t d = 0; d < out_dims.size(); ++d) {
    if (out_dims[d] == 1) continue;
    if (!merged.empty() && merged.back().second == src_strides[d] * out_dims[d]) {
      merged.back().first *= out_dims[d];
      merged.back().second = src_strides[d];
    } else {
      merged.emplace_back(out_dims[d], src_strides[d]);
    }
  }
  const size_t first = kCopyRank - merged.size();
  for (size_t i = 0; i < merged.size(); ++i) {
    plan.dims[first + i] = static_cast<int32_t>(merged[i].first);
    plan.strides[first + i] = static_cast<int32_t>(merged[i].second);
  }
  return plan;
}

Status launch_strided_copy(hal::Stream& stream, const Backend& backend, const Program& program, const ops::TensorRef& x,
                           const ops::TensorRef& y, const StridedPlan& plan, size_t element_bytes) {
  if (plan.elements == 0) return ok_status();
  std::vector<hal::KernelArg> args;
  backend.add_tensor_arg(args, x);
  backend.add_tensor_arg(args, y);
  args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(plan.elements)));
  const auto quad = [](const std::array<int32_t, kCopyRank>& v, size_t at) {
    return Int4{v[at], v[at + 1], v[at + 2], v[at + 3]};
  };
  args.push_back(hal::KernelArg::scalar(quad(plan.dims, 0)));
  args.push_back(hal::KernelArg::scalar(quad(plan.dims, 4)));
  args.push_back(hal::KernelArg::scalar(quad(plan.strides, 0)));
  args.push_back(hal::KernelArg::scalar(quad(plan.strides, 4)));
  args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(plan.base)));
  return launch_program(stream, program, fmt::format("strided_copy_{}", element_bytes), "",
                       launch_1d(plan.elements, kGroup), args);
}

// Bytes per element of a dtype the copy kernels move: 1, 2, 4 or 8.
Result<size_t> copy_element_bytes(const Backend& backend, DType dtype, std::string_view op) {
  const size_t bytes = ops::element_bytes(dtype);
  if (bytes == 0) return invalid_argument("{}: block-quantized dtype {} is not supported", op, dtype);
  if (bytes != 1 && bytes != 2 && bytes != 4 && bytes != 8) {
    return unimplemented("{}: {} copies elements of 1, 2, 4 or 8 bytes, not {} ({})", op, backend.name, bytes, dtype);
  }
  return bytes;
}

// One work-item (thread) per output element (the launch recomputes the geometry; Concat launches once per input).
Result<ops::Tiling> copy_tiling(const ops::TilingQuery& query) {
  const int64_t n = query.outputs.empty() ? 0 : query.outputs[0].num_elements();
  HXRT_RETURN_IF_ERROR(check_int32(n, "elements"));
  ops::Tiling tiling;
  tiling.launch = launch_1d(n, kGroup);
  tiling.values = {{"wg", kGroup}};
  return tiling;
}

ops::KernelDef transpose_kernel(const Backend& backend, std::shared_ptr<const Program> program) {
  ops::KernelDef def = make_def(backend, "Transpose", "", 13, "Transpose", "strided copy with merged dims, any plain dtype");
  def.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_transpose_params(node));
  };
  def.tiling = copy_tiling;
  def.launch = [backend, program](hal::Stream& stream, const ops::KernelLaunch& launch) -> Status {
    const ops::TensorRef& x = launch.inputs[0];
    const ops::TensorRef& y = launch.outputs[0];
    std::vector<int64_t> perm = launch.params_as<ops::TransposeParams>().perm;
    if (perm.empty()) {
      for (int d = x.shape.rank() - 1; d >= 0; --d) perm.push_back(d);
    }
    HXRT_RETURN_IF_ERROR_CTX(ops::check_permutation(perm, x.shape.rank()), "Transpose of {}", x.shape);
    HXRT_ASSIGN_OR_RETURN(const size_t eb, copy_element_bytes(backend, x.dtype, "Transpose"));
    if (!(ops::transposed_shape(x.shape, perm) == y.shape) || y.dtype != x.dtype) {
      return invalid_argument("Transpose: output {} {} is not the transpose of {} {}", y.dtype, y.shape, x.dtype,
                              x.shape);
    }
    const auto in_strides = x.shape.strides();
    std::vector<int64_t> dims;
    std::vector<int64_t> strides;
    for (int64_t p : perm) {
      dims.push_back(x.shape.dim(static_cast<int>(p)));
      strides.push_back(in_strides[static_cast<size_t>(p)]);
    }
    HXRT_ASSIGN_OR_RETURN(const StridedPlan plan, make_strided_plan(dims, strides, 0, x.num_elements()));
    return launch_strided_copy(stream, backend, *program, x, y, plan, eb);
  };
  return def;
}

// Note [Slice on symbolic axes] in kernels/cpu/tensor_ops.cc: the slice is recomputed from the bound shape and must
// match the planned output.
Status launch_slice(hal::Stream& stream, const Backend& backend, const Program& program, const ops::KernelLaunch& launch) {
  const auto& params = launch.params_as<ops::SliceParams>();
  const ops::TensorRef& x = launch.inputs[0];
  const ops::TensorRef& y = launch.outputs[0];
  const int rank = x.shape.rank();
  HXRT_ASSIGN_OR_RETURN(const size_t eb, copy_element_bytes(backend, x.dtype, "Slice"));
  if (y.dtype != x.dtype || y.shape.rank() != rank) {
    return invalid_argument("Slice: output {} {} does not fit input {} {}", y.dtype, y.shape, x.dtype, x.shape);
  }
  std::array<ops::SliceAxis, Shape::kMaxRank> axes{};
  std::array<bool, Shape::kMaxRank> sliced{};
  for (int d = 0; d < rank; ++d) axes[static_cast<size_t>(d)] = ops::SliceAxis{0, 1, x.shape.dim(d)};
  for (size_t i = 0; i < params.starts.size(); ++i) {
    HXRT_ASSIGN_OR_RETURN(const int axis, ops::normalize_axis(params.axes[i], rank, "Slice"));
    if (sliced[static_cast<size_t>(axis)]) return invalid_argument("Slice: axis {} appears twice in axes", axis);
    if (params.steps[i] == 0) return invalid_argument("Slice: step {} is 0", i);
    sliced[static_cast<size_t>(axis)] = true;
    axes[static_cast<size_t>(axis)] =
        ops::slice_axis(x.shape.dim(axis), params.starts[i], params.ends[i], params.steps[i]);
  }
  const auto in_strides = x.shape.strides();
  std::vector<int64_t> dims;
  std::vector<int64_t> strides;
  int64_t base = 0;
  for (int d = 0; d < rank; ++d) {
    const ops::SliceAxis& a = axes[static_cast<size_t>(d)];
    if (a.count != y.shape.dim(d)) {
      return invalid_argument(
          "Slice: slicing {} gives {} elements on axis {} but the planned output is {} (a symbolic dim shorter than "
          "the slice bounds?)",
          x.shape, a.count, d, y.shape);
    }
    dims.push_back(a.count);
    strides.push_back(in_strides[static_cast<size_t>(d)] * a.step);
    if (a.count > 0) base += a.start * in_strides[static_cast<size_t>(d)];
  }
  HXRT_ASSIGN_OR_RETURN(const StridedPlan plan, make_strided_plan(dims, strides, base, x.num_elements()));
  return launch_strided_copy(stream, backend, program, x, y, plan, eb);
}

ops::KernelDef slice_kernel(const Backend& backend, std::shared_ptr<const Program> program) {
  ops::KernelDef def =
      make_def(backend, "Slice", "", 13, "Slice",
                 "ONNX slice (constant bounds read at plan time) as a strided copy, negative steps included");
  const std::vector<DType> index_types = {DType::kI32, DType::kI64};
  def.input_dtypes = {{}, index_types, index_types, index_types, index_types};
  def.parse_attrs = [](const graph::Graph& graph, const graph::Node& node) {
    return ops::boxed(ops::parse_slice_params(graph, node));
  };
  def.tiling = copy_tiling;
  def.launch = [backend, program](hal::Stream& stream, const ops::KernelLaunch& launch) {
    return launch_slice(stream, backend, *program, launch);
  };
  return def;
}

Status launch_concat(hal::Stream& stream, const Backend& backend, const Program& program, const ops::KernelLaunch& launch) {
  const ops::TensorRef& y = launch.outputs[0];
  const int rank = y.shape.rank();
  HXRT_ASSIGN_OR_RETURN(const int axis, ops::normalize_axis(launch.params_as<ops::AxisParams>().axis, rank, "Concat"));
  HXRT_ASSIGN_OR_RETURN(const size_t eb, copy_element_bytes(backend, y.dtype, "Concat"));
  int64_t outer = 1;
  int64_t inner = 1;
  for (int d = 0; d < axis; ++d) outer *= y.shape.dim(d);
  for (int d = axis + 1; d < rank; ++d) inner *= y.shape.dim(d);
  const int64_t y_row = y.shape.dim(axis) * inner;
  HXRT_RETURN_IF_ERROR(check_int32(y.num_elements(), "Concat output elements"));
  // Element offset of each input inside an output row, checked (as on the CPU) so that no copy leaves its row.
  std::vector<int64_t> starts(launch.inputs.size() + 1, 0);
  for (size_t i = 0; i < launch.inputs.size(); ++i) {
    const ops::TensorRef& in = launch.inputs[i];
    bool match = in.shape.rank() == rank && in.dtype == y.dtype;
    for (int d = 0; match && d < rank; ++d) match = d == axis || in.shape.dim(d) == y.shape.dim(d);
    if (!match) {
      return invalid_argument("Concat: input {} ({}{}) does not match the output {}{} outside axis {}", i, in.dtype,
                              in.shape, y.dtype, y.shape, axis);
    }
    starts[i + 1] = starts[i] + in.shape.dim(axis) * inner;
  }
  if (starts.back() != y_row) {
    return invalid_argument("Concat: inputs fill {} elements of each output row of {}", starts.back(), y_row);
  }
  for (size_t i = 0; i < launch.inputs.size(); ++i) {
    const int64_t row = starts[i + 1] - starts[i];
    const int64_t n = outer * row;
    if (n == 0) continue;
    std::vector<hal::KernelArg> args;
    backend.add_tensor_arg(args, launch.inputs[i]);
    backend.add_tensor_arg(args, y);
    for (int64_t v : {n, row, y_row, starts[i]}) args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(v)));
    HXRT_RETURN_IF_ERROR(
        launch_program(stream, program, fmt::format("concat_part_{}", eb), "", launch_1d(n, kGroup), args));
  }
  return ok_status();
}

ops::KernelDef concat_kernel(const Backend& backend, std::shared_ptr<const Program> program) {
  ops::KernelDef def = make_def(backend, "Concat", "", 13, "Concat", "one row copy launch per input, any plain dtype");
  def.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_axis_params(node, 0, /*required=*/true));
  };
  def.tiling = copy_tiling;
  def.launch = [backend, program](hal::Stream& stream, const ops::KernelLaunch& launch) {
    return launch_concat(stream, backend, *program, launch);
  };
  return def;
}

}  // namespace

std::string gather_options(uint64_t word_bytes, bool i64_indices) {
  return fmt::format("-D WORD_BYTES={} -D IDX_I64={}", word_bytes, i64_indices ? 1 : 0);
}

Status register_tensor_ops(ops::KernelRegistry& registry, const Backend& backend,
                           std::shared_ptr<const Program> gather, std::shared_ptr<const Program> copies) {
  HXRT_RETURN_IF_ERROR(registry.add(gather_kernel(backend, gather)));
  HXRT_RETURN_IF_ERROR(registry.add(reshape_kernel(backend)));
  HXRT_RETURN_IF_ERROR(registry.add(transpose_kernel(backend, copies)));
  HXRT_RETURN_IF_ERROR(registry.add(slice_kernel(backend, copies)));
  return registry.add(concat_kernel(backend, copies));
}

}  // namespace hxrt::kernels::jit
