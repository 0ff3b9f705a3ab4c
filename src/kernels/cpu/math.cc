// CPU kernels of the unary math ops and activations (docs/onnx_ops/math.md): one templated map over the scalar
// functions below (unary_math), one KernelDef per row of unary_math_ops().

#include "kernels/cpu/math.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>

#include <fmt/format.h>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/registration.h"

namespace hxrt::kernels::cpu {

namespace {

using ops::UnaryMathOp;

// -x and |x| of an integer in two's complement, without the undefined behaviour of negating the minimum.
template <typename T>
T wrapping_neg(T v) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(U{0} - static_cast<U>(v));
}

// Calls fn with the scalar function of `p.op` over T. Integer types reach only Abs, Neg and Sign (the schemas and
// kernel dtypes allow nothing else); returns false for an op that does not take T.
template <typename T, typename Fn>
bool with_scalar_fn(const ops::UnaryMathParams& p, Fn&& fn) {
  if constexpr (std::is_integral_v<T>) {
    switch (p.op) {
      case UnaryMathOp::kAbs: fn([](T v) { return v < 0 ? wrapping_neg(v) : v; }); return true;
      case UnaryMathOp::kNeg: fn([](T v) { return wrapping_neg(v); }); return true;
      case UnaryMathOp::kSign: fn([](T v) { return static_cast<T>(v > 0 ? 1 : v < 0 ? -1 : 0); }); return true;
      default: return false;
    }
  } else {
    const float alpha = p.alpha;
    const float beta = p.beta;
    switch (p.op) {
      case UnaryMathOp::kAbs: fn([](float v) { return std::fabs(v); }); return true;
      case UnaryMathOp::kAcos: fn([](float v) { return std::acos(v); }); return true;
      case UnaryMathOp::kAcosh: fn([](float v) { return std::acosh(v); }); return true;
      case UnaryMathOp::kAsin: fn([](float v) { return std::asin(v); }); return true;
      case UnaryMathOp::kAsinh: fn([](float v) { return std::asinh(v); }); return true;
      case UnaryMathOp::kAtan: fn([](float v) { return std::atan(v); }); return true;
      case UnaryMathOp::kAtanh: fn([](float v) { return std::atanh(v); }); return true;
      case UnaryMathOp::kCeil: fn([](float v) { return std::ceil(v); }); return true;
      case UnaryMathOp::kCos: fn([](float v) { return std::cos(v); }); return true;
      case UnaryMathOp::kCosh: fn([](float v) { return std::cosh(v); }); return true;
      case UnaryMathOp::kErf: fn([](float v) { return std::erf(v); }); return true;
      case UnaryMathOp::kExp: fn([](float v) { return std::exp(v); }); return true;
      case UnaryMathOp::kFloor: fn([](float v) { return std::floor(v); }); return true;
      case UnaryMathOp::kLog: fn([](float v) { return std::log(v); }); return true;
      case UnaryMathOp::kNeg: fn([](float v) { return -v; }); return true;
      case UnaryMathOp::kReciprocal: fn([](float v) { return 1.0f / v; }); return true;
      // nearbyint rounds halves to even under the default rounding mode, as ONNX asks.
      case UnaryMathOp::kRound: fn([](float v) { return std::nearbyint(v); }); return true;
      case UnaryMathOp::kSign: fn([](float v) { return v > 0.0f ? 1.0f : v < 0.0f ? -1.0f : v; }); return true;
      case UnaryMathOp::kSin: fn([](float v) { return std::sin(v); }); return true;
      case UnaryMathOp::kSinh: fn([](float v) { return std::sinh(v); }); return true;
      case UnaryMathOp::kSqrt: fn([](float v) { return std::sqrt(v); }); return true;
      case UnaryMathOp::kTan: fn([](float v) { return std::tan(v); }); return true;
      case UnaryMathOp::kCelu:
        fn([alpha](float v) { return std::max(0.0f, v) + std::min(0.0f, alpha * std::expm1(v / alpha)); });
        return true;
      case UnaryMathOp::kElu: fn([alpha](float v) { return v < 0.0f ? alpha * std::expm1(v) : v; }); return true;
      case UnaryMathOp::kSelu:
        fn([alpha, gamma = beta](float v) { return v > 0.0f ? gamma * v : gamma * alpha * std::expm1(v); });
        return true;
      case UnaryMathOp::kHardSigmoid:
        fn([alpha, beta](float v) { return std::max(0.0f, std::min(1.0f, alpha * v + beta)); });
        return true;
      case UnaryMathOp::kHardSwish:
        fn([](float v) { return v * std::max(0.0f, std::min(1.0f, v / 6.0f + 0.5f)); });
        return true;
      case UnaryMathOp::kShrink:
        fn([lambd = alpha, bias = beta](float v) { return v < -lambd ? v + bias : v > lambd ? v - bias : 0.0f; });
        return true;
      // log(1 + exp(x)) without overflow: x + log1p(exp(-x)) for x > 0.
      case UnaryMathOp::kSoftplus:
        fn([](float v) { return v > 0.0f ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v)); });
        return true;
      case UnaryMathOp::kSoftsign: fn([](float v) { return v / (1.0f + std::fabs(v)); }); return true;
      case UnaryMathOp::kThresholdedRelu: fn([alpha](float v) { return v > alpha ? v : 0.0f; }); return true;
      case UnaryMathOp::kIsInf:
      case UnaryMathOp::kIsNaN:
      case UnaryMathOp::kNot: return false;
    }
    return false;
  }
}

template <typename T>
bool map_typed(const ops::UnaryMathParams& p, const void* x, void* y, int64_t n) {
  return with_scalar_fn<T>(p, [&](auto f) { map_elements(static_cast<const T*>(x), static_cast<T*>(y), n, f); });
}

}  // namespace

Status unary_math(const ops::UnaryMathParams& params, DType dtype, const void* x, void* y, int64_t n) {
  bool done = false;
  switch (params.op) {
    case UnaryMathOp::kIsInf: {
      if (dtype != DType::kF32) break;
      const bool neg = params.alpha != 0.0f;
      const bool pos = params.beta != 0.0f;
      map_elements(static_cast<const float*>(x), static_cast<uint8_t*>(y), n, [neg, pos](float v) {
        return static_cast<uint8_t>(std::isinf(v) && (v > 0.0f ? pos : neg) ? 1 : 0);
      });
      done = true;
      break;
    }
    case UnaryMathOp::kIsNaN:
      if (dtype != DType::kF32) break;
      map_elements(static_cast<const float*>(x), static_cast<uint8_t*>(y), n,
                   [](float v) { return static_cast<uint8_t>(std::isnan(v) ? 1 : 0); });
      done = true;
      break;
    case UnaryMathOp::kNot:
      if (dtype != DType::kBool) break;
      map_elements(static_cast<const uint8_t*>(x), static_cast<uint8_t*>(y), n,
                   [](uint8_t v) { return static_cast<uint8_t>(v != 0 ? 0 : 1); });
      done = true;
      break;
    case UnaryMathOp::kErf:
      if (dtype == DType::kF32) {
        erf_array(static_cast<const float*>(x), static_cast<float*>(y), n);  // Note [Vector erf] in elementwise.cc
        done = true;
        break;
      }
      [[fallthrough]];
    default:
      switch (dtype) {
        case DType::kF32: done = map_typed<float>(params, x, y, n); break;
        case DType::kI32: done = map_typed<int32_t>(params, x, y, n); break;
        case DType::kI64: done = map_typed<int64_t>(params, x, y, n); break;
        default: break;
      }
  }
  if (!done) {
    return invalid_argument("{} does not take {} inputs", ops::unary_math_op_info(params.op).op_type, dtype);
  }
  return ok_status();
}

namespace {

// Elements per chunk: the rounding and sign ops are memory-bound, the others call a libm function per element.
constexpr int64_t kCheapGrain = 32768;
constexpr int64_t kTranscendentalGrain = 4096;

bool is_cheap(UnaryMathOp op) {
  switch (op) {
    case UnaryMathOp::kAbs:
    case UnaryMathOp::kCeil:
    case UnaryMathOp::kFloor:
    case UnaryMathOp::kNeg:
    case UnaryMathOp::kRound:
    case UnaryMathOp::kSign:
    case UnaryMathOp::kIsInf:
    case UnaryMathOp::kIsNaN:
    case UnaryMathOp::kNot:
    case UnaryMathOp::kHardSigmoid:
    case UnaryMathOp::kHardSwish:
    case UnaryMathOp::kShrink:
    case UnaryMathOp::kSoftsign:
    case UnaryMathOp::kThresholdedRelu: return true;
    default: return false;
  }
}

Status compute_unary_math(const ops::CpuComputeContext& ctx) {
  const auto& params = ctx.params<ops::UnaryMathParams>();
  const ops::TensorRef& x = ctx.input(0);
  const ops::TensorRef& y = ctx.output(0);
  const int64_t n = y.num_elements();
  if (n == 0) return ok_status();
  // Nothing can fail per chunk once the dtype is accepted: check it on one element first.
  const size_t in_size = dtype_info(x.dtype).block_bytes;
  const size_t out_size = dtype_info(y.dtype).block_bytes;
  const auto* src = x.data<const std::byte>();
  auto* dst = y.data<std::byte>();
  HXRT_RETURN_IF_ERROR(unary_math(params, x.dtype, src, dst, 1));
  const int64_t grain = tiling_grain(ctx.tiling(), "grain", kTranscendentalGrain);
  ctx.pool().parallel_for(n, grain, [&](int64_t begin, int64_t end) {
    unary_math(params, x.dtype, src + static_cast<size_t>(begin) * in_size, dst + static_cast<size_t>(begin) * out_size,
               end - begin)
        .ignore();
  });
  return ok_status();
}

ops::KernelDef unary_math_kernel(const ops::UnaryMathOpInfo& info) {
  ops::KernelDef def;
  def.op_type = std::string(info.op_type);
  def.since_version = info.since_version;
  switch (info.kind) {
    case ops::UnaryMathKind::kFloat:
    case ops::UnaryMathKind::kFloatToBool: def.input_dtypes = {{DType::kF32}}; break;
    case ops::UnaryMathKind::kSigned: def.input_dtypes = {{DType::kF32, DType::kI32, DType::kI64}}; break;
    case ops::UnaryMathKind::kBool: def.input_dtypes = {{DType::kBool}}; break;
  }
  def.name = def.op_type;
  def.description = fmt::format("elementwise {}", info.doc);
  def.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_unary_math_params(node));
  };
  const int64_t grain = is_cheap(info.op) ? kCheapGrain : kTranscendentalGrain;
  def.tiling = [grain](const ops::TilingQuery& q) -> Result<ops::Tiling> {
    return chunk_tiling("grain", grain, q.outputs.empty() ? 0 : q.outputs[0].num_elements());
  };
  def.launch = ops::cpu_launch(def.name, compute_unary_math);
  return def;
}

}  // namespace

Status register_math(ops::KernelRegistry& registry) {
  for (const ops::UnaryMathOpInfo& info : ops::unary_math_ops()) {
    HXRT_RETURN_IF_ERROR(registry.add(unary_math_kernel(info)));
  }
  return ok_status();
}

}  // namespace hxrt::kernels::cpu
