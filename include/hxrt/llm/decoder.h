// The decoder every family shares, as an hxrt graph built from a ModelConfig (model_family.h) and the GGUF file.
//
// One graph serves prefill, decode and batches of both: every token of the launch is a row, `n_tokens` is a
// symbol, and each token says which sequence it belongs to and at which position; attention reads the paged KV
// cache through the block tables (PagedAttention, Note [KV cache state inputs] in ops/schemas/llm.cc).
//
//   x      = GatherRows(token_embd, tokens) (· sqrt(n_embd))                  (n_tokens, n_embd)
//   per layer:
//     h    = RMSNorm(x) · attn_norm
//     q, k, v = MatMulQ(h, Wq / Wk / Wv) (+ bias) → (n_tokens, heads, head_dim)   [or one Wqkv, row slices]
//     q, k = RMSNorm(q) · q_norm, RMSNorm(k) · k_norm                           [qk_norm]
//     q, k = RoPE(q, k) at positions, the layer's base, adjacent or NeoX pairs, the file's scaling and factors
//     a    = PagedAttention(q, k, v, caches, ...) with the layer's window and the model's scale and softcap
//     o    = MatMulQ(a, Wo) (· post_attention_norm after RMSNorm)              [post_norms]
//     x    = x + o
//     h    = RMSNorm(x) · ffn_norm
//     f    = MatMulQ(act(MatMulQ(h, Wgate)) · MatMulQ(h, Wup), Wdown) (RMSNorm · post_ffw_norm)
//            [experts: ids, w = MoeRoute(MatMulQ(h, Wrouter)); f = MatMulQExperts(silu(MatMulQExperts(h, Wgate_exps,
//             ids)) · MatMulQExperts(h, Wup_exps, ids), Wdown_exps, ids, w)]
//     x    = x + f
//   logits = MatMulQ(RMSNorm(Gather(x, logit_rows)) · output_norm, output or token_embd) (softcap)
//   [embeddings = RMSNorm(Gather(x, embed_rows)) · output_norm: the hidden states that pooled embeddings take]
//
// The graph's weights are the GGUF file's bytes in place (the file must outlive the graph's plans); a fused
// projection's parts are row ranges of its tensor, not copies.
//
// Thread-safety: plain functions and immutable data.
#pragma once

#include <string>

#include "hxrt/base/dtype.h"
#include "hxrt/base/status.h"
#include "hxrt/formats/gguf.h"
#include "hxrt/graph/graph.h"
#include "hxrt/llm/model_family.h"

namespace hxrt::llm {

// Names of the decoder graph's inputs and output.
namespace decoder {
inline constexpr const char* kTokens = "tokens";            // i32 (n_tokens)
inline constexpr const char* kPositions = "positions";      // i32 (n_tokens)
inline constexpr const char* kTokenSeq = "token_seq";       // i32 (n_tokens): row of block_tables
inline constexpr const char* kBlockTables = "block_tables"; // i32 (n_seqs, max_blocks)
inline constexpr const char* kLogitRows = "logit_rows";     // i32 (n_outputs): tokens whose logits are wanted
inline constexpr const char* kKCache = "k_cache";           // state: (n_layers, n_blocks, block_size, n_kv_heads, head_dim)
inline constexpr const char* kVCache = "v_cache";           // state, same shape
inline constexpr const char* kLogits = "logits";            // f32 (n_outputs, vocab)
// With DecoderGraphOptions::embeddings: the final hidden states (after output_norm) of the rows asked for.
inline constexpr const char* kEmbedRows = "embed_rows";     // i32 (n_embeds)
inline constexpr const char* kEmbeddings = "embeddings";    // f32 (n_embeds, n_embd)
// With DecoderGraphOptions::window_cache, the sliding-window layers' cache and tables (Note [Sliding-window
// cache] in llm/engine.cc): k_cache / v_cache then hold the other layers only.
inline constexpr const char* kBlockTablesLocal = "block_tables_local";  // i32 (n_seqs, max_blocks)
inline constexpr const char* kKCacheLocal = "k_cache_local";  // state: (n_window_layers, n_local_blocks, ...)
inline constexpr const char* kVCacheLocal = "v_cache_local";  // state, same shape
// A pipeline stage's graph (DecoderGraphOptions::first_layer / end_layer): the hidden states it starts from
// (stages after the first, instead of the embedding) and those it ends with (stages before the last, instead of
// the logits).
inline constexpr const char* kHiddenIn = "hidden_in";    // f32 (n_tokens, n_embd)
inline constexpr const char* kHiddenOut = "hidden_out";  // f32 (n_tokens, n_embd)
}  // namespace decoder

struct DecoderGraphOptions {
  DType kv_dtype = DType::kF16;
  int block_size = 16;
  // Projections that read the same activation and have one weight dtype (Q, K, V; gate, up) become one MatMulQGroup
  // node each instead of one MatMulQ per weight: the activation is quantized once and the group runs as one launch.
  // The values are the same bits either way; the engine sets this when its device has a MatMulQGroup kernel.
  bool group_projections = false;
  // The longest sequence the graph serves (0: the model's context_length). Phi-3's long-context RoPE factors
  // apply when it exceeds the model's original context, as llama.cpp picks them by n_ctx.
  int context = 0;
  // The sliding-window layers read their own cache (kKCacheLocal, kVCacheLocal, kBlockTablesLocal; layer index
  // among the window layers) and the others k_cache / v_cache (index among them). Needs both kinds of layer.
  bool window_cache = false;
  // An input kEmbedRows and an output kEmbeddings: the final hidden states of those rows (embeddings).
  bool embeddings = false;
  // Tensor parallelism (Note [Tensor-parallel decoder]): this rank's share of the graph when tp_size > 1; the
  // collectives run on the communicator group registered as `tp_group` (comm::register_group).
  int tp_rank = 0;
  int tp_size = 1;
  std::string tp_group = "tp";
  // Pipeline parallelism (Note [Pipeline-parallel engine] in llm/pipeline_parallel.cc): the graph of layers
  // [first_layer, end_layer) only (end_layer 0: to the last). A stage after the first starts from kHiddenIn; one
  // before the last ends with kHiddenOut instead of the logits. Its KV caches hold its layers only.
  int first_layer = 0;
  int end_layer = 0;
};

// Note [Tensor-parallel decoder]
// One rank's share of a tensor-parallel decoder (Megatron's split): the Q, K, V and gate/up projections split by
// output rows (each rank computes its heads and its slice of the FFN), the attention output and down projections by
// input columns, each followed by an AllReduce (sum) over the group, and the output head by vocabulary, its logits
// put together by an AllGather. KV heads divide among the ranks, or, where there are fewer KV heads than ranks,
// each rank keeps the one its query heads read (replicated). Row shares are views of the GGUF file's bytes;
// column shares (attention output, down) are copies of the rank's columns, a 1/N slice of those tensors, made
// when the graph is built (the matmul kernels read contiguous rows). The embedding table stays whole (a gather
// touches only the rows it reads). Every rank's graph has the same collectives in the same order.
struct TensorParallelShard {
  int rank = 0;
  int size = 1;
  int q_head_begin = 0;
  int n_heads = 0;  // query heads of this rank
  int kv_head_begin = 0;
  int n_kv_heads = 0;  // KV heads this rank keeps (and its KV cache holds)
  int ff_begin = 0;
  int n_ff = 0;
  int vocab_begin = 0;
  int n_vocab = 0;  // the whole vocabulary (replicated head) when it does not divide among the ranks
};
// Rank `rank` of `size`'s share; InvalidArgument when the heads or the FFN width do not divide (pipeline
// parallelism serves those models), Unimplemented for mixture-of-experts models.
Result<TensorParallelShard> tensor_parallel_shard(const ModelConfig& config, int rank, int size);

// Whether the model has both sliding-window and full-attention layers (what window_cache splits).
bool has_mixed_windows(const ModelConfig& config);

Result<graph::Graph> build_decoder_graph(const formats::GgufFile& file, const ModelConfig& config,
                                         const DecoderGraphOptions& options = {});

}  // namespace hxrt::llm
