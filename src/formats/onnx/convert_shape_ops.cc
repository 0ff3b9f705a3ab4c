// ONNX converters of the shape_ops family (converter.h).

#include "formats/onnx/converter.h"

namespace hxrt::formats::onnx {

Status register_shape_ops_converters(ConverterRegistry& registry) {
  (void)registry;
  return ok_status();
}

}  // namespace hxrt::formats::onnx
