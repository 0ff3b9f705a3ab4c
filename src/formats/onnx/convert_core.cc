// ONNX converters of the ops hxrt had before the ONNX importer (converter.h).

#include "formats/onnx/converter.h"

namespace hxrt::formats::onnx {

Status register_core_converters(ConverterRegistry& registry) {
  (void)registry;
  return ok_status();
}

}  // namespace hxrt::formats::onnx
