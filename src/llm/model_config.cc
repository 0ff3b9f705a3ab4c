// ModelConfig::from_gguf: the keys every family shares, then the family's own (ModelFamily::configure), then the
// tensors the decoder will read, each checked for presence, a computable dtype and its shape.
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "hxrt/llm/model_family.h"
#include "llm/families/families.h"

namespace hxrt::llm {
namespace {

// Checks that `name` exists with a computable dtype and the row-major shape `expected`.
Status check_tensor(const formats::GgufFile& file, const std::string& name, const Shape& expected) {
  HXRT_ASSIGN_OR_RETURN(const formats::GgufTensor* tensor, file.tensor(name));
  HXRT_RETURN_IF_ERROR(file.tensor_dtype(*tensor).status());
  if (tensor->shape() != expected) {
    return invalid_argument("tensor '{}' has shape {}, the model's hyperparameters need {}", name, tensor->shape(), expected);
  }
  return ok_status();
}

// As check_tensor when `name` is in the file or `required`; false when it is absent and optional.
Result<bool> check_optional(const formats::GgufFile& file, const std::string& name, const Shape& expected, bool required) {
  if (!required && file.find_tensor(name) == nullptr) return false;
  HXRT_RETURN_IF_ERROR(check_tensor(file, name, expected));
  return true;
}

Status check_tensors(const formats::GgufFile& file, ModelConfig& c) {
  const ModelFamily& f = *c.family;
  const int64_t e = c.n_embd, q = c.q_dim(), kv = c.kv_dim(), d = c.head_dim, ff = c.n_ff;
  HXRT_RETURN_IF_ERROR(check_tensor(file, "token_embd.weight", Shape{c.vocab_size, e}));
  HXRT_RETURN_IF_ERROR(check_tensor(file, "output_norm.weight", Shape{e}));
  if (!c.tied_embeddings) HXRT_RETURN_IF_ERROR(check_tensor(file, "output.weight", Shape{c.vocab_size, e}));
  c.fused_qkv = file.find_tensor("blk.0.attn_qkv.weight") != nullptr;
  c.attention_bias = file.find_tensor(c.fused_qkv ? "blk.0.attn_qkv.bias" : "blk.0.attn_q.bias") != nullptr;
  if (f.qkv_bias && !c.attention_bias) return invalid_argument("{} needs tensor 'blk.0.attn_q.bias'", f.architecture);
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string b = fmt::format("blk.{}.", l);
    HXRT_RETURN_IF_ERROR(check_tensor(file, b + "attn_norm.weight", Shape{e}));
    if (c.fused_qkv) {
      HXRT_RETURN_IF_ERROR(check_tensor(file, b + "attn_qkv.weight", Shape{q + 2 * kv, e}));
      HXRT_RETURN_IF_ERROR(check_optional(file, b + "attn_qkv.bias", Shape{q + 2 * kv}, c.attention_bias).status());
    } else {
      const std::pair<const char*, int64_t> parts[] = {{"attn_q", q}, {"attn_k", kv}, {"attn_v", kv}};
      for (const auto& [part, rows] : parts) {
        HXRT_RETURN_IF_ERROR(check_tensor(file, b + part + ".weight", Shape{rows, e}));
        HXRT_RETURN_IF_ERROR(check_optional(file, b + part + ".bias", Shape{rows}, c.attention_bias).status());
      }
    }
    if (f.qk_norm) {
      HXRT_RETURN_IF_ERROR(check_tensor(file, b + "attn_q_norm.weight", Shape{d}));
      HXRT_RETURN_IF_ERROR(check_tensor(file, b + "attn_k_norm.weight", Shape{d}));
    }
    HXRT_RETURN_IF_ERROR(check_tensor(file, b + "attn_output.weight", Shape{e, q}));
    HXRT_RETURN_IF_ERROR(check_tensor(file, b + "ffn_norm.weight", Shape{e}));
    if (f.post_norms) {
      HXRT_RETURN_IF_ERROR(check_tensor(file, b + "post_attention_norm.weight", Shape{e}));
      HXRT_RETURN_IF_ERROR(check_tensor(file, b + "post_ffw_norm.weight", Shape{e}));
    }
    if (c.n_experts > 0) {
      const int64_t n_exp = c.n_experts, fe = c.n_ff_expert;
      HXRT_RETURN_IF_ERROR(check_tensor(file, b + "ffn_gate_inp.weight", Shape{n_exp, e}));
      HXRT_RETURN_IF_ERROR(check_tensor(file, b + "ffn_gate_exps.weight", Shape{n_exp, fe, e}));
      HXRT_RETURN_IF_ERROR(check_tensor(file, b + "ffn_up_exps.weight", Shape{n_exp, fe, e}));
      HXRT_RETURN_IF_ERROR(check_tensor(file, b + "ffn_down_exps.weight", Shape{n_exp, e, fe}));
      continue;
    }
    if (f.fused_gate_up) {
      HXRT_RETURN_IF_ERROR(check_tensor(file, b + "ffn_up.weight", Shape{2 * ff, e}));
    } else {
      HXRT_RETURN_IF_ERROR(check_tensor(file, b + "ffn_gate.weight", Shape{ff, e}));
      HXRT_RETURN_IF_ERROR(check_tensor(file, b + "ffn_up.weight", Shape{ff, e}));
    }
    HXRT_RETURN_IF_ERROR(check_tensor(file, b + "ffn_down.weight", Shape{e, ff}));
  }
  // RoPE frequency factors: one f32 per rotated pair (the RoPE op reads them as they are).
  RopeScaling& r = c.rope_scaling;
  const std::pair<const char*, std::string*> factor_tensors[] = {{"rope_freqs.weight", &r.factors},
                                                                 {"rope_factors_short.weight", &r.factors_short},
                                                                 {"rope_factors_long.weight", &r.factors_long}};
  for (const auto& [name, slot] : factor_tensors) {
    HXRT_ASSIGN_OR_RETURN(const bool present, check_optional(file, name, Shape{c.rope_dims / 2}, false));
    if (!present) continue;
    HXRT_ASSIGN_OR_RETURN(const DType dtype, file.tensor_dtype(*file.find_tensor(name)));
    if (dtype != DType::kF32) return invalid_argument("tensor '{}' is {}; RoPE frequency factors must be f32", name, dtype);
    *slot = name;
  }
  if (r.factors_short.empty() != r.factors_long.empty()) {
    return invalid_argument("the file has only one of 'rope_factors_short.weight' and 'rope_factors_long.weight'");
  }
  return ok_status();
}

// {arch}.expert_count and the keys that go with it, as llama.cpp reads them; the family says whether it has experts.
Status read_experts(const formats::GgufFile& file, ModelConfig& c) {
  using families::int_key;
  const std::string p = c.architecture + ".";
  HXRT_ASSIGN_OR_RETURN(c.n_experts, int_key(file, p + "expert_count", false, 0));
  const ModelFamily::Experts allowed = c.family->experts;
  if (c.n_experts == 0) {
    if (allowed == ModelFamily::Experts::kRequired) {
      return invalid_argument("{} is a mixture-of-experts family: GGUF key '{}expert_count' is missing", c.architecture, p);
    }
    return ok_status();
  }
  if (allowed == ModelFamily::Experts::kNone) {
    return unimplemented("GGUF key '{}expert_count' = {}: hxrt's {} family has no expert FFNs (llama and qwen3moe do)",
                         p, c.n_experts, c.architecture);
  }
  HXRT_ASSIGN_OR_RETURN(c.n_experts_used, int_key(file, p + "expert_used_count", true));
  if (c.n_experts_used > c.n_experts) {
    return invalid_argument("GGUF key '{}expert_used_count' = {} exceeds expert_count {}", p, c.n_experts_used, c.n_experts);
  }
  HXRT_ASSIGN_OR_RETURN(const int dense, int_key(file, p + "feed_forward_length", false, 0));
  HXRT_ASSIGN_OR_RETURN(c.n_ff_expert, int_key(file, p + "expert_feed_forward_length", dense == 0, dense));
  HXRT_ASSIGN_OR_RETURN(c.expert_weights_scale, families::float_key(file, p + "expert_weights_scale", 0.0f));
  if (file.find(p + "expert_shared_count") != nullptr || file.find_tensor("blk.0.ffn_gate_inp_shexp.weight") != nullptr) {
    return unimplemented("shared experts ({}expert_shared_count) are not supported", p);
  }
  if (file.find(p + "expert_gating_func") != nullptr) {
    HXRT_ASSIGN_OR_RETURN(const int gating, int_key(file, p + "expert_gating_func", false, 1));
    if (gating != 1) return unimplemented("GGUF key '{}expert_gating_func' = {}: hxrt routes by softmax (1) only", p, gating);
  }
  return ok_status();
}

// {arch}.rope.scaling.* as llama.cpp's loader and context read them (llama-model.cpp load_hparams, llama-context.cpp):
// an absent type is linear, an absent or zero factor is 1; YaRN mixes extrapolated angles in (ext_factor 1 unless
// the file says) and scales cos/sin by 0.1·ln(factor) + 1, which llama.cpp hands ggml divided by what ggml's
// rope_yarn multiplies back in.
Status read_rope_scaling(const formats::GgufFile& file, ModelConfig& c) {
  using families::float_key;
  const std::string p = c.architecture + ".rope.scaling.";
  RopeScaling& r = c.rope_scaling;
  std::string type = "linear";
  if (Result<std::string_view> t = file.get_string(p + "type"); t.ok()) {
    type = std::string(*t);
  } else if (t.status().code() != StatusCode::kNotFound) {
    return t.status();
  }
  if (type != "none" && type != "linear" && type != "yarn") {
    return unimplemented("GGUF key '{}type' = '{}': hxrt computes RoPE scaling none, linear and yarn", p, type);
  }
  HXRT_ASSIGN_OR_RETURN(float factor, float_key(file, p + "factor", 0.0f));
  if (factor == 0.0f) {
    HXRT_ASSIGN_OR_RETURN(factor, float_key(file, c.architecture + ".rope.scale_linear", 0.0f));
  }
  r.freq_scale = factor == 0.0f || type == "none" ? 1.0f : 1.0f / factor;
  r.type = r.freq_scale == 1.0f && type != "yarn" ? "none" : type;
  HXRT_ASSIGN_OR_RETURN(r.n_ctx_orig, families::int_key(file, p + "original_context_length", false, c.context_length));
  HXRT_ASSIGN_OR_RETURN(const float rope_attn_factor, float_key(file, p + "attn_factor", 1.0f));
  HXRT_ASSIGN_OR_RETURN(r.attn_factor, float_key(file, p + "yarn_attn_factor", 1.0f));
  HXRT_ASSIGN_OR_RETURN(r.beta_fast, float_key(file, p + "yarn_beta_fast", 32.0f));
  HXRT_ASSIGN_OR_RETURN(r.beta_slow, float_key(file, p + "yarn_beta_slow", 1.0f));
  HXRT_ASSIGN_OR_RETURN(r.ext_factor, float_key(file, p + "yarn_ext_factor", type == "yarn" ? 1.0f : 0.0f));
  if (r.ext_factor > 1.0f) return invalid_argument("GGUF key '{}yarn_ext_factor' = {} must be in [0, 1]", p, r.ext_factor);
  if (r.ext_factor != 0.0f) {
    if (file.find(p + "yarn_log_multiplier") != nullptr) {
      return unimplemented("GGUF key '{}yarn_log_multiplier' (DeepSeek's YaRN magnitude) is not supported", p);
    }
    const float scale = 1.0f / r.freq_scale;
    const float mscale = scale <= 1.0f ? 1.0f : 0.1f * std::log(scale) + 1.0f;
    r.attn_factor = mscale / (1.0f + 0.1f * std::log(scale));
  }
  r.attn_factor *= rope_attn_factor;
  return ok_status();
}

}  // namespace

Result<int> families::int_key(const formats::GgufFile& file, const std::string& key, bool required, int fallback) {
  Result<int64_t> value = file.get_i64(key);
  if (!value.ok()) {
    if (!required && value.status().code() == StatusCode::kNotFound) return fallback;
    return std::move(value).take_status().with_context("reading the model's hyperparameters");
  }
  if (*value <= 0 || *value > (int64_t{1} << 30)) return invalid_argument("GGUF key '{}' = {} is out of range", key, *value);
  return static_cast<int>(*value);
}

Result<float> families::float_key(const formats::GgufFile& file, const std::string& key, float fallback) {
  Result<float> value = file.get_f32(key);
  if (!value.ok()) {
    if (value.status().code() == StatusCode::kNotFound) return fallback;
    return value.status();
  }
  if (!std::isfinite(*value) || *value < 0.0f) return invalid_argument("GGUF key '{}' = {} must be finite and >= 0", key, *value);
  return *value;
}

Status families::set_sliding_pattern(const formats::GgufFile& file, ModelConfig& c, int window, int pattern,
                                     float local_rope_theta, float local_freq_scale) {
  HXRT_ASSIGN_OR_RETURN(pattern, int_key(file, c.architecture + ".attention.sliding_window_pattern", false, pattern));
  for (int l = 0; l < c.n_layers; ++l) {
    if (l % pattern < pattern - 1) c.layers[static_cast<size_t>(l)] = LayerConfig{local_rope_theta, window, local_freq_scale};
  }
  return ok_status();
}

const std::string& RopeScaling::factors_for(int context) const {
  if (!factors.empty() || factors_long.empty()) return factors;
  return context > n_ctx_orig ? factors_long : factors_short;
}

float RopeScaling::magnitude(float layer_freq_scale) const {
  if (ext_factor == 0.0f) return attn_factor;
  return attn_factor * (1.0f + 0.1f * std::log(1.0f / layer_freq_scale));
}

void families::gemma_query_scale(ModelConfig& c, int layers_27b) {
  if (c.n_layers == layers_27b) c.attention_scale = 1.0f / std::sqrt(static_cast<float>(c.n_embd / c.n_heads));
}

std::string ModelFamily::variants() const {
  std::string out = fmt::format("rope={} gate={}", rope == RopeStyle::kNeox ? "neox" : "adjacent",
                                gate == FfnGate::kSilu ? "silu" : "gelu_tanh");
  if (qkv_bias) out += " qkv_bias";
  if (qk_norm) out += " qk_norm";
  if (post_norms) out += " post_norms";
  if (fused_gate_up) out += " fused_gate_up";
  if (experts != Experts::kNone) out += experts == Experts::kRequired ? " experts" : " experts_optional";
  if (scale_embeddings) out += " scale_embeddings";
  return out;
}

Result<const ModelFamily*> find_model_family(std::string_view architecture) {
  std::string known;
  for (const ModelFamily* family : model_families()) {
    if (family->architecture == architecture) return family;
    known += fmt::format("{}{} ({})", known.empty() ? "" : ", ", family->architecture, family->models);
  }
  return unimplemented("architecture '{}' is not supported; hxrt builds these decoder families: {}", architecture, known);
}

Result<ModelConfig> ModelConfig::from_gguf(const formats::GgufFile& file) {
  using families::float_key;
  using families::int_key;
  ModelConfig c;
  HXRT_ASSIGN_OR_RETURN(std::string_view arch, file.get_string("general.architecture"));
  c.architecture = std::string(arch);
  HXRT_ASSIGN_OR_RETURN(c.family, find_model_family(arch));
  if (Result<std::string_view> name = file.get_string("general.name"); name.ok()) c.name = std::string(*name);
  const std::string p = c.architecture + ".";
  HXRT_ASSIGN_OR_RETURN(c.n_layers, int_key(file, p + "block_count", true));
  // Each block has at least its norms and projections as tensors: a count beyond the file's tensors is a lie
  // (checked before anything is sized by it).
  if (static_cast<size_t>(c.n_layers) > file.tensors().size()) {
    return invalid_argument("GGUF key '{}block_count' = {} exceeds what the file's {} tensors can hold", p, c.n_layers,
                            file.tensors().size());
  }
  HXRT_ASSIGN_OR_RETURN(c.n_embd, int_key(file, p + "embedding_length", true));
  HXRT_RETURN_IF_ERROR(read_experts(file, c));
  // A mixture-of-experts file may leave out the dense width (its FFNs are the experts').
  HXRT_ASSIGN_OR_RETURN(c.n_ff, int_key(file, p + "feed_forward_length", c.n_experts == 0, c.n_ff_expert));
  HXRT_ASSIGN_OR_RETURN(c.n_heads, int_key(file, p + "attention.head_count", true));
  HXRT_ASSIGN_OR_RETURN(c.n_kv_heads, int_key(file, p + "attention.head_count_kv", false, c.n_heads));
  HXRT_ASSIGN_OR_RETURN(c.context_length, int_key(file, p + "context_length", false, 2048));
  if (c.n_heads % c.n_kv_heads != 0) return invalid_argument("head_count {} is not a multiple of head_count_kv {}", c.n_heads, c.n_kv_heads);
  if (file.find(p + "attention.key_length") == nullptr && c.n_embd % c.n_heads != 0) {
    return invalid_argument("embedding_length {} is not a multiple of head_count {} and {}attention.key_length is absent",
                            c.n_embd, c.n_heads, p);
  }
  HXRT_ASSIGN_OR_RETURN(c.head_dim, int_key(file, p + "attention.key_length", false, c.n_embd / c.n_heads));
  // q_dim() = head_count · key_length is an int: a file may not make it overflow (a fuzz finding).
  constexpr int64_t kMaxQueryDim = int64_t{1} << 24;
  if (static_cast<int64_t>(c.n_heads) * c.head_dim > kMaxQueryDim) {
    return invalid_argument("{}attention.head_count {} × key_length {} exceeds {}", p, c.n_heads, c.head_dim,
                            kMaxQueryDim);
  }
  HXRT_ASSIGN_OR_RETURN(const int value_length, int_key(file, p + "attention.value_length", false, c.head_dim));
  if (value_length != c.head_dim) {
    return unimplemented("{}attention.value_length {} differs from key_length {} (hxrt's KV cache holds one head_dim)",
                         p, value_length, c.head_dim);
  }
  HXRT_ASSIGN_OR_RETURN(c.rope_dims, int_key(file, p + "rope.dimension_count", false, c.head_dim));
  if (c.rope_dims > c.head_dim || c.rope_dims % 2 != 0) {
    return invalid_argument("rope.dimension_count {} must be even and at most head_dim {}", c.rope_dims, c.head_dim);
  }
  HXRT_ASSIGN_OR_RETURN(c.rope_theta, float_key(file, p + "rope.freq_base", 10000.0f));
  HXRT_ASSIGN_OR_RETURN(c.rms_epsilon, float_key(file, p + "attention.layer_norm_rms_epsilon", 1e-5f));
  HXRT_ASSIGN_OR_RETURN(const formats::GgufTensor* embd, file.tensor("token_embd.weight"));
  if (embd->dims.size() != 2) return invalid_argument("tensor 'token_embd.weight' must have 2 dims");
  c.vocab_size = static_cast<int>(embd->shape().dim(0));
  if (Result<int> vocab = int_key(file, p + "vocab_size", false, c.vocab_size); vocab.ok() && *vocab != c.vocab_size) {
    return invalid_argument("{}vocab_size {} disagrees with token_embd.weight's {} rows", p, *vocab, c.vocab_size);
  }
  c.tied_embeddings = file.find_tensor("output.weight") == nullptr;
  HXRT_RETURN_IF_ERROR(read_rope_scaling(file, c));
  c.layers.assign(static_cast<size_t>(c.n_layers), LayerConfig{c.rope_theta, 0, c.rope_scaling.freq_scale});
  if (c.family->configure != nullptr) {
    HXRT_RETURN_IF_ERROR_CTX(c.family->configure(file, c), "reading the {} family's keys", c.architecture);
  }
  HXRT_RETURN_IF_ERROR(check_tensors(file, c));
  return c;
}

std::string ModelConfig::to_string() const {
  int sliding = 0;
  for (const LayerConfig& layer : layers) sliding += layer.window > 0 ? 1 : 0;
  std::string out = fmt::format(
      "{} '{}': {} layers, dim {}, ffn {}, {} heads / {} kv heads × {}, vocab {}, ctx {}, rope θ={} dims={}, rms ε={}",
      architecture, name, n_layers, n_embd, n_ff, n_heads, n_kv_heads, head_dim, vocab_size, context_length,
      rope_theta, rope_dims, rms_epsilon);
  if (sliding > 0) {
    const LayerConfig* local = nullptr;
    for (const LayerConfig& layer : layers) local = layer.window > 0 ? &layer : local;
    out += fmt::format(", {} sliding-window layers (window {}, rope θ={})", sliding, local->window, local->rope_theta);
  }
  const RopeScaling& r = rope_scaling;
  if (r.type != "none") out += fmt::format(", rope scaling {} ×{} (original ctx {})", r.type, 1.0f / r.freq_scale, r.n_ctx_orig);
  if (r.ext_factor != 0.0f) out += fmt::format(" ext {} β {}/{}", r.ext_factor, r.beta_fast, r.beta_slow);
  if (r.attn_factor != 1.0f) out += fmt::format(", rope attn factor {}", r.attn_factor);
  if (!r.factors.empty()) out += ", rope frequency factors";
  if (!r.factors_long.empty()) out += ", rope short/long factors";
  if (n_experts > 0) {
    out += fmt::format(", {} of {} experts × ffn {}{}", n_experts_used, n_experts, n_ff_expert,
                       expert_weights_norm ? " (weights renormalised)" : "");
  }
  if (attention_scale > 0) out += fmt::format(", attention scale {}", attention_scale);
  if (attention_softcap > 0) out += fmt::format(", attention softcap {}", attention_softcap);
  if (final_softcap > 0) out += fmt::format(", final softcap {}", final_softcap);
  if (fused_qkv) out += ", fused qkv";
  if (attention_bias) out += ", attention bias";
  if (tied_embeddings) out += ", tied embeddings";
  return out;
}

}  // namespace hxrt::llm
