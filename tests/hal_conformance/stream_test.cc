// Conformance: streams (ordering, copies, fills, callbacks, sticky errors, abort, reset, timeouts).
#include <atomic>
#include <thread>

#include "hal_conformance/fixture.h"

namespace hxrt::hal::cts {
namespace {

using StreamConformance = HalConformance;
using std::chrono::microseconds;

TEST_P(StreamConformance, CopyRoundTripAndDeviceCopy) {
  auto stream = make_stream("copies");
  const std::vector<float> values = random_floats(1000, 1);
  auto a = upload(*stream, values);
  auto b = make_buffer(a->size());
  ASSERT_TRUE(stream->copy(*b, *a).ok());
  EXPECT_EQ(download(*stream, *b), values);
  // Sub-range copy.
  auto c = make_buffer(a->size());
  ASSERT_TRUE(stream->fill(*c, 0, 1).ok());
  ASSERT_TRUE(stream->copy(BufferView(c.get(), 40, 80), BufferView(a.get(), 400, 80)).ok());
  const std::vector<float> out = download(*stream, *c);
  EXPECT_EQ(out[9], 0.0f);
  EXPECT_EQ(out[10], values[100]);
  EXPECT_EQ(out[29], values[119]);
  EXPECT_EQ(out[30], 0.0f);
}

TEST_P(StreamConformance, FillPatterns) {
  auto stream = make_stream();
  auto buffer = make_buffer(64);
  std::vector<uint8_t> out(64);
  ASSERT_TRUE(stream->fill(*buffer, 0xAB, 1).ok());
  ASSERT_TRUE(stream->copy_to_host(out.data(), *buffer).ok());
  ASSERT_TRUE(stream->synchronize().ok());
  for (uint8_t v : out) ASSERT_EQ(v, 0xAB);
  ASSERT_TRUE(stream->fill(*buffer, 0x1234, 2).ok());
  ASSERT_TRUE(stream->fill(BufferView(buffer.get(), 32, 32), 0xDEADBEEF, 4).ok());
  ASSERT_TRUE(stream->copy_to_host(out.data(), *buffer).ok());
  ASSERT_TRUE(stream->synchronize().ok());
  uint16_t half;
  std::memcpy(&half, out.data() + 30, 2);
  EXPECT_EQ(half, 0x1234);
  uint32_t word;
  std::memcpy(&word, out.data() + 60, 4);
  EXPECT_EQ(word, 0xDEADBEEFu);
}

TEST_P(StreamConformance, BadArgumentsAreRejectedAtEnqueue) {
  auto stream = make_stream();
  auto a = make_buffer(64);
  auto b = make_buffer(32);
  EXPECT_EQ(stream->copy(*a, *b).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(stream->copy(BufferView(a.get(), 48, 32), *b).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(stream->copy(BufferView(), *b).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(stream->fill(*a, 0, 3).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(stream->fill(BufferView(a.get(), 0, 6), 0, 4).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(stream->copy_from_host(*a, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(stream->host_callback(nullptr).code(), StatusCode::kInvalidArgument);
  LaunchConfig zero_grid;
  zero_grid.grid = {0, 1, 1};
  EXPECT_EQ(stream->launch(*kernels_->spin(), zero_grid, {}).code(), StatusCode::kInvalidArgument);
  // Rejected calls leave the stream healthy.
  EXPECT_TRUE(stream->synchronize().ok());
  EXPECT_TRUE(stream->status().ok());
}

TEST_P(StreamConformance, CommandsRunInOrder) {
  auto stream = make_stream();
  auto buffer = upload(*stream, std::vector<float>(128, 0.0f));
  std::vector<int> order;
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(increment(*stream, *buffer, 128).ok());
    ASSERT_TRUE(stream->host_callback([&order, i](const Status& s) {
      EXPECT_TRUE(s.ok());
      order.push_back(i);
    }).ok());
  }
  const std::vector<float> out = download(*stream, *buffer);
  EXPECT_EQ(out, std::vector<float>(128, 50.0f));
  ASSERT_EQ(order.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[static_cast<size_t>(i)], i);
  EXPECT_TRUE(stream->query().idle);
}

TEST_P(StreamConformance, KernelFailureIsStickyUntilReset) {
  if (kernels_->fail() == nullptr) GTEST_SKIP() << "backend cannot fail a kernel on purpose";
  auto stream = make_stream("failing");
  auto event = make_event();
  auto buffer = upload(*stream, std::vector<float>(16, 1.0f));
  ASSERT_TRUE(spin(*stream, microseconds(20000)).ok());
  ASSERT_TRUE(stream->launch(*kernels_->fail(), LaunchConfig{}, {}).ok());
  // Queued behind the failure: skipped, but the record and the callback still complete (with the error).
  Status enqueue_after = increment(*stream, *buffer, 16);
  Status callback_status;
  std::atomic<bool> called{false};
  if (enqueue_after.ok()) {
    ASSERT_TRUE(stream->record(*event).ok());
    ASSERT_TRUE(stream->host_callback([&](const Status& s) {
      callback_status = s;
      called = true;
    }).ok());
  }
  Status synced = stream->synchronize();
  ASSERT_FALSE(synced.ok());
  EXPECT_EQ(synced.code(), StatusCode::kInternal);
  EXPECT_NE(synced.to_string().find("cts.fail"), std::string::npos) << synced.to_string();
  EXPECT_NE(synced.to_string().find("failing"), std::string::npos) << "names the stream: " << synced.to_string();
  if (enqueue_after.ok()) {
    EXPECT_TRUE(called.load());
    EXPECT_EQ(callback_status.code(), StatusCode::kInternal);
    EXPECT_EQ(event->state(), EventState::kFailed);
    EXPECT_EQ(event->synchronize(milliseconds(1000)).code(), StatusCode::kInternal);
  }
  // Every later call reports the first error.
  EXPECT_EQ(increment(*stream, *buffer, 16).code(), StatusCode::kInternal);
  EXPECT_EQ(stream->status().code(), StatusCode::kInternal);
  EXPECT_EQ(stream->query().status.code(), StatusCode::kInternal);
  // Reset makes it usable; the skipped increment never ran.
  ASSERT_TRUE(stream->reset().ok());
  EXPECT_TRUE(stream->status().ok());
  EXPECT_EQ(download(*stream, *buffer), std::vector<float>(16, 1.0f));
}

TEST_P(StreamConformance, SynchronizeTimesOutWithoutLosingWork) {
  auto stream = make_stream();
  auto buffer = upload(*stream, std::vector<float>(8, 0.0f));
  ASSERT_TRUE(spin(*stream, microseconds(300000)).ok());
  ASSERT_TRUE(increment(*stream, *buffer, 8).ok());
  Status timed_out = stream->synchronize(milliseconds(5));
  EXPECT_EQ(timed_out.code(), StatusCode::kDeadlineExceeded) << timed_out.to_string();
  EXPECT_FALSE(stream->query().idle);
  EXPECT_GE(stream->query().pending_commands, 1u);
  ASSERT_TRUE(stream->synchronize().ok());
  EXPECT_EQ(download(*stream, *buffer), std::vector<float>(8, 1.0f));
  EXPECT_EQ(stream->synchronize(milliseconds(-1)).code(), StatusCode::kInvalidArgument);
}

TEST_P(StreamConformance, AbortDiscardsQueuedWorkAndResetRecovers) {
  auto stream = make_stream("aborted");
  auto buffer = upload(*stream, std::vector<float>(8, 0.0f));
  auto event = make_event();
  ASSERT_TRUE(spin(*stream, microseconds(2000000)).ok());  // cancelled by abort where the backend can
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(increment(*stream, *buffer, 8).ok());
  ASSERT_TRUE(stream->record(*event).ok());
  Status callback_status;
  ASSERT_TRUE(stream->host_callback([&](const Status& s) { callback_status = s; }).ok());
  const auto start = std::chrono::steady_clock::now();
  stream->abort();
  Status synced = stream->synchronize(milliseconds(5000));
  EXPECT_EQ(synced.code(), StatusCode::kAborted) << synced.to_string();
  EXPECT_EQ(callback_status.code(), StatusCode::kAborted);
  EXPECT_EQ(event->state(), EventState::kFailed);
  EXPECT_EQ(increment(*stream, *buffer, 8).code(), StatusCode::kAborted) << "launching on an aborted stream";
  ASSERT_TRUE(stream->reset().ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(download(*stream, *buffer), std::vector<float>(8, 0.0f)) << "queued increments were discarded";
  ASSERT_TRUE(increment(*stream, *buffer, 8).ok());
  EXPECT_EQ(download(*stream, *buffer), std::vector<float>(8, 1.0f));
}

TEST_P(StreamConformance, HostTasksRunInOrderAndTheirFailureIsSticky) {
  auto stream = make_stream("tasks");
  auto buffer = upload(*stream, std::vector<float>(8, 0.0f));
  ASSERT_TRUE(increment(*stream, *buffer, 8).ok());
  // The task sees the increment done: it runs after the preceding commands completed.
  std::vector<float> seen(8, -1.0f);
  Status enqueued = stream->host_task([&](const HostTaskContext&) -> Status {
    return stream->status();  // no deadlock: the task may ask its own stream's status
  });
  if (enqueued.code() == StatusCode::kUnimplemented) GTEST_SKIP() << enqueued.to_string();
  ASSERT_TRUE(enqueued.ok()) << enqueued.to_string();
  ASSERT_TRUE(stream->copy_to_host(seen.data(), *buffer).ok());
  ASSERT_TRUE(stream->synchronize().ok());
  EXPECT_EQ(seen, std::vector<float>(8, 1.0f));
  EXPECT_EQ(stream->host_task(nullptr).code(), StatusCode::kInvalidArgument);

  // A failing task fails the stream with its error; the task behind it is skipped and told why.
  std::atomic<bool> second_ran{false};
  Status skipped_with;
  // Both tasks are queued behind a busy kernel, so the second is enqueued before the first has failed the stream.
  ASSERT_TRUE(spin(*stream, microseconds(50000)).ok());
  ASSERT_TRUE(stream->host_task([](const HostTaskContext&) { return data_loss("collective lost rank 2"); }).ok());
  ASSERT_TRUE(stream->host_task(
                        [&](const HostTaskContext&) {
                          second_ran = true;
                          return ok_status();
                        },
                        [&](const Status& error) { skipped_with = error; })
                  .ok());
  Status synced = stream->synchronize();
  EXPECT_EQ(synced.code(), StatusCode::kDataLoss) << synced.to_string();
  EXPECT_NE(synced.to_string().find("collective lost rank 2"), std::string::npos) << synced.to_string();
  EXPECT_NE(synced.to_string().find("tasks"), std::string::npos) << "names the stream: " << synced.to_string();
  EXPECT_FALSE(second_ran.load());
  EXPECT_EQ(skipped_with.code(), StatusCode::kDataLoss);
  ASSERT_TRUE(stream->reset().ok());
}

TEST_P(StreamConformance, AbortStopsARunningHostTaskThatPollsCancellation) {
  auto stream = make_stream("cancel");
  std::atomic<bool> started{false};
  Status enqueued = stream->host_task([&](const HostTaskContext& context) -> Status {
    started = true;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < end) {
      if (context.cancelled()) return aborted("task saw the abort");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return ok_status();
  });
  if (enqueued.code() == StatusCode::kUnimplemented) GTEST_SKIP() << enqueued.to_string();
  ASSERT_TRUE(enqueued.ok());
  while (!started.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const auto start = std::chrono::steady_clock::now();
  stream->abort();
  EXPECT_EQ(stream->synchronize(milliseconds(10000)).code(), StatusCode::kAborted);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  ASSERT_TRUE(stream->reset().ok());
}

TEST_P(StreamConformance, DestroyingAStreamWithWorkInFlightFinishesIt) {
  auto buffer = make_buffer(4 * sizeof(float));
  {
    auto stream = make_stream();
    ASSERT_TRUE(stream->fill(*buffer, 0, 4).ok());
    ASSERT_TRUE(spin(*stream, microseconds(20000)).ok());
    ASSERT_TRUE(increment(*stream, *buffer, 4).ok());
  }
  auto reader = make_stream();
  EXPECT_EQ(download(*reader, *buffer), std::vector<float>(4, 1.0f));
}

TEST_P(StreamConformance, ConcurrentEnqueueFromManyThreads) {
  auto stream = make_stream();
  auto buffer = upload(*stream, std::vector<float>(32, 0.0f));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100; ++i) EXPECT_TRUE(increment(*stream, *buffer, 32).ok());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(download(*stream, *buffer), std::vector<float>(32, 400.0f));
}

INSTANTIATE_TEST_SUITE_P(Backends, StreamConformance, testing::ValuesIn(conformance_backends()), backend_name);

}  // namespace
}  // namespace hxrt::hal::cts
