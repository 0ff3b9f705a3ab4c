// qwen2: Qwen 2 and 2.5. NeoX RoPE, biases on Q, K and V, SwiGLU.
#include "llm/families/families.h"

namespace hxrt::llm::families {

const ModelFamily kQwen2 = {
    .architecture = "qwen2",
    .models = "Qwen 2, Qwen 2.5",
    .rope = RopeStyle::kNeox,
    .qkv_bias = true,
};

}  // namespace hxrt::llm::families
