// GGUF: the ggml type table, metadata values, and GgufFile's accessors. Parsing is in gguf_reader.cc, writing in
// gguf_writer.cc.
#include "hxrt/formats/gguf.h"

#include <algorithm>
#include <array>
#include <limits>

#include "hxrt/base/check.h"

namespace hxrt::formats {
namespace {

// Block layouts of ggml's tensor types (ggml.h `enum ggml_type`, ggml-common.h block structs). Ids 4, 5, 31-33 and
// 36-38 are retired and never appear in GGUF files.
constexpr std::array<GgmlTypeInfo, 35> kGgmlTypes = {{
    {0, "f32", 1, 4},
    {1, "f16", 1, 2},
    {2, "q4_0", 32, 2 + 16},
    {3, "q4_1", 32, 2 + 2 + 16},
    {6, "q5_0", 32, 2 + 4 + 16},
    {7, "q5_1", 32, 2 + 2 + 4 + 16},
    {8, "q8_0", 32, 2 + 32},
    {9, "q8_1", 32, 2 + 2 + 32},
    {10, "q2_K", 256, 16 + 64 + 2 + 2},
    {11, "q3_K", 256, 32 + 64 + 12 + 2},
    {12, "q4_K", 256, 2 + 2 + 12 + 128},
    {13, "q5_K", 256, 2 + 2 + 12 + 32 + 128},
    {14, "q6_K", 256, 128 + 64 + 16 + 2},
    {15, "q8_K", 256, 4 + 256 + 32},
    {16, "iq2_xxs", 256, 2 + 64},
    {17, "iq2_xs", 256, 2 + 64 + 8},
    {18, "iq3_xxs", 256, 2 + 96},
    {19, "iq1_s", 256, 2 + 32 + 16},
    {20, "iq4_nl", 32, 2 + 16},
    {21, "iq3_s", 256, 2 + 64 + 8 + 32 + 4},
    {22, "iq2_s", 256, 2 + 64 + 8 + 8},
    {23, "iq4_xs", 256, 2 + 2 + 4 + 128},
    {24, "i8", 1, 1},
    {25, "i16", 1, 2},
    {26, "i32", 1, 4},
    {27, "i64", 1, 8},
    {28, "f64", 1, 8},
    {29, "iq1_m", 256, 32 + 16 + 8},
    {30, "bf16", 1, 2},
    {34, "tq1_0", 256, 48 + 4 + 2},
    {35, "tq2_0", 256, 64 + 2},
    {39, "mxfp4", 32, 1 + 16},
    {40, "nvfp4", 64, 4 + 32},
    {41, "q1_0", 128, 2 + 16},
    {42, "q2_0", 64, 2 + 16},
}};

constexpr std::array<std::string_view, kGgufValueTypeCount> kValueTypeNames = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};

// Whether every value of integer type `from` is representable in integer type `to`; false for non-integers.
bool widens_losslessly(GgufValueType from, GgufValueType to) {
  struct IntKind {
    bool is_int;
    bool is_signed;
    int bits;
  };
  auto kind = [](GgufValueType t) -> IntKind {
    switch (t) {
      case GgufValueType::kU8: return {true, false, 8};
      case GgufValueType::kI8: return {true, true, 8};
      case GgufValueType::kU16: return {true, false, 16};
      case GgufValueType::kI16: return {true, true, 16};
      case GgufValueType::kU32: return {true, false, 32};
      case GgufValueType::kI32: return {true, true, 32};
      case GgufValueType::kU64: return {true, false, 64};
      case GgufValueType::kI64: return {true, true, 64};
      default: return {false, false, 0};
    }
  };
  const IntKind f = kind(from);
  const IntKind t = kind(to);
  if (!f.is_int || !t.is_int) return false;
  if (t.is_signed) return f.is_signed ? f.bits <= t.bits : f.bits < t.bits;
  return !f.is_signed && f.bits <= t.bits;
}

// The integer held by `value` (whose type the caller has checked is an integer type), as a wide integer.
template <typename Wide>
Wide integer_of(const GgufValue::Storage& storage) {
  return std::visit(
      [](const auto& v) -> Wide {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
          return static_cast<Wide>(v);
        } else {
          HXRT_CHECK(false, "not an integer");
          return 0;
        }
      },
      storage);
}

// "u32", "string", "array of i32", "array of array".
std::string describe(const GgufValue& value) {
  if (const auto* array = value.get_if<GgufArray>()) {
    return fmt::format("array of {}", gguf_value_type_name(array->element_type()));
  }
  return gguf_value_type_name(value.type());
}

template <typename T>
std::string scalar_text(const T& v) {
  if constexpr (std::is_same_v<T, std::string>) {
    return fmt::format("{:?}", v);
  } else if constexpr (std::is_same_v<T, bool>) {
    return v ? "true" : "false";
  } else if constexpr (std::is_same_v<T, uint8_t> || std::is_same_v<T, int8_t>) {
    return fmt::format("{}", static_cast<int>(v));
  } else {
    return fmt::format("{}", v);
  }
}

std::string array_text(const GgufArray& array, size_t max_items) {
  std::string out = fmt::format("[{} x {}", array.size(), gguf_value_type_name(array.element_type()));
  std::visit(
      [&](const auto& items) {
        for (size_t i = 0; i < items.size() && i < max_items; ++i) {
          out += i == 0 ? ": " : ", ";
          using T = typename std::decay_t<decltype(items)>::value_type;
          if constexpr (std::is_same_v<T, GgufArray>) {
            out += array_text(items[i], max_items);
          } else {
            out += scalar_text(static_cast<T>(items[i]));
          }
        }
        if (items.size() > max_items) out += ", ...";
      },
      array.items());
  return out + "]";
}

}  // namespace

// ---- ggml types ---------------------------------------------------------------------------------------------

const GgmlTypeInfo* find_ggml_type(uint32_t id) {
  for (const GgmlTypeInfo& info : kGgmlTypes) {
    if (info.id == id) return &info;
  }
  return nullptr;
}

std::string ggml_type_name(uint32_t id) {
  const GgmlTypeInfo* info = find_ggml_type(id);
  return info != nullptr ? std::string(info->name) : fmt::format("ggml type {}", id);
}

Result<uint64_t> ggml_storage_bytes(uint32_t id, uint64_t elements) {
  const GgmlTypeInfo* info = find_ggml_type(id);
  if (info == nullptr) return invalid_argument("unknown ggml type id {}", id);
  if (elements % info->block_elements != 0) {
    return invalid_argument("{} values of {} are not a whole number of {}-value blocks", elements, info->name,
                            info->block_elements);
  }
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(elements / info->block_elements, uint64_t{info->block_bytes}, &bytes)) {
    return out_of_range("{} values of {} overflow a 64-bit size", elements, info->name);
  }
  return bytes;
}

// ---- Values -------------------------------------------------------------------------------------------------

std::string gguf_value_type_name(GgufValueType type) {
  const auto id = static_cast<uint32_t>(type);
  return id < kGgufValueTypeCount ? std::string(kValueTypeNames[id]) : fmt::format("value type {}", id);
}

size_t GgufArray::size() const {
  return std::visit([](const auto& items) { return items.size(); }, items_);
}

int GgufArray::depth() const {
  const auto* nested = get_if<GgufArray>();
  if (nested == nullptr) return 1;
  int deepest = 0;
  for (const GgufArray& inner : *nested) deepest = std::max(deepest, inner.depth());
  return deepest + 1;
}

bool GgufArray::operator==(const GgufArray& other) const {
  return items_ == other.items_;
}

std::optional<int64_t> GgufValue::as_i64() const {
  if (!widens_losslessly(type(), GgufValueType::kI64)) return std::nullopt;
  return integer_of<int64_t>(storage_);
}

std::optional<uint64_t> GgufValue::as_u64() const {
  if (!widens_losslessly(type(), GgufValueType::kU64)) return std::nullopt;
  return integer_of<uint64_t>(storage_);
}

std::string GgufValue::to_string(size_t max_items) const {
  return std::visit(
      [&](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, GgufArray>) {
          return array_text(v, max_items);
        } else {
          return scalar_text(v);
        }
      },
      storage_);
}

// ---- Tensors ------------------------------------------------------------------------------------------------

Shape GgufTensor::shape() const {
  std::array<int64_t, kGgufMaxDims> row_major{};
  HXRT_CHECK(dims.size() <= row_major.size(), "tensor '{}' has {} dims", name, dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    HXRT_CHECK(dims[i] <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), "tensor '{}' dim {}", name, i);
    row_major[dims.size() - 1 - i] = static_cast<int64_t>(dims[i]);
  }
  Result<Shape> shape = Shape::make(std::span<const int64_t>(row_major.data(), dims.size()));
  HXRT_CHECK(shape.ok(), "tensor '{}': {}", name, shape.status().to_string());
  return *shape;
}

// ---- GgufFile accessors -------------------------------------------------------------------------------------

namespace {

Status wrong_type(std::string_view key, const GgufValue& value, std::string_view expected) {
  return invalid_argument("GGUF metadata '{}' is {}, expected {}", key, describe(value), expected);
}

Status missing_key(std::string_view key) {
  return not_found("GGUF metadata has no key '{}'", key);
}

}  // namespace

const GgufValue* GgufFile::find(std::string_view key) const {
  const auto it = key_index_.find(key);
  return it == key_index_.end() ? nullptr : &metadata_[it->second].value;
}

Result<std::string_view> GgufFile::get_string(std::string_view key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) return missing_key(key);
  const auto* text = value->get_if<std::string>();
  if (text == nullptr) return wrong_type(key, *value, "string");
  return std::string_view(*text);
}

Result<bool> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) return missing_key(key);
  const auto* flag = value->get_if<bool>();
  if (flag == nullptr) return wrong_type(key, *value, "bool");
  return *flag;
}

Result<uint32_t> GgufFile::get_u32(std::string_view key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) return missing_key(key);
  if (!widens_losslessly(value->type(), GgufValueType::kU32)) return wrong_type(key, *value, "u32, u16 or u8");
  return static_cast<uint32_t>(*value->as_u64());
}

Result<uint64_t> GgufFile::get_u64(std::string_view key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) return missing_key(key);
  if (!widens_losslessly(value->type(), GgufValueType::kU64)) return wrong_type(key, *value, "an unsigned integer");
  return *value->as_u64();
}

Result<int32_t> GgufFile::get_i32(std::string_view key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) return missing_key(key);
  if (!widens_losslessly(value->type(), GgufValueType::kI32)) {
    return wrong_type(key, *value, "i32 or a narrower integer");
  }
  return static_cast<int32_t>(*value->as_i64());
}

Result<int64_t> GgufFile::get_i64(std::string_view key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) return missing_key(key);
  if (!widens_losslessly(value->type(), GgufValueType::kI64)) {
    return wrong_type(key, *value, "an integer other than u64");
  }
  return *value->as_i64();
}

Result<float> GgufFile::get_f32(std::string_view key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) return missing_key(key);
  const auto* number = value->get_if<float>();
  if (number == nullptr) return wrong_type(key, *value, "f32");
  return *number;
}

Result<double> GgufFile::get_f64(std::string_view key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) return missing_key(key);
  if (const auto* narrow = value->get_if<float>()) return static_cast<double>(*narrow);
  const auto* number = value->get_if<double>();
  if (number == nullptr) return wrong_type(key, *value, "f64 or f32");
  return *number;
}

Result<std::vector<std::string_view>> GgufFile::get_string_array(std::string_view key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) return missing_key(key);
  const auto* array = value->get_if<GgufArray>();
  const auto* items = array != nullptr ? array->get_if<std::string>() : nullptr;
  if (items == nullptr) return wrong_type(key, *value, "array of string");
  return std::vector<std::string_view>(items->begin(), items->end());
}

Result<std::vector<int64_t>> GgufFile::get_int_array(std::string_view key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) return missing_key(key);
  const auto* array = value->get_if<GgufArray>();
  if (array == nullptr || !widens_losslessly(array->element_type(), GgufValueType::kI64)) {
    return wrong_type(key, *value, "array of an integer type other than u64");
  }
  std::vector<int64_t> out;
  out.reserve(array->size());
  std::visit(
      [&](const auto& items) {
        using T = typename std::decay_t<decltype(items)>::value_type;
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
          for (const T v : items) out.push_back(static_cast<int64_t>(v));
        }
      },
      array->items());
  return out;
}

Result<std::span<const float>> GgufFile::get_f32_array(std::string_view key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) return missing_key(key);
  const auto* array = value->get_if<GgufArray>();
  const auto* items = array != nullptr ? array->get_if<float>() : nullptr;
  if (items == nullptr) return wrong_type(key, *value, "array of f32");
  return std::span<const float>(*items);
}

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Result<const GgufTensor*> GgufFile::tensor(std::string_view name) const {
  const GgufTensor* found = find_tensor(name);
  if (found == nullptr) return not_found("GGUF file has no tensor '{}'", name);
  return found;
}

std::span<const std::byte> GgufFile::tensor_bytes(const GgufTensor& tensor) const {
  HXRT_CHECK(!tensors_.empty() && &tensor >= tensors_.data() && &tensor < tensors_.data() + tensors_.size(),
             "tensor '{}' does not belong to this GgufFile", tensor.name);
  // The parser checked data_offset_ + offset + bytes <= bytes_.size() without overflow.
  return bytes_.subspan(data_offset_ + tensor.offset, tensor.bytes);
}

Result<DType> GgufFile::tensor_dtype(const GgufTensor& tensor) const {
  Result<DType> dtype = dtype_from_ggml_type(tensor.ggml_type);
  if (!dtype.ok()) {
    return unimplemented("GGUF tensor '{}' has ggml type {} (id {}), which hxrt cannot compute", tensor.name,
                         ggml_type_name(tensor.ggml_type), tensor.ggml_type);
  }
  return dtype;
}

Result<graph::WeightData> GgufFile::weight(const GgufTensor& tensor) const {
  HXRT_RETURN_IF_ERROR(tensor_dtype(tensor).status());
  const std::span<const std::byte> bytes = tensor_bytes(tensor);
  graph::WeightData weight;
  weight.data = bytes.data();
  weight.size = bytes.size();
  weight.keepalive = keepalive_;
  return weight;
}

}  // namespace hxrt::formats
