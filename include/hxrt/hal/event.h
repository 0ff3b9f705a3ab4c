// Event: a marker recorded into a stream; it completes when the stream reaches it.
//
// Lifecycle: an event starts unrecorded. Stream::record(event) makes it pending; when the stream executes the
// record it completes with a device timestamp, or fails if the stream failed or was aborted before reaching it
// (so nobody waits forever on work that will never run). Recording again starts a new pending state; waits already
// enqueued keep waiting for the record they saw (CUDA semantics). Synchronizing or waiting on an event that was
// never recorded is a FailedPrecondition, not a hang.
//
// An event must outlive the commands that record or wait on it. Thread-safety: thread-safe.
#pragma once

#include "hxrt/base/status.h"
#include "hxrt/hal/types.h"

namespace hxrt::hal {

class Device;

enum class EventState : uint8_t { kUnrecorded, kPending, kComplete, kFailed };
std::string_view event_state_name(EventState state);

class Event {
 public:
  virtual ~Event() = default;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  Device& device() const { return *device_; }

  virtual EventState state() const = 0;
  // Blocks until the latest record completes or `timeout` passes. OK when complete; the stream's error when the
  // record failed; DeadlineExceeded on timeout; FailedPrecondition when never recorded.
  virtual Status synchronize(Duration timeout = kInfinite) = 0;
  // Device timestamp (ns on the host steady clock) of the completed record.
  virtual Result<int64_t> timestamp_ns() const = 0;
  // Time from `start` to this event; both must be complete and on the same device.
  Result<Duration> elapsed_since(const Event& start) const;

 protected:
  explicit Event(Device* device) : device_(device) {}

 private:
  Device* device_;
};

}  // namespace hxrt::hal
