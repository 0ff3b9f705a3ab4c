// BlockManager hot paths: the per-step decode reserve + commit of a batch, and admission with a prefix hit.
#include <benchmark/benchmark.h>

#include <numeric>
#include <vector>

#include "hxrt/kv/block_manager.h"

namespace hxrt::kv {
namespace {

// One decode step of `batch` sequences: reserve one token each, then commit each.
void BM_DecodeStep(benchmark::State& state) {
  const auto batch = static_cast<int>(state.range(0));
  BlockManager m(1 << 16, 16);
  std::vector<int32_t> prompt(500);
  std::iota(prompt.begin(), prompt.end(), 0);
  std::vector<int32_t> slots(prompt.size());
  for (int s = 0; s < batch; ++s) {
    if (!m.add_sequence(s, {}).ok() || !m.reserve(s, prompt, slots).ok() || !m.commit(s).ok()) {
      state.SkipWithError("setup failed");
      return;
    }
  }
  int32_t token = 0;
  int64_t steps = 0;
  for (auto _ : state) {
    for (int s = 0; s < batch; ++s) {
      int32_t slot = 0;
      Result<Reservation> r = m.reserve(s, std::span<const int32_t>(&token, 1), std::span<int32_t>(&slot, 1));
      benchmark::DoNotOptimize(slot);
      if (!r.ok() || !r->ok() || !m.commit(s).ok()) {
        state.SkipWithError("reserve failed");
        return;
      }
    }
    if (++steps % 256 == 0) {  // keep lengths bounded: roll every sequence back to its prompt
      state.PauseTiming();
      for (int s = 0; s < batch; ++s) m.truncate(s, static_cast<int32_t>(prompt.size())).ignore();
      state.ResumeTiming();
    }
  }
  state.SetItemsProcessed(state.iterations() * batch);
}
BENCHMARK(BM_DecodeStep)->Arg(1)->Arg(64)->Arg(256);

// Admitting and releasing a request whose prompt shares a cached prefix of range(0) tokens.
void BM_AddSequencePrefixHit(benchmark::State& state) {
  const auto n = static_cast<int32_t>(state.range(0));
  BlockManager m(1 << 14, 16);
  std::vector<int32_t> prompt(static_cast<size_t>(n) + 1);
  std::iota(prompt.begin(), prompt.end(), 0);
  std::vector<int32_t> slots(prompt.size());
  if (!m.add_sequence(0, {}).ok() || !m.reserve(0, prompt, slots).ok() || !m.commit(0).ok()) {
    state.SkipWithError("setup failed");
    return;
  }
  for (auto _ : state) {
    Result<int32_t> hit = m.add_sequence(1, prompt);
    benchmark::DoNotOptimize(hit);
    m.release(1).ignore();
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_AddSequencePrefixHit)->Arg(512)->Arg(4096);

}  // namespace
}  // namespace hxrt::kv

BENCHMARK_MAIN();
