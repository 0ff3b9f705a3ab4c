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

std::string LeakyReluParams::to_string() const { return fmt::format("alpha={}", alpha); }

Result<LeakyReluParams> parse_leaky_relu_params(const graph::Node& node) {
  Result<double> alpha = node.attrs.get_float("alpha", 0.01);
  if (!alpha.ok()) return attr_read_error(node, "alpha", alpha.status());
  const auto value = static_cast<float>(*alpha);
  if (!std::isfinite(value)) return attr_error(node, "alpha", fmt::format("= {} must be finite", *alpha));
  LeakyReluParams params;
  params.alpha = value;
  return params;
}

}  // namespace hxrt::ops
