// GGUF reader: arbitrary bytes must give a GgufFile or a Status, never a crash or a read outside the input. A file
// that parses is walked the way the LLM loader walks it: every metadata value read with the typed getters, every
// tensor's dtype and weight view taken (and its bytes touched, so ASan sees an out-of-bounds view), and the first row
// of every tensor of a computable type dequantized as GatherRows would (every block type's bit patterns, through
// quant_types.h, must give finite-or-not floats but never a fault); then it is written back with GgufWriter and must
// parse again to the same tensors.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fuzz/fuzz_target.h"
#include "hxrt/base/quant_types.h"
#include "hxrt/formats/gguf.h"

namespace {

void touch(std::span<const std::byte> bytes) {
  volatile unsigned sum = 0;
  if (!bytes.empty()) sum = sum + static_cast<unsigned>(bytes.front()) + static_cast<unsigned>(bytes.back());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hxrt::formats;
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  hxrt::Result<GgufFile> file = GgufFile::from_memory(bytes, nullptr);
  if (!file.ok()) return 0;
  for (const auto& [key, value] : file->metadata()) {
    (void)value;
    file->get_string(key).status().ignore();
    file->get_u32(key).status().ignore();
    file->get_i64(key).status().ignore();
    file->get_f32(key).status().ignore();
    file->get_bool(key).status().ignore();
    file->get_string_array(key).status().ignore();
    file->get_int_array(key).status().ignore();
    if (hxrt::Result<std::span<const float>> floats = file->get_f32_array(key); floats.ok()) {
      touch(std::as_bytes(*floats));
    }
  }
  GgufWriter writer;
  bool rewritable = writer.set_alignment(static_cast<uint32_t>(file->alignment())).ok();
  for (const GgufKeyValue& entry : file->metadata()) {
    if (entry.key == "general.alignment") continue;
    rewritable = rewritable && writer.add(entry.key, entry.value).ok();
  }
  for (const GgufTensor& tensor : file->tensors()) {
    file->tensor_dtype(tensor).status().ignore();
    const std::span<const std::byte> tensor_data = file->tensor_bytes(tensor);
    touch(tensor_data);
    if (hxrt::Result<hxrt::graph::WeightData> weight = file->weight(tensor); weight.ok()) {
      touch(std::span<const std::byte>(weight->data, weight->size));
      const hxrt::DType dtype = *file->tensor_dtype(tensor);
      const auto row = static_cast<int64_t>(tensor.dims.empty() ? 1 : tensor.dims[0]);
      // (A file may set general.alignment to 1: rows are read in place only where their type's fields are aligned.)
      const bool aligned = reinterpret_cast<uintptr_t>(weight->data) % 4 == 0;
      if (aligned && hxrt::row_dequantizable(dtype) && row <= (int64_t{1} << 16)) {
        std::vector<float> values(static_cast<size_t>(row));
        HXRT_FUZZ_ASSERT(hxrt::dequantize_row(dtype, weight->data, row, values.data()).ok(),
                         "a %s row of %lld values does not dequantize", std::string(hxrt::dtype_name(dtype)).c_str(),
                         static_cast<long long>(row));
      }
    }
    rewritable = rewritable &&
                 writer.add_tensor(tensor.name, tensor.ggml_type, tensor.dims, {tensor_data.data(), tensor_data.size(), nullptr}).ok();
  }
  // What parsed must write back and parse again to the same tensors.
  if (!rewritable) return 0;
  hxrt::Result<std::vector<std::byte>> written = writer.serialize();
  HXRT_FUZZ_ASSERT(written.ok(), "a parsed GGUF does not serialize: %s", written.status().to_string().c_str());
  hxrt::Result<GgufFile> again = GgufFile::from_memory(*written, nullptr);
  HXRT_FUZZ_ASSERT(again.ok(), "a rewritten GGUF does not parse: %s", again.status().to_string().c_str());
  HXRT_FUZZ_ASSERT(again->tensors().size() == file->tensors().size(), "tensor count changed in a round trip");
  for (size_t i = 0; i < file->tensors().size(); ++i) {
    const std::span<const std::byte> before = file->tensor_bytes(file->tensors()[i]);
    const std::span<const std::byte> after = again->tensor_bytes(again->tensors()[i]);
    HXRT_FUZZ_ASSERT(again->tensors()[i].name == file->tensors()[i].name && before.size() == after.size() &&
                         std::equal(before.begin(), before.end(), after.begin()),
                     "tensor %zu changed in a round trip", i);
  }
  return 0;
}
