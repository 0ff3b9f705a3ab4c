#include "hxrt/base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

namespace hxrt {
namespace {

// Every case runs on the sleep/wake pool (spin 0) and on the spinning one (Note [Spinning pool]).
class ThreadPoolTest : public ::testing::TestWithParam<int> {
 protected:
  std::chrono::microseconds spin() const { return std::chrono::microseconds(GetParam()); }
};

TEST_P(ThreadPoolTest, CoversRangeExactlyOnce) {
  ThreadPool pool(4, spin());
  for (int64_t n : {0, 1, 7, 100, 10007}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.parallel_for(n, 3, [&](int64_t begin, int64_t end) {
      ASSERT_LE(begin, end);
      for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "n=" << n << " i=" << i;
  }
}

TEST_P(ThreadPoolTest, RespectsGrain) {
  ThreadPool pool(4, spin());
  std::atomic<int> short_chunks{0};
  pool.parallel_for(1000, 100, [&](int64_t begin, int64_t end) {
    if (end - begin < 100 && end != 1000) short_chunks.fetch_add(1);
  });
  EXPECT_EQ(short_chunks.load(), 0);
}

TEST_P(ThreadPoolTest, SingleThreadRunsInline) {
  ThreadPool pool(1, spin());
  const auto caller = std::this_thread::get_id();
  bool inline_only = true;
  pool.parallel_for(100, 1, [&](int64_t, int64_t) { inline_only &= std::this_thread::get_id() == caller; });
  EXPECT_TRUE(inline_only);
}

TEST_P(ThreadPoolTest, NestedAndConcurrentCallersFinish) {
  ThreadPool pool(3, spin());
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

// Workers that went to sleep (spin 0, or a spin that ran out) are woken for the next loop, and every loop's chunks
// run on more than one thread when the workers are free.
TEST_P(ThreadPoolTest, IdleWorkersPickUpTheNextLoop) {
  ThreadPool pool(2, spin());
  for (int rep = 0; rep < 3; ++rep) {
    std::this_thread::sleep_for(spin() + std::chrono::milliseconds(2));  // the worker is asleep now
    std::atomic<int64_t> covered{0};
    pool.parallel_for(64, 1, [&](int64_t begin, int64_t end) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      covered.fetch_add(end - begin);
    });
    EXPECT_EQ(covered.load(), 64);
  }
}

INSTANTIATE_TEST_SUITE_P(Spin, ThreadPoolTest, ::testing::Values(0, 200),
                         [](const ::testing::TestParamInfo<int>& param) {
                           return "spin" + std::to_string(param.param);
                         });

}  // namespace
}  // namespace hxrt
