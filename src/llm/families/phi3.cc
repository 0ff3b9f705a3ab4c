// phi3: Phi-3 and Phi-4-mini. NeoX RoPE, Q/K/V in one attn_qkv, gate and up in one ffn_up (gate rows first).
// llama.cpp ignores phi3.attention.sliding_window (its converters fill it wrongly), so hxrt does too.
#include "llm/families/families.h"

namespace hxrt::llm::families {

const ModelFamily kPhi3 = {
    .architecture = "phi3",
    .models = "Phi-3, Phi-4-mini",
    .rope = RopeStyle::kNeox,
    .fused_gate_up = true,
};

}  // namespace hxrt::llm::families
