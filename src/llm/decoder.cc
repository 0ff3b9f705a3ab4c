#include "hxrt/llm/decoder.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <vector>

#include <fmt/format.h>

namespace hxrt::llm {
namespace {

// Asks the kernel to reclaim the whole pages of [data, data + size) (advice only).
void release_pages(const std::byte* data, uint64_t size) {
#ifdef MADV_PAGEOUT
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + size) / page * page;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_PAGEOUT);
#else
  (void)data;
  (void)size;
#endif
}

// Builds the graph node by node; errors carry the node name.
class Builder {
 public:
  Builder(graph::Graph& graph, const formats::GgufFile& file) : graph_(graph), file_(file) {}

  // The file's tensor `name` as an initializer (added once; later uses share it).
  Result<std::string> weight(const std::string& name) {
    if (graph_.find_value(name).ok()) return name;
    HXRT_ASSIGN_OR_RETURN(const formats::GgufTensor* tensor, file_.tensor(name));
    HXRT_ASSIGN_OR_RETURN(const DType dtype, file_.tensor_dtype(*tensor));
    HXRT_ASSIGN_OR_RETURN(graph::WeightData data, file_.weight(*tensor));
    const Shape shape = tensor->shape();
    std::vector<graph::Dim> dims;
    for (int64_t d : shape.dims()) dims.emplace_back(d);
    HXRT_RETURN_IF_ERROR(graph_.add_initializer(name, {dtype, graph::SymShape(std::move(dims))}, std::move(data)).status());
    return name;
  }

  // Row ranges [0, rows[0]), [rows[0], rows[0] + rows[1]) ... of the row-major tensor `name` as initializers of
  // their own (`name`[part]): views of the file's bytes, since a row of any GGUF type is whole blocks. A 1-D tensor
  // (a fused bias) splits by elements.
  Result<std::vector<std::string>> row_slices(const std::string& name, const std::vector<int64_t>& rows,
                                              const std::vector<std::string>& parts) {
    HXRT_ASSIGN_OR_RETURN(const formats::GgufTensor* tensor, file_.tensor(name));
    HXRT_ASSIGN_OR_RETURN(const graph::WeightData data, file_.weight(*tensor));
    const Shape shape = tensor->shape();
    int64_t total = 0;
    for (int64_t r : rows) total += r;
    if (shape.rank() < 1 || shape.rank() > 2 || shape.dim(0) != total || data.size % static_cast<uint64_t>(total) != 0) {
      return invalid_argument("tensor '{}' of shape {} cannot be split into row ranges of {} rows", name, shape, total);
    }
    std::vector<std::string> out;
    int64_t begin = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      HXRT_ASSIGN_OR_RETURN(out.emplace_back(), row_range(name, begin, rows[i], parts[i]));
      begin += rows[i];
    }
    return out;
  }

  // Rows [begin, begin + count) of tensor `name` (a 1-D tensor: elements) as an initializer `name`[`label`]: a view
  // of the file's bytes.
  Result<std::string> row_range(const std::string& name, int64_t begin, int64_t count, const std::string& label) {
    const std::string id = fmt::format("{}[{}]", name, label);
    if (graph_.find_value(id).ok()) return id;
    HXRT_ASSIGN_OR_RETURN(const formats::GgufTensor* tensor, file_.tensor(name));
    HXRT_ASSIGN_OR_RETURN(const DType dtype, file_.tensor_dtype(*tensor));
    HXRT_ASSIGN_OR_RETURN(const graph::WeightData data, file_.weight(*tensor));
    const Shape shape = tensor->shape();
    if (shape.rank() < 1 || shape.rank() > 2 || begin < 0 || count <= 0 || begin + count > shape.dim(0) ||
        data.size % static_cast<uint64_t>(shape.dim(0)) != 0) {
      return invalid_argument("tensor '{}' of shape {} has no rows [{}, {})", name, shape, begin, begin + count);
    }
    const uint64_t row_bytes = data.size / static_cast<uint64_t>(shape.dim(0));
    std::vector<graph::Dim> dims = {graph::Dim(count)};
    if (shape.rank() == 2) dims.emplace_back(shape.dim(1));
    graph::WeightData part{data.data + static_cast<uint64_t>(begin) * row_bytes,
                           static_cast<uint64_t>(count) * row_bytes, data.keepalive};
    HXRT_RETURN_IF_ERROR(graph_.add_initializer(id, {dtype, graph::SymShape(std::move(dims))}, std::move(part)).status());
    return id;
  }

  // Columns [begin, begin + count) of the 2-D tensor `name`, copied row by row into an initializer
  // `name`[`label`]; both must be whole blocks of the tensor's type.
  Result<std::string> column_range(const std::string& name, int64_t begin, int64_t count, const std::string& label) {
    const std::string id = fmt::format("{}[{}]", name, label);
    if (graph_.find_value(id).ok()) return id;
    HXRT_ASSIGN_OR_RETURN(const formats::GgufTensor* tensor, file_.tensor(name));
    HXRT_ASSIGN_OR_RETURN(const DType dtype, file_.tensor_dtype(*tensor));
    HXRT_ASSIGN_OR_RETURN(const graph::WeightData data, file_.weight(*tensor));
    const Shape shape = tensor->shape();
    const DTypeInfo& info = dtype_info(dtype);
    const int64_t block = info.block_elements;
    if (shape.rank() != 2 || begin < 0 || count <= 0 || begin + count > shape.dim(1)) {
      return invalid_argument("tensor '{}' of shape {} has no columns [{}, {})", name, shape, begin, begin + count);
    }
    if (begin % block != 0 || count % block != 0) {
      return invalid_argument(
          "tensor '{}' ({}) splits into column ranges of whole {}-value blocks only; columns [{}, {}) are not "
          "(tensor parallelism needs each rank's share of the heads and the FFN width to be whole blocks)",
          name, dtype_name(dtype), block, begin, begin + count);
    }
    const uint64_t rows = static_cast<uint64_t>(shape.dim(0));
    const uint64_t row_bytes = data.size / rows;
    const uint64_t offset = static_cast<uint64_t>(begin / block) * info.block_bytes;
    const uint64_t bytes = static_cast<uint64_t>(count / block) * info.block_bytes;
    std::vector<std::byte> copy(rows * bytes);
    for (uint64_t r = 0; r < rows; ++r) std::memcpy(copy.data() + r * bytes, data.data + r * row_bytes + offset, bytes);
    // Rows of a few hundred bytes put every rank's columns on every page, so the copy brought the whole tensor into
    // this process's memory. The pages are the file's, clean and read once: handed back, they leave this rank with
    // the 1/N it keeps (MADV_PAGEOUT reclaims file pages and never discards data; on memory that is not a file's
    // it does nothing without swap, and the advice failing changes nothing either).
    release_pages(data.data, data.size);
    HXRT_RETURN_IF_ERROR(
        graph_.add_initializer(id, {dtype, graph::SymShape{shape.dim(0), count}}, graph::WeightData::copy_of(copy))
            .status());
    return id;
  }

  // weight(prefix + part + suffix) for each part.
  Result<std::vector<std::string>> weights(const std::string& prefix, const std::vector<std::string>& parts,
                                           const std::string& suffix) {
    std::vector<std::string> out;
    for (const std::string& part : parts) {
      HXRT_ASSIGN_OR_RETURN(std::string id, weight(prefix + part + suffix));
      out.push_back(std::move(id));
    }
    return out;
  }

  // A constant f32 of shape [1] (broadcast scales).
  Result<std::string> scalar(const std::string& name, float value) {
    std::vector<std::byte> bytes(sizeof(float));
    std::memcpy(bytes.data(), &value, sizeof(float));
    HXRT_RETURN_IF_ERROR(graph_.add_initializer(name, {DType::kF32, {1}}, graph::WeightData::copy_of(bytes)).status());
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

  // A node of several outputs, named `outputs`.
  Status multi(const std::string& name, const std::string& op, std::vector<std::string> inputs,
               std::vector<std::string> outputs, graph::AttributeMap attrs) {
    return graph_.add_node(name, op, inputs, outputs, std::move(attrs), "hxrt", 1).status();
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

Result<TensorParallelShard> tensor_parallel_shard(const ModelConfig& c, int rank, int size) {
  if (size < 1 || rank < 0 || rank >= size) return invalid_argument("rank {} of {} ranks", rank, size);
  TensorParallelShard s{.rank = rank, .size = size};
  if (size > 1 && c.n_experts > 0) {
    return unimplemented("tensor parallelism of mixture-of-experts models is not built; pipeline parallelism serves them");
  }
  if (c.n_heads % size != 0) {
    return invalid_argument("{}'s {} query heads do not divide among {} ranks (pipeline parallelism serves any head count)",
                            c.architecture, c.n_heads, size);
  }
  s.n_heads = c.n_heads / size;
  s.q_head_begin = rank * s.n_heads;
  const int group = c.n_heads / c.n_kv_heads;
  if (c.n_kv_heads % size == 0) {
    s.n_kv_heads = c.n_kv_heads / size;
    s.kv_head_begin = rank * s.n_kv_heads;
  } else if (size % c.n_kv_heads == 0 && group % s.n_heads == 0) {
    s.n_kv_heads = 1;  // replicated: every query head of this rank reads the same KV head
    s.kv_head_begin = s.q_head_begin / group;
  } else {
    return invalid_argument("{}'s {} KV heads (groups of {} query heads) neither divide among {} ranks nor replicate "
                            "across them",
                            c.architecture, c.n_kv_heads, group, size);
  }
  if (c.n_ff % size != 0) {
    return invalid_argument("{}'s FFN width {} does not divide among {} ranks", c.architecture, c.n_ff, size);
  }
  s.n_ff = c.n_ff / size;
  s.ff_begin = rank * s.n_ff;
  const bool split_vocab = c.vocab_size % size == 0;
  s.n_vocab = split_vocab ? c.vocab_size / size : c.vocab_size;
  s.vocab_begin = split_vocab ? rank * s.n_vocab : 0;
  return s;
}

bool has_mixed_windows(const ModelConfig& config) {
  bool window = false, full = false;
  for (const LayerConfig& layer : config.layers) (layer.window > 0 ? window : full) = true;
  return window && full;
}

Result<graph::Graph> build_decoder_graph(const formats::GgufFile& file, const ModelConfig& c,
                                         const DecoderGraphOptions& options) {
  if (c.family == nullptr || c.layers.size() != static_cast<size_t>(c.n_layers)) {
    return invalid_argument("the ModelConfig does not come from ModelConfig::from_gguf (no family or layer list)");
  }
  if (options.kv_dtype != DType::kF16 && options.kv_dtype != DType::kF32) {
    return invalid_argument("the KV cache holds f16 or f32, not {}", options.kv_dtype);
  }
  if (options.block_size <= 0) return invalid_argument("block_size {} must be positive", options.block_size);
  const ModelFamily& f = *c.family;
  const bool tp = options.tp_size > 1;
  HXRT_ASSIGN_OR_RETURN(const TensorParallelShard shard, tensor_parallel_shard(c, options.tp_rank, options.tp_size));
  const std::string tp_label = fmt::format("tp{}of{}", options.tp_rank, options.tp_size);
  const int64_t head_dim = c.head_dim;
  const int first_layer = options.first_layer;
  const int end_layer = options.end_layer > 0 ? options.end_layer : c.n_layers;
  if (first_layer < 0 || first_layer >= end_layer || end_layer > c.n_layers) {
    return invalid_argument("layers [{}, {}) are not a stage of {}'s {} layers", first_layer, end_layer, c.architecture,
                            c.n_layers);
  }
  const bool first_stage = first_layer == 0;
  const bool last_stage = end_layer == c.n_layers;
  if (!last_stage && options.embeddings) {
    return unimplemented("embeddings come from the last pipeline stage only; its graph has them");
  }
  graph::Graph g(c.name.empty() ? c.architecture : c.name);
  const graph::Dim n_tokens = graph::Dim::symbol("n_tokens");
  HXRT_RETURN_IF_ERROR(g.add_input(decoder::kTokens, {DType::kI32, {n_tokens}}).status());
  HXRT_RETURN_IF_ERROR(g.add_input(decoder::kPositions, {DType::kI32, {n_tokens}}).status());
  HXRT_RETURN_IF_ERROR(g.add_input(decoder::kTokenSeq, {DType::kI32, {n_tokens}}).status());
  HXRT_RETURN_IF_ERROR(
      g.add_input(decoder::kBlockTables, {DType::kI32, {graph::Dim::symbol("n_seqs"), graph::Dim::symbol("max_blocks")}})
          .status());
  HXRT_RETURN_IF_ERROR(g.add_input(decoder::kLogitRows, {DType::kI32, {graph::Dim::symbol("n_outputs")}}).status());
  if (options.embeddings) {
    HXRT_RETURN_IF_ERROR(g.add_input(decoder::kEmbedRows, {DType::kI32, {graph::Dim::symbol("n_embeds")}}).status());
  }
  // Each layer's cache: its index among the layers of that cache (Note [Sliding-window cache] in llm/engine.cc).
  if (options.window_cache && !has_mixed_windows(c)) {
    return invalid_argument("window_cache needs sliding-window and full-attention layers; {} has not both",
                            c.architecture);
  }
  std::vector<int64_t> cache_layer(static_cast<size_t>(c.n_layers));
  int64_t n_window_layers = 0, n_full_layers = 0;
  for (int l = first_layer; l < end_layer; ++l) {
    const bool local = options.window_cache && c.layers[static_cast<size_t>(l)].window > 0;
    cache_layer[static_cast<size_t>(l)] = local ? n_window_layers++ : n_full_layers++;
  }
  const auto cache_of = [&](int64_t layers, const char* blocks) {
    return graph::SymShape{layers, graph::Dim::symbol(blocks), static_cast<int64_t>(options.block_size),
                           static_cast<int64_t>(shard.n_kv_heads), static_cast<int64_t>(c.head_dim)};
  };
  HXRT_RETURN_IF_ERROR(g.add_input(decoder::kKCache, {options.kv_dtype, cache_of(n_full_layers, "n_blocks")}).status());
  HXRT_RETURN_IF_ERROR(g.add_input(decoder::kVCache, {options.kv_dtype, cache_of(n_full_layers, "n_blocks")}).status());
  if (n_window_layers > 0) {
    const graph::SymShape local_shape = cache_of(n_window_layers, "n_local_blocks");
    HXRT_RETURN_IF_ERROR(
        g.add_input(decoder::kBlockTablesLocal,
                    {DType::kI32, {graph::Dim::symbol("n_seqs"), graph::Dim::symbol("max_blocks")}})
            .status());
    HXRT_RETURN_IF_ERROR(g.add_input(decoder::kKCacheLocal, {options.kv_dtype, local_shape}).status());
    HXRT_RETURN_IF_ERROR(g.add_input(decoder::kVCacheLocal, {options.kv_dtype, local_shape}).status());
  }

  Builder b(g, file);
  auto wrap = [](Status s, int layer) { return std::move(s).with_context(fmt::format("building layer {}", layer)); };
  std::string x = decoder::kHiddenIn;
  if (!first_stage) {
    HXRT_RETURN_IF_ERROR(
        g.add_input(decoder::kHiddenIn, {DType::kF32, {n_tokens, static_cast<int64_t>(c.n_embd)}}).status());
  } else {
    HXRT_ASSIGN_OR_RETURN(std::string embd, b.weight("token_embd.weight"));
    HXRT_ASSIGN_OR_RETURN(x, b.hxrt("embed", "GatherRows", {embd, decoder::kTokens}));
  }
  if (first_stage && f.scale_embeddings) {
    HXRT_ASSIGN_OR_RETURN(std::string scale, b.scalar("embed.scale", std::sqrt(static_cast<float>(c.n_embd))));
    HXRT_ASSIGN_OR_RETURN(x, b.node("embed.scaled", "Mul", {x, scale}, {}, "", 14));
  }
  HXRT_ASSIGN_OR_RETURN(std::string q_shape, b.constant("shape.q", {-1, shard.n_heads, c.head_dim}));
  HXRT_ASSIGN_OR_RETURN(std::string kv_shape, b.constant("shape.kv", {-1, shard.n_kv_heads, c.head_dim}));
  HXRT_ASSIGN_OR_RETURN(std::string flat_shape, b.constant("shape.flat", {-1, shard.n_heads * head_dim}));
  // The sum over the tensor-parallel group of this rank's `partial` (Note [Tensor-parallel decoder]).
  const auto all_reduce = [&](const std::string& name, const std::string& partial) -> Result<std::string> {
    graph::AttributeMap attrs;
    attrs.set("group", graph::Attribute(options.tp_group));
    attrs.set("reduction", graph::Attribute("sum"));
    return b.hxrt(name, "AllReduce", {partial}, std::move(attrs));
  };
  graph::AttributeMap gelu;
  gelu.set("approximate", graph::Attribute("tanh"));
  std::string rope_factors;  // the frequency factors every layer's RoPE reads, if the file has them
  if (const std::string& name = c.rope_scaling.factors_for(options.context > 0 ? options.context : c.context_length);
      !name.empty()) {
    HXRT_ASSIGN_OR_RETURN(rope_factors, b.weight(name));
  }
  for (int l = first_layer; l < end_layer; ++l) {
    const LayerConfig& layer = c.layers[static_cast<size_t>(l)];
    const std::string w = fmt::format("blk.{}.", l);
    const std::string n = fmt::format("l{}.", l);
    Result<std::string> layer_out = [&]() -> Result<std::string> {
      HXRT_ASSIGN_OR_RETURN(std::string h, b.rms_norm(n + "attn_norm", x, w + "attn_norm.weight", c.rms_epsilon));
      const std::vector<int64_t> qkv_rows = {c.q_dim(), c.kv_dim(), c.kv_dim()};
      // The Q, K and V tensors with `suffix` (".weight", ".bias"): three of them, or row ranges of attn_qkv.
      const auto qkv_tensors = [&](const std::string& suffix) -> Result<std::vector<std::string>> {
        if (!tp) {
          return c.fused_qkv ? b.row_slices(w + "attn_qkv" + suffix, qkv_rows, {"q", "k", "v"})
                             : b.weights(w, {"attn_q", "attn_k", "attn_v"}, suffix);
        }
        // This rank's heads: row ranges of Q, K and V (of attn_qkv's three parts when fused).
        const int64_t q_begin = shard.q_head_begin * head_dim, q_rows = shard.n_heads * head_dim;
        const int64_t kv_begin = shard.kv_head_begin * head_dim, kv_rows = shard.n_kv_heads * head_dim;
        const std::string fused = w + "attn_qkv" + suffix;
        std::vector<std::string> out;
        HXRT_ASSIGN_OR_RETURN(out.emplace_back(),
                              c.fused_qkv ? b.row_range(fused, q_begin, q_rows, "q." + tp_label)
                                          : b.row_range(w + "attn_q" + suffix, q_begin, q_rows, tp_label));
        HXRT_ASSIGN_OR_RETURN(out.emplace_back(),
                              c.fused_qkv ? b.row_range(fused, c.q_dim() + kv_begin, kv_rows, "k." + tp_label)
                                          : b.row_range(w + "attn_k" + suffix, kv_begin, kv_rows, tp_label));
        HXRT_ASSIGN_OR_RETURN(out.emplace_back(),
                              c.fused_qkv ? b.row_range(fused, c.q_dim() + c.kv_dim() + kv_begin, kv_rows, "v." + tp_label)
                                          : b.row_range(w + "attn_v" + suffix, kv_begin, kv_rows, tp_label));
        return out;
      };
      HXRT_ASSIGN_OR_RETURN(const std::vector<std::string> wqkv, qkv_tensors(".weight"));
      HXRT_ASSIGN_OR_RETURN(std::vector<std::string> qkv, b.projections(n + "qkv", {n + "q", n + "k", n + "v"}, h, wqkv,
                                                                        options.group_projections));
      if (c.attention_bias) {
        HXRT_ASSIGN_OR_RETURN(const std::vector<std::string> biases, qkv_tensors(".bias"));
        for (size_t i = 0; i < 3; ++i) {
          HXRT_ASSIGN_OR_RETURN(qkv[i], b.node(qkv[i] + ".bias", "Add", {qkv[i], biases[i]}, {}, "", 14));
        }
      }
      HXRT_ASSIGN_OR_RETURN(std::string q3, b.node(n + "q.heads", "Reshape", {qkv[0], q_shape}, {}, "", 14));
      HXRT_ASSIGN_OR_RETURN(std::string k3, b.node(n + "k.heads", "Reshape", {qkv[1], kv_shape}, {}, "", 14));
      HXRT_ASSIGN_OR_RETURN(std::string v3, b.node(n + "v.heads", "Reshape", {qkv[2], kv_shape}, {}, "", 14));
      if (f.qk_norm) {
        HXRT_ASSIGN_OR_RETURN(q3, b.rms_norm(n + "q_norm", q3, w + "attn_q_norm.weight", c.rms_epsilon));
        HXRT_ASSIGN_OR_RETURN(k3, b.rms_norm(n + "k_norm", k3, w + "attn_k_norm.weight", c.rms_epsilon));
      }
      graph::AttributeMap rope;
      rope.set("theta", graph::Attribute(static_cast<double>(layer.rope_theta)));
      rope.set("rotary_dims", graph::Attribute(static_cast<int64_t>(c.rope_dims)));
      rope.set("mode", graph::Attribute(f.rope == RopeStyle::kNeox ? "neox" : "normal"));
      const RopeScaling& scaling = c.rope_scaling;
      if (layer.rope_freq_scale != 1.0f) rope.set("freq_scale", graph::Attribute(static_cast<double>(layer.rope_freq_scale)));
      if (scaling.ext_factor != 0.0f) {
        rope.set("ext_factor", graph::Attribute(static_cast<double>(scaling.ext_factor)));
        rope.set("beta_fast", graph::Attribute(static_cast<double>(scaling.beta_fast)));
        rope.set("beta_slow", graph::Attribute(static_cast<double>(scaling.beta_slow)));
        rope.set("n_ctx_orig", graph::Attribute(static_cast<int64_t>(scaling.n_ctx_orig)));
      }
      if (const float magnitude = scaling.magnitude(layer.rope_freq_scale); magnitude != 1.0f) {
        rope.set("attn_factor", graph::Attribute(static_cast<double>(magnitude)));
      }
      std::vector<std::string> q_in = {q3, decoder::kPositions}, k_in = {k3, decoder::kPositions};
      if (!rope_factors.empty()) {
        q_in.push_back(rope_factors);
        k_in.push_back(rope_factors);
      }
      HXRT_ASSIGN_OR_RETURN(std::string qr, b.hxrt(n + "q.rope", "RoPE", std::move(q_in), rope));
      HXRT_ASSIGN_OR_RETURN(std::string kr, b.hxrt(n + "k.rope", "RoPE", std::move(k_in), std::move(rope)));
      graph::AttributeMap attention;
      attention.set("layer", graph::Attribute(cache_layer[static_cast<size_t>(l)]));
      const bool local = options.window_cache && layer.window > 0;
      if (c.attention_scale > 0) attention.set("scale", graph::Attribute(static_cast<double>(c.attention_scale)));
      if (layer.window > 0) attention.set("window", graph::Attribute(static_cast<int64_t>(layer.window)));
      if (c.attention_softcap > 0) attention.set("softcap", graph::Attribute(static_cast<double>(c.attention_softcap)));
      HXRT_ASSIGN_OR_RETURN(std::string a,
                            b.hxrt(n + "attention", "PagedAttention",
                                   {qr, kr, v3, local ? decoder::kKCacheLocal : decoder::kKCache,
                                    local ? decoder::kVCacheLocal : decoder::kVCache,
                                    local ? decoder::kBlockTablesLocal : decoder::kBlockTables, decoder::kTokenSeq,
                                    decoder::kPositions},
                                   std::move(attention)));
      HXRT_ASSIGN_OR_RETURN(std::string a2, b.node(n + "attention.flat", "Reshape", {a, flat_shape}, {}, "", 14));
      HXRT_ASSIGN_OR_RETURN(std::string wo, tp ? b.column_range(w + "attn_output.weight", shard.q_head_begin * head_dim,
                                                                 shard.n_heads * head_dim, tp_label)
                                               : b.weight(w + "attn_output.weight"));
      HXRT_ASSIGN_OR_RETURN(std::string o, b.hxrt(n + "o", "MatMulQ", {a2, wo}));
      if (tp) {
        HXRT_ASSIGN_OR_RETURN(o, all_reduce(n + "o.all_reduce", o));
      }
      if (f.post_norms) {
        HXRT_ASSIGN_OR_RETURN(o, b.rms_norm(n + "post_attention_norm", o, w + "post_attention_norm.weight", c.rms_epsilon));
      }
      HXRT_ASSIGN_OR_RETURN(std::string x1, b.node(n + "attn.residual", "Add", {x, o}, {}, "", 14));
      HXRT_ASSIGN_OR_RETURN(std::string h2, b.rms_norm(n + "ffn_norm", x1, w + "ffn_norm.weight", c.rms_epsilon));
      if (c.n_experts > 0) {
        // Mixture of experts: route, then the chosen experts' SwiGLU FFNs as expert-batched MatMulQs, summed with
        // the router's weights by the down projection.
        HXRT_ASSIGN_OR_RETURN(std::string router_w, b.weight(w + "ffn_gate_inp.weight"));
        HXRT_ASSIGN_OR_RETURN(std::string logits, b.hxrt(n + "moe.logits", "MatMulQ", {h2, router_w}));
        graph::AttributeMap route;
        route.set("k", graph::Attribute(static_cast<int64_t>(c.n_experts_used)));
        route.set("normalize", graph::Attribute(int64_t{c.expert_weights_norm ? 1 : 0}));
        route.set("scale", graph::Attribute(static_cast<double>(c.expert_weights_scale)));
        const std::string ids = n + "moe.ids", weights = n + "moe.weights";
        HXRT_RETURN_IF_ERROR(b.multi(n + "moe.route", "MoeRoute", {logits}, {ids, weights}, std::move(route)));
        HXRT_ASSIGN_OR_RETURN(const std::vector<std::string> experts,
                              b.weights(w, {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"}, ".weight"));
        HXRT_ASSIGN_OR_RETURN(std::string gate, b.hxrt(n + "moe.gate", "MatMulQExperts", {h2, experts[0], ids}));
        HXRT_ASSIGN_OR_RETURN(std::string up, b.hxrt(n + "moe.up", "MatMulQExperts", {h2, experts[1], ids}));
        HXRT_ASSIGN_OR_RETURN(std::string act, b.hxrt(n + "moe.gate.silu", "Silu", {gate}));
        HXRT_ASSIGN_OR_RETURN(std::string gated, b.node(n + "moe.gated", "Mul", {act, up}, {}, "", 14));
        HXRT_ASSIGN_OR_RETURN(std::string down,
                              b.hxrt(n + "moe.down", "MatMulQExperts", {gated, experts[2], ids, weights}));
        if (f.post_norms) {
          HXRT_ASSIGN_OR_RETURN(down, b.rms_norm(n + "post_ffw_norm", down, w + "post_ffw_norm.weight", c.rms_epsilon));
        }
        return b.node(n + "ffn.residual", "Add", {x1, down}, {}, "", 14);
      }
      std::vector<std::string> wgu;
      std::string wd;
      if (!tp) {
        HXRT_ASSIGN_OR_RETURN(wgu, f.fused_gate_up ? b.row_slices(w + "ffn_up.weight", {c.n_ff, c.n_ff}, {"gate", "up"})
                                                   : b.weights(w, {"ffn_gate", "ffn_up"}, ".weight"));
        HXRT_ASSIGN_OR_RETURN(wd, b.weight(w + "ffn_down.weight"));
      } else {
        // This rank's slice of the FFN width: rows of gate and up (of ffn_up's two halves when fused), columns of down.
        const std::string gate = f.fused_gate_up ? w + "ffn_up.weight" : w + "ffn_gate.weight";
        const int64_t up_offset = f.fused_gate_up ? c.n_ff : 0;
        HXRT_ASSIGN_OR_RETURN(wgu.emplace_back(), b.row_range(gate, shard.ff_begin, shard.n_ff, "gate." + tp_label));
        HXRT_ASSIGN_OR_RETURN(wgu.emplace_back(),
                              b.row_range(w + "ffn_up.weight", up_offset + shard.ff_begin, shard.n_ff, "up." + tp_label));
        HXRT_ASSIGN_OR_RETURN(wd, b.column_range(w + "ffn_down.weight", shard.ff_begin, shard.n_ff, tp_label));
      }
      HXRT_ASSIGN_OR_RETURN(const std::vector<std::string> gate_up,
                            b.projections(n + "gate_up", {n + "gate", n + "up"}, h2, wgu, options.group_projections));
      std::string act;
      if (f.gate == FfnGate::kSilu) {
        HXRT_ASSIGN_OR_RETURN(act, b.hxrt(n + "gate.silu", "Silu", {gate_up[0]}));
      } else {
        HXRT_ASSIGN_OR_RETURN(act, b.node(n + "gate.gelu", "Gelu", {gate_up[0]}, gelu, "", 20));
      }
      HXRT_ASSIGN_OR_RETURN(std::string gated, b.node(n + "ffn.gated", "Mul", {act, gate_up[1]}, {}, "", 14));
      HXRT_ASSIGN_OR_RETURN(std::string down, b.hxrt(n + "down", "MatMulQ", {gated, wd}));
      if (tp) {
        HXRT_ASSIGN_OR_RETURN(down, all_reduce(n + "down.all_reduce", down));
      }
      if (f.post_norms) {
        HXRT_ASSIGN_OR_RETURN(down, b.rms_norm(n + "post_ffw_norm", down, w + "post_ffw_norm.weight", c.rms_epsilon));
      }
      return b.node(n + "ffn.residual", "Add", {x1, down}, {}, "", 14);
    }();
    if (!layer_out.ok()) return wrap(std::move(layer_out).take_status(), l);
    x = *layer_out;
  }
  if (!last_stage) {
    // The next stage's input: this stage's hidden states, every row.
    HXRT_ASSIGN_OR_RETURN(std::string flat, b.constant("shape.hidden", {-1, c.n_embd}));
    HXRT_RETURN_IF_ERROR(b.node(decoder::kHiddenOut, "Reshape", {x, flat}, {}, "", 14).status());
    HXRT_RETURN_IF_ERROR(g.mark_output(decoder::kHiddenOut));
    return g;
  }
  HXRT_ASSIGN_OR_RETURN(std::string rows, b.node("output.rows", "Gather", {x, decoder::kLogitRows}, {}, "", 13));
  HXRT_ASSIGN_OR_RETURN(std::string normed, b.rms_norm("output_norm", rows, "output_norm.weight", c.rms_epsilon));
  HXRT_ASSIGN_OR_RETURN(std::string head, b.weight(c.tied_embeddings ? "token_embd.weight" : "output.weight"));
  // Tensor parallel: this rank's vocabulary rows of the head; the ranks' logits are gathered below.
  const bool split_vocab = tp && shard.n_vocab < c.vocab_size;
  if (split_vocab) {
    HXRT_ASSIGN_OR_RETURN(head, b.row_range(c.tied_embeddings ? "token_embd.weight" : "output.weight",
                                            shard.vocab_begin, shard.n_vocab, tp_label));
  }
  const std::string logits = split_vocab ? std::string("logits.part") : std::string(decoder::kLogits);
  if (c.final_softcap > 0) {
    // logits = c · tanh(raw / c)
    HXRT_ASSIGN_OR_RETURN(std::string raw, b.hxrt("logits.raw", "MatMulQ", {normed, head}));
    HXRT_ASSIGN_OR_RETURN(std::string inv, b.scalar("logits.softcap.inv", 1.0f / c.final_softcap));
    HXRT_ASSIGN_OR_RETURN(std::string cap, b.scalar("logits.softcap", c.final_softcap));
    HXRT_ASSIGN_OR_RETURN(std::string scaled, b.node("logits.scaled", "Mul", {raw, inv}, {}, "", 14));
    HXRT_ASSIGN_OR_RETURN(std::string tanh, b.node("logits.tanh", "Tanh", {scaled}, {}, "", 13));
    HXRT_RETURN_IF_ERROR(b.node(logits, "Mul", {tanh, cap}, {}, "", 14).status());
  } else {
    HXRT_RETURN_IF_ERROR(b.hxrt(logits, "MatMulQ", {normed, head}).status());
  }
  if (split_vocab) {
    // [ranks·n_outputs, n_vocab/ranks] rank-major → [n_outputs, ranks, n_vocab/ranks] → [n_outputs, n_vocab].
    graph::AttributeMap gather;
    gather.set("group", graph::Attribute(options.tp_group));
    gather.set("rank_size", graph::Attribute(static_cast<int64_t>(options.tp_size)));
    HXRT_ASSIGN_OR_RETURN(std::string gathered, b.hxrt("logits.all_gather", "AllGather", {logits}, std::move(gather)));
    HXRT_ASSIGN_OR_RETURN(std::string by_rank, b.constant("shape.logits.ranks", {options.tp_size, -1, shard.n_vocab}));
    HXRT_ASSIGN_OR_RETURN(std::string whole, b.constant("shape.logits", {-1, c.vocab_size}));
    HXRT_ASSIGN_OR_RETURN(std::string ranked, b.node("logits.ranks", "Reshape", {gathered, by_rank}, {}, "", 14));
    graph::AttributeMap perm;
    perm.set("perm", graph::Attribute(std::vector<int64_t>{1, 0, 2}));
    HXRT_ASSIGN_OR_RETURN(std::string rows_first, b.node("logits.rows", "Transpose", {ranked}, std::move(perm), "", 13));
    HXRT_RETURN_IF_ERROR(b.node(decoder::kLogits, "Reshape", {rows_first, whole}, {}, "", 14).status());
  }
  HXRT_RETURN_IF_ERROR(g.mark_output(decoder::kLogits));
  if (options.embeddings) {
    HXRT_ASSIGN_OR_RETURN(std::string embed_rows,
                          b.node("embeddings.rows", "Gather", {x, decoder::kEmbedRows}, {}, "", 13));
    HXRT_ASSIGN_OR_RETURN(std::string embeddings,
                          b.rms_norm(decoder::kEmbeddings, embed_rows, "output_norm.weight", c.rms_epsilon));
    HXRT_RETURN_IF_ERROR(g.mark_output(embeddings));
  }
  return g;
}

}  // namespace hxrt::llm
