// The decoder families (one file each in this folder) and the key readers their configure hooks share.
//
// Thread-safety: the families are immutable; the helpers are reentrant.
#pragma once

#include <string>

#include "hxrt/base/status.h"
#include "hxrt/formats/gguf.h"
#include "hxrt/llm/model_family.h"

namespace hxrt::llm::families {

extern const ModelFamily kLlama;
extern const ModelFamily kQwen2;
extern const ModelFamily kQwen3;
extern const ModelFamily kQwen3Moe;
extern const ModelFamily kGemma2;
extern const ModelFamily kGemma3;
extern const ModelFamily kPhi3;

// A positive integer key; `fallback` when absent and not `required`. Errors name the key.
Result<int> int_key(const formats::GgufFile& file, const std::string& key, bool required, int fallback = 0);
// A finite, non-negative f32 key; `fallback` when absent.
Result<float> float_key(const formats::GgufFile& file, const std::string& key, float fallback);
// Marks layer l sliding (window, local RoPE base and frequency scale) when l % pattern < pattern - 1 (llama.cpp's
// set_swa_pattern); {arch}.attention.sliding_window_pattern overrides `pattern`.
Status set_sliding_pattern(const formats::GgufFile& file, ModelConfig& config, int window, int pattern,
                           float local_rope_theta, float local_freq_scale);

// Gemma's 27B models (`layers_27b` blocks) scale queries by 1/sqrt(n_embd / n_heads), the others by 1/sqrt(head_dim)
// (gemma_pytorch's query_pre_attn_scalar, as llama.cpp reads it from the layer count).
void gemma_query_scale(ModelConfig& config, int layers_27b);

}  // namespace hxrt::llm::families
