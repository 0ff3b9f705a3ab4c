#include "hxrt/base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
#include <thread>
#include <vector>

namespace hxrt {
namespace {

TEST(ThreadPool, CoversRangeExactlyOnce) {
  ThreadPool pool(4);
  for (int64_t n : {0, 1, 7, 100, 10007}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.parallel_for(n, 3, [&](int64_t begin, int64_t end) {
      ASSERT_LE(begin, end);
      for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "n=" << n << " i=" << i;
  }
}

TEST(ThreadPool, RespectsGrain) {
  ThreadPool pool(4);
  std::atomic<int> short_chunks{0};
  pool.parallel_for(1000, 100, [&](int64_t begin, int64_t end) {
    if (end - begin < 100 && end != 1000) short_chunks.fetch_add(1);
  });
  EXPECT_EQ(short_chunks.load(), 0);
}

TEST(ThreadPool, SingleThreadRunsInline) {
  ThreadPool pool(1);
  const auto caller = std::this_thread::get_id();
  bool inline_only = true;
  pool.parallel_for(100, 1, [&](int64_t, int64_t) { inline_only &= std::this_thread::get_id() == caller; });
  EXPECT_TRUE(inline_only);
}

TEST(ThreadPool, NestedAndConcurrentCallersFinish) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&] {
      for (int rep = 0; rep < 20; ++rep) {
        pool.parallel_for(8, 1, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            pool.parallel_for(16, 1, [&](int64_t b, int64_t e) { total.fetch_add(e - b); });
          }
        });
      }
    });
  }
  for (auto& c : callers) c.join();
  EXPECT_EQ(total.load(), 4 * 20 * 8 * 16);
}

}  // namespace
}  // namespace hxrt
