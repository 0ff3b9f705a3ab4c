// The machine's memory read bandwidth, the roofline of a decode step (docs/llm.md, "Roofline"): T threads each
// stream their own slice of a buffer far larger than the cache a thread sees, with four independent 256-bit load
// chains (as MatMulQ streams its weights), all started together; bandwidth = bytes read by all / wall time. Prints
// one JSON line per thread count with the median of the repetitions.
//
//   build/bench/read_bandwidth [--mib 1024] [--threads 2] [--reps 7]
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

__attribute__((target("avx2"))) uint64_t read_slice(const std::byte* p, size_t bytes) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 128 <= bytes; i += 128) {
    a0 = _mm256_xor_si256(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_xor_si256(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    a2 = _mm256_xor_si256(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    a3 = _mm256_xor_si256(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  const __m256i x = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
  return static_cast<uint64_t>(_mm256_extract_epi64(x, 0) ^ _mm256_extract_epi64(x, 3));
}

// GiB/s of `threads` threads reading `total` bytes once, all released together.
double measure(std::byte* buffer, size_t total, int threads) {
  const size_t slice = total / static_cast<size_t>(threads) / 128 * 128;
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::atomic<uint64_t> sink{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) {
      }
      sink.fetch_xor(read_slice(buffer + static_cast<size_t>(t) * slice, slice));
    });
  }
  while (ready.load() != threads) {
  }
  const auto start = std::chrono::steady_clock::now();
  go.store(true, std::memory_order_release);
  for (std::thread& w : workers) w.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return static_cast<double>(slice) * threads / seconds / (1024.0 * 1024.0 * 1024.0);
}

}  // namespace

int main(int argc, char** argv) {
  size_t mib = 1024;
  int max_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int reps = 7;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const long value = std::strtol(argv[i + 1], nullptr, 10);
    if (value <= 0) {
      std::fprintf(stderr, "read_bandwidth: %s needs a positive value\n", flag.c_str());
      return 2;
    }
    if (flag == "--mib") {
      mib = static_cast<size_t>(value);
    } else if (flag == "--threads") {
      max_threads = static_cast<int>(value);
    } else if (flag == "--reps") {
      reps = static_cast<int>(value);
    } else {
      std::fprintf(stderr, "usage: read_bandwidth [--mib N] [--threads N] [--reps N]\n");
      return 2;
    }
  }
  if (!__builtin_cpu_supports("avx2")) {
    std::fprintf(stderr, "read_bandwidth: needs AVX2\n");
    return 1;
  }
  const size_t total = mib << 20;
  auto* buffer = static_cast<std::byte*>(std::aligned_alloc(64, total));
  if (buffer == nullptr) {
    std::fprintf(stderr, "read_bandwidth: cannot allocate %zu MiB\n", mib);
    return 1;
  }
  std::memset(buffer, 1, total);  // every page touched before timing
  for (int threads = 1; threads <= max_threads; ++threads) {
    std::vector<double> runs;
    for (int r = 0; r < reps; ++r) runs.push_back(measure(buffer, total, threads));
    std::sort(runs.begin(), runs.end());
    std::printf("{\"threads\": %d, \"mib\": %zu, \"read_gib_s_median\": %.2f, \"min\": %.2f, \"max\": %.2f}\n", threads,
                mib, runs[runs.size() / 2], runs.front(), runs.back());
  }
  std::free(buffer);
  return 0;
}
