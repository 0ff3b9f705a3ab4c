// Profiler: one record per kernel launch, on one clock, exported as Chrome trace-event JSON and a summary table.
//
// The Executor writes the records (docs/design/architecture.md, "The path of one request", step 6). A run is profiled
// when the session's profiler is enabled (Session::profiler().set_enabled(true), or SessionOptions::profile) or when
// RunOptions::profile asks for it. Each launch of a profiled run is bracketed by two events recorded on its stream, so
// its device interval is the time between the stream reaching the launch (after its waits) and finishing it,
// read from hal::Event::timestamp_ns — the host steady clock, onto which devices with their own clock map their
// timestamps, so host enqueue times and device times share one axis. After the run has drained, the executor
// hands the profiler one RunProfile: per launch the node, op, kernel, fusion group, stream, tiling key, input
// shapes, parsed attributes, host enqueue interval, device interval and the producer launches of its cross-stream
// waits; plus samples of the session pool's bytes in use, and one PoolEvent per pool allocation or free the
// executor made for the run's intermediates and outputs (tagged with the value's producer node, the same node id as
// the launch records). A run that is not profiled costs one branch per launch.
//
// Exports (profiler_trace.cc):
//   - chrome_trace_json(): the Trace Event Format that Perfetto (ui.perfetto.dev) and chrome://tracing open.
//     Process "host" has one "enqueue" track per enqueuing thread and the pool counters; process "device" has one
//     track per stream with the device interval of every launch; flow arrows join the launch that recorded an
//     event to each launch on another stream that waited for it. Slice args carry every record field. Pool
//     events are instant events on a host "pool" track, with a "pool bytes in use" counter beside them.
//   - timeline_html() (profiler_html.cc): a self-contained HTML page (inline CSS and JS, no network) drawing one
//     lane per stream with a box per launch, its args on hover, and the pool bytes in use as a line.
//   - summary(): count, total, mean, min, max and share of device time per op type, per kernel and per node.
// docs/profiling.md describes both.
//
// Thread-safety: thread-safe. Concurrent runs (executors on one session, on different threads) append under one
// mutex, once per run, never per launch.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "hxrt/base/status.h"

namespace hxrt::runtime {

inline constexpr int64_t kNoTimestamp = -1;

// One launch as the executor enqueued it and the device ran it. Times are ns on the host steady clock.
struct LaunchRecord {
  uint64_t run = 0;  // the profiler's run number, from 1
  std::string graph;
  int32_t node_id = -1;  // the stable id (graph-file id, Note [Stable node ids]) errors and pool events use too
  std::string node_name;
  std::string op_type;
  std::string kernel;
  int kernel_version = 1;
  int32_t fusion_id = -1;                // >= 0 for a fused launch
  std::vector<std::string> fused_nodes;  // the original nodes a fused launch covers
  std::vector<int32_t> fused_ids;        // their stable ids
  std::string stream;
  std::string tiling_key;                 // ops::Tiling::key()
  std::vector<std::string> input_shapes;  // "f32[2, 8]" per input; "-" for an omitted optional input
  std::string params;                     // parsed attributes (KernelParams::to_string)
  int host_thread = 0;                    // the enqueuing thread, numbered from 0 by the profiler
  int64_t enqueue_begin_ns = 0;
  int64_t enqueue_end_ns = 0;
  int64_t device_begin_ns = kNoTimestamp;  // kNoTimestamp when the stream failed before reaching the launch
  int64_t device_end_ns = kNoTimestamp;
  // Launches of the same run, recorded on other streams, whose events this launch waited for (indices into
  // RunProfile::launches; into Profiler::records() once added).
  std::vector<uint64_t> waits_on;

  bool has_device_time() const { return device_begin_ns != kNoTimestamp && device_end_ns != kNoTimestamp; }
  int64_t device_ns() const { return has_device_time() ? device_end_ns - device_begin_ns : 0; }
};

// The session pool's usage at a point in host time.
struct CounterSample {
  int64_t ts_ns = 0;
  int64_t pool_allocated_bytes = 0;
  int64_t pool_reserved_bytes = 0;
};

// A pool allocation or free the executor made for a value of a profiled run, on the host steady clock. Frees are
// stream-ordered (caching_allocator.h): the time is when the free was enqueued, after the value's last consumer.
enum class PoolEventKind : uint8_t { kAlloc, kFree };
std::string_view pool_event_kind_name(PoolEventKind kind);

struct PoolEvent {
  uint64_t run = 0;  // the profiler's run number, from 1
  int64_t ts_ns = 0;
  PoolEventKind kind = PoolEventKind::kAlloc;
  std::string tag;         // the pool tag: the producer node's name, or "output:<value>" for a graph output
  std::string value;       // the value the block holds
  int32_t node_id = -1;    // the value's producer node (LaunchRecord::node_id)
  uint64_t bytes = 0;      // the value's bytes
  int64_t in_use_bytes = 0;  // the session pool's allocated bytes right after the event
};

// What one profiled run hands the profiler.
struct RunProfile {
  std::thread::id host_thread;  // the thread that enqueued the launches
  std::vector<LaunchRecord> launches;
  std::vector<CounterSample> counters;
  std::vector<PoolEvent> pool_events;
};

struct SummaryRow {
  std::string name;    // op type, kernel name or node name
  std::string detail;  // by node: "op / kernel"; by kernel: its op type
  uint64_t count = 0;
  int64_t total_ns = 0;
  int64_t min_ns = 0;
  int64_t max_ns = 0;
  double share = 0.0;  // of ProfileSummary::device_busy_ns
  double mean_ns() const { return count == 0 ? 0.0 : static_cast<double>(total_ns) / static_cast<double>(count); }
};

struct ProfileSummary {
  uint64_t runs = 0;
  uint64_t launches = 0;
  uint64_t launches_without_device_time = 0;
  int64_t device_busy_ns = 0;  // sum of launch device intervals (over all streams)
  int64_t span_ns = 0;         // first enqueue to last device end
  int64_t enqueue_ns = 0;      // sum of host enqueue intervals
  std::vector<SummaryRow> by_op;      // total time, largest first
  std::vector<SummaryRow> by_kernel;
  std::vector<SummaryRow> by_node;
  // Three tables (op, kernel, node), each cut to `max_rows` rows.
  std::string to_string(size_t max_rows = 15) const;
};

// Summarizes records of any source (a Profiler's, or a tool's own).
ProfileSummary summarize(std::span<const LaunchRecord> records);

struct TraceOptions {
  std::string process_name;  // names the device process "device: <name>"; "" = the profiler's name (or "hxrt")
  bool enqueue_track = true;          // host enqueue slices
  bool counters = true;               // pool counter track
  bool flows = true;                  // cross-stream wait arrows
  bool pool_events = true;            // allocation/free instants and the "pool bytes in use" counter
};

// What the exports read: spans over a profiler's (or a tool's) records.
struct TraceData {
  std::span<const LaunchRecord> records;
  std::span<const CounterSample> counters;
  std::span<const PoolEvent> pool_events;
};

// Chrome Trace Event Format (JSON object form). Timestamps are µs (fractional, ns precision) from the earliest
// time in the data.
std::string chrome_trace_json(const TraceData& data, const TraceOptions& options = {});

// A self-contained HTML timeline (profiler_html.cc): no external scripts, styles or fonts. One lane per stream
// with one box per launch that has device time, placed by its device interval; hovering a box shows its args
// (node, op, kernel, fusion group, stream, inputs, tiling, params, times). The pool bytes in use are drawn as a
// line under the lanes. options.process_name heads the page.
std::string timeline_html(const TraceData& data, const TraceOptions& options = {});

struct ProfilerOptions {
  // Records kept at most; whole runs beyond it are dropped (and counted) so memory stays bounded.
  size_t max_records = size_t{1} << 20;
};

class Profiler {
 public:
  // `name` labels the device process in traces (the session: "session 'x' on cpu:0 (...)").
  explicit Profiler(std::string name = "hxrt", const ProfilerOptions& options = {});
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // Whether every run on the session is profiled. Checked once per run.
  void set_enabled(bool enabled) { enabled_.store(enabled, std::memory_order_relaxed); }
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }

  // Appends a run (the Executor calls this); renumbers its runs and waits_on into the profiler's numbering.
  void add_run(RunProfile run);
  // Forgets every record and counter sample.
  void clear();

  // Copies of what was recorded, in order.
  std::vector<LaunchRecord> records() const;
  std::vector<CounterSample> counters() const;
  std::vector<PoolEvent> pool_events() const;
  uint64_t runs() const;
  uint64_t dropped_runs() const;

  ProfileSummary summary() const;
  std::string chrome_trace_json(TraceOptions options = {}) const;
  // Writes chrome_trace_json() to `path`; Unavailable when the file cannot be written.
  Status write_chrome_trace(const std::string& path, TraceOptions options = {}) const;
  std::string timeline_html(TraceOptions options = {}) const;
  // Writes timeline_html() to `path`; Unavailable when the file cannot be written.
  Status write_timeline_html(const std::string& path, TraceOptions options = {}) const;

 private:
  const std::string name_;
  const ProfilerOptions options_;
  std::atomic<bool> enabled_{false};
  mutable std::mutex mutex_;
  std::vector<LaunchRecord> records_;  // guarded by mutex_
  std::vector<CounterSample> counters_;  // guarded by mutex_
  std::vector<PoolEvent> pool_events_;   // guarded by mutex_
  uint64_t runs_ = 0;                    // guarded by mutex_
  uint64_t dropped_runs_ = 0;            // guarded by mutex_
  std::vector<std::thread::id> threads_;  // guarded by mutex_: index = LaunchRecord::host_thread
};

}  // namespace hxrt::runtime
