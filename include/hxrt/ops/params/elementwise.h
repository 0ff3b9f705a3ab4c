// Params of the elementwise ops with attributes (docs/ops.md, "Elementwise"): Gelu's approximation, LeakyRelu's
// slope and Cast's target type. The binary ops, Relu, Sigmoid, Tanh and Silu have none.
//
// Thread-safety: params are immutable after parsing; the functions are reentrant.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "hxrt/base/dtype.h"
#include "hxrt/base/status.h"
#include "hxrt/graph/graph.h"
#include "hxrt/ops/params/common.h"

namespace hxrt::ops {

// ---- Gelu (20) ----
// Attribute approximate: "none" (x·Φ(x) with erf) or "tanh".
enum class GeluApproximation : uint8_t { kNone, kTanh };
Result<GeluApproximation> parse_gelu_approximation(const graph::Node& node);

// ---- LeakyRelu (16) ----
// y = x for x >= 0, alpha · x for x < 0.
struct LeakyReluParams final : TypedParams<LeakyReluParams> {
  static constexpr std::string_view kName = "LeakyReluParams";
  float alpha = 0.01f;                     // finite
  std::string to_string() const override;  // "alpha=0.01"
};
// Attribute alpha: a float (an int converts), default 0.01; InvalidArgument naming the node unless finite.
Result<LeakyReluParams> parse_leaky_relu_params(const graph::Node& node);

// ---- Cast (19) ----
// The dtype of an ONNX TensorProto.DataType code that Cast accepts (1 f32, 2 u8, 3 i8, 6 i32, 7 i64, 9 bool, 10 f16,
// 16 bf16); nullopt otherwise.
std::optional<DType> dtype_from_onnx_code(int64_t code);

struct CastParams final : TypedParams<CastParams> {
  static constexpr std::string_view kName = "CastParams";
  int64_t to = 1;  // the ONNX code, as written; the output dtype carries the same information at run time
  DType dtype = DType::kF32;
  std::string to_string() const override;  // "to=10"
};
// Attribute to: required, one of the codes above.
Result<CastParams> parse_cast_params(const graph::Node& node);

}  // namespace hxrt::ops
