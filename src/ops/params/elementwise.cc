#include "hxrt/ops/params/elementwise.h"

#include <cmath>

#include <fmt/format.h>

namespace hxrt::ops {

Result<GeluApproximation> parse_gelu_approximation(const graph::Node& node) {
  // A Result kept whole: GCC 12 reports a false -Wmaybe-uninitialized for a string unpacked by the macro.
  Result<std::string> approximate = node.attrs.get_string("approximate", "none");
  if (!approximate.ok()) return attr_read_error(node, "approximate", approximate.status());
  if (*approximate == "none") return GeluApproximation::kNone;
  if (*approximate == "tanh") return GeluApproximation::kTanh;
  return attr_error(node, "approximate", fmt::format("must be \"none\" or \"tanh\", got \"{}\"", *approximate));
}

std::string LeakyReluParams::to_string() const {
  return fmt::format("alpha={}", alpha);
}

Result<LeakyReluParams> parse_leaky_relu_params(const graph::Node& node) {
  Result<double> alpha = node.attrs.get_float("alpha", 0.01);
  if (!alpha.ok()) return attr_read_error(node, "alpha", alpha.status());
  const auto value = static_cast<float>(*alpha);
  if (!std::isfinite(value)) return attr_error(node, "alpha", fmt::format("= {} must be finite", *alpha));
  LeakyReluParams params;
  params.alpha = value;
  return params;
}

std::optional<DType> dtype_from_onnx_code(int64_t code) {
  switch (code) {
    case 1: return DType::kF32;
    case 2: return DType::kU8;
    case 3: return DType::kI8;
    case 6: return DType::kI32;
    case 7: return DType::kI64;
    case 9: return DType::kBool;
    case 10: return DType::kF16;
    case 16: return DType::kBF16;
    default: return std::nullopt;
  }
}

std::string CastParams::to_string() const {
  return fmt::format("to={}", to);
}

Result<CastParams> parse_cast_params(const graph::Node& node) {
  Result<int64_t> to = node.attrs.get_int("to");
  if (!to.ok()) return attr_read_error(node, "to", to.status());
  const std::optional<DType> dtype = dtype_from_onnx_code(*to);
  if (!dtype) {
    return attr_error(node, "to",
                      fmt::format("= {} is not a supported TensorProto type (1 f32, 2 u8, 3 i8, 6 i32, 7 i64, 9 bool, "
                                  "10 f16, 16 bf16)",
                                  *to));
  }
  CastParams params;
  params.to = *to;
  params.dtype = *dtype;
  return params;
}

}  // namespace hxrt::ops
