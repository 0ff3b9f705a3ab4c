#include "kernels/cpu/elementwise.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

#include "hxrt/base/float16.h"
#include "hxrt/ops/params/elementwise.h"
#include "kernels/cpu/registration.h"
#include "kernels/cpu/vector_exp.h"

namespace hxrt::kernels::cpu {

namespace {

struct AddOp {
  static float apply(float a, float b) { return a + b; }
};
struct SubOp {
  static float apply(float a, float b) { return a - b; }
};
struct MulOp {
  static float apply(float a, float b) { return a * b; }
};
struct DivOp {
  static float apply(float a, float b) { return a / b; }
};

template <typename Fn>
void with_binary_op(BinaryOp op, Fn&& fn) {
  switch (op) {
    case BinaryOp::kAdd: fn(AddOp{}); return;
    case BinaryOp::kSub: fn(SubOp{}); return;
    case BinaryOp::kMul: fn(MulOp{}); return;
    case BinaryOp::kDiv: fn(DivOp{}); return;
  }
}

// Blocks are staged through local arrays so an output that aliases an input stays correct and the fixed-length
// loops vectorise without alias checks (Note [Vectorised loops]).
template <typename Op>
void same_shape_impl(const float* a, const float* b, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + kVectorBlock <= n; i += kVectorBlock) {
    float out[kVectorBlock];
    for (int64_t k = 0; k < kVectorBlock; ++k) out[k] = Op::apply(a[i + k], b[i + k]);
    std::memcpy(y + i, out, sizeof out);
  }
  for (; i < n; ++i) y[i] = Op::apply(a[i], b[i]);
}

template <typename Op, bool kScalarIsRhs>
void scalar_impl(const float* a, float s, float* y, int64_t n) {
  auto f = [s](float x) { return kScalarIsRhs ? Op::apply(x, s) : Op::apply(s, x); };
  int64_t i = 0;
  for (; i + kVectorBlock <= n; i += kVectorBlock) {
    float out[kVectorBlock];
    for (int64_t k = 0; k < kVectorBlock; ++k) out[k] = f(a[i + k]);
    std::memcpy(y + i, out, sizeof out);
  }
  for (; i < n; ++i) y[i] = f(a[i]);
}

template <typename Op>
void scalar_dispatch(const float* a, float s, float* y, int64_t n, bool scalar_is_rhs) {
  if (scalar_is_rhs) {
    scalar_impl<Op, true>(a, s, y, n);
  } else {
    scalar_impl<Op, false>(a, s, y, n);
  }
}

template <typename F>
void map_blocked(const float* x, float* y, int64_t n, F f) {
  int64_t i = 0;
  for (; i + kVectorBlock <= n; i += kVectorBlock) {
    float out[kVectorBlock];
    for (int64_t k = 0; k < kVectorBlock; ++k) out[k] = f(x[i + k]);
    std::memcpy(y + i, out, sizeof out);
  }
  for (; i < n; ++i) y[i] = f(x[i]);
}

// Note [Vector GELU]
// GELU-tanh (Gemma's FFN gate) through glibc's tanhf costs ~20 ns an element, 13% of a Gemma 3 prefill. On AVX2+FMA
// it runs eight at a time as the identity 0.5·x·(1 + tanh(u)) = x / (1 + exp(-2u)), which also keeps the relative
// precision where 1 + tanh(u) cancels (x < -3; the scalar form loses ~1e-4 there); exp by Cephes' expf scheme
// (n = round(x·log2 e), r = x - n·ln 2 in two parts, a degree-6 polynomial, times 2^n through the exponent bits),
// within 2 ulp of expf on [-88, 88], clamped outside it. Other ISAs keep the scalar function (HXRT_SCALAR_GELU=1
// forces it).
__attribute__((target("avx2,fma"))) inline __m256 exp_avx2(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-88.0f)), _mm256_set1_ps(88.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

__attribute__((target("avx2,fma"))) void gelu_tanh_avx2(const float* x, float* y, int64_t n) {
  const __m256 k = _mm256_set1_ps(0.79788456080286536f), c = _mm256_set1_ps(0.044715f);
  const __m256 one = _mm256_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 u = _mm256_mul_ps(k, _mm256_fmadd_ps(_mm256_mul_ps(c, v), _mm256_mul_ps(v, v), v));
    const __m256 e = exp_avx2(_mm256_mul_ps(_mm256_set1_ps(-2.0f), u));
    _mm256_storeu_ps(y + i, _mm256_div_ps(v, _mm256_add_ps(one, e)));
  }
  for (; i < n; ++i) y[i] = gelu_tanh(x[i]);
}

// Note [Vector SiLU]: SiLU, SwiGLU's silu(gate) · up and the sigmoid eight at a time, with glibc's expf through
// exp_exact_avx2 (Note [Exact vector exp]) and then the scalar functions' own division and product, so every element
// has the scalar function's bits (and the JIT kernels', whose hx_exp is glibc's): SiLU was SmolLM2's
// SwiGLU at ~1 ns an element, 6% of a 512-token prefill. Without AVX2 and FMA the scalar loop runs.
enum class SigmoidForm : uint8_t { kSigmoid, kSilu, kSiluMul };

template <SigmoidForm F>
__attribute__((target("avx2,fma"))) inline __m256 sigmoid_form8(__m256 v, __m256 up) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 denominator = _mm256_add_ps(one, exp_exact_avx2(_mm256_xor_ps(v, _mm256_set1_ps(-0.0f))));
  if constexpr (F == SigmoidForm::kSigmoid) return _mm256_div_ps(one, denominator);
  const __m256 s = _mm256_div_ps(v, denominator);
  if constexpr (F == SigmoidForm::kSiluMul) return _mm256_mul_ps(s, up);
  return s;
}

template <SigmoidForm F>
__attribute__((target("avx2,fma"))) void sigmoid_form_avx2(const float* x, const float* up, float* y, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 u = F == SigmoidForm::kSiluMul ? _mm256_loadu_ps(up + i) : one;
    _mm256_storeu_ps(y + i, sigmoid_form8<F>(_mm256_loadu_ps(x + i), u));
  }
  if (i < n) {
    alignas(32) float tx[8] = {}, tu[8] = {};
    for (int64_t j = i; j < n; ++j) {
      tx[j - i] = x[j];
      if constexpr (F == SigmoidForm::kSiluMul) tu[j - i] = up[j];
    }
    _mm256_store_ps(tx, sigmoid_form8<F>(_mm256_load_ps(tx), _mm256_load_ps(tu)));
    for (int64_t j = i; j < n; ++j) y[j] = tx[j - i];
  }
}

bool vector_sigmoid() {
  static const bool supported = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return supported;
}

// Note [Vector erf]: the exact GELU (BERT-family FFNs, PP-OCR's heads) and the Erf op through glibc's scalar erff
// were 8% of PP-OCRv6 det and 3% of MiniLM. On AVX2+FMA they run eight at a time from erfc on z >= 0 as
// t·exp(-z² + P(t)), t = 1 / (1 + z/2), P the degree-9 Chebyshev fit of Numerical Recipes' erfcc (fractional error
// below 1.2e-7 in exact arithmetic), exp by exp_avx2 above:
//   - erf(x) = sign(x)·(1 - erfc(|x|)) for |x| >= 0.5, and its Maclaurin series to x^13 below (no cancellation near 0);
//   - GELU(x) = x/2 · erfc(-x/√2) — erfc, never 1 + erf, so no cancellation for negative x either (the scalar form
//     1 + erff(x/√2) loses all its digits below x = -5).
// VectorErfAndGeluAreWithinTheirBounds measures them against the double functions over [-12, 12] and the special
// values: erf within 4e-7 relative (1e-7 absolute near its zeros), GELU within 2e-6 relative to max(|GELU|, 1e-6).
// NaN stays NaN; ±inf give ±1 and (+inf, 0).
__attribute__((target("avx2,fma"))) inline __m256 erfc_nonnegative(__m256 z) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(_mm256_set1_ps(0.5f), z, one));
  __m256 p = _mm256_set1_ps(0.17087277f);
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.82215223f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.48851587f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.13520398f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.27886807f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.18628806f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.09678418f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.37409196f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.00002368f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.26551223f));
  const __m256 e = _mm256_mul_ps(t, exp_avx2(_mm256_fnmadd_ps(z, z, p)));
  // exp_avx2 clamps its argument at -88, so z past ~9.4 (where erfc underflows) gives 0, as it should.
  return _mm256_and_ps(e, _mm256_cmp_ps(z, _mm256_set1_ps(9.5f), _CMP_LT_OQ));
}

__attribute__((target("avx2,fma"))) inline __m256 erf8(__m256 x) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 a = _mm256_andnot_ps(sign, x);
  // 2/√π · Σ (-1)^n x^(2n+1) / (n! (2n + 1)), n <= 6: the truncation is below 5e-10 for |x| < 0.5.
  const __m256 x2 = _mm256_mul_ps(x, x);
  __m256 s = _mm256_set1_ps(1.2055332981789664e-4f);
  s = _mm256_fmadd_ps(s, x2, _mm256_set1_ps(-8.5483270234508520e-4f));
  s = _mm256_fmadd_ps(s, x2, _mm256_set1_ps(5.2239776254421878e-3f));
  s = _mm256_fmadd_ps(s, x2, _mm256_set1_ps(-2.6866170645131252e-2f));
  s = _mm256_fmadd_ps(s, x2, _mm256_set1_ps(1.1283791670955126e-1f));
  s = _mm256_fmadd_ps(s, x2, _mm256_set1_ps(-3.7612638903183754e-1f));
  s = _mm256_fmadd_ps(s, x2, _mm256_set1_ps(1.1283791670955126f));
  const __m256 series = _mm256_mul_ps(s, x);
  const __m256 tail = _mm256_or_ps(_mm256_sub_ps(_mm256_set1_ps(1.0f), erfc_nonnegative(a)), _mm256_and_ps(sign, x));
  const __m256 y = _mm256_blendv_ps(tail, series, _mm256_cmp_ps(a, _mm256_set1_ps(0.5f), _CMP_LT_OQ));
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));  // NaN through
}

__attribute__((target("avx2,fma"))) inline __m256 gelu_erf8(__m256 x) {
  const __m256 w = _mm256_mul_ps(x, _mm256_set1_ps(-0.70710678118654752f));
  const __m256 e = erfc_nonnegative(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), w));
  const __m256 erfc_w = _mm256_blendv_ps(_mm256_sub_ps(_mm256_set1_ps(2.0f), e), e,
                                         _mm256_cmp_ps(w, _mm256_setzero_ps(), _CMP_GE_OQ));
  const __m256 y = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x), erfc_w);
  // x = +inf: erfc(-inf) = 2, y = inf; x = -inf: 0 · -inf would be NaN, GELU's limit is 0.
  const __m256 y0 = _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_set1_ps(-__builtin_inff()), _CMP_EQ_OQ), y);
  return _mm256_blendv_ps(y0, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

bool vector_gelu() {
  static const bool supported = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                                std::getenv("HXRT_SCALAR_GELU") == nullptr;
  return supported;
}

}  // namespace

std::string_view binary_op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd: return "Add";
    case BinaryOp::kSub: return "Sub";
    case BinaryOp::kMul: return "Mul";
    case BinaryOp::kDiv: return "Div";
  }
  return "?";
}

std::string_view unary_op_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::kRelu: return "Relu";
    case UnaryOp::kGeluErf: return "Gelu";
    case UnaryOp::kGeluTanh: return "GeluTanh";
    case UnaryOp::kSigmoid: return "Sigmoid";
    case UnaryOp::kTanh: return "Tanh";
    case UnaryOp::kSilu: return "Silu";
  }
  return "?";
}

void binary_same_shape(BinaryOp op, const float* a, const float* b, float* y, int64_t n) {
  with_binary_op(op, [&](auto o) { same_shape_impl<decltype(o)>(a, b, y, n); });
}

void binary_row_vector(BinaryOp op, const float* a, const float* v, float* y, int64_t rows, int64_t cols,
                       bool vector_is_rhs) {
  with_binary_op(op, [&](auto o) {
    using Op = decltype(o);
    for (int64_t r = 0; r < rows; ++r) {
      if (vector_is_rhs) {
        same_shape_impl<Op>(a + r * cols, v, y + r * cols, cols);
      } else {
        same_shape_impl<Op>(v, a + r * cols, y + r * cols, cols);
      }
    }
  });
}

void binary_scalar(BinaryOp op, const float* a, float s, float* y, int64_t n, bool scalar_is_rhs) {
  with_binary_op(op, [&](auto o) { scalar_dispatch<decltype(o)>(a, s, y, n, scalar_is_rhs); });
}

Result<BroadcastPlan> BroadcastPlan::make(const Shape& a_shape, const Shape& b_shape, const Shape& out_shape) {
  const int rank = out_shape.rank();
  if (a_shape.rank() > rank || b_shape.rank() > rank) {
    return invalid_argument("cannot broadcast {} and {} to {}: operand rank too large", a_shape, b_shape, out_shape);
  }
  // Operand dims padded with leading 1s to the output rank, and their row-major strides.
  std::array<int64_t, Shape::kMaxRank> a_dims{};
  std::array<int64_t, Shape::kMaxRank> b_dims{};
  std::array<int64_t, Shape::kMaxRank> a_strides{};
  std::array<int64_t, Shape::kMaxRank> b_strides{};
  int64_t a_stride = 1;
  int64_t b_stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    const int da = d - (rank - a_shape.rank());
    const int db = d - (rank - b_shape.rank());
    a_dims[d] = da >= 0 ? a_shape.dims()[static_cast<size_t>(da)] : 1;
    b_dims[d] = db >= 0 ? b_shape.dims()[static_cast<size_t>(db)] : 1;
    const int64_t out = out_shape.dims()[static_cast<size_t>(d)];
    if ((a_dims[d] != out && a_dims[d] != 1) || (b_dims[d] != out && b_dims[d] != 1)) {
      return invalid_argument("cannot broadcast {} and {} to {} (axis {})", a_shape, b_shape, out_shape, d);
    }
    a_strides[d] = a_stride;
    b_strides[d] = b_stride;
    a_stride *= a_dims[d];
    b_stride *= b_dims[d];
  }

  BroadcastPlan plan;
  // Merge dims left to right. Output dims of 1 are dropped; a dim joins the previous group when both operands
  // broadcast along it exactly as along the group. A group's stride is that of its innermost dim.
  bool prev_a_bcast = false;
  bool prev_b_bcast = false;
  for (int d = 0; d < rank; ++d) {
    const int64_t out = out_shape.dims()[static_cast<size_t>(d)];
    if (out == 1) continue;
    const bool a_bcast = a_dims[d] == 1;
    const bool b_bcast = b_dims[d] == 1;
    if (plan.rank_ > 0 && a_bcast == prev_a_bcast && b_bcast == prev_b_bcast) {
      plan.dims_[plan.rank_ - 1] *= out;
    } else {
      plan.dims_[plan.rank_] = out;
      ++plan.rank_;
    }
    plan.a_strides_[plan.rank_ - 1] = a_bcast ? 0 : a_strides[d];
    plan.b_strides_[plan.rank_ - 1] = b_bcast ? 0 : b_strides[d];
    prev_a_bcast = a_bcast;
    prev_b_bcast = b_bcast;
  }
  if (plan.rank_ == 0) {  // every output dim is 1: one element
    plan.rank_ = 1;
    plan.dims_[0] = 1;
    plan.a_strides_[0] = 1;
    plan.b_strides_[0] = 1;
  }
  plan.cols_ = plan.dims_[plan.rank_ - 1];
  plan.a_inner_ = plan.a_strides_[plan.rank_ - 1];
  plan.b_inner_ = plan.b_strides_[plan.rank_ - 1];
  plan.rows_ = 1;
  for (int d = 0; d + 1 < plan.rank_; ++d) plan.rows_ *= plan.dims_[d];
  return plan;
}

int64_t BroadcastPlan::offset(int64_t row, const std::array<int64_t, Shape::kMaxRank>& strides) const {
  int64_t off = 0;
  for (int d = rank_ - 2; d >= 0; --d) {
    off += (row % dims_[d]) * strides[d];
    row /= dims_[d];
  }
  return off;
}

void binary_broadcast_rows(BinaryOp op, const BroadcastPlan& plan, const float* a, const float* b, float* y,
                           int64_t row_begin, int64_t row_end) {
  const int64_t cols = plan.cols();
  with_binary_op(op, [&](auto o) {
    using Op = decltype(o);
    for (int64_t r = row_begin; r < row_end; ++r) {
      const float* ar = a + plan.a_offset(r);
      const float* br = b + plan.b_offset(r);
      float* yr = y + r * cols;
      if (plan.a_inner_stride() != 0 && plan.b_inner_stride() != 0) {
        same_shape_impl<Op>(ar, br, yr, cols);
      } else if (plan.a_inner_stride() != 0) {
        scalar_impl<Op, true>(ar, *br, yr, cols);
      } else if (plan.b_inner_stride() != 0) {
        scalar_impl<Op, false>(br, *ar, yr, cols);
      } else {
        std::fill(yr, yr + cols, Op::apply(*ar, *br));
      }
    }
  });
}

void unary(UnaryOp op, const float* x, float* y, int64_t n) {
  switch (op) {
    case UnaryOp::kRelu: map_blocked(x, y, n, [](float v) { return v > 0.0f ? v : 0.0f; }); return;
    case UnaryOp::kGeluErf:
      if (vector_gelu()) {
        map8_avx2<gelu_erf8>(x, y, n);  // Note [Vector erf]
      } else {
        map_blocked(x, y, n, gelu_erf);
      }
      return;
    case UnaryOp::kGeluTanh:
      if (vector_gelu()) {
        gelu_tanh_avx2(x, y, n);  // Note [Vector GELU]
      } else {
        map_blocked(x, y, n, gelu_tanh);
      }
      return;
    case UnaryOp::kSigmoid:
      if (vector_sigmoid()) {
        sigmoid_form_avx2<SigmoidForm::kSigmoid>(x, nullptr, y, n);  // Note [Vector SiLU]
      } else {
        map_blocked(x, y, n, sigmoid);
      }
      return;
    case UnaryOp::kTanh: map_blocked(x, y, n, [](float v) { return std::tanh(v); }); return;
    case UnaryOp::kSilu: silu_mul(x, nullptr, y, n); return;
  }
}

void silu(const float* x, float* y, int64_t n) {
  silu_mul(x, nullptr, y, n);
}

void erf_array(const float* x, float* y, int64_t n) {
  if (vector_gelu()) {
    map8_avx2<erf8>(x, y, n);  // Note [Vector erf]
  } else {
    map_blocked(x, y, n, [](float v) { return std::erf(v); });
  }
}

void silu_mul(const float* x, const float* up, float* y, int64_t n) {
  if (vector_sigmoid()) {
    if (up != nullptr) {
      sigmoid_form_avx2<SigmoidForm::kSiluMul>(x, up, y, n);  // Note [Vector SiLU]
    } else {
      sigmoid_form_avx2<SigmoidForm::kSilu>(x, nullptr, y, n);
    }
  } else if (up != nullptr) {
    for (int64_t i = 0; i < n; ++i) y[i] = silu(x[i]) * up[i];
  } else {
    map_blocked(x, y, n, static_cast<float (*)(float)>(silu));
  }
}

void gelu(const float* x, float* y, int64_t n, bool tanh_approximation) {
  unary(tanh_approximation ? UnaryOp::kGeluTanh : UnaryOp::kGeluErf, x, y, n);
}

void leaky_relu(const float* x, float* y, int64_t n, float alpha) {
  map_blocked(x, y, n, [alpha](float v) { return v < 0.0f ? alpha * v : v; });
}

// ---- Cast -------------------------------------------------------------------------------------------------------

namespace {

// Storage types for the 16-bit floats and bool, so that conversion can dispatch on type.
struct F16 {
  uint16_t bits;
};
struct BF16 {
  uint16_t bits;
};
struct Bool8 {
  uint8_t value;
};

template <typename T>
constexpr bool kIsFloatStorage = std::is_same_v<T, float> || std::is_same_v<T, F16> || std::is_same_v<T, BF16>;

template <typename T>
float load_float(T v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else if constexpr (std::is_same_v<T, F16>) {
    return f16_to_f32(v.bits);
  } else {
    return bf16_to_f32(v.bits);
  }
}

template <typename T>
int64_t load_int(T v) {
  if constexpr (std::is_same_v<T, Bool8>) {
    return v.value != 0 ? 1 : 0;
  } else {
    return static_cast<int64_t>(v);
  }
}

// Float → integer: truncate toward zero, saturate, NaN → 0 (avoids the undefined behaviour of an out-of-range
// conversion).
template <typename I>
I saturate_float(float f) {
  if (std::isnan(f)) return 0;
  const double t = std::trunc(static_cast<double>(f));
  if (t <= static_cast<double>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (t >= static_cast<double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(t);
}

template <typename D>
D store_from_float(float f) {
  if constexpr (std::is_same_v<D, float>) {
    return f;
  } else if constexpr (std::is_same_v<D, F16>) {
    return F16{f32_to_f16(f)};
  } else if constexpr (std::is_same_v<D, BF16>) {
    return BF16{f32_to_bf16(f)};
  } else if constexpr (std::is_same_v<D, Bool8>) {
    return Bool8{static_cast<uint8_t>(f != 0.0f ? 1 : 0)};  // NaN is true, as in numpy
  } else {
    return saturate_float<D>(f);
  }
}

template <typename D>
D store_from_int(int64_t v) {
  if constexpr (std::is_same_v<D, float> || std::is_same_v<D, F16> || std::is_same_v<D, BF16>) {
    return store_from_float<D>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<D, Bool8>) {
    return Bool8{static_cast<uint8_t>(v != 0 ? 1 : 0)};
  } else {
    // Two's-complement wrap (well defined since C++20).
    return static_cast<D>(v);
  }
}

template <typename S, typename D>
void cast_impl(const void* x, void* y, int64_t n) {
  const S* src = static_cast<const S*>(x);
  D* dst = static_cast<D*>(y);
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (kIsFloatStorage<S>) {
      dst[i] = store_from_float<D>(load_float(src[i]));
    } else {
      dst[i] = store_from_int<D>(load_int(src[i]));
    }
  }
}

template <typename Fn>
bool with_cast_type(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kF32: fn(float{}); return true;
    case DType::kF16: fn(F16{}); return true;
    case DType::kBF16: fn(BF16{}); return true;
    case DType::kI8: fn(int8_t{}); return true;
    case DType::kU8: fn(uint8_t{}); return true;
    case DType::kI32: fn(int32_t{}); return true;
    case DType::kI64: fn(int64_t{}); return true;
    case DType::kBool: fn(Bool8{}); return true;
    default: return false;
  }
}

}  // namespace

bool is_cast_dtype(DType dtype) {
  return with_cast_type(dtype, [](auto) {});
}

Status cast(DType from, const void* x, DType to, void* y, int64_t n) {
  if (!is_cast_dtype(from) || !is_cast_dtype(to)) {
    return invalid_argument("Cast from {} to {} is not supported", from, to);
  }
  if (from == to) {
    std::memcpy(y, x, static_cast<size_t>(n) * dtype_info(from).block_bytes);
    return ok_status();
  }
  with_cast_type(from,
                 [&](auto s) { with_cast_type(to, [&](auto d) { cast_impl<decltype(s), decltype(d)>(x, y, n); }); });
  return ok_status();
}

// ---- Tiling helpers ---------------------------------------------------------------------------------------------

ops::Tiling chunk_tiling(std::string_view grain_name, int64_t grain, int64_t units) {
  grain = std::max<int64_t>(grain, 1);
  ops::Tiling tiling;
  const int64_t chunks = std::max<int64_t>(1, (units + grain - 1) / grain);
  tiling.launch.grid[0] = static_cast<uint32_t>(std::min<int64_t>(chunks, std::numeric_limits<uint32_t>::max()));
  tiling.values.emplace_back(std::string(grain_name), grain);
  return tiling;
}

int64_t tiling_grain(const ops::Tiling& tiling, std::string_view grain_name, int64_t fallback) {
  return std::max<int64_t>(1, tiling.get(grain_name, fallback));
}

// ---- Kernels ----------------------------------------------------------------------------------------------------

namespace {

// Elements per chunk: memory-bound ops take large chunks; ops calling exp/erf/tanh per element smaller ones.
constexpr int64_t kCheapGrain = 32768;
constexpr int64_t kTranscendentalGrain = 4096;

class BinaryParams final : public ops::TypedParams<BinaryParams> {
 public:
  static constexpr std::string_view kName = "cpu::BinaryParams";
  explicit BinaryParams(BinaryOp binary_op) : op(binary_op) {}
  std::string to_string() const override { return fmt::format("op={}", binary_op_name(op)); }
  BinaryOp op;
};

class UnaryParams final : public ops::TypedParams<UnaryParams> {
 public:
  static constexpr std::string_view kName = "cpu::UnaryParams";
  explicit UnaryParams(UnaryOp unary_op) : op(unary_op) {}
  std::string to_string() const override { return fmt::format("op={}", unary_op_name(op)); }
  UnaryOp op;
};

int64_t output_elements(const ops::TilingQuery& q) {
  return q.outputs.empty() ? 0 : q.outputs[0].num_elements();
}

Status compute_binary(const ops::CpuComputeContext& ctx) {
  const BinaryOp op = ctx.params<BinaryParams>().op;
  const ops::TensorRef& a = ctx.input(0);
  const ops::TensorRef& b = ctx.input(1);
  const ops::TensorRef& y = ctx.output(0);
  const int64_t n = y.num_elements();
  if (n == 0) return ok_status();
  const float* pa = a.data<const float>();
  const float* pb = b.data<const float>();
  float* py = y.data<float>();
  const int64_t grain = tiling_grain(ctx.tiling(), "grain", kCheapGrain);

  // Equal element counts mean the shapes differ at most by dims of 1: the same memory layout.
  if (a.num_elements() == n && b.num_elements() == n) {
    ctx.pool().parallel_for(n, grain, [&](int64_t begin, int64_t end) {
      binary_same_shape(op, pa + begin, pb + begin, py + begin, end - begin);
    });
    return ok_status();
  }
  if (a.num_elements() == n && b.num_elements() == 1) {
    ctx.pool().parallel_for(n, grain, [&](int64_t begin, int64_t end) {
      binary_scalar(op, pa + begin, *pb, py + begin, end - begin, /*scalar_is_rhs=*/true);
    });
    return ok_status();
  }
  if (b.num_elements() == n && a.num_elements() == 1) {
    ctx.pool().parallel_for(n, grain, [&](int64_t begin, int64_t end) {
      binary_scalar(op, pb + begin, *pa, py + begin, end - begin, /*scalar_is_rhs=*/false);
    });
    return ok_status();
  }
  HXRT_ASSIGN_OR_RETURN(const BroadcastPlan plan, BroadcastPlan::make(a.shape, b.shape, y.shape));
  const int64_t row_grain = std::max<int64_t>(1, grain / std::max<int64_t>(plan.cols(), 1));
  ctx.pool().parallel_for(plan.rows(), row_grain,
                          [&](int64_t begin, int64_t end) { binary_broadcast_rows(op, plan, pa, pb, py, begin, end); });
  return ok_status();
}

// Integer Add Sub Mul Div: two's-complement wrap on overflow (as numpy), division truncates toward zero; a zero
// divisor fails the launch naming the op.
template <typename T>
Status compute_integer_binary(const ops::CpuComputeContext& ctx, BinaryOp op) {
  const ops::TensorRef& a = ctx.input(0);
  const ops::TensorRef& b = ctx.input(1);
  const ops::TensorRef& y = ctx.output(0);
  if (y.num_elements() == 0) return ok_status();
  HXRT_ASSIGN_OR_RETURN(const BroadcastPlan plan, BroadcastPlan::make(a.shape, b.shape, y.shape));
  const int64_t grain = tiling_grain(ctx.tiling(), "grain", kCheapGrain);
  const int64_t row_grain = std::max<int64_t>(1, grain / std::max<int64_t>(plan.cols(), 1));
  const T* pa = a.data<const T>();
  const T* pb = b.data<const T>();
  T* py = y.data<T>();
  using U = std::make_unsigned_t<T>;
  std::atomic<bool> by_zero{false};
  auto run = [&](auto f) {
    ctx.pool().parallel_for(plan.rows(), row_grain,
                            [&](int64_t begin, int64_t end) { broadcast_apply(plan, pa, pb, py, begin, end, f); });
  };
  switch (op) {
    case BinaryOp::kAdd: run([](T p, T q) { return static_cast<T>(static_cast<U>(p) + static_cast<U>(q)); }); break;
    case BinaryOp::kSub: run([](T p, T q) { return static_cast<T>(static_cast<U>(p) - static_cast<U>(q)); }); break;
    case BinaryOp::kMul: run([](T p, T q) { return static_cast<T>(static_cast<U>(p) * static_cast<U>(q)); }); break;
    case BinaryOp::kDiv:
      run([&by_zero](T p, T q) -> T {
        if (q == 0) {
          by_zero.store(true, std::memory_order_relaxed);
          return 0;
        }
        if constexpr (std::is_signed_v<T>) {
          if (q == -1) return static_cast<T>(U{0} - static_cast<U>(p));  // min / -1 wraps instead of trapping
        }
        return static_cast<T>(p / q);
      });
      break;
  }
  if (by_zero.load()) return invalid_argument("Div: integer division by zero (a divisor B is 0)");
  return ok_status();
}

Status compute_binary_int(const ops::CpuComputeContext& ctx) {
  const BinaryOp op = ctx.params<BinaryParams>().op;
  switch (ctx.input(0).dtype) {
    case DType::kI32: return compute_integer_binary<int32_t>(ctx, op);
    case DType::kI64: return compute_integer_binary<int64_t>(ctx, op);
    default: return invalid_argument("{} integer kernel does not take {}", binary_op_name(op), ctx.input(0).dtype);
  }
}

Status compute_unary(const ops::CpuComputeContext& ctx) {
  const UnaryOp op = ctx.params<UnaryParams>().op;
  const int64_t n = ctx.output(0).num_elements();
  if (n == 0) return ok_status();
  const float* x = ctx.input(0).data<const float>();
  float* y = ctx.output(0).data<float>();
  const int64_t grain = tiling_grain(ctx.tiling(), "grain", kTranscendentalGrain);
  ctx.pool().parallel_for(n, grain, [&](int64_t begin, int64_t end) { unary(op, x + begin, y + begin, end - begin); });
  return ok_status();
}

Status compute_cast(const ops::CpuComputeContext& ctx) {
  const ops::TensorRef& x = ctx.input(0);
  const ops::TensorRef& y = ctx.output(0);
  const int64_t n = y.num_elements();
  if (n == 0) return ok_status();
  if (!is_cast_dtype(x.dtype) || !is_cast_dtype(y.dtype)) {
    return invalid_argument("Cast from {} to {} is not supported", x.dtype, y.dtype);
  }
  const auto* src = x.data<const std::byte>();
  auto* dst = y.data<std::byte>();
  const size_t src_size = dtype_info(x.dtype).block_bytes;
  const size_t dst_size = dtype_info(y.dtype).block_bytes;
  const int64_t grain = tiling_grain(ctx.tiling(), "grain", kCheapGrain);
  ctx.pool().parallel_for(n, grain, [&](int64_t begin, int64_t end) {
    // Both dtypes were checked above, so each chunk's conversion cannot fail.
    cast(x.dtype, src + static_cast<size_t>(begin) * src_size, y.dtype, dst + static_cast<size_t>(begin) * dst_size,
         end - begin)
        .ignore();
  });
  return ok_status();
}

ops::KernelDef binary_kernel(BinaryOp op) {
  ops::KernelDef def;
  def.op_type = std::string(binary_op_name(op));
  def.since_version = 14;
  def.input_dtypes = {{DType::kF32}, {DType::kF32}};
  def.name = fmt::format("{}F32", binary_op_name(op));
  def.description = "f32 numpy broadcast; same-shape, scalar and merged-dim row paths";
  def.parse_attrs = [op](const graph::Graph&, const graph::Node&) -> Result<std::unique_ptr<ops::KernelParams>> {
    return std::unique_ptr<ops::KernelParams>(std::make_unique<BinaryParams>(op));
  };
  def.tiling = [](const ops::TilingQuery& q) -> Result<ops::Tiling> {
    return chunk_tiling("grain", kCheapGrain, output_elements(q));
  };
  def.launch = ops::cpu_launch(def.name, compute_binary);
  return def;
}

ops::KernelDef binary_int_kernel(BinaryOp op) {
  ops::KernelDef def = binary_kernel(op);
  def.input_dtypes = {{DType::kI32, DType::kI64}, {DType::kI32, DType::kI64}};
  def.name = fmt::format("{}Int", binary_op_name(op));
  def.description = "i32/i64 numpy broadcast; wraps on overflow, a zero divisor fails";
  def.launch = ops::cpu_launch(def.name, compute_binary_int);
  return def;
}

ops::KernelDef unary_kernel(std::string op_type, std::string domain, int since_version, UnaryOp op) {
  ops::KernelDef def;
  def.op_type = std::move(op_type);
  def.domain = std::move(domain);
  def.since_version = since_version;
  def.input_dtypes = {{DType::kF32}};
  def.name = fmt::format("{}F32", def.op_type);
  def.description = "f32 elementwise activation";
  const int64_t grain = op == UnaryOp::kRelu ? kCheapGrain : kTranscendentalGrain;
  if (op == UnaryOp::kGeluErf) {
    def.parse_attrs = [](const graph::Graph&, const graph::Node& node) -> Result<std::unique_ptr<ops::KernelParams>> {
      HXRT_ASSIGN_OR_RETURN(const ops::GeluApproximation approximation, ops::parse_gelu_approximation(node));
      return std::unique_ptr<ops::KernelParams>(std::make_unique<UnaryParams>(
          approximation == ops::GeluApproximation::kTanh ? UnaryOp::kGeluTanh : UnaryOp::kGeluErf));
    };
  } else {
    def.parse_attrs = [op](const graph::Graph&, const graph::Node&) -> Result<std::unique_ptr<ops::KernelParams>> {
      return std::unique_ptr<ops::KernelParams>(std::make_unique<UnaryParams>(op));
    };
  }
  def.tiling = [grain](const ops::TilingQuery& q) -> Result<ops::Tiling> {
    return chunk_tiling("grain", grain, output_elements(q));
  };
  def.launch = ops::cpu_launch(def.name, compute_unary);
  return def;
}

Status compute_leaky_relu(const ops::CpuComputeContext& ctx) {
  const float alpha = ctx.params<ops::LeakyReluParams>().alpha;
  const int64_t n = ctx.output(0).num_elements();
  if (n == 0) return ok_status();
  const float* x = ctx.input(0).data<const float>();
  float* y = ctx.output(0).data<float>();
  const int64_t grain = tiling_grain(ctx.tiling(), "grain", kCheapGrain);
  ctx.pool().parallel_for(n, grain,
                          [&](int64_t begin, int64_t end) { leaky_relu(x + begin, y + begin, end - begin, alpha); });
  return ok_status();
}

ops::KernelDef leaky_relu_kernel() {
  ops::KernelDef def;
  def.op_type = "LeakyRelu";
  def.since_version = 16;
  def.input_dtypes = {{DType::kF32}};
  def.name = "LeakyReluF32";
  def.description = "f32 x < 0 ? alpha·x : x";
  def.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_leaky_relu_params(node));
  };
  def.tiling = [](const ops::TilingQuery& q) -> Result<ops::Tiling> {
    return chunk_tiling("grain", kCheapGrain, output_elements(q));
  };
  def.launch = ops::cpu_launch(def.name, compute_leaky_relu);
  return def;
}

ops::KernelDef cast_kernel() {
  ops::KernelDef def;
  def.op_type = "Cast";
  def.since_version = 19;
  def.input_dtypes = {
      {DType::kF32, DType::kF16, DType::kBF16, DType::kI8, DType::kU8, DType::kI32, DType::kI64, DType::kBool}};
  def.name = "Cast";
  def.description = "converts between f32 f16 bf16 i8 u8 i32 i64 bool";
  def.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_cast_params(node));
  };
  def.tiling = [](const ops::TilingQuery& q) -> Result<ops::Tiling> {
    return chunk_tiling("grain", kCheapGrain, output_elements(q));
  };
  def.launch = ops::cpu_launch(def.name, compute_cast);
  return def;
}

}  // namespace

Status register_elementwise(ops::KernelRegistry& registry) {
  for (BinaryOp op : {BinaryOp::kAdd, BinaryOp::kSub, BinaryOp::kMul, BinaryOp::kDiv}) {
    HXRT_RETURN_IF_ERROR(registry.add(binary_kernel(op)));
    HXRT_RETURN_IF_ERROR(registry.add(binary_int_kernel(op)));
  }
  HXRT_RETURN_IF_ERROR(registry.add(unary_kernel("Relu", "", 14, UnaryOp::kRelu)));
  HXRT_RETURN_IF_ERROR(registry.add(leaky_relu_kernel()));
  HXRT_RETURN_IF_ERROR(registry.add(unary_kernel("Gelu", "", 20, UnaryOp::kGeluErf)));
  HXRT_RETURN_IF_ERROR(registry.add(unary_kernel("Sigmoid", "", 13, UnaryOp::kSigmoid)));
  HXRT_RETURN_IF_ERROR(registry.add(unary_kernel("Tanh", "", 13, UnaryOp::kTanh)));
  HXRT_RETURN_IF_ERROR(registry.add(unary_kernel("Silu", "hxrt", 1, UnaryOp::kSilu)));
  HXRT_RETURN_IF_ERROR(registry.add(cast_kernel()));
  return ok_status();
}

}  // namespace hxrt::kernels::cpu
