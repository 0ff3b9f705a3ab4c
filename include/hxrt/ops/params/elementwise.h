// Params of the elementwise ops with attributes (docs/ops.md, "Elementwise"): Gelu's approximation and LeakyRelu's
// slope. The binary ops, Relu, Sigmoid, Tanh and Silu have none.
//
// Thread-safety: params are immutable after parsing; the functions are reentrant.
#pragma once

#include <string>
#include <string_view>

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
  float alpha = 0.01f;  // finite
  std::string to_string() const override;  // "alpha=0.01"
};
// Attribute alpha: a float (an int converts), default 0.01; InvalidArgument naming the node unless finite.
Result<LeakyReluParams> parse_leaky_relu_params(const graph::Node& node);

}  // namespace hxrt::ops
