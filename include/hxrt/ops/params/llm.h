// Params of the LLM ops (docs/ops.md, "LLM"): PagedAttention. GatherRows has none.
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

}  // namespace hxrt::ops
