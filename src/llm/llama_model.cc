#include "hxrt/llm/llama_model.h"

#include <cstring>
#include <vector>

#include <fmt/format.h>

namespace hxrt::llm {
namespace {

Result<int> int_key(const formats::GgufFile& file, const std::string& key, bool required, int fallback = 0) {
  Result<int64_t> value = file.get_i64(key);
  if (!value.ok()) {
    if (!required && value.status().code() == StatusCode::kNotFound) return fallback;
    return std::move(value).take_status().with_context("reading the model's hyperparameters");
  }
  if (*value <= 0 || *value > (int64_t{1} << 30)) return invalid_argument("GGUF key '{}' = {} is out of range", key, *value);
  return static_cast<int>(*value);
}

Result<float> float_key(const formats::GgufFile& file, const std::string& key, float fallback) {
  Result<float> value = file.get_f32(key);
  if (!value.ok()) {
    if (value.status().code() == StatusCode::kNotFound) return fallback;
    return value.status();
  }
  return *value;
}

// Checks that `name` exists with a computable dtype and the row-major shape `expected`.
Status check_tensor(const formats::GgufFile& file, const std::string& name, const Shape& expected) {
  HXRT_ASSIGN_OR_RETURN(const formats::GgufTensor* tensor, file.tensor(name));
  HXRT_RETURN_IF_ERROR(file.tensor_dtype(*tensor).status());
  if (tensor->shape() != expected) {
    return invalid_argument("tensor '{}' has shape {}, the model's hyperparameters need {}", name, tensor->shape(), expected);
  }
  return ok_status();
}

// Builds the graph node by node; errors carry the node name.
class Builder {
 public:
  Builder(graph::Graph& graph, const formats::GgufFile& file) : graph_(graph), file_(file) {}

  Result<std::string> weight(const std::string& name) {
    HXRT_ASSIGN_OR_RETURN(const formats::GgufTensor* tensor, file_.tensor(name));
    HXRT_ASSIGN_OR_RETURN(const DType dtype, file_.tensor_dtype(*tensor));
    HXRT_ASSIGN_OR_RETURN(graph::WeightData data, file_.weight(*tensor));
    const Shape shape = tensor->shape();
    std::vector<graph::Dim> dims;
    for (int64_t d : shape.dims()) dims.emplace_back(d);
    HXRT_RETURN_IF_ERROR(graph_.add_initializer(name, {dtype, graph::SymShape(std::move(dims))}, std::move(data)).status());
    return name;
  }

  // A constant i64 vector (Reshape targets).
  Result<std::string> constant(const std::string& name, const std::vector<int64_t>& values) {
    std::vector<std::byte> bytes(values.size() * sizeof(int64_t));
    std::memcpy(bytes.data(), values.data(), bytes.size());
    HXRT_RETURN_IF_ERROR(graph_.add_initializer(name, {DType::kI64, {static_cast<int64_t>(values.size())}},
                                                graph::WeightData::copy_of(bytes))
                             .status());
    return name;
  }

  Result<std::string> node(const std::string& name, const std::string& op, std::vector<std::string> inputs,
                           graph::AttributeMap attrs = {}, const std::string& domain = "", int version = 1) {
    const std::vector<std::string> outputs = {name};
    HXRT_RETURN_IF_ERROR(graph_.add_node(name, op, inputs, outputs, std::move(attrs), domain, version).status());
    return name;
  }
  Result<std::string> hxrt(const std::string& name, const std::string& op, std::vector<std::string> inputs,
                           graph::AttributeMap attrs = {}) {
    return node(name, op, std::move(inputs), std::move(attrs), "hxrt", 1);
  }

  // Y_o = A · W_oᵀ for each weight: one MatMulQGroup node `group_name` when `grouped` and the weights share a dtype,
  // else one MatMulQ per weight; the outputs are named `names` either way.
  Result<std::vector<std::string>> projections(const std::string& group_name, const std::vector<std::string>& names,
                                               const std::string& a, const std::vector<std::string>& weights,
                                               bool grouped) {
    bool one_dtype = true;
    for (const std::string& w : weights) {
      HXRT_ASSIGN_OR_RETURN(const graph::ValueId id, graph_.find_value(w));
      HXRT_ASSIGN_OR_RETURN(const graph::ValueId first, graph_.find_value(weights.front()));
      one_dtype = one_dtype && graph_.value(id).desc.dtype == graph_.value(first).desc.dtype;
    }
    if (grouped && one_dtype) {
      std::vector<std::string> inputs = {a};
      inputs.insert(inputs.end(), weights.begin(), weights.end());
      HXRT_RETURN_IF_ERROR(graph_.add_node(group_name, "MatMulQGroup", inputs, names, {}, "hxrt", 1).status());
      return names;
    }
    for (size_t o = 0; o < weights.size(); ++o) {
      HXRT_RETURN_IF_ERROR(hxrt(names[o], "MatMulQ", {a, weights[o]}).status());
    }
    return names;
  }

  // RMSNorm(x) · weight (the fusion pass turns the pair into RMSNormMul).
  Result<std::string> rms_norm(const std::string& name, const std::string& x, const std::string& weight_name, float eps) {
    graph::AttributeMap attrs;
    attrs.set("epsilon", graph::Attribute(static_cast<double>(eps)));
    HXRT_ASSIGN_OR_RETURN(std::string normed, hxrt(name + ".rms", "RMSNorm", {x}, std::move(attrs)));
    HXRT_ASSIGN_OR_RETURN(std::string w, weight(weight_name));
    return node(name, "Mul", {normed, w}, {}, "", 14);
  }

 private:
  graph::Graph& graph_;
  const formats::GgufFile& file_;
};

}  // namespace

Result<LlamaConfig> LlamaConfig::from_gguf(const formats::GgufFile& file) {
  LlamaConfig c;
  HXRT_ASSIGN_OR_RETURN(std::string_view arch, file.get_string("general.architecture"));
  c.architecture = std::string(arch);
  if (c.architecture != "llama") {
    return unimplemented("architecture '{}' is not supported (hxrt builds the 'llama' decoder family)", c.architecture);
  }
  if (Result<std::string_view> name = file.get_string("general.name"); name.ok()) c.name = std::string(*name);
  const std::string p = c.architecture + ".";
  HXRT_ASSIGN_OR_RETURN(c.n_layers, int_key(file, p + "block_count", true));
  HXRT_ASSIGN_OR_RETURN(c.n_embd, int_key(file, p + "embedding_length", true));
  HXRT_ASSIGN_OR_RETURN(c.n_ff, int_key(file, p + "feed_forward_length", true));
  HXRT_ASSIGN_OR_RETURN(c.n_heads, int_key(file, p + "attention.head_count", true));
  HXRT_ASSIGN_OR_RETURN(c.n_kv_heads, int_key(file, p + "attention.head_count_kv", false, c.n_heads));
  HXRT_ASSIGN_OR_RETURN(c.context_length, int_key(file, p + "context_length", false, 2048));
  if (c.n_embd % c.n_heads != 0) return invalid_argument("embedding_length {} is not a multiple of head_count {}", c.n_embd, c.n_heads);
  if (c.n_heads % c.n_kv_heads != 0) return invalid_argument("head_count {} is not a multiple of head_count_kv {}", c.n_heads, c.n_kv_heads);
  c.head_dim = c.n_embd / c.n_heads;
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

  const int64_t e = c.n_embd, kv = static_cast<int64_t>(c.n_kv_heads) * c.head_dim;
  HXRT_RETURN_IF_ERROR(check_tensor(file, "token_embd.weight", Shape{c.vocab_size, e}));
  HXRT_RETURN_IF_ERROR(check_tensor(file, "output_norm.weight", Shape{e}));
  if (!c.tied_embeddings) HXRT_RETURN_IF_ERROR(check_tensor(file, "output.weight", Shape{c.vocab_size, e}));
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string b = fmt::format("blk.{}.", l);
    HXRT_RETURN_IF_ERROR(check_tensor(file, b + "attn_norm.weight", Shape{e}));
    HXRT_RETURN_IF_ERROR(check_tensor(file, b + "attn_q.weight", Shape{e, e}));
    HXRT_RETURN_IF_ERROR(check_tensor(file, b + "attn_k.weight", Shape{kv, e}));
    HXRT_RETURN_IF_ERROR(check_tensor(file, b + "attn_v.weight", Shape{kv, e}));
    HXRT_RETURN_IF_ERROR(check_tensor(file, b + "attn_output.weight", Shape{e, e}));
    HXRT_RETURN_IF_ERROR(check_tensor(file, b + "ffn_norm.weight", Shape{e}));
    HXRT_RETURN_IF_ERROR(check_tensor(file, b + "ffn_gate.weight", Shape{c.n_ff, e}));
    HXRT_RETURN_IF_ERROR(check_tensor(file, b + "ffn_up.weight", Shape{c.n_ff, e}));
    HXRT_RETURN_IF_ERROR(check_tensor(file, b + "ffn_down.weight", Shape{e, c.n_ff}));
  }
  return c;
}

std::string LlamaConfig::to_string() const {
  return fmt::format("{} '{}': {} layers, dim {}, ffn {}, {} heads / {} kv heads × {}, vocab {}, ctx {}, rope θ={} dims={}, "
                     "rms ε={}{}",
                     architecture, name, n_layers, n_embd, n_ff, n_heads, n_kv_heads, head_dim, vocab_size,
                     context_length, rope_theta, rope_dims, rms_epsilon, tied_embeddings ? ", tied embeddings" : "");
}

Result<graph::Graph> build_llama_graph(const formats::GgufFile& file, const LlamaConfig& c,
                                       const DecoderGraphOptions& options) {
  if (options.kv_dtype != DType::kF16 && options.kv_dtype != DType::kF32) {
    return invalid_argument("the KV cache holds f16 or f32, not {}", options.kv_dtype);
  }
  if (options.block_size <= 0) return invalid_argument("block_size {} must be positive", options.block_size);
  graph::Graph g(c.name.empty() ? c.architecture : c.name);
  const graph::Dim n_tokens = graph::Dim::symbol("n_tokens");
  const graph::SymShape cache_shape{static_cast<int64_t>(c.n_layers), graph::Dim::symbol("n_blocks"),
                                    static_cast<int64_t>(options.block_size), static_cast<int64_t>(c.n_kv_heads),
                                    static_cast<int64_t>(c.head_dim)};
  HXRT_RETURN_IF_ERROR(g.add_input(decoder::kTokens, {DType::kI32, {n_tokens}}).status());
  HXRT_RETURN_IF_ERROR(g.add_input(decoder::kPositions, {DType::kI32, {n_tokens}}).status());
  HXRT_RETURN_IF_ERROR(g.add_input(decoder::kTokenSeq, {DType::kI32, {n_tokens}}).status());
  HXRT_RETURN_IF_ERROR(
      g.add_input(decoder::kBlockTables, {DType::kI32, {graph::Dim::symbol("n_seqs"), graph::Dim::symbol("max_blocks")}})
          .status());
  HXRT_RETURN_IF_ERROR(g.add_input(decoder::kLogitRows, {DType::kI32, {graph::Dim::symbol("n_outputs")}}).status());
  HXRT_RETURN_IF_ERROR(g.add_input(decoder::kKCache, {options.kv_dtype, cache_shape}).status());
  HXRT_RETURN_IF_ERROR(g.add_input(decoder::kVCache, {options.kv_dtype, cache_shape}).status());

  Builder b(g, file);
  auto wrap = [](Status s, int layer) { return std::move(s).with_context(fmt::format("building layer {}", layer)); };
  HXRT_ASSIGN_OR_RETURN(std::string embd, b.weight("token_embd.weight"));
  HXRT_ASSIGN_OR_RETURN(std::string x, b.hxrt("embed", "GatherRows", {embd, decoder::kTokens}));
  HXRT_ASSIGN_OR_RETURN(std::string q_shape, b.constant("shape.q", {-1, c.n_heads, c.head_dim}));
  HXRT_ASSIGN_OR_RETURN(std::string kv_shape, b.constant("shape.kv", {-1, c.n_kv_heads, c.head_dim}));
  HXRT_ASSIGN_OR_RETURN(std::string flat_shape, b.constant("shape.flat", {-1, c.n_embd}));
  graph::AttributeMap rope;
  rope.set("theta", graph::Attribute(static_cast<double>(c.rope_theta)));
  rope.set("rotary_dims", graph::Attribute(static_cast<int64_t>(c.rope_dims)));
  rope.set("mode", graph::Attribute("normal"));
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string w = fmt::format("blk.{}.", l);
    const std::string n = fmt::format("l{}.", l);
    Result<std::string> layer_out = [&]() -> Result<std::string> {
      HXRT_ASSIGN_OR_RETURN(std::string h, b.rms_norm(n + "attn_norm", x, w + "attn_norm.weight", c.rms_epsilon));
      HXRT_ASSIGN_OR_RETURN(std::string wq, b.weight(w + "attn_q.weight"));
      HXRT_ASSIGN_OR_RETURN(std::string wk, b.weight(w + "attn_k.weight"));
      HXRT_ASSIGN_OR_RETURN(std::string wv, b.weight(w + "attn_v.weight"));
      HXRT_ASSIGN_OR_RETURN(const std::vector<std::string> qkv, b.projections(n + "qkv", {n + "q", n + "k", n + "v"}, h,
                                                                              {wq, wk, wv}, options.group_projections));
      const std::string& q = qkv[0];
      const std::string& k = qkv[1];
      const std::string& v = qkv[2];
      HXRT_ASSIGN_OR_RETURN(std::string q3, b.node(n + "q.heads", "Reshape", {q, q_shape}, {}, "", 14));
      HXRT_ASSIGN_OR_RETURN(std::string k3, b.node(n + "k.heads", "Reshape", {k, kv_shape}, {}, "", 14));
      HXRT_ASSIGN_OR_RETURN(std::string v3, b.node(n + "v.heads", "Reshape", {v, kv_shape}, {}, "", 14));
      HXRT_ASSIGN_OR_RETURN(std::string qr, b.hxrt(n + "q.rope", "RoPE", {q3, decoder::kPositions}, rope));
      HXRT_ASSIGN_OR_RETURN(std::string kr, b.hxrt(n + "k.rope", "RoPE", {k3, decoder::kPositions}, rope));
      graph::AttributeMap attention;
      attention.set("layer", graph::Attribute(static_cast<int64_t>(l)));
      HXRT_ASSIGN_OR_RETURN(std::string a,
                            b.hxrt(n + "attention", "PagedAttention",
                                   {qr, kr, v3, decoder::kKCache, decoder::kVCache, decoder::kBlockTables,
                                    decoder::kTokenSeq, decoder::kPositions},
                                   std::move(attention)));
      HXRT_ASSIGN_OR_RETURN(std::string a2, b.node(n + "attention.flat", "Reshape", {a, flat_shape}, {}, "", 14));
      HXRT_ASSIGN_OR_RETURN(std::string wo, b.weight(w + "attn_output.weight"));
      HXRT_ASSIGN_OR_RETURN(std::string o, b.hxrt(n + "o", "MatMulQ", {a2, wo}));
      HXRT_ASSIGN_OR_RETURN(std::string x1, b.node(n + "attn.residual", "Add", {x, o}, {}, "", 14));
      HXRT_ASSIGN_OR_RETURN(std::string h2, b.rms_norm(n + "ffn_norm", x1, w + "ffn_norm.weight", c.rms_epsilon));
      HXRT_ASSIGN_OR_RETURN(std::string wg, b.weight(w + "ffn_gate.weight"));
      HXRT_ASSIGN_OR_RETURN(std::string wu, b.weight(w + "ffn_up.weight"));
      HXRT_ASSIGN_OR_RETURN(std::string wd, b.weight(w + "ffn_down.weight"));
      HXRT_ASSIGN_OR_RETURN(
          const std::vector<std::string> gate_up,
          b.projections(n + "gate_up", {n + "gate", n + "up"}, h2, {wg, wu}, options.group_projections));
      const std::string& gate = gate_up[0];
      const std::string& up = gate_up[1];
      HXRT_ASSIGN_OR_RETURN(std::string act, b.hxrt(n + "gate.silu", "Silu", {gate}));
      HXRT_ASSIGN_OR_RETURN(std::string gated, b.node(n + "swiglu", "Mul", {act, up}, {}, "", 14));
      HXRT_ASSIGN_OR_RETURN(std::string down, b.hxrt(n + "down", "MatMulQ", {gated, wd}));
      return b.node(n + "ffn.residual", "Add", {x1, down}, {}, "", 14);
    }();
    if (!layer_out.ok()) return wrap(std::move(layer_out).take_status(), l);
    x = *layer_out;
  }
  HXRT_ASSIGN_OR_RETURN(std::string rows, b.node("output.rows", "Gather", {x, decoder::kLogitRows}, {}, "", 13));
  HXRT_ASSIGN_OR_RETURN(std::string normed, b.rms_norm("output_norm", rows, "output_norm.weight", c.rms_epsilon));
  std::string head = embd;
  if (!c.tied_embeddings) {
    HXRT_ASSIGN_OR_RETURN(head, b.weight("output.weight"));
  }
  HXRT_RETURN_IF_ERROR(b.hxrt(decoder::kLogits, "MatMulQ", {normed, head}).status());
  HXRT_RETURN_IF_ERROR(g.mark_output(decoder::kLogits));
  return g;
}

}  // namespace hxrt::llm
