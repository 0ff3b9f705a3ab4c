// MatMulQ GEMV (decode, M = 1) with q4_1 weights at SmolLM2-135M's shapes, in GB/s of weight bytes read
// (counter "weight_bytes"), on 1 thread and on a pool of 2; plus one prefill shape (M = 64).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "hxrt/base/float16.h"
#include "kernels/cpu/quant_matmul.h"

namespace hxrt::kernels::cpu {
namespace {

std::vector<BlockQ4_1> random_q4_1(int64_t n, int64_t k) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(0.001f, 0.05f);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<BlockQ4_1> w(static_cast<size_t>(n * k / kQuantBlock));
  for (BlockQ4_1& b : w) {
    b.d = f32_to_f16(dist(rng));
    b.m = f32_to_f16(-dist(rng) * 8.0f);
    for (uint8_t& q : b.qs) q = static_cast<uint8_t>(byte(rng));
  }
  return w;
}

void BM_MatMulQ_Q4_1(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2), threads = state.range(3);
  const std::vector<BlockQ4_1> w = random_q4_1(n, k);
  std::vector<float> a(static_cast<size_t>(m * k));
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& x : a) x = dist(rng);
  std::vector<float> y(static_cast<size_t>(m * n));
  std::unique_ptr<ThreadPool> pool = threads > 1 ? std::make_unique<ThreadPool>(static_cast<int>(threads)) : nullptr;
  QuantMatMulTiles tiles;  // as the kernel's tiling picks them: decode splits N only
  tiles.tile_m = m <= 8 ? m : 32;
  tiles.tile_n = m <= 8 ? std::max<int64_t>(16, std::min<int64_t>(128, n / (4 * threads))) : 64;
  for (auto _ : state) {
    const Status status = quant_matmul(DType::kQ4_1, a.data(), m, k, w.data(), n, nullptr, y.data(), tiles,
                                       quant_best_isa(), pool.get());
    if (!status.ok()) state.SkipWithError(status.to_string().c_str());
    benchmark::DoNotOptimize(y.data());
  }
  const double bytes = static_cast<double>(w.size() * sizeof(BlockQ4_1));
  state.counters["weight_bytes"] =
      benchmark::Counter(bytes * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate,
                         benchmark::Counter::kIs1024);
  state.SetLabel(std::string(quant_isa_name(quant_best_isa())));
}

// (m, k, n, threads): attn/ffn-down/ffn-up-ish GEMVs and the 49152-row output projection of SmolLM2-135M.
BENCHMARK(BM_MatMulQ_Q4_1)
    ->Args({1, 576, 1536, 1})->Args({1, 1536, 576, 1})->Args({1, 576, 49152, 1})
    ->Args({1, 576, 1536, 2})->Args({1, 1536, 576, 2})->Args({1, 576, 49152, 2})
    ->Args({64, 576, 1536, 2})
    ->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace hxrt::kernels::cpu
