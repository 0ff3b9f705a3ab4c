#include "kernels/cpu/tensor_ops.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/registration.h"

namespace hxrt::kernels::cpu {

// ---- Strided copy -----------------------------------------------------------------------------------------------

StridedCopy StridedCopy::make(std::span<const int64_t> out_dims, std::span<const int64_t> src_strides, int64_t src_base,
                              size_t element_bytes) {
  StridedCopy plan;
  plan.base_ = src_base;
  plan.element_bytes_ = element_bytes;
  const bool empty = std::any_of(out_dims.begin(), out_dims.end(), [](int64_t d) { return d == 0; });
  if (empty) {
    plan.rank_ = 1;
    plan.dims_[0] = 0;
    plan.strides_[0] = 1;
    plan.rows_ = 0;
    plan.cols_ = 0;
    return plan;
  }
  // Drop dims of 1; merge a dim into the next kept one when the source is contiguous across both.
  int rank = 0;
  for (size_t d = 0; d < out_dims.size(); ++d) {
    const int64_t dim = out_dims[d];
    const int64_t stride = src_strides[d];
    if (dim == 1) continue;
    if (rank > 0 && plan.strides_[rank - 1] == stride * dim) {
      plan.dims_[rank - 1] *= dim;
      plan.strides_[rank - 1] = stride;
    } else {
      plan.dims_[rank] = dim;
      plan.strides_[rank] = stride;
      ++rank;
    }
  }
  if (rank == 0) {  // a single element
    plan.dims_[0] = 1;
    plan.strides_[0] = 1;
    rank = 1;
  }
  plan.rank_ = rank;
  plan.cols_ = plan.dims_[rank - 1];
  plan.rows_ = 1;
  for (int d = 0; d + 1 < rank; ++d) plan.rows_ *= plan.dims_[d];
  return plan;
}

namespace {

template <size_t kBytes>
void strided_row(const std::byte* src, int64_t stride, std::byte* dst, int64_t n) {
  for (int64_t j = 0; j < n; ++j)
    std::memcpy(dst + j * static_cast<int64_t>(kBytes), src + j * stride * static_cast<int64_t>(kBytes), kBytes);
}

}  // namespace

void StridedCopy::run(const std::byte* src, std::byte* dst, int64_t row_begin, int64_t row_end) const {
  if (row_begin >= row_end || cols_ == 0) return;
  const int outer_rank = rank_ - 1;
  const int64_t inner_stride = strides_[static_cast<size_t>(outer_rank)];
  const auto eb = static_cast<int64_t>(element_bytes_);
  const int64_t row_bytes = cols_ * eb;
  // Odometer over the outer dims, started at row_begin.
  std::array<int64_t, Shape::kMaxRank> index{};
  int64_t offset = base_;
  int64_t rest = row_begin;
  for (int d = outer_rank - 1; d >= 0; --d) {
    index[d] = rest % dims_[d];
    rest /= dims_[d];
    offset += index[d] * strides_[d];
  }
  for (int64_t r = row_begin; r < row_end; ++r) {
    const std::byte* s = src + offset * eb;
    std::byte* o = dst + r * row_bytes;
    if (inner_stride == 1) {
      std::memcpy(o, s, static_cast<size_t>(row_bytes));
    } else {
      switch (element_bytes_) {
        case 1: strided_row<1>(s, inner_stride, o, cols_); break;
        case 2: strided_row<2>(s, inner_stride, o, cols_); break;
        case 4: strided_row<4>(s, inner_stride, o, cols_); break;
        case 8: strided_row<8>(s, inner_stride, o, cols_); break;
        default:
          for (int64_t j = 0; j < cols_; ++j) std::memcpy(o + j * eb, s + j * inner_stride * eb, element_bytes_);
      }
    }
    for (int d = outer_rank - 1; d >= 0; --d) {
      ++index[d];
      offset += strides_[d];
      if (index[d] < dims_[d]) break;
      offset -= dims_[d] * strides_[d];
      index[d] = 0;
    }
  }
}

// ---- Transpose --------------------------------------------------------------------------------------------------

StridedCopy transpose_plan(const Shape& in, std::span<const int64_t> perm, size_t element_bytes) {
  const auto in_strides = in.strides();
  std::array<int64_t, Shape::kMaxRank> dims{};
  std::array<int64_t, Shape::kMaxRank> strides{};
  for (size_t i = 0; i < perm.size(); ++i) {
    dims[i] = in.dims()[static_cast<size_t>(perm[i])];
    strides[i] = in_strides[static_cast<size_t>(perm[i])];
  }
  return StridedCopy::make(std::span<const int64_t>(dims.data(), perm.size()),
                           std::span<const int64_t>(strides.data(), perm.size()), 0, element_bytes);
}

// ---- Slice ------------------------------------------------------------------------------------------------------

StridedCopy slice_plan(const Shape& in, std::span<const SliceAxis> axes, size_t element_bytes) {
  const auto in_strides = in.strides();
  std::array<int64_t, Shape::kMaxRank> dims{};
  std::array<int64_t, Shape::kMaxRank> strides{};
  int64_t base = 0;
  for (size_t d = 0; d < axes.size(); ++d) {
    dims[d] = axes[d].count;
    strides[d] = in_strides[d] * axes[d].step;
    if (axes[d].count > 0) base += axes[d].start * in_strides[d];
  }
  return StridedCopy::make(std::span<const int64_t>(dims.data(), axes.size()),
                           std::span<const int64_t>(strides.data(), axes.size()), base, element_bytes);
}

// ---- Gather -----------------------------------------------------------------------------------------------------

namespace {
template <typename I>
Status resolve_typed(const I* indices, int64_t n, int64_t axis_dim, int64_t* out) {
  for (int64_t k = 0; k < n; ++k) {
    const auto v = static_cast<int64_t>(indices[k]);
    const int64_t resolved = v < 0 ? v + axis_dim : v;
    if (resolved < 0 || resolved >= axis_dim) {
      return out_of_range("Gather: index {} at position {} is out of range for an axis of {} (valid: [{}, {}))", v, k,
                          axis_dim, -axis_dim, axis_dim);
    }
    out[k] = resolved;
  }
  return ok_status();
}
}  // namespace

Status resolve_gather_indices(DType index_dtype, const void* indices, int64_t n, int64_t axis_dim, int64_t* out) {
  switch (index_dtype) {
    case DType::kI32: return resolve_typed(static_cast<const int32_t*>(indices), n, axis_dim, out);
    case DType::kI64: return resolve_typed(static_cast<const int64_t*>(indices), n, axis_dim, out);
    default: return invalid_argument("Gather: indices must be i32 or i64, got {}", index_dtype);
  }
}

void gather_rows(const std::byte* src, const int64_t* idx, int64_t n_indices, int64_t axis_dim, size_t row_bytes,
                 std::byte* dst, int64_t unit_begin, int64_t unit_end) {
  for (int64_t u = unit_begin; u < unit_end; ++u) {
    const int64_t o = u / n_indices;
    const int64_t k = u % n_indices;
    std::memcpy(dst + static_cast<size_t>(u) * row_bytes, src + static_cast<size_t>(o * axis_dim + idx[k]) * row_bytes,
                row_bytes);
  }
}

// ---- Concat -----------------------------------------------------------------------------------------------------

void concat_rows(const std::byte* src, size_t src_row_bytes, std::byte* dst, size_t dst_row_bytes, size_t dst_offset,
                 int64_t outer_begin, int64_t outer_end) {
  for (int64_t o = outer_begin; o < outer_end; ++o) {
    const auto row = static_cast<size_t>(o);
    std::memcpy(dst + row * dst_row_bytes + dst_offset, src + row * src_row_bytes, src_row_bytes);
  }
}

// ---- Kernels ----------------------------------------------------------------------------------------------------

namespace {

Status compute_gather(const ops::CpuComputeContext& ctx) {
  const ops::TensorRef& data = ctx.input(0);
  const ops::TensorRef& indices = ctx.input(1);
  const ops::TensorRef& y = ctx.output(0);
  HXRT_ASSIGN_OR_RETURN(const int axis,
                        ops::normalize_axis(ctx.params<ops::AxisParams>().axis, data.shape.rank(), "Gather"));
  const int64_t outer = ops::dims_product(data.shape, 0, axis);
  const int64_t axis_dim = data.shape.dims()[static_cast<size_t>(axis)];
  const int64_t inner = ops::dims_product(data.shape, axis + 1, data.shape.rank());
  HXRT_ASSIGN_OR_RETURN(const uint64_t row_bytes, storage_bytes(data.dtype, static_cast<uint64_t>(inner)));
  const int64_t n_indices = indices.num_elements();
  if (y.num_elements() != outer * n_indices * inner) {
    return internal_error("Gather: output {} does not hold {} x {} x {} elements", y.shape, outer, n_indices, inner);
  }
  std::vector<int64_t> resolved(static_cast<size_t>(n_indices));  // (n_indices)
  HXRT_RETURN_IF_ERROR(
      resolve_gather_indices(indices.dtype, indices.data<const void>(), n_indices, axis_dim, resolved.data()));
  if (y.num_elements() == 0) return ok_status();
  const auto* src = data.data<const std::byte>();
  auto* dst = y.data<std::byte>();
  ctx.pool().parallel_for(outer * n_indices, copy_units_per_chunk(ctx.tiling(), static_cast<int64_t>(row_bytes)),
                          [&](int64_t begin, int64_t end) {
                            gather_rows(src, resolved.data(), n_indices, axis_dim, row_bytes, dst, begin, end);
                          });
  return ok_status();
}

Status compute_reshape(const ops::CpuComputeContext& ctx) {
  const ops::TensorRef& x = ctx.input(0);
  const ops::TensorRef& y = ctx.output(0);
  if (x.num_elements() != y.num_elements()) {
    return invalid_argument("Reshape: input {} has {} elements but the output {} has {}", x.shape, x.num_elements(),
                            y.shape, y.num_elements());
  }
  HXRT_ASSIGN_OR_RETURN(const uint64_t bytes, storage_bytes(x.dtype, static_cast<uint64_t>(x.num_elements())));
  const auto* src = x.data<const std::byte>();
  auto* dst = y.data<std::byte>();
  if (bytes == 0 || src == dst) return ok_status();  // an aliased (in-place) reshape has nothing to copy
  const int64_t grain = tiling_grain(ctx.tiling(), "grain_bytes", kCopyGrainBytes);
  ctx.pool().parallel_for(static_cast<int64_t>(bytes), grain, [&](int64_t begin, int64_t end) {
    std::memcpy(dst + begin, src + begin, static_cast<size_t>(end - begin));
  });
  return ok_status();
}

Status run_strided_copy(const ops::CpuComputeContext& ctx, const StridedCopy& plan, size_t eb) {
  const auto* src = ctx.input(0).data<const std::byte>();
  auto* dst = ctx.output(0).data<std::byte>();
  if (plan.rows() == 0 || plan.cols() == 0) return ok_status();
  ctx.pool().parallel_for(plan.rows(), copy_units_per_chunk(ctx.tiling(), plan.cols() * static_cast<int64_t>(eb)),
                          [&](int64_t begin, int64_t end) { plan.run(src, dst, begin, end); });
  return ok_status();
}

Status compute_transpose(const ops::CpuComputeContext& ctx) {
  const ops::TensorRef& x = ctx.input(0);
  const ops::TensorRef& y = ctx.output(0);
  std::vector<int64_t> perm = ctx.params<ops::TransposeParams>().perm;
  if (perm.empty()) {
    for (int d = x.shape.rank() - 1; d >= 0; --d) perm.push_back(d);
  }
  HXRT_RETURN_IF_ERROR_CTX(check_permutation(perm, x.shape.rank()), "Transpose of {}", x.shape);
  HXRT_ASSIGN_OR_RETURN(const size_t eb, plain_element_bytes(x.dtype, "Transpose"));
  if (!(transposed_shape(x.shape, perm) == y.shape)) {
    return internal_error("Transpose: output {} is not the transpose of {}", y.shape, x.shape);
  }
  return run_strided_copy(ctx, transpose_plan(x.shape, perm, eb), eb);
}

Status compute_concat(const ops::CpuComputeContext& ctx) {
  const ops::TensorRef& y = ctx.output(0);
  const int rank = y.shape.rank();
  HXRT_ASSIGN_OR_RETURN(const int axis, ops::normalize_axis(ctx.params<ops::AxisParams>().axis, rank, "Concat"));
  HXRT_ASSIGN_OR_RETURN(const size_t eb, plain_element_bytes(y.dtype, "Concat"));
  const int64_t outer = ops::dims_product(y.shape, 0, axis);
  const int64_t inner = ops::dims_product(y.shape, axis + 1, rank);
  const size_t dst_row = static_cast<size_t>(y.shape.dims()[static_cast<size_t>(axis)] * inner) * eb;
  // Byte offset of each input inside an output row; shapes are checked so that no copy leaves its row.
  const size_t n_inputs = ctx.num_inputs();
  std::vector<size_t> offsets(n_inputs + 1, 0);
  for (size_t i = 0; i < n_inputs; ++i) {
    const ops::TensorRef& in = ctx.input(i);
    bool match = in.shape.rank() == rank && in.dtype == y.dtype;
    for (int d = 0; match && d < rank; ++d) {
      match = d == axis || in.shape.dims()[static_cast<size_t>(d)] == y.shape.dims()[static_cast<size_t>(d)];
    }
    if (!match) {
      return invalid_argument("Concat: input {} ({}{}) does not match the output {}{} outside axis {}", i, in.dtype,
                              in.shape, y.dtype, y.shape, axis);
    }
    offsets[i + 1] = offsets[i] + static_cast<size_t>(in.shape.dims()[static_cast<size_t>(axis)] * inner) * eb;
  }
  if (offsets[n_inputs] != dst_row) {
    return invalid_argument("Concat: inputs fill {} bytes of each output row of {} bytes", offsets[n_inputs], dst_row);
  }
  if (dst_row == 0 || outer == 0) return ok_status();
  auto* dst = y.data<std::byte>();
  const int64_t units = outer * static_cast<int64_t>(n_inputs);  // (outer, input) pairs
  const int64_t unit_bytes = static_cast<int64_t>(dst_row / n_inputs);
  ctx.pool().parallel_for(units, copy_units_per_chunk(ctx.tiling(), unit_bytes), [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      const int64_t o = u / static_cast<int64_t>(n_inputs);
      const auto i = static_cast<size_t>(u % static_cast<int64_t>(n_inputs));
      const size_t src_row = offsets[i + 1] - offsets[i];
      if (src_row == 0) continue;
      concat_rows(ctx.input(i).data<const std::byte>(), src_row, dst, dst_row, offsets[i], o, o + 1);
    }
  });
  return ok_status();
}

// Note [Slice on symbolic axes]: shape inference may assume that a symbolic dim is at least as long as the constant
// bounds (schemas/tensor_ops.cc). Here the exact ONNX slice is recomputed from the bound shape and must match the
// planned output shape, so a wrong assumption becomes an error instead of a wrong read.
Status compute_slice(const ops::CpuComputeContext& ctx) {
  const ops::TensorRef& x = ctx.input(0);
  const ops::TensorRef& y = ctx.output(0);
  const int rank = x.shape.rank();
  HXRT_ASSIGN_OR_RETURN(const size_t eb, plain_element_bytes(x.dtype, "Slice"));
  HXRT_ASSIGN_OR_RETURN(const std::vector<int64_t> starts, read_int_values(ctx.input(1), "Slice", "starts"));
  HXRT_ASSIGN_OR_RETURN(const std::vector<int64_t> ends, read_int_values(ctx.input(2), "Slice", "ends"));
  std::vector<int64_t> axes;
  if (ctx.has_input(3)) {
    HXRT_ASSIGN_OR_RETURN(axes, read_int_values(ctx.input(3), "Slice", "axes"));
  } else {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  std::vector<int64_t> steps(starts.size(), 1);
  if (ctx.has_input(4)) {
    HXRT_ASSIGN_OR_RETURN(steps, read_int_values(ctx.input(4), "Slice", "steps"));
  }
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    return invalid_argument("Slice: starts, ends, axes and steps have {}, {}, {} and {} values", starts.size(),
                            ends.size(), axes.size(), steps.size());
  }
  std::array<SliceAxis, Shape::kMaxRank> plan_axes{};
  std::array<bool, Shape::kMaxRank> sliced{};
  for (int d = 0; d < rank; ++d) plan_axes[d] = SliceAxis{0, 1, x.shape.dims()[static_cast<size_t>(d)]};
  for (size_t i = 0; i < starts.size(); ++i) {
    HXRT_ASSIGN_OR_RETURN(const int axis, ops::normalize_axis(axes[i], rank, "Slice"));
    if (sliced[axis]) return invalid_argument("Slice: axis {} appears twice in axes", axis);
    if (steps[i] == 0) return invalid_argument("Slice: step {} is 0", i);
    sliced[axis] = true;
    plan_axes[axis] = slice_axis(x.shape.dims()[static_cast<size_t>(axis)], starts[i], ends[i], steps[i]);
  }
  for (int d = 0; d < rank; ++d) {
    if (plan_axes[d].count != y.shape.dims()[static_cast<size_t>(d)]) {
      return invalid_argument(
          "Slice: slicing {} gives {} elements on axis {} but the planned output is {} (a symbolic dim shorter than "
          "the slice bounds?)",
          x.shape, plan_axes[d].count, d, y.shape);
    }
  }
  return run_strided_copy(ctx, slice_plan(x.shape, std::span<const SliceAxis>(plan_axes.data(), rank), eb), eb);
}

ops::KernelDef copy_def(std::string op_type, int since_version, std::string description) {
  ops::KernelDef def;
  def.op_type = std::move(op_type);
  def.since_version = since_version;
  def.name = def.op_type;
  def.description = std::move(description);
  def.tiling = copy_tiling();
  def.parse_attrs = [](const graph::Graph&, const graph::Node&) -> Result<std::unique_ptr<ops::KernelParams>> {
    return ops::boxed(ops::NoParams{});
  };
  return def;
}

ops::ParseAttrsFn parse_axis(int64_t fallback, bool required) {
  return [fallback, required](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_axis_params(node, fallback, required));
  };
}

}  // namespace

Status register_tensor_ops(ops::KernelRegistry& registry) {
  ops::KernelDef gather = copy_def("Gather", 13, "row gather by byte size (any dtype, quantized rows included)");
  gather.input_dtypes = {{}, {DType::kI32, DType::kI64}};
  gather.parse_attrs = parse_axis(0, false);
  gather.launch = ops::cpu_launch(gather.name, compute_gather);
  HXRT_RETURN_IF_ERROR(registry.add(std::move(gather)));

  ops::KernelDef reshape = copy_def("Reshape", 14, "byte copy (skipped when the planner aliases input and output)");
  reshape.input_dtypes = {{}, {DType::kI64}};
  reshape.launch = ops::cpu_launch(reshape.name, compute_reshape);
  HXRT_RETURN_IF_ERROR(registry.add(std::move(reshape)));

  ops::KernelDef transpose = copy_def("Transpose", 13, "strided copy with merged dims, rank <= 8, any plain dtype");
  transpose.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_transpose_params(node));
  };
  transpose.launch = ops::cpu_launch(transpose.name, compute_transpose);
  HXRT_RETURN_IF_ERROR(registry.add(std::move(transpose)));

  ops::KernelDef concat = copy_def("Concat", 13, "row copies on any axis, any plain dtype");
  concat.parse_attrs = parse_axis(0, true);
  concat.launch = ops::cpu_launch(concat.name, compute_concat);
  HXRT_RETURN_IF_ERROR(registry.add(std::move(concat)));

  ops::KernelDef slice = copy_def("Slice", 13, "ONNX slice as a strided copy, negative steps included");
  const std::vector<DType> index_types = {DType::kI32, DType::kI64};
  slice.input_dtypes = {{}, index_types, index_types, index_types, index_types};
  slice.launch = ops::cpu_launch(slice.name, compute_slice);
  HXRT_RETURN_IF_ERROR(registry.add(std::move(slice)));
  return ok_status();
}

}  // namespace hxrt::kernels::cpu
