#include "hal/signal_event.h"

#include <chrono>

namespace hxrt::hal {

void EventSignal::complete(Status status, int64_t timestamp_ns) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (state_ != EventState::kPending) return;
    state_ = status.ok() ? EventState::kComplete : EventState::kFailed;
    status_ = std::move(status);
    timestamp_ns_ = timestamp_ns;
  }
  cv_.notify_all();
}

EventState EventSignal::state() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return state_;
}

int64_t EventSignal::timestamp_ns() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return timestamp_ns_;
}

Status EventSignal::status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return status_;
}

void EventSignal::interrupt() {
  { std::lock_guard<std::mutex> lock(mutex_); }
  cv_.notify_all();
}

std::shared_ptr<EventSignal> SignalEvent::current() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return current_;
}

void SignalEvent::set_current(std::shared_ptr<EventSignal> signal) {
  std::lock_guard<std::mutex> lock(mutex_);
  current_ = std::move(signal);
}

EventState SignalEvent::state() const {
  std::shared_ptr<EventSignal> signal = current();
  return signal ? signal->state() : EventState::kUnrecorded;
}

Status SignalEvent::synchronize(Duration timeout) {
  if (timeout < Duration::zero()) return invalid_argument("event synchronize: negative timeout");
  std::shared_ptr<EventSignal> signal = current();
  if (!signal) return failed_precondition("event synchronize: the event was never recorded");
  if (!signal->wait_until(Deadline::after(timeout).when(), [] { return false; })) {
    return deadline_exceeded("event recorded on stream '{}' did not complete within {} ms", signal->stream_name(),
                             std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count());
  }
  Status status = signal->status();
  if (!status.ok()) status.with_context(fmt::format("synchronizing an event recorded on stream '{}'", signal->stream_name()));
  return status;
}

Result<int64_t> SignalEvent::timestamp_ns() const {
  std::shared_ptr<EventSignal> signal = current();
  if (!signal) return failed_precondition("event timestamp: the event was never recorded");
  switch (signal->state()) {
    case EventState::kComplete: return signal->timestamp_ns();
    case EventState::kFailed: return failed_precondition("event timestamp: the record failed: {}", signal->status().to_string());
    default: return failed_precondition("event timestamp: the event has not completed yet");
  }
}

}  // namespace hxrt::hal
