#include "hxrt/runtime/session.h"

#include <algorithm>
#include <chrono>

#include <fmt/ranges.h>

#include "hxrt/base/logging.h"

namespace hxrt::runtime {
namespace {

constexpr std::string_view kDefaultStreamName = "default";

}  // namespace

bool TeardownReport::clean() const {
  return leaked_blocks.empty() && aborted_streams.empty() && stream_errors.empty() && device_buffers_live == 0 &&
         registered_host_buffers == 0;
}

std::string TeardownReport::to_string() const {
  if (clean()) return fmt::format("clean ({} streams closed, {} events destroyed)", streams_closed, events_destroyed);
  std::string out;
  if (!leaked_blocks.empty()) out += fmt::format("leaked pool blocks: {}; ", leaked_blocks.to_string());
  if (!aborted_streams.empty()) out += fmt::format("aborted busy streams: {}; ", fmt::join(aborted_streams, ", "));
  if (!stream_errors.empty()) out += fmt::format("failed streams: {}; ", fmt::join(stream_errors, " | "));
  if (device_buffers_live > 0) out += fmt::format("{} device buffers still live outside the pool; ", device_buffers_live);
  if (registered_host_buffers > 0) {
    out += fmt::format("{} host memory registrations still live; ", registered_host_buffers);
  }
  out += fmt::format("{} streams closed, {} events destroyed", streams_closed, events_destroyed);
  return out;
}

Result<std::unique_ptr<Session>> Session::create(const hal::DriverRegistry& drivers, std::string_view device_spec,
                                                 const SessionOptions& options) {
  Result<std::unique_ptr<hal::Device>> device = drivers.open(device_spec);
  if (!device.ok()) {
    return std::move(device).take_status().with_context(fmt::format("creating session '{}' on device '{}'",
                                                                    options.name, device_spec));
  }
  return create(std::move(device).value(), options);
}

Result<std::unique_ptr<Session>> Session::create(std::unique_ptr<hal::Device> device, const SessionOptions& options) {
  if (!device) return invalid_argument("Session::create: null device");
  if (options.teardown_timeout < hal::Duration::zero()) {
    return invalid_argument("Session::create: negative teardown timeout");
  }
  std::unique_ptr<Session> session(new Session(std::move(device), options));
  Result<std::unique_ptr<hal::Stream>> stream =
      session->device_->create_stream(hal::StreamOptions{.name = std::string(kDefaultStreamName)});
  if (!stream.ok()) {
    return std::move(stream).take_status().with_context(fmt::format("creating session '{}'", options.name));
  }
  session->default_stream_ = std::move(stream).value();
  HXRT_LOG(kInfo, "session '{}' opened on {} device '{}'", options.name,
           hal::device_kind_name(session->device_->info().kind), session->device_->info().name);
  return session;
}

Session::Session(std::unique_ptr<hal::Device> device, const SessionOptions& options)
    : options_(options),
      device_(std::move(device)),
      profiler_(std::make_unique<Profiler>(fmt::format("session '{}' on {}:{} ({})", options.name,
                                                       hal::device_kind_name(device_->info().kind),
                                                       device_->info().ordinal, device_->info().name))),
      pool_(std::make_unique<memory::CachingAllocator>(*device_, options.pool)) {
  profiler_->set_enabled(options.profile);
}

Session::~Session() {
  Result<TeardownReport> report = close();
  if (!report.ok()) {
    HXRT_LOG(kError, "session '{}' teardown failed: {}", options_.name, report.status().to_string());
  } else if (!report->clean()) {
    HXRT_LOG(kWarn, "session '{}' closed with: {}", options_.name, report->to_string());
  }
}

bool Session::closed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return closed_;
}

Status Session::check_open_locked() const {
  if (closed_) return failed_precondition("session '{}' is closed", options_.name);
  return ok_status();
}

Result<hal::Stream*> Session::stream(std::string_view name) {
  std::lock_guard<std::mutex> lock(mutex_);
  HXRT_RETURN_IF_ERROR(check_open_locked());
  if (name == kDefaultStreamName) return default_stream_.get();
  if (name.empty()) return invalid_argument("session '{}': stream names must not be empty", options_.name);
  if (auto it = streams_.find(name); it != streams_.end()) return it->second.get();
  HXRT_ASSIGN_OR_RETURN(std::unique_ptr<hal::Stream> created,
                        device_->create_stream(hal::StreamOptions{.name = std::string(name)}));
  hal::Stream* raw = created.get();
  streams_.emplace(std::string(name), std::move(created));
  return raw;
}

std::vector<std::string> Session::stream_names() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> names;
  if (closed_) return names;
  names.emplace_back(kDefaultStreamName);
  for (const auto& [name, stream] : streams_) names.push_back(name);
  return names;
}

Result<hal::Event*> Session::create_event() {
  std::lock_guard<std::mutex> lock(mutex_);
  HXRT_RETURN_IF_ERROR(check_open_locked());
  HXRT_ASSIGN_OR_RETURN(std::unique_ptr<hal::Event> event, device_->create_event());
  events_.push_back(std::move(event));
  return events_.back().get();
}

Status Session::destroy_event(hal::Event* event) {
  std::lock_guard<std::mutex> lock(mutex_);
  HXRT_RETURN_IF_ERROR(check_open_locked());
  auto it = std::find_if(events_.begin(), events_.end(), [&](const auto& e) { return e.get() == event; });
  if (it == events_.end()) return invalid_argument("session '{}' does not own that event", options_.name);
  events_.erase(it);
  return ok_status();
}

Status Session::synchronize(hal::Duration timeout) {
  std::vector<hal::Stream*> streams;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    HXRT_RETURN_IF_ERROR(check_open_locked());
    streams.push_back(default_stream_.get());
    for (const auto& [name, stream] : streams_) streams.push_back(stream.get());
  }
  const hal::Deadline deadline = hal::Deadline::after(timeout);
  for (hal::Stream* stream : streams) {
    HXRT_RETURN_IF_ERROR_CTX(stream->synchronize(deadline.remaining()), "synchronizing session '{}'", options_.name);
  }
  return ok_status();
}

Result<TeardownReport> Session::teardown_locked(bool closing) {
  TeardownReport report;
  // No default stream when create() failed to make it (the destructor of that half-made session comes here).
  std::vector<hal::Stream*> streams;
  if (default_stream_) streams.push_back(default_stream_.get());
  for (const auto& [name, stream] : streams_) streams.push_back(stream.get());

  // 1-3: drain with one shared deadline; abort what is still busy; collect and clear sticky errors.
  const hal::Deadline deadline = hal::Deadline::after(options_.teardown_timeout);
  for (hal::Stream* stream : streams) {
    const hal::Duration left = deadline.remaining();
    // What synchronize returns cannot tell a stream still busy at the deadline from one whose sticky error is
    // itself DeadlineExceeded (a timed-out cross-stream wait): ask the stream.
    stream->synchronize(left).ignore();
    const hal::StreamState state = stream->query();
    if (!state.status.ok()) {
      report.stream_errors.push_back(fmt::format("{}: {}", stream->name(), state.status.to_string()));
    }
    if (!state.idle) {
      report.aborted_streams.push_back(stream->name());
      stream->abort();
    }
  }
  // Every later step runs even when one fails: the pool must forget the streams before they are destroyed.
  Status first_error;
  for (hal::Stream* stream : streams) {
    Status reset = stream->reset();
    if (!reset.ok() && first_error.ok()) {
      first_error = std::move(reset).with_context(
          fmt::format("resetting stream '{}' of session '{}'", stream->name(), options_.name));
    }
  }
  // 4: events.
  report.events_destroyed = events_.size();
  events_.clear();
  // 5: pool blocks and segments. When queued work still holds pool memory, the pool keeps it and forgets the
  // streams destroyed below, so that it never touches them again.
  Result<memory::LeakReport> leaks = pool_->release_all();
  if (leaks.ok()) {
    report.leaked_blocks = std::move(leaks).value();
  } else {
    for (hal::Stream* stream : streams) {
      if (closing || stream != default_stream_.get()) pool_->forget_stream(*stream);
    }
    if (first_error.ok()) {
      first_error = std::move(leaks).take_status().with_context(
          fmt::format("releasing the pool of session '{}'", options_.name));
    }
  }
  // 6: streams.
  report.streams_closed = streams_.size() + (closing ? 1 : 0);
  streams_.clear();
  if (closing) default_stream_.reset();
  const hal::DeviceMemoryStats memory = device_->memory_stats();
  report.device_buffers_live = memory.live_buffers;
  report.registered_host_buffers = memory.registered_buffers;
  if (!first_error.ok()) return first_error;
  return report;
}

Result<TeardownReport> Session::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  HXRT_RETURN_IF_ERROR(check_open_locked());
  return teardown_locked(/*closing=*/false);
}

Result<TeardownReport> Session::close() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_) return TeardownReport{};
  Result<TeardownReport> report = teardown_locked(/*closing=*/true);
  closed_ = true;
  if (report.ok()) {
    HXRT_LOG(kInfo, "session '{}' closed: {}", options_.name, report->to_string());
  }
  return report;
}

}  // namespace hxrt::runtime
