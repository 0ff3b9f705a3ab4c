// .npy reader: arbitrary bytes must give a tensor or a Status, never a crash; a tensor that was read serializes and
// reads back to the same bytes.
#include <span>

#include "fuzz/fuzz_target.h"
#include "hxrt/formats/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  hxrt::Result<hxrt::HostTensor> tensor = hxrt::formats::read_npy_from_memory(bytes);
  if (!tensor.ok()) return 0;
  hxrt::Result<std::vector<std::byte>> written = hxrt::formats::serialize_npy(*tensor);
  HXRT_FUZZ_ASSERT(written.ok(), "a tensor read from .npy does not serialize: %s",
                   written.status().to_string().c_str());
  hxrt::Result<hxrt::HostTensor> again = hxrt::formats::read_npy_from_memory(*written);
  HXRT_FUZZ_ASSERT(again.ok(), "serialized .npy does not read back: %s", again.status().to_string().c_str());
  HXRT_FUZZ_ASSERT(*again == *tensor, "dtype, shape or bytes changed in a round trip");
  return 0;
}
