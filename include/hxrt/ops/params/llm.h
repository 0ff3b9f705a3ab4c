// Params of the LLM ops (docs/ops.md, "LLM"): PagedAttention, MoeRoute. GatherRows and MatMulQExperts have none.
//
// Thread-safety: params are immutable after parsing; the functions are reentrant.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "hxrt/base/status.h"
#include "hxrt/graph/graph.h"
#include "hxrt/ops/params/common.h"

namespace hxrt::ops {

struct PagedAttentionParams final : TypedParams<PagedAttentionParams> {
  static constexpr std::string_view kName = "PagedAttentionParams";
  int64_t layer = 0;                       // the cache layer this node reads and writes, >= 0 (required)
  float scale = 0.0f;                      // 0: 1/sqrt(head_dim)
  int64_t window = 0;                      // > 0: a query at p sees positions (p - window, p] only; 0: all of 0..p
  float softcap = 0.0f;                    // > 0: scores become softcap · tanh(score / softcap) (Gemma 2)
  std::string to_string() const override;  // "layer=3,scale=0,window=0,softcap=0"
};
// InvalidArgument naming the node when 'layer' is absent or negative, 'window' negative or 'softcap' negative. The schema also checks 'layer' against the
// cache's layer count, which only it sees.
Result<PagedAttentionParams> parse_paged_attention_params(const graph::Node& node);

// MoeRoute: a mixture-of-experts router. Per token, probs = softmax(logits) over the experts; the k most probable
// experts (ties: the lower id) are chosen, their probabilities are the weights, divided by their sum when
// `normalize` (clamped below at 2^-14, as llama.cpp), then multiplied by `scale` when it is not 0 or 1.
struct MoeRouteParams final : TypedParams<MoeRouteParams> {
  static constexpr std::string_view kName = "MoeRouteParams";
  int64_t k = 0;            // experts per token, >= 1 (required)
  bool normalize = false;   // weights / sum of the chosen weights (Mixtral, Qwen3-MoE)
  float scale = 0.0f;       // 0 or 1: none
  std::string to_string() const override;  // "k=8,normalize=1,scale=0"
};
// InvalidArgument naming the node when 'k' is absent or < 1, or 'scale' negative.
Result<MoeRouteParams> parse_moe_route_params(const graph::Node& node);

// MatMulQExperts: Y[t, s] = A[t (, s)] · W[ids[t, s]]ᵀ for each token t and slot s; with `weights`, the slots are
// summed: Y[t] = Σ_s weights[t, s] · (A[t (, s)] · W[ids[t, s]]ᵀ), in slot order.
struct ExpertsGeometry final : TypedGeometry<ExpertsGeometry> {
  static constexpr std::string_view kName = "ExpertsGeometry";
  int64_t n_tokens = 0, n_slots = 0, k = 0, n = 0, n_experts = 0;
  bool per_slot_a = false;  // A is [n_tokens, n_slots, k] (else [n_tokens, k], shared by the slots)
  bool weighted = false;    // the weights input is present: Y is [n_tokens, n]
};
// InvalidArgument unless A is [T, K] or [T, S, K], W [E, N, K], ids [T, S] and weights (when given) [T, S].
Result<ExpertsGeometry> experts_geometry(const Shape& a, const Shape& w, const Shape& ids, const Shape* weights);

}  // namespace hxrt::ops
