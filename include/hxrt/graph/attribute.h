// Typed node attributes: the static description of a node (the MetaDef: strides, padding, epsilon, axes ...).
//
// Thread-safety: value types (thread-compatible).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "hxrt/base/dtype.h"
#include "hxrt/base/shape.h"
#include "hxrt/base/status.h"

namespace hxrt::graph {

// A small constant tensor held inside an attribute (Constant's value, a lookup table). Large weights are graph
// initializers, not attributes.
struct TensorValue {
  DType dtype = DType::kF32;
  Shape shape;
  std::vector<std::byte> data;  // row-major, storage_bytes(dtype, shape.num_elements()) bytes
  bool operator==(const TensorValue& other) const = default;
};

enum class AttrType : uint8_t { kInt, kFloat, kString, kBool, kInts, kFloats, kStrings, kTensor };
std::string_view attr_type_name(AttrType type);

class Attribute {
 public:
  using Storage = std::variant<int64_t, double, std::string, bool, std::vector<int64_t>, std::vector<double>,
                               std::vector<std::string>, TensorValue>;

  Attribute(int64_t v) : value_(v) {}  // NOLINT(google-explicit-constructor)
  Attribute(int v) : value_(int64_t{v}) {}  // NOLINT(google-explicit-constructor)
  Attribute(double v) : value_(v) {}  // NOLINT(google-explicit-constructor)
  Attribute(float v) : value_(double{v}) {}  // NOLINT(google-explicit-constructor)
  Attribute(bool v) : value_(v) {}  // NOLINT(google-explicit-constructor)
  Attribute(std::string v) : value_(std::move(v)) {}  // NOLINT(google-explicit-constructor)
  Attribute(const char* v) : value_(std::string(v)) {}  // NOLINT(google-explicit-constructor)
  Attribute(std::vector<int64_t> v) : value_(std::move(v)) {}  // NOLINT(google-explicit-constructor)
  Attribute(std::vector<double> v) : value_(std::move(v)) {}  // NOLINT(google-explicit-constructor)
  Attribute(std::vector<std::string> v) : value_(std::move(v)) {}  // NOLINT(google-explicit-constructor)
  Attribute(TensorValue v) : value_(std::move(v)) {}  // NOLINT(google-explicit-constructor)

  AttrType type() const { return static_cast<AttrType>(value_.index()); }
  const Storage& storage() const { return value_; }
  // "3", "1e-05", "\"tanh\"", "[1, 1, 2, 2]", "tensor f32[2, 3]"
  std::string to_string() const;
  bool operator==(const Attribute& other) const = default;

 private:
  Storage value_;
};

// Attributes of one node, by name, in name order (deterministic printing and serialization).
class AttributeMap {
 public:
  void set(std::string name, Attribute value) { attrs_.insert_or_assign(std::move(name), std::move(value)); }
  bool has(std::string_view name) const { return attrs_.find(name) != attrs_.end(); }
  const Attribute* find(std::string_view name) const;
  bool erase(std::string_view name) { return attrs_.erase(std::string(name)) > 0; }

  // Typed getters: NotFound when absent, InvalidArgument naming the attribute and both types when mistyped.
  Result<int64_t> get_int(std::string_view name) const;
  Result<double> get_float(std::string_view name) const;  // an int attribute converts
  Result<std::string> get_string(std::string_view name) const;
  Result<bool> get_bool(std::string_view name) const;     // an int 0/1 attribute converts
  Result<std::vector<int64_t>> get_ints(std::string_view name) const;
  Result<std::vector<double>> get_floats(std::string_view name) const;
  Result<std::vector<std::string>> get_strings(std::string_view name) const;
  Result<TensorValue> get_tensor(std::string_view name) const;
  // With a default when absent (still InvalidArgument when present but mistyped).
  Result<int64_t> get_int(std::string_view name, int64_t fallback) const;
  Result<double> get_float(std::string_view name, double fallback) const;
  Result<std::string> get_string(std::string_view name, std::string fallback) const;
  Result<bool> get_bool(std::string_view name, bool fallback) const;
  Result<std::vector<int64_t>> get_ints(std::string_view name, std::vector<int64_t> fallback) const;

  const std::map<std::string, Attribute, std::less<>>& items() const { return attrs_; }
  size_t size() const { return attrs_.size(); }
  std::string to_string() const;  // "{axis=1, epsilon=1e-05}"
  bool operator==(const AttributeMap& other) const = default;

 private:
  std::map<std::string, Attribute, std::less<>> attrs_;
};

}  // namespace hxrt::graph
