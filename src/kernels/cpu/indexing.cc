// CPU kernels of the indexing and data-dependent ops (docs/onnx_ops/indexing.md): GatherElements GatherND
// ScatterElements ScatterND Compress NonZero Unique ReverseSequence.
//
// They move elements by size, so one kernel serves every plain dtype; only the scatter reductions (add, mul) and
// Unique's comparisons look at values, through templates over the element type. Indices are resolved and checked
// before anything is written: a negative index counts from the end, an out-of-range one is an OutOfRange error
// naming the op, the index and its position. Scatters apply their updates in order on one thread, so duplicate
// indices behave as ONNX specifies (the last update wins without a reduction).

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "hxrt/base/float16.h"
#include "hxrt/ops/params/indexing.h"
#include "hxrt/ops/params/tensor_ops.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/registration.h"

namespace hxrt::kernels::cpu {

namespace {

const std::vector<DType> kIndexTypes = {DType::kI32, DType::kI64};

// Index `v` into an axis of `dim` elements; negative counts from the end.
Result<int64_t> resolve_index(int64_t v, int64_t dim, std::string_view op, int64_t position) {
  const int64_t resolved = v < 0 ? v + dim : v;
  if (resolved < 0 || resolved >= dim) {
    return out_of_range("{}: index {} at position {} is out of range for an axis of {} (valid: [{}, {}))", op, v,
                        position, dim, -dim, dim);
  }
  return resolved;
}

Status expect_shape(const ops::TensorRef& t, const Shape& expected, std::string_view op, std::string_view what) {
  if (t.shape == expected) return ok_status();
  return internal_error("{}: {} is {}, expected {}", op, what, t.shape, expected);
}

// Element offsets of the row-major walk over `shape`, read through `strides` (element strides per dim of shape,
// possibly of another tensor): offset(flat index) = Σ coord[d]·strides[d].
class StridedWalk {
 public:
  StridedWalk(const Shape& shape, std::span<const int64_t> strides, int64_t start) : rank_(shape.rank()) {
    for (int d = 0; d < rank_; ++d) {
      dims_[d] = shape.dims()[static_cast<size_t>(d)];
      strides_[d] = strides[static_cast<size_t>(d)];
    }
    int64_t rest = start;
    for (int d = rank_ - 1; d >= 0; --d) {
      coord_[d] = dims_[d] == 0 ? 0 : rest % dims_[d];
      rest = dims_[d] == 0 ? 0 : rest / dims_[d];
      offset_ += coord_[d] * strides_[d];
    }
  }
  int64_t offset() const { return offset_; }
  int64_t coord(int d) const { return coord_[d]; }
  void next() {
    for (int d = rank_ - 1; d >= 0; --d) {
      ++coord_[d];
      offset_ += strides_[d];
      if (coord_[d] < dims_[d]) return;
      offset_ -= coord_[d] * strides_[d];
      coord_[d] = 0;
    }
  }

 private:
  int rank_;
  std::array<int64_t, Shape::kMaxRank> dims_{};
  std::array<int64_t, Shape::kMaxRank> strides_{};
  std::array<int64_t, Shape::kMaxRank> coord_{};
  int64_t offset_ = 0;
};

// ---- GatherElements, ScatterElements ---------------------------------------------------------------------------

// Source (Gather) or destination (Scatter) element offset of every element of `indices`: the element's coordinates
// in data's strides, with the axis coordinate replaced by the resolved index.
Result<std::vector<int64_t>> element_offsets(const Shape& data, const ops::TensorRef& indices, int axis,
                                             std::string_view op) {
  HXRT_ASSIGN_OR_RETURN(const std::vector<int64_t> idx, read_int_values(indices, op, "indices"));
  for (int d = 0; d < data.rank(); ++d) {
    if (d != axis && indices.shape.dims()[static_cast<size_t>(d)] > data.dims()[static_cast<size_t>(d)]) {
      return invalid_argument("{}: indices {} exceed data {} on axis {}", op, indices.shape, data, d);
    }
  }
  const auto strides = data.strides();
  const int64_t axis_dim = data.dims()[static_cast<size_t>(axis)];
  const int64_t axis_stride = strides[static_cast<size_t>(axis)];
  std::vector<int64_t> offsets(idx.size());  // (indices elements)
  StridedWalk walk(indices.shape, std::span<const int64_t>(strides.data(), static_cast<size_t>(data.rank())), 0);
  for (size_t k = 0; k < idx.size(); ++k, walk.next()) {
    HXRT_ASSIGN_OR_RETURN(const int64_t i, resolve_index(idx[k], axis_dim, op, static_cast<int64_t>(k)));
    offsets[k] = walk.offset() + (i - walk.coord(axis)) * axis_stride;
  }
  return offsets;
}

Status compute_gather_elements(const ops::CpuComputeContext& ctx) {
  const ops::TensorRef& data = ctx.input(0);
  const ops::TensorRef& indices = ctx.input(1);
  const ops::TensorRef& y = ctx.output(0);
  HXRT_ASSIGN_OR_RETURN(const int axis,
                        ops::normalize_axis(ctx.params<ops::AxisParams>().axis, data.shape.rank(), "GatherElements"));
  HXRT_ASSIGN_OR_RETURN(const int64_t eb, plain_element_bytes(data.dtype, "GatherElements"));
  if (indices.shape.rank() != data.shape.rank()) {
    return invalid_argument("GatherElements: indices {} and data {} differ in rank", indices.shape, data.shape);
  }
  HXRT_RETURN_IF_ERROR(expect_shape(y, indices.shape, "GatherElements", "the output"));
  HXRT_ASSIGN_OR_RETURN(const std::vector<int64_t> offsets,
                        element_offsets(data.shape, indices, axis, "GatherElements"));
  const auto* src = data.data<const std::byte>();
  auto* dst = y.data<std::byte>();
  ctx.pool().parallel_for(static_cast<int64_t>(offsets.size()), copy_units_per_chunk(ctx.tiling(), eb), [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      std::memcpy(dst + k * eb, src + offsets[static_cast<size_t>(k)] * eb, static_cast<size_t>(eb));
    }
  });
  return ok_status();
}

// dst[i] = combine(dst[i], src[i]) for n elements of T, read and written through Load / Store.
template <typename T, typename Load, typename Store>
void combine_typed(std::byte* dst, const std::byte* src, int64_t n, ops::ScatterReduction reduction, Load load,
                   Store store) {
  for (int64_t i = 0; i < n; ++i) {
    const T a = load(dst + i * static_cast<int64_t>(sizeof(T)));
    const T b = load(src + i * static_cast<int64_t>(sizeof(T)));
    store(dst + i * static_cast<int64_t>(sizeof(T)),
          reduction == ops::ScatterReduction::kAdd ? static_cast<T>(a + b) : static_cast<T>(a * b));
  }
}

template <typename T>
void combine_plain(std::byte* dst, const std::byte* src, int64_t n, ops::ScatterReduction reduction) {
  combine_typed<T>(
      dst, src, n, reduction,
      [](const std::byte* p) {
        T v;
        std::memcpy(&v, p, sizeof(T));
        return v;
      },
      [](std::byte* p, T v) { std::memcpy(p, &v, sizeof(T)); });
}

// dst[i] = combine(dst[i], src[i]) for n elements of `dtype` under a reduction (add or mul).
Status combine(DType dtype, std::byte* dst, const std::byte* src, int64_t n, ops::ScatterReduction reduction,
               std::string_view op) {
  auto half = [&](auto to_f32, auto from_f32) {
    for (int64_t i = 0; i < n; ++i) {
      uint16_t a;
      uint16_t b;
      std::memcpy(&a, dst + 2 * i, 2);
      std::memcpy(&b, src + 2 * i, 2);
      const float fa = to_f32(a);
      const float fb = to_f32(b);
      const uint16_t r = from_f32(reduction == ops::ScatterReduction::kAdd ? fa + fb : fa * fb);
      std::memcpy(dst + 2 * i, &r, 2);
    }
  };
  switch (dtype) {
    case DType::kF32: combine_plain<float>(dst, src, n, reduction); break;
    case DType::kI64: combine_plain<int64_t>(dst, src, n, reduction); break;
    case DType::kI32: combine_plain<int32_t>(dst, src, n, reduction); break;
    case DType::kI8: combine_plain<int8_t>(dst, src, n, reduction); break;
    case DType::kU8: combine_plain<uint8_t>(dst, src, n, reduction); break;
    case DType::kBool: combine_plain<bool>(dst, src, n, reduction); break;  // add = or, mul = and
    case DType::kF16: half(f16_to_f32, f32_to_f16); break;
    case DType::kBF16: half(bf16_to_f32, f32_to_bf16); break;
    default:
      return invalid_argument("{}: reduction '{}' is not supported on {}", op, ops::scatter_reduction_name(reduction),
                              dtype);
  }
  return ok_status();
}

// Copies data into the output (the scatters start from it).
void copy_input(const ops::CpuComputeContext& ctx, const ops::TensorRef& data, const ops::TensorRef& y, int64_t eb) {
  const auto* src = data.data<const std::byte>();
  auto* dst = y.data<std::byte>();
  const int64_t bytes = data.num_elements() * eb;
  if (bytes == 0 || src == dst) return;
  ctx.pool().parallel_for(bytes, kCopyGrainBytes, [&](int64_t begin, int64_t end) {
    std::memcpy(dst + begin, src + begin, static_cast<size_t>(end - begin));
  });
}

// Writes (or combines) `count` runs of `run` elements: run k of updates goes to element offset offsets[k].
Status scatter_runs(DType dtype, int64_t eb, std::byte* dst, const std::byte* updates,
                    const std::vector<int64_t>& offsets, int64_t run, ops::ScatterReduction reduction,
                    std::string_view op) {
  for (size_t k = 0; k < offsets.size(); ++k) {
    std::byte* d = dst + offsets[k] * eb;
    const std::byte* s = updates + static_cast<int64_t>(k) * run * eb;
    if (reduction == ops::ScatterReduction::kNone) {
      std::memcpy(d, s, static_cast<size_t>(run * eb));
    } else {
      HXRT_RETURN_IF_ERROR(combine(dtype, d, s, run, reduction, op));
    }
  }
  return ok_status();
}

Status compute_scatter_elements(const ops::CpuComputeContext& ctx) {
  const ops::TensorRef& data = ctx.input(0);
  const ops::TensorRef& indices = ctx.input(1);
  const ops::TensorRef& updates = ctx.input(2);
  const ops::TensorRef& y = ctx.output(0);
  const auto& params = ctx.params<ops::ScatterParams>();
  HXRT_ASSIGN_OR_RETURN(const int axis, ops::normalize_axis(params.axis, data.shape.rank(), "ScatterElements"));
  HXRT_ASSIGN_OR_RETURN(const int64_t eb, plain_element_bytes(data.dtype, "ScatterElements"));
  if (indices.shape.rank() != data.shape.rank() || !(indices.shape == updates.shape)) {
    return invalid_argument("ScatterElements: indices {} and updates {} must match, with the rank of data {}",
                            indices.shape, updates.shape, data.shape);
  }
  HXRT_RETURN_IF_ERROR(expect_shape(y, data.shape, "ScatterElements", "the output"));
  HXRT_ASSIGN_OR_RETURN(const std::vector<int64_t> offsets,
                        element_offsets(data.shape, indices, axis, "ScatterElements"));
  copy_input(ctx, data, y, eb);
  return scatter_runs(data.dtype, eb, y.data<std::byte>(), updates.data<const std::byte>(), offsets, 1,
                      params.reduction, "ScatterElements");
}

// ---- GatherND, ScatterND ---------------------------------------------------------------------------------------

// Element offset in data of the slice each index tuple addresses. data: [batch dims (b), addressed dims (m), slice
// dims]; indices: [batch dims (b), tuples..., m].
Result<std::vector<int64_t>> tuple_offsets(const Shape& data, const ops::TensorRef& indices, int64_t b,
                                           std::string_view op) {
  const int q = indices.shape.rank();
  const int r = data.rank();
  if (q == 0) return invalid_argument("{}: indices must have rank >= 1", op);
  const int64_t m = indices.shape.dims()[static_cast<size_t>(q - 1)];
  if (b >= std::min(q, r) || b + m > r) {
    return invalid_argument("{}: batch_dims {} does not fit data {} and indices {}", op, b, data, indices.shape);
  }
  const int bd = static_cast<int>(b);
  for (int d = 0; d < bd; ++d) {
    if (data.dims()[static_cast<size_t>(d)] != indices.shape.dims()[static_cast<size_t>(d)]) {
      return invalid_argument("{}: batch dim {} differs between data {} and indices {}", op, d, data, indices.shape);
    }
  }
  HXRT_ASSIGN_OR_RETURN(const std::vector<int64_t> idx, read_int_values(indices, op, "indices"));
  const auto strides = data.strides();
  const int64_t batches = ops::dims_product(data, 0, bd);
  const int64_t batch_stride = ops::dims_product(data, bd, r);
  const int64_t tuples_per_batch = ops::dims_product(indices.shape, bd, q - 1);
  std::vector<int64_t> offsets(static_cast<size_t>(batches * tuples_per_batch));  // (batches * tuples)
  for (int64_t t = 0; t < static_cast<int64_t>(offsets.size()); ++t) {
    int64_t offset = (t / std::max<int64_t>(tuples_per_batch, 1)) * batch_stride;
    for (int64_t j = 0; j < m; ++j) {
      const int64_t position = t * m + j;
      const auto axis = static_cast<size_t>(b + j);
      HXRT_ASSIGN_OR_RETURN(const int64_t i,
                            resolve_index(idx[static_cast<size_t>(position)], data.dims()[axis], op, position));
      offset += i * strides[axis];
    }
    offsets[static_cast<size_t>(t)] = offset;
  }
  return offsets;
}

Status compute_gather_nd(const ops::CpuComputeContext& ctx) {
  const ops::TensorRef& data = ctx.input(0);
  const ops::TensorRef& indices = ctx.input(1);
  const ops::TensorRef& y = ctx.output(0);
  const int64_t b = ctx.params<ops::GatherNDParams>().batch_dims;
  HXRT_ASSIGN_OR_RETURN(const int64_t eb, plain_element_bytes(data.dtype, "GatherND"));
  HXRT_ASSIGN_OR_RETURN(const std::vector<int64_t> offsets, tuple_offsets(data.shape, indices, b, "GatherND"));
  const int64_t m = indices.shape.dims()[static_cast<size_t>(indices.shape.rank() - 1)];
  const int64_t slice = ops::dims_product(data.shape, static_cast<int>(b + m), data.shape.rank());
  if (y.num_elements() != static_cast<int64_t>(offsets.size()) * slice) {
    return internal_error("GatherND: output {} does not hold {} slices of {} elements", y.shape, offsets.size(), slice);
  }
  const auto* src = data.data<const std::byte>();
  auto* dst = y.data<std::byte>();
  const int64_t slice_bytes = slice * eb;
  ctx.pool().parallel_for(static_cast<int64_t>(offsets.size()), copy_units_per_chunk(ctx.tiling(), slice_bytes),
                          [&](int64_t begin, int64_t end) {
                            for (int64_t t = begin; t < end; ++t) {
                              std::memcpy(dst + t * slice_bytes, src + offsets[static_cast<size_t>(t)] * eb,
                                          static_cast<size_t>(slice_bytes));
                            }
                          });
  return ok_status();
}

Status compute_scatter_nd(const ops::CpuComputeContext& ctx) {
  const ops::TensorRef& data = ctx.input(0);
  const ops::TensorRef& indices = ctx.input(1);
  const ops::TensorRef& updates = ctx.input(2);
  const ops::TensorRef& y = ctx.output(0);
  HXRT_ASSIGN_OR_RETURN(const int64_t eb, plain_element_bytes(data.dtype, "ScatterND"));
  HXRT_RETURN_IF_ERROR(expect_shape(y, data.shape, "ScatterND", "the output"));
  HXRT_ASSIGN_OR_RETURN(const std::vector<int64_t> offsets, tuple_offsets(data.shape, indices, 0, "ScatterND"));
  const int64_t m = indices.shape.dims()[static_cast<size_t>(indices.shape.rank() - 1)];
  const int64_t slice = ops::dims_product(data.shape, static_cast<int>(m), data.shape.rank());
  if (updates.num_elements() != static_cast<int64_t>(offsets.size()) * slice) {
    return invalid_argument("ScatterND: updates {} must hold {} slices of {} elements", updates.shape, offsets.size(),
                            slice);
  }
  copy_input(ctx, data, y, eb);
  return scatter_runs(data.dtype, eb, y.data<std::byte>(), updates.data<const std::byte>(), offsets, slice,
                      ctx.params<ops::ScatterParams>().reduction, "ScatterND");
}

// ---- Compress --------------------------------------------------------------------------------------------------

Status compute_compress(const ops::CpuComputeContext& ctx) {
  const ops::TensorRef& x = ctx.input(0);
  const ops::TensorRef& condition = ctx.input(1);
  const ops::TensorRef& y = ctx.output(0);
  const auto& params = ctx.params<ops::CompressParams>();
  HXRT_ASSIGN_OR_RETURN(const int64_t eb, plain_element_bytes(x.dtype, "Compress"));
  int axis = 0;
  int64_t outer = 1;
  int64_t length = x.num_elements();
  int64_t inner = 1;
  if (params.axis) {
    HXRT_ASSIGN_OR_RETURN(axis, ops::normalize_axis(*params.axis, x.shape.rank(), "Compress"));
    outer = ops::dims_product(x.shape, 0, axis);
    length = x.shape.dims()[static_cast<size_t>(axis)];
    inner = ops::dims_product(x.shape, axis + 1, x.shape.rank());
  }
  const std::span<const std::byte> cond(condition.data<const std::byte>(),
                                        static_cast<size_t>(condition.num_elements()));
  Result<std::vector<int64_t>> selected = ops::compress_selection(cond, length);
  if (!selected.ok()) return invalid_argument("Compress: {}", selected.status().message());
  const auto count = static_cast<int64_t>(selected->size());
  if (y.num_elements() != outer * count * inner) {
    return internal_error("Compress: output {} does not hold {} x {} x {} elements (planned for another condition?)",
                          y.shape, outer, count, inner);
  }
  const auto* src = x.data<const std::byte>();
  auto* dst = y.data<std::byte>();
  const int64_t row_bytes = inner * eb;
  ctx.pool().parallel_for(outer * count, copy_units_per_chunk(ctx.tiling(), row_bytes), [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      const int64_t o = u / count;
      const int64_t s = (*selected)[static_cast<size_t>(u % count)];
      std::memcpy(dst + u * row_bytes, src + (o * length + s) * row_bytes, static_cast<size_t>(row_bytes));
    }
  });
  return ok_status();
}

// ---- NonZero ---------------------------------------------------------------------------------------------------

Status compute_nonzero(const ops::CpuComputeContext& ctx) {
  const ops::TensorRef& x = ctx.input(0);
  const ops::TensorRef& y = ctx.output(0);
  HXRT_RETURN_IF_ERROR(plain_element_bytes(x.dtype, "NonZero").status());
  const std::vector<int64_t> positions = ops::nonzero_positions(x.dtype, x.data<const std::byte>(), x.num_elements());
  const auto count = static_cast<int64_t>(positions.size());
  const int rank = x.shape.rank();
  const Shape expected{static_cast<int64_t>(rank), count};
  if (!(y.shape == expected)) {
    return internal_error("NonZero: output {} is not {} (planned for another input?)", y.shape, expected);
  }
  auto* out = y.data<int64_t>();  // (rank, count)
  for (int64_t k = 0; k < count; ++k) {
    int64_t rest = positions[static_cast<size_t>(k)];
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t dim = x.shape.dims()[static_cast<size_t>(d)];
      out[d * count + k] = rest % dim;
      rest /= dim;
    }
  }
  return ok_status();
}

// ---- Unique ----------------------------------------------------------------------------------------------------

Status compute_unique(const ops::CpuComputeContext& ctx) {
  const ops::TensorRef& x = ctx.input(0);
  const auto& params = ctx.params<ops::UniqueParams>();
  HXRT_ASSIGN_OR_RETURN(const int64_t eb, plain_element_bytes(x.dtype, "Unique"));
  int64_t outer = 1;
  int64_t count = x.num_elements();
  int64_t inner = 1;
  if (params.axis) {
    HXRT_ASSIGN_OR_RETURN(const int axis, ops::normalize_axis(*params.axis, x.shape.rank(), "Unique"));
    outer = ops::dims_product(x.shape, 0, axis);
    count = x.shape.dims()[static_cast<size_t>(axis)];
    inner = ops::dims_product(x.shape, axis + 1, x.shape.rank());
  }
  HXRT_ASSIGN_OR_RETURN(const ops::UniqueResult unique,
                        ops::unique_slices(x.dtype, x.data<const std::byte>(), outer, count, inner, params.sorted));
  const auto n_unique = static_cast<int64_t>(unique.first.size());
  const ops::TensorRef& y = ctx.output(0);
  if (y.num_elements() != outer * n_unique * inner) {
    return internal_error("Unique: output {} does not hold {} x {} x {} elements (planned for another input?)", y.shape,
                          outer, n_unique, inner);
  }
  const auto* src = x.data<const std::byte>();
  auto* dst = y.data<std::byte>();
  const int64_t row_bytes = inner * eb;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t p = 0; p < n_unique; ++p) {
      std::memcpy(dst + (o * n_unique + p) * row_bytes,
                  src + (o * count + unique.first[static_cast<size_t>(p)]) * row_bytes, static_cast<size_t>(row_bytes));
    }
  }
  const std::array<const std::vector<int64_t>*, 3> rest = {&unique.first, &unique.inverse, &unique.counts};
  const size_t n_outputs = ctx.launch().outputs.size();
  for (size_t i = 1; i < n_outputs && i <= rest.size(); ++i) {
    const ops::TensorRef& out = ctx.output(i);
    if (out.view.buffer == nullptr) continue;  // an omitted output
    const std::vector<int64_t>& values = *rest[i - 1];
    if (out.num_elements() != static_cast<int64_t>(values.size())) {
      return internal_error("Unique: output {} is {}, expected {} values", i, out.shape, values.size());
    }
    if (!values.empty()) std::memcpy(out.data<int64_t>(), values.data(), values.size() * sizeof(int64_t));
  }
  return ok_status();
}

// ---- ReverseSequence -------------------------------------------------------------------------------------------

Status compute_reverse_sequence(const ops::CpuComputeContext& ctx) {
  const ops::TensorRef& x = ctx.input(0);
  const ops::TensorRef& lens_ref = ctx.input(1);
  const ops::TensorRef& y = ctx.output(0);
  const auto& params = ctx.params<ops::ReverseSequenceParams>();
  HXRT_ASSIGN_OR_RETURN(const int64_t eb, plain_element_bytes(x.dtype, "ReverseSequence"));
  HXRT_RETURN_IF_ERROR(expect_shape(y, x.shape, "ReverseSequence", "the output"));
  if (x.shape.rank() < 2) return invalid_argument("ReverseSequence: input {} must have rank >= 2", x.shape);
  const int64_t batches = x.shape.dims()[static_cast<size_t>(params.batch_axis)];
  const int64_t steps = x.shape.dims()[static_cast<size_t>(params.time_axis)];
  HXRT_ASSIGN_OR_RETURN(const std::vector<int64_t> lens, read_int_values(lens_ref, "ReverseSequence", "sequence_lens"));
  if (static_cast<int64_t>(lens.size()) != batches) {
    return invalid_argument("ReverseSequence: sequence_lens has {} values for a batch of {}", lens.size(), batches);
  }
  for (size_t i = 0; i < lens.size(); ++i) {
    if (lens[i] < 0 || lens[i] > steps) {
      return out_of_range("ReverseSequence: sequence_lens[{}] = {} is out of range [0, {}]", i, lens[i], steps);
    }
  }
  // Rows of the trailing dims, addressed by (batch, time).
  const int64_t row_bytes = ops::dims_product(x.shape, 2, x.shape.rank()) * eb;
  const bool time_major = params.time_axis == 0;
  auto row = [&](int64_t batch, int64_t t) {
    return (time_major ? t * batches + batch : batch * steps + t) * row_bytes;
  };
  const auto* src = x.data<const std::byte>();
  auto* dst = y.data<std::byte>();
  ctx.pool().parallel_for(batches * steps, copy_units_per_chunk(ctx.tiling(), row_bytes), [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      const int64_t batch = u / steps;
      const int64_t t = u % steps;
      const int64_t len = lens[static_cast<size_t>(batch)];
      const int64_t from = t < len ? len - 1 - t : t;
      std::memcpy(dst + row(batch, t), src + row(batch, from), static_cast<size_t>(row_bytes));
    }
  });
  return ok_status();
}

// ---- Registration ----------------------------------------------------------------------------------------------

ops::KernelDef indexing_def(std::string op_type, int since_version, std::string description,
                            std::vector<std::vector<DType>> input_dtypes, ops::ParseAttrsFn parse_attrs,
                            ops::CpuComputeFn compute) {
  ops::KernelDef def;
  def.op_type = std::move(op_type);
  def.since_version = since_version;
  def.name = def.op_type;
  def.description = std::move(description);
  def.input_dtypes = std::move(input_dtypes);
  def.parse_attrs = std::move(parse_attrs);
  def.tiling = copy_tiling();
  def.launch = ops::cpu_launch(def.name, std::move(compute));
  return def;
}

}  // namespace

Status register_indexing(ops::KernelRegistry& registry) {
  HXRT_RETURN_IF_ERROR(registry.add(indexing_def(
      "GatherElements", 13, "element gather by byte size, any plain dtype", {{}, kIndexTypes},
      [](const graph::Graph&, const graph::Node& node) { return ops::boxed(ops::parse_axis_params(node, 0)); },
      compute_gather_elements)));
  HXRT_RETURN_IF_ERROR(registry.add(indexing_def(
      "GatherND", 13, "slice gather by byte size, any plain dtype", {{}, kIndexTypes},
      [](const graph::Graph&, const graph::Node& node) { return ops::boxed(ops::parse_gather_nd_params(node)); },
      compute_gather_nd)));
  HXRT_RETURN_IF_ERROR(registry.add(indexing_def(
      "ScatterElements", 16, "copy, then updates in order (none/add/mul), any plain dtype", {{}, kIndexTypes, {}},
      [](const graph::Graph&, const graph::Node& node) { return ops::boxed(ops::parse_scatter_params(node, true)); },
      compute_scatter_elements)));
  HXRT_RETURN_IF_ERROR(registry.add(indexing_def(
      "ScatterND", 16, "copy, then slice updates in order (none/add/mul), any plain dtype", {{}, kIndexTypes, {}},
      [](const graph::Graph&, const graph::Node& node) { return ops::boxed(ops::parse_scatter_params(node, false)); },
      compute_scatter_nd)));
  HXRT_RETURN_IF_ERROR(registry.add(indexing_def(
      "Compress", 11, "row copies of the selected slices, any plain dtype", {{}, {DType::kBool}},
      [](const graph::Graph&, const graph::Node& node) { return ops::boxed(ops::parse_compress_params(node)); },
      compute_compress)));
  HXRT_RETURN_IF_ERROR(registry.add(indexing_def(
      "NonZero", 13, "row-major scan, any plain dtype", {},
      [](const graph::Graph&, const graph::Node&) -> Result<std::unique_ptr<ops::KernelParams>> {
        return ops::boxed(ops::NoParams{});
      },
      compute_nonzero)));
  HXRT_RETURN_IF_ERROR(registry.add(indexing_def(
      "Unique", 11, "stable sort of the slices, any plain dtype", {},
      [](const graph::Graph&, const graph::Node& node) { return ops::boxed(ops::parse_unique_params(node)); },
      compute_unique)));
  HXRT_RETURN_IF_ERROR(registry.add(indexing_def(
      "ReverseSequence", 10, "row copies, any plain dtype", {{}, {DType::kI64}},
      [](const graph::Graph&, const graph::Node& node) { return ops::boxed(ops::parse_reverse_sequence_params(node)); },
      compute_reverse_sequence)));
  return ok_status();
}

}  // namespace hxrt::kernels::cpu
