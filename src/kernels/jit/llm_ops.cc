// The JIT backends' kernels of the LLM ops (docs/ops.md, "LLM ops"): GatherRows and PagedAttention.
//
// GatherRows: one work-item per output element, widening its row's element (f32, f16, bf16, q8_0, q4_0, q4_1) to f32
// with the CPU kernel's arithmetic (bit-identical).
//
// PagedAttention is two launches on the stream (Note [KV cache state inputs] in ops/schemas/llm.cc):
//   kv_write: one work-item per (token, kv head, dim) stores this launch's k and v into their cache slots (f16 caches
//             through vstore_half; arithmetic is always float);
//   attend:   one work-group per (token, query head). Its work-items score the visible positions into local memory
//             (MAX_CTX = a power of two >= max_blocks · block_size), work-item 0 sums the exponentials left to right,
//             and each work-item accumulates V for its dims.
// Bad indices (token_seq, positions, block table entries) are skipped and fail the stream with INVALID_ARGUMENT
// (Note [Kernel status words] in jit_program.h); unlike the CPU kernel, valid tokens of such a launch may already have
// written their slots.
//
// Note [Attention arithmetic]
// attend repeats the CPU kernel's float operations per token (kernels/cpu/llm_ops.cc), so the devices agree bit for
// bit (Note [Matching the CPU kernels] in jit_program.cc) and results do not depend on the batch: q·k as eight lane
// sums combined ((0+1)+(2+3))+((4+5)+(6+7)), scaled; a max-subtracted exp (hx_exp); the sum left to right; y += p·v in
// position order. With an f16 cache the query and the probabilities are rounded to f16 first, as the CPU kernel's
// half-precision products. Where the CPU kernel runs its AVX2/FMA dot and axpy (chosen per host), HX_CPU_FMA fuses
// the same multiply-adds (all but a head_dim tail of fewer than 8).
#include <algorithm>
#include <cmath>
#include <memory>
#include <span>
#include <string>

#include <fmt/format.h>

#include "hxrt/ops/params/llm.h"
#include "kernels/jit/jit_family.h"

namespace hxrt::kernels::jit {
namespace {

constexpr uint32_t kGroup = 128;           // work-items per group of the per-element kernels
constexpr int64_t kAttendGroup = 64;       // work-items per (token, head)
constexpr int64_t kMinContext = 256;       // smallest MAX_CTX, so that short contexts share one program


// The DTYPE build option of a GatherRows table; -1 when it is not supported.
int table_code(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 0;
    case DType::kF16: return 1;
    case DType::kBF16: return 2;
    case DType::kQ8_0: return 3;
    case DType::kQ4_0: return 4;
    case DType::kQ4_1: return 5;
    default: return -1;
  }
}

ops::KernelDef gather_rows_kernel(const Backend& backend, std::shared_ptr<const Program> program) {
  ops::KernelDef def = make_def(backend, "GatherRows", "hxrt", 1, "GatherRowsDequant",
                                  "one work-item per element, widening f32/f16/bf16/q8_0/q4_0/q4_1 rows to f32");
  def.input_dtypes = {{DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_1},
                      {DType::kI32, DType::kI64}};
  def.tiling = [backend](const ops::TilingQuery& query) -> Result<ops::Tiling> {
    const int64_t elements = query.outputs.empty() ? 0 : query.outputs[0].num_elements();
    HXRT_RETURN_IF_ERROR(check_int32(elements, "GatherRows outputs"));
    ops::Tiling tiling;
    tiling.launch = launch_1d(elements, kGroup);
    tiling.values = {{"wg", kGroup}};
    return tiling;
  };
  def.launch = [backend, program](hal::Stream& stream, const ops::KernelLaunch& launch) -> Status {
    const ops::TensorRef& data = launch.inputs[0];
    const ops::TensorRef& indices = launch.inputs[1];
    const ops::TensorRef& y = launch.outputs[0];
    if (data.shape.rank() != 2 || table_code(data.dtype) < 0) {
      return invalid_argument("GatherRows: data must be a [n_rows, row_size] table of f32/f16/bf16/q8_0/q4_0/q4_1, got {} {}",
                              data.dtype, data.shape);
    }
    const int64_t row_size = data.shape.dim(1);
    if (dtype_info(data.dtype).is_quantized && row_size % 32 != 0) {
      return invalid_argument("GatherRows: rows of {} values are not whole {} blocks", row_size, data.dtype);
    }
    HXRT_ASSIGN_OR_RETURN(const uint64_t row_bytes, storage_bytes(data.dtype, static_cast<uint64_t>(row_size)));
    if (y.num_elements() == 0) return ok_status();
    std::vector<hal::KernelArg> args;
    backend.add_tensor_arg(args, data);
    backend.add_tensor_arg(args, indices);
    backend.add_tensor_arg(args, y);
    for (int64_t v : {indices.num_elements(), data.shape.dim(0), row_size}) {
      args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(v)));
    }
    args.push_back(hal::KernelArg::scalar(row_bytes));
    const std::string options = gather_rows_options(table_code(data.dtype), indices.dtype == DType::kI64);
    return launch_program(stream, *program, "gather_rows", options, launch.tiling->launch, args);
  };
  return def;
}

// Whether the CPU kernel's attention takes its AVX2/FMA path on this host (kernels/cpu/llm_ops.cc); the OpenCL
// kernel then fuses the same products (Note [Attention arithmetic]).
bool cpu_attention_fma() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool fma =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  return fma;
#else
  return false;
#endif
}

// Dims of one PagedAttention launch (shapes in llm.cc's schema).
struct AttentionGeometry final : ops::TypedGeometry<AttentionGeometry> {
  static constexpr std::string_view kName = "jit::AttentionGeometry";
  int64_t n_tokens = 0, n_heads = 0, head_dim = 0, n_kv = 0;
  int64_t n_layers = 0, n_blocks = 0, block_size = 0, n_seqs = 0, max_blocks = 0;
};

Result<AttentionGeometry> attention_geometry(std::span<const ops::TensorRef> in) {
  if (in.size() < 8) return invalid_argument("PagedAttention takes 8 inputs, got {}", in.size());
  AttentionGeometry g;
  g.n_tokens = in[0].shape.dim(0);
  g.n_heads = in[0].shape.dim(1);
  g.head_dim = in[0].shape.dim(2);
  g.n_kv = in[1].shape.dim(1);
  g.n_layers = in[3].shape.dim(0);
  g.n_blocks = in[3].shape.dim(1);
  g.block_size = in[3].shape.dim(2);
  g.n_seqs = in[5].shape.dim(0);
  g.max_blocks = in[5].shape.dim(1);
  if (g.n_kv <= 0 || g.n_heads % g.n_kv != 0) {
    return invalid_argument("PagedAttention: n_heads {} is not a multiple of n_kv_heads {}", g.n_heads, g.n_kv);
  }
  if (g.block_size <= 0) return invalid_argument("PagedAttention: block_size {} must be positive", g.block_size);
  HXRT_RETURN_IF_ERROR(check_int32(g.n_tokens * g.n_kv * g.head_dim, "PagedAttention k/v elements"));
  HXRT_RETURN_IF_ERROR(check_int32(g.n_tokens * g.n_heads, "PagedAttention (token, head) groups"));
  HXRT_RETURN_IF_ERROR(check_int32(g.n_seqs * g.max_blocks, "PagedAttention block table entries"));
  HXRT_RETURN_IF_ERROR(check_int32(g.max_blocks * g.block_size, "PagedAttention context"));
  return g;
}

ops::KernelDef paged_attention_kernel(const Backend& backend, std::shared_ptr<const Program> program) {
  ops::KernelDef def = make_def(backend, "PagedAttention", "hxrt", 1, "PagedAttentionF32",
                                  "kv_write then one work-group per (token, head); f32 math over an f16/f32 paged "
                                  "cache, batch invariant");
  def.input_dtypes = {{DType::kF32}, {DType::kF32}, {DType::kF32}, {DType::kF16, DType::kF32},
                      {DType::kF16, DType::kF32}, {DType::kI32}, {DType::kI32}, {DType::kI32}};
  def.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_paged_attention_params(node));
  };
  def.tiling = [backend](const ops::TilingQuery& query) -> Result<ops::Tiling> {
    HXRT_ASSIGN_OR_RETURN(const AttentionGeometry g, attention_geometry(query.inputs));
    ops::Tiling tiling;
    tiling.launch.grid = {static_cast<uint32_t>(std::max<int64_t>(1, g.n_tokens * g.n_heads)), 1, 1};
    tiling.launch.block = {static_cast<uint32_t>(kAttendGroup), 1, 1};
    const int64_t max_ctx = next_power_of_two(std::max(kMinContext, g.max_blocks * g.block_size));
    if (backend.max_attention_context > 0 && max_ctx > backend.max_attention_context) {
      return unimplemented("PagedAttention: {} attends to at most {} positions, the block tables span {}",
                           backend.name, backend.max_attention_context, g.max_blocks * g.block_size);
    }
    tiling.values = {{"wg", kAttendGroup}, {"max_ctx", max_ctx}, {"head_dim", g.head_dim}};
    tiling.geometry = std::make_shared<AttentionGeometry>(g);
    return tiling;
  };
  def.launch = [backend, program](hal::Stream& stream, const ops::KernelLaunch& launch) -> Status {
    const auto& params = launch.params_as<ops::PagedAttentionParams>();
    const auto& g = launch.tiling->geometry_as<AttentionGeometry>();
    if (params.layer >= g.n_layers) {
      return invalid_argument("PagedAttention: layer {} is outside the cache's {} layers", params.layer, g.n_layers);
    }
    if (g.n_tokens == 0) return ok_status();
    const std::span<const ops::TensorRef> in = launch.inputs;
    const float scale = params.scale != 0.0f ? params.scale : 1.0f / std::sqrt(static_cast<float>(g.head_dim));
    const std::string options = attention_options(in[3].dtype == DType::kF16, cpu_attention_fma(),
                                                  launch.tiling->get("max_ctx"), launch.tiling->get("head_dim"));
    const auto cache_dims = [&](std::vector<hal::KernelArg>& args) {
      for (int64_t v : {g.n_blocks, g.block_size, g.max_blocks, g.n_seqs, params.layer}) {
        args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(v)));
      }
    };

    std::vector<hal::KernelArg> write;  // k, v, caches, tables, token_seq, positions
    for (size_t i : {1, 2, 3, 4, 5, 6, 7}) backend.add_tensor_arg(write, in[i]);
    for (int64_t v : {g.n_tokens, g.n_kv, g.head_dim}) write.push_back(hal::KernelArg::scalar(static_cast<int32_t>(v)));
    cache_dims(write);
    HXRT_RETURN_IF_ERROR(
        launch_program(stream, *program, "kv_write", options, launch_1d(g.n_tokens * g.n_kv * g.head_dim, kGroup), write));

    std::vector<hal::KernelArg> attend;  // q, caches, tables, token_seq, positions, out
    for (size_t i : {0, 3, 4, 5, 6, 7}) backend.add_tensor_arg(attend, in[i]);
    backend.add_tensor_arg(attend, launch.outputs[0]);
    for (int64_t v : {g.n_heads, g.n_kv}) attend.push_back(hal::KernelArg::scalar(static_cast<int32_t>(v)));
    cache_dims(attend);
    attend.push_back(hal::KernelArg::scalar(scale));
    attend.push_back(hal::KernelArg::scalar(static_cast<int32_t>(params.window)));
    attend.push_back(hal::KernelArg::scalar(params.softcap));
    return launch_program(stream, *program, "attend", options, launch.tiling->launch, attend);
  };
  return def;
}

}  // namespace

std::string gather_rows_options(int dtype_code, bool i64_indices) {
  return fmt::format("-D DTYPE={} -D IDX_I64={}", dtype_code, i64_indices ? 1 : 0);
}

std::string attention_options(bool cache_f16, bool cpu_fma, int64_t max_ctx, int64_t head_dim) {
  return fmt::format("-D CACHE_F16={} -D HX_CPU_FMA={} -D WG={} -D MAX_CTX={} -D HEAD_DIM={}", cache_f16 ? 1 : 0,
                     cpu_fma ? 1 : 0, kAttendGroup, max_ctx, head_dim);
}

Status register_llm_ops(ops::KernelRegistry& registry, const Backend& backend, std::shared_ptr<const Program> program) {
  HXRT_RETURN_IF_ERROR(registry.add(gather_rows_kernel(backend, program)));
  return registry.add(paged_attention_kernel(backend, program));
}

}  // namespace hxrt::kernels::jit
