// hxrt graph file reader: arbitrary bytes must give a validated Graph or a Status, never a crash. A graph that
// reads (with weight checksums verified) serializes, and the serialized bytes read back to a graph of the same
// nodes and values.
#include <cstring>
#include <span>
#include <vector>

#include "fuzz/fuzz_target.h"
#include "hxrt/formats/graph_file.h"

namespace {

// The reader wants the file at a 64-byte aligned address (as a mapping is); fuzz inputs are not.
struct AlignedBytes {
  explicit AlignedBytes(std::span<const std::byte> bytes)
      : storage((bytes.size() + kAlign - 1) / kAlign + 1), size(bytes.size()) {
    std::memcpy(storage.data(), bytes.data(), bytes.size());
  }
  std::span<const std::byte> span() const { return {reinterpret_cast<const std::byte*>(storage.data()), size}; }

  static constexpr size_t kAlign = 64;
  struct alignas(kAlign) Block {
    std::byte bytes[kAlign];
  };
  std::vector<Block> storage;
  size_t size;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hxrt::formats;
  const AlignedBytes input(std::span<const std::byte>(reinterpret_cast<const std::byte*>(data), size));
  hxrt::Result<hxrt::graph::Graph> graph =
      read_graph_file_from_memory(input.span(), nullptr, GraphFileReadOptions{.verify_weights = true});
  if (!graph.ok()) return 0;
  hxrt::Result<std::vector<std::byte>> written = serialize_graph(*graph);
  HXRT_FUZZ_ASSERT(written.ok(), "a graph read from a file does not serialize: %s",
                   written.status().to_string().c_str());
  const AlignedBytes rewritten(*written);
  hxrt::Result<hxrt::graph::Graph> again =
      read_graph_file_from_memory(rewritten.span(), nullptr, GraphFileReadOptions{.verify_weights = true});
  HXRT_FUZZ_ASSERT(again.ok(), "a serialized graph does not read back: %s", again.status().to_string().c_str());
  HXRT_FUZZ_ASSERT(again->num_nodes() == graph->num_nodes() && again->num_values() == graph->num_values(),
                   "node or value count changed in a round trip");
  return 0;
}
