// CPU kernels of the broadcast binary, variadic, comparison and logical ops (docs/onnx_ops/logic.md). Every binary
// op is a scalar function run by broadcast_apply (elementwise.h) over a BroadcastPlan, instantiated per element
// type; the variadic ops fold their inputs pairwise into the output; Where walks its three operands with one
// odometer. Bool tensors are bytes 0/1.

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "hxrt/ops/params/logic.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/registration.h"

namespace hxrt::kernels::cpu {

namespace {

using Bool8 = uint8_t;  // a bool element

constexpr int64_t kCheapGrain = 32768;
constexpr int64_t kTranscendentalGrain = 4096;

// Calls fn(T{}) for the numeric dtypes (f32 i8 u8 i32 i64), and also for bool when `with_bool`; false otherwise.
template <typename Fn>
bool with_type(DType dtype, bool with_bool, Fn&& fn) {
  switch (dtype) {
    case DType::kF32: fn(float{}); return true;
    case DType::kI8: fn(int8_t{}); return true;
    case DType::kU8: fn(uint8_t{}); return true;
    case DType::kI32: fn(int32_t{}); return true;
    case DType::kI64: fn(int64_t{}); return true;
    case DType::kBool:
      if (!with_bool) return false;
      fn(Bool8{});
      return true;
    default: return false;
  }
}

// y = f(a, b) with numpy broadcasting, over the pool in row chunks of about `grain` elements.
template <typename A, typename B, typename Y, typename F>
Status broadcast_binary(const ops::CpuComputeContext& ctx, const ops::TensorRef& a, const ops::TensorRef& b,
                        const ops::TensorRef& y, F f) {
  if (y.num_elements() == 0) return ok_status();
  HXRT_ASSIGN_OR_RETURN(const BroadcastPlan plan, BroadcastPlan::make(a.shape, b.shape, y.shape));
  const int64_t grain = tiling_grain(ctx.tiling(), "grain", kCheapGrain);
  const int64_t row_grain = std::max<int64_t>(1, grain / std::max<int64_t>(plan.cols(), 1));
  const A* pa = a.data<const A>();
  const B* pb = b.data<const B>();
  Y* py = y.data<Y>();
  ctx.pool().parallel_for(plan.rows(), row_grain,
                          [&](int64_t begin, int64_t end) { broadcast_apply(plan, pa, pb, py, begin, end, f); });
  return ok_status();
}

Status unsupported_dtype(std::string_view op, DType dtype) {
  return invalid_argument("{} does not take {} inputs", op, dtype);
}

// ---- Pow --------------------------------------------------------------------------------------------------------

// base^exponent for integers by squaring (wrapping on overflow); a negative exponent truncates 1/base^-e toward 0.
template <typename T, typename E>
T integer_pow(T base, E exponent) {
  if constexpr (std::is_signed_v<E>) {
    if (exponent < 0) {
      if (base == 1) return 1;
      if constexpr (std::is_signed_v<T>) {
        if (base == -1) return static_cast<T>((exponent % 2 == 0) ? 1 : -1);
      }
      return 0;
    }
  }
  using U = std::make_unsigned_t<T>;
  U result = 1;
  U b = static_cast<U>(base);
  auto e = static_cast<uint64_t>(exponent);
  while (e != 0) {
    if ((e & 1) != 0) result = static_cast<U>(result * b);
    b = static_cast<U>(b * b);
    e >>= 1;
  }
  return static_cast<T>(result);
}

// A double converted to T: rounded to float, or truncated toward zero and saturated for integers (NaN → 0).
template <typename T>
T from_double(double v) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    if (std::isnan(v)) return 0;
    if (v <= static_cast<double>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
    if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}

Status compute_pow(const ops::CpuComputeContext& ctx) {
  const ops::TensorRef& x = ctx.input(0);
  const ops::TensorRef& e = ctx.input(1);
  Status status = ok_status();
  const bool known = with_type(x.dtype, false, [&](auto xt) {
    using T = decltype(xt);
    with_type(e.dtype, false, [&](auto et) {
      using E = decltype(et);
      if constexpr (std::is_integral_v<T> && std::is_integral_v<E>) {
        status = broadcast_binary<T, E, T>(ctx, x, e, ctx.output(0), [](T a, E b) { return integer_pow(a, b); });
      } else {
        status = broadcast_binary<T, E, T>(ctx, x, e, ctx.output(0), [](T a, E b) {
          return from_double<T>(std::pow(static_cast<double>(a), static_cast<double>(b)));
        });
      }
    });
  });
  if (!known || !with_type(e.dtype, false, [](auto) {})) {
    return invalid_argument("Pow does not take {} ^ {}", x.dtype, e.dtype);
  }
  return status;
}

// ---- Mod --------------------------------------------------------------------------------------------------------

Status compute_mod(const ops::CpuComputeContext& ctx) {
  const bool fmod = ctx.params<ops::ModParams>().fmod;
  const ops::TensorRef& a = ctx.input(0);
  const ops::TensorRef& b = ctx.input(1);
  std::atomic<bool> by_zero{false};
  Status status = ok_status();
  const bool known = with_type(a.dtype, false, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      if (!fmod) {
        status = invalid_argument("Mod: fmod must be 1 for {} inputs", a.dtype);
        return;
      }
      status = broadcast_binary<T, T, T>(ctx, a, b, ctx.output(0), [](T p, T q) { return std::fmod(p, q); });
    } else {
      status = broadcast_binary<T, T, T>(ctx, a, b, ctx.output(0), [&by_zero, fmod](T p, T q) -> T {
        if (q == 0) {
          by_zero.store(true, std::memory_order_relaxed);
          return 0;
        }
        if constexpr (std::is_signed_v<T>) {
          if (q == -1) return 0;  // also avoids the trap of min % -1
          T r = static_cast<T>(p % q);
          if (!fmod && r != 0 && ((r < 0) != (q < 0))) r = static_cast<T>(r + q);
          return r;
        } else {
          return static_cast<T>(p % q);
        }
      });
    }
  });
  if (!known) return unsupported_dtype("Mod", a.dtype);
  HXRT_RETURN_IF_ERROR(status);
  if (by_zero.load()) return invalid_argument("Mod: integer division by zero (a divisor B is 0)");
  return ok_status();
}

// ---- PRelu ------------------------------------------------------------------------------------------------------

Status compute_prelu(const ops::CpuComputeContext& ctx) {
  const ops::TensorRef& x = ctx.input(0);
  Status status = ok_status();
  const bool known = with_type(x.dtype, false, [&](auto tag) {
    using T = decltype(tag);
    status = broadcast_binary<T, T, T>(ctx, x, ctx.input(1), ctx.output(0),
                                       [](T v, T slope) {
                                         if constexpr (std::is_signed_v<T>) {
                                           return v < 0 ? static_cast<T>(slope * v) : v;
                                         } else {
                                           (void)slope;  // an unsigned x is never negative
                                           return v;
                                         }
                                       });
  });
  if (!known) return unsupported_dtype("PRelu", x.dtype);
  return status;
}

// ---- Comparisons and logical ops ----------------------------------------------------------------------------------

enum class Compare : uint8_t { kEqual, kGreater, kGreaterOrEqual, kLess, kLessOrEqual };

template <Compare kOp, typename T>
Bool8 compare(T a, T b) {
  bool r = false;
  if constexpr (kOp == Compare::kEqual) r = a == b;
  if constexpr (kOp == Compare::kGreater) r = a > b;
  if constexpr (kOp == Compare::kGreaterOrEqual) r = a >= b;
  if constexpr (kOp == Compare::kLess) r = a < b;
  if constexpr (kOp == Compare::kLessOrEqual) r = a <= b;
  return r ? 1 : 0;
}

template <Compare kOp>
Status compute_compare(const ops::CpuComputeContext& ctx) {
  const ops::TensorRef& a = ctx.input(0);
  Status status = ok_status();
  const bool known = with_type(a.dtype, kOp == Compare::kEqual, [&](auto tag) {
    using T = decltype(tag);
    status = broadcast_binary<T, T, Bool8>(ctx, a, ctx.input(1), ctx.output(0),
                                           [](T p, T q) { return compare<kOp>(p, q); });
  });
  if (!known) return unsupported_dtype("comparison", a.dtype);
  return status;
}

enum class Logical : uint8_t { kAnd, kOr, kXor };

template <Logical kOp>
Status compute_logical(const ops::CpuComputeContext& ctx) {
  return broadcast_binary<Bool8, Bool8, Bool8>(ctx, ctx.input(0), ctx.input(1), ctx.output(0), [](Bool8 p, Bool8 q) {
    const bool a = p != 0;
    const bool b = q != 0;
    bool r = false;
    if constexpr (kOp == Logical::kAnd) r = a && b;
    if constexpr (kOp == Logical::kOr) r = a || b;
    if constexpr (kOp == Logical::kXor) r = a != b;
    return static_cast<Bool8>(r ? 1 : 0);
  });
}

// ---- Variadic Max Min Sum Mean --------------------------------------------------------------------------------

enum class Fold : uint8_t { kMax, kMin, kSum, kMean };

// NaN propagates through Max and Min, as numpy's maximum and minimum.
template <Fold kOp, typename T>
T fold(T a, T b) {
  if constexpr (kOp == Fold::kSum || kOp == Fold::kMean) {
    return static_cast<T>(a + b);
  } else {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
    }
    if constexpr (kOp == Fold::kMax) return a < b ? b : a;
    return b < a ? b : a;
  }
}

template <Fold kOp>
Status compute_fold(const ops::CpuComputeContext& ctx) {
  const ops::TensorRef& y = ctx.output(0);
  const size_t n = ctx.num_inputs();
  if (y.num_elements() == 0) return ok_status();
  Status status = ok_status();
  const bool known = with_type(y.dtype, false, [&](auto tag) {
    using T = decltype(tag);
    // y = in0 (op in1), then y = y op in_k: y is never broadcast, so it may be an operand of its own update.
    if (n == 1) {
      status = broadcast_binary<T, T, T>(ctx, ctx.input(0), ctx.input(0), y, [](T a, T) { return a; });
    } else {
      status = broadcast_binary<T, T, T>(ctx, ctx.input(0), ctx.input(1), y, fold<kOp, T>);
    }
    for (size_t k = 2; k < n && status.ok(); ++k) status = broadcast_binary<T, T, T>(ctx, y, ctx.input(k), y, fold<kOp, T>);
    if constexpr (kOp == Fold::kMean && std::is_floating_point_v<T>) {
      if (status.ok() && n > 1) {
        const T count = static_cast<T>(n);
        T* py = y.data<T>();
        map_elements(py, py, y.num_elements(), [count](T v) { return v / count; });
      }
    }
  });
  if (!known) return unsupported_dtype("Max/Min/Sum/Mean", y.dtype);
  return status;
}

// ---- Where ------------------------------------------------------------------------------------------------------

// Element strides of an operand of shape `in` broadcast to `out` (0 along broadcast dims), aligned to out's rank.
std::array<int64_t, Shape::kMaxRank> broadcast_strides(const Shape& in, const Shape& out) {
  std::array<int64_t, Shape::kMaxRank> strides{};
  int64_t stride = 1;
  for (int d = out.rank() - 1; d >= 0; --d) {
    const int di = d - (out.rank() - in.rank());
    const int64_t dim = di >= 0 ? in.dims()[static_cast<size_t>(di)] : 1;
    strides[static_cast<size_t>(d)] = dim == 1 ? 0 : stride;
    stride *= dim;
  }
  return strides;
}

Status compute_where(const ops::CpuComputeContext& ctx) {
  const ops::TensorRef& cond = ctx.input(0);
  const ops::TensorRef& x = ctx.input(1);
  const ops::TensorRef& other = ctx.input(2);
  const ops::TensorRef& y = ctx.output(0);
  const int64_t n = y.num_elements();
  if (n == 0) return ok_status();
  for (const ops::TensorRef* in : {&cond, &x, &other}) {
    // Checks that each operand broadcasts to the output.
    HXRT_RETURN_IF_ERROR(BroadcastPlan::make(in->shape, y.shape, y.shape).status());
  }
  const int rank = y.shape.rank();
  const auto cs = broadcast_strides(cond.shape, y.shape);
  const auto xs = broadcast_strides(x.shape, y.shape);
  const auto os = broadcast_strides(other.shape, y.shape);
  const size_t size = dtype_info(y.dtype).block_bytes;
  const auto* pc = cond.data<const Bool8>();
  const auto* px = x.data<const std::byte>();
  const auto* po = other.data<const std::byte>();
  auto* py = y.data<std::byte>();
  const int64_t grain = tiling_grain(ctx.tiling(), "grain", kCheapGrain);
  ctx.pool().parallel_for(n, grain, [&](int64_t begin, int64_t end) {
    // Odometer over the output index, started at `begin`.
    std::array<int64_t, Shape::kMaxRank> index{};
    int64_t rest = begin;
    int64_t ci = 0, xi = 0, oi = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const auto u = static_cast<size_t>(d);
      index[u] = rest % y.shape.dims()[u];
      rest /= y.shape.dims()[u];
      ci += index[u] * cs[u];
      xi += index[u] * xs[u];
      oi += index[u] * os[u];
    }
    for (int64_t i = begin; i < end; ++i) {
      const std::byte* src = pc[ci] != 0 ? px + static_cast<size_t>(xi) * size : po + static_cast<size_t>(oi) * size;
      std::memcpy(py + static_cast<size_t>(i) * size, src, size);
      for (int d = rank - 1; d >= 0; --d) {
        const auto u = static_cast<size_t>(d);
        ++index[u];
        ci += cs[u];
        xi += xs[u];
        oi += os[u];
        if (index[u] < y.shape.dims()[u]) break;
        ci -= index[u] * cs[u];
        xi -= index[u] * xs[u];
        oi -= index[u] * os[u];
        index[u] = 0;
      }
    }
  });
  return ok_status();
}

// ---- Clip -------------------------------------------------------------------------------------------------------

Status compute_clip(const ops::CpuComputeContext& ctx) {
  const ops::TensorRef& x = ctx.input(0);
  const ops::TensorRef& y = ctx.output(0);
  const int64_t n = y.num_elements();
  if (n == 0) return ok_status();
  const bool known = with_type(x.dtype, false, [&](auto tag) {
    using T = decltype(tag);
    auto bound = [&ctx](size_t i, T fallback) {
      const T* p = ctx.has_input(i) ? ctx.input(i).data<const T>() : nullptr;
      return p != nullptr ? *p : fallback;
    };
    const T lo = bound(1, std::numeric_limits<T>::lowest());
    const T hi = bound(2, std::numeric_limits<T>::max());
    const T* px = x.data<const T>();
    T* py = y.data<T>();
    const int64_t grain = tiling_grain(ctx.tiling(), "grain", kCheapGrain);
    // min(max(x, lo), hi): NaN stays NaN, and lo > hi gives hi everywhere, as numpy's clip.
    ctx.pool().parallel_for(n, grain, [&](int64_t begin, int64_t end) {
      map_elements(px + begin, py + begin, end - begin, [lo, hi](T v) {
        const T low = v < lo ? lo : v;
        return hi < low ? hi : low;
      });
    });
  });
  if (!known) return unsupported_dtype("Clip", x.dtype);
  return ok_status();
}

// ---- Registration -----------------------------------------------------------------------------------------------

const std::vector<DType> kNumeric = {DType::kF32, DType::kI8, DType::kU8, DType::kI32, DType::kI64};
const std::vector<DType> kAny = {DType::kF32, DType::kI8, DType::kU8, DType::kI32, DType::kI64, DType::kBool};

ops::KernelDef make_kernel(std::string op_type, int since_version, std::vector<std::vector<DType>> input_dtypes,
                           ops::CpuComputeFn compute, std::string description, int64_t grain = kCheapGrain) {
  ops::KernelDef def;
  def.op_type = std::move(op_type);
  def.since_version = since_version;
  def.input_dtypes = std::move(input_dtypes);
  def.name = def.op_type;
  def.description = std::move(description);
  def.parse_attrs = [](const graph::Graph&, const graph::Node&) { return ops::boxed(ops::NoParams{}); };
  def.tiling = [grain](const ops::TilingQuery& q) -> Result<ops::Tiling> {
    return chunk_tiling("grain", grain, q.outputs.empty() ? 0 : q.outputs[0].num_elements());
  };
  def.launch = ops::cpu_launch(def.name, std::move(compute));
  return def;
}

}  // namespace

Status register_logic(ops::KernelRegistry& registry) {
  HXRT_RETURN_IF_ERROR(registry.add(make_kernel("Pow", 15, {kNumeric, kNumeric}, compute_pow,
                                                "x^y in double, integer^integer by squaring", kTranscendentalGrain)));
  ops::KernelDef mod = make_kernel("Mod", 13, {kNumeric, kNumeric}, compute_mod, "remainder, fmod or floored");
  mod.parse_attrs = [](const graph::Graph& graph, const graph::Node& node) {
    const bool float_inputs = !node.inputs.empty() && graph.value(node.inputs[0]).desc.dtype == DType::kF32;
    return ops::boxed(ops::parse_mod_params(node, float_inputs));
  };
  HXRT_RETURN_IF_ERROR(registry.add(std::move(mod)));
  HXRT_RETURN_IF_ERROR(registry.add(make_kernel("PRelu", 16, {kNumeric, kNumeric}, compute_prelu, "x < 0 ? slope·x : x")));
  HXRT_RETURN_IF_ERROR(registry.add(make_kernel("Max", 13, {kNumeric}, compute_fold<Fold::kMax>, "pairwise fold")));
  HXRT_RETURN_IF_ERROR(registry.add(make_kernel("Min", 13, {kNumeric}, compute_fold<Fold::kMin>, "pairwise fold")));
  HXRT_RETURN_IF_ERROR(registry.add(make_kernel("Sum", 13, {{DType::kF32}}, compute_fold<Fold::kSum>, "pairwise fold")));
  HXRT_RETURN_IF_ERROR(
      registry.add(make_kernel("Mean", 13, {{DType::kF32}}, compute_fold<Fold::kMean>, "pairwise fold, then / n")));
  HXRT_RETURN_IF_ERROR(registry.add(make_kernel("Equal", 13, {kAny, kAny}, compute_compare<Compare::kEqual>, "a == b")));
  HXRT_RETURN_IF_ERROR(
      registry.add(make_kernel("Greater", 13, {kNumeric, kNumeric}, compute_compare<Compare::kGreater>, "a > b")));
  HXRT_RETURN_IF_ERROR(registry.add(make_kernel("GreaterOrEqual", 16, {kNumeric, kNumeric},
                                                compute_compare<Compare::kGreaterOrEqual>, "a >= b")));
  HXRT_RETURN_IF_ERROR(
      registry.add(make_kernel("Less", 13, {kNumeric, kNumeric}, compute_compare<Compare::kLess>, "a < b")));
  HXRT_RETURN_IF_ERROR(registry.add(
      make_kernel("LessOrEqual", 16, {kNumeric, kNumeric}, compute_compare<Compare::kLessOrEqual>, "a <= b")));
  const std::vector<std::vector<DType>> bools = {{DType::kBool}, {DType::kBool}};
  HXRT_RETURN_IF_ERROR(registry.add(make_kernel("And", 7, bools, compute_logical<Logical::kAnd>, "a && b")));
  HXRT_RETURN_IF_ERROR(registry.add(make_kernel("Or", 7, bools, compute_logical<Logical::kOr>, "a || b")));
  HXRT_RETURN_IF_ERROR(registry.add(make_kernel("Xor", 7, bools, compute_logical<Logical::kXor>, "a != b")));
  HXRT_RETURN_IF_ERROR(
      registry.add(make_kernel("Where", 16, {{DType::kBool}, kAny, kAny}, compute_where, "three-way broadcast select")));
  HXRT_RETURN_IF_ERROR(
      registry.add(make_kernel("Clip", 13, {kNumeric, kNumeric, kNumeric}, compute_clip, "min(max(x, lo), hi)")));
  return ok_status();
}

}  // namespace hxrt::kernels::cpu
