// Conformance stress: many streams, cross waits, aborts and timeouts at once. Built to run under TSan; every wait is
// bounded, so a deadlock shows as a failure rather than a hang.
#include <atomic>
#include <random>
#include <thread>

#include "hal_conformance/fixture.h"

namespace hxrt::hal::cts {
namespace {

using StressConformance = HalConformance;
using std::chrono::microseconds;

// A ring of streams: in each round stream i waits for stream i-1's event of the same round (stream 0 for the last
// stream's previous round), increments a shared counter buffer, and records its own event. The final count proves
// every increment ran exactly once and in an order the events allowed.
TEST_P(StressConformance, RingOfStreamsWithCrossWaits) {
  constexpr int kStreams = 8;
  constexpr int kRounds = 40;
  std::vector<std::unique_ptr<Stream>> streams;
  std::vector<std::unique_ptr<Event>> events;
  for (int i = 0; i < kStreams; ++i) {
    streams.push_back(make_stream(fmt::format("ring{}", i)));
    events.push_back(make_event());
  }
  auto counter = upload(*streams[0], std::vector<float>(4, 0.0f));
  for (int round = 0; round < kRounds; ++round) {
    for (int i = 0; i < kStreams; ++i) {
      const int previous = (i + kStreams - 1) % kStreams;
      Stream& stream = *streams[static_cast<size_t>(i)];
      if (round > 0 || i > 0) {
        ASSERT_TRUE(stream.wait(*events[static_cast<size_t>(previous)]).ok());
      }
      ASSERT_TRUE(increment(stream, *counter, 4).ok());
      ASSERT_TRUE(stream.record(*events[static_cast<size_t>(i)]).ok());
    }
  }
  for (auto& stream : streams) ASSERT_TRUE(stream->synchronize(std::chrono::seconds(60)).ok());
  EXPECT_EQ(download(*streams[0], *counter), std::vector<float>(4, static_cast<float>(kStreams * kRounds)));
}

// Producer threads enqueue work with cross waits while a chaos thread aborts and resets streams at random. Nothing
// may hang or crash; afterwards every stream resets to a working state.
TEST_P(StressConformance, RandomAbortsAndTimeoutsNeverDeadlock) {
  constexpr int kStreams = 6;
  std::vector<std::unique_ptr<Stream>> streams;
  std::vector<std::unique_ptr<Event>> events;
  std::vector<std::unique_ptr<Buffer>> buffers;
  for (int i = 0; i < kStreams; ++i) {
    streams.push_back(make_stream(fmt::format("chaos{}", i)));
    events.push_back(make_event());
    buffers.push_back(make_buffer(64 * sizeof(float)));
  }
  for (int i = 0; i < kStreams; ++i) {
    ASSERT_TRUE(streams[static_cast<size_t>(i)]->record(*events[static_cast<size_t>(i)]).ok());
  }
  std::atomic<bool> stop{false};
  std::vector<std::thread> producers;
  for (int p = 0; p < 3; ++p) {
    producers.emplace_back([&, p] {
      std::mt19937 rng(static_cast<uint32_t>(p) + 1);
      for (int step = 0; step < 300 && !stop; ++step) {
        const auto s = static_cast<size_t>(rng() % kStreams);
        const auto other = static_cast<size_t>(rng() % kStreams);
        Stream& stream = *streams[s];
        // Errors are expected (aborted or timed-out streams reject work); crashes and hangs are not.
        switch (rng() % 5) {
          case 0: increment(stream, *buffers[s], 64).ignore(); break;
          case 1: spin(stream, microseconds(rng() % 300)).ignore(); break;
          case 2: stream.record(*events[s]).ignore(); break;
          case 3: stream.wait(*events[other], microseconds(rng() % 2000)).ignore(); break;
          case 4: stream.synchronize(microseconds(rng() % 1000)).ignore(); break;
        }
      }
    });
  }
  std::thread chaos([&] {
    std::mt19937 rng(99);
    for (int i = 0; i < 60; ++i) {
      Stream& stream = *streams[rng() % kStreams];
      if (rng() % 2 == 0) {
        stream.abort();
      } else {
        stream.reset().ignore();
      }
      std::this_thread::sleep_for(microseconds(rng() % 500));
    }
  });
  for (auto& t : producers) t.join();
  chaos.join();
  stop = true;
  for (auto& stream : streams) {
    stream->abort();
    ASSERT_TRUE(stream->reset().ok());
  }
  for (size_t i = 0; i < streams.size(); ++i) {
    ASSERT_TRUE(streams[i]->fill(*buffers[i], 0, 4).ok());
    ASSERT_TRUE(increment(*streams[i], *buffers[i], 64).ok());
    EXPECT_EQ(download(*streams[i], *buffers[i]), std::vector<float>(64, 1.0f));
  }
}

// Streams created and destroyed from several threads while work runs.
TEST_P(StressConformance, CreateAndDestroyStreamsConcurrently) {
  std::vector<std::thread> threads;
  std::atomic<int> completed{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 25; ++i) {
        Result<std::unique_ptr<Stream>> stream = device_->create_stream();
        Result<std::unique_ptr<Event>> event = device_->create_event();
        ASSERT_TRUE(stream.ok() && event.ok());
        ASSERT_TRUE((*stream)->host_callback([&](const Status& s) {
          if (s.ok()) completed.fetch_add(1);
        }).ok());
        ASSERT_TRUE((*stream)->record(**event).ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(completed.load(), 100) << "destroying a stream runs its queued work";
}

INSTANTIATE_TEST_SUITE_P(Backends, StressConformance, testing::ValuesIn(conformance_backends()), backend_name);

}  // namespace
}  // namespace hxrt::hal::cts
