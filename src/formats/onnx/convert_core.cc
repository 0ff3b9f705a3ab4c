// ONNX converters the importer itself relies on: Constant (converter.h).

#include <cstring>
#include <utility>
#include <vector>

#include "formats/onnx/converter.h"

namespace hxrt::formats::onnx {

namespace {

// Constant (1, 9, 11: sparse_value, 12: value_float(s)/value_int(s)/value_string(s), 13: bfloat16): the value
// becomes a known value of the import (Note [Values known at import]), an initializer only if a node reads it.
Status convert_constant(ConversionContext& ctx) {
  const graph::AttributeMap& attrs = ctx.attrs();
  graph::TensorValue value;
  if (const graph::Attribute* a = attrs.find("value")) {
    HXRT_ASSIGN_OR_RETURN(value, attrs.get_tensor("value"));
    (void)a;
  } else if (attrs.has("value_float")) {
    HXRT_ASSIGN_OR_RETURN(double v, attrs.get_float("value_float"));
    const auto f = static_cast<float>(v);
    value = {.dtype = DType::kF32, .shape = Shape()};
    value.data.resize(sizeof f);
    std::memcpy(value.data.data(), &f, sizeof f);
  } else if (attrs.has("value_floats")) {
    HXRT_ASSIGN_OR_RETURN(std::vector<double> vs, attrs.get_floats("value_floats"));
    value = {.dtype = DType::kF32, .shape = Shape({static_cast<int64_t>(vs.size())})};
    for (double v : vs) {
      const auto f = static_cast<float>(v);
      const auto* p = reinterpret_cast<const std::byte*>(&f);
      value.data.insert(value.data.end(), p, p + sizeof f);
    }
  } else if (attrs.has("value_int")) {
    HXRT_ASSIGN_OR_RETURN(int64_t v, attrs.get_int("value_int"));
    value = {.dtype = DType::kI64, .shape = Shape()};
    value.data.resize(sizeof v);
    std::memcpy(value.data.data(), &v, sizeof v);
  } else if (attrs.has("value_ints")) {
    HXRT_ASSIGN_OR_RETURN(std::vector<int64_t> vs, attrs.get_ints("value_ints"));
    value = {.dtype = DType::kI64, .shape = Shape({static_cast<int64_t>(vs.size())})};
    value.data.resize(vs.size() * sizeof(int64_t));
    if (!vs.empty()) std::memcpy(value.data.data(), vs.data(), value.data.size());
  } else if (attrs.has("value_string") || attrs.has("value_strings")) {
    return ctx.unsupported("string tensors are not supported");
  } else if (attrs.has("sparse_value")) {
    return ctx.unsupported("sparse tensors are not supported");
  } else {
    return ctx.error("has none of the attributes value, value_float(s), value_int(s)");
  }
  return ctx.alias_output(0, ctx.add_constant(std::move(value), "value"));
}

}  // namespace

Status register_core_converters(ConverterRegistry& registry) {
  return registry.add({.op_type = "Constant", .since_version = 1, .convert = convert_constant,
                       .doc = "a value known at import (an initializer if a node reads it)"});
}

}  // namespace hxrt::formats::onnx
