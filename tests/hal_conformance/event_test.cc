// Conformance: events (record, query, timing, cross-stream waits, timeouts, failure propagation).
#include <atomic>

#include "hal_conformance/fixture.h"

namespace hxrt::hal::cts {
namespace {

using EventConformance = HalConformance;
using std::chrono::microseconds;

TEST_P(EventConformance, UnrecordedEventIsAPreconditionError) {
  auto stream = make_stream();
  auto event = make_event();
  EXPECT_EQ(event->state(), EventState::kUnrecorded);
  EXPECT_EQ(event->synchronize(milliseconds(10)).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(stream->wait(*event).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(event->timestamp_ns().status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(stream->status().ok()) << "a rejected wait does not fail the stream";
}

TEST_P(EventConformance, RecordCompletesWithTimestampsInOrder) {
  auto stream = make_stream();
  auto start = make_event();
  auto end = make_event();
  const int64_t host_before = host_now_ns();
  ASSERT_TRUE(stream->record(*start).ok());
  ASSERT_TRUE(spin(*stream, microseconds(20000)).ok());
  ASSERT_TRUE(stream->record(*end).ok());
  ASSERT_TRUE(end->synchronize(milliseconds(10000)).ok());
  const int64_t host_after = host_now_ns();
  EXPECT_EQ(start->state(), EventState::kComplete) << "in-order: earlier records completed too";
  EXPECT_EQ(end->state(), EventState::kComplete);
  Result<Duration> elapsed = end->elapsed_since(*start);
  ASSERT_TRUE(elapsed.ok()) << elapsed.status().to_string();
  // Backends without a device clock (OpenCL C 1.2) spin for a calibrated number of iterations, which a change of
  // CPU frequency can shorten; half the requested time still proves the timestamps bracket the work. The device
  // interval can never exceed what the host saw around it.
  EXPECT_GE(*elapsed, microseconds(10000));
  EXPECT_LE(elapsed->count(), host_after - host_before);
  // Timestamps are on the host clock: close to now.
  const int64_t now = host_now_ns();
  EXPECT_LE(*end->timestamp_ns(), now);
  EXPECT_GT(*end->timestamp_ns(), now - int64_t{10'000'000'000});
}

TEST_P(EventConformance, PendingEventTimesOut) {
  auto stream = make_stream();
  auto event = make_event();
  ASSERT_TRUE(spin(*stream, microseconds(200000)).ok());
  ASSERT_TRUE(stream->record(*event).ok());
  EXPECT_EQ(event->state(), EventState::kPending);
  EXPECT_EQ(event->synchronize(milliseconds(1)).code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(event->timestamp_ns().status().code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(event->synchronize().ok());
}

TEST_P(EventConformance, CrossStreamWaitOrdersWork) {
  auto producer = make_stream("producer");
  auto consumer = make_stream("consumer");
  auto ready = make_event();
  auto source = upload(*producer, std::vector<float>(64, 1.0f));
  auto sink = make_buffer(source->size());
  ASSERT_TRUE(spin(*producer, microseconds(30000)).ok());
  ASSERT_TRUE(increment(*producer, *source, 64).ok());
  ASSERT_TRUE(producer->record(*ready).ok());
  ASSERT_TRUE(consumer->wait(*ready).ok());
  ASSERT_TRUE(consumer->copy(*sink, *source).ok());
  EXPECT_EQ(download(*consumer, *sink), std::vector<float>(64, 2.0f));
}

TEST_P(EventConformance, WaitSeesTheRecordAsOfEnqueue) {
  auto a = make_stream();
  auto b = make_stream();
  auto event = make_event();
  ASSERT_TRUE(a->record(*event).ok());
  ASSERT_TRUE(event->synchronize().ok());
  // The wait is enqueued before the second record: it must not wait for the 300 ms spin.
  ASSERT_TRUE(spin(*a, microseconds(300000)).ok());
  ASSERT_TRUE(b->wait(*event).ok());
  ASSERT_TRUE(a->record(*event).ok());
  EXPECT_TRUE(b->synchronize(milliseconds(250)).ok());
  ASSERT_TRUE(a->synchronize().ok());
}

TEST_P(EventConformance, WaitTimeoutFailsOnlyTheWaitingStream) {
  auto slow = make_stream("slow");
  auto waiter = make_stream("waiter");
  auto event = make_event();
  ASSERT_TRUE(spin(*slow, microseconds(500000)).ok());
  ASSERT_TRUE(slow->record(*event).ok());
  ASSERT_TRUE(waiter->wait(*event, milliseconds(20)).ok());
  Status waited = waiter->synchronize(milliseconds(5000));
  EXPECT_EQ(waited.code(), StatusCode::kDeadlineExceeded) << waited.to_string();
  EXPECT_NE(waited.to_string().find("slow"), std::string::npos) << waited.to_string();
  EXPECT_TRUE(slow->synchronize().ok()) << "the recording stream is unaffected";
  EXPECT_TRUE(waiter->reset().ok());
  EXPECT_TRUE(waiter->wait(*event).ok());
  EXPECT_TRUE(waiter->synchronize().ok());
}

TEST_P(EventConformance, FailedRecordPropagatesToWaiters) {
  auto doomed = make_stream("doomed");
  auto waiter = make_stream("waiter");
  auto event = make_event();
  ASSERT_TRUE(spin(*doomed, microseconds(2000000)).ok());
  ASSERT_TRUE(doomed->record(*event).ok());
  ASSERT_TRUE(waiter->wait(*event).ok());
  doomed->abort();
  Status waited = waiter->synchronize(milliseconds(5000));
  EXPECT_EQ(waited.code(), StatusCode::kAborted) << waited.to_string();
  EXPECT_NE(waited.to_string().find("doomed"), std::string::npos) << waited.to_string();
  EXPECT_TRUE(doomed->reset().ok());
  EXPECT_TRUE(waiter->reset().ok());
}

TEST_P(EventConformance, AbortInterruptsAWaitInProgress) {
  auto slow = make_stream();
  auto waiter = make_stream();
  auto event = make_event();
  ASSERT_TRUE(spin(*slow, microseconds(3000000)).ok());
  ASSERT_TRUE(slow->record(*event).ok());
  ASSERT_TRUE(waiter->wait(*event).ok());
  std::this_thread::sleep_for(milliseconds(20));
  const auto start = std::chrono::steady_clock::now();
  waiter->abort();
  EXPECT_EQ(waiter->synchronize(milliseconds(2000)).code(), StatusCode::kAborted);
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(2000));
  slow->abort();
  EXPECT_TRUE(slow->reset().ok());
  EXPECT_TRUE(waiter->reset().ok());
}

TEST_P(EventConformance, EventsAreRecordableAgain) {
  auto stream = make_stream();
  auto event = make_event();
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(stream->record(*event).ok());
    ASSERT_TRUE(event->synchronize().ok());
    EXPECT_EQ(event->state(), EventState::kComplete);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, EventConformance, testing::ValuesIn(conformance_backends()), backend_name);

}  // namespace
}  // namespace hxrt::hal::cts
