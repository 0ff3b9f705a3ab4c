// CPU kernels of the shape and layout ops (docs/onnx_ops/shape_ops.md). They move bytes, so each works on any plain
// dtype by element size: Expand, Tile, DepthToSpace and SpaceToDepth are a StridedCopy (tensor_ops.h) of a view of
// the input (stride 0 on broadcast or repeated dims, a permuted six-dim view for the block ops); Pad maps every
// output index to a source index per axis; Split and Trilu copy rows. Range, ConstantOfShape, OneHot, Shape and Size
// write new values. The arithmetic shared with shape inference is in hxrt/ops/params/shape_ops.h.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hxrt/ops/params/shape_ops.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/registration.h"
#include "kernels/cpu/tensor_ops.h"

namespace hxrt::kernels::cpu {

namespace {

std::vector<int64_t> dims_of(const Shape& shape) {
  return {shape.dims().begin(), shape.dims().end()};
}

// Element i of an f32, i32 or i64 tensor as T (float indices truncate toward zero).
template <typename T>
T read_number(const ops::TensorRef& t, int64_t i) {
  switch (t.dtype) {
    case DType::kI64: return static_cast<T>(t.data<const int64_t>()[i]);
    case DType::kI32: return static_cast<T>(t.data<const int32_t>()[i]);
    default: return static_cast<T>(t.data<const float>()[i]);
  }
}

// The host address of a tensor (Internal when the memory is not host-addressable).
template <typename T>
Result<T*> host_data(const ops::TensorRef& t, std::string_view op) {
  T* p = t.data<T>();
  if (p == nullptr) return internal_error("{}: a tensor is not in host memory", op);
  return p;
}

// Copies elements of kBytes; the switch below picks the width once per call.
template <size_t kBytes>
void fill_elements(std::byte* dst, const std::byte* value, int64_t n) {
  for (int64_t j = 0; j < n; ++j) std::memcpy(dst + j * static_cast<int64_t>(kBytes), value, kBytes);
}

void fill(std::byte* dst, const std::byte* value, size_t eb, int64_t n) {
  switch (eb) {
    case 1: std::memset(dst, static_cast<int>(value[0]), static_cast<size_t>(n)); break;
    case 2: fill_elements<2>(dst, value, n); break;
    case 4: fill_elements<4>(dst, value, n); break;
    case 8: fill_elements<8>(dst, value, n); break;
    default:
      for (int64_t j = 0; j < n; ++j) std::memcpy(dst + j * static_cast<int64_t>(eb), value, eb);
  }
}

Status run_plan(const ops::CpuComputeContext& ctx, const StridedCopy& plan, size_t eb) {
  if (plan.rows() == 0 || plan.cols() == 0) return ok_status();
  const auto* src = ctx.input(0).data<const std::byte>();
  auto* dst = ctx.output(0).data<std::byte>();
  ctx.pool().parallel_for(plan.rows(), copy_units_per_chunk(ctx.tiling(), plan.cols() * static_cast<int64_t>(eb)),
                          [&](int64_t begin, int64_t end) { plan.run(src, dst, begin, end); });
  return ok_status();
}

// A strided copy over (dim, stride) pairs, dims of 1 dropped; Unimplemented when more than Shape::kMaxRank remain.
Result<StridedCopy> view_plan(std::span<const std::pair<int64_t, int64_t>> view, size_t eb, std::string_view op) {
  std::vector<int64_t> dims, strides;
  for (const auto& [dim, stride] : view) {
    if (dim == 1) continue;
    dims.push_back(dim);
    strides.push_back(stride);
  }
  if (dims.size() > static_cast<size_t>(Shape::kMaxRank)) {
    return unimplemented("{}: the copy needs {} dims, more than {}", op, dims.size(), Shape::kMaxRank);
  }
  return StridedCopy::make(dims, strides, 0, eb);
}

// ---- Expand ----

Status compute_expand(const ops::CpuComputeContext& ctx) {
  const ops::TensorRef& x = ctx.input(0);
  const ops::TensorRef& y = ctx.output(0);
  HXRT_ASSIGN_OR_RETURN(const size_t eb, plain_element_bytes(x.dtype, "Expand"));
  const int rank = y.shape.rank();
  const int offset = rank - x.shape.rank();
  if (offset < 0) return invalid_argument("Expand: output {} has a lower rank than the input {}", y.shape, x.shape);
  const auto x_strides = x.shape.strides();
  std::vector<std::pair<int64_t, int64_t>> view;
  for (int d = 0; d < rank; ++d) {
    const int64_t yd = y.shape.dims()[static_cast<size_t>(d)];
    const int xd_axis = d - offset;
    const int64_t xd = xd_axis >= 0 ? x.shape.dims()[static_cast<size_t>(xd_axis)] : 1;
    if (xd != yd && xd != 1) return invalid_argument("Expand: input {} does not broadcast to {}", x.shape, y.shape);
    view.emplace_back(yd, xd == 1 ? 0 : x_strides[static_cast<size_t>(xd_axis)]);
  }
  if (y.num_elements() == 0) return ok_status();
  HXRT_ASSIGN_OR_RETURN(const StridedCopy plan, view_plan(view, eb, "Expand"));
  return run_plan(ctx, plan, eb);
}

// ---- Tile ----

// Output dim d of r·n elements is viewed as [r, n] with source strides [0, stride_d].
Status compute_tile(const ops::CpuComputeContext& ctx) {
  const ops::TensorRef& x = ctx.input(0);
  const ops::TensorRef& y = ctx.output(0);
  HXRT_ASSIGN_OR_RETURN(const size_t eb, plain_element_bytes(x.dtype, "Tile"));
  if (y.shape.rank() != x.shape.rank()) return invalid_argument("Tile: output {} vs input {}", y.shape, x.shape);
  const auto x_strides = x.shape.strides();
  std::vector<std::pair<int64_t, int64_t>> view;
  for (int d = 0; d < x.shape.rank(); ++d) {
    const int64_t n = x.shape.dims()[static_cast<size_t>(d)];
    const int64_t out = y.shape.dims()[static_cast<size_t>(d)];
    if (n == 0 ? out != 0 : out % n != 0) {
      return invalid_argument("Tile: output {} is not a whole repetition of the input {}", y.shape, x.shape);
    }
    view.emplace_back(n == 0 ? 0 : out / n, 0);
    view.emplace_back(n, x_strides[static_cast<size_t>(d)]);
  }
  if (y.num_elements() == 0) return ok_status();
  HXRT_ASSIGN_OR_RETURN(const StridedCopy plan, view_plan(view, eb, "Tile"));
  return run_plan(ctx, plan, eb);
}

// ---- Pad ----

template <size_t kBytes>
void pad_row(const std::byte* src, const int64_t* map, const std::byte* value, std::byte* dst, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    const std::byte* from = map[j] < 0 ? value : src + map[j] * static_cast<int64_t>(kBytes);
    std::memcpy(dst + j * static_cast<int64_t>(kBytes), from, kBytes);
  }
}

void pad_row(const std::byte* src, const int64_t* map, const std::byte* value, std::byte* dst, int64_t n, size_t eb) {
  switch (eb) {
    case 1: pad_row<1>(src, map, value, dst, n); break;
    case 2: pad_row<2>(src, map, value, dst, n); break;
    case 4: pad_row<4>(src, map, value, dst, n); break;
    case 8: pad_row<8>(src, map, value, dst, n); break;
    default:
      for (int64_t j = 0; j < n; ++j) {
        std::memcpy(dst + j * static_cast<int64_t>(eb), map[j] < 0 ? value : src + map[j] * static_cast<int64_t>(eb),
                    eb);
      }
  }
}

Status compute_pad(const ops::CpuComputeContext& ctx) {
  const ops::TensorRef& x = ctx.input(0);
  const ops::TensorRef& y = ctx.output(0);
  const ops::PadMode mode = ctx.params<ops::PadParams>().mode;
  HXRT_ASSIGN_OR_RETURN(const size_t eb, plain_element_bytes(x.dtype, "Pad"));
  HXRT_ASSIGN_OR_RETURN(const std::vector<int64_t> pads, read_int_values(ctx.input(1), "Pad", "pads"));
  const int rank = x.shape.rank();
  if (pads.size() != static_cast<size_t>(2 * rank) || y.shape.rank() != rank) {
    return invalid_argument("Pad: pads [{}] do not fit the input {} and output {}", fmt::join(pads, ", "), x.shape,
                            y.shape);
  }
  std::vector<std::byte> value(eb, std::byte{0});
  if (ctx.has_input(2)) {
    const ops::TensorRef& v = ctx.input(2);
    if (v.dtype != x.dtype || v.num_elements() != 1) {
      return invalid_argument("Pad: constant_value {}{} must be one {} value", v.dtype, v.shape, x.dtype);
    }
    std::memcpy(value.data(), v.data<const std::byte>(), eb);
  }
  // maps[d][o]: the source index of output index o on axis d, -1 for the constant value.
  std::vector<std::vector<int64_t>> maps(static_cast<size_t>(rank));
  for (int d = 0; d < rank; ++d) {
    const auto du = static_cast<size_t>(d);
    const int64_t dim = x.shape.dims()[du];
    HXRT_ASSIGN_OR_RETURN(const int64_t out, ops::padded_dim(mode, dim, pads[du], pads[du + static_cast<size_t>(rank)], d));
    if (out != y.shape.dims()[du]) {
      return invalid_argument("Pad: padding {} by [{}] gives {} on axis {}, the output is {}", x.shape,
                              fmt::join(pads, ", "), out, d, y.shape);
    }
    maps[du].resize(static_cast<size_t>(out));
    for (int64_t o = 0; o < out; ++o) {
      maps[du][static_cast<size_t>(o)] =
          ops::pad_source_index(mode, o, pads[du], pads[du + static_cast<size_t>(rank)], dim);
    }
  }
  const auto* src = x.data<const std::byte>();
  auto* dst = y.data<std::byte>();
  if (y.num_elements() == 0) return ok_status();
  if (rank == 0) {
    std::memcpy(dst, src, eb);
    return ok_status();
  }
  const int64_t cols = y.shape.dims()[static_cast<size_t>(rank - 1)];
  const int64_t rows = y.num_elements() / cols;
  const auto x_strides = x.shape.strides();
  const auto row_bytes = cols * static_cast<int64_t>(eb);
  ctx.pool().parallel_for(rows, copy_units_per_chunk(ctx.tiling(), row_bytes), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      // Source row of output row r, or none when an outer index reads the constant value.
      int64_t rest = r;
      int64_t offset = 0;
      bool constant = false;
      for (int d = rank - 2; d >= 0; --d) {
        const auto du = static_cast<size_t>(d);
        const int64_t o = rest % y.shape.dims()[du];
        rest /= y.shape.dims()[du];
        const int64_t i = maps[du][static_cast<size_t>(o)];
        constant = constant || i < 0;
        offset += i * x_strides[du];
      }
      std::byte* out = dst + r * row_bytes;
      if (constant) {
        fill(out, value.data(), eb, cols);
      } else {
        pad_row(src + offset * static_cast<int64_t>(eb), maps.back().data(), value.data(), out, cols, eb);
      }
    }
  });
  return ok_status();
}

// ---- Split ----

Status compute_split(const ops::CpuComputeContext& ctx) {
  const ops::TensorRef& x = ctx.input(0);
  const int rank = x.shape.rank();
  HXRT_ASSIGN_OR_RETURN(const int axis, ops::normalize_axis(ctx.params<ops::AxisParams>().axis, rank, "Split"));
  HXRT_ASSIGN_OR_RETURN(const size_t eb, plain_element_bytes(x.dtype, "Split"));
  const size_t n_outputs = ctx.launch().outputs.size();
  const int64_t outer = ops::dims_product(x.shape, 0, axis);
  const int64_t inner = ops::dims_product(x.shape, axis + 1, rank) * static_cast<int64_t>(eb);  // bytes
  const int64_t dim = x.shape.dims()[static_cast<size_t>(axis)];
  std::vector<int64_t> offsets(n_outputs + 1, 0);  // start of each output on the axis
  for (size_t k = 0; k < n_outputs; ++k) {
    const ops::TensorRef& y = ctx.output(k);
    bool match = y.shape.rank() == rank && y.dtype == x.dtype;
    for (int d = 0; match && d < rank; ++d) {
      match = d == axis || y.shape.dims()[static_cast<size_t>(d)] == x.shape.dims()[static_cast<size_t>(d)];
    }
    if (!match) return invalid_argument("Split: output {} {} does not fit the input {} split on axis {}", k, y.shape,
                                        x.shape, axis);
    offsets[k + 1] = offsets[k] + y.shape.dims()[static_cast<size_t>(axis)];
  }
  if (offsets[n_outputs] != dim) {
    return invalid_argument("Split: the outputs cover {} of the {} elements of axis {} of {}", offsets[n_outputs], dim,
                            axis, x.shape);
  }
  if (outer == 0 || inner == 0 || dim == 0) return ok_status();
  const auto* src = x.data<const std::byte>();
  const auto units = outer * static_cast<int64_t>(n_outputs);  // (outer row, output) pairs
  ctx.pool().parallel_for(units, copy_units_per_chunk(ctx.tiling(), dim * inner / static_cast<int64_t>(n_outputs) + 1),
                          [&](int64_t begin, int64_t end) {
                            for (int64_t u = begin; u < end; ++u) {
                              const int64_t o = u / static_cast<int64_t>(n_outputs);
                              const auto k = static_cast<size_t>(u % static_cast<int64_t>(n_outputs));
                              const int64_t part = (offsets[k + 1] - offsets[k]) * inner;
                              if (part == 0) continue;
                              std::memcpy(ctx.output(k).data<std::byte>() + o * part,
                                          src + (o * dim + offsets[k]) * inner, static_cast<size_t>(part));
                            }
                          });
  return ok_status();
}

// ---- DepthToSpace, SpaceToDepth ----

Status compute_block(const ops::CpuComputeContext& ctx, bool depth_to_space) {
  const ops::TensorRef& x = ctx.input(0);
  const ops::TensorRef& y = ctx.output(0);
  const std::string_view op = depth_to_space ? "DepthToSpace" : "SpaceToDepth";
  HXRT_ASSIGN_OR_RETURN(const size_t eb, plain_element_bytes(x.dtype, op));
  const auto& params = ctx.params<ops::BlockParams>();
  const std::vector<int64_t> x_dims = dims_of(x.shape);
  HXRT_ASSIGN_OR_RETURN(const ops::BlockView v, depth_to_space ? ops::depth_to_space_view(x_dims, params)
                                                               : ops::space_to_depth_view(x_dims, params));
  if (dims_of(y.shape) != std::vector<int64_t>(v.out.begin(), v.out.end())) {
    return invalid_argument("{}: input {} gives [{}], the output is {}", op, x.shape, fmt::join(v.out, ", "), y.shape);
  }
  if (y.num_elements() == 0) return ok_status();
  HXRT_ASSIGN_OR_RETURN(const Shape view, Shape::make(v.view));
  return run_plan(ctx, transpose_plan(view, v.perm, eb), eb);
}

// ---- Trilu ----

Status compute_trilu(const ops::CpuComputeContext& ctx) {
  const ops::TensorRef& x = ctx.input(0);
  const ops::TensorRef& y = ctx.output(0);
  HXRT_ASSIGN_OR_RETURN(const size_t eb, plain_element_bytes(x.dtype, "Trilu"));
  const bool upper = ctx.params<ops::TriluParams>().upper;
  int64_t k = 0;
  if (ctx.has_input(1)) {
    HXRT_ASSIGN_OR_RETURN(const std::vector<int64_t> ks, read_int_values(ctx.input(1), "Trilu", "k"));
    if (ks.size() != 1) return invalid_argument("Trilu: input 'k' must hold one value, holds {}", ks.size());
    k = ks[0];
  }
  const int rank = x.shape.rank();
  if (rank < 2 || !(x.shape == y.shape)) return invalid_argument("Trilu: input {}, output {}", x.shape, y.shape);
  const int64_t n = x.shape.dims()[static_cast<size_t>(rank - 2)];
  const int64_t m = x.shape.dims()[static_cast<size_t>(rank - 1)];
  if (y.num_elements() == 0) return ok_status();
  const auto* src = x.data<const std::byte>();
  auto* dst = y.data<std::byte>();
  const auto e = static_cast<int64_t>(eb);
  const int64_t rows = y.num_elements() / m;
  ctx.pool().parallel_for(rows, copy_units_per_chunk(ctx.tiling(), m * e), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t i = r % n;
      // Kept columns [lo, hi): j - i >= k (upper) or j - i <= k (lower).
      const int64_t lo = upper ? std::clamp<int64_t>(i + k, 0, m) : 0;
      const int64_t hi = upper ? m : std::clamp<int64_t>(i + k + 1, 0, m);
      std::byte* out = dst + r * m * e;
      const std::byte* in = src + r * m * e;
      std::memset(out, 0, static_cast<size_t>(lo * e));
      if (hi > lo) std::memcpy(out + lo * e, in + lo * e, static_cast<size_t>((hi - lo) * e));
      std::memset(out + std::max(lo, hi) * e, 0, static_cast<size_t>((m - std::max(lo, hi)) * e));
    }
  });
  return ok_status();
}

// ---- Range ----

template <typename T>
Status range_values(const ops::CpuComputeContext& ctx) {
  HXRT_ASSIGN_OR_RETURN(const T* start_p, host_data<const T>(ctx.input(0), "Range"));
  HXRT_ASSIGN_OR_RETURN(const T* limit_p, host_data<const T>(ctx.input(1), "Range"));
  HXRT_ASSIGN_OR_RETURN(const T* delta_p, host_data<const T>(ctx.input(2), "Range"));
  const T start = *start_p, limit = *limit_p, delta = *delta_p;
  using Wide = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
  HXRT_ASSIGN_OR_RETURN(const int64_t count, ops::range_count(static_cast<Wide>(start), static_cast<Wide>(limit),
                                                              static_cast<Wide>(delta)));
  const ops::TensorRef& y = ctx.output(0);
  if (y.num_elements() != count) {
    return invalid_argument("Range: start {}, limit {}, delta {} give {} values, the output {} holds {}", start, limit,
                            delta, count, y.shape, y.num_elements());
  }
  HXRT_ASSIGN_OR_RETURN(T* out, host_data<T>(y, "Range"));
  for (int64_t i = 0; i < count; ++i) {
    out[i] = static_cast<T>(static_cast<Wide>(start) + static_cast<Wide>(i) * static_cast<Wide>(delta));
  }
  return ok_status();
}

Status compute_range(const ops::CpuComputeContext& ctx) {
  for (size_t i = 0; i < 3; ++i) {
    if (ctx.input(i).num_elements() != 1 || ctx.input(i).dtype != ctx.output(0).dtype) {
      return invalid_argument("Range: input {} {}{} must be one {} value", i, ctx.input(i).dtype, ctx.input(i).shape,
                              ctx.output(0).dtype);
    }
  }
  switch (ctx.output(0).dtype) {
    case DType::kF32: return range_values<float>(ctx);
    case DType::kI32: return range_values<int32_t>(ctx);
    case DType::kI64: return range_values<int64_t>(ctx);
    default: return invalid_argument("Range: unsupported dtype {}", ctx.output(0).dtype);
  }
}

// ---- ConstantOfShape ----

Status compute_constant_of_shape(const ops::CpuComputeContext& ctx) {
  const graph::TensorValue& value = ctx.params<ops::ConstantOfShapeParams>().value;
  const ops::TensorRef& y = ctx.output(0);
  if (y.dtype != value.dtype) {
    return invalid_argument("ConstantOfShape: output dtype {} differs from the value's {}", y.dtype, value.dtype);
  }
  const size_t eb = value.data.size();
  auto* dst = y.data<std::byte>();
  ctx.pool().parallel_for(y.num_elements(), copy_units_per_chunk(ctx.tiling(), static_cast<int64_t>(eb)),
                          [&](int64_t begin, int64_t end) {
                            fill(dst + begin * static_cast<int64_t>(eb), value.data.data(), eb, end - begin);
                          });
  return ok_status();
}

// ---- OneHot ----

int64_t onehot_index(const ops::TensorRef& indices, int64_t i) {
  if (indices.dtype == DType::kF32) {
    const float v = indices.data<const float>()[i];
    return std::isfinite(v) && std::fabs(v) < 9.0e18f ? static_cast<int64_t>(v) : -1 - (int64_t{1} << 62);
  }
  return read_number<int64_t>(indices, i);
}

Status compute_onehot(const ops::CpuComputeContext& ctx) {
  const ops::TensorRef& indices = ctx.input(0);
  const ops::TensorRef& values = ctx.input(2);
  const ops::TensorRef& y = ctx.output(0);
  HXRT_ASSIGN_OR_RETURN(const size_t eb, plain_element_bytes(y.dtype, "OneHot"));
  const int rank = y.shape.rank();
  HXRT_ASSIGN_OR_RETURN(const int axis, ops::normalize_axis(ctx.params<ops::AxisParams>().axis, rank, "OneHot"));
  if (values.num_elements() != 2 || values.dtype != y.dtype || indices.shape.rank() + 1 != rank) {
    return invalid_argument("OneHot: indices {}, values {}{} do not fit the output {}{}", indices.shape, values.dtype,
                            values.shape, y.dtype, y.shape);
  }
  const int64_t depth = y.shape.dims()[static_cast<size_t>(axis)];
  const int64_t outer = ops::dims_product(y.shape, 0, axis);
  const int64_t inner = ops::dims_product(y.shape, axis + 1, rank);
  if (outer * inner != indices.num_elements()) {
    return invalid_argument("OneHot: indices {} do not fit the output {}", indices.shape, y.shape);
  }
  const auto* off = values.data<const std::byte>();
  const std::byte* on = off + eb;
  auto* dst = y.data<std::byte>();
  const auto e = static_cast<int64_t>(eb);
  // Output [outer, depth, inner]; unit o fills one [depth, inner] slab.
  ctx.pool().parallel_for(outer, copy_units_per_chunk(ctx.tiling(), depth * inner * e), [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      std::byte* slab = dst + o * depth * inner * e;
      fill(slab, off, eb, depth * inner);
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t position = ops::onehot_position(onehot_index(indices, o * inner + i), depth);
        if (position >= 0) std::memcpy(slab + (position * inner + i) * e, on, eb);
      }
    }
  });
  return ok_status();
}

// ---- Shape, Size ----

Status compute_shape(const ops::CpuComputeContext& ctx) {
  const Shape& shape = ctx.input(0).shape;
  const auto [first, last] = ops::shape_slice(ctx.params<ops::ShapeParams>(), shape.rank());
  const ops::TensorRef& y = ctx.output(0);
  if (y.num_elements() != last - first) {
    return invalid_argument("Shape: dims [{}, {}) of {} do not fit the output {}", first, last, shape, y.shape);
  }
  HXRT_ASSIGN_OR_RETURN(int64_t* out, host_data<int64_t>(y, "Shape"));
  for (int d = first; d < last; ++d) out[d - first] = shape.dims()[static_cast<size_t>(d)];
  return ok_status();
}

Status compute_size(const ops::CpuComputeContext& ctx) {
  if (ctx.output(0).num_elements() != 1) return invalid_argument("Size: output {} is not a scalar", ctx.output(0).shape);
  HXRT_ASSIGN_OR_RETURN(int64_t* out, host_data<int64_t>(ctx.output(0), "Size"));
  *out = ctx.input(0).num_elements();
  return ok_status();
}

// ---- Registration ----

// Chunks of the bytes of all outputs together (Split writes several; copy_tiling counts output 0 alone).
ops::TilingFn all_outputs_copy_tiling() {
  return [](const ops::TilingQuery& q) -> Result<ops::Tiling> {
    int64_t bytes = 0;
    for (const ops::TensorRef& out : q.outputs) {
      bytes += out.num_elements() * static_cast<int64_t>(std::max<size_t>(1, element_bytes(out.dtype)));
    }
    return chunk_tiling("grain_bytes", kCopyGrainBytes, bytes);
  };
}

template <typename Parse>
ops::KernelDef shape_def(std::string op_type, int since_version, std::string description, ops::CpuComputeFn compute,
                         Parse parse) {
  ops::KernelDef def;
  def.op_type = std::move(op_type);
  def.since_version = since_version;
  def.name = def.op_type;
  def.description = std::move(description);
  def.tiling = all_outputs_copy_tiling();
  def.parse_attrs = [parse](const graph::Graph&, const graph::Node& node) -> Result<std::unique_ptr<ops::KernelParams>> {
    return ops::boxed(parse(node));
  };
  def.launch = ops::cpu_launch(def.name, std::move(compute));
  return def;
}

ops::NoParams no_params(const graph::Node&) {
  return {};
}

}  // namespace

Status register_shape_ops(ops::KernelRegistry& registry) {
  const std::vector<DType> i64 = {DType::kI64};
  const std::vector<DType> numbers = {DType::kF32, DType::kI32, DType::kI64};

  ops::KernelDef expand =
      shape_def("Expand", 13, "broadcast as a strided copy (stride 0 on expanded dims), any plain dtype",
                compute_expand, no_params);
  expand.input_dtypes = {{}, i64};
  HXRT_RETURN_IF_ERROR(registry.add(std::move(expand)));

  ops::KernelDef tile = shape_def("Tile", 13, "strided copy of a [repeat, dim] view per axis (up to 8 merged dims)",
                                  compute_tile, no_params);
  tile.input_dtypes = {{}, i64};
  HXRT_RETURN_IF_ERROR(registry.add(std::move(tile)));

  ops::KernelDef pad = shape_def("Pad", 13, "per-axis source index maps; constant, reflect and edge; negative pads crop",
                                 compute_pad, [](const graph::Node& node) { return ops::parse_pad_params(node); });
  pad.input_dtypes = {{}, i64, {}};
  HXRT_RETURN_IF_ERROR(registry.add(std::move(pad)));

  ops::KernelDef split = shape_def("Split", 13, "row copies into each output, sizes taken from the output shapes",
                                   compute_split, [](const graph::Node& node) { return ops::parse_axis_params(node, 0); });
  split.input_dtypes = {{}, i64};
  HXRT_RETURN_IF_ERROR(registry.add(std::move(split)));

  HXRT_RETURN_IF_ERROR(registry.add(shape_def(
      "DepthToSpace", 13, "transpose of a six-dim view (DCR or CRD)",
      [](const ops::CpuComputeContext& ctx) { return compute_block(ctx, true); },
      [](const graph::Node& node) { return ops::parse_block_params(node, true); })));
  HXRT_RETURN_IF_ERROR(registry.add(shape_def(
      "SpaceToDepth", 13, "transpose of a six-dim view",
      [](const ops::CpuComputeContext& ctx) { return compute_block(ctx, false); },
      [](const graph::Node& node) { return ops::parse_block_params(node, false); })));

  ops::KernelDef trilu = shape_def("Trilu", 14, "row copies with zeroed column ranges, any plain dtype", compute_trilu,
                                   [](const graph::Node& node) { return ops::parse_trilu_params(node); });
  trilu.input_dtypes = {{}, i64};
  HXRT_RETURN_IF_ERROR(registry.add(std::move(trilu)));

  ops::KernelDef range = shape_def("Range", 11, "start + i·delta in f32, i32 or i64", compute_range, no_params);
  range.input_dtypes = {numbers, numbers, numbers};
  HXRT_RETURN_IF_ERROR(registry.add(std::move(range)));

  ops::KernelDef constant_of_shape =
      shape_def("ConstantOfShape", 9, "fills the output with the attribute's element", compute_constant_of_shape,
                [](const graph::Node& node) { return ops::parse_constant_of_shape_params(node); });
  constant_of_shape.input_dtypes = {i64};
  HXRT_RETURN_IF_ERROR(registry.add(std::move(constant_of_shape)));

  ops::KernelDef onehot = shape_def("OneHot", 11, "off values, then the on value at each index", compute_onehot,
                                    [](const graph::Node& node) { return ops::parse_axis_params(node, -1); });
  onehot.input_dtypes = {numbers, numbers, {}};
  HXRT_RETURN_IF_ERROR(registry.add(std::move(onehot)));

  ops::KernelDef shape = shape_def("Shape", 15, "writes the input's dims [start, end) as i64", compute_shape,
                                   [](const graph::Node& node) { return ops::parse_shape_params(node); });
  shape.tiling = nullptr;
  HXRT_RETURN_IF_ERROR(registry.add(std::move(shape)));

  ops::KernelDef size = shape_def("Size", 13, "writes the input's element count as i64", compute_size, no_params);
  size.tiling = nullptr;
  HXRT_RETURN_IF_ERROR(registry.add(std::move(size)));
  return ok_status();
}

}  // namespace hxrt::kernels::cpu
