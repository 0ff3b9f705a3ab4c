#include "hxrt/graph/attribute.h"

#include <fmt/ranges.h>

namespace hxrt::graph {
std::string_view attr_type_name(AttrType type) {
  switch (type) {
    case AttrType::kInt: return "int";
    case AttrType::kFloat: return "float";
    case AttrType::kString: return "string";
    case AttrType::kBool: return "bool";
    case AttrType::kInts: return "ints";
    case AttrType::kFloats: return "floats";
    case AttrType::kStrings: return "strings";
    case AttrType::kTensor: return "tensor";
  }
  return "unknown";
}

std::string Attribute::to_string() const {
  struct Printer {
    std::string operator()(int64_t v) const { return fmt::format("{}", v); }
    std::string operator()(double v) const { return fmt::format("{}", v); }
    std::string operator()(const std::string& v) const { return fmt::format("\"{}\"", v); }
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(const std::vector<int64_t>& v) const { return fmt::format("[{}]", fmt::join(v, ", ")); }
    std::string operator()(const std::vector<double>& v) const { return fmt::format("[{}]", fmt::join(v, ", ")); }
    std::string operator()(const std::vector<std::string>& v) const {
      std::string out = "[";
      for (size_t i = 0; i < v.size(); ++i) out += fmt::format("{}\"{}\"", i > 0 ? ", " : "", v[i]);
      return out + "]";
    }
    std::string operator()(const TensorValue& v) const {
      return fmt::format("tensor {}{}", dtype_name(v.dtype), v.shape.to_string());
    }
  };
  return std::visit(Printer{}, value_);
}

const Attribute* AttributeMap::find(std::string_view name) const {
  auto it = attrs_.find(name);
  return it == attrs_.end() ? nullptr : &it->second;
}

namespace {

Status not_present(std::string_view name) {
  return not_found("attribute '{}' not found", name);
}

// "an int", "a list of floats": the attribute's type as a phrase for error messages.
std::string_view type_phrase(AttrType type) {
  switch (type) {
    case AttrType::kInt: return "an int";
    case AttrType::kFloat: return "a float";
    case AttrType::kString: return "a string";
    case AttrType::kBool: return "a bool";
    case AttrType::kInts: return "a list of ints";
    case AttrType::kFloats: return "a list of floats";
    case AttrType::kStrings: return "a list of strings";
    case AttrType::kTensor: return "a tensor";
  }
  return "of an unknown type";
}

Status mistyped(std::string_view name, const Attribute& attr, AttrType expected) {
  return invalid_argument("attribute '{}' is {}, expected {}", name, type_phrase(attr.type()),
                          attr_type_name(expected));
}

// The attribute's value as T, with no conversion.
template <typename T>
Result<T> get_exact(const AttributeMap& map, std::string_view name, AttrType expected) {
  const Attribute* attr = map.find(name);
  if (attr == nullptr) return not_present(name);
  if (const T* v = std::get_if<T>(&attr->storage())) return *v;
  return mistyped(name, *attr, expected);
}

}  // namespace

Result<int64_t> AttributeMap::get_int(std::string_view name) const {
  return get_exact<int64_t>(*this, name, AttrType::kInt);
}

Result<double> AttributeMap::get_float(std::string_view name) const {
  const Attribute* attr = find(name);
  if (attr == nullptr) return not_present(name);
  if (const auto* v = std::get_if<double>(&attr->storage())) return *v;
  if (const auto* v = std::get_if<int64_t>(&attr->storage())) return static_cast<double>(*v);
  return mistyped(name, *attr, AttrType::kFloat);
}

Result<std::string> AttributeMap::get_string(std::string_view name) const {
  return get_exact<std::string>(*this, name, AttrType::kString);
}

Result<bool> AttributeMap::get_bool(std::string_view name) const {
  const Attribute* attr = find(name);
  if (attr == nullptr) return not_present(name);
  if (const auto* v = std::get_if<bool>(&attr->storage())) return *v;
  if (const auto* v = std::get_if<int64_t>(&attr->storage())) {
    if (*v == 0 || *v == 1) return *v == 1;
    return invalid_argument("attribute '{}' is the int {}, expected a bool (or an int 0 or 1)", name, *v);
  }
  return mistyped(name, *attr, AttrType::kBool);
}

Result<std::vector<int64_t>> AttributeMap::get_ints(std::string_view name) const {
  return get_exact<std::vector<int64_t>>(*this, name, AttrType::kInts);
}

Result<std::vector<double>> AttributeMap::get_floats(std::string_view name) const {
  return get_exact<std::vector<double>>(*this, name, AttrType::kFloats);
}

Result<std::vector<std::string>> AttributeMap::get_strings(std::string_view name) const {
  return get_exact<std::vector<std::string>>(*this, name, AttrType::kStrings);
}

Result<TensorValue> AttributeMap::get_tensor(std::string_view name) const {
  return get_exact<TensorValue>(*this, name, AttrType::kTensor);
}

Result<int64_t> AttributeMap::get_int(std::string_view name, int64_t fallback) const {
  return has(name) ? get_int(name) : Result<int64_t>(fallback);
}

Result<double> AttributeMap::get_float(std::string_view name, double fallback) const {
  return has(name) ? get_float(name) : Result<double>(fallback);
}

Result<std::string> AttributeMap::get_string(std::string_view name, std::string fallback) const {
  return has(name) ? get_string(name) : Result<std::string>(std::move(fallback));
}

Result<bool> AttributeMap::get_bool(std::string_view name, bool fallback) const {
  return has(name) ? get_bool(name) : Result<bool>(fallback);
}

Result<std::vector<int64_t>> AttributeMap::get_ints(std::string_view name, std::vector<int64_t> fallback) const {
  return has(name) ? get_ints(name) : Result<std::vector<int64_t>>(std::move(fallback));
}

std::string AttributeMap::to_string() const {
  std::string out = "{";
  bool first = true;
  for (const auto& [name, attr] : attrs_) {
    out += fmt::format("{}{}={}", first ? "" : ", ", name, attr.to_string());
    first = false;
  }
  return out + "}";
}

}  // namespace hxrt::graph
