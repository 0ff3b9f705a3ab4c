// llama: Llama 2/3, Mistral, SmolLM, TinyLlama. Adjacent-pair RoPE, SwiGLU, biases only where the file has them.
#include "llm/families/families.h"

namespace hxrt::llm::families {

const ModelFamily kLlama = {
    .architecture = "llama",
    .models = "Llama 2/3, Mistral, SmolLM, TinyLlama",
};

}  // namespace hxrt::llm::families
