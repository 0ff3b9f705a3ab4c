#include "hxrt/ops/params/logic.h"

#include <fmt/format.h>

namespace hxrt::ops {

std::string ModParams::to_string() const {
  return fmt::format("fmod={}", fmod ? 1 : 0);
}

Result<ModParams> parse_mod_params(const graph::Node& node, bool float_inputs) {
  Result<int64_t> fmod = node.attrs.get_int("fmod", 0);
  if (!fmod.ok()) return attr_read_error(node, "fmod", fmod.status());
  if (*fmod != 0 && *fmod != 1) return attr_error(node, "fmod", fmt::format("= {} must be 0 or 1", *fmod));
  if (float_inputs && *fmod == 0) return attr_error(node, "fmod", "must be 1 for floating-point inputs");
  ModParams params;
  params.fmod = *fmod == 1;
  return params;
}

}  // namespace hxrt::ops
