#include "hxrt/ops/params/llm.h"

#include <fmt/format.h>

namespace hxrt::ops {

std::string PagedAttentionParams::to_string() const {
  return fmt::format("layer={},scale={},window={},softcap={}", layer, scale, window, softcap);
}

Result<PagedAttentionParams> parse_paged_attention_params(const graph::Node& node) {
  Result<int64_t> layer = node.attrs.get_int("layer");
  if (!layer.ok()) return attr_read_error(node, "layer", layer.status());
  if (*layer < 0) return attr_error(node, "layer", fmt::format("= {} must be >= 0", *layer));
  Result<double> scale = node.attrs.get_float("scale", 0.0);
  if (!scale.ok()) return attr_read_error(node, "scale", scale.status());
  Result<int64_t> window = node.attrs.get_int("window", 0);
  if (!window.ok()) return attr_read_error(node, "window", window.status());
  if (*window < 0) return attr_error(node, "window", fmt::format("= {} must be >= 0", *window));
  Result<double> softcap = node.attrs.get_float("softcap", 0.0);
  if (!softcap.ok()) return attr_read_error(node, "softcap", softcap.status());
  if (!(*softcap >= 0.0)) return attr_error(node, "softcap", fmt::format("= {} must be >= 0", *softcap));
  PagedAttentionParams params;
  params.layer = *layer;
  params.scale = static_cast<float>(*scale);
  params.window = *window;
  params.softcap = static_cast<float>(*softcap);
  return params;
}

}  // namespace hxrt::ops
