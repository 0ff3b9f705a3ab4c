// A self-contained HTML timeline of profiler records (Note [HTML timeline]).
#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hxrt/runtime/profiler.h"

namespace hxrt::runtime {
namespace {

// Note [HTML timeline]
// One static SVG drawn on the server side, so the page needs nothing but a browser and shows the same picture
// with scripts off: a lane per stream (in order of first use) with one <rect class="launch"> per launch that has
// device time, x from its device interval; under the lanes, the pool bytes in use as a step line (the pool events,
// else the per-launch counter samples). Every box carries its args in an SVG <title> (the browser's tooltip) and
// in data- attributes; a few lines of inline script show them in a side panel on hover (it starts with the longest
// launch). Times are on the host
// steady clock like the trace, so pool samples (host times) and device intervals share the x axis. No external
// script, style sheet or font is referenced.
constexpr int kWidth = 1360;         // SVG user units; the SVG scales to the window width
constexpr int kLabelWidth = 150;     // lane labels on the left
constexpr int kLaneHeight = 34;
constexpr int kLaneGap = 6;
constexpr int kAxisHeight = 28;
constexpr int kCounterHeight = 110;
constexpr size_t kMaxBoxes = 200000;  // beyond this the page gets too heavy for a browser; later launches are cut
constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#86bcb6"};

std::string escape_xml(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string format_time(double ns) {
  if (ns >= 1e9) return fmt::format("{:.3g} s", ns / 1e9);
  if (ns >= 1e6) return fmt::format("{:.4g} ms", ns / 1e6);
  if (ns >= 1e3) return fmt::format("{:.4g} us", ns / 1e3);
  return fmt::format("{:.0f} ns", ns);
}

std::string format_bytes(double bytes) {
  if (bytes >= 1024.0 * 1024 * 1024) return fmt::format("{:.3g} GiB", bytes / (1024.0 * 1024 * 1024));
  if (bytes >= 1024.0 * 1024) return fmt::format("{:.3g} MiB", bytes / (1024.0 * 1024));
  if (bytes >= 1024.0) return fmt::format("{:.3g} KiB", bytes / 1024.0);
  return fmt::format("{:.0f} B", bytes);
}

std::string launch_tooltip(const LaunchRecord& r) {
  std::string text = fmt::format("{} (node {}, run {})\nop: {}\nkernel: {} v{}\n", r.node_name, r.node_id, r.run,
                                 r.op_type, r.kernel, r.kernel_version);
  if (r.fusion_id >= 0) {
    text += fmt::format("fusion: {} [{}]\n", r.fusion_id, fmt::join(r.fused_nodes, " + "));
  }
  text += fmt::format("stream: {}\ninputs: {}\ntiling: {}\n", r.stream, fmt::join(r.input_shapes, ", "),
                      r.tiling_key.empty() ? "-" : r.tiling_key);
  if (!r.params.empty()) text += fmt::format("params: {}\n", r.params);
  text += fmt::format("device: {}\nenqueue: {}", format_time(static_cast<double>(r.device_ns())),
                      format_time(static_cast<double>(r.enqueue_end_ns - r.enqueue_begin_ns)));
  return text;
}

constexpr const char* kStyle = R"(
body { font: 13px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 16px; color: #222; background: #fff; }
h1 { font-size: 17px; margin: 0 0 4px; }
.meta { color: #555; margin-bottom: 10px; }
.wrap { display: flex; gap: 12px; align-items: flex-start; }
svg { flex: 1; min-width: 0; border: 1px solid #ddd; background: #fafafa; }
.lane { fill: #fff; stroke: #e4e4e4; }
.label { font-size: 12px; fill: #333; }
.launch { stroke: #fff; stroke-width: 0.5; cursor: pointer; }
.launch:hover, .launch.sel { stroke: #000; stroke-width: 1.5; }
.name { font-size: 10px; fill: #fff; pointer-events: none; }
.tick { stroke: #ccc; stroke-dasharray: 2 3; }
.tick-label { font-size: 10px; fill: #666; }
.counter { fill: none; stroke: #d37295; stroke-width: 1.5; }
.counter-area { fill: #d37295; fill-opacity: 0.12; stroke: none; }
#panel { width: 300px; flex: none; white-space: pre-wrap; font: 12px/1.45 ui-monospace, monospace; border: 1px solid #ddd;
         padding: 8px; background: #fff; min-height: 120px; }
.legend span { display: inline-block; margin-right: 12px; }
.legend i { display: inline-block; width: 10px; height: 10px; margin-right: 4px; vertical-align: -1px; }
)";

constexpr const char* kScript = R"(
(function () {
  var panel = document.getElementById('panel');
  var selected = null;
  function show(target) {
    var title = target.querySelector('title');
    panel.textContent = title ? title.textContent : '';
  }
  document.querySelectorAll('.launch').forEach(function (box) {
    box.addEventListener('mouseenter', function () { show(box); });
    box.addEventListener('click', function () {
      if (selected) selected.classList.remove('sel');
      selected = box;
      box.classList.add('sel');
      show(box);
    });
  });
})();
)";

}  // namespace

std::string timeline_html(const TraceData& data, const TraceOptions& options) {
  const std::string name = options.process_name.empty() ? "hxrt" : options.process_name;
  // Lanes in order of first use; the time range covers device intervals and pool samples.
  std::vector<std::string> lanes;
  std::map<std::string, size_t, std::less<>> lane_of;
  int64_t t0 = INT64_MAX, t1 = INT64_MIN;
  size_t boxes = 0;
  for (const LaunchRecord& r : data.records) {
    if (!r.has_device_time()) continue;
    if (boxes++ == kMaxBoxes) break;
    if (!lane_of.contains(r.stream)) {
      lane_of.emplace(r.stream, lanes.size());
      lanes.push_back(r.stream);
    }
    t0 = std::min(t0, r.device_begin_ns);
    t1 = std::max(t1, r.device_end_ns);
  }
  // The pool line: pool events when recorded, else the per-launch samples.
  std::vector<std::pair<int64_t, int64_t>> pool;  // (ts, bytes in use)
  if (options.pool_events && !data.pool_events.empty()) {
    for (const PoolEvent& e : data.pool_events) pool.emplace_back(e.ts_ns, e.in_use_bytes);
  } else if (options.counters) {
    for (const CounterSample& c : data.counters) pool.emplace_back(c.ts_ns, c.pool_allocated_bytes);
  }
  for (const auto& sample : pool) {
    t0 = std::min(t0, sample.first);
    t1 = std::max(t1, sample.first);
  }
  if (t0 == INT64_MAX) {
    t0 = 0;
    t1 = 1;
  }
  const std::vector<std::pair<int64_t, int64_t>>& line = pool;
  const double span = static_cast<double>(std::max<int64_t>(t1 - t0, 1));
  const double plot_width = kWidth - kLabelWidth - 10;
  const auto x_of = [&](int64_t ns) { return kLabelWidth + static_cast<double>(ns - t0) / span * plot_width; };

  const int lanes_top = kAxisHeight;
  const int lanes_height = static_cast<int>(lanes.size()) * (kLaneHeight + kLaneGap);
  const int counter_top = lanes_top + lanes_height + 14;
  const int height = counter_top + (line.empty() ? 0 : kCounterHeight + 24);

  std::string svg = fmt::format(
      "<svg id=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} {}\" preserveAspectRatio=\"xMinYMin "
      "meet\">\n",
      kWidth, height);
  // Time axis.
  constexpr int kTicks = 8;
  for (int t = 0; t <= kTicks; ++t) {
    const double x = kLabelWidth + plot_width * t / kTicks;
    svg += fmt::format("<line class=\"tick\" x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\"/>", x, kAxisHeight - 6, x,
                       height);
    svg += fmt::format("<text class=\"tick-label\" x=\"{:.1f}\" y=\"{}\" text-anchor=\"{}\">{}</text>\n", x,
                       kAxisHeight - 10, t == 0 ? "start" : (t == kTicks ? "end" : "middle"),
                       escape_xml(format_time(span * t / kTicks)));
  }
  for (size_t l = 0; l < lanes.size(); ++l) {
    const int y = lanes_top + static_cast<int>(l) * (kLaneHeight + kLaneGap);
    svg += fmt::format("<rect class=\"lane\" x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\"/>", kLabelWidth, y,
                       plot_width, kLaneHeight);
    svg += fmt::format("<text class=\"label\" x=\"6\" y=\"{}\">stream {}</text>\n", y + kLaneHeight / 2 + 4,
                       escape_xml(lanes[l]));
  }
  // Launch boxes, coloured by op type.
  std::map<std::string, size_t, std::less<>> colour_of;
  size_t drawn = 0;
  const LaunchRecord* longest = nullptr;
  for (size_t k = 0; k < data.records.size() && drawn < kMaxBoxes; ++k) {
    const LaunchRecord& r = data.records[k];
    if (!r.has_device_time()) continue;
    ++drawn;
    if (longest == nullptr || r.device_ns() > longest->device_ns()) longest = &r;
    auto [colour, inserted] = colour_of.try_emplace(r.op_type, colour_of.size());
    const int y = lanes_top + static_cast<int>(lane_of.at(r.stream)) * (kLaneHeight + kLaneGap) + 3;
    const double x = x_of(r.device_begin_ns);
    const double w = std::max(x_of(r.device_end_ns) - x, 0.8);
    svg += fmt::format(
        "<rect class=\"launch\" data-node=\"{}\" data-node-id=\"{}\" data-op=\"{}\" data-stream=\"{}\" x=\"{:.2f}\" "
        "y=\"{}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\"><title>{}</title></rect>",
        escape_xml(r.node_name), r.node_id, escape_xml(r.op_type), escape_xml(r.stream), x, y, w, kLaneHeight - 6,
        kPalette[colour->second % std::size(kPalette)], escape_xml(launch_tooltip(r)));
    if (w > 8.0 * static_cast<double>(std::min<size_t>(r.node_name.size(), 24)) + 6) {
      svg += fmt::format("<text class=\"name\" x=\"{:.2f}\" y=\"{}\">{}</text>", x + 3, y + kLaneHeight / 2 + 1,
                         escape_xml(r.node_name));
    }
    svg += '\n';
  }
  // Pool bytes in use: a step line over the counter area.
  if (!line.empty()) {
    int64_t peak = 1;
    for (const auto& sample : line) peak = std::max(peak, sample.second);
    const auto y_of = [&](int64_t bytes) {
      return counter_top + kCounterHeight -
             static_cast<double>(bytes) / static_cast<double>(peak) * (kCounterHeight - 8);
    };
    std::string points;
    double previous_y = y_of(line.front().second);
    points += fmt::format("{:.1f},{:.1f}", x_of(line.front().first), previous_y);
    for (size_t k = 1; k < line.size(); ++k) {
      const double x = x_of(line[k].first);
      const double y = y_of(line[k].second);
      points += fmt::format(" {:.1f},{:.1f} {:.1f},{:.1f}", x, previous_y, x, y);
      previous_y = y;
    }
    points += fmt::format(" {:.1f},{:.1f}", kLabelWidth + plot_width, previous_y);
    svg += fmt::format("<rect class=\"lane\" x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\"/>", kLabelWidth,
                       counter_top, plot_width, kCounterHeight);
    svg += fmt::format("<polygon class=\"counter-area\" points=\"{:.1f},{} {} {:.1f},{}\"/>", x_of(line.front().first),
                       counter_top + kCounterHeight, points, kLabelWidth + plot_width, counter_top + kCounterHeight);
    svg += fmt::format("<polyline class=\"counter\" id=\"pool-bytes\" points=\"{}\"/>\n", points);
    svg += fmt::format("<text class=\"label\" x=\"6\" y=\"{}\">pool bytes in use</text>", counter_top + 16);
    svg += fmt::format("<text class=\"tick-label\" x=\"6\" y=\"{}\">peak {}</text>\n", counter_top + 32,
                       escape_xml(format_bytes(static_cast<double>(peak))));
  }
  svg += "</svg>\n";

  const ProfileSummary summary = summarize(data.records);
  std::string legend = "<div class=\"legend\">";
  for (const auto& [op, colour] : colour_of) {
    legend += fmt::format("<span><i style=\"background:{}\"></i>{}</span>", kPalette[colour % std::size(kPalette)],
                          escape_xml(op));
  }
  legend += "</div>\n";
  std::string html = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  html += fmt::format("<title>hxrt timeline: {}</title>\n<style>{}</style>\n</head>\n<body>\n", escape_xml(name), kStyle);
  html += fmt::format("<h1>hxrt timeline: {}</h1>\n", escape_xml(name));
  html += fmt::format(
      "<div class=\"meta\">{} launches in {} run(s) on {} stream(s); device busy {} (sum over streams), shown span {}"
      "{}. Hover or click a box for its node, op, kernel, fusion group, inputs and tiling.</div>\n",
      summary.launches, summary.runs, lanes.size(), escape_xml(format_time(static_cast<double>(summary.device_busy_ns))),
      escape_xml(format_time(span)),
      drawn < boxes ? fmt::format("; first {} launches drawn", drawn) : std::string());
  html += legend;
  // The panel starts with the longest launch, so a static view (a screenshot, scripts off) shows what a hover shows.
  const std::string panel =
      longest ? "longest launch (hover or click another):\n\n" + escape_xml(launch_tooltip(*longest)) : "no launches";
  html += "<div class=\"wrap\">\n" + svg + "<div id=\"panel\">" + panel + "</div>\n</div>\n";
  html += fmt::format("<script>{}</script>\n</body>\n</html>\n", kScript);
  return html;
}

}  // namespace hxrt::runtime
