// Schemas of the LLM ops (docs/ops.md, "LLM ops"): GatherRows (embedding lookup in any weight format),
// PagedAttention (grouped-query attention over a paged KV cache), and the mixture-of-experts pair MoeRoute (top-k
// routing) and MatMulQExperts (the expert-batched MatMulQ).
//
// Note [KV cache state inputs]
// PagedAttention's k_cache and v_cache are the cache's device buffers, bound once to the executor as state
// (Executor::bind_state) and shared by every layer's node: the kernel first writes this launch's keys and values
// into their slots of its own layer, then attends over each token's sequence through the block table. Only the
// node of layer L touches layer L's slice, so the nodes of one run never race, and runs on one stream are ordered.

#include <fmt/format.h>

#include "hxrt/base/quant_types.h"
#include "hxrt/ops/params/llm.h"
#include "ops/schemas/schemas.h"

namespace hxrt::ops::schemas {
namespace {

Status require_rank(InferenceContext& ctx, size_t input, int rank, std::string_view what) {
  const graph::TensorDesc& desc = ctx.input(input);
  if (desc.shape.rank() != rank) {
    return ctx.error(fmt::format("input {} {} must have rank {}: {}", input, desc.shape.to_string(), rank, what));
  }
  return ok_status();
}

Status infer_gather_rows(InferenceContext& ctx) {
  HXRT_RETURN_IF_ERROR(require_rank(ctx, 0, 2, "[n_rows, row_size]"));
  HXRT_RETURN_IF_ERROR(require_rank(ctx, 1, 1, "[n]"));
  const graph::TensorDesc& data = ctx.input(0);
  ctx.set_output(0, graph::TensorDesc{DType::kF32, graph::SymShape({ctx.input(1).shape.dim(0), data.shape.dim(1)})});
  return ok_status();
}

// q [n_tokens, n_heads, head_dim], k/v [n_tokens, n_kv_heads, head_dim],
// k_cache/v_cache [n_layers, n_blocks, block_size, n_kv_heads, head_dim], block_tables [n_seqs, max_blocks],
// token_seq/positions [n_tokens].
Status infer_paged_attention(InferenceContext& ctx) {
  HXRT_RETURN_IF_ERROR(require_rank(ctx, 0, 3, "q [n_tokens, n_heads, head_dim]"));
  HXRT_RETURN_IF_ERROR(require_rank(ctx, 1, 3, "k [n_tokens, n_kv_heads, head_dim]"));
  HXRT_RETURN_IF_ERROR(require_rank(ctx, 2, 3, "v [n_tokens, n_kv_heads, head_dim]"));
  HXRT_RETURN_IF_ERROR(require_rank(ctx, 3, 5, "k_cache [n_layers, n_blocks, block_size, n_kv_heads, head_dim]"));
  HXRT_RETURN_IF_ERROR(require_rank(ctx, 4, 5, "v_cache [n_layers, n_blocks, block_size, n_kv_heads, head_dim]"));
  HXRT_RETURN_IF_ERROR(require_rank(ctx, 5, 2, "block_tables [n_seqs, max_blocks]"));
  HXRT_RETURN_IF_ERROR(require_rank(ctx, 6, 1, "token_seq [n_tokens]"));
  HXRT_RETURN_IF_ERROR(require_rank(ctx, 7, 1, "positions [n_tokens]"));
  const graph::SymShape& q = ctx.input(0).shape;
  const graph::SymShape& k = ctx.input(1).shape;
  const graph::SymShape& cache = ctx.input(3).shape;
  const std::string name = ctx.node().name;
  for (size_t i : {1, 2, 6, 7}) {
    HXRT_RETURN_IF_ERROR(
        ctx.require_equal(ctx.input(i).shape.dim(0), q.dim(0), fmt::format("PagedAttention '{}': n_tokens of input {}", name, i)));
  }
  HXRT_RETURN_IF_ERROR(ctx.require_equal(ctx.input(2).shape.dim(1), k.dim(1), fmt::format("PagedAttention '{}': v vs k heads", name)));
  for (int axis : {1, 2}) {
    HXRT_RETURN_IF_ERROR(ctx.require_equal(ctx.input(2).shape.dim(axis), k.dim(axis),
                                           fmt::format("PagedAttention '{}': v vs k axis {}", name, axis)));
  }
  HXRT_RETURN_IF_ERROR(ctx.require_equal(k.dim(2), q.dim(2), fmt::format("PagedAttention '{}': head_dim of k vs q", name)));
  HXRT_RETURN_IF_ERROR(ctx.require_equal(cache.dim(3), k.dim(1), fmt::format("PagedAttention '{}': cache kv heads", name)));
  HXRT_RETURN_IF_ERROR(ctx.require_equal(cache.dim(4), k.dim(2), fmt::format("PagedAttention '{}': cache head_dim", name)));
  for (int axis = 0; axis < 5; ++axis) {
    HXRT_RETURN_IF_ERROR(ctx.require_equal(ctx.input(4).shape.dim(axis), cache.dim(axis),
                                           fmt::format("PagedAttention '{}': v_cache vs k_cache axis {}", name, axis)));
  }
  if (q.dim(1).is_static() && k.dim(1).is_static() && k.dim(1).value() > 0 && q.dim(1).value() % k.dim(1).value() != 0) {
    return ctx.error(fmt::format("n_heads {} is not a multiple of n_kv_heads {}", q.dim(1).value(), k.dim(1).value()));
  }
  HXRT_ASSIGN_OR_RETURN(const PagedAttentionParams params, parse_paged_attention_params(ctx.node()));
  if (cache.dim(0).is_static() && params.layer >= cache.dim(0).value()) {
    return ctx.error(
        fmt::format("attribute 'layer' = {} is outside the cache's {} layers", params.layer, cache.dim(0).to_string()));
  }
  ctx.set_output(0, graph::TensorDesc{DType::kF32, q});
  return ok_status();
}

// logits [n_tokens, n_experts] -> ids i32 [n_tokens, k], weights f32 [n_tokens, k].
Status infer_moe_route(InferenceContext& ctx) {
  HXRT_RETURN_IF_ERROR(require_rank(ctx, 0, 2, "logits [n_tokens, n_experts]"));
  HXRT_ASSIGN_OR_RETURN(const MoeRouteParams params, parse_moe_route_params(ctx.node()));
  const graph::SymShape& logits = ctx.input(0).shape;
  if (logits.dim(1).is_static() && params.k > logits.dim(1).value()) {
    return ctx.error(fmt::format("attribute 'k' = {} exceeds the {} experts", params.k, logits.dim(1).value()));
  }
  const graph::SymShape out({logits.dim(0), graph::Dim(params.k)});
  ctx.set_output(0, graph::TensorDesc{DType::kI32, out});
  ctx.set_output(1, graph::TensorDesc{DType::kF32, out});
  return ok_status();
}

// A [T, K] or [T, S, K], W [E, N, K], ids [T, S], weights [T, S] -> Y [T, S, N], or [T, N] with weights.
Status infer_matmulq_experts(InferenceContext& ctx) {
  HXRT_RETURN_IF_ERROR(require_rank(ctx, 1, 3, "W [n_experts, N, K]"));
  HXRT_RETURN_IF_ERROR(require_rank(ctx, 2, 2, "ids [n_tokens, n_slots]"));
  const graph::SymShape& a = ctx.input(0).shape;
  const graph::SymShape& w = ctx.input(1).shape;
  const graph::SymShape& ids = ctx.input(2).shape;
  if (a.rank() != 2 && a.rank() != 3) {
    return ctx.error(fmt::format("input 'A' {} must be [n_tokens, K] or [n_tokens, n_slots, K]", a.to_string()));
  }
  const std::string name = ctx.node().name;
  HXRT_RETURN_IF_ERROR(ctx.require_equal(a.dim(0), ids.dim(0), fmt::format("MatMulQExperts '{}': n_tokens of A vs ids", name)));
  HXRT_RETURN_IF_ERROR(ctx.require_equal(a.dim(-1), w.dim(2), fmt::format("MatMulQExperts '{}': K of A vs W", name)));
  if (a.rank() == 3) {
    HXRT_RETURN_IF_ERROR(ctx.require_equal(a.dim(1), ids.dim(1), fmt::format("MatMulQExperts '{}': slots of A vs ids", name)));
  }
  const DTypeInfo& info = dtype_info(ctx.input(1).dtype);
  if (info.is_quantized && w.dim(2).is_static() && w.dim(2).value() % info.block_elements != 0) {
    return ctx.error(fmt::format("input 'W' is {} with K={}, not a multiple of its block of {}", ctx.input(1).dtype,
                                 w.dim(2).value(), info.block_elements));
  }
  if (ctx.has_input(3)) {
    HXRT_RETURN_IF_ERROR(require_rank(ctx, 3, 2, "weights [n_tokens, n_slots]"));
    for (int axis : {0, 1}) {
      HXRT_RETURN_IF_ERROR(ctx.require_equal(ctx.input(3).shape.dim(axis), ids.dim(axis),
                                             fmt::format("MatMulQExperts '{}': weights vs ids axis {}", name, axis)));
    }
    ctx.set_output(0, graph::TensorDesc{DType::kF32, graph::SymShape({a.dim(0), w.dim(1)})});
  } else {
    ctx.set_output(0, graph::TensorDesc{DType::kF32, graph::SymShape({a.dim(0), ids.dim(1), w.dim(1)})});
  }
  return ok_status();
}

}  // namespace

Status register_llm(OpSchemaRegistry& registry) {
  OpSchema gather_rows;
  gather_rows.op_type = "GatherRows";
  gather_rows.domain = "hxrt";
  gather_rows.inputs = {{.name = "data"}, {.name = "indices", .type_var = "Tind"}};
  gather_rows.outputs = {{.name = "output", .type_var = "Tout"}};
  gather_rows.type_constraints = {{"T", row_dequantizable_types()},
                                  {"Tind", {DType::kI32, DType::kI64}},
                                  {"Tout", {DType::kF32}}};
  gather_rows.infer = infer_gather_rows;
  gather_rows.doc = "output[i, :] = f32(data[indices[i], :]); data [n_rows, row_size] in any weight format "
                    "(the embedding lookup of a quantized table); an index out of range is a kernel error";
  HXRT_RETURN_IF_ERROR(registry.add(std::move(gather_rows)));

  OpSchema attention;
  attention.op_type = "PagedAttention";
  attention.domain = "hxrt";
  attention.inputs = {{.name = "q"},
                      {.name = "k"},
                      {.name = "v"},
                      {.name = "k_cache", .type_var = "Tcache"},
                      {.name = "v_cache", .type_var = "Tcache"},
                      {.name = "block_tables", .type_var = "Tint"},
                      {.name = "token_seq", .type_var = "Tint"},
                      {.name = "positions", .type_var = "Tint"}};
  attention.outputs = {{.name = "output"}};
  attention.attrs = {{.name = "layer", .type = graph::AttrType::kInt, .required = true},
                     {.name = "scale", .type = graph::AttrType::kFloat, .default_value = graph::Attribute(0.0)},
                     {.name = "window", .type = graph::AttrType::kInt, .default_value = graph::Attribute(int64_t{0})},
                     {.name = "softcap", .type = graph::AttrType::kFloat, .default_value = graph::Attribute(0.0)}};
  attention.type_constraints = {{"T", {DType::kF32}}, {"Tcache", {DType::kF16, DType::kF32}}, {"Tint", {DType::kI32}}};
  attention.infer = infer_paged_attention;
  attention.doc =
      "causal grouped-query attention over a paged KV cache (Note [KV cache state inputs]): token t belongs to "
      "sequence s = token_seq[t] at position p = positions[t]; its k/v are written into cache layer `layer` at slot "
      "block_tables[s][p / block_size] * block_size + p % block_size, then it attends to positions 0..p of s "
      "(window > 0: only the last `window` of them, p - window < j <= p); score = scale · q·k (scale 0 means "
      "1/sqrt(head_dim)), then softcap · tanh(score / softcap) when softcap > 0";
  HXRT_RETURN_IF_ERROR(registry.add(std::move(attention)));

  OpSchema route;
  route.op_type = "MoeRoute";
  route.domain = "hxrt";
  route.inputs = {{.name = "logits"}};
  route.outputs = {{.name = "ids", .type_var = "Tid"}, {.name = "weights"}};
  route.attrs = {{.name = "k", .type = graph::AttrType::kInt, .required = true},
                 {.name = "normalize", .type = graph::AttrType::kInt, .default_value = graph::Attribute(int64_t{0})},
                 {.name = "scale", .type = graph::AttrType::kFloat, .default_value = graph::Attribute(0.0)}};
  route.type_constraints = {{"T", {DType::kF32}}, {"Tid", {DType::kI32}}};
  route.infer = infer_moe_route;
  route.doc = "mixture-of-experts routing of logits [n_tokens, n_experts]: probs = softmax over the experts; ids "
              "[n_tokens, k] the k most probable (ties: the lower id), weights their probabilities, divided by their "
              "sum when normalize != 0, times scale when scale is neither 0 nor 1";
  HXRT_RETURN_IF_ERROR(registry.add(std::move(route)));

  OpSchema experts;
  experts.op_type = "MatMulQExperts";
  experts.domain = "hxrt";
  experts.inputs = {{.name = "A"},
                    {.name = "W", .type_var = "TW"},
                    {.name = "ids", .type_var = "Tid"},
                    {.name = "weights", .optional = true}};
  experts.outputs = {{.name = "Y"}};
  experts.type_constraints = {{"T", {DType::kF32}}, {"TW", row_dequantizable_types()}, {"Tid", {DType::kI32}}};
  experts.infer = infer_matmulq_experts;
  experts.doc = "expert-batched MatMulQ: Y[t, s, :] = A[t (, s), :] · W[ids[t, s]]ᵀ for A [n_tokens (, n_slots), K], "
                "W [n_experts, N, K] in any weight format, ids [n_tokens, n_slots]; with weights [n_tokens, n_slots], "
                "Y [n_tokens, N] = Σ_s weights[t, s] · Y[t, s, :] in slot order; an id out of range is a kernel error";
  return registry.add(std::move(experts));
}

}  // namespace hxrt::ops::schemas
