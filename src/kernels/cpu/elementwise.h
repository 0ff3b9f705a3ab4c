// CPU elementwise math: broadcast binary ops (Add Sub Mul Div), activations (Relu LeakyRelu Gelu Sigmoid Tanh Silu)
// and Cast.
//
// The functions work on plain pointers and counts so that fused kernels and tests can call them directly; the
// kernels registered by register_elementwise() (registration.h) split these calls over the device's thread pool.
// Scalar helpers (silu, gelu_erf, gelu_tanh, sigmoid) are inline so fused loops can use them per element.
//
// Note [Vectorised loops]
// At -O2, GCC 12 vectorises a loop only when no scalar remainder is needed (the "very cheap" cost model), so the
// hot loops here walk blocks of kVectorBlock elements with a fixed-length inner loop (vectorised and unrolled)
// followed by a scalar tail.
//
// Thread-safety: pure functions; safe from any thread. Outputs may alias inputs exactly (y == a), not partially.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include "hxrt/base/dtype.h"
#include "hxrt/base/shape.h"
#include "hxrt/base/status.h"
#include "hxrt/ops/kernel_def.h"

namespace hxrt::kernels::cpu {

inline constexpr int64_t kVectorBlock = 16;  // elements per fixed-length inner loop (Note [Vectorised loops])

enum class BinaryOp : uint8_t { kAdd, kSub, kMul, kDiv };
enum class UnaryOp : uint8_t { kRelu, kGeluErf, kGeluTanh, kSigmoid, kTanh, kSilu };

std::string_view binary_op_name(BinaryOp op);
std::string_view unary_op_name(UnaryOp op);

inline float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}
inline float silu(float x) {
  return x / (1.0f + std::exp(-x));
}
// x·Φ(x) with the exact normal CDF.
inline float gelu_erf(float x) {
  return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f));
}
// The tanh approximation 0.5·x·(1 + tanh(u)), u = √(2/π)·(x + 0.044715·x³), computed as x / (1 + exp(-2u)): the same
// function without the cancellation of 1 + tanh(u) for x < -3, and with glibc's expf, which the JIT kernels' hx_exp
// repeats, so they give these bits (the AVX2 array path is within 2 ulp: Note [Vector GELU] in elementwise.cc).
inline float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286536f;
  return x / (1.0f + std::exp(-2.0f * (kSqrt2OverPi * (x + 0.044715f * x * x * x))));
}

// y[i] = a[i] op b[i] for i < n.
void binary_same_shape(BinaryOp op, const float* a, const float* b, float* y, int64_t n);
// y[r, c] = a[r, c] op v[c] (vector_is_rhs) or v[c] op a[r, c] (otherwise), for r < rows, c < cols:
// a trailing-vector broadcast such as a bias add.
void binary_row_vector(BinaryOp op, const float* a, const float* v, float* y, int64_t rows, int64_t cols,
                       bool vector_is_rhs);
// y[i] = a[i] op s (scalar_is_rhs) or s op a[i], for i < n.
void binary_scalar(BinaryOp op, const float* a, float s, float* y, int64_t n, bool scalar_is_rhs);

// A numpy broadcast of a and b into out_shape, reduced to the fewest dims: adjacent dims are merged when both
// operands either broadcast along both or along neither. The loops run over `rows` rows of `cols` elements; for
// row r the operand offsets come from a_offset(r) / b_offset(r), and inside a row an operand advances by
// a_inner_stride / b_inner_stride (1, or 0 when it is broadcast along the last merged dim).
class BroadcastPlan {
 public:
  // a_shape and b_shape must broadcast to out_shape (checked; InvalidArgument otherwise).
  static Result<BroadcastPlan> make(const Shape& a_shape, const Shape& b_shape, const Shape& out_shape);

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t a_inner_stride() const { return a_inner_; }
  int64_t b_inner_stride() const { return b_inner_; }
  int64_t a_offset(int64_t row) const { return offset(row, a_strides_); }
  int64_t b_offset(int64_t row) const { return offset(row, b_strides_); }
  int rank() const { return rank_; }  // merged rank, including the column dim

 private:
  int64_t offset(int64_t row, const std::array<int64_t, Shape::kMaxRank>& strides) const;

  int rank_ = 0;
  std::array<int64_t, Shape::kMaxRank> dims_{};       // merged output dims
  std::array<int64_t, Shape::kMaxRank> a_strides_{};  // element strides of a per merged dim (0 = broadcast)
  std::array<int64_t, Shape::kMaxRank> b_strides_{};
  int64_t rows_ = 1;
  int64_t cols_ = 1;
  int64_t a_inner_ = 1;
  int64_t b_inner_ = 1;
};

// Runs rows [row_begin, row_end) of a broadcast plan.
void binary_broadcast_rows(BinaryOp op, const BroadcastPlan& plan, const float* a, const float* b, float* y,
                           int64_t row_begin, int64_t row_end);

// ---- Templates over element types (the math and logic families' kernels) ----

// y[i] = f(x[i]) for i < n, in blocks staged through a local array (Note [Vectorised loops]); y may alias x
// exactly when X and Y are the same type.
template <typename X, typename Y, typename F>
void map_elements(const X* x, Y* y, int64_t n, F f) {
  int64_t i = 0;
  for (; i + kVectorBlock <= n; i += kVectorBlock) {
    Y out[kVectorBlock];
    for (int64_t k = 0; k < kVectorBlock; ++k) out[k] = f(x[i + k]);
    for (int64_t k = 0; k < kVectorBlock; ++k) y[i + k] = out[k];
  }
  for (; i < n; ++i) y[i] = f(x[i]);
}

// Rows [row_begin, row_end) of y = f(a, b) over a broadcast plan, for any element types. y may alias a or b
// exactly when that operand is not broadcast (its shape is the output's).
template <typename A, typename B, typename Y, typename F>
void broadcast_apply(const BroadcastPlan& plan, const A* a, const B* b, Y* y, int64_t row_begin, int64_t row_end,
                     F f) {
  const int64_t cols = plan.cols();
  for (int64_t r = row_begin; r < row_end; ++r) {
    const A* ar = a + plan.a_offset(r);
    const B* br = b + plan.b_offset(r);
    Y* yr = y + r * cols;
    if (plan.a_inner_stride() != 0 && plan.b_inner_stride() != 0) {
      for (int64_t c = 0; c < cols; ++c) yr[c] = f(ar[c], br[c]);
    } else if (plan.a_inner_stride() != 0) {
      const B s = *br;
      for (int64_t c = 0; c < cols; ++c) yr[c] = f(ar[c], s);
    } else if (plan.b_inner_stride() != 0) {
      const A s = *ar;
      for (int64_t c = 0; c < cols; ++c) yr[c] = f(s, br[c]);
    } else {
      const Y v = f(*ar, *br);
      for (int64_t c = 0; c < cols; ++c) yr[c] = v;
    }
  }
}

// y[i] = f(x[i]) for i < n.
void unary(UnaryOp op, const float* x, float* y, int64_t n);
void silu(const float* x, float* y, int64_t n);
// y[i] = silu(x[i]) · up[i] (SwiGLU; up null: silu(x[i])) for i < n, each element with the bits of the scalar
// expression (Note [Vector SiLU] in elementwise.cc). y may be x or up.
void silu_mul(const float* x, const float* up, float* y, int64_t n);
void gelu(const float* x, float* y, int64_t n, bool tanh_approximation);
// y[i] = erf(x[i]) for i < n: eight at a time within 4e-7 relative where the CPU has AVX2+FMA (Note [Vector erf] in
// elementwise.cc), std::erf otherwise. y may be x.
void erf_array(const float* x, float* y, int64_t n);
// y[i] = x[i] for x[i] >= 0, alpha · x[i] otherwise (LeakyRelu), for i < n.
void leaky_relu(const float* x, float* y, int64_t n, float alpha);

// Dtypes Cast converts between: f32 f16 bf16 i8 u8 i32 i64 bool.
bool is_cast_dtype(DType dtype);
// Converts n values. Float → integer truncates toward zero and saturates at the integer's range (NaN → 0);
// integer → narrower integer wraps (two's complement, as numpy); anything → bool is `!= 0`; bool is one byte 0/1.
// InvalidArgument for a dtype outside is_cast_dtype.
Status cast(DType from, const void* x, DType to, void* y, int64_t n);

// Tiling shared by the CPU kernels of the elementwise, normalization and tensor-op families: work is split into
// chunks of `grain` units (elements or rows) over the thread pool. The key holds only the grain, so one cached
// tiling serves every shape of a bucket; the grid (number of chunks) is informational.
ops::Tiling chunk_tiling(std::string_view grain_name, int64_t grain, int64_t units);
// The grain stored by chunk_tiling, at least 1 (fallback when the tiling lacks it).
int64_t tiling_grain(const ops::Tiling& tiling, std::string_view grain_name, int64_t fallback);

}  // namespace hxrt::kernels::cpu
