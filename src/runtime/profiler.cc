#include "hxrt/runtime/profiler.h"

#include <algorithm>
#include <fstream>
#include <map>

#include <fmt/format.h>

#include "profiler_json.h"

namespace hxrt::runtime {
namespace json {

void append_string(std::string& out, std::string_view text) {
  out += '"';
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(static_cast<unsigned char>(c)));
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

}  // namespace json

namespace {

// Accumulates rows keyed by name; finish() sorts by total time and computes shares.
class RowTable {
 public:
  void add(const std::string& name, std::string_view detail, int64_t ns) {
    auto [it, inserted] = rows_.try_emplace(name);
    SummaryRow& row = it->second;
    if (inserted) {
      row.name = name;
      row.detail = std::string(detail);
      row.min_ns = ns;
      row.max_ns = ns;
    }
    ++row.count;
    row.total_ns += ns;
    row.min_ns = std::min(row.min_ns, ns);
    row.max_ns = std::max(row.max_ns, ns);
  }
  std::vector<SummaryRow> finish(int64_t busy_ns) && {
    std::vector<SummaryRow> out;
    out.reserve(rows_.size());
    for (auto& [name, row] : rows_) {
      row.share = busy_ns > 0 ? static_cast<double>(row.total_ns) / static_cast<double>(busy_ns) : 0.0;
      out.push_back(std::move(row));
    }
    std::stable_sort(out.begin(), out.end(), [](const SummaryRow& a, const SummaryRow& b) {
      return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
    });
    return out;
  }

 private:
  std::map<std::string, SummaryRow, std::less<>> rows_;
};

std::string format_ns(double ns) {
  if (ns >= 1e9) return fmt::format("{:.3f} s", ns / 1e9);
  if (ns >= 1e6) return fmt::format("{:.3f} ms", ns / 1e6);
  if (ns >= 1e3) return fmt::format("{:.2f} us", ns / 1e3);
  return fmt::format("{:.0f} ns", ns);
}

void append_table(std::string& out, std::string_view title, std::string_view detail_title,
                  const std::vector<SummaryRow>& rows, size_t max_rows) {
  size_t name_width = title.size();
  size_t detail_width = detail_title.size();
  const size_t shown = std::min(rows.size(), max_rows);
  for (size_t i = 0; i < shown; ++i) {
    name_width = std::max(name_width, rows[i].name.size());
    detail_width = std::max(detail_width, rows[i].detail.size());
  }
  name_width = std::min<size_t>(name_width, 48);
  detail_width = std::min<size_t>(detail_width, 40);
  out += fmt::format("{:<{}}  ", title, name_width);
  if (!detail_title.empty()) out += fmt::format("{:<{}}  ", detail_title, detail_width);
  out += fmt::format("{:>7}  {:>11}  {:>11}  {:>11}  {:>11}  {:>6}\n", "count", "total", "mean", "min", "max", "%");
  for (size_t i = 0; i < shown; ++i) {
    const SummaryRow& row = rows[i];
    out += fmt::format("{:<{}}  ", row.name, name_width);
    if (!detail_title.empty()) out += fmt::format("{:<{}}  ", row.detail, detail_width);
    out += fmt::format("{:>7}  {:>11}  {:>11}  {:>11}  {:>11}  {:>6.2f}\n", row.count,
                       format_ns(static_cast<double>(row.total_ns)), format_ns(row.mean_ns()),
                       format_ns(static_cast<double>(row.min_ns)), format_ns(static_cast<double>(row.max_ns)),
                       100.0 * row.share);
  }
  if (rows.size() > shown) out += fmt::format("... {} more\n", rows.size() - shown);
}

}  // namespace

ProfileSummary summarize(std::span<const LaunchRecord> records) {
  ProfileSummary summary;
  RowTable by_op, by_kernel, by_node;
  int64_t first = INT64_MAX, last = INT64_MIN;
  uint64_t last_run = 0;
  for (const LaunchRecord& r : records) {
    if (r.run != last_run) {
      ++summary.runs;
      last_run = r.run;
    }
    ++summary.launches;
    summary.enqueue_ns += r.enqueue_end_ns - r.enqueue_begin_ns;
    first = std::min(first, r.enqueue_begin_ns);
    last = std::max(last, r.enqueue_end_ns);
    if (!r.has_device_time()) {
      ++summary.launches_without_device_time;
      continue;
    }
    last = std::max(last, r.device_end_ns);
    const int64_t ns = r.device_ns();
    summary.device_busy_ns += ns;
    by_op.add(r.op_type, "", ns);
    by_kernel.add(r.kernel, r.op_type, ns);
    by_node.add(r.node_name, r.op_type + " / " + r.kernel, ns);
  }
  if (summary.launches > 0) summary.span_ns = last - first;
  summary.by_op = std::move(by_op).finish(summary.device_busy_ns);
  summary.by_kernel = std::move(by_kernel).finish(summary.device_busy_ns);
  summary.by_node = std::move(by_node).finish(summary.device_busy_ns);
  return summary;
}

std::string ProfileSummary::to_string(size_t max_rows) const {
  std::string out = fmt::format(
      "{} launches in {} run(s): device busy {} (sum over streams), span {}, host enqueue {} ({} per launch)\n",
      launches, runs, format_ns(static_cast<double>(device_busy_ns)), format_ns(static_cast<double>(span_ns)),
      format_ns(static_cast<double>(enqueue_ns)),
      format_ns(launches ? static_cast<double>(enqueue_ns) / static_cast<double>(launches) : 0.0));
  if (launches_without_device_time > 0) {
    out += fmt::format("{} launches have no device time (their stream failed before reaching them)\n",
                       launches_without_device_time);
  }
  out += '\n';
  append_table(out, "op", "", by_op, max_rows);
  out += '\n';
  append_table(out, "kernel", "op", by_kernel, max_rows);
  out += '\n';
  append_table(out, "node", "op / kernel", by_node, max_rows);
  return out;
}

std::string_view pool_event_kind_name(PoolEventKind kind) {
  return kind == PoolEventKind::kAlloc ? "alloc" : "free";
}

Profiler::Profiler(std::string name, const ProfilerOptions& options) : name_(std::move(name)), options_(options) {}

void Profiler::add_run(RunProfile run) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (records_.size() + run.launches.size() > options_.max_records) {
    ++dropped_runs_;
    return;
  }
  const uint64_t number = ++runs_;
  const uint64_t base = records_.size();
  auto thread = std::find(threads_.begin(), threads_.end(), run.host_thread);
  if (thread == threads_.end()) thread = threads_.insert(threads_.end(), run.host_thread);
  const int host_thread = static_cast<int>(thread - threads_.begin());
  for (LaunchRecord& record : run.launches) {
    record.run = number;
    record.host_thread = host_thread;
    for (uint64_t& producer : record.waits_on) producer += base;
    records_.push_back(std::move(record));
  }
  counters_.insert(counters_.end(), run.counters.begin(), run.counters.end());
  for (PoolEvent& event : run.pool_events) {
    event.run = number;
    pool_events_.push_back(std::move(event));
  }
}

void Profiler::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  records_.clear();
  counters_.clear();
  pool_events_.clear();
  runs_ = 0;
  dropped_runs_ = 0;
}

std::vector<LaunchRecord> Profiler::records() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return records_;
}

std::vector<CounterSample> Profiler::counters() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counters_;
}

std::vector<PoolEvent> Profiler::pool_events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pool_events_;
}

uint64_t Profiler::runs() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return runs_;
}

uint64_t Profiler::dropped_runs() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return dropped_runs_;
}

ProfileSummary Profiler::summary() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return summarize(records_);
}

std::string Profiler::chrome_trace_json(TraceOptions options) const {
  if (options.process_name.empty()) options.process_name = name_;
  std::lock_guard<std::mutex> lock(mutex_);
  return runtime::chrome_trace_json(TraceData{records_, counters_, pool_events_}, options);
}

std::string Profiler::timeline_html(TraceOptions options) const {
  if (options.process_name.empty()) options.process_name = name_;
  std::lock_guard<std::mutex> lock(mutex_);
  return runtime::timeline_html(TraceData{records_, counters_, pool_events_}, options);
}

namespace {

Status write_text_file(const std::string& path, const std::string& text, std::string_view what) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) return unavailable("cannot open {} '{}' for writing", what, path);
  file.write(text.data(), static_cast<std::streamsize>(text.size()));
  file.close();
  if (!file) return unavailable("cannot write {} '{}' ({} bytes)", what, path, text.size());
  return ok_status();
}

}  // namespace

Status Profiler::write_chrome_trace(const std::string& path, TraceOptions options) const {
  return write_text_file(path, chrome_trace_json(std::move(options)), "trace file");
}

Status Profiler::write_timeline_html(const std::string& path, TraceOptions options) const {
  return write_text_file(path, timeline_html(std::move(options)), "timeline file");
}

}  // namespace hxrt::runtime
