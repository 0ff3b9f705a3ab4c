// gemma3: Gemma 3 (text). Gemma 2's block without the attention softcap, with RMSNorm of each query and key head;
// five sliding-window layers (RoPE base 10000 unless rope.freq_base_swa says otherwise) for every global one.
#include "llm/families/families.h"

namespace hxrt::llm::families {
namespace {

Status configure(const formats::GgufFile& file, ModelConfig& c) {
  const std::string p = c.architecture + ".";
  if (file.find(p + "attention.sliding_window") != nullptr) {
    HXRT_ASSIGN_OR_RETURN(const int window, int_key(file, p + "attention.sliding_window", true));
    HXRT_ASSIGN_OR_RETURN(const float local_theta, float_key(file, p + "rope.freq_base_swa", 10000.0f));
    // Local layers are never scaled (Gemma 3 4B+ scale the global ones linearly by 8).
    HXRT_RETURN_IF_ERROR(set_sliding_pattern(file, c, window, 6, local_theta, 1.0f));
  }
  HXRT_ASSIGN_OR_RETURN(c.final_softcap, float_key(file, p + "final_logit_softcapping", 0.0f));
  // Gemma 3 27B has 62 layers.
  gemma_query_scale(c, 62);
  return ok_status();
}

}  // namespace

const ModelFamily kGemma3 = {
    .architecture = "gemma3",
    .models = "Gemma 3",
    .rope = RopeStyle::kNeox,
    .gate = FfnGate::kGeluTanh,
    .qk_norm = true,
    .post_norms = true,
    .scale_embeddings = true,
    .configure = configure,
};

}  // namespace hxrt::llm::families
