// MatMulQ at SmolLM2-135M's shapes, in GB/s of weight bytes read (counter "weight_bytes"): the q4_1 layer GEMVs
// (decode, M = 1) and the q8_0 49152-row output projection (the tied token embedding), on 1 thread and on a pool of
// 2; plus prefill (M = 64). BM_MatMulQ_Type runs every weight type on one ffn_down-sized weight, streamed from
// memory (decode), at M = 16 (sixteen sequences' decode step) and at M = 64 (prefill), for the per-type table in
// docs/llm.md; the 32-value types also at the gate/up shape (K = 576, 1536 W rows, decode).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <string>

#include <fmt/format.h>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "hxrt/base/float16.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/testing/test_data.h"

namespace hxrt::kernels::cpu {
namespace {

// Random [n, k] weights of `type` (q4_1 or q8_0) in GGUF block layout.
std::vector<std::byte> random_weights(DType type, int64_t n, int64_t k) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(0.001f, 0.05f);
  std::uniform_int_distribution<int> byte(0, 255);
  const int64_t blocks = n * k / kQuantBlock;
  std::vector<std::byte> w(storage_bytes(type, static_cast<uint64_t>(n * k)).value());
  if (type == DType::kQ4_1) {
    auto* b = reinterpret_cast<BlockQ4_1*>(w.data());
    for (int64_t i = 0; i < blocks; ++i) {
      b[i].d = f32_to_f16(dist(rng));
      b[i].m = f32_to_f16(-dist(rng) * 8.0f);
      for (uint8_t& q : b[i].qs) q = static_cast<uint8_t>(byte(rng));
    }
  } else {
    auto* b = reinterpret_cast<BlockQ8_0*>(w.data());
    for (int64_t i = 0; i < blocks; ++i) {
      b[i].d = f32_to_f16(dist(rng));
      for (int8_t& q : b[i].qs) q = static_cast<int8_t>(byte(rng) - 128);
    }
  }
  return w;
}

// (m, k, n, threads) for weights of type W.
template <DType W>
void BM_MatMulQ(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2), threads = state.range(3);
  const std::vector<std::byte> w = random_weights(W, n, k);
  std::vector<float> a(static_cast<size_t>(m * k));
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& x : a) x = dist(rng);
  std::vector<float> y(static_cast<size_t>(m * n));
  std::unique_ptr<ThreadPool> pool = threads > 1 ? std::make_unique<ThreadPool>(static_cast<int>(threads)) : nullptr;
  // As the kernel's tiling picks them for a device of `threads` compute units: decode splits N only.
  const QuantMatMulTiles tiles = quant_matmul_tiles(m, n, threads);
  for (auto _ : state) {
    const Status status =
        quant_matmul(W, a.data(), m, k, w.data(), n, nullptr, y.data(), tiles, quant_best_isa(), pool.get());
    if (!status.ok()) state.SkipWithError(status.to_string().c_str());
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["weight_bytes"] =
      benchmark::Counter(static_cast<double>(w.size()) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate, benchmark::Counter::kIs1024);
  state.SetLabel(std::string(quant_isa_name(quant_best_isa())));
}

// As BM_MatMulQ, but W cycles through copies totalling 192 MiB, so each call streams its weights from memory as a
// decode step does (the model's 96 MiB of weights do not stay in cache between tokens).
template <DType W>
void BM_MatMulQ_Streamed(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2), threads = state.range(3);
  const std::vector<std::byte> one = random_weights(W, n, k);
  const size_t copies = std::max<size_t>(2, (size_t{192} << 20) / one.size());
  std::vector<std::byte> w(one.size() * copies);
  for (size_t c = 0; c < copies; ++c) std::memcpy(w.data() + c * one.size(), one.data(), one.size());
  std::vector<float> a(static_cast<size_t>(m * k));
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& x : a) x = dist(rng);
  std::vector<float> y(static_cast<size_t>(m * n));
  std::unique_ptr<ThreadPool> pool = threads > 1 ? std::make_unique<ThreadPool>(static_cast<int>(threads)) : nullptr;
  QuantMatMulTiles tiles;
  tiles.tile_m = m;
  tiles.tile_n = std::clamp<int64_t>((n + 4 * threads - 1) / (4 * threads), 16, 128);
  size_t c = 0;
  for (auto _ : state) {
    const Status status = quant_matmul(W, a.data(), m, k, w.data() + c * one.size(), n, nullptr, y.data(), tiles,
                                       quant_best_isa(), pool.get());
    if (!status.ok()) state.SkipWithError(status.to_string().c_str());
    benchmark::DoNotOptimize(y.data());
    c = (c + 1) % copies;
  }
  state.counters["weight_bytes"] =
      benchmark::Counter(static_cast<double>(one.size()) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate, benchmark::Counter::kIs1024);
  state.SetLabel(std::string(quant_isa_name(quant_best_isa())));
}

BENCHMARK(BM_MatMulQ_Streamed<DType::kQ4_1>)
    ->Args({1, 576, 1536, 1})->Args({1, 1536, 576, 1})->Args({1, 576, 1536, 2})->Args({1, 1536, 576, 2})
    ->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_MatMulQ_Streamed<DType::kQ8_0>)
    ->Args({1, 576, 49152, 1})->Args({1, 576, 49152, 2})
    ->Unit(benchmark::kMicrosecond)->UseRealTime();

// Layer GEMVs: attn q/o [576→576], k/v [576→192], ffn gate/up [576→1536], ffn down [1536→576].
BENCHMARK(BM_MatMulQ<DType::kQ4_1>)
    ->Args({1, 576, 576, 1})->Args({1, 576, 192, 1})->Args({1, 576, 1536, 1})->Args({1, 1536, 576, 1})
    ->Args({1, 576, 576, 2})->Args({1, 576, 192, 2})->Args({1, 576, 1536, 2})->Args({1, 1536, 576, 2})
    ->Args({64, 576, 576, 2})->Args({64, 576, 1536, 2})->Args({64, 1536, 576, 2})
    ->Unit(benchmark::kMicrosecond)->UseRealTime();

// The output projection (tied q8_0 token embedding); and Gemma 3 270M's (262144 x 640) for a step of 16 sequences.
BENCHMARK(BM_MatMulQ<DType::kQ8_0>)
    ->Args({1, 576, 49152, 1})->Args({1, 576, 49152, 2})->Args({64, 576, 49152, 2})
    ->Args({16, 640, 262144, 1})->Args({16, 640, 262144, 2})
    ->Unit(benchmark::kMicrosecond)->UseRealTime();

// The ISA BM_MatMulQ_Type measures: the best one here, or HXRT_BENCH_ISA=avx2 / scalar (a slower path measured on
// a CPU that has a faster one).
QuantIsa bench_isa() {
  const char* env = std::getenv("HXRT_BENCH_ISA");
  const std::string name = env != nullptr ? env : "";
  if (name == "avx2" && quant_isa_supported(QuantIsa::kAvx2)) return QuantIsa::kAvx2;
  if (name == "scalar") return QuantIsa::kScalar;
  return quant_best_isa();
}

// Every MatMulQ weight type (in matmulq_weight_types() order: range 0 indexes it), W [n, k] random blocks, copies
// cycled through 192 MiB as in BM_MatMulQ_Streamed; (type index, m, k, n, threads).
void BM_MatMulQ_Type(benchmark::State& state) {
  const DType type = matmulq_weight_types()[static_cast<size_t>(state.range(0))];
  const int64_t m = state.range(1), k = state.range(2), n = state.range(3), threads = state.range(4);
  std::mt19937 rng(1);
  std::vector<std::byte> one(storage_bytes(type, static_cast<uint64_t>(n * k)).value());
  if (dtype_info(type).is_quantized) {
    testing::fill_random_blocks(type, one, rng);
  } else {
    std::uniform_int_distribution<int> small(0, 0x3BFF);  // finite f16/bf16 bit patterns; f32 random below
    for (size_t i = 0; i + 1 < one.size(); i += 2) {
      const auto h = static_cast<uint16_t>(small(rng));
      std::memcpy(&one[i], &h, 2);
    }
    if (type == DType::kF32) {
      std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
      for (size_t i = 0; i + 4 <= one.size(); i += 4) {
        const float v = dist(rng);
        std::memcpy(&one[i], &v, 4);
      }
    }
  }
  // Decode streams the weights from memory (copies past the caches); HXRT_BENCH_HOT=1 keeps one copy in cache, so
  // the kernel's own cost shows apart from the memory's.
  const bool hot = std::getenv("HXRT_BENCH_HOT") != nullptr;
  const size_t copies = m > 1 || hot ? 1 : std::max<size_t>(2, (size_t{192} << 20) / one.size());
  std::vector<std::byte> w(one.size() * copies);
  for (size_t c = 0; c < copies; ++c) std::memcpy(w.data() + c * one.size(), one.data(), one.size());
  std::vector<float> a(static_cast<size_t>(m * k));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& x : a) x = dist(rng);
  std::vector<float> y(static_cast<size_t>(m * n));
  std::unique_ptr<ThreadPool> pool = threads > 1 ? std::make_unique<ThreadPool>(static_cast<int>(threads)) : nullptr;
  const QuantMatMulTiles tiles = quant_matmul_tiles(m, n, threads);
  const QuantIsa isa = bench_isa();
  size_t c = 0;
  for (auto _ : state) {
    const Status status = quant_matmul(type, a.data(), m, k, w.data() + c * one.size(), n, nullptr, y.data(), tiles,
                                       isa, pool.get());
    if (!status.ok()) state.SkipWithError(status.to_string().c_str());
    benchmark::DoNotOptimize(y.data());
    c = (c + 1) % copies;
  }
  state.counters["weight_bytes"] =
      benchmark::Counter(static_cast<double>(one.size()) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate, benchmark::Counter::kIs1024);
  state.SetLabel(fmt::format("{} {}", dtype_name(type), quant_isa_name(isa)));
}

void matmulq_type_args(benchmark::internal::Benchmark* b) {
  for (int64_t t = 0; t < static_cast<int64_t>(matmulq_weight_types().size()); ++t) {
    b->Args({t, 1, 1536, 576, 1})->Args({t, 1, 1536, 576, 2})->Args({t, 16, 1536, 576, 1});
    b->Args({t, 64, 1536, 576, 1})->Args({t, 64, 1536, 576, 2});
    // The gate/up shape (K = 576, 1536 W rows), for the types whose blocks divide 576.
    const DType type = matmulq_weight_types()[static_cast<size_t>(t)];
    if (576 % dtype_info(type).block_elements == 0) b->Args({t, 1, 576, 1536, 1});
  }
}
BENCHMARK(BM_MatMulQ_Type)->Apply(matmulq_type_args)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace hxrt::kernels::cpu
