// llama: Llama 2/3, Mistral, SmolLM, TinyLlama, and Mixtral (llama with expert FFNs: expert_count > 0). Adjacent-pair
// RoPE, SwiGLU, biases only where the file has them.
#include "llm/families/families.h"

namespace hxrt::llm::families {

const ModelFamily kLlama = {
    .architecture = "llama",
    .models = "Llama 2/3, Mistral, Mixtral, SmolLM, TinyLlama",
    .experts = ModelFamily::Experts::kOptional,
};

}  // namespace hxrt::llm::families
