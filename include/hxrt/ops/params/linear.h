// Params and geometry of the linear ops (docs/ops.md, "Linear algebra"): MatMul (numpy batch broadcast), Gemm and
// the fused MatMulBias.
//
// Thread-safety: params are immutable after parsing; the functions are reentrant.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hxrt/base/shape.h"
#include "hxrt/base/status.h"
#include "hxrt/graph/graph.h"
#include "hxrt/ops/params/common.h"

namespace hxrt::ops {

// Batch-broadcast geometry of numpy matmul on concrete shapes (rank-1 operands as in numpy).
struct MatMulGeometry final : TypedGeometry<MatMulGeometry> {
  static constexpr std::string_view kName = "MatMulGeometry";
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  std::vector<int64_t> a_offsets;  // (batch) element offset of each output batch's A matrix
  std::vector<int64_t> b_offsets;  // (batch) element offset of each output batch's B matrix
  Shape out;                       // output shape
  int64_t batch() const { return static_cast<int64_t>(a_offsets.size()); }
};
// InvalidArgument (naming both shapes) when K differs or batch dims do not broadcast.
Result<MatMulGeometry> matmul_geometry(const Shape& a, const Shape& b);

// Gemm (ONNX): Y = alpha · op(A) · op(B) + beta · C.
struct GemmParams final : TypedParams<GemmParams> {
  static constexpr std::string_view kName = "GemmParams";
  float alpha = 1.0f;
  float beta = 1.0f;
  bool trans_a = false;
  bool trans_b = false;
  std::string to_string() const override;  // "alpha=1, beta=1, transA=0, transB=1"
};
Result<GemmParams> parse_gemm_params(const graph::Node& node);

// The activation of MatMulBias's epilogue.
enum class Activation : uint8_t { kNone, kGelu, kGeluTanh };
// "none", "gelu" (erf), "gelu_tanh"; InvalidArgument otherwise.
Result<Activation> activation_from_name(std::string_view name);
std::string_view activation_name(Activation activation);

// MatMulBias (hxrt.fused): Y = act(A · B + bias[N]).
struct MatMulBiasParams final : TypedParams<MatMulBiasParams> {
  static constexpr std::string_view kName = "MatMulBiasParams";
  Activation activation = Activation::kNone;
  std::string to_string() const override;  // "activation=gelu"
};
Result<MatMulBiasParams> parse_matmul_bias_params(const graph::Node& node);

}  // namespace hxrt::ops
