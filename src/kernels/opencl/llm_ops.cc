// OpenCL kernels of the LLM ops (docs/ops.md, "LLM ops"): GatherRows and PagedAttention.
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
#include "kernels/opencl/jit_program.h"
#include "kernels/opencl/registration.h"

namespace hxrt::kernels::opencl {
namespace {

constexpr uint32_t kGroup = 128;           // work-items per group of the per-element kernels
constexpr int64_t kAttendGroup = 64;       // work-items per (token, head)
constexpr int64_t kMinContext = 256;       // smallest MAX_CTX, so that short contexts share one program

constexpr std::string_view kSource = R"CLC(
// DTYPE: 0 f32, 1 f16, 2 bf16, 3 q8_0, 4 q4_0, 5 q4_1.
#ifndef DTYPE
#define DTYPE 0
#endif
#ifndef IDX_I64
#define IDX_I64 0
#endif
#ifndef CACHE_F16
#define CACHE_F16 1
#endif
#ifndef WG
#define WG 64
#endif
#ifndef MAX_CTX
#define MAX_CTX 256
#endif
#ifndef HEAD_DIM
#define HEAD_DIM 64
#endif
#ifndef HX_CPU_FMA
#define HX_CPU_FMA 0
#endif

__kernel void gather_rows(__global const uchar* d_buf, ulong d_off, __global const uchar* i_buf, ulong i_off,
                          __global uchar* y_buf, ulong y_off, int n, int n_rows, int row_size, ulong row_bytes,
                          __global volatile int* ctl) {
  const int gid = get_global_id(0);
  if (gid >= n * row_size) return;
  const int i = gid / row_size;
  const int e = gid % row_size;
#if IDX_I64
  const long row = HX_AT(const long, i_buf, i_off)[i];
#else
  const long row = HX_AT(const int, i_buf, i_off)[i];
#endif
  if (row < 0 || row >= n_rows) {
    ctl[1] = HX_INVALID_ARGUMENT;
    return;
  }
  __global const uchar* src = HX_AT(const uchar, d_buf, d_off) + (ulong)row * row_bytes;
#if DTYPE == 0
  const float v = ((__global const float*)src)[e];
#elif DTYPE == 1
  const float v = vload_half(e, (__global const half*)src);
#elif DTYPE == 2
  const float v = as_float((uint)(((__global const ushort*)src)[e]) << 16);
#elif DTYPE == 3
  __global const uchar* block = src + (e / 32) * 34;
  const float v = vload_half(0, (__global const half*)block) * (float)(((__global const char*)(block + 2))[e % 32]);
#else
  const int q = e % 32;
#if DTYPE == 4
  __global const uchar* block = src + (e / 32) * 18;
  const uchar byte = block[2 + (q & 15)];
#else
  __global const uchar* block = src + (e / 32) * 20;
  const uchar byte = block[4 + (q & 15)];
#endif
  const int nibble = q < 16 ? (byte & 0x0F) : (byte >> 4);
  const float d = vload_half(0, (__global const half*)block);
#if DTYPE == 4
  const float v = d * (float)(nibble - 8);
#else
  const float v = d * (float)nibble + vload_half(1, (__global const half*)block);
#endif
#endif
  HX_AT(float, y_buf, y_off)[gid] = v;
}

#if CACHE_F16
#define CACHE_LOAD(cache, index) vload_half((index), (__global const half*)(cache))
#define CACHE_STORE(value, cache, index) vstore_half((value), (index), (__global half*)(cache))
#else
#define CACHE_LOAD(cache, index) (((__global const float*)(cache))[index])
#define CACHE_STORE(value, cache, index) (((__global float*)(cache))[index] = (value))
#endif

// Shapes: k/v [n_tokens, n_kv, head_dim]; caches [n_layers, n_blocks, block_size, n_kv, head_dim];
// block_tables [n_seqs, max_blocks]; token_seq/positions [n_tokens].
__kernel void kv_write(__global const uchar* k_buf, ulong k_off, __global const uchar* v_buf, ulong v_off,
                       __global uchar* kc_buf, ulong kc_off, __global uchar* vc_buf, ulong vc_off,
                       __global const uchar* tab_buf, ulong tab_off, __global const uchar* seq_buf, ulong seq_off,
                       __global const uchar* pos_buf, ulong pos_off, int n_tokens, int n_kv, int head_dim,
                       int n_blocks, int block_size, int max_blocks, int n_seqs, int layer,
                       __global volatile int* ctl) {
  const int gid = get_global_id(0);
  if (gid >= n_tokens * n_kv * head_dim) return;
  const int t = gid / (n_kv * head_dim);
  const int s = HX_AT(const int, seq_buf, seq_off)[t];
  const int p = HX_AT(const int, pos_buf, pos_off)[t];
  if (s < 0 || s >= n_seqs || p < 0 || p / block_size >= max_blocks) {
    ctl[1] = HX_INVALID_ARGUMENT;
    return;
  }
  const int block = HX_AT(const int, tab_buf, tab_off)[s * max_blocks + p / block_size];
  if (block < 0 || block >= n_blocks) {
    ctl[1] = HX_INVALID_ARGUMENT;
    return;
  }
  const long slot = (long)layer * n_blocks * block_size + (long)block * block_size + p % block_size;
  const long index = slot * n_kv * head_dim + gid % (n_kv * head_dim);
  CACHE_STORE(HX_AT(const float, k_buf, k_off)[gid], HX_AT(uchar, kc_buf, kc_off), index);
  CACHE_STORE(HX_AT(const float, v_buf, v_off)[gid], HX_AT(uchar, vc_buf, vc_off), index);
}

// One group per (token, query head); q/out [n_tokens, n_heads, head_dim]. Note [Attention arithmetic].
__kernel void attend(__global const uchar* q_buf, ulong q_off, __global const uchar* kc_buf, ulong kc_off,
                     __global const uchar* vc_buf, ulong vc_off, __global const uchar* tab_buf, ulong tab_off,
                     __global const uchar* seq_buf, ulong seq_off, __global const uchar* pos_buf, ulong pos_off,
                     __global uchar* out_buf, ulong out_off, int n_heads, int n_kv, int n_blocks, int block_size,
                     int max_blocks, int n_seqs, int layer, float scale, __global volatile int* ctl) {
  __local float scores[MAX_CTX];  // (n_visible) scores, then their exponentials
  __local float query[HEAD_DIM];
  __local float maxima[WG];
  __local float inv_sum;
  __local int stop;
  const int lid = get_local_id(0);
  const int t = get_group_id(0) / n_heads;
  const int h = get_group_id(0) % n_heads;
  const int g = h / (n_heads / n_kv);
  const int s = HX_AT(const int, seq_buf, seq_off)[t];
  const int p = HX_AT(const int, pos_buf, pos_off)[t];
  if (s < 0 || s >= n_seqs || p < 0 || p / block_size >= max_blocks || p >= MAX_CTX) {
    if (lid == 0) ctl[1] = HX_INVALID_ARGUMENT;
    return;  // uniform: every work-item of the group read the same token
  }
  if (lid == 0) stop = ctl[0];
  __global const float* qh = HX_AT(const float, q_buf, q_off) + ((long)t * n_heads + h) * HEAD_DIM;
  for (int d = lid; d < HEAD_DIM; d += WG) query[d] = CACHE_F16 ? hx_round_half(qh[d]) : qh[d];
  barrier(CLK_LOCAL_MEM_FENCE);
  const int n_visible = p + 1;
  __global const int* table = HX_AT(const int, tab_buf, tab_off) + (long)s * max_blocks;
  __global const uchar* kc = HX_AT(const uchar, kc_buf, kc_off);
  __global const uchar* vc = HX_AT(const uchar, vc_buf, vc_off);
  const long layer_slot = (long)layer * n_blocks * block_size;

  float local_max = -INFINITY;
  for (int j = lid; j < n_visible; j += WG) {
    const int block = table[j / block_size];
    float score = 0.0f;
    if (block < 0 || block >= n_blocks) {
      ctl[1] = HX_INVALID_ARGUMENT;
    } else {
      const long row = ((layer_slot + (long)block * block_size + j % block_size) * n_kv + g) * HEAD_DIM;
      float partial[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
      int d = 0;
      for (; d + 8 <= HEAD_DIM; d += 8) {
        for (int u = 0; u < 8; ++u) {
#if HX_CPU_FMA
          partial[u] = fma(query[d + u], CACHE_LOAD(kc, row + d + u), partial[u]);
#else
          partial[u] += query[d + u] * CACHE_LOAD(kc, row + d + u);
#endif
        }
      }
      for (; d < HEAD_DIM; ++d) partial[d % 8] += query[d] * CACHE_LOAD(kc, row + d);
      score = (((partial[0] + partial[1]) + (partial[2] + partial[3])) +
               ((partial[4] + partial[5]) + (partial[6] + partial[7]))) * scale;
    }
    scores[j] = score;
    local_max = score > local_max ? score : local_max;
  }
  maxima[lid] = local_max;
  for (int stride = WG / 2; stride > 0; stride /= 2) {
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < stride && maxima[lid + stride] > maxima[lid]) maxima[lid] = maxima[lid + stride];
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (stop != 0) {
    if (lid == 0) ctl[1] = HX_ABORTED;
    return;
  }
  const float max_score = maxima[0];
  for (int j = lid; j < n_visible; j += WG) scores[j] = hx_exp(scores[j] - max_score);
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid == 0) {
    float sum = 0.0f;
    for (int j = 0; j < n_visible; ++j) sum += scores[j];
    inv_sum = 1.0f / sum;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  const float inv = inv_sum;
  __global float* yh = HX_AT(float, out_buf, out_off) + ((long)t * n_heads + h) * HEAD_DIM;
  for (int d = lid; d < HEAD_DIM; d += WG) {
    const bool fused = HX_CPU_FMA && d < (HEAD_DIM & ~7);  // the CPU's AVX2 axpy fuses all but the tail
    float acc = 0.0f;
    for (int j = 0; j < n_visible; ++j) {
      const int block = table[j / block_size];
      if (block < 0 || block >= n_blocks) continue;
      const long row = ((layer_slot + (long)block * block_size + j % block_size) * n_kv + g) * HEAD_DIM;
      const float prob = CACHE_F16 ? hx_round_half(scores[j] * inv) : scores[j] * inv;
      const float v = CACHE_LOAD(vc, row + d);
      acc = fused ? fma(prob, v, acc) : acc + prob * v;
    }
    yh[d] = acc;
  }
}
)CLC";

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

ops::KernelDef gather_rows_kernel(std::shared_ptr<const JitProgram> program) {
  ops::KernelDef def = opencl_def("GatherRows", "hxrt", 1, "GatherRowsDequant",
                                  "one work-item per element, widening f32/f16/bf16/q8_0/q4_0/q4_1 rows to f32");
  def.input_dtypes = {{DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_1},
                      {DType::kI32, DType::kI64}};
  def.tiling = [](const ops::TilingQuery& query) -> Result<ops::Tiling> {
    const int64_t elements = query.outputs.empty() ? 0 : query.outputs[0].num_elements();
    HXRT_RETURN_IF_ERROR(check_int32(elements, "GatherRows outputs"));
    ops::Tiling tiling;
    tiling.launch = launch_1d(elements, kGroup);
    tiling.values = {{"wg", kGroup}};
    return tiling;
  };
  def.launch = [program](hal::Stream& stream, const ops::KernelLaunch& launch) -> Status {
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
    add_tensor_arg(args, data);
    add_tensor_arg(args, indices);
    add_tensor_arg(args, y);
    for (int64_t v : {indices.num_elements(), data.shape.dim(0), row_size}) {
      args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(v)));
    }
    args.push_back(hal::KernelArg::scalar(row_bytes));
    const std::string options =
        fmt::format("-D DTYPE={} -D IDX_I64={}", table_code(data.dtype), indices.dtype == DType::kI64 ? 1 : 0);
    return launch_kernel(stream, *program, "gather_rows", options, launch.tiling->launch, args);
  };
  return def;
}

// Whether the CPU kernel's attention takes its AVX2/FMA path on this host (kernels/cpu/llm_ops.cc); the OpenCL
// kernel then fuses the same products (Note [Attention arithmetic]).
bool cpu_attention_fma() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return fma;
#else
  return false;
#endif
}

// Dims of one PagedAttention launch (shapes in llm.cc's schema).
struct AttentionGeometry final : ops::TypedGeometry<AttentionGeometry> {
  static constexpr std::string_view kName = "opencl::AttentionGeometry";
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

ops::KernelDef paged_attention_kernel(std::shared_ptr<const JitProgram> program) {
  ops::KernelDef def = opencl_def("PagedAttention", "hxrt", 1, "PagedAttentionF32",
                                  "kv_write then one work-group per (token, head); f32 math over an f16/f32 paged "
                                  "cache, batch invariant");
  def.input_dtypes = {{DType::kF32}, {DType::kF32}, {DType::kF32}, {DType::kF16, DType::kF32},
                      {DType::kF16, DType::kF32}, {DType::kI32}, {DType::kI32}, {DType::kI32}};
  def.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_paged_attention_params(node));
  };
  def.tiling = [](const ops::TilingQuery& query) -> Result<ops::Tiling> {
    HXRT_ASSIGN_OR_RETURN(const AttentionGeometry g, attention_geometry(query.inputs));
    ops::Tiling tiling;
    tiling.launch.grid = {static_cast<uint32_t>(std::max<int64_t>(1, g.n_tokens * g.n_heads)), 1, 1};
    tiling.launch.block = {static_cast<uint32_t>(kAttendGroup), 1, 1};
    tiling.values = {{"wg", kAttendGroup},
                     {"max_ctx", next_power_of_two(std::max(kMinContext, g.max_blocks * g.block_size))},
                     {"head_dim", g.head_dim}};
    tiling.geometry = std::make_shared<AttentionGeometry>(g);
    return tiling;
  };
  def.launch = [program](hal::Stream& stream, const ops::KernelLaunch& launch) -> Status {
    const auto& params = launch.params_as<ops::PagedAttentionParams>();
    const auto& g = launch.tiling->geometry_as<AttentionGeometry>();
    if (params.layer >= g.n_layers) {
      return invalid_argument("PagedAttention: layer {} is outside the cache's {} layers", params.layer, g.n_layers);
    }
    if (g.n_tokens == 0) return ok_status();
    const std::span<const ops::TensorRef> in = launch.inputs;
    const float scale = params.scale != 0.0f ? params.scale : 1.0f / std::sqrt(static_cast<float>(g.head_dim));
    const std::string options =
        fmt::format("-D CACHE_F16={} -D HX_CPU_FMA={}{}", in[3].dtype == DType::kF16 ? 1 : 0, cpu_attention_fma() ? 1 : 0,
                    tiling_defines(*launch.tiling, {"wg", "max_ctx", "head_dim"}));
    const auto cache_dims = [&](std::vector<hal::KernelArg>& args) {
      for (int64_t v : {g.n_blocks, g.block_size, g.max_blocks, g.n_seqs, params.layer}) {
        args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(v)));
      }
    };

    std::vector<hal::KernelArg> write;  // k, v, caches, tables, token_seq, positions
    for (size_t i : {1, 2, 3, 4, 5, 6, 7}) add_tensor_arg(write, in[i]);
    for (int64_t v : {g.n_tokens, g.n_kv, g.head_dim}) write.push_back(hal::KernelArg::scalar(static_cast<int32_t>(v)));
    cache_dims(write);
    HXRT_RETURN_IF_ERROR(
        launch_kernel(stream, *program, "kv_write", options, launch_1d(g.n_tokens * g.n_kv * g.head_dim, kGroup), write));

    std::vector<hal::KernelArg> attend;  // q, caches, tables, token_seq, positions, out
    for (size_t i : {0, 3, 4, 5, 6, 7}) add_tensor_arg(attend, in[i]);
    add_tensor_arg(attend, launch.outputs[0]);
    for (int64_t v : {g.n_heads, g.n_kv}) attend.push_back(hal::KernelArg::scalar(static_cast<int32_t>(v)));
    cache_dims(attend);
    attend.push_back(hal::KernelArg::scalar(scale));
    return launch_kernel(stream, *program, "attend", options, launch.tiling->launch, attend);
  };
  return def;
}

}  // namespace

Status register_llm_ops(ops::KernelRegistry& registry) {
  auto program = std::make_shared<const JitProgram>("hxrt_llm_ops", kSource);
  HXRT_RETURN_IF_ERROR(registry.add(gather_rows_kernel(program)));
  return registry.add(paged_attention_kernel(program));
}

}  // namespace hxrt::kernels::opencl
