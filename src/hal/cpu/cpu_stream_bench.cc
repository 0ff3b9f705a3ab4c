// Latency and throughput of the CPU stream machinery (Google Benchmark; run by hand, never by CTest):
//   build/src/hal/hal_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <memory>

#include "hxrt/hal/cpu/cpu_driver.h"
#include "hxrt/hal/cpu/cpu_kernel.h"

namespace hxrt::hal {
namespace {

const CpuKernel kEmpty{"bench.empty", [](const CpuLaunchContext&) { return ok_status(); }};

struct Fixture {
  std::unique_ptr<Driver> driver = make_cpu_driver();
  std::unique_ptr<Device> device = std::move(driver->open_device(0)).value();
  std::unique_ptr<Stream> a = std::move(device->create_stream()).value();
  std::unique_ptr<Stream> b = std::move(device->create_stream()).value();
  std::unique_ptr<Event> event = std::move(device->create_event()).value();
};

// One empty kernel, enqueued and waited for: the round trip host -> stream worker -> host.
void BM_LaunchToCompletion(benchmark::State& state) {
  Fixture f;
  for (auto _ : state) {
    if (!f.a->launch(kEmpty, LaunchConfig{}, {}).ok() || !f.a->synchronize().ok()) state.SkipWithError("failed");
  }
}
BENCHMARK(BM_LaunchToCompletion)->UseRealTime();

// Stream B waits on an event that stream A records; the host waits for B. Measures the cross-stream wake-up path.
void BM_CrossStreamEventWakeup(benchmark::State& state) {
  Fixture f;
  for (auto _ : state) {
    bool ok = f.a->launch(kEmpty, LaunchConfig{}, {}).ok() && f.a->record(*f.event).ok() &&
              f.b->wait(*f.event).ok() && f.b->launch(kEmpty, LaunchConfig{}, {}).ok() && f.b->synchronize().ok();
    if (!ok) state.SkipWithError("failed");
  }
}
BENCHMARK(BM_CrossStreamEventWakeup)->UseRealTime();

// Enqueue rate of empty kernels: batches of 1000 launches, then one synchronize.
void BM_EnqueueThroughput(benchmark::State& state) {
  Fixture f;
  constexpr int kBatch = 1000;
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) {
      if (!f.a->launch(kEmpty, LaunchConfig{}, {}).ok()) state.SkipWithError("failed");
    }
    if (!f.a->synchronize().ok()) state.SkipWithError("failed");
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}
BENCHMARK(BM_EnqueueThroughput)->UseRealTime();

// The same with two buffer arguments per launch (the argument copy is part of the enqueue cost).
void BM_EnqueueThroughputWithArgs(benchmark::State& state) {
  Fixture f;
  auto buffer = std::move(f.device->allocate(4096, MemoryKind::kDevice)).value();
  const KernelArg args[] = {KernelArg::buffer(BufferView(*buffer)), KernelArg::buffer(BufferView(*buffer)),
                            KernelArg::scalar(1.0f)};
  constexpr int kBatch = 1000;
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) {
      if (!f.a->launch(kEmpty, LaunchConfig{}, args).ok()) state.SkipWithError("failed");
    }
    if (!f.a->synchronize().ok()) state.SkipWithError("failed");
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}
BENCHMARK(BM_EnqueueThroughputWithArgs)->UseRealTime();

}  // namespace
}  // namespace hxrt::hal

BENCHMARK_MAIN();
