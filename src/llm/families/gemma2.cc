// gemma2: Gemma 2. Embeddings scaled by sqrt(n_embd), GELU-tanh gate, post-attention and post-FFN norms, every
// other layer (the even ones) sliding-window at the same RoPE base, attention and final logit softcapping.
#include "llm/families/families.h"

namespace hxrt::llm::families {
namespace {

Status configure(const formats::GgufFile& file, ModelConfig& c) {
  const std::string p = c.architecture + ".";
  HXRT_ASSIGN_OR_RETURN(const int window, int_key(file, p + "attention.sliding_window", false, 4096));
  HXRT_ASSIGN_OR_RETURN(const float local_theta, float_key(file, p + "rope.freq_base_swa", c.rope_theta));
  HXRT_RETURN_IF_ERROR(set_sliding_pattern(file, c, window, 2, local_theta, c.rope_scaling.freq_scale));
  HXRT_ASSIGN_OR_RETURN(c.attention_softcap, float_key(file, p + "attn_logit_softcapping", 50.0f));
  HXRT_ASSIGN_OR_RETURN(c.final_softcap, float_key(file, p + "final_logit_softcapping", 30.0f));
  // Gemma 2 27B has 46 layers.
  gemma_query_scale(c, 46);
  return ok_status();
}

}  // namespace

const ModelFamily kGemma2 = {
    .architecture = "gemma2",
    .models = "Gemma 2",
    .rope = RopeStyle::kNeox,
    .gate = FfnGate::kGeluTanh,
    .post_norms = true,
    .scale_embeddings = true,
    .configure = configure,
};

}  // namespace hxrt::llm::families
