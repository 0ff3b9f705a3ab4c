// Diagnostics: what the Executor reports when a run fails, and the input snapshot it can leave behind.
//
// A failure — a tiling or enqueue error, an out-of-memory, a kernel error or timeout found when the streams are
// synchronized — becomes a Status whose context names the failing launch (FailureReport::to_string()): node id and
// name, op, kernel and version, fusion group and the nodes it covers, stream, attributes, parsed parameters,
// tiling key, every input's dtype/shape/producer, the chain of producer ops a few levels up, and the last launches
// enqueued on the failing stream in that run (the stream's diagnostics ring). The same report is kept as a value
// (Executor::last_failure()).
//
// Errors found at enqueue name their launch exactly. A kernel error surfaces later, at synchronize, as the sticky
// error of a stream; the executor then pins it (FailureLocation):
//   kExact:     each launch was followed by an event (RunOptions::locate_failures, profile or snapshot_dir), and the
//               first launch of the failing stream whose event did not complete is the one;
//   kInferred:  without those events, the launches of the failing stream are narrowed by the plan's cross-stream
//               events that did or did not complete, then by the kernel the stream error names; one remained;
//   kAmbiguous: several remained; the report names the first and lists the others (`candidates`);
//   kStream:    no launch matched (a copy or wait failed); only the stream and its ring are reported.
// With several failed streams, the root is the one whose error went through the fewest hops (a stream waiting on
// a failed stream's event fails too, with one more context line).
//
// Check-numerics (RunOptions::check_numerics): after each launch the float outputs (f32, f16, bf16) are scanned for
// NaN and Inf (scan_non_finite); the first launch in plan order with such an output fails the run with DataLoss
// and a report like any other failure, plus which output, how many NaN/Inf and the first bad index.
//
// Continue mode (FailureMode::kContinue): each failed launch gets its own report; the nodes that depend on it are
// skipped and listed in the report of the failure they depend on (`skipped`).
//
// Input snapshot (RunOptions::snapshot_dir): the failing node's inputs are read back after the streams have
// drained and written to the directory, one file per input through a SnapshotTensorWriter (the runtime does not
// know file formats: tools pass a .npy writer from formats/; the default writes raw bytes as <stem>.bin), plus
// manifest.json naming the graph, node, op, kernel, error, and per input its value, dtype, shape, producer and file.
//
// Thread-safety: value types and reentrant functions.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hxrt/base/dtype.h"
#include "hxrt/base/host_tensor.h"
#include "hxrt/base/shape.h"
#include "hxrt/base/status.h"

namespace hxrt::runtime {

enum class FailureLocation : uint8_t { kExact, kInferred, kAmbiguous, kStream };
std::string_view failure_location_name(FailureLocation location);

struct FailureInput {
  int index = 0;
  std::string value;  // "" for an omitted optional input
  DType dtype = DType::kF32;
  Shape shape;
  std::string producer;  // "node 'fc1' (MatMul)", "graph input", "weight", "state"
  std::string file;      // snapshot file name, when written
};

// One entry of a stream's diagnostics ring.
struct LaunchSummary {
  int32_t node_id = -1;
  std::string node_name;
  std::string op_type;
  std::string kernel;
  std::string tiling;  // "" when not computed
  std::vector<std::string> inputs;  // "f32[2, 8]"
  std::string to_string() const;
};

// What check-numerics found in one output.
struct NonFiniteCount {
  uint64_t nan = 0;
  uint64_t inf = 0;
  int64_t first_index = -1;  // flat row-major index of the first NaN or Inf; -1 when none
  bool clean() const { return nan == 0 && inf == 0; }
};

// Counts NaN and Inf in `bytes` read as `dtype` (f32, f16 or bf16; other dtypes are clean).
NonFiniteCount scan_non_finite(DType dtype, std::span<const std::byte> bytes);

struct NonFiniteOutput {
  int index = 0;  // among the node's outputs
  std::string value;
  DType dtype = DType::kF32;
  Shape shape;
  NonFiniteCount count;
  // "output 0 'y' f32[2, 3]: 1 NaN, 0 Inf, first at index 4"
  std::string to_string() const;
};

struct FailureReport {
  std::string graph;
  std::string stage;  // what the executor was doing: "allocating outputs", "computing the tiling", ...
  FailureLocation location = FailureLocation::kExact;
  int32_t node_id = -1;  // -1 when location is kStream
  std::string node_name;
  std::string op_type;
  std::string kernel;
  int kernel_version = 1;
  int32_t fusion_id = -1;
  std::vector<std::string> fused_nodes;
  std::vector<int32_t> fused_ids;  // stable ids of fused_nodes
  std::string stream;
  std::string attributes;  // the node's attributes
  std::string params;      // the kernel's parsed parameters
  std::string tiling;      // "" when not computed yet
  std::vector<FailureInput> inputs;
  std::vector<std::string> producers;   // the producer chain, one line per value, indented by depth
  std::vector<std::string> candidates;  // kAmbiguous: the other launches that may have failed
  std::vector<LaunchSummary> recent_launches;  // the failing stream's ring, oldest first
  std::optional<NonFiniteOutput> non_finite;   // check-numerics: the output that held NaN or Inf
  std::vector<std::string> skipped;            // continue mode: "'name' (Op)" of nodes skipped because of this one
  std::string snapshot_dir;    // set when the snapshot was written
  std::string snapshot_error;  // set when writing it failed
  std::string error;           // the original Status, for the manifest

  // "node 'act' (id 2, Relu) with kernel 'BrokenRelu' v1 on stream 'mlp.s0'" and the rest, one item per line.
  std::string to_string() const;
};

// Writes one snapshot tensor at `path_stem` plus the writer's extension; returns the file name (not the path).
using SnapshotTensorWriter = std::function<Result<std::string>(const std::string& path_stem, const HostTensor& tensor)>;
// The default writer: the raw row-major bytes as <stem>.bin (dtype and shape are in the manifest).
Result<std::string> write_raw_tensor(const std::string& path_stem, const HostTensor& tensor);

// Writes `inputs` (in report.inputs order; empty tensors for omitted inputs are skipped) and manifest.json into
// `dir` (created if missing), filling report.inputs[i].file and report.snapshot_dir.
Status write_failure_snapshot(const std::string& dir, const std::vector<HostTensor>& inputs,
                              const SnapshotTensorWriter& writer, FailureReport& report);

}  // namespace hxrt::runtime
