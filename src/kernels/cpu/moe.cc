// The mixture-of-experts ops on the CPU: MoeRoute (softmax top-k routing) and MatMulQExperts (the expert-batched
// MatMulQ).
//
// Note [Expert batching]
// MatMulQExperts gathers, for each expert, the (token, slot) rows routed to it into one contiguous activation block
// and runs quant_matmul on the expert's [N, K] slice of W, then scatters the rows back. quant_matmul is batch
// invariant (Note [Batch invariance] in quant_matmul.cc: an output depends on its A row and W row only), so a row's
// result is the same bits whatever else was routed to its expert, and the same as one MatMulQ of that row on the
// expert's weight. With weights, Y[t] = w[t,0]·y[t,0] + w[t,1]·y[t,1] + ... left to right in float, as llama.cpp's
// build_moe_ffn adds its weighted expert views.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include <fmt/format.h>

#include "hxrt/base/quant_types.h"
#include "hxrt/ops/params/llm.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/cpu/registration.h"

namespace hxrt::kernels::cpu {
namespace {

// Per token: softmax over the experts (max-subtracted exp in float, the sum in double as ggml's soft_max), the k
// best by probability (stable: the lower id first on ties), their probabilities as weights, normalised / scaled.
Status compute_moe_route(const ops::CpuComputeContext& ctx) {
  const auto& params = ctx.params<ops::MoeRouteParams>();
  const ops::TensorRef& logits = ctx.input(0);
  if (logits.dtype != DType::kF32 || logits.shape.rank() != 2) {
    return invalid_argument("MoeRoute: logits must be f32 [n_tokens, n_experts], got {} {}", logits.dtype, logits.shape);
  }
  const int64_t n_tokens = logits.shape.dim(0), n_experts = logits.shape.dim(1), k = params.k;
  if (k > n_experts) return invalid_argument("MoeRoute: k = {} exceeds the {} experts", k, n_experts);
  const ops::TensorRef& ids = ctx.output(0);
  const ops::TensorRef& weights = ctx.output(1);
  if (ids.num_elements() != n_tokens * k || weights.num_elements() != n_tokens * k) {
    return invalid_argument("MoeRoute: outputs {} and {} do not hold [{}, {}]", ids.shape, weights.shape, n_tokens, k);
  }
  const float* x = logits.data<const float>();
  int32_t* out_ids = ids.data<int32_t>();
  float* out_w = weights.data<float>();
  ctx.pool().parallel_for(n_tokens, 16, [&](int64_t begin, int64_t end) {
    std::vector<float> probs(static_cast<size_t>(n_experts));
    std::vector<int32_t> order(static_cast<size_t>(n_experts));
    for (int64_t t = begin; t < end; ++t) {
      const float* row = x + t * n_experts;
      const float max = *std::max_element(row, row + n_experts);
      double sum = 0.0;
      for (int64_t e = 0; e < n_experts; ++e) {
        probs[static_cast<size_t>(e)] = std::exp(row[e] - max);
        sum += probs[static_cast<size_t>(e)];
      }
      const float inv = static_cast<float>(1.0 / sum);
      for (float& p : probs) p *= inv;
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
        const float pa = probs[static_cast<size_t>(a)], pb = probs[static_cast<size_t>(b)];
        return pa > pb || (pa == pb && a < b);
      });
      float chosen = 0.0f;
      for (int64_t s = 0; s < k; ++s) chosen += probs[static_cast<size_t>(order[static_cast<size_t>(s)])];
      const float denominator = std::max(chosen, 6.103515625e-5f);
      for (int64_t s = 0; s < k; ++s) {
        const int32_t e = order[static_cast<size_t>(s)];
        float w = probs[static_cast<size_t>(e)];
        if (params.normalize) w /= denominator;
        if (params.scale != 0.0f && params.scale != 1.0f) w *= params.scale;
        out_ids[t * k + s] = e;
        out_w[t * k + s] = w;
      }
    }
  });
  return ok_status();
}

Status compute_matmulq_experts(const ops::CpuComputeContext& ctx) {
  const ops::TensorRef& a = ctx.input(0);
  const ops::TensorRef& w = ctx.input(1);
  const ops::TensorRef& ids = ctx.input(2);
  const bool weighted = ctx.has_input(3);
  HXRT_ASSIGN_OR_RETURN(const ops::ExpertsGeometry g,
                        ops::experts_geometry(a.shape, w.shape, ids.shape, weighted ? &ctx.input(3).shape : nullptr));
  if (a.dtype != DType::kF32 || ids.dtype != DType::kI32 || (weighted && ctx.input(3).dtype != DType::kF32)) {
    return invalid_argument("MatMulQExperts: A, ids and weights must be f32, i32 and f32, got {}, {}{}", a.dtype,
                            ids.dtype, weighted ? fmt::format(" and {}", ctx.input(3).dtype) : std::string());
  }
  const ops::TensorRef& y = ctx.output(0);
  const int64_t rows = g.n_tokens * g.n_slots;
  if (y.num_elements() != (weighted ? g.n_tokens : rows) * g.n) {
    return invalid_argument("MatMulQExperts: output {} does not fit {} tokens x {} slots x {}", y.shape, g.n_tokens,
                            g.n_slots, g.n);
  }
  HXRT_ASSIGN_OR_RETURN(const uint64_t expert_bytes, storage_bytes(w.dtype, static_cast<uint64_t>(g.n * g.k)));
  if (w.view.size < expert_bytes * static_cast<uint64_t>(g.n_experts)) {
    return invalid_argument("MatMulQExperts: W {} {} needs {} bytes, buffer holds {}", w.dtype, w.shape,
                            expert_bytes * static_cast<uint64_t>(g.n_experts), w.view.size);
  }
  const int32_t* id = ids.data<const int32_t>();
  // Rows by expert (Note [Expert batching]); an id out of range fails before anything is computed.
  std::vector<std::vector<int64_t>> routed(static_cast<size_t>(g.n_experts));
  for (int64_t r = 0; r < rows; ++r) {
    if (id[r] < 0 || id[r] >= g.n_experts) {
      return invalid_argument("MatMulQExperts: ids[{}, {}] = {} is outside the {} experts", r / g.n_slots,
                              r % g.n_slots, id[r], g.n_experts);
    }
    routed[static_cast<size_t>(id[r])].push_back(r);
  }
  const float* pa = a.data<const float>();
  std::vector<float> per_slot(weighted ? static_cast<size_t>(rows * g.n) : 0);
  float* out = weighted ? per_slot.data() : y.data<float>();
  std::vector<float> gathered, result;
  QuantMatMulTiles tiles;
  tiles.tile_m = ctx.tiling().get("tile_m", 32);
  tiles.tile_n = ctx.tiling().get("tile_n", 64);
  for (int64_t e = 0; e < g.n_experts; ++e) {
    const std::vector<int64_t>& list = routed[static_cast<size_t>(e)];
    if (list.empty()) continue;
    const auto m = static_cast<int64_t>(list.size());
    gathered.resize(static_cast<size_t>(m * g.k));
    result.resize(static_cast<size_t>(m * g.n));
    for (int64_t i = 0; i < m; ++i) {
      const int64_t r = list[static_cast<size_t>(i)];
      const float* src = pa + (g.per_slot_a ? r : r / g.n_slots) * g.k;
      std::memcpy(gathered.data() + i * g.k, src, static_cast<size_t>(g.k) * sizeof(float));
    }
    const auto* expert = static_cast<const std::byte*>(w.data()) + static_cast<uint64_t>(e) * expert_bytes;
    HXRT_RETURN_IF_ERROR(quant_matmul(w.dtype, gathered.data(), m, g.k, expert, g.n, nullptr, result.data(), tiles,
                                      quant_best_isa(), &ctx.pool()));
    for (int64_t i = 0; i < m; ++i) {
      std::memcpy(out + list[static_cast<size_t>(i)] * g.n, result.data() + i * g.n, static_cast<size_t>(g.n) * sizeof(float));
    }
  }
  if (weighted) {
    const float* wt = ctx.input(3).data<const float>();
    float* py = y.data<float>();
    for (int64_t t = 0; t < g.n_tokens; ++t) {
      float* dst = py + t * g.n;
      for (int64_t j = 0; j < g.n; ++j) dst[j] = wt[t * g.n_slots] * per_slot[static_cast<size_t>(t * g.n_slots * g.n + j)];
      for (int64_t s = 1; s < g.n_slots; ++s) {
        const float ws = wt[t * g.n_slots + s];
        const float* src = per_slot.data() + (t * g.n_slots + s) * g.n;
        for (int64_t j = 0; j < g.n; ++j) dst[j] = dst[j] + ws * src[j];
      }
    }
  }
  return ok_status();
}

}  // namespace

Status register_moe(ops::KernelRegistry& registry) {
  ops::KernelDef route = cpu_kernel_def("MoeRoute", "hxrt", "MoeRouteSoftmaxTopK",
                                        "softmax over the experts, stable top-k, optional normalisation and scale");
  route.input_dtypes = {{DType::kF32}};
  route.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_moe_route_params(node));
  };
  route.launch = ops::cpu_launch(route.name, compute_moe_route);
  HXRT_RETURN_IF_ERROR(registry.add(std::move(route)));

  ops::KernelDef experts = cpu_kernel_def(
      "MatMulQExperts", "hxrt", "MatMulQExperts",
      fmt::format("rows gathered per expert, one MatMulQ per expert ({}), batch invariant", quant_isa_name(quant_best_isa())));
  experts.input_dtypes = {{DType::kF32}, matmulq_weight_types(), {DType::kI32}, {DType::kF32}};
  experts.launch = ops::cpu_launch(experts.name, compute_matmulq_experts);
  return registry.add(std::move(experts));
}

}  // namespace hxrt::kernels::cpu
