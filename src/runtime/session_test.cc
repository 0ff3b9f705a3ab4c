#include "hxrt/runtime/session.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "hxrt/hal/cpu/cpu_driver.h"
#include "hxrt/hal/cpu/cpu_kernel.h"

namespace hxrt::runtime {
namespace {

using std::chrono::milliseconds;

const hal::CpuKernel kSpinUntilCancelled{"test.spin_until_cancelled", [](const hal::CpuLaunchContext& ctx) {
                                           const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
                                           while (!ctx.cancelled() && std::chrono::steady_clock::now() < end) {
                                           }
                                           return ctx.cancelled() ? aborted("cancelled") : ok_status();
                                         }};
const hal::CpuKernel kFail{"test.fail", [](const hal::CpuLaunchContext&) { return data_loss("checksum mismatch"); }};

class SessionTest : public testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(hal::register_builtin_drivers(drivers_).ok()); }

  std::unique_ptr<Session> open(SessionOptions options = {}) {
    Result<std::unique_ptr<Session>> session = Session::create(drivers_, "cpu", options);
    EXPECT_TRUE(session.ok()) << session.status().to_string();
    return session.ok() ? std::move(session).value() : nullptr;
  }

  hal::DriverRegistry drivers_;
};

TEST_F(SessionTest, CreateReportsBadDevicesClearly) {
  Result<std::unique_ptr<Session>> bad = Session::create(drivers_, "npu:0");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kNotFound);
  EXPECT_NE(bad.status().to_string().find("npu:0"), std::string::npos) << bad.status().to_string();
  EXPECT_EQ(Session::create(std::unique_ptr<hal::Device>()).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(SessionTest, StreamsAreCreatedOnDemandAndNamed) {
  auto session = open();
  Result<hal::Stream*> a = session->stream("attention");
  Result<hal::Stream*> again = session->stream("attention");
  Result<hal::Stream*> def = session->stream("default");
  ASSERT_TRUE(a.ok() && again.ok() && def.ok());
  EXPECT_EQ(*a, *again);
  EXPECT_EQ(*def, &session->default_stream());
  EXPECT_EQ((*a)->name(), "attention");
  EXPECT_EQ(session->stream("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(session->stream_names(), (std::vector<std::string>{"default", "attention"}));
}

TEST_F(SessionTest, CleanCloseReportsNothing) {
  auto session = open();
  hal::Stream& stream = session->default_stream();
  Result<memory::Allocation> block = session->pool().allocate(4096, stream, "activations");
  ASSERT_TRUE(block.ok());
  ASSERT_TRUE(stream.fill(block->view(), 7, 1).ok());
  ASSERT_TRUE(session->pool().free(*block).ok());
  Result<TeardownReport> report = session->close();
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_TRUE(report->clean()) << report->to_string();
  EXPECT_EQ(report->streams_closed, 1u);
  EXPECT_TRUE(session->closed());
  // Closed: everything is a precondition failure, close is idempotent.
  EXPECT_EQ(session->stream("x").status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(session->create_event().status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(session->synchronize().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(session->reset().status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(session->close().ok());
}

TEST_F(SessionTest, ResetReportsLeaksAndReturnsToCleanState) {
  auto session = open();
  hal::Stream* side = *session->stream("side");
  ASSERT_TRUE(session->pool().allocate(1000, session->default_stream(), "kv_cache").ok());
  ASSERT_TRUE(session->pool().allocate(3000, *side, "kv_cache").ok());
  ASSERT_TRUE(session->pool().allocate(5 << 20, *side, "logits").ok());
  ASSERT_TRUE(session->create_event().ok());
  EXPECT_GT(session->pool().stats().reserved_bytes.current, 0);

  Result<TeardownReport> report = session->reset();
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_FALSE(report->clean());
  EXPECT_EQ(report->leaked_blocks.count, 3u);
  EXPECT_GE(report->leaked_blocks.bytes, 4000u + (5u << 20));
  ASSERT_EQ(report->leaked_blocks.by_tag.size(), 2u);
  EXPECT_EQ(report->leaked_blocks.by_tag[0].tag, "logits") << "largest holder first";
  EXPECT_EQ(report->leaked_blocks.by_tag[1].blocks, 2u);
  EXPECT_EQ(report->events_destroyed, 1u);
  EXPECT_EQ(report->streams_closed, 1u) << "the named stream is closed, the default stream kept";
  EXPECT_NE(report->to_string().find("kv_cache"), std::string::npos);

  // Clean state: nothing reserved, no device buffers, default stream healthy, only the default stream left.
  EXPECT_EQ(session->pool().stats().reserved_bytes.current, 0);
  EXPECT_EQ(session->pool().stats().active_blocks.current, 0);
  EXPECT_EQ(session->device().memory_stats().live_buffers, 0u);
  EXPECT_EQ(session->stream_names(), std::vector<std::string>{"default"});
  EXPECT_TRUE(session->default_stream().status().ok());
  Result<memory::Allocation> again = session->pool().allocate(1000, session->default_stream(), "next_task");
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(session->pool().free(*again).ok());
  Result<TeardownReport> second = session->reset();
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->clean()) << second->to_string();
}

TEST_F(SessionTest, TeardownAbortsWorkStillInFlight) {
  SessionOptions options;
  options.teardown_timeout = milliseconds(50);
  auto session = open(options);
  hal::Stream* busy = *session->stream("busy");
  ASSERT_TRUE(busy->launch(kSpinUntilCancelled, hal::LaunchConfig{}, {}).ok());
  ASSERT_TRUE(busy->fill(session->pool().allocate(64, *busy, "pending").value().view(), 0, 1).ok());
  const auto start = std::chrono::steady_clock::now();
  Result<TeardownReport> report = session->close();
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(report->aborted_streams, std::vector<std::string>{"busy"});
  EXPECT_EQ(report->leaked_blocks.count, 1u);
  EXPECT_EQ(report->streams_closed, 2u);
}

TEST_F(SessionTest, DestructorWithWorkInFlightDoesNotHang) {
  SessionOptions options;
  options.teardown_timeout = milliseconds(20);
  auto session = open(options);
  ASSERT_TRUE(session->default_stream().launch(kSpinUntilCancelled, hal::LaunchConfig{}, {}).ok());
  const auto start = std::chrono::steady_clock::now();
  session.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST_F(SessionTest, FailedStreamsAreReportedAndRecovered) {
  auto session = open();
  hal::Stream* stream = *session->stream("worker");
  ASSERT_TRUE(stream->launch(kFail, hal::LaunchConfig{}, {}).ok());
  Status synced = session->synchronize();
  EXPECT_EQ(synced.code(), StatusCode::kDataLoss);
  EXPECT_NE(synced.to_string().find("test.fail"), std::string::npos) << synced.to_string();
  Result<TeardownReport> report = session->reset();
  ASSERT_TRUE(report.ok());
  ASSERT_EQ(report->stream_errors.size(), 1u);
  EXPECT_NE(report->stream_errors[0].find("worker"), std::string::npos);
  EXPECT_NE(report->stream_errors[0].find("checksum mismatch"), std::string::npos);
  EXPECT_TRUE(session->synchronize().ok());
}

// Regression: the pool could not release memory still used by work (here a stream the session does not own), so
// release_all failed. Teardown still destroys the session's streams, after the pool forgot them, and the pool
// settles the rest once the work ends; nothing touches a destroyed stream.
TEST_F(SessionTest, TeardownDestroysStreamsEvenWhenThePoolIsStillAwaitingWork) {
  SessionOptions options;
  options.pool.settle_timeout = milliseconds(20);
  auto session = open(options);
  Result<hal::Stream*> work = session->stream("work");
  ASSERT_TRUE(work.ok());
  Result<std::unique_ptr<hal::Stream>> outside = session->device().create_stream(hal::StreamOptions{"outside"});
  ASSERT_TRUE(outside.ok());
  std::atomic<bool> open_gate{false};
  const hal::CpuKernel gate{"test.gate", [&](const hal::CpuLaunchContext&) {
                              while (!open_gate.load()) std::this_thread::sleep_for(milliseconds(1));
                              return ok_status();
                            }};
  // A block used by a failed kernel on the session's stream and by gated work on the outside stream.
  Result<memory::Allocation> block = session->pool().allocate(4096, **work, "shared");
  ASSERT_TRUE(block.ok());
  ASSERT_TRUE((*work)->launch(kFail, hal::LaunchConfig{}, {}).ok());
  ASSERT_TRUE(session->pool().record_use(*block, **outside).ok());
  ASSERT_TRUE((*outside)->launch(gate, hal::LaunchConfig{}, {}).ok());
  ASSERT_TRUE(session->pool().free(*block).ok());

  Result<TeardownReport> report = session->close();
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), StatusCode::kDeadlineExceeded) << report.status().to_string();
  EXPECT_TRUE(session->closed());
  open_gate.store(true);
  ASSERT_TRUE((*outside)->synchronize().ok());
  EXPECT_EQ(session->pool().stats().segments.current, 1);
  Result<memory::LeakReport> released = session->pool().release_all();  // the outside work is over
  ASSERT_TRUE(released.ok()) << released.status().to_string();
  EXPECT_EQ(session->pool().stats().segments.current, 0);
  session.reset();
}

TEST_F(SessionTest, ReportsDeviceBuffersHeldOutsideThePool) {
  auto session = open();
  Result<std::unique_ptr<hal::Buffer>> outside = session->device().allocate(128, hal::MemoryKind::kDevice);
  ASSERT_TRUE(outside.ok());
  Result<TeardownReport> report = session->reset();
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->device_buffers_live, 1u);
  outside->reset();
  EXPECT_TRUE(session->reset()->clean());
}

TEST_F(SessionTest, ReportsHostRegistrationsStillLive) {
  auto session = open();
  std::vector<float> host(1024, 1.0f);
  Result<std::unique_ptr<hal::Buffer>> registered =
      session->device().register_host(host.data(), host.size() * sizeof(float));
  ASSERT_TRUE(registered.ok()) << registered.status().to_string();
  Result<TeardownReport> report = session->reset();
  ASSERT_TRUE(report.ok());
  EXPECT_FALSE(report->clean()) << "a live registration is not a clean teardown";
  EXPECT_EQ(report->registered_host_buffers, 1u);
  EXPECT_NE(report->to_string().find("1 host memory registrations still live"), std::string::npos)
      << report->to_string();
  registered->reset();
  EXPECT_TRUE(session->reset()->clean());
}

TEST_F(SessionTest, AStreamThatTimedOutWaitingIsAFailedStreamNotABusyOne) {
  auto session = open(SessionOptions{.teardown_timeout = milliseconds(300)});
  Result<hal::Stream*> producer = session->stream("producer");
  Result<hal::Stream*> consumer = session->stream("consumer");
  Result<hal::Event*> event = session->create_event();
  ASSERT_TRUE(producer.ok() && consumer.ok() && event.ok());
  ASSERT_TRUE((*producer)->launch(kSpinUntilCancelled, hal::LaunchConfig{}, {}).ok());
  ASSERT_TRUE((*producer)->record(**event).ok());
  ASSERT_TRUE((*consumer)->wait(**event, milliseconds(5)).ok());
  const Status waited = (*consumer)->synchronize();
  ASSERT_EQ(waited.code(), StatusCode::kDeadlineExceeded) << waited.to_string();

  Result<TeardownReport> report = session->close();
  ASSERT_TRUE(report.ok()) << report.status().to_string();
  // The producer is still spinning at the teardown deadline: aborted. The consumer is idle and failed: its error is
  // reported, and it is not an aborted busy stream.
  EXPECT_EQ(report->aborted_streams, std::vector<std::string>{"producer"}) << report->to_string();
  ASSERT_EQ(report->stream_errors.size(), 1u) << report->to_string();
  EXPECT_EQ(report->stream_errors[0].rfind("consumer: DEADLINE_EXCEEDED", 0), 0u) << report->stream_errors[0];
}

TEST_F(SessionTest, EventsAreOwnedAndDestroyable) {
  auto session = open();
  Result<hal::Event*> event = session->create_event();
  ASSERT_TRUE(event.ok());
  ASSERT_TRUE(session->default_stream().record(**event).ok());
  ASSERT_TRUE((*event)->synchronize().ok());
  EXPECT_TRUE(session->destroy_event(*event).ok());
  EXPECT_EQ(session->destroy_event(*event).code(), StatusCode::kInvalidArgument);
}

TEST_F(SessionTest, ConcurrentUseFromManyThreads) {
  auto session = open();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      hal::Stream* stream = *session->stream(fmt::format("s{}", t % 2));
      for (int i = 0; i < 50; ++i) {
        Result<memory::Allocation> block = session->pool().allocate(256 * static_cast<uint64_t>(i + 1), *stream,
                                                                    fmt::format("thread{}", t));
        ASSERT_TRUE(block.ok()) << block.status().to_string();
        ASSERT_TRUE(stream->fill(block->view(), static_cast<uint32_t>(t), 1).ok());
        ASSERT_TRUE(session->pool().free(*block).ok());
        ASSERT_TRUE(session->create_event().ok());
      }
    });
  }
  for (auto& thread : threads) thread.join();
  ASSERT_TRUE(session->synchronize().ok());
  Result<TeardownReport> report = session->close();
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->leaked_blocks.empty()) << report->to_string();
  EXPECT_EQ(report->events_destroyed, 200u);
}

}  // namespace
}  // namespace hxrt::runtime
