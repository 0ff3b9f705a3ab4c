// qwen3: Qwen 3 (dense). NeoX RoPE, RMSNorm of each query and key head, head_dim from attention.key_length.
#include "llm/families/families.h"

namespace hxrt::llm::families {

const ModelFamily kQwen3 = {
    .architecture = "qwen3",
    .models = "Qwen 3",
    .rope = RopeStyle::kNeox,
    .qk_norm = true,
};

}  // namespace hxrt::llm::families
