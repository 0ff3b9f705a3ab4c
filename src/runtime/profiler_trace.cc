// Chrome Trace Event Format export of profiler records (Note [Trace layout]).
#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hxrt/runtime/profiler.h"
#include "profiler_json.h"

namespace hxrt::runtime {
namespace {

// Note [Trace layout]
// Two processes: pid 1 "host" holds one "enqueue" thread track per enqueuing thread (tid 1 + host_thread) and the
// pool counter track; pid 2 "device: <name>" holds one thread track per stream (tid 1 + order of first use). A
// launch is an "X" (complete) slice on its stream track spanning its device interval, and another on its enqueue
// track spanning the host enqueue. A cross-stream wait is a flow (v1 "s"/"f" pair with one id): "s" at the
// producer's device begin binds to the producer's slice, "f" with "bp":"e" at the consumer's device begin binds to
// the consumer's slice. Flow events must lie inside their slices, so both use the slices' exact ts. Pool events
// are thread-scoped instant events ("i", "s":"t") on host track kPoolTid, each followed by a sample of the
// process-scoped counter "pool bytes in use" at the same ts. Timestamps are µs from the earliest time in the
// trace, printed with ns precision.
constexpr int kHostPid = 1;
constexpr int kDevicePid = 2;
constexpr int kPoolTid = 1000;  // above any enqueue track (1 + host thread)

class TraceWriter {
 public:
  explicit TraceWriter(int64_t base_ns) : base_ns_(base_ns) { out_ = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n"; }

  std::string finish(std::string_view producer) && {
    out_ += "],\"otherData\":{\"producer\":";
    json::append_string(out_, producer);
    out_ += "}}\n";
    return std::move(out_);
  }

  void metadata(int pid, int tid, std::string_view what, std::string_view name) {
    begin_event();
    out_ += fmt::format("\"ph\":\"M\",\"pid\":{},\"tid\":{},\"name\":\"{}\",\"args\":{{\"name\":", pid, tid, what);
    json::append_string(out_, name);
    out_ += "}}";
  }
  void sort_index(int pid, int tid, int index) {
    begin_event();
    out_ += fmt::format(
        "\"ph\":\"M\",\"pid\":{},\"tid\":{},\"name\":\"thread_sort_index\",\"args\":{{\"sort_index\":{}}}}}", pid,
        tid, index);
  }
  // An "X" slice; `args` is a JSON object's text.
  void slice(int pid, int tid, std::string_view name, std::string_view category, int64_t begin_ns, int64_t end_ns,
             std::string_view args) {
    begin_event();
    out_ += fmt::format("\"ph\":\"X\",\"pid\":{},\"tid\":{},\"ts\":{},\"dur\":{},\"name\":", pid, tid, us(begin_ns),
                        duration_us(end_ns - begin_ns));
    json::append_string(out_, name);
    out_ += ",\"cat\":";
    json::append_string(out_, category);
    out_ += ",\"args\":";
    out_ += args;
    out_ += '}';
  }
  void flow(uint64_t id, int from_tid, int64_t from_ns, int to_tid, int64_t to_ns) {
    begin_event();
    out_ += fmt::format("\"ph\":\"s\",\"id\":{},\"pid\":{},\"tid\":{},\"ts\":{},\"name\":\"event wait\",\"cat\":\"wait\"}}",
                        id, kDevicePid, from_tid, us(from_ns));
    begin_event();
    out_ += fmt::format(
        "\"ph\":\"f\",\"bp\":\"e\",\"id\":{},\"pid\":{},\"tid\":{},\"ts\":{},\"name\":\"event wait\",\"cat\":\"wait\"}}",
        id, kDevicePid, to_tid, us(to_ns));
  }
  void counter(const CounterSample& sample) {
    begin_event();
    out_ += fmt::format(
        "\"ph\":\"C\",\"pid\":{},\"tid\":0,\"ts\":{},\"name\":\"pool bytes\",\"args\":{{\"allocated\":{},"
        "\"reserved\":{}}}}}",
        kHostPid, us(sample.ts_ns), sample.pool_allocated_bytes, sample.pool_reserved_bytes);
  }
  void pool_event(const PoolEvent& event) {
    begin_event();
    out_ += fmt::format("\"ph\":\"i\",\"s\":\"t\",\"pid\":{},\"tid\":{},\"ts\":{},\"name\":", kHostPid, kPoolTid,
                        us(event.ts_ns));
    json::append_string(out_, fmt::format("{} {}", pool_event_kind_name(event.kind), event.value));
    out_ += fmt::format(",\"cat\":\"pool\",\"args\":{{\"run\":{},\"node_id\":{},\"tag\":", event.run, event.node_id);
    json::append_string(out_, event.tag);
    out_ += ",\"value\":";
    json::append_string(out_, event.value);
    out_ += fmt::format(",\"bytes\":{},\"in_use_bytes\":{}}}}}", event.bytes, event.in_use_bytes);
    begin_event();
    out_ += fmt::format("\"ph\":\"C\",\"pid\":{},\"tid\":0,\"ts\":{},\"name\":\"pool bytes in use\",\"args\":{{"
                        "\"bytes\":{}}}}}",
                        kHostPid, us(event.ts_ns), event.in_use_bytes);
  }

 private:
  void begin_event() {
    if (!first_) out_ += ",\n";
    first_ = false;
    out_ += '{';
  }
  std::string us(int64_t ns) const {
    const int64_t rel = ns - base_ns_;
    return fmt::format("{}.{:03}", rel / 1000, rel % 1000);
  }
  static std::string duration_us(int64_t ns) { return fmt::format("{}.{:03}", ns / 1000, ns % 1000); }

  int64_t base_ns_;
  std::string out_;
  bool first_ = true;
};

std::string launch_args(const LaunchRecord& r) {
  std::string args = fmt::format("{{\"node_id\":{},\"run\":{},\"graph\":", r.node_id, r.run);
  json::append_string(args, r.graph);
  args += ",\"op\":";
  json::append_string(args, r.op_type);
  args += ",\"kernel\":";
  json::append_string(args, fmt::format("{} v{}", r.kernel, r.kernel_version));
  args += fmt::format(",\"fusion_id\":{}", r.fusion_id);
  if (!r.fused_nodes.empty()) {
    args += ",\"fused_nodes\":[";
    for (size_t i = 0; i < r.fused_nodes.size(); ++i) {
      if (i > 0) args += ',';
      json::append_string(args, r.fused_nodes[i]);
    }
    args += ']';
  }
  if (!r.fused_ids.empty()) args += fmt::format(",\"fused_ids\":[{}]", fmt::join(r.fused_ids, ","));
  args += ",\"stream\":";
  json::append_string(args, r.stream);
  args += ",\"tiling\":";
  json::append_string(args, r.tiling_key);
  args += ",\"inputs\":[";
  for (size_t i = 0; i < r.input_shapes.size(); ++i) {
    if (i > 0) args += ',';
    json::append_string(args, r.input_shapes[i]);
  }
  args += "],\"params\":";
  json::append_string(args, r.params);
  args += fmt::format(",\"enqueue_ns\":{}", r.enqueue_end_ns - r.enqueue_begin_ns);
  args += '}';
  return args;
}

}  // namespace

std::string chrome_trace_json(const TraceData& data, const TraceOptions& options) {
  const std::span<const LaunchRecord> records = data.records;
  const std::span<const CounterSample> counters = data.counters;
  int64_t base = INT64_MAX;
  for (const LaunchRecord& r : records) {
    base = std::min(base, r.enqueue_begin_ns);
    if (r.has_device_time()) base = std::min(base, r.device_begin_ns);
  }
  if (options.counters) {
    for (const CounterSample& c : counters) base = std::min(base, c.ts_ns);
  }
  if (options.pool_events) {
    for (const PoolEvent& e : data.pool_events) base = std::min(base, e.ts_ns);
  }
  if (base == INT64_MAX) base = 0;

  TraceWriter writer(base);
  writer.metadata(kHostPid, 0, "process_name", "host");
  writer.metadata(kDevicePid, 0, "process_name", fmt::format("device: {}", options.process_name.empty() ? "hxrt" : options.process_name));
  // Stream tracks in order of first use; host tracks by thread number.
  std::map<std::string, int, std::less<>> stream_tids;
  std::map<int, bool> host_tids;
  for (const LaunchRecord& r : records) {
    if (!stream_tids.contains(r.stream)) {
      const int tid = static_cast<int>(stream_tids.size()) + 1;
      stream_tids.emplace(r.stream, tid);
      writer.metadata(kDevicePid, tid, "thread_name", fmt::format("stream {}", r.stream));
      writer.sort_index(kDevicePid, tid, tid);
    }
    if (options.enqueue_track && !host_tids.contains(r.host_thread)) {
      host_tids.emplace(r.host_thread, true);
      const int tid = r.host_thread + 1;
      writer.metadata(kHostPid, tid, "thread_name", fmt::format("enqueue (host thread {})", r.host_thread));
      writer.sort_index(kHostPid, tid, tid);
    }
  }
  uint64_t flow_id = 0;
  for (const LaunchRecord& r : records) {
    const std::string args = launch_args(r);
    const int stream_tid = stream_tids.at(r.stream);
    if (options.enqueue_track) {
      writer.slice(kHostPid, r.host_thread + 1, r.node_name, "enqueue", r.enqueue_begin_ns, r.enqueue_end_ns, args);
    }
    if (!r.has_device_time()) continue;
    writer.slice(kDevicePid, stream_tid, r.node_name, r.op_type, r.device_begin_ns, r.device_end_ns, args);
    if (!options.flows) continue;
    for (uint64_t producer_index : r.waits_on) {
      if (producer_index >= records.size()) continue;
      const LaunchRecord& producer = records[producer_index];
      if (!producer.has_device_time() || producer.stream == r.stream) continue;
      writer.flow(++flow_id, stream_tids.at(producer.stream), producer.device_begin_ns, stream_tid, r.device_begin_ns);
    }
  }
  if (options.counters) {
    for (const CounterSample& c : counters) writer.counter(c);
  }
  if (options.pool_events && !data.pool_events.empty()) {
    writer.metadata(kHostPid, kPoolTid, "thread_name", "pool (alloc/free)");
    writer.sort_index(kHostPid, kPoolTid, kPoolTid);
    for (const PoolEvent& e : data.pool_events) writer.pool_event(e);
  }
  return std::move(writer).finish("hxrt");
}

}  // namespace hxrt::runtime
