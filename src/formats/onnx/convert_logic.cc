// ONNX converters of the logic family (converter.h).

#include "formats/onnx/converter.h"

namespace hxrt::formats::onnx {

Status register_logic_converters(ConverterRegistry& registry) {
  (void)registry;
  return ok_status();
}

}  // namespace hxrt::formats::onnx
