// GGUF writing: GGUF v3, metadata and tensors in the order added, tensors packed at aligned offsets.

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>

#include "hxrt/formats/gguf.h"

#include "formats/file_io.h"

namespace hxrt::formats {

static_assert(std::endian::native == std::endian::little, "the GGUF writer emits fields in host byte order");

namespace {

using Sink = std::function<Status(std::span<const std::byte>)>;

bool is_power_of_two(uint64_t x) {
  return x != 0 && (x & (x - 1)) == 0;
}

// Checked round-up of `x` to a multiple of the power of two `alignment`.
Result<uint64_t> align_up(uint64_t x, uint64_t alignment) {
  uint64_t padded = 0;
  if (__builtin_add_overflow(x, alignment - 1, &padded)) return out_of_range("GGUF size {} overflows", x);
  return padded / alignment * alignment;
}

// Encodes values into `out`, little-endian (the host order).
class Encoder {
 public:
  explicit Encoder(std::vector<std::byte>& out) : out_(out) {}

  template <typename T>
  void put(T value) {
    const auto* p = reinterpret_cast<const std::byte*>(&value);
    out_.insert(out_.end(), p, p + sizeof(T));
  }
  void put_string(std::string_view text) {
    put<uint64_t>(text.size());
    const auto* p = reinterpret_cast<const std::byte*>(text.data());
    out_.insert(out_.end(), p, p + text.size());
  }
  void put_value(const GgufValue& value) {
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::string>) {
            put_string(v);
          } else if constexpr (std::is_same_v<T, GgufArray>) {
            put_array(v);
          } else if constexpr (std::is_same_v<T, bool>) {
            put<uint8_t>(v ? 1 : 0);
          } else {
            put<T>(v);
          }
        },
        value.storage());
  }
  void put_array(const GgufArray& array) {
    put<uint32_t>(static_cast<uint32_t>(array.element_type()));
    put<uint64_t>(array.size());
    std::visit(
        [&](const auto& items) {
          using T = typename std::decay_t<decltype(items)>::value_type;
          if constexpr (std::is_same_v<T, std::string>) {
            for (const std::string& text : items) put_string(text);
          } else if constexpr (std::is_same_v<T, GgufArray>) {
            for (const GgufArray& inner : items) put_array(inner);
          } else if constexpr (std::is_same_v<T, bool>) {
            for (const bool flag : items) put<uint8_t>(flag ? 1 : 0);
          } else {
            const auto* p = reinterpret_cast<const std::byte*>(items.data());
            out_.insert(out_.end(), p, p + items.size() * sizeof(T));
          }
        },
        array.items());
  }

 private:
  std::vector<std::byte>& out_;
};

// The alignment a general.alignment value sets: a u32 power of two.
Result<uint32_t> alignment_of(const GgufValue& value) {
  const auto* alignment = value.get_if<uint32_t>();
  if (alignment == nullptr) {
    return invalid_argument("GGUF metadata '{}' must be a u32, not {}", kGgufAlignmentKey,
                            gguf_value_type_name(value.type()));
  }
  if (!is_power_of_two(*alignment)) {
    return invalid_argument("GGUF metadata '{}' is {}, not a power of two", kGgufAlignmentKey, *alignment);
  }
  return *alignment;
}

}  // namespace

Status GgufWriter::add(std::string key, GgufValue value) {
  if (key.empty()) return invalid_argument("GGUF metadata key is empty");
  if (const auto* array = value.get_if<GgufArray>(); array != nullptr && array->depth() > kGgufMaxArrayDepth) {
    return invalid_argument("GGUF metadata '{}': arrays nest {} deep, more than {}", key, array->depth(),
                            kGgufMaxArrayDepth);
  }
  uint64_t alignment = alignment_;
  if (key == kGgufAlignmentKey) {
    HXRT_ASSIGN_OR_RETURN(alignment, alignment_of(value));
  }
  if (key_index_.contains(key)) return already_exists("GGUF metadata key '{}' was added before", key);
  alignment_ = alignment;
  key_index_.emplace(key, metadata_.size());
  metadata_.push_back(GgufKeyValue{std::move(key), std::move(value)});
  return ok_status();
}

Status GgufWriter::set_alignment(uint32_t alignment) {
  GgufValue value(alignment);
  HXRT_RETURN_IF_ERROR(alignment_of(value).status());
  if (const auto it = key_index_.find(kGgufAlignmentKey); it != key_index_.end()) {
    metadata_[it->second].value = std::move(value);
    alignment_ = alignment;
    return ok_status();
  }
  return add(std::string(kGgufAlignmentKey), std::move(value));
}

Status GgufWriter::add_tensor(std::string name, uint32_t ggml_type, std::vector<uint64_t> dims,
                              graph::WeightData data) {
  if (name.empty()) return invalid_argument("GGUF tensor name is empty");
  const GgmlTypeInfo* type = find_ggml_type(ggml_type);
  if (type == nullptr) return invalid_argument("GGUF tensor '{}': unknown ggml type id {}", name, ggml_type);
  if (dims.size() > static_cast<size_t>(kGgufMaxDims)) {
    return invalid_argument("GGUF tensor '{}' has {} dims; ggml tensors have at most {}", name, dims.size(),
                            kGgufMaxDims);
  }
  uint64_t elements = 1;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 0) return invalid_argument("GGUF tensor '{}': ne[{}] is 0", name, d);
    if (__builtin_mul_overflow(elements, dims[d], &elements) ||
        elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return out_of_range("GGUF tensor '{}': the element count of its dims overflows int64", name);
    }
  }
  const uint64_t row = dims.empty() ? 1 : dims[0];
  if (row % type->block_elements != 0) {
    return invalid_argument("GGUF tensor '{}': ne[0] = {} is not a whole number of {}-value {} blocks", name, row,
                            type->block_elements, type->name);
  }
  HXRT_ASSIGN_OR_RETURN(const uint64_t bytes, ggml_storage_bytes(ggml_type, elements));
  if (data.size != bytes) {
    return invalid_argument("GGUF tensor '{}': {} values of {} take {} bytes, the data has {}", name, elements,
                            type->name, bytes, data.size);
  }
  if (bytes != 0 && data.data == nullptr) return invalid_argument("GGUF tensor '{}': data is null", name);
  if (tensor_index_.contains(name)) return already_exists("GGUF tensor '{}' was added before", name);
  tensor_index_.emplace(name, tensors_.size());
  tensors_.push_back(PendingTensor{std::move(name), ggml_type, std::move(dims), std::move(data)});
  return ok_status();
}

Status GgufWriter::add_tensor(std::string name, DType dtype, std::vector<uint64_t> dims, graph::WeightData data) {
  const std::optional<uint32_t> ggml_type = dtype_info(dtype).ggml_type;
  if (!ggml_type) return invalid_argument("GGUF tensor '{}': dtype {} has no ggml type", name, dtype);
  return add_tensor(std::move(name), *ggml_type, std::move(dims), std::move(data));
}

Status GgufWriter::emit(const Sink& sink) const {
  // Everything before the data section is built in memory; tensor bytes go to the sink from where they are.
  std::vector<std::byte> head;
  Encoder encoder(head);
  head.insert(head.end(), reinterpret_cast<const std::byte*>(kGgufMagic),
              reinterpret_cast<const std::byte*>(kGgufMagic) + sizeof(kGgufMagic));
  encoder.put<uint32_t>(kGgufVersion);
  encoder.put<uint64_t>(tensors_.size());
  encoder.put<uint64_t>(metadata_.size());
  for (const GgufKeyValue& kv : metadata_) {
    encoder.put_string(kv.key);
    encoder.put<uint32_t>(static_cast<uint32_t>(kv.value.type()));
    encoder.put_value(kv.value);
  }
  std::vector<uint64_t> offsets;
  offsets.reserve(tensors_.size());
  uint64_t cursor = 0;  // end of the data section so far, padded
  for (const PendingTensor& t : tensors_) {
    encoder.put_string(t.name);
    encoder.put<uint32_t>(static_cast<uint32_t>(t.dims.size()));
    for (const uint64_t dim : t.dims) encoder.put<uint64_t>(dim);
    encoder.put<uint32_t>(t.ggml_type);
    encoder.put<uint64_t>(cursor);
    offsets.push_back(cursor);
    uint64_t end = 0;
    if (__builtin_add_overflow(cursor, t.data.size, &end)) return out_of_range("GGUF data section overflows");
    HXRT_ASSIGN_OR_RETURN(cursor, align_up(end, alignment_));
  }
  HXRT_ASSIGN_OR_RETURN(const uint64_t data_offset, align_up(head.size(), alignment_));
  HXRT_RETURN_IF_ERROR(sink(head));

  // Padding is shorter than the alignment, which may be large; it goes out in small pieces.
  const std::vector<std::byte> zeros(std::min<uint64_t>(alignment_, 4096), std::byte{0});
  auto pad = [&](uint64_t bytes) -> Status {
    while (bytes > 0) {
      const uint64_t n = std::min<uint64_t>(bytes, zeros.size());
      HXRT_RETURN_IF_ERROR(sink(std::span<const std::byte>(zeros.data(), n)));
      bytes -= n;
    }
    return ok_status();
  };
  HXRT_RETURN_IF_ERROR(pad(data_offset - head.size()));
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const graph::WeightData& data = tensors_[i].data;
    if (data.size != 0) HXRT_RETURN_IF_ERROR(sink(std::span<const std::byte>(data.data, data.size)));
    const uint64_t next = i + 1 < tensors_.size() ? offsets[i + 1] : cursor;
    HXRT_RETURN_IF_ERROR(pad(next - (offsets[i] + data.size)));
  }
  return ok_status();
}

Result<std::vector<std::byte>> GgufWriter::serialize() const {
  std::vector<std::byte> out;
  HXRT_RETURN_IF_ERROR(emit([&](std::span<const std::byte> bytes) {
    out.insert(out.end(), bytes.begin(), bytes.end());
    return ok_status();
  }));
  return out;
}

Status GgufWriter::write(const std::string& path) const {
  return write_file_atomically(path, "GGUF file", [&](const ByteSink& sink) { return emit(sink); });
}

}  // namespace hxrt::formats
