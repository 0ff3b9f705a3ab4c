#include "formats/onnx/converter.h"

#include <cstring>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hxrt/base/dtype.h"

namespace hxrt::formats::onnx {

namespace {

Result<std::vector<int64_t>> tensor_ints(const graph::TensorValue& value) {
  const int64_t n = static_cast<int64_t>(value.shape.num_elements());
  std::vector<int64_t> out(static_cast<size_t>(n));
  auto read = [&](auto tag) {
    using T = decltype(tag);
    for (int64_t i = 0; i < n; ++i) {
      T v;
      std::memcpy(&v, value.data.data() + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
      out[static_cast<size_t>(i)] = static_cast<int64_t>(v);
    }
  };
  switch (value.dtype) {
    case DType::kI64: read(int64_t{}); break;
    case DType::kI32: read(int32_t{}); break;
    case DType::kI8: read(int8_t{}); break;
    case DType::kU8: read(uint8_t{}); break;
    case DType::kBool: read(uint8_t{}); break;
    default: return invalid_argument("expected an integer tensor, got {}", value.dtype);
  }
  return out;
}

Result<std::vector<double>> tensor_floats(const graph::TensorValue& value) {
  if (value.dtype == DType::kF32) {
    const int64_t n = static_cast<int64_t>(value.shape.num_elements());
    std::vector<double> out(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      float v;
      std::memcpy(&v, value.data.data() + i * 4, 4);
      out[static_cast<size_t>(i)] = v;
    }
    return out;
  }
  HXRT_ASSIGN_OR_RETURN(std::vector<int64_t> ints, tensor_ints(value));
  return std::vector<double>(ints.begin(), ints.end());
}

}  // namespace

Result<std::vector<int64_t>> ConversionContext::require_ints(size_t i, std::string_view what) {
  HXRT_ASSIGN_OR_RETURN(graph::TensorValue value, require_constant(i, what));
  Result<std::vector<int64_t>> ints = tensor_ints(value);
  if (!ints.ok()) return error(fmt::format("input '{}': {}", what, ints.status().message()));
  return ints;
}

Result<std::vector<double>> ConversionContext::require_floats(size_t i, std::string_view what) {
  HXRT_ASSIGN_OR_RETURN(graph::TensorValue value, require_constant(i, what));
  Result<std::vector<double>> floats = tensor_floats(value);
  if (!floats.ok()) return error(fmt::format("input '{}': {}", what, floats.status().message()));
  return floats;
}

std::string ConversionContext::add_ints(std::span<const int64_t> values, std::string_view hint) {
  graph::TensorValue value{.dtype = DType::kI64, .shape = Shape({static_cast<int64_t>(values.size())})};
  value.data.resize(values.size() * sizeof(int64_t));
  if (!values.empty()) std::memcpy(value.data.data(), values.data(), value.data.size());
  return add_constant(std::move(value), hint);
}

std::string ConversionContext::add_int_scalar(int64_t v, std::string_view hint) {
  graph::TensorValue value{.dtype = DType::kI64, .shape = Shape()};
  value.data.resize(sizeof(int64_t));
  std::memcpy(value.data.data(), &v, sizeof v);
  return add_constant(std::move(value), hint);
}

std::string ConversionContext::add_float_scalar(float v, std::string_view hint) {
  graph::TensorValue value{.dtype = DType::kF32, .shape = Shape()};
  value.data.resize(sizeof(float));
  std::memcpy(value.data.data(), &v, sizeof v);
  return add_constant(std::move(value), hint);
}

Status ConversionContext::error(std::string_view message) const {
  return invalid_argument("node '{}' ({}, opset {}): {}", node_.name, node_.op_type, node_.opset, message);
}

Status ConversionContext::unsupported(std::string_view message) const {
  return unimplemented("node '{}' ({}, opset {}): {}", node_.name, node_.op_type, node_.opset, message);
}

std::vector<std::string> all_inputs(const ConversionContext& ctx) {
  std::vector<std::string> inputs;
  inputs.reserve(ctx.num_inputs());
  for (size_t i = 0; i < ctx.num_inputs(); ++i) inputs.push_back(ctx.input(i));
  return inputs;
}

std::vector<std::string> all_outputs(const ConversionContext& ctx) {
  std::vector<std::string> outputs;
  outputs.reserve(ctx.num_outputs());
  for (size_t i = 0; i < ctx.num_outputs(); ++i) outputs.push_back(ctx.output(i));
  return outputs;
}

graph::AttributeMap attrs_without(const ConversionContext& ctx, std::initializer_list<std::string_view> dropped) {
  graph::AttributeMap attrs = ctx.attrs();
  for (std::string_view name : dropped) attrs.erase(name);
  return attrs;
}

ConverterDef make_converter(std::string op_type, int since, int end, ConvertFn convert, std::string doc) {
  ConverterDef def;
  def.op_type = std::move(op_type);
  def.since_version = since;
  def.end_version = end;
  def.convert = std::move(convert);
  def.doc = std::move(doc);
  return def;
}

std::string ConverterDef::label() const {
  const std::string op = domain.empty() ? op_type : domain + "." + op_type;
  if (end_version == ops::kMaxOpVersion) return fmt::format("{}[{},]", op, since_version);
  return fmt::format("{}[{},{}]", op, since_version, end_version);
}

Status ConverterRegistry::add(ConverterDef def) {
  if (!def.convert) return invalid_argument("converter {} has no function", def.label());
  if (def.since_version < 1 || def.end_version < def.since_version) {
    return invalid_argument("converter {} has an empty opset range", def.label());
  }
  auto& by_version = converters_[{def.domain, def.op_type}];
  for (const auto& [since, other] : by_version) {
    if (def.since_version <= other.end_version && other.since_version <= def.end_version) {
      return already_exists("converter {} overlaps {}", def.label(), other.label());
    }
  }
  const int since = def.since_version;
  by_version.emplace(since, std::move(def));
  return ok_status();
}

Result<const ConverterDef*> ConverterRegistry::find(std::string_view domain, std::string_view op_type,
                                                    int opset) const {
  const std::string op = domain.empty() ? std::string(op_type) : fmt::format("{}.{}", domain, op_type);
  auto it = converters_.find(std::pair<std::string, std::string>(domain, op_type));
  if (it == converters_.end()) {
    return not_found("no converter for ONNX op {} (domain '{}', the model's opset {}): hxrt supports this op at no "
                     "opset", op, domain.empty() ? "ai.onnx" : domain, opset);
  }
  std::vector<std::string> ranges;
  for (const auto& [since, def] : it->second) {
    if (opset >= def.since_version && opset <= def.end_version) return &def;
    ranges.push_back(def.end_version == ops::kMaxOpVersion ? fmt::format("{}+", def.since_version)
                                                           : fmt::format("{}-{}", def.since_version, def.end_version));
  }
  return not_found("no converter for ONNX op {} at the model's opset {} (domain '{}'); supported opsets: {}", op,
                   opset, domain.empty() ? "ai.onnx" : domain, fmt::join(ranges, ", "));
}

std::vector<const ConverterDef*> ConverterRegistry::all() const {
  std::vector<const ConverterDef*> out;
  for (const auto& [key, by_version] : converters_) {
    for (const auto& [since, def] : by_version) out.push_back(&def);
  }
  return out;
}

Status register_builtin_converters(ConverterRegistry& registry) {
  HXRT_RETURN_IF_ERROR(register_core_converters(registry));
  HXRT_RETURN_IF_ERROR(register_math_converters(registry));
  HXRT_RETURN_IF_ERROR(register_logic_converters(registry));
  HXRT_RETURN_IF_ERROR(register_reduce_converters(registry));
  HXRT_RETURN_IF_ERROR(register_shape_ops_converters(registry));
  HXRT_RETURN_IF_ERROR(register_indexing_converters(registry));
  HXRT_RETURN_IF_ERROR(register_pool_converters(registry));
  HXRT_RETURN_IF_ERROR(register_sequence_converters(registry));
  return ok_status();
}

}  // namespace hxrt::formats::onnx
