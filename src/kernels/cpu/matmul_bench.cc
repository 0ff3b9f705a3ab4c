// MatMul implementations side by side: OpenBLAS sgemm ("MatMul") vs hxrt's blocked kernel ("BatchMatMulV3"),
// single-threaded on the same inputs, in GFLOP/s (counter "flops").
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/matmul.h"

namespace hxrt::kernels::cpu {
namespace {

struct Operands {
  std::vector<float> a, b, c;  // (m, k), (k, n), (m, n)
  Operands(int64_t m, int64_t n, int64_t k) : a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n)),
                                              c(static_cast<size_t>(m * n)) {
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (float& x : a) x = dist(rng);
    for (float& x : b) x = dist(rng);
  }
};

void set_flops(benchmark::State& state, int64_t m, int64_t n, int64_t k) {
  state.counters["flops"] = benchmark::Counter(static_cast<double>(2 * m * n * k) * static_cast<double>(state.iterations()),
                                               benchmark::Counter::kIsRate);
}

void BM_SgemmBlas(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  Operands op(m, n, k);
  for (auto _ : state) {
    sgemm_blas(m, n, k, op.a.data(), k, op.b.data(), n, op.c.data(), n);
    benchmark::DoNotOptimize(op.c.data());
  }
  set_flops(state, m, n, k);
}

void BM_SgemmBlocked(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  Operands op(m, n, k);
  for (auto _ : state) {
    sgemm_blocked(m, n, k, op.a.data(), k, op.b.data(), n, op.c.data(), n);
    benchmark::DoNotOptimize(op.c.data());
  }
  set_flops(state, m, n, k);
  state.SetLabel(std::string(gemm_isa_name(gemm_best_isa())));
}

// The blocked kernel's AVX2 path (what a CPU without AVX-512 runs), where this one has AVX-512.
void BM_SgemmBlockedAvx2(benchmark::State& state) {
  if (!gemm_isa_supported(GemmIsa::kAvx2)) {
    state.SkipWithError("no AVX2 here");
    return;
  }
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  Operands op(m, n, k);
  for (auto _ : state) {
    sgemm_blocked(m, n, k, op.a.data(), k, op.b.data(), n, op.c.data(), n, GemmIsa::kAvx2);
    benchmark::DoNotOptimize(op.c.data());
  }
  set_flops(state, m, n, k);
}

// (m, n, k): a small square, a prefill projection of SmolLM2 (576 wide), a large square, a decode-ish thin one.
void gemm_shapes(benchmark::internal::Benchmark* b) {
  b->Args({64, 64, 64})->Args({128, 576, 576})->Args({512, 512, 512})->Args({7, 1536, 576});
  // MiniLM-L3 (hidden 384, FFN 1536) at batch 1 × 7 and 2 × 16 tokens: QKV / output, FFN up, FFN down.
  b->Args({7, 384, 384})->Args({7, 1536, 384})->Args({7, 384, 1536})->Args({32, 384, 384})->Args({32, 1536, 384})
      ->Args({32, 384, 1536})->Args({16, 1536, 384})->Args({12, 1536, 384});
  b->Unit(benchmark::kMicrosecond);
}
BENCHMARK(BM_SgemmBlas)->Apply(gemm_shapes);
BENCHMARK(BM_SgemmBlocked)->Apply(gemm_shapes);
BENCHMARK(BM_SgemmBlockedAvx2)->Apply(gemm_shapes);

}  // namespace
}  // namespace hxrt::kernels::cpu
