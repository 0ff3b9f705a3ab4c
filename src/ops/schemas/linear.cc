// Schemas of the linear-algebra ops (docs/ops.md, "Linear algebra"): MatMul, Gemm and hxrt's MatMulQ.

#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "hxrt/base/quant_types.h"
#include "hxrt/ops/params/linear.h"
#include "ops/schemas/schemas.h"

namespace hxrt::ops::schemas {

namespace {

constexpr int kMatMulQGroupMaxWeights = 4;  // as kernels::cpu::kMaxGroupWeights

// The W layouts MatMulQ reads (GGUF row layout, K contiguous): every type whose rows dequantize (quant_types.h);
// each backend's kernels say which of them they compute.
const std::vector<DType>& matmulq_weight_types() { return row_dequantizable_types(); }

// numpy matmul: A [..., M, K] · B [..., K, N] → broadcast(batch) + [M] + [N]; a rank-1 A drops M, a rank-1 B
// drops N.
Status infer_matmul(InferenceContext& ctx) {
  const graph::SymShape& a = ctx.input(0).shape;
  const graph::SymShape& b = ctx.input(1).shape;
  if (a.rank() < 1 || b.rank() < 1) {
    return ctx.error(fmt::format("inputs 'A' {} and 'B' {} must have rank >= 1", a.to_string(), b.to_string()));
  }
  const graph::Dim& k_a = a.dim(-1);
  const graph::Dim& k_b = b.rank() == 1 ? b.dim(0) : b.dim(-2);
  HXRT_RETURN_IF_ERROR(ctx.require_equal(
      k_a, k_b,
      fmt::format("inner dim K of 'A' {} and 'B' {} (MatMul '{}')", a.to_string(), b.to_string(), ctx.node().name)));
  const std::vector<graph::Dim> a_batch(a.dims().begin(), a.dims().end() - std::min(a.rank(), 2));
  const std::vector<graph::Dim> b_batch(b.dims().begin(), b.dims().end() - std::min(b.rank(), 2));
  HXRT_ASSIGN_OR_RETURN(graph::SymShape out,
                        broadcast_shapes(ctx, graph::SymShape(a_batch), graph::SymShape(b_batch)));
  if (a.rank() > 1) out.mutable_dims().push_back(a.dim(-2));
  if (b.rank() > 1) out.mutable_dims().push_back(b.dim(-1));
  ctx.set_output(0, graph::TensorDesc{ctx.input(0).dtype, std::move(out)});
  return ok_status();
}

// Y [M, N] = alpha·op(A)·op(B) + beta·C, C broadcast to [M, N].
Status infer_gemm(InferenceContext& ctx) {
  const graph::SymShape& a = ctx.input(0).shape;
  const graph::SymShape& b = ctx.input(1).shape;
  if (a.rank() != 2 || b.rank() != 2) {
    return ctx.error(fmt::format("inputs 'A' {} and 'B' {} must be 2-D", a.to_string(), b.to_string()));
  }
  HXRT_ASSIGN_OR_RETURN(const GemmParams gemm, parse_gemm_params(ctx.node()));
  const graph::Dim& m = gemm.trans_a ? a.dim(1) : a.dim(0);
  const graph::Dim& k_a = gemm.trans_a ? a.dim(0) : a.dim(1);
  const graph::Dim& k_b = gemm.trans_b ? b.dim(1) : b.dim(0);
  const graph::Dim& n = gemm.trans_b ? b.dim(0) : b.dim(1);
  HXRT_RETURN_IF_ERROR(ctx.require_equal(k_a, k_b, fmt::format("inner dim K of op(A) and op(B) (Gemm '{}')",
                                                               ctx.node().name)));
  const graph::SymShape out{m, n};
  if (ctx.has_input(2)) {
    const graph::SymShape& c = ctx.input(2).shape;
    if (c.rank() > 2) return ctx.error(fmt::format("input 'C' {} must have rank <= 2", c.to_string()));
    HXRT_ASSIGN_OR_RETURN(const graph::SymShape broadcast, broadcast_shapes(ctx, c, out));
    if (!(broadcast == out)) {
      return ctx.error(fmt::format("input 'C' {} does not broadcast to {}", c.to_string(), out.to_string()));
    }
  }
  ctx.set_output(0, graph::TensorDesc{ctx.input(0).dtype, out});
  return ok_status();
}

// Y [..., N] = A [..., K] · W [N, K]ᵀ (+ bias [N]).
Status infer_matmulq(InferenceContext& ctx) {
  const graph::TensorDesc& a = ctx.input(0);
  const graph::TensorDesc& w = ctx.input(1);
  if (a.shape.rank() < 1) return ctx.error(fmt::format("input 'A' {} must have rank >= 1", a.shape.to_string()));
  if (w.shape.rank() != 2) {
    return ctx.error(fmt::format("input 'W' {} must be [N, K] (GGUF row layout)", w.shape.to_string()));
  }
  const graph::Dim& k = a.shape.dim(-1);
  const graph::Dim& n = w.shape.dim(0);
  HXRT_RETURN_IF_ERROR(ctx.require_equal(
      k, w.shape.dim(1),
      fmt::format("K of 'A' {} and 'W' {} (MatMulQ '{}')", a.shape.to_string(), w.shape.to_string(), ctx.node().name)));
  const DTypeInfo& info = dtype_info(w.dtype);
  const graph::Dim& w_k = w.shape.dim(1);
  if (info.is_quantized && w_k.is_static() && w_k.value() % info.block_elements != 0) {
    return ctx.error(fmt::format("input 'W' is {} with K={}, not a multiple of its block of {}", w.dtype,
                                 w_k.value(), info.block_elements));
  }
  if (ctx.has_input(2)) {
    const graph::SymShape& bias = ctx.input(2).shape;
    if (bias.rank() != 1) return ctx.error(fmt::format("input 'bias' {} must be [N]", bias.to_string()));
    HXRT_RETURN_IF_ERROR(
        ctx.require_equal(bias.dim(0), n, fmt::format("'bias' length and N of 'W' (MatMulQ '{}')", ctx.node().name)));
  }
  std::vector<graph::Dim> out = a.shape.dims();
  out.back() = n;
  ctx.set_output(0, graph::TensorDesc{DType::kF32, graph::SymShape(std::move(out))});
  return ok_status();
}

// Y_o [..., N_o] = A [..., K] · W_o [N_o, K]ᵀ for each weight W_o (all of one dtype), one output apiece.
Status infer_matmulq_group(InferenceContext& ctx) {
  const graph::TensorDesc& a = ctx.input(0);
  if (a.shape.rank() < 1) return ctx.error(fmt::format("input 'A' {} must have rank >= 1", a.shape.to_string()));
  const size_t n_weights = ctx.num_inputs() - 1;
  if (ctx.num_outputs() != n_weights) {
    return ctx.error(
        fmt::format("has {} weights but {} outputs (one output per weight)", n_weights, ctx.num_outputs()));
  }
  for (size_t o = 0; o < n_weights; ++o) {
    const graph::TensorDesc& w = ctx.input(o + 1);
    if (w.shape.rank() != 2) {
      return ctx.error(fmt::format("weight {} {} must be [N, K] (GGUF row layout)", o, w.shape.to_string()));
    }
    HXRT_RETURN_IF_ERROR(ctx.require_equal(a.shape.dim(-1), w.shape.dim(1),
                                           fmt::format("K of 'A' {} and weight {} {} (MatMulQGroup '{}')",
                                                       a.shape.to_string(), o, w.shape.to_string(), ctx.node().name)));
    const DTypeInfo& info = dtype_info(w.dtype);
    const graph::Dim& w_k = w.shape.dim(1);
    if (info.is_quantized && w_k.is_static() && w_k.value() % info.block_elements != 0) {
      return ctx.error(fmt::format("weight {} is {} with K={}, not a multiple of its block of {}", o, w.dtype,
                                   w_k.value(), info.block_elements));
    }
    std::vector<graph::Dim> out = a.shape.dims();
    out.back() = w.shape.dim(0);
    ctx.set_output(o, graph::TensorDesc{DType::kF32, graph::SymShape(std::move(out))});
  }
  return ok_status();
}

}  // namespace

Status register_linear(OpSchemaRegistry& registry) {
  OpSchema matmul;
  matmul.op_type = "MatMul";
  matmul.since_version = 13;
  matmul.inputs = {{"A"}, {"B"}};
  matmul.outputs = {{"Y"}};
  matmul.type_constraints = {{"T", float_types()}};
  matmul.infer = infer_matmul;
  matmul.doc = "numpy matmul: A [..., M, K] · B [..., K, N] with batch broadcasting; rank-1 operands as in numpy";
  HXRT_RETURN_IF_ERROR(registry.add(std::move(matmul)));

  OpSchema gemm;
  gemm.op_type = "Gemm";
  gemm.since_version = 13;
  gemm.inputs = {{"A"}, {"B"}, {.name = "C", .optional = true}};
  gemm.outputs = {{"Y"}};
  gemm.attrs = {{"alpha", graph::AttrType::kFloat, false, graph::Attribute(1.0)},
                {"beta", graph::AttrType::kFloat, false, graph::Attribute(1.0)},
                {"transA", graph::AttrType::kInt, false, graph::Attribute(int64_t{0})},
                {"transB", graph::AttrType::kInt, false, graph::Attribute(int64_t{0})}};
  gemm.type_constraints = {{"T", float_types()}};
  gemm.infer = infer_gemm;
  gemm.doc = "Y = alpha·op(A)·op(B) + beta·C, C broadcast to [M, N]";
  HXRT_RETURN_IF_ERROR(registry.add(std::move(gemm)));

  OpSchema matmulq;
  matmulq.op_type = "MatMulQ";
  matmulq.domain = "hxrt";
  matmulq.since_version = 1;
  matmulq.inputs = {{"A"}, {.name = "W", .type_var = "TW"}, {.name = "bias", .optional = true}};
  matmulq.outputs = {{"Y"}};
  matmulq.type_constraints = {{"T", float_types()}, {"TW", matmulq_weight_types()}};
  matmulq.infer = infer_matmulq;
  matmulq.doc = "Y [..., N] = A [..., K] · W [N, K]ᵀ (+ bias [N]); W in any GGUF row layout (quant_types.h), f16, bf16 or f32";
  HXRT_RETURN_IF_ERROR(registry.add(std::move(matmulq)));

  // A layer's projections that read the same activation (Q, K, V; gate, up): one launch, A quantized once.
  OpSchema group;
  group.op_type = "MatMulQGroup";
  group.domain = "hxrt";
  group.since_version = 1;
  group.inputs = {{"A"}, {.name = "W", .type_var = "TW", .variadic = true}};
  for (int o = 0; o < kMatMulQGroupMaxWeights; ++o) group.outputs.push_back({fmt::format("Y{}", o)});
  group.type_constraints = {{"T", float_types()}, {"TW", matmulq_weight_types()}};
  group.infer = infer_matmulq_group;
  group.doc = "Y_o [..., N_o] = A [..., K] · W_o [N_o, K]ᵀ for 1 to 4 weights of one dtype (as MatMulQ each)";
  return registry.add(std::move(group));
}

}  // namespace hxrt::ops::schemas
