#include "kernels/cpu/quant_matmul.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "hxrt/base/float16.h"
#include "hxrt/base/quant_blocks.h"
#include "hxrt/base/quant_types.h"
#include "hxrt/graph/graph.h"
#include "hxrt/ops/op_schema.h"
#include "kernels/testing/kernel_harness.h"
#include "kernels/testing/test_data.h"

namespace hxrt::kernels::cpu {
namespace {

using testing::HostTensor;
using testing::OpCall;
using testing::run_op;

// Random GGUF-layout weights [n, k] of `type` (k a whole number of its blocks); never all zeros.
std::vector<std::byte> random_weights(DType type, int64_t n, int64_t k, std::mt19937& rng) {
  const uint64_t bytes = storage_bytes(type, static_cast<uint64_t>(n * k)).value();
  std::vector<std::byte> out(bytes);
  if (dtype_info(type).is_quantized) {
    testing::fill_random_blocks(type, out, rng);
    return out;
  }
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n * k));
  for (float& x : v) x = value(rng);
  if (type == DType::kF32) {
    std::memcpy(out.data(), v.data(), bytes);
    return out;
  }
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = type == DType::kBF16 ? f32_to_bf16(v[i]) : f32_to_f16(v[i]);
  std::memcpy(out.data(), h.data(), bytes);
  return out;
}

std::vector<float> random_floats(int64_t count, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = dist(rng);
  return v;
}

// Reference: Y[m, n] = A · dequant(W)ᵀ (+ bias) in double. With `quantize_a`, A is first rounded through the same
// q8 activation blocks the kernels use, so the comparison isolates the kernels' arithmetic.
std::vector<double> reference(DType type, const std::vector<float>& a, int64_t m, int64_t k,
                              const std::vector<std::byte>& w, int64_t n, const float* bias, bool quantize_a) {
  const uint64_t row_bytes = storage_bytes(type, static_cast<uint64_t>(k)).value();
  std::vector<double> wf(static_cast<size_t>(n * k));
  for (int64_t j = 0; j < n; ++j) {
    EXPECT_TRUE(dequantize_row_f64(type, w.data() + j * row_bytes, k, wf.data() + j * k).ok());
  }
  std::vector<double> y(static_cast<size_t>(m * n));
  if (quantize_a) {
    // Per block: d_a · Σ (w_i - c) q_i + c · s_a, where c is q4_1's offset m and s_a the activation block's stored
    // scaled sum, exactly as the kernels factor it. The other types' offsets use the exact integer sums (Note [Runs]
    // in quant_matmul_kquant.h, Note [Block integers] in quant_matmul_blockint.h): c = 0.
    const int64_t nb = k / kQuantBlock;
    std::vector<BlockQ8A> blocks(static_cast<size_t>(nb));
    for (int64_t i = 0; i < m; ++i) {
      quantize_activation_row(a.data() + i * k, k, blocks.data(), quant_best_isa(), activation_group(type));
      for (int64_t j = 0; j < n; ++j) {
        double sum = bias != nullptr ? bias[j] : 0.0;
        for (int64_t b = 0; b < nb; ++b) {
          double c = 0.0;  // q4_1 only (its blocks are the activation's)
          const std::byte* row = w.data() + j * row_bytes;
          if (type == DType::kQ4_1) c = f16_to_f32(reinterpret_cast<const BlockQ4_1*>(row)[b].m);
          const BlockQ8A& ab = blocks[static_cast<size_t>(b)];
          double dot = 0.0;
          for (int64_t p = 0; p < kQuantBlock; ++p) {
            dot += (wf[static_cast<size_t>(j * k + b * kQuantBlock + p)] - c) * ab.qs[p];
          }
          sum += double{ab.d} * dot + c * double{ab.s};
        }
        y[static_cast<size_t>(i * n + j)] = sum;
      }
    }
    return y;
  }
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = bias != nullptr ? bias[j] : 0.0;
      for (int64_t p = 0; p < k; ++p) sum += double{a[static_cast<size_t>(i * k + p)]} * wf[static_cast<size_t>(j * k + p)];
      y[static_cast<size_t>(i * n + j)] = sum;
    }
  }
  return y;
}

std::vector<QuantIsa> supported_isas() {
  std::vector<QuantIsa> isas;
  for (QuantIsa isa : {QuantIsa::kScalar, QuantIsa::kAvx2, QuantIsa::kAvx512Vnni}) {
    if (quant_isa_supported(isa)) isas.push_back(isa);
  }
  return isas;
}

const std::vector<DType>& kWeightTypes = matmulq_weight_types();

// K values of a test: `base` counts of 32-value blocks, as values of `type` (its blocks hold 32 or 256).
int64_t k_of(DType type, int64_t base) { return base * (dtype_info(type).block_elements == 256 ? 256 : 32); }

TEST(QuantMatMulTest, DequantizeFollowsGgmlNibbleOrder) {
  // Low nibble of byte j is element j, high nibble element j + 16.
  BlockQ4_0 q40{};
  BlockQ4_1 q41{};
  q40.d = f32_to_f16(1.0f);
  q41.d = f32_to_f16(2.0f);
  q41.m = f32_to_f16(-1.0f);
  for (int j = 0; j < 16; ++j) {
    q40.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
    q41.qs[j] = q40.qs[j];
  }
  float out[32];
  ASSERT_TRUE(dequantize_row(DType::kQ4_0, &q40, 32, out).ok());
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], static_cast<float>(j - 8)) << j;
    EXPECT_EQ(out[j + 16], static_cast<float>(15 - j - 8)) << j;
  }
  ASSERT_TRUE(dequantize_row(DType::kQ4_1, &q41, 32, out).ok());
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], 2.0f * static_cast<float>(j) - 1.0f) << j;
    EXPECT_EQ(out[j + 16], 2.0f * static_cast<float>(15 - j) - 1.0f) << j;
  }
  BlockQ8_0 q80{};
  q80.d = f32_to_f16(0.5f);
  for (int i = 0; i < 32; ++i) q80.qs[i] = static_cast<int8_t>(i - 16);
  ASSERT_TRUE(dequantize_row(DType::kQ8_0, &q80, 32, out).ok());
  for (int i = 0; i < 32; ++i) EXPECT_EQ(out[i], 0.5f * static_cast<float>(i - 16));
}

TEST(QuantMatMulTest, ActivationQuantizationRoundTrips) {
  std::mt19937 rng(7);
  const std::vector<float> x = random_floats(96, rng);
  std::vector<BlockQ8A> blocks(3);
  quantize_activation_row(x.data(), 96, blocks.data());
  for (int b = 0; b < 3; ++b) {
    int sum = 0;
    for (int i = 0; i < 32; ++i) {
      const float back = blocks[static_cast<size_t>(b)].d * blocks[static_cast<size_t>(b)].qs[i];
      // Half a step of rounding, plus the scale's own f16 rounding (2^-11 relative).
      EXPECT_NEAR(back, x[static_cast<size_t>(b * 32 + i)],
                  blocks[static_cast<size_t>(b)].d * 0.5f + std::fabs(x[static_cast<size_t>(b * 32 + i)]) * 1e-3f);
      sum += blocks[static_cast<size_t>(b)].qs[i];
    }
    const float d = blocks[static_cast<size_t>(b)].d;
    EXPECT_EQ(d, f16_to_f32(f32_to_f16(d))) << "the scale is kept at f16 precision, as llama.cpp's q8_1";
    EXPECT_NEAR(blocks[static_cast<size_t>(b)].s, d * static_cast<float>(sum), std::fabs(d * static_cast<float>(sum)) * 2e-3f);
  }
}

TEST(QuantMatMulTest, ActivationQuantizationIsBitIdenticalOnEveryIsa) {
  std::mt19937 rng(9);
  const int64_t k = 256;
  std::vector<float> x = random_floats(k, rng);
  for (int64_t i = 32; i < 64; ++i) x[static_cast<size_t>(i)] = 0.0f;   // an all-zero block
  for (int64_t i = 64; i < 96; ++i) x[static_cast<size_t>(i)] *= 1e-6f;  // a tiny one (subnormal f16 scale)
  // max|x| = 127 makes the step 1, so ±n.5 are exact ties (rounded to even).
  for (int64_t i = 96; i < 128; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i % 9) - 3.5f;
  x[96] = 127.0f;
  std::vector<float> x2(x);  // a second super-block, all zero
  x2.resize(2 * k, 0.0f);
  for (int group : {1, kSuperBlockRuns}) {
    std::vector<BlockQ8A> expected(static_cast<size_t>(2 * k / kQuantBlock));
    quantize_activation_row(x2.data(), 2 * k, expected.data(), QuantIsa::kScalar, group);
    for (QuantIsa isa : supported_isas()) {
      std::vector<BlockQ8A> got(expected.size());
      quantize_activation_row(x2.data(), 2 * k, got.data(), isa, group);
      EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(BlockQ8A)), 0)
          << quant_isa_name(isa) << " group " << group;
    }
  }
}

// A super-block group (llama.cpp's q8_K): the eight blocks share one float scale max|x| / 127 over all 256 values.
TEST(QuantMatMulTest, SuperBlockActivationsShareOneScale) {
  std::mt19937 rng(5);
  std::vector<float> x = random_floats(512, rng);
  x[300] = 3.0f;  // the second super-block's max
  std::vector<BlockQ8A> blocks(16);
  quantize_activation_row(x.data(), 512, blocks.data(), quant_best_isa(), kSuperBlockRuns);
  float amax0 = 0.0f;
  for (int i = 0; i < 256; ++i) amax0 = std::max(amax0, std::fabs(x[static_cast<size_t>(i)]));
  for (int b = 0; b < 16; ++b) {
    const BlockQ8A& block = blocks[static_cast<size_t>(b)];
    EXPECT_EQ(block.d, (b < 8 ? amax0 : 3.0f) / 127.0f) << "block " << b;
    int half[2] = {0, 0};
    for (int i = 0; i < 32; ++i) {
      const float v = x[static_cast<size_t>(b * 32 + i)];
      EXPECT_EQ(block.qs[i], static_cast<int8_t>(std::nearbyint(v * (127.0f / (b < 8 ? amax0 : 3.0f)))));
      half[i / 16] += block.qs[i];
    }
    EXPECT_EQ(block.sum[0], half[0]);
    EXPECT_EQ(block.sum[1], half[1]);
  }
  EXPECT_EQ(blocks[9].qs[300 - 288], 127);
}

// The error bound of Note [Error bounds] (base/quant_types.cc) for Y[i, j] of a quantized W against exact f32
// activations: per activation group (32 values, or 256 for the super-block types), |Δa| <= max|a_group| · (1/254 +
// 2⁻¹¹) on each value, plus the f16 rounding of q4_1's scaled sums (|c| · 2⁻¹¹ · Σ|a| per block) and float
// accumulation (2⁻²⁰ · Σ|w·a|).
double error_bound(DType type, const float* a, const double* w, const std::byte* w_row, int64_t k) {
  const int64_t group = activation_group(type) * kQuantBlock;
  double bound = 0.0;
  for (int64_t g = 0; g < k / group; ++g) {
    double amax = 0.0;
    for (int64_t p = g * group; p < (g + 1) * group; ++p) amax = std::max(amax, std::fabs(double{a[p]}));
    for (int64_t b = g * group / kQuantBlock; b < (g + 1) * group / kQuantBlock; ++b) {
      double asum = 0.0;
      double wsum = 0.0;
      double wa = 0.0;
      for (int64_t p = b * kQuantBlock; p < (b + 1) * kQuantBlock; ++p) {
        asum += std::fabs(double{a[p]});
        wsum += std::fabs(w[p]);
        wa += std::fabs(w[p] * a[p]);
      }
      double c = 0.0;
      if (type == DType::kQ4_1) c = f16_to_f32(reinterpret_cast<const BlockQ4_1*>(w_row)[b].m);
      bound += amax * (1.0 / 254.0 + std::ldexp(1.0, -11)) * wsum + std::fabs(c) * std::ldexp(1.0, -11) * asum +
               std::ldexp(1.0, -20) * wa;
    }
  }
  return bound;
}

// Every weight type × every ISA of this CPU × odd shapes, against the double reference:
//   against the reference on the same q8-rounded activations: normalised max error 1e-5 (only float summation
//   order differs);
//   against exact f32 activations: quantized W within error_bound per output; f16/bf16/f32 W (exact activations)
//   normalised 1e-5.
TEST(QuantMatMulTest, MatchesDequantizedReferenceForEveryTypeAndIsa) {
  std::mt19937 rng(42);
  const int64_t ms[] = {1, 3, 7};
  const int64_t k_blocks[] = {1, 3, 18};  // K/32 = 1, 3, 18: VNNI steps with 1, 3 and 2 blocks in the last
  const int64_t ns[] = {1, 7, 33, 65};
  for (DType type : kWeightTypes) {
    for (int64_t kb : k_blocks) {
      const int64_t k = k_of(type, kb);
      for (int64_t n : ns) {
        const std::vector<std::byte> w = random_weights(type, n, k, rng);
        const std::vector<float> bias = random_floats(n, rng);
        for (int64_t m : ms) {
          const std::vector<float> a = random_floats(m * k, rng);
          const bool quantized = dtype_info(type).is_quantized;
          const std::vector<double> exact = reference(type, a, m, k, w, n, bias.data(), false);
          const std::vector<double> same_a = reference(type, a, m, k, w, n, bias.data(), quantized);
          const uint64_t row_bytes = storage_bytes(type, static_cast<uint64_t>(k)).value();
          std::vector<double> wf(static_cast<size_t>(n * k));
          for (int64_t j = 0; j < n; ++j) {
            ASSERT_TRUE(dequantize_row_f64(type, w.data() + j * row_bytes, k, wf.data() + j * k).ok());
          }
          for (QuantIsa isa : supported_isas()) {
            std::vector<float> y(static_cast<size_t>(m * n), std::nanf(""));
            ASSERT_TRUE(quant_matmul(type, a.data(), m, k, w.data(), n, bias.data(), y.data(), {2, 16}, isa).ok());
            SCOPED_TRACE(fmt::format("{} {} m={} k={} n={}", dtype_name(type), quant_isa_name(isa), m, k, n));
            EXPECT_LE(testing::normalized_max_error(y, same_a), 1e-5);
            if (!quantized) {
              EXPECT_LE(testing::normalized_max_error(y, exact), 1e-5);
              continue;
            }
            for (int64_t i = 0; i < m; ++i) {
              for (int64_t j = 0; j < n; ++j) {
                const double bound = error_bound(type, a.data() + i * k, wf.data() + j * k, w.data() + j * row_bytes, k);
                const auto at = static_cast<size_t>(i * n + j);
                ASSERT_LE(std::fabs(y[at] - exact[at]), bound) << "Y[" << i << ", " << j << "]";
              }
            }
          }
        }
      }
    }
  }
}

// Note [Batch invariance] in quant_matmul.h: a row's result is bit-identical whether it is computed alone, in a
// batch, or under any tiling.
TEST(QuantMatMulTest, RowsAreBatchInvariantBitForBit) {
  std::mt19937 rng(3);
  ThreadPool pool(2);
  const int64_t m = 37;
  const int64_t n = 45;
  for (DType type : kWeightTypes) {
    const int64_t k = k_of(type, 5);
    const std::vector<std::byte> w = random_weights(type, n, k, rng);
    const std::vector<float> a = random_floats(m * k, rng);
    for (QuantIsa isa : supported_isas()) {
      SCOPED_TRACE(fmt::format("{} {}", dtype_name(type), quant_isa_name(isa)));
      std::vector<float> alone(static_cast<size_t>(m * n));
      for (int64_t i = 0; i < m; ++i) {
        ASSERT_TRUE(
            quant_matmul(type, a.data() + i * k, 1, k, w.data(), n, nullptr, alone.data() + i * n, {1, 64}, isa).ok());
      }
      for (QuantMatMulTiles tiles : {QuantMatMulTiles{32, 64}, QuantMatMulTiles{5, 7}, QuantMatMulTiles{37, 1},
                                     QuantMatMulTiles{3, 45}}) {
        std::vector<float> batch(static_cast<size_t>(m * n));
        ASSERT_TRUE(quant_matmul(type, a.data(), m, k, w.data(), n, nullptr, batch.data(), tiles, isa, &pool).ok());
        EXPECT_EQ(std::memcmp(alone.data(), batch.data(), batch.size() * sizeof(float)), 0)
            << "tiles " << tiles.tile_m << "x" << tiles.tile_n;
      }
      // A sub-batch starting at row 5 gives the same rows too.
      std::vector<float> sub(static_cast<size_t>(6 * n));
      ASSERT_TRUE(quant_matmul(type, a.data() + 5 * k, 6, k, w.data(), n, nullptr, sub.data(), {4, 16}, isa).ok());
      EXPECT_EQ(std::memcmp(alone.data() + 5 * n, sub.data(), sub.size() * sizeof(float)), 0);
    }
  }
}

// A group's outputs are the bits of separate quant_matmul calls, for every type, ISA, tiling and batch size, with N
// of each weight not a multiple of the tiles (Q, K, V of a layer: three weights, two of them narrower).
TEST(QuantMatMulTest, GroupGivesTheBitsOfSeparateCalls) {
  std::mt19937 rng(17);
  ThreadPool pool(2);
  const int64_t widths[] = {45, 13, 13};
  for (DType type : kWeightTypes) {
    const int64_t k = k_of(type, 3);
    std::vector<std::vector<std::byte>> ws;
    std::vector<std::vector<float>> biases;
    for (int64_t n : widths) {
      ws.push_back(random_weights(type, n, k, rng));
      biases.push_back(random_floats(n, rng));
    }
    for (int64_t m : {int64_t{1}, int64_t{5}, int64_t{37}}) {
      const std::vector<float> a = random_floats(m * k, rng);
      for (QuantIsa isa : supported_isas()) {
        for (QuantMatMulTiles tiles : {QuantMatMulTiles{32, 64}, QuantMatMulTiles{4, 7}, QuantMatMulTiles{1, 16}}) {
          SCOPED_TRACE(fmt::format("{} {} m={} tiles {}x{}", dtype_name(type), quant_isa_name(isa), m, tiles.tile_m,
                                   tiles.tile_n));
          std::vector<std::vector<float>> separate(3);
          std::vector<std::vector<float>> grouped(3);
          std::vector<QuantMatMulOutput> outputs;
          for (size_t o = 0; o < 3; ++o) {
            const int64_t n = widths[o];
            const float* bias = o == 1 ? biases[o].data() : nullptr;
            separate[o].assign(static_cast<size_t>(m * n), 0.0f);
            grouped[o].assign(static_cast<size_t>(m * n), std::nanf(""));  // poisoned: unwritten elements fail
            ASSERT_TRUE(quant_matmul(type, a.data(), m, k, ws[o].data(), n, bias, separate[o].data(), tiles, isa).ok());
            outputs.push_back({.w = ws[o].data(), .n = n, .bias = bias, .y = grouped[o].data()});
          }
          ASSERT_TRUE(quant_matmul_group(type, a.data(), m, k, outputs, tiles, isa, &pool).ok());
          for (size_t o = 0; o < 3; ++o) {
            EXPECT_EQ(std::memcmp(separate[o].data(), grouped[o].data(), separate[o].size() * sizeof(float)), 0)
                << "output " << o;
          }
        }
      }
    }
  }
}

// The same, at every K tail of the VNNI steps and with N not a multiple of the micro-kernels' W rows: each row of an
// M=5 batch (under several tilings, threaded) equals that row computed alone.
TEST(QuantMatMulTest, RowAloneEqualsRowInABatchOfFiveAtEveryKTail) {
  std::mt19937 rng(4);
  ThreadPool pool(2);
  const int64_t m = 5;
  const int64_t n = 13;
  for (DType type : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1}) {
    for (int64_t k : {32, 64, 96, 128, 160, 1536}) {
      const std::vector<std::byte> w = random_weights(type, n, k, rng);
      const std::vector<float> a = random_floats(m * k, rng);
      const std::vector<float> bias = random_floats(n, rng);
      for (QuantIsa isa : supported_isas()) {
        SCOPED_TRACE(fmt::format("{} {} k={}", dtype_name(type), quant_isa_name(isa), k));
        std::vector<float> alone(static_cast<size_t>(m * n));
        for (int64_t i = 0; i < m; ++i) {
          ASSERT_TRUE(quant_matmul(type, a.data() + i * k, 1, k, w.data(), n, bias.data(), alone.data() + i * n,
                                   {1, 64}, isa)
                          .ok());
        }
        for (QuantMatMulTiles tiles : {QuantMatMulTiles{5, 13}, QuantMatMulTiles{2, 3}, QuantMatMulTiles{4, 8}}) {
          std::vector<float> batch(static_cast<size_t>(m * n), std::nanf(""));
          ASSERT_TRUE(
              quant_matmul(type, a.data(), m, k, w.data(), n, bias.data(), batch.data(), tiles, isa, &pool).ok());
          EXPECT_EQ(std::memcmp(alone.data(), batch.data(), batch.size() * sizeof(float)), 0)
              << "tiles " << tiles.tile_m << "x" << tiles.tile_n;
        }
      }
    }
  }
}

// Note [VNNI-512 pairs] and Note [K-quant pairs]: the AVX-512 VNNI kernels give the AVX2 kernel's bits (and so the OpenCL kernel's, which
// mirrors its lanes): rows paired or alone, any step tail, with and without bias.
TEST(QuantMatMulTest, Avx512VnniGivesTheAvx2Bits) {
  if (!quant_isa_supported(QuantIsa::kAvx512Vnni)) GTEST_SKIP() << "no AVX-512 VNNI here";
  std::mt19937 rng(8);
  for (DType type : matmulq_weight_types()) {
    if (!dtype_info(type).is_quantized) continue;
    for (int64_t k : {32, 64, 96, 160, 256, 576, 768, 1536}) {
      if (k % dtype_info(type).block_elements != 0) continue;
      for (int64_t m : {1, 2, 5, 11}) {  // 11: the decoded panels (Note [Decoded panels])
        const int64_t n = 13;
        const std::vector<std::byte> w = random_weights(type, n, k, rng);
        const std::vector<float> a = random_floats(m * k, rng);
        const std::vector<float> bias = random_floats(n, rng);
        for (const float* b : {static_cast<const float*>(nullptr), bias.data()}) {
          SCOPED_TRACE(fmt::format("{} m={} k={} bias={}", dtype_name(type), m, k, b != nullptr));
          std::vector<float> avx2(static_cast<size_t>(m * n), std::nanf(""));
          std::vector<float> vnni(static_cast<size_t>(m * n), std::nanf(""));
          ASSERT_TRUE(quant_matmul(type, a.data(), m, k, w.data(), n, b, avx2.data(), {m, n}, QuantIsa::kAvx2).ok());
          ASSERT_TRUE(
              quant_matmul(type, a.data(), m, k, w.data(), n, b, vnni.data(), {m, n}, QuantIsa::kAvx512Vnni).ok());
          EXPECT_EQ(std::memcmp(avx2.data(), vnni.data(), avx2.size() * sizeof(float)), 0);
        }
      }
    }
  }
}

// Note [Block integers] (quant_matmul_blockint.h), written out from its definition: per block the exact integer
// Σ v·q, then acc = fma(float(isum), d_w · d_a, acc), then acc + bias. Every ISA — the scalar path too — gives these
// bits for q4_0 and iq4_nl, alone, in decode-sized tiles (the in-place sixteen-row kernel) and in prefill tiles
// (the stored panels), with partial sixteen-row groups and with and without bias.
TEST(QuantMatMulTest, BlockIntegerTypesGiveTheDefinitionsBitsOnEveryIsa) {
  std::mt19937 rng(21);
  for (DType type : {DType::kQ4_0, DType::kIQ4_NL}) {
    for (int64_t k : {32, 96, 576}) {
      const int64_t nb = k / kQuantBlock;
      for (int64_t m : {1, 3, 8, 9, 40}) {
        const int64_t n = 37;
        const std::vector<std::byte> w = random_weights(type, n, k, rng);
        const std::vector<float> a = random_floats(m * k, rng);
        const std::vector<float> bias = random_floats(n, rng);
        const uint64_t row_bytes = storage_bytes(type, static_cast<uint64_t>(k)).value();
        std::vector<BlockQ8A> aq(static_cast<size_t>(m * nb));
        for (int64_t i = 0; i < m; ++i) quantize_activation_row(a.data() + i * k, k, aq.data() + i * nb);
        for (const float* b : {static_cast<const float*>(nullptr), bias.data()}) {
          std::vector<float> expected(static_cast<size_t>(m * n));
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = 0; j < n; ++j) {
              const auto* blocks = reinterpret_cast<const BlockQ4_0*>(w.data() + j * row_bytes);
              float acc = 0.0f;
              for (int64_t blk = 0; blk < nb; ++blk) {
                const BlockQ8A& ab = aq[static_cast<size_t>(i * nb + blk)];
                int32_t isum = 0;
                for (int l = 0; l < 32; ++l) {
                  const int nibble = l < 16 ? blocks[blk].qs[l] & 0x0F : blocks[blk].qs[l - 16] >> 4;
                  const int v = type == DType::kQ4_0 ? nibble - 8 : kIQ4NLValues[static_cast<size_t>(nibble)];
                  isum += v * ab.qs[l];
                }
                const float scale = f16_to_f32(blocks[blk].d) * ab.d;
                acc = std::fma(static_cast<float>(isum), scale, acc);
              }
              expected[static_cast<size_t>(i * n + j)] = acc + (b != nullptr ? b[j] : 0.0f);
            }
          }
          for (QuantIsa isa : supported_isas()) {
            SCOPED_TRACE(fmt::format("{} {} m={} k={} bias={}", dtype_name(type), quant_isa_name(isa), m, k,
                                     b != nullptr));
            std::vector<float> y(static_cast<size_t>(m * n), std::nanf(""));
            ASSERT_TRUE(quant_matmul(type, a.data(), m, k, w.data(), n, b, y.data(), quant_matmul_tiles(m, n, 2),
                                     isa).ok());
            EXPECT_EQ(std::memcmp(y.data(), expected.data(), y.size() * sizeof(float)), 0);
          }
        }
      }
    }
  }
}

TEST(QuantMatMulTest, RejectsKNotAMultipleOf32) {
  std::vector<std::byte> w(18 * 4);
  std::vector<float> a(48, 1.0f);
  std::vector<float> y(2);
  const Status status = quant_matmul(DType::kQ4_0, a.data(), 1, 48, w.data(), 2, nullptr, y.data());
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("multiple of 32"), std::string_view::npos) << status.to_string();
  EXPECT_EQ(quant_matmul(DType::kI8, a.data(), 1, 48, w.data(), 2, nullptr, y.data()).code(),
            StatusCode::kInvalidArgument);
}

// --- through the op path -----------------------------------------------------------------------------------------

OpCall matmulq_call(DType type, const Shape& a_shape, int64_t n, std::mt19937& rng, bool with_bias,
                    std::vector<float>* a_out, std::vector<std::byte>* w_out, std::vector<float>* bias_out) {
  const int64_t k = a_shape.dim(-1);
  *w_out = random_weights(type, n, k, rng);
  *a_out = random_floats(a_shape.num_elements(), rng);
  OpCall call;
  call.op_type = "MatMulQ";
  call.domain = "hxrt";
  call.inputs.push_back(HostTensor::f32(a_shape, *a_out));
  call.inputs.push_back(HostTensor::raw(type, Shape{n, k}, *w_out));
  call.constant_inputs = {1};
  if (with_bias) {
    *bias_out = random_floats(n, rng);
    call.inputs.push_back(HostTensor::f32(Shape{n}, *bias_out));
  }
  return call;
}

TEST(QuantMatMulOpTest, EveryWeightTypeWithLeadingDimsAndBias) {
  std::mt19937 rng(11);
  for (DType type : kWeightTypes) {
    for (bool with_bias : {false, true}) {
      std::vector<float> a;
      std::vector<std::byte> w;
      std::vector<float> bias;
      const int64_t k = k_of(type, 3);
      const Shape a_shape{2, 3, k};
      const OpCall call = matmulq_call(type, a_shape, 33, rng, with_bias, &a, &w, &bias);
      auto result = run_op(call);
      ASSERT_TRUE(result.ok()) << result.status().to_string();
      EXPECT_EQ(result->kernel, "MatMulQ");
      ASSERT_EQ(result->outputs.size(), 1u);
      EXPECT_EQ(result->outputs[0].shape, (Shape{2, 3, 33}));
      const std::vector<double> expected =
          reference(type, a, 6, k, w, 33, with_bias ? bias.data() : nullptr, dtype_info(type).is_quantized);
      EXPECT_LE(testing::normalized_max_error(result->outputs[0].to_f32(), expected), 1e-5)
          << dtype_name(type) << " bias=" << with_bias;
    }
  }
}

TEST(QuantMatMulOpTest, DecodeRowEqualsPrefillRowBitForBit) {
  std::mt19937 rng(5);
  std::vector<float> a;
  std::vector<std::byte> w;
  std::vector<float> bias;
  OpCall prefill = matmulq_call(DType::kQ4_1, Shape{9, 576}, 130, rng, true, &a, &w, &bias);
  auto batch = run_op(prefill);
  ASSERT_TRUE(batch.ok()) << batch.status().to_string();
  const std::vector<float> all = batch->outputs[0].to_f32();
  for (int64_t i : {0, 4, 8}) {
    OpCall decode = prefill;
    decode.inputs[0] = HostTensor::f32(
        Shape{1, 576}, std::vector<float>(a.begin() + i * 576, a.begin() + (i + 1) * 576));
    auto one = run_op(decode);
    ASSERT_TRUE(one.ok()) << one.status().to_string();
    const std::vector<float> row = one->outputs[0].to_f32();
    EXPECT_EQ(std::memcmp(row.data(), all.data() + i * 130, 130 * sizeof(float)), 0) << "row " << i;
  }
}

// MatMulQGroup through the op path: each output equals MatMulQ's on its weight, bit for bit; leading dims kept.
TEST(QuantMatMulOpTest, GroupOutputsEqualMatMulQBitForBit) {
  std::mt19937 rng(23);
  const Shape a_shape{3, 2, 128};
  const std::vector<float> a = random_floats(a_shape.num_elements(), rng);
  const int64_t widths[] = {64, 24, 24};
  OpCall group;
  group.op_type = "MatMulQGroup";
  group.domain = "hxrt";
  group.inputs.push_back(HostTensor::f32(a_shape, a));
  std::vector<std::vector<float>> expected;
  for (size_t o = 0; o < 3; ++o) {
    const std::vector<std::byte> w = random_weights(DType::kQ4_1, widths[o], 128, rng);
    group.inputs.push_back(HostTensor::raw(DType::kQ4_1, Shape{widths[o], 128}, w));
    group.constant_inputs.push_back(o + 1);
    OpCall single;
    single.op_type = "MatMulQ";
    single.domain = "hxrt";
    single.inputs = {HostTensor::f32(a_shape, a), HostTensor::raw(DType::kQ4_1, Shape{widths[o], 128}, w)};
    single.constant_inputs = {1};
    auto one = run_op(single);
    ASSERT_TRUE(one.ok()) << one.status().to_string();
    expected.push_back(one->outputs[0].to_f32());
  }
  group.num_outputs = 3;
  auto result = run_op(group);
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  EXPECT_EQ(result->kernel, "MatMulQGroup");
  ASSERT_EQ(result->outputs.size(), 3u);
  for (size_t o = 0; o < 3; ++o) {
    EXPECT_EQ(result->outputs[o].shape, (Shape{3, 2, widths[o]}));
    const std::vector<float> got = result->outputs[o].to_f32();
    ASSERT_EQ(got.size(), expected[o].size());
    EXPECT_EQ(std::memcmp(got.data(), expected[o].data(), got.size() * sizeof(float)), 0) << "output " << o;
  }

  // Weights of different dtypes, or fewer outputs than weights, are refused by the schema.
  OpCall mixed = group;
  mixed.inputs[2] = HostTensor::raw(DType::kQ8_0, Shape{24, 128}, random_weights(DType::kQ8_0, 24, 128, rng));
  auto mixed_result = run_op(mixed);
  EXPECT_FALSE(mixed_result.ok());
  OpCall short_outputs = group;
  short_outputs.num_outputs = 2;
  auto short_result = run_op(short_outputs);
  EXPECT_FALSE(short_result.ok());
}

TEST(QuantMatMulOpTest, SchemaRejectsMismatchedKAndWrongActivationType) {
  std::mt19937 rng(1);
  std::vector<float> a;
  std::vector<std::byte> w;
  std::vector<float> bias;
  OpCall call = matmulq_call(DType::kQ8_0, Shape{2, 64}, 8, rng, false, &a, &w, &bias);
  call.inputs[0] = HostTensor::f32(Shape{2, 96}, random_floats(2 * 96, rng));
  auto mismatched = run_op(call);
  ASSERT_FALSE(mismatched.ok());
  EXPECT_EQ(mismatched.status().code(), StatusCode::kInvalidArgument) << mismatched.status().to_string();

  call.inputs[0] = HostTensor::i64(Shape{2, 64}, std::vector<int64_t>(128, 1));
  auto wrong_type = run_op(call);
  ASSERT_FALSE(wrong_type.ok());
  EXPECT_NE(wrong_type.status().to_string().find("MatMulQ"), std::string::npos) << wrong_type.status().to_string();
}

TEST(QuantMatMulOpTest, FloatWeightsTakeAnyK) {
  // Only the block types need K % 32 == 0 (a q8_0 tensor of K=40 cannot even be built: the pure-function test
  // RejectsKNotAMultipleOf32 covers the kernel's Status); f16 and f32 W work for any K.
  std::mt19937 rng(2);
  for (DType type : {DType::kF16, DType::kF32}) {
    std::vector<float> a;
    std::vector<std::byte> w;
    std::vector<float> bias;
    const OpCall call = matmulq_call(type, Shape{3, 41}, 7, rng, true, &a, &w, &bias);
    auto result = run_op(call);
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    const std::vector<double> expected = reference(type, a, 3, 41, w, 7, bias.data(), false);
    EXPECT_LE(testing::normalized_max_error(result->outputs[0].to_f32(), expected), 1e-5) << dtype_name(type);
  }
}

// Symbolic shapes: n_tokens flows through MatMulQ and MatMul; an undecidable K equality becomes a DimCheck.
TEST(LinearSchemaTest, SymbolicDimsPropagate) {
  ops::OpSchemaRegistry registry;
  ASSERT_TRUE(ops::register_builtin_schemas(registry).ok());
  graph::Graph g("symbolic");
  const graph::Dim n_tokens = graph::Dim::symbol("n_tokens");
  const graph::Dim k_sym = graph::Dim::symbol("k");
  ASSERT_TRUE(g.add_input("x", graph::TensorDesc{DType::kF32, graph::SymShape{n_tokens, 576}}).ok());
  ASSERT_TRUE(g.add_input("w", graph::TensorDesc{DType::kQ4_1, graph::SymShape{1536, 576}}).ok());
  ASSERT_TRUE(g.add_input("b", graph::TensorDesc{DType::kF32, graph::SymShape{2, k_sym, 7}}).ok());
  const std::string mq_in[] = {"x", "w"};
  const std::string mq_out[] = {"h"};
  ASSERT_TRUE(g.add_node("ffn.up", "MatMulQ", mq_in, mq_out, {}, "hxrt", 1).ok());
  const std::string mm_in[] = {"h", "b"};
  const std::string mm_out[] = {"y"};
  ASSERT_TRUE(g.add_node("proj", "MatMul", mm_in, mm_out, {}, "", 13).ok());
  std::vector<ops::DimCheck> checks;
  const Status status = registry.infer_graph(g, &checks);
  ASSERT_TRUE(status.ok()) << status.to_string();
  EXPECT_EQ(g.value(g.find_value("h").value()).desc.shape.to_string(), "[n_tokens, 1536]");
  EXPECT_EQ(g.value(g.find_value("y").value()).desc.shape.to_string(), "[2, n_tokens, 7]");
  ASSERT_EQ(checks.size(), 1u);  // K: 1536 == k, decided when shapes are bound
  EXPECT_NE(checks[0].what.find("proj"), std::string::npos) << checks[0].what;
}

}  // namespace
}  // namespace hxrt::kernels::cpu
