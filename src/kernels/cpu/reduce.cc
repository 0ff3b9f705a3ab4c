// CPU kernels of the reductions (docs/onnx_ops/reduce.md): the ten Reduce* ops (one template over element type,
// Note [Reduction by offsets] in ops/params/reduce.h), ArgMax / ArgMin and TopK, over f32, i32 and i64.

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "hxrt/ops/params/reduce.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/registration.h"

namespace hxrt::kernels::cpu {

namespace {

// Input elements per chunk of work.
constexpr int64_t kReduceGrainElements = 16384;

const std::vector<DType>& numeric_types() {
  static const std::vector<DType> types = {DType::kF32, DType::kI32, DType::kI64};
  return types;
}

// Outputs (or columns) per chunk when each costs `unit_cost` input elements.
int64_t units_per_chunk(const ops::Tiling& tiling, int64_t unit_cost) {
  return std::max<int64_t>(
      1, tiling_grain(tiling, "grain_elements", kReduceGrainElements) / std::max<int64_t>(unit_cost, 1));
}

// Floats accumulate in double, integers in int64.
template <typename T>
using Accumulator = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

template <typename T>
T from_double(double v) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    if (!std::isfinite(v)) return v > 0 ? std::numeric_limits<T>::max() : std::numeric_limits<T>::lowest();
    return static_cast<T>(v);
  }
}

template <typename T>
bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(v);
  } else {
    (void)v;
    return false;
  }
}

// Note [NaN in comparisons]
// A NaN counts as greater than every number (and equal to another NaN) in ArgMax/ArgMin and TopK, so the first
// NaN wins an ArgMax, as numpy's argmax, and TopK's order stays a strict weak ordering (std::partial_sort requires
// one: with plain < a NaN would make it undefined).
template <typename T>
bool nan_greater(T a, T b) {
  if (is_nan(b)) return false;
  return is_nan(a) || a > b;
}

// The reduction into the output whose elements start at x + base (Note [Reduction by offsets]).
template <typename T>
T reduce_one(ops::ReduceKind kind, const T* x, const ops::ReduceGeometry& g, int64_t base) {
  using A = Accumulator<T>;
  auto fold = [&](A init, auto step) {
    A acc = init;
    g.for_each_reduced(base, [&](int64_t off) { acc = step(acc, static_cast<A>(x[off])); });
    return acc;
  };
  auto plus = [](A a, A v) { return a + v; };
  auto plus_square = [](A a, A v) { return a + v * v; };
  // The identities of max and min: what an empty reduction gives.
  constexpr auto kLowest = static_cast<A>(std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                                               : std::numeric_limits<T>::lowest());
  constexpr auto kHighest = static_cast<A>(std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                                                                : std::numeric_limits<T>::max());
  switch (kind) {
    case ops::ReduceKind::kSum: return static_cast<T>(fold(A{0}, plus));
    case ops::ReduceKind::kSumSquare: return static_cast<T>(fold(A{0}, plus_square));
    case ops::ReduceKind::kL1: return static_cast<T>(fold(A{0}, [](A a, A v) { return a + (v < 0 ? -v : v); }));
    case ops::ReduceKind::kL2: return from_double<T>(std::sqrt(static_cast<double>(fold(A{0}, plus_square))));
    case ops::ReduceKind::kLogSum: return from_double<T>(std::log(static_cast<double>(fold(A{0}, plus))));
    case ops::ReduceKind::kProd: return static_cast<T>(fold(A{1}, [](A a, A v) { return a * v; }));
    // A NaN propagates, as in numpy (v != v only for a NaN).
    case ops::ReduceKind::kMax:
      return static_cast<T>(fold(kLowest, [](A a, A v) { return v > a || is_nan(v) ? v : a; }));
    case ops::ReduceKind::kMin:
      return static_cast<T>(fold(kHighest, [](A a, A v) { return v < a || is_nan(v) ? v : a; }));
    case ops::ReduceKind::kMean: {
      if (g.reduced == 0) return std::is_floating_point_v<T> ? from_double<T>(std::nan("")) : T{0};
      return static_cast<T>(fold(A{0}, plus) / static_cast<A>(g.reduced));
    }
    case ops::ReduceKind::kLogSumExp: {
      double m = -std::numeric_limits<double>::infinity();
      g.for_each_reduced(base, [&](int64_t off) { m = std::max(m, static_cast<double>(x[off])); });
      if (!std::isfinite(m)) return from_double<T>(m);
      double sum = 0.0;
      g.for_each_reduced(base, [&](int64_t off) { sum += std::exp(static_cast<double>(x[off]) - m); });
      return from_double<T>(m + std::log(sum));
    }
  }
  return T{0};
}

template <typename T>
void reduce_typed(const ops::CpuComputeContext& ctx, ops::ReduceKind kind, const ops::ReduceGeometry& g) {
  const T* x = ctx.input(0).data<const T>();
  T* y = ctx.output(0).data<T>();
  ctx.pool().parallel_for(g.outputs, units_per_chunk(ctx.tiling(), g.reduced), [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) y[o] = reduce_one(kind, x, g, g.kept_offset(o));
  });
}

Status compute_reduce(const ops::CpuComputeContext& ctx) {
  const auto& params = ctx.params<ops::ReduceParams>();
  const auto& g = ctx.tiling().geometry_as<ops::ReduceGeometry>();
  const ops::TensorRef& x = ctx.input(0);
  const ops::TensorRef& y = ctx.output(0);
  const std::string_view op = ops::reduce_op_type(params.kind);
  if (!(g.output == y.shape) || g.outputs != y.num_elements()) {
    return internal_error("{}: output {} does not match the reduction of {} ({})", op, y.shape, x.shape, g.output);
  }
  if (y.dtype != x.dtype) return internal_error("{}: output dtype {} differs from input {}", op, y.dtype, x.dtype);
  switch (x.dtype) {
    case DType::kF32: reduce_typed<float>(ctx, params.kind, g); break;
    case DType::kI32: reduce_typed<int32_t>(ctx, params.kind, g); break;
    case DType::kI64: reduce_typed<int64_t>(ctx, params.kind, g); break;
    default: return invalid_argument("{}: dtype {} is not supported (f32, i32, i64)", op, x.dtype);
  }
  return ok_status();
}

Result<ops::Tiling> reduce_tiling(const ops::TilingQuery& q) {
  const auto& params = q.params_as<ops::ReduceParams>();
  if (q.inputs.empty()) return invalid_argument("{}: no input", ops::reduce_op_type(params.kind));
  const Shape& x = q.inputs[0].shape;
  HXRT_ASSIGN_OR_RETURN(const std::vector<bool> reduced, ops::reduced_dims(params.axes, params.noop_with_empty_axes,
                                                                           x.rank(), ops::reduce_op_type(params.kind)));
  HXRT_ASSIGN_OR_RETURN(ops::ReduceGeometry g, ops::reduce_geometry(x, reduced, params.keepdims));
  ops::Tiling tiling = chunk_tiling("grain_elements", kReduceGrainElements, x.num_elements());
  tiling.geometry = std::make_shared<const ops::ReduceGeometry>(std::move(g));
  return tiling;
}

// ---- ArgMax / ArgMin ----

// X viewed as [outer, len, inner] around the normalised axis.
struct AxisView {
  int axis = 0;
  int64_t outer = 1, len = 1, inner = 1;
};

Result<AxisView> axis_view(const Shape& x, int64_t axis, std::string_view op) {
  AxisView v;
  HXRT_ASSIGN_OR_RETURN(v.axis, ops::normalize_axis(axis, x.rank(), op));
  v.outer = ops::dims_product(x, 0, v.axis);
  v.len = x.dim(v.axis);
  v.inner = ops::dims_product(x, v.axis + 1, x.rank());
  return v;
}

template <typename T>
void arg_reduce_typed(const ops::CpuComputeContext& ctx, const AxisView& v, bool is_max, bool last) {
  const T* x = ctx.input(0).data<const T>();
  auto* y = ctx.output(0).data<int64_t>();
  ctx.pool().parallel_for(v.outer * v.inner, units_per_chunk(ctx.tiling(), v.len), [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      const int64_t o = u / v.inner;
      const int64_t i = u % v.inner;
      const T* column = x + o * v.len * v.inner + i;
      T best = column[0];
      int64_t best_index = 0;
      for (int64_t a = 1; a < v.len; ++a) {
        const T value = column[a * v.inner];
        const bool better = is_max ? nan_greater(value, best) : nan_greater(best, value);  // Note [NaN in comparisons]
        if (better || (last && value == best)) {
          best = value;
          best_index = a;
        }
      }
      y[u] = best_index;
    }
  });
}

Status compute_arg_reduce(const ops::CpuComputeContext& ctx, bool is_max) {
  const auto& params = ctx.params<ops::ArgReduceParams>();
  const std::string_view op = is_max ? "ArgMax" : "ArgMin";
  const ops::TensorRef& x = ctx.input(0);
  const ops::TensorRef& y = ctx.output(0);
  HXRT_ASSIGN_OR_RETURN(const AxisView v, axis_view(x.shape, params.axis, op));
  if (y.num_elements() != v.outer * v.inner || y.dtype != DType::kI64) {
    return internal_error("{}: output {}{} does not hold {} x {} i64 indices", op, y.dtype, y.shape, v.outer, v.inner);
  }
  if (y.num_elements() == 0) return ok_status();
  if (v.len == 0) return invalid_argument("{}: axis {} of {} is empty: no index to return", op, v.axis, x.shape);
  switch (x.dtype) {
    case DType::kF32: arg_reduce_typed<float>(ctx, v, is_max, params.select_last_index); break;
    case DType::kI32: arg_reduce_typed<int32_t>(ctx, v, is_max, params.select_last_index); break;
    case DType::kI64: arg_reduce_typed<int64_t>(ctx, v, is_max, params.select_last_index); break;
    default: return invalid_argument("{}: dtype {} is not supported (f32, i32, i64)", op, x.dtype);
  }
  return ok_status();
}

// ---- TopK ----

template <typename T>
void topk_typed(const ops::CpuComputeContext& ctx, const AxisView& v, const ops::TopKParams& params) {
  const T* x = ctx.input(0).data<const T>();
  T* values = ctx.output(0).data<T>();
  int64_t* indices = ctx.launch().outputs.size() > 1 ? ctx.output(1).data<int64_t>() : nullptr;
  const int64_t k = params.k;
  ctx.pool().parallel_for(v.outer * v.inner, units_per_chunk(ctx.tiling(), v.len), [&](int64_t begin, int64_t end) {
    std::vector<int64_t> order(static_cast<size_t>(v.len));  // (len) candidate indices
    for (int64_t u = begin; u < end; ++u) {
      const int64_t o = u / v.inner;
      const int64_t i = u % v.inner;
      const T* column = x + o * v.len * v.inner + i;
      for (int64_t a = 0; a < v.len; ++a) order[static_cast<size_t>(a)] = a;
      // Best first; equal values by lower index, so the result is the same whether or not `sorted` is asked.
      auto before = [&](int64_t a, int64_t b) {
        const T va = column[a * v.inner];
        const T vb = column[b * v.inner];
        const bool a_first = params.largest ? nan_greater(va, vb) : nan_greater(vb, va);  // Note [NaN in comparisons]
        if (a_first || (params.largest ? nan_greater(vb, va) : nan_greater(va, vb))) return a_first;
        return a < b;
      };
      std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
      const int64_t out_base = o * k * v.inner + i;
      for (int64_t r = 0; r < k; ++r) {
        const int64_t a = order[static_cast<size_t>(r)];
        values[out_base + r * v.inner] = column[a * v.inner];
        if (indices != nullptr) indices[out_base + r * v.inner] = a;
      }
    }
  });
}

Status compute_topk(const ops::CpuComputeContext& ctx) {
  const auto& params = ctx.params<ops::TopKParams>();
  const ops::TensorRef& x = ctx.input(0);
  const ops::TensorRef& values = ctx.output(0);
  HXRT_ASSIGN_OR_RETURN(const AxisView v, axis_view(x.shape, params.axis, "TopK"));
  if (params.k > v.len) {
    return invalid_argument("TopK: K = {} exceeds the length {} of axis {} of {}", params.k, v.len, v.axis, x.shape);
  }
  if (values.num_elements() != v.outer * params.k * v.inner ||
      (ctx.launch().outputs.size() > 1 && ctx.output(1).num_elements() != values.num_elements())) {
    return internal_error("TopK: outputs {} do not hold {} x {} x {} elements", values.shape, v.outer, params.k,
                          v.inner);
  }
  if (values.num_elements() == 0) return ok_status();
  switch (x.dtype) {
    case DType::kF32: topk_typed<float>(ctx, v, params); break;
    case DType::kI32: topk_typed<int32_t>(ctx, v, params); break;
    case DType::kI64: topk_typed<int64_t>(ctx, v, params); break;
    default: return invalid_argument("TopK: dtype {} is not supported (f32, i32, i64)", x.dtype);
  }
  return ok_status();
}

// The grid counts chunks of about kReduceGrainElements input elements.
Result<ops::Tiling> input_tiling(const ops::TilingQuery& q) {
  return chunk_tiling("grain_elements", kReduceGrainElements, q.inputs.empty() ? 0 : q.inputs[0].num_elements());
}

ops::KernelDef make_def(std::string op_type, int since_version, std::string description) {
  ops::KernelDef def;
  def.op_type = std::move(op_type);
  def.since_version = since_version;
  def.input_dtypes = {numeric_types()};
  def.name = def.op_type;
  def.description = std::move(description);
  def.tiling = input_tiling;
  return def;
}

}  // namespace

Status register_reduce(ops::KernelRegistry& registry) {
  for (const ops::ReduceKind kind : ops::kReduceKinds) {
    ops::KernelDef reduce = make_def(std::string(ops::reduce_op_type(kind)), kind == ops::ReduceKind::kSum ? 13 : 18,
                                     "f32/i32/i64 reduction over any axes by offset lists; floats in double");
    reduce.input_dtypes.push_back({DType::kI64});
    reduce.parse_attrs = [](const graph::Graph& graph, const graph::Node& node) {
      return ops::boxed(ops::parse_reduce_params(graph, node));
    };
    reduce.tiling = reduce_tiling;
    reduce.launch = ops::cpu_launch(reduce.name, compute_reduce);
    HXRT_RETURN_IF_ERROR(registry.add(std::move(reduce)));
  }

  for (const bool is_max : {true, false}) {
    ops::KernelDef arg = make_def(is_max ? "ArgMax" : "ArgMin", 13, "f32/i32/i64 index of the extreme along an axis");
    arg.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
      return ops::boxed(ops::parse_arg_reduce_params(node));
    };
    arg.launch = ops::cpu_launch(
        arg.name, [is_max](const ops::CpuComputeContext& ctx) { return compute_arg_reduce(ctx, is_max); });
    HXRT_RETURN_IF_ERROR(registry.add(std::move(arg)));
  }

  ops::KernelDef topk = make_def("TopK", 11, "f32/i32/i64 partial sort per column, ties by lower index");
  topk.input_dtypes.push_back({DType::kI64});
  topk.parse_attrs = [](const graph::Graph& graph, const graph::Node& node) {
    return ops::boxed(ops::parse_topk_params(graph, node));
  };
  topk.launch = ops::cpu_launch(topk.name, compute_topk);
  return registry.add(std::move(topk));
}

}  // namespace hxrt::kernels::cpu
