// ONNX converters of the indexing family (converter.h).

#include "formats/onnx/converter.h"

namespace hxrt::formats::onnx {

Status register_indexing_converters(ConverterRegistry& registry) {
  (void)registry;
  return ok_status();
}

}  // namespace hxrt::formats::onnx
