#include "hxrt/memory/caching_allocator.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <span>
#include <random>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#include "hxrt/hal/cpu/cpu_driver.h"
#include "hxrt/hal/cpu/cpu_kernel.h"

namespace hxrt::memory {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// A kernel that blocks its stream until open() is called. It ignores abort() on purpose: it models a kernel
// that keeps running after its stream was aborted (stream.h allows that).
class Gate {
 public:
  Gate()
      : kernel_("gate", [this](const hal::CpuLaunchContext&) -> Status {
          running_.fetch_add(1);
          started_.store(true);
          while (!open_.load()) std::this_thread::sleep_for(200us);
          running_.fetch_sub(1);
          return ok_status();
        }) {}
  // A test that stops early (failed ASSERT) must not leave a stream blocked on a destroyed gate.
  ~Gate() {
    open();
    while (running_.load() != 0) std::this_thread::sleep_for(100us);
  }
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;
  void open() { open_.store(true); }
  bool started() const { return started_.load(); }
  Status launch(hal::Stream& stream) { return stream.launch(kernel_, hal::LaunchConfig{}, {}); }
  void wait_started() const {
    while (!started()) std::this_thread::sleep_for(100us);
  }

 private:
  std::atomic<bool> open_{false};
  std::atomic<bool> started_{false};
  std::atomic<int> running_{0};
  hal::CpuKernel kernel_;
};

// A stream that forwards to another stream and fails the test when used once retired: it stands for a stream
// whose owner destroyed it after telling the allocator to forget it.
class WatchedStream final : public hal::Stream {
 public:
  WatchedStream(hal::Device& device, std::unique_ptr<hal::Stream> inner)
      : Stream(&device, inner->name()), inner_(std::move(inner)) {}
  void retire() { retired_.store(true); }
  hal::Stream& inner() { return *inner_; }

  Status synchronize(hal::Duration timeout) override { return touch().synchronize(timeout); }
  hal::StreamState query() const override { return touch().query(); }
  Status status() const override { return touch().status(); }
  void abort() override { touch().abort(); }
  Status reset() override { return touch().reset(); }

 protected:
  Status do_launch(const hal::Kernel& kernel, const hal::LaunchConfig& config,
                   std::span<const hal::KernelArg> args) override {
    return touch().launch(kernel, config, args);
  }
  Status do_copy(hal::BufferView dst, hal::BufferView src) override { return touch().copy(dst, src); }
  Status do_copy_from_host(hal::BufferView dst, const void* src) override { return touch().copy_from_host(dst, src); }
  Status do_copy_to_host(void* dst, hal::BufferView src) override { return touch().copy_to_host(dst, src); }
  Status do_fill(hal::BufferView dst, uint32_t pattern, uint32_t pattern_bytes) override {
    return touch().fill(dst, pattern, pattern_bytes);
  }
  Status do_host_callback(hal::HostCallback callback) override { return touch().host_callback(std::move(callback)); }
  Status do_record(hal::Event& event) override { return touch().record(event); }
  Status do_wait(hal::Event& event, hal::Duration timeout) override { return touch().wait(event, timeout); }

 private:
  hal::Stream& touch() const {
    EXPECT_FALSE(retired_.load()) << "stream '" << name() << "' used after forget_stream()";
    return *inner_;
  }

  std::unique_ptr<hal::Stream> inner_;
  std::atomic<bool> retired_{false};
};

const hal::CpuKernel kFail("fail", [](const hal::CpuLaunchContext&) { return internal_error("injected failure"); });

class CachingAllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    driver_ = hal::make_cpu_driver();
    auto device = driver_->open_device(0);
    ASSERT_TRUE(device.ok()) << device.status().to_string();
    device_ = std::move(device).value();
    a_ = make_stream("A");
    b_ = make_stream("B");
  }
  void TearDown() override {
    for (auto& s : streams_) {
      s->synchronize(10s).ignore();
    }
  }
  hal::Stream* make_stream(const std::string& name) {
    auto stream = device_->create_stream(hal::StreamOptions{name});
    HXRT_CHECK(stream.ok(), "{}", stream.status().to_string());
    streams_.push_back(std::move(stream).value());
    return streams_.back().get();
  }
  static CachingAllocatorOptions one_small_segment_budget() {
    CachingAllocatorOptions options;
    options.max_reserved_bytes = kSmallSegmentSize;
    options.settle_timeout = 50ms;
    return options;
  }
  static bool overlaps(const Allocation& x, const Allocation& y) {
    const hal::BufferView& a = x.view();
    const hal::BufferView& b = y.view();
    return a.buffer == b.buffer && a.offset < b.offset + b.size && b.offset < a.offset + a.size;
  }
  // Checks the invariants that tie the counters together and to a snapshot.
  static void check_consistent(const CachingAllocator& allocator) {
    const AllocatorStats s = allocator.stats();
    const auto snap = allocator.snapshot();
    uint64_t reserved = 0, allocated = 0, pending = 0, free_bytes = 0, largest = 0, live = 0;
    for (const SegmentSnapshot& seg : snap) {
      uint64_t offset = 0;
      for (const BlockSnapshot& b : seg.blocks) {
        EXPECT_EQ(b.offset, offset);
        EXPECT_EQ(b.offset % allocator.alignment(), 0u);
        offset += b.size;
        if (b.allocated && b.pending_free) {
          pending += b.size;
        } else if (b.allocated) {
          allocated += b.size;
          ++live;
          EXPECT_LE(b.requested, b.size);
        } else {
          free_bytes += b.size;
          largest = std::max(largest, b.size);
        }
      }
      EXPECT_EQ(offset, seg.size);
      reserved += seg.size;
    }
    EXPECT_EQ(static_cast<uint64_t>(s.reserved_bytes.current), reserved);
    EXPECT_EQ(static_cast<uint64_t>(s.allocated_bytes.current), allocated);
    EXPECT_EQ(s.pending_free_bytes, pending);
    EXPECT_EQ(s.free_bytes, free_bytes);
    EXPECT_EQ(s.largest_free_block, largest);
    EXPECT_EQ(static_cast<uint64_t>(s.active_blocks.current), live);
    EXPECT_EQ(static_cast<uint64_t>(s.segments.current), snap.size());
    EXPECT_EQ(reserved, allocated + pending + free_bytes);
    EXPECT_EQ(s.reserved_bytes.allocated - s.reserved_bytes.freed, s.reserved_bytes.current);
    EXPECT_EQ(s.allocated_bytes.allocated - s.allocated_bytes.freed, s.allocated_bytes.current);
    EXPECT_GE(s.allocated_bytes.peak, s.allocated_bytes.current);
    EXPECT_EQ(s.num_allocs - s.num_frees, live);
  }

  std::unique_ptr<hal::Driver> driver_;
  std::unique_ptr<hal::Device> device_;
  std::vector<std::unique_ptr<hal::Stream>> streams_;
  hal::Stream* a_ = nullptr;
  hal::Stream* b_ = nullptr;
};

TEST_F(CachingAllocatorTest, AllocationsAreAlignedHostAddressableAndDisjoint) {
  CachingAllocator allocator(*device_);
  std::vector<Allocation> held;
  for (uint64_t bytes : {1ull, 100ull, 256ull, 257ull, 4096ull, 1ull << 20, (1ull << 20) + 1, 12ull << 20}) {
    auto a = allocator.allocate(bytes, *a_, "t");
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    EXPECT_EQ(a->size(), bytes);
    EXPECT_EQ(a->view().offset % allocator.alignment(), 0u);
    // Offsets are aligned to alignment(); addresses to the device's alignment of segment bases.
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a->host_address()) % device_->info().min_alignment, 0u);
    std::memset(a->host_address(), 0x5a, bytes);
    for (const Allocation& other : held) EXPECT_FALSE(overlaps(*a, other));
    held.push_back(*a);
  }
  const AllocatorStats s = allocator.stats();
  // Small requests share one 2 MiB small segment; 1 MiB + 1 and 12 MiB share one 20 MiB large segment.
  EXPECT_EQ(s.device_allocs, 2u);
  check_consistent(allocator);
  for (const Allocation& a : held) EXPECT_TRUE(allocator.free(a).ok());
  check_consistent(allocator);
}

TEST_F(CachingAllocatorTest, SizeClassesFollowTheNamedConstants) {
  CachingAllocator allocator(*device_);
  auto small = allocator.allocate(1000, *a_, "small");
  auto big = allocator.allocate(11 * kMiB, *a_, "big");
  auto mid = allocator.allocate(3 * kMiB, *a_, "mid");  // does not fit the 1 MiB left in big's segment
  ASSERT_TRUE(small.ok() && mid.ok() && big.ok());
  EXPECT_EQ(small->view().buffer->size(), kSmallSegmentSize);
  EXPECT_EQ(mid->view().buffer->size(), kMinLargeSegmentSize);
  EXPECT_EQ(big->view().buffer->size(), 12 * kMiB);  // rounded up to kSegmentGranularity
  // A second mid-sized request is carved from the same 20 MiB segment.
  auto mid2 = allocator.allocate(3 * kMiB, *a_, "mid");
  ASSERT_TRUE(mid2.ok());
  EXPECT_EQ(mid2->view().buffer, mid->view().buffer);
  for (auto* a : {&small, &mid, &big, &mid2}) EXPECT_TRUE(allocator.free(**a).ok());
}

TEST_F(CachingAllocatorTest, SameStreamReusesAFreedBlockAtOnce) {
  CachingAllocator allocator(*device_);
  Gate gate;
  auto first = allocator.allocate(4096, *a_, "x");
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(gate.launch(*a_).ok());  // stream A is busy: the free is stream ordered, not host ordered
  ASSERT_TRUE(allocator.free(*first).ok());
  auto second = allocator.allocate(4096, *a_, "y");
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->view().buffer, first->view().buffer);
  EXPECT_EQ(second->view().offset, first->view().offset);
  EXPECT_EQ(allocator.stats().cache_hits, 1u);
  EXPECT_EQ(allocator.stats().device_allocs, 1u);
  gate.open();
  EXPECT_TRUE(allocator.free(*second).ok());
}

TEST_F(CachingAllocatorTest, OtherStreamWaitsForTheFenceBeforeReuse) {
  CachingAllocator allocator(*device_, one_small_segment_budget());
  Gate gate;
  // Fill the only segment the budget allows with two 1 MiB blocks.
  auto x = allocator.allocate(kMiB, *a_, "x");
  auto y = allocator.allocate(kMiB, *a_, "y");
  ASSERT_TRUE(x.ok() && y.ok());
  EXPECT_EQ(allocator.stats().free_bytes, 0u);
  ASSERT_TRUE(gate.launch(*a_).ok());
  ASSERT_TRUE(allocator.free(*x).ok());

  // B may not take x's block while A has not passed the free: the fence stays pending, the budget forbids
  // growing, so this is out of memory after the (short) settle timeout.
  auto blocked = allocator.allocate(kMiB, *b_, "z");
  ASSERT_FALSE(blocked.ok());
  EXPECT_EQ(blocked.status().code(), StatusCode::kOutOfMemory);
  EXPECT_EQ(allocator.stats().ooms, 1u);

  gate.open();
  ASSERT_TRUE(a_->synchronize(10s).ok());
  auto reused = allocator.allocate(kMiB, *b_, "z");
  ASSERT_TRUE(reused.ok()) << reused.status().to_string();
  EXPECT_EQ(reused->view().buffer, x->view().buffer);
  EXPECT_EQ(reused->view().offset, x->view().offset);
  EXPECT_EQ(allocator.stats().device_allocs, 1u);
  EXPECT_TRUE(allocator.free(*reused).ok());
  EXPECT_TRUE(allocator.free(*y).ok());
  check_consistent(allocator);
}

TEST_F(CachingAllocatorTest, AllocationWaitsForPendingFenceWithoutHoldingTheLock) {
  CachingAllocatorOptions options = one_small_segment_budget();
  options.settle_timeout = 10s;
  CachingAllocator allocator(*device_, options);
  Gate gate;
  auto x = allocator.allocate(kMiB, *a_, "x");
  auto y = allocator.allocate(kMiB, *a_, "y");  // the budget's one small segment is full
  ASSERT_TRUE(x.ok() && y.ok());
  ASSERT_TRUE(gate.launch(*a_).ok());
  ASSERT_TRUE(allocator.free(*x).ok());
  std::atomic<bool> helper_done{false};
  std::thread helper([&] {
    std::this_thread::sleep_for(50ms);
    // Would deadlock (and the allocation time out) if the allocator held its mutex while waiting.
    static_cast<void>(allocator.stats());
    auto small = allocator.allocate(256, *a_, "helper");  // same stream: reuses x's block at once
    EXPECT_TRUE(small.ok());
    if (small.ok()) {
      EXPECT_TRUE(allocator.free(*small).ok());
    }
    helper_done.store(true);
    gate.open();
  });
  auto waited = allocator.allocate(kMiB, *b_, "b");
  helper.join();
  ASSERT_TRUE(waited.ok()) << waited.status().to_string();
  EXPECT_TRUE(helper_done.load());
  EXPECT_EQ(allocator.stats().retries, 1u);
  EXPECT_EQ(allocator.stats().device_allocs, 1u);
  EXPECT_EQ(waited->view().offset, x->view().offset);
  EXPECT_TRUE(allocator.free(*waited).ok());
  EXPECT_TRUE(allocator.free(*y).ok());
}

TEST_F(CachingAllocatorTest, FailedStreamKeepsMemoryUntilItsRunningWorkEnds) {
  CachingAllocator allocator(*device_, one_small_segment_budget());
  Gate gate;
  auto x = allocator.allocate(kMiB, *a_, "x");
  auto y = allocator.allocate(kMiB, *a_, "y");  // the budget's one small segment is full
  ASSERT_TRUE(x.ok() && y.ok());
  ASSERT_TRUE(gate.launch(*a_).ok());
  gate.wait_started();
  ASSERT_TRUE(allocator.free(*x).ok());
  a_->abort();  // queued work is discarded, but the gate kernel keeps running and may still touch x

  auto blocked = allocator.allocate(kMiB, *b_, "z");
  ASSERT_FALSE(blocked.ok());
  EXPECT_EQ(blocked.status().code(), StatusCode::kOutOfMemory);

  gate.open();
  // Once the running kernel finished (the stream idles), the failed fence counts as passed.
  for (int i = 0; i < 1000 && !a_->query().idle; ++i) std::this_thread::sleep_for(1ms);
  auto reused = allocator.allocate(kMiB, *b_, "z");
  ASSERT_TRUE(reused.ok()) << reused.status().to_string();
  EXPECT_EQ(reused->view().buffer, x->view().buffer);
  EXPECT_EQ(reused->view().offset, x->view().offset);
  EXPECT_TRUE(allocator.free(*reused).ok());
  EXPECT_TRUE(a_->reset().ok());
  EXPECT_TRUE(allocator.free(*y).ok());
}

// Regression: a free fenced behind a kernel failure. The fence fails; the stream is reset and passes a later fence;
// then it is busy again. The later completed fence proves the stream is past the failed one, so the memory is
// reusable and release_all() succeeds at once. (The failed fence used to count only while the stream was idle:
// with the stream busy, or merely not yet done counting its last record, release_all() gave up.)
TEST_F(CachingAllocatorTest, CompletedFenceSettlesAnEarlierFailedOneWhileTheStreamIsBusy) {
  CachingAllocator allocator(*device_, one_small_segment_budget());
  Gate before_failure, before_second_fence, busy_again;
  auto x = allocator.allocate(kMiB, *a_, "x");
  auto y = allocator.allocate(kMiB, *a_, "y");  // the budget's one small segment is full
  ASSERT_TRUE(x.ok() && y.ok());
  ASSERT_TRUE(before_failure.launch(*a_).ok());
  ASSERT_TRUE(a_->launch(kFail, hal::LaunchConfig{}, {}).ok());
  ASSERT_TRUE(allocator.free(*x).ok());
  // B cannot have x yet; trying fences x's free behind the failing kernel.
  EXPECT_EQ(allocator.allocate(kMiB, *b_, "z").status().code(), StatusCode::kOutOfMemory);
  before_failure.open();
  EXPECT_EQ(a_->synchronize(10s).code(), StatusCode::kInternal);  // the fence was skipped: it failed
  ASSERT_TRUE(a_->reset().ok());

  // A second fence, queued behind a gate so that no poll finds A idle, then A busy again once it completed.
  ASSERT_TRUE(before_second_fence.launch(*a_).ok());
  ASSERT_TRUE(allocator.free(*y).ok());
  EXPECT_EQ(allocator.allocate(kMiB, *b_, "z").status().code(), StatusCode::kOutOfMemory);
  ASSERT_TRUE(busy_again.launch(*a_).ok());
  before_second_fence.open();
  busy_again.wait_started();
  ASSERT_FALSE(a_->query().idle);

  auto z = allocator.allocate(kMiB, *b_, "z");
  ASSERT_TRUE(z.ok()) << z.status().to_string();
  EXPECT_EQ(z->view().buffer, x->view().buffer);
  ASSERT_TRUE(allocator.free(*z).ok());
  Result<LeakReport> released = allocator.release_all();
  ASSERT_TRUE(released.ok()) << released.status().to_string();
  EXPECT_TRUE(released->empty());
  EXPECT_EQ(allocator.stats().reserved_bytes.current, 0);
  busy_again.open();
}

// A failed fence on a stream that is healthy again gets a fresh fence, so its memory settles even though the
// stream never idles at a poll and nothing else is freed on it.
TEST_F(CachingAllocatorTest, FailedFenceIsSupersededOnceTheStreamIsHealthyAgain) {
  CachingAllocator allocator(*device_, one_small_segment_budget());
  Gate before_failure, after_reset, busy_again;
  auto x = allocator.allocate(kMiB, *a_, "x");
  auto y = allocator.allocate(kMiB, *a_, "y");  // the budget's one small segment is full
  ASSERT_TRUE(x.ok() && y.ok());
  ASSERT_TRUE(before_failure.launch(*a_).ok());
  ASSERT_TRUE(a_->launch(kFail, hal::LaunchConfig{}, {}).ok());
  ASSERT_TRUE(allocator.free(*x).ok());
  EXPECT_EQ(allocator.allocate(kMiB, *b_, "z").status().code(), StatusCode::kOutOfMemory);  // fenced, failing
  before_failure.open();
  EXPECT_FALSE(a_->synchronize(10s).ok());
  ASSERT_TRUE(a_->reset().ok());
  // Nothing more is freed on A, and no poll ever finds it idle.
  ASSERT_TRUE(after_reset.launch(*a_).ok());
  EXPECT_EQ(allocator.allocate(kMiB, *b_, "z").status().code(), StatusCode::kOutOfMemory);  // fresh fence, queued
  ASSERT_TRUE(busy_again.launch(*a_).ok());
  after_reset.open();
  busy_again.wait_started();
  auto z = allocator.allocate(kMiB, *b_, "z");
  ASSERT_TRUE(z.ok()) << z.status().to_string();
  EXPECT_EQ(z->view().buffer, x->view().buffer);
  EXPECT_EQ(z->view().offset, x->view().offset);
  ASSERT_TRUE(allocator.free(*z).ok());
  busy_again.open();
  ASSERT_TRUE(allocator.free(*y).ok());
}

// An owner destroying its streams tells the allocator first; the allocator never touches them again, keeps memory
// their work may still write, and settles it through fences that complete.
TEST_F(CachingAllocatorTest, ForgottenStreamIsNeverTouchedAgain) {
  CachingAllocatorOptions options;
  options.settle_timeout = 20ms;
  Gate gate;
  auto inner = device_->create_stream(hal::StreamOptions{"W"});
  ASSERT_TRUE(inner.ok());
  auto watched = std::make_unique<WatchedStream>(*device_, std::move(inner).value());
  {
    CachingAllocator allocator(*device_, options);
    auto x = allocator.allocate(kMiB, *watched, "x");
    ASSERT_TRUE(x.ok());
    ASSERT_TRUE(gate.launch(*watched).ok());
    ASSERT_TRUE(allocator.free(*x).ok());
    allocator.release_cached(UINT64_MAX);  // fences the free behind the gate
    allocator.forget_stream(*watched);
    watched->retire();

    Result<LeakReport> early = allocator.release_all();
    EXPECT_EQ(early.status().code(), StatusCode::kDeadlineExceeded) << "the gate may still write x";
    EXPECT_EQ(allocator.stats().reserved_bytes.current, static_cast<int64_t>(kSmallSegmentSize));
    gate.open();
    ASSERT_TRUE(watched->inner().synchronize(10s).ok());
    Result<LeakReport> late = allocator.release_all();  // the fence completed: the segment goes back
    ASSERT_TRUE(late.ok()) << late.status().to_string();
    EXPECT_EQ(allocator.stats().reserved_bytes.current, 0);
  }
  // A failed fence of a forgotten stream never passes: the memory is kept, and leaked by the destructor.
  Gate failing_gate;
  auto inner2 = device_->create_stream(hal::StreamOptions{"W2"});
  ASSERT_TRUE(inner2.ok());
  auto failing = std::make_unique<WatchedStream>(*device_, std::move(inner2).value());
  const uint64_t live_before = device_->memory_stats().live_buffers;
  {
#if defined(__SANITIZE_ADDRESS__)
    __lsan::ScopedDisabler intended_leak;  // the segment and its bookkeeping are leaked on purpose
#endif
    CachingAllocator allocator(*device_, options);
    auto x = allocator.allocate(kMiB, *failing, "x");
    ASSERT_TRUE(x.ok());
    ASSERT_TRUE(failing_gate.launch(*failing).ok());
    ASSERT_TRUE(failing->launch(kFail, hal::LaunchConfig{}, {}).ok());
    ASSERT_TRUE(allocator.free(*x).ok());
    allocator.release_cached(UINT64_MAX);
    allocator.forget_stream(*failing);
    failing->retire();
    failing_gate.open();
    EXPECT_FALSE(failing->inner().synchronize(10s).ok());
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(allocator.release_all().status().code(), StatusCode::kDeadlineExceeded);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 1s) << "nothing can pass: no waiting";
    EXPECT_EQ(allocator.stats().reserved_bytes.current, static_cast<int64_t>(kSmallSegmentSize));
  }
  EXPECT_EQ(device_->memory_stats().live_buffers, live_before + 1) << "the segment is leaked, not freed";
}

TEST_F(CachingAllocatorTest, RecordUseDefersReuseUntilEveryStreamPassed) {
  CachingAllocator allocator(*device_, one_small_segment_budget());
  hal::Stream* c = make_stream("C");
  Gate gate;
  auto x = allocator.allocate(kMiB, *a_, "shared");
  auto y = allocator.allocate(kMiB, *a_, "y");  // the budget's one small segment is full
  ASSERT_TRUE(x.ok() && y.ok());
  ASSERT_TRUE(gate.launch(*b_).ok());  // B (a reader of x) is busy
  ASSERT_TRUE(allocator.record_use(*x, *b_).ok());
  ASSERT_TRUE(allocator.free(*x).ok());
  EXPECT_EQ(allocator.stats().pending_free_bytes, kMiB);
  check_consistent(allocator);

  // Neither A (the owner: B may still read) nor C may reuse it while B is busy.
  auto on_a = allocator.allocate(kMiB, *a_, "a");
  EXPECT_EQ(on_a.status().code(), StatusCode::kOutOfMemory);
  auto on_c = allocator.allocate(kMiB, *c, "c");
  EXPECT_EQ(on_c.status().code(), StatusCode::kOutOfMemory);
  auto snap = allocator.snapshot();
  ASSERT_EQ(snap.size(), 1u);
  ASSERT_EQ(snap[0].blocks.size(), 2u);
  EXPECT_TRUE(snap[0].blocks[0].pending_free);
  EXPECT_FALSE(snap[0].blocks[1].pending_free);

  gate.open();
  ASSERT_TRUE(b_->synchronize(10s).ok());
  auto reused = allocator.allocate(kMiB, *c, "c");
  ASSERT_TRUE(reused.ok()) << reused.status().to_string();
  EXPECT_EQ(reused->view().buffer, x->view().buffer);
  EXPECT_EQ(reused->view().offset, x->view().offset);
  EXPECT_EQ(allocator.stats().pending_free_bytes, 0u);
  EXPECT_TRUE(allocator.free(*reused).ok());
  EXPECT_TRUE(allocator.free(*y).ok());
  check_consistent(allocator);
}

TEST_F(CachingAllocatorTest, BudgetExhaustionReportsSizeHoldersAndFragmentation) {
  CachingAllocatorOptions options;
  options.max_reserved_bytes = 8 * kMiB;
  options.settle_timeout = 10ms;
  CachingAllocator allocator(*device_, options);
  std::vector<Allocation> held;
  for (int i = 0; i < 3; ++i) {
    auto a = allocator.allocate(2 * kMiB, *a_, "attn.kv_cache");
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    held.push_back(*a);
  }
  auto w = allocator.allocate(kMiB, *a_, "mlp.weights");
  ASSERT_TRUE(w.ok());
  auto oom = allocator.allocate(3 * kMiB, *a_, "too.much");
  ASSERT_FALSE(oom.ok());
  EXPECT_EQ(oom.status().code(), StatusCode::kOutOfMemory);
  const std::string message(oom.status().message());
  EXPECT_THAT(message, HasSubstr("requested 3145728 bytes"));
  EXPECT_THAT(message, HasSubstr("attn.kv_cache"));
  EXPECT_THAT(message, HasSubstr("mlp.weights"));
  EXPECT_LT(message.find("attn.kv_cache"), message.find("mlp.weights")) << "top holders are sorted by bytes";
  EXPECT_THAT(message, HasSubstr("Reserved 8.00 MiB"));
  EXPECT_THAT(message, HasSubstr("largest free block"));
  EXPECT_THAT(message, HasSubstr("fragmentation"));
  EXPECT_THAT(message, HasSubstr("budget 8.00 MiB"));
  EXPECT_EQ(allocator.stats().ooms, 1u);
  auto holders = allocator.top_holders(1);
  ASSERT_EQ(holders.size(), 1u);
  EXPECT_EQ(holders[0].tag, "attn.kv_cache");
  EXPECT_EQ(holders[0].blocks, 3u);
  EXPECT_EQ(holders[0].bytes, 6 * kMiB);
  for (const Allocation& a : held) EXPECT_TRUE(allocator.free(a).ok());
  EXPECT_TRUE(allocator.free(*w).ok());
}

TEST_F(CachingAllocatorTest, RetryReleasesCachedSegmentsOfTheOtherPool) {
  CachingAllocatorOptions options;
  options.max_reserved_bytes = 20 * kMiB;
  options.settle_timeout = 1s;
  CachingAllocator allocator(*device_, options);
  auto small = allocator.allocate(4096, *a_, "s");
  ASSERT_TRUE(small.ok());
  ASSERT_TRUE(allocator.free(*small).ok());  // a cached 2 MiB small segment
  // 19 MiB does not fit next to the cached segment; it is released and the request retried.
  auto big = allocator.allocate(19 * kMiB, *a_, "big");
  ASSERT_TRUE(big.ok()) << big.status().to_string();
  const AllocatorStats s = allocator.stats();
  EXPECT_EQ(s.retries, 1u);
  EXPECT_EQ(s.device_frees, 1u);
  EXPECT_EQ(s.segments.current, 1);
  EXPECT_TRUE(allocator.free(*big).ok());
}

TEST_F(CachingAllocatorTest, ReleaseCachedTrimsFreeSegments) {
  CachingAllocator allocator(*device_);
  std::vector<Allocation> held;
  for (int i = 0; i < 3; ++i) {
    auto a = allocator.allocate(12 * kMiB, *a_, "big");
    ASSERT_TRUE(a.ok());
    held.push_back(*a);
  }
  auto keep = allocator.allocate(4096, *b_, "keep");
  ASSERT_TRUE(keep.ok());
  EXPECT_EQ(allocator.stats().reserved_bytes.current, static_cast<int64_t>(36 * kMiB + kSmallSegmentSize));
  for (const Allocation& a : held) ASSERT_TRUE(allocator.free(a).ok());
  EXPECT_EQ(allocator.stats().reserved_bytes.current, static_cast<int64_t>(36 * kMiB + kSmallSegmentSize));

  // Trim down to at most 20 MiB: two 12 MiB segments go, the one holding `keep` stays.
  EXPECT_EQ(allocator.release_cached(20 * kMiB), 24 * kMiB);
  EXPECT_EQ(allocator.stats().reserved_bytes.current, static_cast<int64_t>(12 * kMiB + kSmallSegmentSize));
  EXPECT_EQ(allocator.release_cached(), 12 * kMiB);
  EXPECT_EQ(allocator.stats().reserved_bytes.current, static_cast<int64_t>(kSmallSegmentSize));
  EXPECT_EQ(allocator.stats().device_frees, 3u);
  EXPECT_EQ(device_->memory_stats().allocated_bytes, kSmallSegmentSize);
  EXPECT_TRUE(allocator.free(*keep).ok());
  EXPECT_EQ(allocator.release_cached(), kSmallSegmentSize);
  EXPECT_EQ(device_->memory_stats().allocated_bytes, 0u);
  check_consistent(allocator);
}

TEST_F(CachingAllocatorTest, ReleaseThresholdReturnsSegmentsAfterFree) {
  CachingAllocatorOptions options;
  options.release_threshold = 16 * kMiB;
  CachingAllocator allocator(*device_, options);
  auto a = allocator.allocate(12 * kMiB, *a_, "a");
  auto b = allocator.allocate(12 * kMiB, *a_, "b");
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(a_->synchronize(1s).ok());
  ASSERT_TRUE(allocator.free(*a).ok());
  // The freed segment was not yet settled at the free (its fence was recorded then); the next free settles it.
  ASSERT_TRUE(a_->synchronize(1s).ok());
  ASSERT_TRUE(allocator.free(*b).ok());
  const AllocatorStats s = allocator.stats();
  EXPECT_LE(static_cast<uint64_t>(s.reserved_bytes.current), 16 * kMiB);
  EXPECT_GE(s.device_frees, 1u);
}

TEST_F(CachingAllocatorTest, BadInputsAreStatusesNotUndefinedBehaviour) {
  CachingAllocator allocator(*device_);
  CachingAllocator other(*device_);

  EXPECT_EQ(allocator.allocate(0, *a_, "zero").status().code(), StatusCode::kInvalidArgument);
  auto huge = allocator.allocate(UINT64_MAX, *a_, "huge");
  EXPECT_EQ(huge.status().code(), StatusCode::kOutOfMemory);
  EXPECT_THAT(std::string(huge.status().message()), HasSubstr("requested 18446744073709551615 bytes"));
  const uint64_t too_big = device_->info().max_allocation_bytes + 1;
  EXPECT_EQ(allocator.allocate(too_big, *a_, "too big").status().code(), StatusCode::kOutOfMemory);

  auto a = allocator.allocate(512, *a_, "a");
  ASSERT_TRUE(a.ok());
  auto foreign = other.allocate(512, *a_, "foreign");
  ASSERT_TRUE(foreign.ok());

  Status s = allocator.free(*foreign);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("another allocator"));

  Allocation never_issued(a->id() + 1000, a->view());
  s = allocator.free(never_issued);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("never issued"));

  hal::BufferView shifted = a->view();
  shifted.offset += 256;
  s = allocator.free(Allocation(a->id(), shifted));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("does not match"));

  EXPECT_EQ(allocator.free(Allocation()).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(allocator.record_use(*foreign, *b_).code(), StatusCode::kInvalidArgument);

  ASSERT_TRUE(allocator.free(*a).ok());
  s = allocator.free(*a);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("double free"));
  EXPECT_EQ(allocator.record_use(*a, *b_).code(), StatusCode::kFailedPrecondition);
  // The block was freed once: stats did not go negative.
  EXPECT_EQ(allocator.stats().active_blocks.current, 0);
  EXPECT_EQ(allocator.stats().num_frees, 1u);
  EXPECT_TRUE(other.free(*foreign).ok());
}

TEST_F(CachingAllocatorTest, ReleaseAllReportsLeaksAndLeavesAReusableAllocator) {
  CachingAllocator allocator(*device_);
  auto a = allocator.allocate(1000, *a_, "decoder.ffn");
  auto b = allocator.allocate(3000, *b_, "decoder.ffn");
  auto c = allocator.allocate(12 * kMiB, *a_, "embedding");
  auto d = allocator.allocate(256, *a_, "freed");
  ASSERT_TRUE(a.ok() && b.ok() && c.ok() && d.ok());
  ASSERT_TRUE(allocator.free(*d).ok());

  auto report = allocator.release_all();
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_EQ(report->count, 3u);
  EXPECT_EQ(report->bytes, 1024u + 3072u + 12 * kMiB);
  ASSERT_EQ(report->by_tag.size(), 2u);
  EXPECT_EQ(report->by_tag[0].tag, "embedding");
  EXPECT_EQ(report->by_tag[1].tag, "decoder.ffn");
  EXPECT_EQ(report->by_tag[1].blocks, 2u);
  EXPECT_THAT(report->to_string(), HasSubstr("3 allocation(s) leaked"));

  const AllocatorStats s = allocator.stats();
  EXPECT_EQ(s.reserved_bytes.current, 0);
  EXPECT_EQ(s.allocated_bytes.current, 0);
  EXPECT_EQ(s.segments.current, 0);
  EXPECT_EQ(device_->memory_stats().allocated_bytes, 0u);
  EXPECT_TRUE(allocator.snapshot().empty());
  EXPECT_EQ(allocator.free(*a).code(), StatusCode::kFailedPrecondition);

  // Reusable, also with new streams.
  hal::Stream* fresh = make_stream("fresh");
  auto again = allocator.allocate(1000, *fresh, "again");
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(allocator.free(*again).ok());
  auto clean = allocator.release_all();
  ASSERT_TRUE(clean.ok());
  EXPECT_TRUE(clean->empty());
  EXPECT_EQ(clean->to_string(), "no leaks");
}

TEST_F(CachingAllocatorTest, StatsTrackCurrentPeakAndTotals) {
  CachingAllocator allocator(*device_);
  auto a = allocator.allocate(1000, *a_, "a");
  auto b = allocator.allocate(5000, *a_, "b");
  ASSERT_TRUE(a.ok() && b.ok());
  AllocatorStats s = allocator.stats();
  EXPECT_EQ(s.allocated_bytes.current, 1024 + 5120);
  EXPECT_EQ(s.requested_bytes.current, 6000);
  EXPECT_EQ(s.active_blocks.current, 2);
  EXPECT_EQ(s.segments.current, 1);
  EXPECT_EQ(s.reserved_bytes.current, static_cast<int64_t>(kSmallSegmentSize));
  EXPECT_EQ(s.num_allocs, 2u);
  EXPECT_EQ(s.device_allocs, 1u);
  EXPECT_EQ(s.cache_hits, 1u);
  EXPECT_EQ(s.free_bytes, kSmallSegmentSize - 1024 - 5120);
  EXPECT_DOUBLE_EQ(s.fragmentation, 0.0);
  check_consistent(allocator);

  ASSERT_TRUE(allocator.free(*a).ok());
  s = allocator.stats();
  EXPECT_EQ(s.allocated_bytes.current, 5120);
  EXPECT_EQ(s.allocated_bytes.peak, 1024 + 5120);
  EXPECT_EQ(s.allocated_bytes.allocated, 1024 + 5120);
  EXPECT_EQ(s.allocated_bytes.freed, 1024);
  // Free space is now a 1 KiB hole plus the tail: fragmented.
  EXPECT_EQ(s.largest_free_block, kSmallSegmentSize - 1024 - 5120);
  EXPECT_NEAR(s.fragmentation, 1.0 - static_cast<double>(s.largest_free_block) / static_cast<double>(s.free_bytes),
              1e-12);
  EXPECT_GT(s.fragmentation, 0.0);
  check_consistent(allocator);

  allocator.reset_peak();
  EXPECT_EQ(allocator.stats().allocated_bytes.peak, 5120);
  ASSERT_TRUE(allocator.free(*b).ok());
  // Blocks freed on A merge with the settled tail only once A's fence settles them.
  ASSERT_TRUE(a_->synchronize(10s).ok());
  EXPECT_EQ(allocator.release_cached(UINT64_MAX), 0u);     // settles, releases nothing
  EXPECT_DOUBLE_EQ(allocator.stats().fragmentation, 0.0);  // one free block again
  EXPECT_EQ(allocator.snapshot().at(0).blocks.size(), 1u);
  check_consistent(allocator);
}

TEST_F(CachingAllocatorTest, SnapshotDescribesSegmentsAndBlocks) {
  CachingAllocator allocator(*device_);
  auto a = allocator.allocate(1000, *a_, "node.a");
  auto b = allocator.allocate(2000, *b_, "node.b");
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(allocator.free(*a).ok());
  auto snap = allocator.snapshot();
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_TRUE(snap[0].small);
  EXPECT_EQ(snap[0].size, kSmallSegmentSize);
  EXPECT_EQ(snap[0].allocated_bytes, 2048u);
  EXPECT_NE(snap[0].native_handle, 0u);
  ASSERT_EQ(snap[0].blocks.size(), 3u);
  const BlockSnapshot& freed = snap[0].blocks[0];
  EXPECT_FALSE(freed.allocated);
  EXPECT_EQ(freed.size, 1024u);
  EXPECT_EQ(freed.stream, "A");  // freed on A, not yet settled
  const BlockSnapshot& live = snap[0].blocks[1];
  EXPECT_TRUE(live.allocated);
  EXPECT_EQ(live.offset, 1024u);
  EXPECT_EQ(live.size, 2048u);
  EXPECT_EQ(live.requested, 2000u);
  EXPECT_EQ(live.tag, "node.b");
  EXPECT_EQ(live.stream, "B");
  EXPECT_FALSE(snap[0].blocks[2].allocated);
  EXPECT_TRUE(allocator.free(*b).ok());
}

TEST_F(CachingAllocatorTest, FreeFromAHostCallback) {
  CachingAllocator allocator(*device_);
  auto a = allocator.allocate(4096, *a_, "cb");
  ASSERT_TRUE(a.ok());
  Allocation handle = *a;
  std::atomic<bool> freed{false};
  ASSERT_TRUE(a_->host_callback([&](const Status&) { freed.store(allocator.free(handle).ok()); }).ok());
  ASSERT_TRUE(a_->synchronize(10s).ok());
  EXPECT_TRUE(freed.load());
  EXPECT_EQ(allocator.stats().active_blocks.current, 0);
}

TEST_F(CachingAllocatorTest, StreamOfAnotherDeviceIsRejected) {
  auto other_driver = hal::make_cpu_driver();
  auto other_device = other_driver->open_device(0);
  ASSERT_TRUE(other_device.ok());
  auto other_stream = (*other_device)->create_stream();
  ASSERT_TRUE(other_stream.ok());
  CachingAllocator allocator(*device_);
  EXPECT_EQ(allocator.allocate(64, **other_stream, "x").status().code(), StatusCode::kInvalidArgument);
}

// Several threads allocate on their own streams, fill the block on the device, verify it with a kernel and free it
// without synchronizing — so reuse is protected only by the allocator's stream ordering. Any early cross-stream
// reuse overwrites a block that a checker is still reading (a mismatch here, a data race under TSan).
TEST_F(CachingAllocatorTest, MultiThreadedStressOnSeveralStreams) {
  CachingAllocatorOptions options;
  // One small segment for four threads holding at most 128 KiB each (plus pending frees): streams must keep
  // taking each other's freed blocks, through fences and retries.
  options.max_reserved_bytes = kSmallSegmentSize;
  CachingAllocator allocator(*device_, options);
  constexpr int kThreads = 4;
  constexpr int kIterations = 1000;
  std::atomic<int> mismatches{0};
  std::atomic<int> failures{0};
  hal::CpuKernel check("check", [&mismatches](const hal::CpuLaunchContext& ctx) -> Status {
    const auto* words = ctx.buffer<const uint32_t>(0);
    const uint64_t n = ctx.buffer_bytes(0) / sizeof(uint32_t);
    const auto expected = ctx.scalar<uint32_t>(1);
    for (uint64_t i = 0; i < n; ++i) {
      if (words[i] != expected) {
        mismatches.fetch_add(1);
        break;
      }
    }
    return ok_status();
  });
  std::vector<hal::Stream*> streams;
  for (int t = 0; t < kThreads; ++t) streams.push_back(make_stream(fmt::format("stress{}", t)));
  hal::Stream* shared_reader = make_stream("reader");

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(1234 + t));
      hal::Stream& stream = *streams[static_cast<size_t>(t)];
      auto event = device_->create_event();
      if (!event.ok()) {
        failures.fetch_add(1);
        return;
      }
      for (int i = 0; i < kIterations; ++i) {
        const uint64_t bytes = 4 * (1 + rng() % (rng() % 8 == 0 ? 32 * 1024 : 4096));
        auto a = allocator.allocate(bytes, stream, fmt::format("thread{}", t));
        if (!a.ok()) {
          failures.fetch_add(1);
          ADD_FAILURE() << a.status().to_string();
          return;
        }
        const uint32_t pattern = static_cast<uint32_t>(t * 100000 + i);
        const hal::KernelArg args[] = {hal::KernelArg::buffer(a->view()), hal::KernelArg::scalar(pattern)};
        bool ok = stream.fill(a->view(), pattern, 4).ok() && stream.launch(check, hal::LaunchConfig{}, args).ok();
        if (i % 5 == 0) {
          // Also read it on a shared stream after this one: reuse must wait for both.
          ok = ok && stream.record(**event).ok() && shared_reader->wait(**event).ok() &&
               shared_reader->launch(check, hal::LaunchConfig{}, args).ok() &&
               allocator.record_use(*a, *shared_reader).ok();
        }
        ok = ok && allocator.free(*a).ok();
        if (!ok) failures.fetch_add(1);
        if (i % 50 == 0) static_cast<void>(allocator.stats());
      }
      if (!stream.synchronize(30s).ok()) failures.fetch_add(1);
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_TRUE(shared_reader->synchronize(30s).ok());
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
  const AllocatorStats s = allocator.stats();
  EXPECT_EQ(s.num_allocs, static_cast<uint64_t>(kThreads * kIterations));
  EXPECT_EQ(s.num_frees, s.num_allocs);
  EXPECT_EQ(s.allocated_bytes.current, 0);
  EXPECT_LE(static_cast<uint64_t>(s.reserved_bytes.peak), options.max_reserved_bytes);
  EXPECT_GT(s.retries, 0u) << "the stress never needed another stream's memory";
  check_consistent(allocator);
  auto report = allocator.release_all();
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_TRUE(report->empty());
  EXPECT_EQ(device_->memory_stats().allocated_bytes, 0u);
}

}  // namespace
}  // namespace hxrt::memory
