// qwen3moe: Qwen 3 mixture of experts (Qwen3-30B-A3B, Qwen3-235B-A22B). Qwen 3's attention; every FFN is
// expert_used_count of expert_count SwiGLU experts chosen by a softmax router, their weights renormalised over the
// chosen ones (llama.cpp's build_moe_ffn with norm_w).
#include "llm/families/families.h"

namespace hxrt::llm::families {

const ModelFamily kQwen3Moe = {
    .architecture = "qwen3moe",
    .models = "Qwen 3 MoE",
    .rope = RopeStyle::kNeox,
    .qk_norm = true,
    .experts = ModelFamily::Experts::kRequired,
};

}  // namespace hxrt::llm::families
