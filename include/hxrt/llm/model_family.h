// Decoder families and the model configuration read from a GGUF file.
//
// A ModelFamily describes one `general.architecture` (llama, qwen2, qwen3, gemma2, gemma3, phi3): which variants
// of the one pre-norm decoder it uses (biases, q/k norm, post norms, fused projections, RoPE style, FFN gate,
// embedding scaling) and, in its `configure` hook, the keys only it has (sliding-window pattern, local RoPE base,
// softcaps). Any family may store Q, K and V as one attn_qkv tensor (its row ranges become the three weights, no
// copy), as llama.cpp's loader allows. Each family is one short file under src/llm/families/; the decoder builder (decoder.h) turns the
// ModelConfig into the graph; the engine, KV cache, server and tools see only ModelConfig.
//
// Thread-safety: the family table is immutable; ModelConfig is a value.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hxrt/base/status.h"
#include "hxrt/formats/gguf.h"

namespace hxrt::llm {

enum class RopeStyle {
  kAdjacent,  // pairs (2i, 2i+1): Llama (RoPE mode "normal")
  kNeox,      // pairs (i, i + d/2): Qwen, Gemma, Phi-3 (RoPE mode "neox")
};

enum class FfnGate {
  kSilu,      // down(silu(gate) · up)
  kGeluTanh,  // down(gelu_tanh(gate) · up): Gemma
};

struct ModelConfig;

struct ModelFamily {
  std::string_view architecture;  // general.architecture
  std::string_view models;        // what ships in it, for `hxrt inspect` and errors
  RopeStyle rope = RopeStyle::kAdjacent;
  FfnGate gate = FfnGate::kSilu;
  bool qkv_bias = false;          // attn_{q,k,v}.bias required (other families use them when present)
  bool qk_norm = false;           // attn_q_norm / attn_k_norm [head_dim]: RMSNorm of each head before RoPE
  bool post_norms = false;        // post_attention_norm, post_ffw_norm on each block's output before the residual
  bool fused_gate_up = false;     // ffn_up [2·n_ff, n_embd] holds gate rows then up rows, no ffn_gate
  bool scale_embeddings = false;  // x = token_embd[t] · sqrt(n_embd)
  // Expert FFNs: kNone refuses {arch}.expert_count > 0; kOptional follows the file (Mixtral is llama with experts);
  // kRequired needs them (qwen3moe).
  enum class Experts : uint8_t { kNone, kOptional, kRequired } experts = Experts::kNone;
  // Reads the family's own keys after the common ones (layers already sized, every layer full attention at the
  // file's RoPE base); errors name the key.
  Status (*configure)(const formats::GgufFile& file, ModelConfig& config) = nullptr;

  std::string variants() const;  // "rope=neox gate=gelu_tanh qk_norm post_norms scale_embeddings"
};

// Every family hxrt builds, in a fixed order.
const std::vector<const ModelFamily*>& model_families();
// NotFound listing the supported families when `architecture` is none of them.
Result<const ModelFamily*> find_model_family(std::string_view architecture);

struct LayerConfig {
  float rope_theta = 10000.0f;
  int window = 0;  // > 0: sliding-window attention over the last `window` positions; 0: full attention
  float rope_freq_scale = 1.0f;  // the model's RopeScaling::freq_scale, or 1 where a family leaves a layer unscaled
};

// How the file stretches RoPE past its training context, as llama.cpp reads it (Note [RoPE scaling] in
// ops/params/normalization.cc): the RoPE op's attributes and which frequency-factor tensor it reads.
struct RopeScaling {
  std::string type = "none";  // {arch}.rope.scaling.type: none, linear or yarn
  float freq_scale = 1.0f;    // 1 / {arch}.rope.scaling.factor
  float ext_factor = 0.0f;    // YaRN: {arch}.rope.scaling.yarn_ext_factor, default 1 for yarn, else 0
  // The magnitude llama.cpp hands ggml (cparams.yarn_attn_factor); a layer's cos/sin scale is this times
  // 1 + 0.1·ln(1/freq_scale) under YaRN (what ggml's rope_yarn multiplies in).
  float attn_factor = 1.0f;
  float beta_fast = 32.0f, beta_slow = 1.0f;
  int n_ctx_orig = 0;  // {arch}.rope.scaling.original_context_length, else context_length
  // Frequency-factor tensors, empty when absent: Llama 3.1+'s rope_freqs, or Phi-3's short and long factors (the
  // long ones serve a context longer than n_ctx_orig, as llama.cpp chooses).
  std::string factors, factors_short, factors_long;
  // The factor tensor a graph serving sequences up to `context` tokens uses ("" for none).
  const std::string& factors_for(int context) const;
  // cos/sin magnitude of a layer whose freq_scale is `layer_freq_scale`.
  float magnitude(float layer_freq_scale) const;
};

struct ModelConfig {
  const ModelFamily* family = nullptr;
  std::string architecture;  // general.architecture
  std::string name;          // general.name
  int n_layers = 0;
  int n_embd = 0;
  int n_ff = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;          // {arch}.attention.key_length, else n_embd / n_heads
  int vocab_size = 0;
  int context_length = 0;
  int rope_dims = 0;
  float rope_theta = 10000.0f;  // the file's base; layers may differ (LayerConfig)
  RopeScaling rope_scaling;
  float rms_epsilon = 1e-5f;
  float attention_scale = 0.0f;    // 0: 1/sqrt(head_dim)
  float attention_softcap = 0.0f;  // > 0: scores become c·tanh(score/c)
  float final_softcap = 0.0f;      // > 0: logits become c·tanh(logit/c)
  bool tied_embeddings = false;    // no output.weight: the logits reuse token_embd
  bool fused_qkv = false;          // the file stores attn_qkv, not attn_q/k/v
  bool attention_bias = false;     // the file has attn_{q,k,v} (or attn_qkv) biases
  // Mixture of experts (n_experts > 0): every block's FFN is routed to n_experts_used of n_experts expert FFNs of
  // width n_ff_expert (ffn_gate_inp, ffn_{gate,up,down}_exps), their outputs summed with the router's softmax
  // weights, renormalised over the chosen experts when expert_weights_norm, times expert_weights_scale (0: none).
  int n_experts = 0;
  int n_experts_used = 0;
  int n_ff_expert = 0;
  bool expert_weights_norm = true;
  float expert_weights_scale = 0.0f;
  std::vector<LayerConfig> layers;

  // Finds the family of general.architecture, reads {arch}.* keys and checks every tensor the decoder needs
  // (presence, a dtype hxrt computes, shape). Errors name the key or tensor and what was expected.
  static Result<ModelConfig> from_gguf(const formats::GgufFile& file);
  int q_dim() const { return n_heads * head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }
  std::string to_string() const;
};

}  // namespace hxrt::llm
