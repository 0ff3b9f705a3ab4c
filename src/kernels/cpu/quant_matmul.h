// MatMulQ on the CPU: Y[m, n] = A[m, k] · W[n, k]ᵀ (+ bias[n]) with W in any GGUF layout of quant_types.h (the
// 32-value types, the K-quants, iq4_nl/iq4_xs) or f16, bf16, f32.
//
// Quantized W: each activation row is first quantized to BlockQ8A blocks (32 values: float scale, int8 values and
// the scaled block sum; for the 256-value super-block types the eight blocks of a super-block share one scale, as
// llama.cpp's q8_K), then every output is a sum over blocks (super-blocks) of integer dot products scaled in float
// (AVX-512 VNNI: 512-bit vpdpbusd on two W rows at once, Note [VNNI-512 pairs] in quant_matmul_vnni.h; AVX2
// vpmaddubsw; or scalar) — for q4_0 and iq4_nl one exact integer and one float step per block (Note [Block
// integers] in quant_matmul_blockint.h). f16 and f32 W use float dot products on the f32 activations.
//
// Note [Batch invariance]: the value of Y[i, j] depends only on row i of A, row j of W, the weight type and the ISA —
// never on m, on the tiling or on which other rows share the batch. Every (i, j) goes through the same sequence of
// floating-point operations: the multi-row micro-kernels run, for each row, exactly the instructions of the one-row
// kernel, and nothing is reduced across rows or split along K. So prefill, decode and batched decode give a
// request bit-identical logits. (AVX2 and AVX-512 VNNI give the same bits; the scalar path may differ in the last.)
//
// Thread-safety: every function is reentrant.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "hxrt/base/dtype.h"
#include "hxrt/base/quant_blocks.h"
#include "hxrt/base/status.h"
#include "hxrt/base/thread_pool.h"
#include "hxrt/ops/kernel_registry.h"

namespace hxrt::kernels::cpu {

inline constexpr int64_t kQuantBlock = 32;  // values per activation block (and per block of the 32-value types)
inline constexpr int kMaxGroupWeights = 4;  // weights (and outputs) of one MatMulQGroup
inline constexpr int kQuantTileRows = 4;    // activation rows one micro-kernel call computes together
inline constexpr int kSuperBlockRuns = 8;   // activation blocks of one K-quant super-block (256 values)

// A quantized activation block: value i ≈ d * qs[i]; s = d * Σ qs (for the offset of q4_1); sum[h] = Σ qs
// over values 16·h .. 16·h + 15, exactly (for the 16-value groups of the K-quants, quant_matmul_kquant.h).
struct BlockQ8A {
  float d;
  float s;
  int8_t qs[32];
  int16_t sum[2];
};
static_assert(sizeof(BlockQ8A) == 44);

enum class QuantIsa : uint8_t { kScalar, kAvx2, kAvx512Vnni };
std::string_view quant_isa_name(QuantIsa isa);
bool quant_isa_supported(QuantIsa isa);
QuantIsa quant_best_isa();  // detected once

// True for the W dtypes MatMulQ accepts; matmulq_weight_types() lists them (for the kernels' registrations).
bool matmulq_weight_supported(DType w_type);
const std::vector<DType>& matmulq_weight_types();

// Quantizes k floats (k a multiple of 32 · group) into k / 32 blocks as llama.cpp does: qs = round-half-even(x · 127 /
// max|x|) with max|x| over `group` consecutive blocks, d = max|x| / 127, s = d · Σqs at f16 precision, and the exact
// half sums. Group 1 is llama.cpp's q8_0 (d kept at f16 precision); group kSuperBlockRuns its q8_K (the eight blocks
// of a super-block share one float d). Every ISA gives the same bits.
void quantize_activation_row(const float* x, int64_t k, BlockQ8A* out, QuantIsa isa = quant_best_isa(),
                             int group = 1);

// The activation group MatMulQ quantizes with for a W type: kSuperBlockRuns for the super-block types (q2_K..q6_K,
// iq4_xs; Note [Super-block sums] in quant_matmul_kquant.h), 1 for the others.
int activation_group(DType w_type);

struct QuantMatMulTiles {
  int64_t tile_m = 32;  // activation rows per task
  int64_t tile_n = 64;  // W rows per task
};

// The tiles MatMulQ launches with for an [m, n] output on `units` compute units: decode (m small) splits over N
// only; prefill tiles M×N so each W tile is reused across tile_m rows.
QuantMatMulTiles quant_matmul_tiles(int64_t m, int64_t n, int64_t units);

// Y[m, n] = A[m, k] · W[n, k]ᵀ (+ bias[n]); bias may be null. Splits (m-tiles × n-tiles) over `pool` when given.
// InvalidArgument for an unsupported W type or, for quantized W, k not a whole number of its blocks (32 or 256).
Status quant_matmul(DType w_type, const float* a, int64_t m, int64_t k, const void* w, int64_t n, const float* bias,
                    float* y, QuantMatMulTiles tiles = {}, QuantIsa isa = quant_best_isa(),
                    ThreadPool* pool = nullptr);

// One weight of a group sharing an activation: Y[m, n] = A[m, k] · W[n, k]ᵀ (+ bias[n]); bias may be null.
struct QuantMatMulOutput {
  const void* w = nullptr;
  int64_t n = 0;
  const float* bias = nullptr;
  float* y = nullptr;
};

// quant_matmul for several weights of one type and K on the same A (a layer's Q, K and V; gate and up): A is
// quantized once and every output's tiles share one parallel loop, so the group costs one pass over the pool
// instead of one per weight. Each element is computed exactly as quant_matmul computes it (Note [Batch invariance]:
// it depends on row i of A and row j of W only), so the outputs are bit-identical to separate calls.
Status quant_matmul_group(DType w_type, const float* a, int64_t m, int64_t k,
                          std::span<const QuantMatMulOutput> outputs, QuantMatMulTiles tiles = {},
                          QuantIsa isa = quant_best_isa(), ThreadPool* pool = nullptr);

// Registers the "MatMulQ" and "MatMulQGroup" kernels (domain hxrt); called by register_linear.
Status register_quant_matmul(ops::KernelRegistry& registry);

}  // namespace hxrt::kernels::cpu
