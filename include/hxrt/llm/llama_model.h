// The Llama-family decoder (SmolLM2, Llama 2/3, TinyLlama ...) as an hxrt graph built from GGUF metadata.
//
// One graph serves prefill, decode and batches of both: every token of the launch is a row, `n_tokens` is a
// symbol, and each token says which sequence it belongs to and at which position; attention reads the paged KV
// cache through the block tables (PagedAttention, Note [KV cache state inputs] in ops/schemas/llm.cc).
//
//   x      = GatherRows(token_embd, tokens)                                   (n_tokens, n_embd)
//   per layer:
//     h    = RMSNorm(x) · attn_norm
//     q, k, v = MatMulQ(h, Wq / Wk / Wv) → (n_tokens, heads, head_dim), RoPE on q and k at positions
//     a    = PagedAttention(q, k, v, caches, block_tables, token_seq, positions)
//     x    = x + MatMulQ(a, Wo)
//     h    = RMSNorm(x) · ffn_norm
//     x    = x + MatMulQ(Silu(MatMulQ(h, Wgate)) · MatMulQ(h, Wup), Wdown)
//   logits = MatMulQ(RMSNorm(Gather(x, logit_rows)) · output_norm, output or token_embd)   (n_outputs, vocab)
//
// The graph's weights are the GGUF file's bytes in place (the file must outlive the graph's plans).
//
// Thread-safety: plain functions and immutable data.
#pragma once

#include <string>

#include "hxrt/base/dtype.h"
#include "hxrt/base/status.h"
#include "hxrt/formats/gguf.h"
#include "hxrt/graph/graph.h"

namespace hxrt::llm {

struct LlamaConfig {
  std::string architecture;  // general.architecture: "llama"
  std::string name;          // general.name
  int n_layers = 0;
  int n_embd = 0;
  int n_ff = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int vocab_size = 0;
  int context_length = 0;
  int rope_dims = 0;
  float rope_theta = 10000.0f;
  float rms_epsilon = 1e-5f;
  bool tied_embeddings = false;  // no output.weight: the logits reuse token_embd

  // Reads {arch}.* keys and checks every tensor the decoder needs (presence, dtype hxrt computes, shape).
  // Errors name the key or tensor and what was expected.
  static Result<LlamaConfig> from_gguf(const formats::GgufFile& file);
  std::string to_string() const;
};

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
}  // namespace decoder

struct DecoderGraphOptions {
  DType kv_dtype = DType::kF16;
  int block_size = 16;
  // Projections that read the same activation and have one weight dtype (Q, K, V; gate, up) become one MatMulQGroup
  // node each instead of one MatMulQ per weight: the activation is quantized once and the group runs as one launch.
  // The values are the same bits either way; the engine sets this when its device has a MatMulQGroup kernel.
  bool group_projections = false;
};

Result<graph::Graph> build_llama_graph(const formats::GgufFile& file, const LlamaConfig& config,
                                       const DecoderGraphOptions& options = {});

}  // namespace hxrt::llm
