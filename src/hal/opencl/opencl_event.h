// OpenCL events. Each Stream::record creates a fresh EventSignal (so waits enqueued earlier keep the record they
// saw); the submitter thread of the recording stream completes it after the record's marker ran, with the
// marker's device timestamp mapped onto the host clock, or fails it when the record is skipped.
//
// Thread-safety: thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "hxrt/hal/event.h"

namespace hxrt::hal::opencl {

// The completion state of one record; shared by the event, the recording stream and waiting streams.
class EventSignal {
 public:
  explicit EventSignal(std::string stream_name) : stream_name_(std::move(stream_name)) {}
  EventSignal(const EventSignal&) = delete;
  EventSignal& operator=(const EventSignal&) = delete;

  const std::string& stream_name() const { return stream_name_; }
  // Completes the signal once (later calls are ignored): OK = complete, else failed with `status`.
  void complete(Status status, int64_t timestamp_ns);
  EventState state() const;
  int64_t timestamp_ns() const;
  Status status() const;
  // Waits until complete, `deadline` passes, or `interrupted()` is true (checked under the lock on every wake-up;
  // interrupt() wakes waiters). Returns true when complete.
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
  void interrupt();

 private:
  const std::string stream_name_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  EventState state_ = EventState::kPending;
  Status status_;
  int64_t timestamp_ns_ = 0;
};

class OpenClEvent final : public Event {
 public:
  explicit OpenClEvent(Device* device) : Event(device) {}

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

}  // namespace hxrt::hal::opencl
