// Events whose completion is a host-side signal: the events of every host-queued stream (hal/host_queued_stream.h),
// cpu and opencl today. Each Stream::record creates a fresh EventSignal, so waits enqueued
// earlier keep the record they saw.
//
// Thread-safety: thread-safe.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "hxrt/hal/event.h"

namespace hxrt::hal {

// The completion state of one record. Shared by the event, the recording stream and any waiting streams.
class EventSignal {
 public:
  explicit EventSignal(std::string stream_name) : stream_name_(std::move(stream_name)) {}

  const std::string& stream_name() const { return stream_name_; }
  // Completes the signal once; later calls are ignored. `status` OK means complete, else failed.
  void complete(Status status, int64_t timestamp_ns);
  EventState state() const;
  int64_t timestamp_ns() const;
  Status status() const;
  // Waits until complete, `deadline` passes, or `interrupted()` returns true (checked under the signal's lock on
  // every wake-up; interrupt() wakes waiters). Returns true when complete.
  template <typename Pred>
  bool wait_until(std::chrono::steady_clock::time_point deadline, Pred interrupted) {
    std::unique_lock<std::mutex> lock(mutex_);
    const auto done = [&] { return state_ != EventState::kPending || interrupted(); };
    if (deadline == std::chrono::steady_clock::time_point::max()) {
      cv_.wait(lock, done);
    } else {
      cv_.wait_until(lock, deadline, done);
    }
    return state_ != EventState::kPending;
  }
  // Wakes waiters so they re-check their interruption predicate.
  void interrupt();

 private:
  const std::string stream_name_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  EventState state_ = EventState::kPending;
  Status status_;
  int64_t timestamp_ns_ = 0;
};

class SignalEvent final : public Event {
 public:
  explicit SignalEvent(Device* device) : Event(device) {}

  EventState state() const override;
  Status synchronize(Duration timeout) override;
  Result<int64_t> timestamp_ns() const override;

  // The latest record, or null when never recorded.
  std::shared_ptr<EventSignal> current() const;
  void set_current(std::shared_ptr<EventSignal> signal);

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<EventSignal> current_;
};

}  // namespace hxrt::hal
