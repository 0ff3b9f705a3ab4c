// Session: the unit of execution state. It owns one device, that device's memory pool, a default stream plus
// named streams created on demand, the events it hands out, the profiler of the runs on it (profiler.h), and a
// mutex for its mutable state.
//
// Lifecycle:
//   create() → use (streams, events, pool) → reset() [clean state, same device] → ... → close() or destruction.
// Teardown (close/reset/destructor) runs in a fixed order:
//   1. synchronize every stream, all sharing one deadline (options.teardown_timeout);
//   2. streams still busy at the deadline are aborted (queued work discarded, running kernels cancelled);
//   3. sticky stream errors are collected into the report and the streams are reset;
//   4. events handed out are destroyed;
//   5. every block still allocated from the pool is freed and reported as a leak (count, bytes, tags), and the
//      pool returns every segment to the device;
//   6. close: streams are destroyed; reset: named streams are destroyed and the default stream stays.
// The report says what was still held or running; a clean teardown reports nothing. Every step runs even when an
// earlier one failed, and the first failure is returned instead of the report. In particular, when queued work
// still used pool memory after the pool's settle timeout (DeadlineExceeded), the pool keeps that memory (leaked
// when the session is destroyed) and forgets the streams of step 6 before they are destroyed.
//
// Objects obtained from a session (streams, events, allocations) are valid until the next reset() or close().
// After close(), every call returns FailedPrecondition.
//
// Thread-safety: thread-safe. Teardown must not race with other threads using the session's objects.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "hxrt/base/status.h"
#include "hxrt/hal/device.h"
#include "hxrt/hal/driver.h"
#include "hxrt/memory/caching_allocator.h"
#include "hxrt/runtime/profiler.h"

namespace hxrt::runtime {

struct SessionOptions {
  std::string name = "session";
  // Memory pool configuration (size classes, budget, release threshold).
  memory::CachingAllocatorOptions pool;
  // How long teardown waits for in-flight work before aborting it.
  hal::Duration teardown_timeout = std::chrono::seconds(10);
  // Profile every run on the session from the start (same as profiler().set_enabled(true)).
  bool profile = false;
};

// What teardown found. clean() when nothing was running, failed, leaked or still held by the device.
struct TeardownReport {
  memory::LeakReport leaked_blocks;      // pool blocks still allocated
  std::vector<std::string> aborted_streams;  // busy at the deadline, aborted
  std::vector<std::string> stream_errors;    // "stream: error" for streams that had failed
  uint64_t streams_closed = 0;
  uint64_t events_destroyed = 0;
  uint64_t device_buffers_live = 0;  // after teardown: buffers made outside the pool and not yet destroyed
  uint64_t registered_host_buffers = 0;  // after teardown: host memory registrations not yet destroyed
  bool clean() const;
  std::string to_string() const;
};

class Session {
 public:
  // Opens `device_spec` ("cpu", "cpu:0", "opencl:1") from the registry.
  static Result<std::unique_ptr<Session>> create(const hal::DriverRegistry& drivers, std::string_view device_spec,
                                                 const SessionOptions& options = {});
  // Takes ownership of an opened device.
  static Result<std::unique_ptr<Session>> create(std::unique_ptr<hal::Device> device,
                                                 const SessionOptions& options = {});
  // Closes the session if still open; a report that is not clean is logged as a warning.
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const std::string& name() const { return options_.name; }
  hal::Device& device() const { return *device_; }
  memory::CachingAllocator& pool() const { return *pool_; }
  hal::Stream& default_stream() const { return *default_stream_; }
  // Records of profiled runs; enable it to profile every run. Kept across reset().
  Profiler& profiler() const { return *profiler_; }
  bool closed() const;

  // The stream named `name`, created on first use. The name "default" is the default stream.
  Result<hal::Stream*> stream(std::string_view name);
  // Names of all streams, default first.
  std::vector<std::string> stream_names() const;
  // An event owned by the session, destroyed at reset/close (or earlier by destroy_event).
  Result<hal::Event*> create_event();
  Status destroy_event(hal::Event* event);

  // Synchronizes every stream; the first error (or DeadlineExceeded) is returned, naming the stream.
  Status synchronize(hal::Duration timeout = hal::kInfinite);

  // Brings the session back to a clean state for the next independent task, keeping the device and the default
  // stream. Returns what teardown found.
  Result<TeardownReport> reset();
  // Tears everything down; idempotent (a second call returns an empty report).
  Result<TeardownReport> close();

 private:
  Session(std::unique_ptr<hal::Device> device, const SessionOptions& options);
  Status check_open_locked() const;
  // Steps 1-5 of teardown, then destroys streams other than the default one (and the default one if `closing`).
  Result<TeardownReport> teardown_locked(bool closing);

  SessionOptions options_;
  mutable std::mutex mutex_;
  std::unique_ptr<hal::Device> device_;
  std::unique_ptr<Profiler> profiler_;
  std::unique_ptr<hal::Stream> default_stream_;
  std::map<std::string, std::unique_ptr<hal::Stream>, std::less<>> streams_;  // guarded by mutex_
  std::vector<std::unique_ptr<hal::Event>> events_;                            // guarded by mutex_
  // Declared after the streams, so that it is destroyed before them: the pool may refer to them until then.
  std::unique_ptr<memory::CachingAllocator> pool_;
  bool closed_ = false;                                                        // guarded by mutex_
};

}  // namespace hxrt::runtime
