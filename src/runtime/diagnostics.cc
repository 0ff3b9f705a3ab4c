#include "hxrt/runtime/diagnostics.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "diagnostics_builder.h"
#include "hxrt/base/float16.h"
#include "profiler_json.h"

namespace hxrt::runtime {

std::string_view failure_location_name(FailureLocation location) {
  switch (location) {
    case FailureLocation::kExact: return "exact";
    case FailureLocation::kInferred: return "inferred";
    case FailureLocation::kAmbiguous: return "ambiguous";
    case FailureLocation::kStream: return "stream";
  }
  return "unknown";
}

std::string LaunchSummary::to_string() const {
  return fmt::format("node '{}' (id {}, {}) kernel '{}' tiling {} inputs [{}]", node_name, node_id, op_type, kernel,
                     tiling.empty() ? "(not computed)" : tiling, fmt::join(inputs, ", "));
}

NonFiniteCount scan_non_finite(DType dtype, std::span<const std::byte> bytes) {
  NonFiniteCount count;
  const auto note = [&count](size_t i, float value) {
    if (std::isfinite(value)) return;
    ++(std::isnan(value) ? count.nan : count.inf);
    if (count.first_index < 0) count.first_index = static_cast<int64_t>(i);
  };
  switch (dtype) {
    case DType::kF32:
      for (size_t i = 0; i < bytes.size() / sizeof(float); ++i) {
        float value;
        std::memcpy(&value, bytes.data() + i * sizeof(float), sizeof(float));
        note(i, value);
      }
      break;
    case DType::kF16:
    case DType::kBF16:
      for (size_t i = 0; i < bytes.size() / sizeof(uint16_t); ++i) {
        uint16_t bits;
        std::memcpy(&bits, bytes.data() + i * sizeof(uint16_t), sizeof(uint16_t));
        note(i, dtype == DType::kF16 ? f16_to_f32(bits) : bf16_to_f32(bits));
      }
      break;
    default: break;
  }
  return count;
}

std::string NonFiniteOutput::to_string() const {
  return fmt::format("output {} '{}' {}{}: {} NaN, {} Inf, first at index {}", index, value, dtype, shape, count.nan,
                     count.inf, count.first_index);
}

std::string FailureReport::to_string() const {
  std::string out;
  if (location == FailureLocation::kStream) {
    out = fmt::format("running graph '{}': stream '{}' failed {} (no launch could be named)", graph, stream, stage);
  } else {
    out = fmt::format("{} node '{}' (id {}, {}) with kernel '{}' v{} on stream '{}' of graph '{}'", stage, node_name,
                      node_id, op_type, kernel, kernel_version, stream, graph);
    if (location != FailureLocation::kExact) out += fmt::format(" [location {}]", failure_location_name(location));
    if (fusion_id >= 0) {
      out += fmt::format("\n    fusion group {}: {}", fusion_id, fmt::join(fused_nodes, " + "));
      if (!fused_ids.empty()) out += fmt::format(" (ids {})", fmt::join(fused_ids, ", "));
    }
    out += fmt::format("\n    attributes: {}", attributes.empty() ? "{}" : attributes);
    if (!params.empty()) out += fmt::format("\n    parameters: {}", params);
    out += fmt::format("\n    tiling: {}", tiling.empty() ? "(not computed)" : tiling);
    for (const FailureInput& in : inputs) {
      if (in.value.empty()) {
        out += fmt::format("\n    input {}: (omitted)", in.index);
        continue;
      }
      out += fmt::format("\n    input {}: '{}' {}{} from {}", in.index, in.value, in.dtype, in.shape, in.producer);
      if (!in.file.empty()) out += fmt::format(" -> {}", in.file);
    }
    if (non_finite) out += fmt::format("\n    non-finite values: {}", non_finite->to_string());
    if (!producers.empty()) out += fmt::format("\n    producers:\n      {}", fmt::join(producers, "\n      "));
    if (!candidates.empty()) {
      out += fmt::format("\n    or one of these launches of the same kernel: {} (RunOptions::locate_failures pins it)",
                         fmt::join(candidates, ", "));
    }
  }
  if (!recent_launches.empty()) {
    out += fmt::format("\n    last launches on stream '{}' (oldest first):", stream);
    for (const LaunchSummary& launch : recent_launches) out += "\n      " + launch.to_string();
  }
  if (!skipped.empty()) out += fmt::format("\n    skipped (they depend on it): {}", fmt::join(skipped, ", "));
  if (!snapshot_dir.empty()) out += fmt::format("\n    inputs snapshot: {}/manifest.json", snapshot_dir);
  if (!snapshot_error.empty()) out += fmt::format("\n    inputs snapshot failed: {}", snapshot_error);
  return out;
}

Result<std::string> write_raw_tensor(const std::string& path_stem, const HostTensor& tensor) {
  const std::string path = path_stem + ".bin";
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) return unavailable("cannot open '{}' for writing", path);
  file.write(reinterpret_cast<const char*>(tensor.bytes.data()), static_cast<std::streamsize>(tensor.bytes.size()));
  if (!file) return unavailable("cannot write {} bytes to '{}'", tensor.bytes.size(), path);
  return std::filesystem::path(path).filename().string();
}

namespace {

std::string file_stem(int index, std::string_view value) {
  std::string stem = fmt::format("input{}_", index);
  for (const char c : value) {
    const bool plain =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    stem += plain ? c : '_';
  }
  return stem;
}

std::string manifest_json(const FailureReport& report) {
  std::string out = "{\n  \"graph\": " + json::quoted(report.graph);
  out += fmt::format(",\n  \"node_id\": {},\n  \"node\": {}", report.node_id, json::quoted(report.node_name));
  out += ",\n  \"op\": " + json::quoted(report.op_type);
  out += ",\n  \"kernel\": " + json::quoted(report.kernel);
  out += fmt::format(",\n  \"kernel_version\": {},\n  \"fusion_id\": {}", report.kernel_version, report.fusion_id);
  if (!report.fused_ids.empty()) out += fmt::format(",\n  \"fused_ids\": [{}]", fmt::join(report.fused_ids, ", "));
  out += ",\n  \"stream\": " + json::quoted(report.stream);
  out += ",\n  \"location\": " + json::quoted(failure_location_name(report.location));
  out += ",\n  \"attributes\": " + json::quoted(report.attributes);
  out += ",\n  \"params\": " + json::quoted(report.params);
  out += ",\n  \"tiling\": " + json::quoted(report.tiling);
  out += ",\n  \"error\": " + json::quoted(report.error);
  if (report.non_finite) {
    const NonFiniteOutput& bad = *report.non_finite;
    out += fmt::format(",\n  \"non_finite\": {{\"output\": {}, \"value\": {}, \"nan\": {}, \"inf\": {}, \"first_index\": {}}}",
                       bad.index, json::quoted(bad.value), bad.count.nan, bad.count.inf, bad.count.first_index);
  }
  out += ",\n  \"inputs\": [";
  bool first = true;
  for (const FailureInput& in : report.inputs) {
    if (in.file.empty()) continue;
    out += first ? "\n    " : ",\n    ";
    first = false;
    out += fmt::format("{{\"index\": {}, \"value\": {}, \"dtype\": {}, \"shape\": [{}], \"producer\": {}, \"file\": {}}}",
                       in.index, json::quoted(in.value), json::quoted(dtype_name(in.dtype)),
                       fmt::join(in.shape.dims(), ", "), json::quoted(in.producer), json::quoted(in.file));
  }
  out += "\n  ]\n}\n";
  return out;
}

}  // namespace

Status write_failure_snapshot(const std::string& dir, const std::vector<HostTensor>& inputs,
                              const SnapshotTensorWriter& writer, FailureReport& report) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return unavailable("cannot create snapshot directory '{}': {}", dir, error.message());
  const SnapshotTensorWriter& write = writer ? writer : SnapshotTensorWriter(write_raw_tensor);
  for (size_t i = 0; i < report.inputs.size() && i < inputs.size(); ++i) {
    FailureInput& in = report.inputs[i];
    if (in.value.empty()) continue;
    const std::string stem = (std::filesystem::path(dir) / file_stem(in.index, in.value)).string();
    HXRT_ASSIGN_OR_RETURN(in.file, write(stem, inputs[i]));
  }
  const std::string path = (std::filesystem::path(dir) / "manifest.json").string();
  std::ofstream manifest(path, std::ios::trunc);
  const std::string text = manifest_json(report);
  manifest << text;
  if (!manifest) return unavailable("cannot write '{}'", path);
  report.snapshot_dir = dir;
  return ok_status();
}

namespace diagnostics {
namespace {

std::string producer_of(const graph::Graph& g, graph::ValueId id) {
  const graph::Value& value = g.value(id);
  if (value.producer != graph::kNoNode) {
    const graph::Node& node = g.node(value.producer);
    return fmt::format("node '{}' ({})", node.name, node.op_type);
  }
  if (value.is_initializer) return "weight";
  return "graph input";
}

std::string shape_of(const RunView& run, graph::ValueId id) {
  const graph::Value& value = run.plan->graph().value(id);
  const auto v = static_cast<size_t>(id);
  if (v < run.shapes.size()) return fmt::format("{}{}", value.desc.dtype, run.shapes[v]);
  return value.desc.to_string();
}

LaunchSummary summarize_launch(const RunView& run, size_t object) {
  const ExecutionObject& eo = run.plan->objects()[object];
  const graph::Node& node = run.plan->graph().node(eo.node);
  LaunchSummary summary;
  summary.node_id = node.stable_id;
  summary.node_name = node.name;
  summary.op_type = node.op_type;
  summary.kernel = eo.kernel->name;
  if (object < run.launches.size() && run.launches[object].tiling) summary.tiling = run.launches[object].tiling->key();
  for (graph::ValueId in : eo.inputs) summary.inputs.push_back(in == graph::kNoValue ? "-" : shape_of(run, in));
  return summary;
}

// The last kRingSize launches on `stream` among objects [0, end).
std::vector<LaunchSummary> ring(const RunView& run, int stream, size_t end) {
  std::vector<size_t> picked;
  const std::vector<ExecutionObject>& objects = run.plan->objects();
  for (size_t i = std::min(end, objects.size()); i-- > 0 && picked.size() < kRingSize;) {
    if (objects[i].stream == stream) picked.push_back(i);
  }
  std::vector<LaunchSummary> out;
  for (auto it = picked.rbegin(); it != picked.rend(); ++it) out.push_back(summarize_launch(run, *it));
  return out;
}

// The producers of `node`'s inputs, depth-first up to kProducerDepth levels, one line per value, indented by depth.
std::vector<std::string> producer_chain(const RunView& run, const graph::Node& node) {
  const graph::Graph& g = run.plan->graph();
  std::vector<std::string> lines;
  std::set<graph::ValueId> seen;
  struct Item {
    graph::ValueId value;
    int depth;
  };
  std::vector<Item> stack;
  for (auto it = node.inputs.rbegin(); it != node.inputs.rend(); ++it) {
    if (*it != graph::kNoValue) stack.push_back({*it, 0});
  }
  while (!stack.empty() && lines.size() < kMaxProducerLines) {
    const Item item = stack.back();
    stack.pop_back();
    if (!seen.insert(item.value).second) continue;
    const graph::Value& value = g.value(item.value);
    lines.push_back(fmt::format("{}'{}' {} <- {}", std::string(static_cast<size_t>(2 * item.depth), ' '), value.name,
                                shape_of(run, item.value), producer_of(g, item.value)));
    if (value.producer == graph::kNoNode || item.depth + 1 >= kProducerDepth) continue;
    const graph::Node& producer = g.node(value.producer);
    for (auto it = producer.inputs.rbegin(); it != producer.inputs.rend(); ++it) {
      if (*it != graph::kNoValue && !g.value(*it).is_initializer) stack.push_back({*it, item.depth + 1});
    }
  }
  if (!stack.empty()) lines.push_back("...");
  return lines;
}

}  // namespace

FailureReport describe_launch(const RunView& run, size_t object, std::string stage, FailureLocation location) {
  const ExecutionPlan& plan = *run.plan;
  const graph::Graph& g = plan.graph();
  const ExecutionObject& eo = plan.objects()[object];
  const graph::Node& node = g.node(eo.node);
  FailureReport report;
  report.graph = g.name();
  report.stage = std::move(stage);
  report.location = location;
  report.node_id = node.stable_id;
  report.node_name = node.name;
  report.op_type = node.op_type;
  report.kernel = eo.kernel->name;
  report.kernel_version = eo.kernel->impl_version;
  report.fusion_id = eo.fusion_id;
  report.fused_nodes = node.fused_from;
  report.fused_ids = node.fused_ids;
  if (static_cast<size_t>(eo.stream) < run.stream_names.size()) report.stream = run.stream_names[static_cast<size_t>(eo.stream)];
  report.attributes = node.attrs.to_string();
  if (eo.params) report.params = eo.params->to_string();
  if (object < run.launches.size() && run.launches[object].tiling) report.tiling = run.launches[object].tiling->key();
  for (size_t i = 0; i < eo.inputs.size(); ++i) {
    FailureInput in;
    in.index = static_cast<int>(i);
    const graph::ValueId id = eo.inputs[i];
    if (id != graph::kNoValue) {
      const graph::Value& value = g.value(id);
      in.value = value.name;
      in.dtype = value.desc.dtype;
      const auto v = static_cast<size_t>(id);
      if (v < run.shapes.size()) in.shape = run.shapes[v];
      in.producer = producer_of(g, id);
    }
    report.inputs.push_back(std::move(in));
  }
  report.producers = producer_chain(run, node);
  report.recent_launches = ring(run, eo.stream, std::min(object, run.launched));
  return report;
}

FailureReport describe_stream(const RunView& run, int stream, std::string stage) {
  FailureReport report;
  report.graph = run.plan->graph().name();
  report.stage = std::move(stage);
  report.location = FailureLocation::kStream;
  if (static_cast<size_t>(stream) < run.stream_names.size()) report.stream = run.stream_names[static_cast<size_t>(stream)];
  report.recent_launches = ring(run, stream, run.launched);
  return report;
}

Location locate(const ExecutionPlan& plan, size_t launched, int stream, const Status& error,
                const std::function<hal::EventState(int)>& plan_event,
                const std::function<hal::EventState(size_t)>& marker) {
  const std::vector<ExecutionObject>& objects = plan.objects();
  std::vector<size_t> window;
  for (size_t i = 0; i < std::min(launched, objects.size()); ++i) {
    if (objects[i].stream == stream) window.push_back(i);
  }
  Location result;
  if (marker) {
    // Launches before the failure completed their marker; the failing one and those skipped after it did not.
    for (size_t i : window) {
      if (marker(i) != hal::EventState::kComplete) {
        result.location = FailureLocation::kExact;
        result.object = i;
        return result;
      }
    }
    return result;
  }
  // Plan events recorded after a launch bound the failure: completed → it failed later; failed → at or before.
  size_t lo = 0, hi = window.size();
  for (size_t k = 0; k < window.size(); ++k) {
    const int event = objects[window[k]].record_event;
    if (event < 0) continue;
    const hal::EventState state = plan_event(event);
    if (state == hal::EventState::kComplete) lo = k + 1;
    if (state == hal::EventState::kFailed && k < hi) hi = k + 1;
  }
  const std::string text = error.to_string();
  std::vector<size_t> matching;
  for (size_t k = lo; k < hi; ++k) {
    if (text.find(fmt::format("'{}'", objects[window[k]].kernel->name)) != std::string::npos) matching.push_back(window[k]);
  }
  if (matching.empty()) return result;
  result.object = matching.front();
  result.location = matching.size() == 1 ? FailureLocation::kInferred : FailureLocation::kAmbiguous;
  result.candidates.assign(matching.begin() + 1, matching.end());
  return result;
}

}  // namespace diagnostics
}  // namespace hxrt::runtime
