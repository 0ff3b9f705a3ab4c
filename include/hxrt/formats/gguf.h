// GGUF files (ggml's format for LLM weights and metadata): a reader that leaves the weights in a read-only mapping,
// and a writer.
//
// Layout (all little-endian; specification: ggml's docs/gguf.md):
//
//   u32      magic "GGUF" (the bytes 'G' 'G' 'U' 'F')
//   u32      version: 2 or 3 (the layout is the same; 3 allowed big-endian files, which hxrt does not read)
//   u64      tensor_count
//   u64      kv_count
//   kv_count     x { string key; u32 value_type; value }
//   tensor_count x { string name; u32 n_dims; u64 ne[n_dims]; u32 ggml_type; u64 offset }
//   zero padding up to a multiple of `general.alignment` (a u32 metadata key; 32 when absent; a power of two)
//   data section: each tensor's bytes start `offset` bytes into it (a multiple of the alignment)
//
//   string = u64 length, then that many bytes of UTF-8 (no terminator)
//   value  = the scalar of value_type (bool is one byte, 0 or 1), a string, or an array: u32 element type, u64 count,
//            then the elements. An array of arrays holds arrays whose element types may differ.
//
// Dims are in ggml order: ne[0] is the contiguous (fastest-varying) dimension, so a matrix of N rows of K values is
// ne = [K, N] and hxrt's row-major shape is the reverse, [N, K] (GgufTensor::shape()). ne[0] is a whole number of
// the type's blocks.
//
// Reading. GGUF v2 and v3 are read; v1 (32-bit counts) is Unimplemented. Every field is checked before use with
// overflow-checked arithmetic, and every count is checked against the bytes that remain before anything is
// allocated, so a hostile file cannot make the reader allocate much more than a small multiple of its size, loop
// without end, or read outside the bytes. A file that is not GGUF (bad magic) or that this reader does not
// understand (unknown version, value type or ggml tensor type) is InvalidArgument; a big-endian or v1 file is
// Unimplemented; a truncated or inconsistent one (counts past the end, n_dims > 4, zero or overflowing dims, a row
// that is not a whole number of blocks, duplicate keys or tensor names, a non-power-of-two alignment, a tensor
// offset that is unaligned or whose bytes end past the file, arrays nested deeper than kGgufMaxArrayDepth, a bool
// that is not 0 or 1) is DataLoss. Each message names the field and its byte offset in the file. Tensors of ggml
// types hxrt cannot compute still open, list and expose their bytes; asking for one as a DType or a graph weight is
// Unimplemented, naming the tensor and its type. Tensors may be in any order and may share bytes; ggml's own
// reader additionally requires them to be packed in order, which the writer here does.
//
// Ownership: GgufFile::open maps the file read-only (MAP_PRIVATE); the GgufFile holds the mapping through a
// shared_ptr, and each WeightData from weight() holds it too, so weights are used in place (zero copy) and stay
// valid after the GgufFile is gone. The file must not be truncated while mapped (POSIX turns that into SIGBUS).
// from_memory() reads a caller's bytes, kept alive by the caller's `keepalive`; a tensor's address in memory is
// then aligned only as far as the start of `bytes` is.
//
// Thread-safety: a GgufFile is immutable after open, so any number of threads may read it concurrently. GgufValue
// and GgufArray are value types (thread-compatible). A GgufWriter is thread-compatible: one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "hxrt/base/dtype.h"
#include "hxrt/base/shape.h"
#include "hxrt/base/status.h"
#include "hxrt/graph/graph.h"

namespace hxrt::formats {

inline constexpr char kGgufMagic[4] = {'G', 'G', 'U', 'F'};
inline constexpr uint32_t kGgufVersion = 3;            // the version the writer writes
inline constexpr uint64_t kGgufDefaultAlignment = 32;  // when general.alignment is absent
inline constexpr std::string_view kGgufAlignmentKey = "general.alignment";
inline constexpr int kGgufMaxDims = 4;        // ggml's GGML_MAX_DIMS
inline constexpr int kGgufMaxArrayDepth = 8;  // arrays of arrays, nested at most this deep

// ---- ggml tensor types --------------------------------------------------------------------------------------

// The storage layout of one ggml tensor type: `block_elements` values in `block_bytes` bytes.
struct GgmlTypeInfo {
  uint32_t id;
  std::string_view name;  // ggml's spelling: "f32", "q4_1", "q6_K", "iq2_xxs"
  uint32_t block_elements;
  uint32_t block_bytes;
};

// The layout of ggml type `id`, or nullptr for ids the table does not know (retired or newer types).
const GgmlTypeInfo* find_ggml_type(uint32_t id);
// "q6_K", or "ggml type 77" for an unknown id.
std::string ggml_type_name(uint32_t id);
// Bytes of `elements` values of type `id`. InvalidArgument for an unknown id or a count that is not a whole number of
// blocks; OutOfRange when the size overflows 64 bits.
Result<uint64_t> ggml_storage_bytes(uint32_t id, uint64_t elements);

// ---- Metadata values ----------------------------------------------------------------------------------------

// The value type ids of the file format.
enum class GgufValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};
inline constexpr uint32_t kGgufValueTypeCount = 13;

// "u8", "i8", ..., "string", "array", "f64"; "value type N" for ids past the end.
std::string gguf_value_type_name(GgufValueType type);

namespace detail {
template <typename T, typename Variant>
inline constexpr bool kIsAlternative = false;
template <typename T, typename... Ts>
inline constexpr bool kIsAlternative<T, std::variant<Ts...>> = (std::is_same_v<T, Ts> || ...);
}  // namespace detail

// An array: elements of one type, stored as a typed vector (the alternative's index is the element type's id).
// An array of arrays (element type kArray) holds GgufArrays, each with its own element type.
class GgufArray {
 public:
  using Items = std::variant<std::vector<uint8_t>, std::vector<int8_t>, std::vector<uint16_t>, std::vector<int16_t>,
                             std::vector<uint32_t>, std::vector<int32_t>, std::vector<float>, std::vector<bool>,
                             std::vector<std::string>, std::vector<GgufArray>, std::vector<uint64_t>,
                             std::vector<int64_t>, std::vector<double>>;

  GgufArray() = default;  // an empty u8 array
  // GgufArray(std::vector<std::string>{"a", "b"}); T is one of the element types above.
  template <typename T>
  requires detail::kIsAlternative<std::vector<T>, Items>
  explicit GgufArray(std::vector<T> items) : items_(std::move(items)) {}

  GgufValueType element_type() const { return static_cast<GgufValueType>(items_.index()); }
  size_t size() const;
  const Items& items() const { return items_; }
  // The elements when they are of type T, else nullptr.
  template <typename T>
  const std::vector<T>* get_if() const {
    return std::get_if<std::vector<T>>(&items_);
  }
  // Arrays nested inside this one, counting this one: 1 for an array of scalars.
  int depth() const;

  bool operator==(const GgufArray& other) const;

 private:
  Items items_;
};

using GgufStorage = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool, std::string,
                                 GgufArray, uint64_t, int64_t, double>;

// One metadata value. The alternative's index is the value type's id.
class GgufValue {
 public:
  using Storage = GgufStorage;

  GgufValue() = default;  // u8 0
  // GgufValue(uint32_t{30}), GgufValue(true), GgufValue(std::string("llama")), GgufValue(GgufArray(...)): the C++
  // type picks the value type exactly, so a plain `int` literal does not compile (say which width).
  template <typename T>
  requires detail::kIsAlternative<T, Storage>
  explicit GgufValue(T value) : storage_(std::in_place_type<T>, std::move(value)) {}
  explicit GgufValue(const char* text) : storage_(std::in_place_type<std::string>, text) {}
  explicit GgufValue(std::string_view text) : storage_(std::in_place_type<std::string>, text) {}

  GgufValueType type() const { return static_cast<GgufValueType>(storage_.index()); }
  const Storage& storage() const { return storage_; }
  template <typename T>
  const T* get_if() const {
    return std::get_if<T>(&storage_);
  }
  // The integer value when its type's whole range fits the result (u8..u32 and i8..i64 for as_i64; u8..u64 for
  // as_u64), else nullopt. The test is on the type, not the value: an i32 is never read as unsigned.
  std::optional<int64_t> as_i64() const;
  std::optional<uint64_t> as_u64() const;
  // Short text for listings: 30, 1e-05, "llama", [49152 x string: "<unk>", "<s>", ...] (at most `max_items`).
  std::string to_string(size_t max_items = 4) const;

  bool operator==(const GgufValue& other) const { return storage_ == other.storage_; }

 private:
  Storage storage_;
};

struct GgufKeyValue {
  std::string key;
  GgufValue value;
};

// ---- Reading ------------------------------------------------------------------------------------------------

// One tensor of a GGUF file, as its tensor info says.
struct GgufTensor {
  std::string name;
  std::vector<uint64_t> dims;  // ne, ggml order (dims[0] contiguous); 0 to kGgufMaxDims entries, each >= 1
  uint32_t ggml_type = 0;
  uint64_t offset = 0;    // from the start of the data section; a multiple of the alignment
  uint64_t elements = 0;  // product of dims (1 for no dims); fits in int64
  uint64_t bytes = 0;     // ggml_storage_bytes(ggml_type, elements)

  // hxrt's row-major shape: dims reversed ([576, 49152] → [49152, 576]).
  Shape shape() const;
};

class GgufFile {
 public:
  // Maps `path` read-only and reads it. NotFound for a missing file; other errors as in the file comment. With
  // `prefetch`, every page of the file is mapped at once (formats/file_io.h map_file): for a model about to run.
  static Result<GgufFile> open(const std::string& path, bool prefetch = false);
  // Reads a GGUF file held in memory; tensor bytes point into `bytes`, which `keepalive` (may be null when the caller
  // guarantees the lifetime) keeps alive.
  static Result<GgufFile> from_memory(std::span<const std::byte> bytes, std::shared_ptr<const void> keepalive);

  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;
  GgufFile(GgufFile&&) noexcept = default;
  GgufFile& operator=(GgufFile&&) noexcept = default;
  ~GgufFile() = default;

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // file offset of the data section
  uint64_t file_size() const { return bytes_.size(); }

  // ---- Metadata, in file order. Typed getters: NotFound naming the key when absent; InvalidArgument naming the
  // key, the expected and the actual type when the value's type does not fit (lossless integer widening is
  // accepted: a u32 reads as u64 or i64, a u8 as u32; f32 reads as f64).
  const std::vector<GgufKeyValue>& metadata() const { return metadata_; }
  const GgufValue* find(std::string_view key) const;
  Result<std::string_view> get_string(std::string_view key) const;  // a view into this GgufFile
  Result<bool> get_bool(std::string_view key) const;
  Result<uint32_t> get_u32(std::string_view key) const;
  Result<uint64_t> get_u64(std::string_view key) const;
  Result<int32_t> get_i32(std::string_view key) const;
  Result<int64_t> get_i64(std::string_view key) const;
  Result<float> get_f32(std::string_view key) const;
  Result<double> get_f64(std::string_view key) const;
  // Arrays: strings (views into this GgufFile); integers of any type that widens losslessly to int64 (every integer
  // type but u64); f32. An array of another element type is InvalidArgument naming the key and both types.
  Result<std::vector<std::string_view>> get_string_array(std::string_view key) const;
  Result<std::vector<int64_t>> get_int_array(std::string_view key) const;
  Result<std::span<const float>> get_f32_array(std::string_view key) const;  // a view into this GgufFile

  // ---- Tensors, in file order.
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* find_tensor(std::string_view name) const;
  // NotFound naming the tensor when absent.
  Result<const GgufTensor*> tensor(std::string_view name) const;
  // The tensor's bytes inside the file, of any ggml type. `tensor` must be one of tensors() (checked).
  std::span<const std::byte> tensor_bytes(const GgufTensor& tensor) const;
  // The hxrt DType of the tensor's ggml type; Unimplemented naming the tensor and its type when hxrt has none.
  Result<DType> tensor_dtype(const GgufTensor& tensor) const;
  // The tensor's bytes as a graph weight that holds the file's bytes alive (zero copy); Unimplemented as
  // tensor_dtype for types hxrt cannot compute.
  Result<graph::WeightData> weight(const GgufTensor& tensor) const;

 private:
  GgufFile() = default;
  friend class GgufParser;

  std::span<const std::byte> bytes_;
  std::shared_ptr<const void> keepalive_;
  uint32_t version_ = 0;
  uint64_t alignment_ = kGgufDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<GgufKeyValue> metadata_;
  std::map<std::string, size_t, std::less<>> key_index_;  // key → index in metadata_
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;  // name → index in tensors_
};

// ---- Writing ------------------------------------------------------------------------------------------------

// Collects metadata and tensors, then writes GGUF v3: metadata and tensors in the order added, general.alignment as
// set, and each tensor's bytes at the next aligned offset, zero-padded to the alignment (ggml's packing, which
// ggml's reader requires).
class GgufWriter {
 public:
  GgufWriter() = default;
  GgufWriter(const GgufWriter&) = delete;
  GgufWriter& operator=(const GgufWriter&) = delete;
  GgufWriter(GgufWriter&&) noexcept = default;
  GgufWriter& operator=(GgufWriter&&) noexcept = default;
  ~GgufWriter() = default;

  // Adds a metadata entry. AlreadyExists for a key added before; InvalidArgument for an empty key, arrays nested
  // deeper than kGgufMaxArrayDepth, or a general.alignment that is not a u32 power of two.
  Status add(std::string key, GgufValue value);
  // Sets general.alignment (adding the key, or replacing its value); InvalidArgument unless a power of two.
  Status set_alignment(uint32_t alignment);
  uint64_t alignment() const { return alignment_; }

  // Adds a tensor: `dims` in ggml order (dims[0] contiguous, a whole number of blocks), `data` exactly
  // ggml_storage_bytes(ggml_type, product of dims) bytes, held (not copied) until the writer is destroyed.
  // AlreadyExists for a repeated name; InvalidArgument for an empty name, an unknown type, more than kGgufMaxDims
  // dims, a zero dim or a wrong byte count; OutOfRange for sizes that overflow.
  Status add_tensor(std::string name, uint32_t ggml_type, std::vector<uint64_t> dims, graph::WeightData data);
  // As above for a DType that has a ggml type id (InvalidArgument for one that has none, such as u8 or bool).
  Status add_tensor(std::string name, DType dtype, std::vector<uint64_t> dims, graph::WeightData data);

  // The file's bytes.
  Result<std::vector<std::byte>> serialize() const;
  // Writes the file to `path`, atomically: a temporary file beside it is renamed over it.
  Status write(const std::string& path) const;

 private:
  struct PendingTensor {
    std::string name;
    uint32_t ggml_type;
    std::vector<uint64_t> dims;
    graph::WeightData data;
  };
  // Feeds the file's bytes, in order, to `sink`.
  Status emit(const std::function<Status(std::span<const std::byte>)>& sink) const;

  uint64_t alignment_ = kGgufDefaultAlignment;
  std::vector<GgufKeyValue> metadata_;
  std::map<std::string, size_t, std::less<>> key_index_;
  std::vector<PendingTensor> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace hxrt::formats
