// ONNX importer (formats/onnx.h): arbitrary bytes must give an import or a Status, never a crash. The bytes are one
// ModelProto, imported with the built-in converters and schemas and no constant folding (folding runs kernels, which
// have fuzz coverage of their own through the graph file target and the parity sweep). An import that succeeds is
// deterministic (importing the same bytes again gives the same graph), every ONNX output comes from exactly one
// place, and the graph validates.
#include <memory>
#include <span>

#include "fuzz/fuzz_target.h"
#include "hxrt/formats/onnx.h"
#include "hxrt/ops/op_schema.h"

namespace {

const hxrt::ops::OpSchemaRegistry& schemas() {
  static const std::unique_ptr<hxrt::ops::OpSchemaRegistry> registry = [] {
    auto made = std::make_unique<hxrt::ops::OpSchemaRegistry>();
    hxrt::Status status = hxrt::ops::register_builtin_schemas(*made);
    HXRT_FUZZ_ASSERT(status.ok(), "the built-in schemas: %s", status.to_string().c_str());
    return made;
  }();
  return *registry;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hxrt::formats;
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  // No external data: a fuzzed location must not open files beside the working directory.
  const OnnxImportOptions options{.schemas = &schemas(), .external_data_dir = "/nonexistent-hxrt-fuzz"};
  hxrt::Result<OnnxImport> imported = import_onnx(bytes, options, "fuzz.onnx");
  if (!imported.ok()) return 0;
  if (imported->bind_time) {
    HXRT_FUZZ_ASSERT(!imported->bind_time->reason.empty(), "a bind-time answer gives no reason");
    return 0;
  }
  hxrt::Status valid = imported->graph.validate();
  HXRT_FUZZ_ASSERT(valid.ok(), "an imported graph does not validate: %s", valid.to_string().c_str());
  for (const OnnxOutput& output : imported->outputs) {
    const int sources = static_cast<int>(!output.value.empty()) + static_cast<int>(output.constant.has_value()) +
                        static_cast<int>(!output.input.empty());
    HXRT_FUZZ_ASSERT(sources == 1, "ONNX output '%s' comes from %d places", output.name.c_str(), sources);
  }
  hxrt::Result<OnnxImport> again = import_onnx(bytes, options, "fuzz.onnx");
  HXRT_FUZZ_ASSERT(again.ok(), "a second import of the same bytes fails: %s", again.status().to_string().c_str());
  HXRT_FUZZ_ASSERT(again->graph.num_nodes() == imported->graph.num_nodes() &&
                       again->graph.num_values() == imported->graph.num_values() &&
                       again->outputs.size() == imported->outputs.size(),
                   "a second import of the same bytes gives another graph");
  return 0;
}
