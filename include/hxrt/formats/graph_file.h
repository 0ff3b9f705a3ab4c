// hxrt's own graph file: a Graph with its weights, written once and mapped back without copying the weights.
//
// Layout (all integers little-endian):
//
//   offset  size  field
//        0     8  magic "HXRTGRPH"
//        8     4  format version (kGraphFileVersion)
//       12     4  flags (none are defined; a reader rejects unknown bits)
//       16     8  description offset      (>= kGraphFileHeaderSize)
//       24     8  description size
//       32     8  weight section offset   (a multiple of kGraphFileAlignment, at or after the description's end)
//       40     8  weight section size
//       48     8  FNV-1a 64 of the description bytes
//       56     8  FNV-1a 64 of header bytes [0, 56)
//
// The description is UTF-8 JSON:
//
//   {"name": "mlp",
//    "values": [{"name": "x", "dtype": "f32", "shape": ["n_tokens", "576"], "flags": 1},
//               {"name": "w", "dtype": "q4_1", "shape": ["576", "576"], "flags": 4,
//                "weight": {"offset": 0, "size": 207360, "fnv1a64": 1234}}, ...],
//    "nodes": [{"name": "fc1", "op_type": "MatMul", "domain": "", "version": 1,
//               "attrs": {"axis": {"type": "int", "value": 1}, ...},
//               "inputs": ["x", "w"], "outputs": ["h"],
//               "kernel_hint": "", "fusion_id": -1, "fused_from": []}, ...],
//    "inputs": ["x"], "outputs": ["y"]}
//
// Values are listed in id order and nodes in id order (removed nodes are skipped), so a graph reads back with the
// same value ids; value flags are 1 = graph input, 2 = graph output, 4 = initializer. Dims are Dim::to_string()
// text. Attribute values: int → number, float → number or "nan"/"inf"/"-inf", string, bool, ints/floats/strings →
// arrays, tensor → {"dtype", "shape": [ints], "data": base64}. A weight's offset is relative to the weight
// section and a multiple of kGraphFileAlignment; its size is storage_bytes(dtype, elements) for a static shape.
//
// Reading maps the file read-only; initializers' WeightData point into the mapping and hold it through
// `keepalive`, so the weights are never copied and the mapping lives as long as any graph (or clone) using it.
// Every field is checked before it is used: a truncated or corrupted file yields DataLoss, a file this reader
// does not understand (bad magic, newer version, unknown flags or dtype) InvalidArgument, each naming the field
// and, where it has one, the file offset. The weights themselves are covered by per-tensor checksums, verified at
// read by default so that a flipped bit in a weight is DataLoss at load; GraphFileReadOptions::verify_weights = false
// skips it for speed (verifying reads every page of the weights once).
// The file must not be truncated while mapped (a POSIX mapping turns that into SIGBUS).
//
// Thread-safety: the functions are reentrant; distinct calls may run concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "hxrt/base/status.h"
#include "hxrt/graph/graph.h"

namespace hxrt::formats {

inline constexpr char kGraphFileMagic[8] = {'H', 'X', 'R', 'T', 'G', 'R', 'P', 'H'};
inline constexpr uint32_t kGraphFileVersion = 1;
inline constexpr uint64_t kGraphFileHeaderSize = 64;
inline constexpr uint64_t kGraphFileAlignment = 64;  // of the weight section and of every tensor in it

struct GraphFileReadOptions {
  // Checks every initializer's bytes against its stored checksum (reads all weights; DataLoss on a mismatch).
  bool verify_weights = true;
};

// Writes `graph` (which must pass validate() and hold no graph::kLatestVersion node: InvalidArgument) to `path`, atomically: a temporary file beside it is renamed over it.
Status write_graph_file(const graph::Graph& graph, const std::string& path);
// The bytes write_graph_file would write.
Result<std::vector<std::byte>> serialize_graph(const graph::Graph& graph);

// Maps `path` and reads the graph; weights stay in the mapping. The graph has passed validate().
Result<graph::Graph> read_graph_file(const std::string& path, const GraphFileReadOptions& options = {});
// Reads a graph file held in memory. `bytes` must start at a kGraphFileAlignment-aligned address; weights point
// into `bytes`, which `keepalive` (may be null when the caller guarantees the lifetime) keeps alive.
Result<graph::Graph> read_graph_file_from_memory(std::span<const std::byte> bytes,
                                                 std::shared_ptr<const void> keepalive,
                                                 const GraphFileReadOptions& options = {});

// FNV-1a 64 of `bytes`: the checksum the header and weight records use.
uint64_t graph_file_checksum(std::span<const std::byte> bytes);

}  // namespace hxrt::formats
