// ONNX converters of the reduce family (converter.h).

#include "formats/onnx/converter.h"

namespace hxrt::formats::onnx {

Status register_reduce_converters(ConverterRegistry& registry) {
  (void)registry;
  return ok_status();
}

}  // namespace hxrt::formats::onnx
