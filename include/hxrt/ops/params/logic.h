// Params of the broadcast binary, variadic, comparison and logical ops (docs/onnx_ops/logic.md): Pow Mod PRelu
// Max Min Sum Mean Equal Greater GreaterOrEqual Less LessOrEqual And Or Xor Where Clip. Only Mod has an attribute;
// the others' kernels take NoParams.
//
// Thread-safety: params are immutable after parsing; the functions are reentrant.
#pragma once

#include <string>
#include <string_view>

#include "hxrt/base/status.h"
#include "hxrt/graph/graph.h"
#include "hxrt/ops/params/common.h"

namespace hxrt::ops {

// ---- Mod (13) ----
// fmod = 0: the remainder takes the divisor's sign (Python's %, integers only); fmod = 1: the dividend's sign (C's
// fmod and %).
struct ModParams final : TypedParams<ModParams> {
  static constexpr std::string_view kName = "ModParams";
  bool fmod = false;
  std::string to_string() const override;  // "fmod=1"
};
// Attribute fmod: 0 (default) or 1; InvalidArgument naming the node otherwise. `float_inputs`: fmod must be 1
// (ONNX leaves the floating-point remainder with the divisor's sign undefined).
Result<ModParams> parse_mod_params(const graph::Node& node, bool float_inputs);

}  // namespace hxrt::ops
