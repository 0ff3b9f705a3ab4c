// GGUF parsing. Every field is bounds-checked before it is read and every count against the bytes that remain
// before anything is allocated; sizes use overflow-checked arithmetic (error contract in gguf.h).

#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>

#include "hxrt/formats/gguf.h"

#include "formats/file_io.h"

namespace hxrt::formats {

static_assert(std::endian::native == std::endian::little, "the GGUF reader copies little-endian fields as they are");

namespace {

// The smallest encodings of a metadata entry (empty key, value type, one-byte value) and of a tensor info (empty
// name, no dims, type, offset). Counts are bounded by the bytes left divided by these.
constexpr uint64_t kMinKeyValueBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;
// ggml keeps dims and element counts in int64.
constexpr uint64_t kMaxElements = std::numeric_limits<int64_t>::max();
constexpr uint64_t kVersionOffset = 4;
constexpr uint64_t kTensorCountOffset = 8;
constexpr uint64_t kKvCountOffset = 16;

// The fewest bytes one array element of `type` takes: strings and arrays start with their length fields.
uint64_t min_element_bytes(GgufValueType type) {
  switch (type) {
    case GgufValueType::kU8:
    case GgufValueType::kI8:
    case GgufValueType::kBool: return 1;
    case GgufValueType::kU16:
    case GgufValueType::kI16: return 2;
    case GgufValueType::kU32:
    case GgufValueType::kI32:
    case GgufValueType::kF32: return 4;
    case GgufValueType::kU64:
    case GgufValueType::kI64:
    case GgufValueType::kF64:
    case GgufValueType::kString: return 8;
    case GgufValueType::kArray: return 4 + 8;
  }
  return 1;
}

bool is_power_of_two(uint64_t x) {
  return x != 0 && (x & (x - 1)) == 0;
}

}  // namespace

// Reads one file front to back; a friend of GgufFile.
class GgufParser {
 public:
  explicit GgufParser(std::span<const std::byte> bytes) : bytes_(bytes) {}

  Result<GgufFile> parse(std::shared_ptr<const void> keepalive) {
    GgufFile file;
    file.bytes_ = bytes_;
    file.keepalive_ = std::move(keepalive);
    HXRT_RETURN_IF_ERROR(read_header(file));
    HXRT_RETURN_IF_ERROR(read_metadata(file));
    HXRT_RETURN_IF_ERROR(read_alignment(file));
    HXRT_RETURN_IF_ERROR(read_tensor_infos(file));
    HXRT_RETURN_IF_ERROR(place_data(file));
    return file;
  }

 private:
  uint64_t remaining() const { return bytes_.size() - pos_; }

  Status need(uint64_t n, std::string_view what) const {
    if (n <= remaining()) return ok_status();
    return data_loss("GGUF {} at offset {} is truncated: needs {} bytes, {} left", what, pos_, n, remaining());
  }

  template <typename T>
  Result<T> read(std::string_view what) {
    HXRT_RETURN_IF_ERROR(need(sizeof(T), what));
    T value;
    std::memcpy(&value, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }

  Result<std::string> read_string(std::string_view what) {
    const uint64_t at = pos_;
    HXRT_ASSIGN_OR_RETURN(const uint64_t length, read<uint64_t>(what));
    if (length > remaining()) {
      return data_loss("GGUF {} at offset {}: string length {} exceeds the {} bytes left", what, at, length,
                       remaining());
    }
    std::string text(reinterpret_cast<const char*>(bytes_.data() + pos_), length);
    pos_ += length;
    return text;
  }

  // ---- Header ---------------------------------------------------------------------------------------------

  Status read_header(GgufFile& file) {
    const size_t magic_bytes = std::min(bytes_.size(), sizeof(kGgufMagic));
    if (magic_bytes > 0 && std::memcmp(bytes_.data(), kGgufMagic, magic_bytes) != 0) {
      return invalid_argument("not a GGUF file: magic at offset 0 is {:?}, expected \"GGUF\"",
                              std::string_view(reinterpret_cast<const char*>(bytes_.data()), magic_bytes));
    }
    HXRT_RETURN_IF_ERROR(need(sizeof(kGgufMagic), "magic"));
    pos_ = sizeof(kGgufMagic);
    HXRT_ASSIGN_OR_RETURN(const uint32_t version, read<uint32_t>("version"));
    if (version == 1) {
      return unimplemented(
          "GGUF version 1 (offset {}) is not supported: it uses 32-bit counts and lengths; "
          "convert the file to GGUF v3 with a current llama.cpp",
          kVersionOffset);
    }
    const uint32_t swapped = __builtin_bswap32(version);
    if (swapped == 2 || swapped == 3) {
      return unimplemented("big-endian GGUF v{} file (version at offset {} reads {:#x}) is not supported", swapped,
                           kVersionOffset, version);
    }
    if (version != 2 && version != 3) {
      return invalid_argument("unsupported GGUF version {} at offset {}: this reader reads versions 2 and 3", version,
                              kVersionOffset);
    }
    file.version_ = version;
    HXRT_ASSIGN_OR_RETURN(tensor_count_, read<uint64_t>("tensor_count"));
    HXRT_ASSIGN_OR_RETURN(kv_count_, read<uint64_t>("kv_count"));
    // Each entry takes at least its minimal encoding; checking both counts together keeps the sum from overflowing.
    if (kv_count_ > remaining() / kMinKeyValueBytes) {
      return data_loss("GGUF kv_count at offset {} is {}: that many metadata entries cannot fit in the {} bytes left",
                       kKvCountOffset, kv_count_, remaining());
    }
    if (tensor_count_ > (remaining() - kv_count_ * kMinKeyValueBytes) / kMinTensorInfoBytes) {
      return data_loss(
          "GGUF tensor_count at offset {} is {}: that many tensor infos (and {} metadata entries) cannot fit in the "
          "{} bytes left",
          kTensorCountOffset, tensor_count_, kv_count_, remaining());
    }
    return ok_status();
  }

  // ---- Metadata -------------------------------------------------------------------------------------------

  Status read_metadata(GgufFile& file) {
    file.metadata_.reserve(kv_count_);
    value_offsets_.reserve(kv_count_);
    for (uint64_t i = 0; i < kv_count_; ++i) {
      const uint64_t key_at = pos_;
      HXRT_ASSIGN_OR_RETURN(std::string key, read_string(fmt::format("key of metadata entry #{}", i)));
      const auto [it, inserted] = file.key_index_.emplace(key, file.metadata_.size());
      if (!inserted) {
        return data_loss("GGUF metadata key '{}' at offset {} repeats metadata entry #{}", key, key_at, it->second);
      }
      const std::string what = fmt::format("metadata '{}'", key);
      const uint64_t type_at = pos_;
      HXRT_ASSIGN_OR_RETURN(const uint32_t type, read<uint32_t>(what + " value type"));
      value_offsets_.push_back(pos_);
      HXRT_ASSIGN_OR_RETURN(GgufValue value, read_value(type, type_at, what));
      file.metadata_.push_back(GgufKeyValue{std::move(key), std::move(value)});
    }
    return ok_status();
  }

  Status unknown_value_type(std::string_view what, uint64_t at, uint32_t type) const {
    return invalid_argument("GGUF {} at offset {}: unknown value type {} (known: 0 to {})", what, at, type,
                            kGgufValueTypeCount - 1);
  }

  template <typename T>
  Result<GgufValue> read_scalar(std::string_view what) {
    HXRT_ASSIGN_OR_RETURN(const T value, read<T>(what));
    return GgufValue(value);
  }

  Result<bool> read_bool(std::string_view what) {
    const uint64_t at = pos_;
    HXRT_ASSIGN_OR_RETURN(const uint8_t byte, read<uint8_t>(what));
    if (byte > 1) return data_loss("GGUF {} at offset {}: bool byte is {}, expected 0 or 1", what, at, byte);
    return byte == 1;
  }

  // A value of type id `type` (read at `type_at`).
  Result<GgufValue> read_value(uint32_t type, uint64_t type_at, std::string_view what) {
    if (type >= kGgufValueTypeCount) return unknown_value_type(what, type_at, type);
    switch (static_cast<GgufValueType>(type)) {
      case GgufValueType::kU8: return read_scalar<uint8_t>(what);
      case GgufValueType::kI8: return read_scalar<int8_t>(what);
      case GgufValueType::kU16: return read_scalar<uint16_t>(what);
      case GgufValueType::kI16: return read_scalar<int16_t>(what);
      case GgufValueType::kU32: return read_scalar<uint32_t>(what);
      case GgufValueType::kI32: return read_scalar<int32_t>(what);
      case GgufValueType::kF32: return read_scalar<float>(what);
      case GgufValueType::kU64: return read_scalar<uint64_t>(what);
      case GgufValueType::kI64: return read_scalar<int64_t>(what);
      case GgufValueType::kF64: return read_scalar<double>(what);
      case GgufValueType::kBool: {
        HXRT_ASSIGN_OR_RETURN(const bool flag, read_bool(what));
        return GgufValue(flag);
      }
      case GgufValueType::kString: {
        HXRT_ASSIGN_OR_RETURN(std::string text, read_string(what));
        return GgufValue(std::move(text));
      }
      case GgufValueType::kArray: {
        HXRT_ASSIGN_OR_RETURN(GgufArray array, read_array(what, 1));
        return GgufValue(std::move(array));
      }
    }
    return unknown_value_type(what, type_at, type);
  }

  // `count` numbers of type T, already known to fit in the bytes left.
  template <typename T>
  GgufArray read_numbers(uint64_t count) {
    std::vector<T> items(count);
    if (count != 0) std::memcpy(items.data(), bytes_.data() + pos_, count * sizeof(T));
    pos_ += count * sizeof(T);
    return GgufArray(std::move(items));
  }

  // An array whose nesting level is `depth` (1 for an array that is a metadata value).
  Result<GgufArray> read_array(std::string_view what, int depth) {
    const uint64_t at = pos_;
    if (depth > kGgufMaxArrayDepth) {
      return data_loss("GGUF {} at offset {}: arrays nest deeper than {} levels", what, at, kGgufMaxArrayDepth);
    }
    HXRT_ASSIGN_OR_RETURN(const uint32_t type_id, read<uint32_t>(what));
    if (type_id >= kGgufValueTypeCount) return unknown_value_type(fmt::format("{} array element", what), at, type_id);
    const auto type = static_cast<GgufValueType>(type_id);
    const uint64_t count_at = pos_;
    HXRT_ASSIGN_OR_RETURN(const uint64_t count, read<uint64_t>(what));
    if (count > remaining() / min_element_bytes(type)) {
      return data_loss("GGUF {} at offset {}: array length {} of {} cannot fit in the {} bytes left", what, count_at,
                       count, gguf_value_type_name(type), remaining());
    }
    switch (type) {
      case GgufValueType::kU8: return read_numbers<uint8_t>(count);
      case GgufValueType::kI8: return read_numbers<int8_t>(count);
      case GgufValueType::kU16: return read_numbers<uint16_t>(count);
      case GgufValueType::kI16: return read_numbers<int16_t>(count);
      case GgufValueType::kU32: return read_numbers<uint32_t>(count);
      case GgufValueType::kI32: return read_numbers<int32_t>(count);
      case GgufValueType::kF32: return read_numbers<float>(count);
      case GgufValueType::kU64: return read_numbers<uint64_t>(count);
      case GgufValueType::kI64: return read_numbers<int64_t>(count);
      case GgufValueType::kF64: return read_numbers<double>(count);
      case GgufValueType::kBool: {
        std::vector<bool> items;
        items.reserve(count);
        for (uint64_t i = 0; i < count; ++i) {
          HXRT_ASSIGN_OR_RETURN(const bool flag, read_bool(what));
          items.push_back(flag);
        }
        return GgufArray(std::move(items));
      }
      case GgufValueType::kString: {
        std::vector<std::string> items;
        items.reserve(count);
        for (uint64_t i = 0; i < count; ++i) {
          HXRT_ASSIGN_OR_RETURN(std::string text, read_string(what));
          items.push_back(std::move(text));
        }
        return GgufArray(std::move(items));
      }
      case GgufValueType::kArray: {
        std::vector<GgufArray> items;
        items.reserve(count);
        for (uint64_t i = 0; i < count; ++i) {
          HXRT_ASSIGN_OR_RETURN(GgufArray inner, read_array(what, depth + 1));
          items.push_back(std::move(inner));
        }
        return GgufArray(std::move(items));
      }
    }
    return unknown_value_type(what, at, type_id);
  }

  Status read_alignment(GgufFile& file) {
    const auto it = file.key_index_.find(kGgufAlignmentKey);
    if (it == file.key_index_.end()) return ok_status();
    const GgufValue& value = file.metadata_[it->second].value;
    const uint64_t at = value_offsets_[it->second];
    const std::optional<uint64_t> alignment = value.as_u64();
    if (!alignment) {
      return data_loss("GGUF metadata '{}' at offset {} is {}, expected u32", kGgufAlignmentKey, at,
                       gguf_value_type_name(value.type()));
    }
    if (!is_power_of_two(*alignment)) {
      return data_loss("GGUF metadata '{}' at offset {} is {}, not a power of two", kGgufAlignmentKey, at, *alignment);
    }
    file.alignment_ = *alignment;
    return ok_status();
  }

  // ---- Tensor infos ---------------------------------------------------------------------------------------

  Status read_tensor_infos(GgufFile& file) {
    if (tensor_count_ > remaining() / kMinTensorInfoBytes) {
      return data_loss(
          "GGUF tensor_count at offset {} is {}: that many tensor infos cannot fit in the {} bytes after "
          "the metadata (offset {})",
          kTensorCountOffset, tensor_count_, remaining(), pos_);
    }
    file.tensors_.reserve(tensor_count_);
    offset_fields_.reserve(tensor_count_);
    for (uint64_t i = 0; i < tensor_count_; ++i) {
      const uint64_t info_at = pos_;
      HXRT_ASSIGN_OR_RETURN(GgufTensor tensor, read_tensor_info(file, i));
      const auto [it, inserted] = file.tensor_index_.emplace(tensor.name, file.tensors_.size());
      if (!inserted) {
        return data_loss("GGUF tensor name '{}' of tensor info #{} at offset {} repeats tensor info #{}", tensor.name,
                         i, info_at, it->second);
      }
      file.tensors_.push_back(std::move(tensor));
    }
    return ok_status();
  }

  Result<GgufTensor> read_tensor_info(const GgufFile& file, uint64_t index) {
    GgufTensor tensor;
    HXRT_ASSIGN_OR_RETURN(tensor.name, read_string(fmt::format("name of tensor info #{}", index)));
    const std::string what = fmt::format("tensor '{}'", tensor.name);
    const uint64_t n_dims_at = pos_;
    HXRT_ASSIGN_OR_RETURN(const uint32_t n_dims, read<uint32_t>(what + " n_dims"));
    if (n_dims > kGgufMaxDims) {
      return data_loss("GGUF {} n_dims at offset {} is {}; ggml tensors have at most {}", what, n_dims_at, n_dims,
                       kGgufMaxDims);
    }
    tensor.elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t dim_at = pos_;
      HXRT_ASSIGN_OR_RETURN(const uint64_t dim, read<uint64_t>(fmt::format("{} ne[{}]", what, d)));
      if (dim == 0) return data_loss("GGUF {} ne[{}] at offset {} is 0", what, d, dim_at);
      if (dim > kMaxElements) {
        return data_loss("GGUF {} ne[{}] at offset {} is {}: negative as ggml's int64", what, d, dim_at, dim);
      }
      if (__builtin_mul_overflow(tensor.elements, dim, &tensor.elements) || tensor.elements > kMaxElements) {
        return data_loss("GGUF {} ne[{}] at offset {} is {}: the element count overflows int64", what, d, dim_at, dim);
      }
      tensor.dims.push_back(dim);
    }
    const uint64_t type_at = pos_;
    HXRT_ASSIGN_OR_RETURN(tensor.ggml_type, read<uint32_t>(what + " type"));
    const GgmlTypeInfo* type = find_ggml_type(tensor.ggml_type);
    if (type == nullptr) {
      return invalid_argument("GGUF {} type at offset {}: unknown ggml type id {}", what, type_at, tensor.ggml_type);
    }
    const uint64_t row = tensor.dims.empty() ? 1 : tensor.dims[0];
    if (row % type->block_elements != 0) {
      return data_loss("GGUF {} at offset {}: ne[0] = {} is not a whole number of {}-value {} blocks", what, n_dims_at,
                       row, type->block_elements, type->name);
    }
    Result<uint64_t> bytes = ggml_storage_bytes(tensor.ggml_type, tensor.elements);
    if (!bytes.ok()) {
      return data_loss("GGUF {} at offset {}: {}", what, n_dims_at, bytes.status().message());
    }
    tensor.bytes = *bytes;
    const uint64_t offset_at = pos_;
    HXRT_ASSIGN_OR_RETURN(tensor.offset, read<uint64_t>(what + " offset"));
    if (tensor.offset % file.alignment_ != 0) {
      return data_loss("GGUF {} offset at offset {} is {}, not a multiple of the alignment {}", what, offset_at,
                       tensor.offset, file.alignment_);
    }
    offset_fields_.push_back(offset_at);
    return tensor;
  }

  // ---- Data section ---------------------------------------------------------------------------------------

  Status place_data(GgufFile& file) {
    const uint64_t alignment = file.alignment_;
    uint64_t padded = 0;
    if (__builtin_add_overflow(pos_, alignment - 1, &padded)) {
      return data_loss("GGUF data section: the tensor infos' end {} aligned to {} overflows", pos_, alignment);
    }
    file.data_offset_ = padded / alignment * alignment;
    if (file.tensors_.empty()) return ok_status();
    if (file.data_offset_ > bytes_.size()) {
      return data_loss(
          "GGUF data section at offset {} (tensor infos end at {}, aligned to {}) starts past the end of "
          "the file ({} bytes)",
          file.data_offset_, pos_, alignment, bytes_.size());
    }
    const uint64_t data_size = bytes_.size() - file.data_offset_;
    for (size_t i = 0; i < file.tensors_.size(); ++i) {
      const GgufTensor& t = file.tensors_[i];
      if (t.offset > data_size || t.bytes > data_size - t.offset) {
        return data_loss(
            "GGUF tensor '{}' offset at offset {}: its {} bytes at data offset {} run past the end of "
            "the data section ({} bytes from file offset {}; file size {})",
            t.name, offset_fields_[i], t.bytes, t.offset, data_size, file.data_offset_, bytes_.size());
      }
    }
    return ok_status();
  }

  std::span<const std::byte> bytes_;
  uint64_t pos_ = 0;
  uint64_t tensor_count_ = 0;
  uint64_t kv_count_ = 0;
  std::vector<uint64_t> value_offsets_;  // per metadata entry: file offset of its value
  std::vector<uint64_t> offset_fields_;  // per tensor: file offset of its offset field
};

Result<GgufFile> GgufFile::from_memory(std::span<const std::byte> bytes, std::shared_ptr<const void> keepalive) {
  return GgufParser(bytes).parse(std::move(keepalive));
}

Result<GgufFile> GgufFile::open(const std::string& path, bool prefetch) {
  HXRT_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> mapping, map_file(path, "GGUF file", prefetch));
  Result<GgufFile> file = from_memory(mapping->bytes(), mapping);
  if (!file.ok()) return std::move(file).take_status().with_context(fmt::format("reading GGUF file '{}'", path));
  return file;
}

}  // namespace hxrt::formats
