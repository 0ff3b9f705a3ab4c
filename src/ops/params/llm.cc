#include "hxrt/ops/params/llm.h"

#include <cmath>

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

std::string MoeRouteParams::to_string() const {
  return fmt::format("k={},normalize={},scale={}", k, normalize ? 1 : 0, scale);
}

Result<MoeRouteParams> parse_moe_route_params(const graph::Node& node) {
  Result<int64_t> k = node.attrs.get_int("k");
  if (!k.ok()) return attr_read_error(node, "k", k.status());
  if (*k < 1) return attr_error(node, "k", fmt::format("= {} must be >= 1", *k));
  Result<int64_t> normalize = node.attrs.get_int("normalize", 0);
  if (!normalize.ok()) return attr_read_error(node, "normalize", normalize.status());
  Result<double> scale = node.attrs.get_float("scale", 0.0);
  if (!scale.ok()) return attr_read_error(node, "scale", scale.status());
  if (!(*scale >= 0.0) || !std::isfinite(*scale)) return attr_error(node, "scale", fmt::format("= {} must be finite and >= 0", *scale));
  MoeRouteParams params;
  params.k = *k;
  params.normalize = *normalize != 0;
  params.scale = static_cast<float>(*scale);
  return params;
}

Result<ExpertsGeometry> experts_geometry(const Shape& a, const Shape& w, const Shape& ids, const Shape* weights) {
  if (w.rank() != 3) return invalid_argument("MatMulQExperts: W {} must be [n_experts, N, K]", w);
  if (ids.rank() != 2) return invalid_argument("MatMulQExperts: ids {} must be [n_tokens, n_slots]", ids);
  if (a.rank() != 2 && a.rank() != 3) return invalid_argument("MatMulQExperts: A {} must be [n_tokens, K] or [n_tokens, n_slots, K]", a);
  ExpertsGeometry g;
  g.n_experts = w.dim(0);
  g.n = w.dim(1);
  g.k = w.dim(2);
  g.n_tokens = ids.dim(0);
  g.n_slots = ids.dim(1);
  g.per_slot_a = a.rank() == 3;
  if (a.dim(0) != g.n_tokens || a.dim(-1) != g.k || (g.per_slot_a && a.dim(1) != g.n_slots)) {
    return invalid_argument("MatMulQExperts: A {} does not fit ids {} and W {}", a, ids, w);
  }
  if (weights != nullptr) {
    if (*weights != ids) return invalid_argument("MatMulQExperts: weights {} must have the shape of ids {}", *weights, ids);
    g.weighted = true;
  }
  return g;
}

}  // namespace hxrt::ops
