// MatMulQ on the CPU: Y[m, n] = A[m, k] · W[n, k]ᵀ (+ bias[n]) with W in a GGUF layout (q8_0, q4_0, q4_1, f16, f32).
//
// Quantized W: each activation row is first quantized to BlockQ8A blocks (32 values: float scale, int8 values and
// the scaled block sum), then every output is a sum over blocks of integer dot products scaled in float
// (AVX-512 VNNI: 512-bit vpdpbusd on two W rows at once, Note [VNNI-512 pairs] in quant_matmul_vnni.h; AVX2
// vpmaddubsw; or scalar). f16 and f32 W use float dot products on the f32 activations.
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

#include "hxrt/base/dtype.h"
#include "hxrt/base/status.h"
#include "hxrt/base/thread_pool.h"
#include "hxrt/ops/kernel_registry.h"

namespace hxrt::kernels::cpu {

inline constexpr int64_t kQuantBlock = 32;  // values per block of every quantized type
inline constexpr int kMaxGroupWeights = 4;  // weights (and outputs) of one MatMulQGroup

// GGUF/ggml block layouts (f16 fields as raw bits).
struct BlockQ8_0 {
  uint16_t d;        // scale
  int8_t qs[32];     // value i = d * qs[i]
};
struct BlockQ4_0 {
  uint16_t d;        // scale
  uint8_t qs[16];    // value i = d * (nibble - 8); low nibble of qs[j] is element j, high nibble element j + 16
};
struct BlockQ4_1 {
  uint16_t d;        // scale
  uint16_t m;        // minimum
  uint8_t qs[16];    // value i = d * nibble + m; same nibble order as q4_0
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20);

// A quantized activation block: value i ≈ d * qs[i]; s = d * Σ qs (for the offsets of q4_0 and q4_1).
struct BlockQ8A {
  float d;
  float s;
  int8_t qs[32];
};

enum class QuantIsa : uint8_t { kScalar, kAvx2, kAvx512Vnni };
std::string_view quant_isa_name(QuantIsa isa);
bool quant_isa_supported(QuantIsa isa);
QuantIsa quant_best_isa();  // detected once

// True for the W dtypes MatMulQ accepts.
bool matmulq_weight_supported(DType w_type);

// Quantizes k floats (k a multiple of 32) into k / 32 blocks as llama.cpp does: qs = round-half-even(x · 127 / max|x|),
// d = max|x| / 127 and s = d · Σqs, both kept at f16 precision. Every ISA gives the same bits.
void quantize_activation_row(const float* x, int64_t k, BlockQ8A* out, QuantIsa isa = quant_best_isa());

// Expands one W row of k values (k a multiple of 32 for quantized types) to floats; the reference for tests.
Status dequantize_row(DType w_type, const void* row, int64_t k, float* out);

struct QuantMatMulTiles {
  int64_t tile_m = 32;  // activation rows per task
  int64_t tile_n = 64;  // W rows per task
};

// Y[m, n] = A[m, k] · W[n, k]ᵀ (+ bias[n]); bias may be null. Splits (m-tiles × n-tiles) over `pool` when given.
// InvalidArgument for an unsupported W type or, for quantized W, k not a multiple of 32.
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
