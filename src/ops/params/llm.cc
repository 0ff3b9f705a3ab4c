#include "hxrt/ops/params/llm.h"

#include <fmt/format.h>

namespace hxrt::ops {

std::string PagedAttentionParams::to_string() const {
  return fmt::format("layer={},scale={}", layer, scale);
}

Result<PagedAttentionParams> parse_paged_attention_params(const graph::Node& node) {
  Result<int64_t> layer = node.attrs.get_int("layer");
  if (!layer.ok()) return attr_read_error(node, "layer", layer.status());
  if (*layer < 0) return attr_error(node, "layer", fmt::format("= {} must be >= 0", *layer));
  Result<double> scale = node.attrs.get_float("scale", 0.0);
  if (!scale.ok()) return attr_read_error(node, "scale", scale.status());
  PagedAttentionParams params;
  params.layer = *layer;
  params.scale = static_cast<float>(*scale);
  return params;
}

}  // namespace hxrt::ops
