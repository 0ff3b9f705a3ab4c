// Hot path of the caching allocator: an allocate + free pair on one stream, served from the cache, next to glibc
// malloc/free of the same sizes. Run with --benchmark_repetitions=5 --benchmark_report_aggregates_only=true.
#include <cstdlib>
#include <memory>

#include <benchmark/benchmark.h>

#include "hxrt/base/check.h"
#include "hxrt/hal/cpu/cpu_driver.h"
#include "hxrt/memory/caching_allocator.h"

namespace hxrt::memory {
namespace {

struct Fixture {
  Fixture() {
    driver = hal::make_cpu_driver();
    auto d = driver->open_device(0);
    HXRT_CHECK(d.ok(), "{}", d.status().to_string());
    device = std::move(d).value();
    auto s = device->create_stream();
    HXRT_CHECK(s.ok(), "{}", s.status().to_string());
    stream = std::move(s).value();
  }
  std::unique_ptr<hal::Driver> driver;
  std::unique_ptr<hal::Device> device;
  std::unique_ptr<hal::Stream> stream;
};

void BM_CachingAllocFree(benchmark::State& state) {
  static Fixture fixture;
  const auto bytes = static_cast<uint64_t>(state.range(0));
  CachingAllocator allocator(*fixture.device);
  // Warm the cache: the first allocation reserves the segment.
  auto warm = allocator.allocate(bytes, *fixture.stream, "bench");
  HXRT_CHECK(warm.ok() && allocator.free(*warm).ok(), "warm-up failed");
  for (auto _ : state) {
    auto a = allocator.allocate(bytes, *fixture.stream, "bench");
    benchmark::DoNotOptimize(a);
    allocator.free(*a).ignore();
  }
  HXRT_CHECK(allocator.stats().device_allocs == 1, "the hot path grew the pool");
  state.SetLabel("cached, same stream");
}

void BM_MallocFree(benchmark::State& state) {
  const auto bytes = static_cast<size_t>(state.range(0));
  for (auto _ : state) {
    void* p = std::malloc(bytes);
    benchmark::DoNotOptimize(p);
    std::free(p);
  }
  state.SetLabel("glibc");
}

BENCHMARK(BM_CachingAllocFree)->Arg(256)->Arg(64 << 10)->Arg(1 << 20)->Arg(16 << 20);
BENCHMARK(BM_MallocFree)->Arg(256)->Arg(64 << 10)->Arg(1 << 20)->Arg(16 << 20);

}  // namespace
}  // namespace hxrt::memory

BENCHMARK_MAIN();
