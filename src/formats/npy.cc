#include "hxrt/formats/npy.h"

#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "formats/file_io.h"

namespace hxrt::formats {
namespace {

static_assert(std::endian::native == std::endian::little, "the .npy reader maps '=' (native) to little-endian");

constexpr size_t kMagicSize = sizeof(kNpyMagic);
constexpr size_t kVersion1Prefix = kMagicSize + 2 + 2;  // magic, version, uint16 header length
constexpr size_t kVersion2Prefix = kMagicSize + 2 + 4;  // magic, version, uint32 header length

struct DescrEntry {
  DType dtype;
  char kind;     // NumPy's type character: 'f', 'i', 'u', 'b'
  int itemsize;  // bytes
};

// The plain dtypes with a standard NumPy descr; bf16 has its own (Note [bfloat16 in npy]).
constexpr std::array<DescrEntry, 7> kDescrs = {{
    {DType::kF32, 'f', 4},
    {DType::kF16, 'f', 2},
    {DType::kI64, 'i', 8},
    {DType::kI32, 'i', 4},
    {DType::kI8, 'i', 1},
    {DType::kU8, 'u', 1},
    {DType::kBool, 'b', 1},
}};
constexpr std::string_view kBF16Descr = "bfloat16";

std::string supported_descrs() {
  std::vector<std::string> names;
  for (const DescrEntry& e : kDescrs)
    names.push_back(fmt::format("{}{}{}", e.itemsize == 1 ? '|' : '<', e.kind, e.itemsize));
  names.emplace_back(kBF16Descr);
  return fmt::format("{}", fmt::join(names, " "));
}

// A printable rendering of header text for error messages (control and non-ASCII bytes escaped, long text cut).
std::string printable(std::string_view text, size_t limit = 80) {
  std::string out;
  for (size_t i = 0; i < text.size() && i < limit; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  if (text.size() > limit) out += "...";
  return out;
}

// ---- Header dict parsing ------------------------------------------------------------------------------------
//
// The header is the repr() of a Python dict. This is a parser for the subset NumPy writes — string keys; string,
// bool and int-tuple values — tolerant of whitespace, either quote character and trailing commas.

struct HeaderFields {
  std::optional<std::string> descr;
  std::optional<bool> fortran_order;
  std::optional<std::vector<int64_t>> shape;
};

class HeaderParser {
 public:
  HeaderParser(std::string_view text, uint64_t file_offset) : text_(text), file_offset_(file_offset) {}

  Result<HeaderFields> parse() {
    HeaderFields fields;
    skip_space();
    HXRT_RETURN_IF_ERROR(expect('{', "the header dict"));
    skip_space();
    while (!at('}')) {
      const size_t key_pos = pos_;
      HXRT_ASSIGN_OR_RETURN(std::string key, parse_string("a dict key"));
      skip_space();
      HXRT_RETURN_IF_ERROR(expect(':', fmt::format("':' after key '{}'", key)));
      skip_space();
      if (key == "descr") {
        if (fields.descr) return duplicate(key, key_pos);
        if (at('['))
          return invalid_argument("structured dtypes (a list 'descr' at offset {}) are not supported", offset());
        HXRT_ASSIGN_OR_RETURN(fields.descr, parse_string("the value of 'descr'"));
      } else if (key == "fortran_order") {
        if (fields.fortran_order) return duplicate(key, key_pos);
        HXRT_ASSIGN_OR_RETURN(fields.fortran_order, parse_bool("the value of 'fortran_order'"));
      } else if (key == "shape") {
        if (fields.shape) return duplicate(key, key_pos);
        HXRT_ASSIGN_OR_RETURN(fields.shape, parse_shape());
      } else {
        return data_loss(
            "unexpected key '{}' at offset {} (a .npy header has exactly 'descr', 'fortran_order' "
            "and 'shape')",
            printable(key), file_offset_ + key_pos);
      }
      skip_space();
      if (at(',')) {
        ++pos_;
        skip_space();
      } else if (!at('}')) {
        return malformed("',' or '}' after the value of '" + key + "'");
      }
    }
    ++pos_;  // '}'
    // NumPy pads with spaces and ends the header with '\n'.
    skip_space();
    if (pos_ != text_.size()) {
      return data_loss("unexpected text after the header dict at offset {}: '{}'", offset(),
                       printable(text_.substr(pos_)));
    }
    if (!fields.descr) return data_loss("the header has no 'descr' key");
    if (!fields.fortran_order) return data_loss("the header has no 'fortran_order' key");
    if (!fields.shape) return data_loss("the header has no 'shape' key");
    return fields;
  }

 private:
  bool at(char c) const { return pos_ < text_.size() && text_[pos_] == c; }
  uint64_t offset() const { return file_offset_ + pos_; }

  void skip_space() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\t' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  Status malformed(std::string_view expected) const {
    if (pos_ >= text_.size())
      return data_loss("malformed header: expected {} at offset {}, found the end of the header", expected, offset());
    return data_loss("malformed header: expected {} at offset {}, found '{}'", expected, offset(),
                     printable(text_.substr(pos_), 20));
  }

  Status duplicate(std::string_view key, size_t key_pos) const {
    return data_loss("duplicate key '{}' at offset {}", key, file_offset_ + key_pos);
  }

  Status expect(char c, std::string_view what) {
    if (!at(c)) return malformed(what);
    ++pos_;
    return ok_status();
  }

  Result<std::string> parse_string(std::string_view what) {
    if (!at('\'') && !at('"')) return malformed(what);
    const char quote = text_[pos_++];
    const size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      if (text_[pos_] == '\\') {
        return data_loss("escape sequences in header strings are not supported (offset {})", offset());
      }
      ++pos_;
    }
    if (pos_ >= text_.size()) return data_loss("unterminated string starting at offset {}", file_offset_ + start - 1);
    std::string value(text_.substr(start, pos_ - start));
    ++pos_;  // closing quote
    return value;
  }

  Result<bool> parse_bool(std::string_view what) {
    for (const auto& [word, value] :
         {std::pair{std::string_view("True"), true}, std::pair{std::string_view("False"), false}}) {
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return value;
      }
    }
    return malformed(fmt::format("True or False as {}", what));
  }

  Result<std::vector<int64_t>> parse_shape() {
    HXRT_RETURN_IF_ERROR(expect('(', "a tuple '(...)' as the value of 'shape'"));
    std::vector<int64_t> dims;
    skip_space();
    while (!at(')')) {
      if (dims.size() == static_cast<size_t>(Shape::kMaxRank)) {
        return invalid_argument("shape at offset {} has more than {} dims, hxrt's maximum rank", offset(),
                                Shape::kMaxRank);
      }
      HXRT_ASSIGN_OR_RETURN(int64_t dim, parse_dim());
      dims.push_back(dim);
      skip_space();
      if (at(',')) {
        ++pos_;
        skip_space();
      } else if (!at(')')) {
        return malformed("',' or ')' in 'shape'");
      }
    }
    ++pos_;  // ')'
    return dims;
  }

  Result<int64_t> parse_dim() {
    const uint64_t start = offset();
    if (at('-')) return data_loss("negative dim in 'shape' at offset {}", start);
    if (pos_ >= text_.size() || text_[pos_] < '0' || text_[pos_] > '9')
      return malformed("a dim (an integer) in 'shape'");
    int64_t value = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      const int digit = text_[pos_] - '0';
      if (value > (std::numeric_limits<int64_t>::max() - digit) / 10) {
        return data_loss("dim at offset {} in 'shape' does not fit in 64 bits", start);
      }
      value = value * 10 + digit;
      ++pos_;
    }
    if (at('L')) ++pos_;  // Python 2 long literal, as old NumPy wrote it
    return value;
  }

  std::string_view text_;
  uint64_t file_offset_;  // of text_[0], for messages
  size_t pos_ = 0;
};

std::string shape_tuple(const Shape& shape) {
  if (shape.rank() == 1) return fmt::format("({},)", shape.dim(0));
  return fmt::format("({})", fmt::join(shape.dims(), ", "));
}

uint32_t load_le(const std::byte* p, size_t n) {
  uint32_t value = 0;
  for (size_t i = 0; i < n; ++i) value |= static_cast<uint32_t>(p[i]) << (8 * i);
  return value;
}

}  // namespace

Result<std::string> npy_descr(DType dtype) {
  if (dtype == DType::kBF16) return std::string(kBF16Descr);
  for (const DescrEntry& e : kDescrs) {
    if (e.dtype == dtype) return fmt::format("{}{}{}", e.itemsize == 1 ? '|' : '<', e.kind, e.itemsize);
  }
  return invalid_argument("dtype {} has no .npy descr (supported dtypes: f32 f16 bf16 i64 i32 i8 u8 bool)", dtype);
}

Result<DType> dtype_from_npy_descr(std::string_view descr) {
  if (descr == kBF16Descr) return DType::kBF16;
  if (descr == "<V2" || descr == "|V2") {
    return invalid_argument(
        "descr '{}' is a raw 2-byte void type (what extension dtypes such as ml_dtypes' "
        "bfloat16 save as) and is ambiguous; hxrt reads bfloat16 as descr '{}' "
        "(see formats/npy.h, Note [bfloat16 in npy])",
        descr, kBF16Descr);
  }
  if (descr.size() >= 3) {
    const char order = descr[0];
    const char kind = descr[1];
    const std::string_view size = descr.substr(2);
    for (const DescrEntry& e : kDescrs) {
      if (e.kind != kind || size != std::to_string(e.itemsize)) continue;
      const bool little = order == '<' || order == '=' || (e.itemsize == 1 && (order == '|' || order == '>'));
      if (little) return e.dtype;
      if (order == '>') {
        return invalid_argument(
            "descr '{}' is big-endian; hxrt reads little-endian data only "
            "(convert with arr.astype(arr.dtype.newbyteorder('<')))",
            descr);
      }
    }
  }
  return invalid_argument("unsupported descr '{}' (supported: {})", printable(descr), supported_descrs());
}

Result<NpyHeader> parse_npy_header(std::span<const std::byte> bytes) {
  if (bytes.size() < kMagicSize || std::memcmp(bytes.data(), kNpyMagic, kMagicSize) != 0) {
    if (bytes.size() < kMagicSize) {
      return data_loss("not a .npy file: {} bytes, shorter than the 6-byte magic", bytes.size());
    }
    return data_loss("not a .npy file: bad magic (expected \"\\x93NUMPY\", found \"{}\")",
                     printable(std::string_view(reinterpret_cast<const char*>(bytes.data()), kMagicSize)));
  }
  if (bytes.size() < kMagicSize + 2) return data_loss("truncated .npy file: {} bytes, no version", bytes.size());
  NpyHeader header;
  header.major_version = static_cast<int>(bytes[6]);
  header.minor_version = static_cast<int>(bytes[7]);
  if (header.major_version < 1 || header.major_version > 3 || header.minor_version != 0) {
    return invalid_argument(".npy format version {}.{} is not supported (1.0, 2.0 and 3.0 are)", header.major_version,
                            header.minor_version);
  }
  const size_t length_bytes = header.major_version == 1 ? 2 : 4;
  const size_t prefix = header.major_version == 1 ? kVersion1Prefix : kVersion2Prefix;
  if (bytes.size() < prefix) {
    return data_loss("truncated .npy file: {} bytes, shorter than the {}-byte prefix of a version {}.0 file",
                     bytes.size(), prefix, header.major_version);
  }
  const uint64_t header_length = load_le(bytes.data() + kMagicSize + 2, length_bytes);
  if (header_length > bytes.size() - prefix) {
    return data_loss(
        "header length {} (at offset 8) runs past the end of the file: the header would end at byte "
        "{}, the file has {} bytes",
        header_length, prefix + header_length, bytes.size());
  }
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()) + prefix, header_length);
  Result<HeaderFields> fields = HeaderParser(text, prefix).parse();
  if (!fields.ok()) {
    return std::move(fields).take_status().with_context(fmt::format("parsing .npy header \"{}\"", printable(text)));
  }
  if (*fields->fortran_order) {
    return invalid_argument(
        "'fortran_order': True is not supported; hxrt reads C-order arrays only "
        "(save np.ascontiguousarray(arr))");
  }
  header.descr = *fields->descr;
  HXRT_ASSIGN_OR_RETURN(header.dtype, dtype_from_npy_descr(header.descr));
  Result<Shape> shape = Shape::make(*fields->shape);
  if (!shape.ok()) {
    return std::move(shape).take_status().with_context(
        fmt::format("in .npy 'shape' {}", fmt::join(*fields->shape, ", ")));
  }
  header.shape = *shape;
  Result<uint64_t> data_bytes = storage_bytes(header.dtype, static_cast<uint64_t>(header.shape.num_elements()));
  if (!data_bytes.ok()) {
    return std::move(data_bytes)
        .take_status()
        .with_context(fmt::format("sizing .npy data {}{}", header.dtype, header.shape));
  }
  header.data_bytes = *data_bytes;
  header.data_offset = prefix + header_length;
  return header;
}

Result<HostTensor> read_npy_from_memory(std::span<const std::byte> bytes) {
  HXRT_ASSIGN_OR_RETURN(const NpyHeader header, parse_npy_header(bytes));
  const uint64_t available = bytes.size() - header.data_offset;
  if (available < header.data_bytes) {
    return data_loss("truncated .npy data: {}{} needs {} bytes from offset {}, the file has {}", header.dtype,
                     header.shape, header.data_bytes, header.data_offset, available);
  }
  if (available > header.data_bytes) {
    return data_loss(".npy data size mismatch: {}{} needs {} bytes from offset {}, the file has {} ({} extra)",
                     header.dtype, header.shape, header.data_bytes, header.data_offset, available,
                     available - header.data_bytes);
  }
  const auto data = bytes.subspan(header.data_offset);
  return HostTensor::make(header.dtype, header.shape, std::vector<std::byte>(data.begin(), data.end()));
}

Result<HostTensor> read_npy(const std::string& path) {
  HXRT_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> mapping, map_file(path, ".npy file"));
  Result<HostTensor> tensor = read_npy_from_memory(mapping->bytes());
  if (!tensor.ok()) return std::move(tensor).take_status().with_context(fmt::format("reading .npy file '{}'", path));
  return tensor;
}

Result<std::vector<std::byte>> serialize_npy(const HostTensor& tensor) {
  HXRT_ASSIGN_OR_RETURN(const std::string descr, npy_descr(tensor.dtype));
  HXRT_ASSIGN_OR_RETURN(const uint64_t data_bytes,
                        storage_bytes(tensor.dtype, static_cast<uint64_t>(tensor.shape.num_elements())));
  if (data_bytes != tensor.bytes.size()) {
    return invalid_argument("tensor {}{} holds {} bytes, needs {}", tensor.dtype, tensor.shape, tensor.bytes.size(),
                            data_bytes);
  }
  std::string dict =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr, shape_tuple(tensor.shape));
  // Pad with spaces so that the data starts at a multiple of kNpyAlignment; the header ends with '\n'.
  auto padded_length = [&](size_t prefix) {
    const size_t unpadded = prefix + dict.size() + 1;
    return dict.size() + 1 + (kNpyAlignment - unpadded % kNpyAlignment) % kNpyAlignment;
  };
  int version = 1;
  size_t prefix = kVersion1Prefix;
  if (padded_length(prefix) > std::numeric_limits<uint16_t>::max()) {
    version = 2;
    prefix = kVersion2Prefix;
  }
  const size_t header_length = padded_length(prefix);
  if (header_length > std::numeric_limits<uint32_t>::max()) return internal_error(".npy header too long");
  dict.resize(header_length - 1, ' ');
  dict += '\n';

  std::array<std::byte, kVersion2Prefix> start{};
  std::memcpy(start.data(), kNpyMagic, kMagicSize);
  start[6] = static_cast<std::byte>(version);
  start[7] = std::byte{0};
  for (size_t i = 0; i < prefix - kMagicSize - 2; ++i) {
    start[kMagicSize + 2 + i] = static_cast<std::byte>((header_length >> (8 * i)) & 0xffu);
  }
  const auto* dict_bytes = reinterpret_cast<const std::byte*>(dict.data());
  std::vector<std::byte> out;
  out.reserve(prefix + header_length + data_bytes);
  out.insert(out.end(), start.begin(), start.begin() + static_cast<std::ptrdiff_t>(prefix));
  out.insert(out.end(), dict_bytes, dict_bytes + dict.size());
  out.insert(out.end(), tensor.bytes.begin(), tensor.bytes.end());
  return out;
}

Status write_npy(const std::string& path, const HostTensor& tensor) {
  HXRT_ASSIGN_OR_RETURN(const std::vector<std::byte> bytes, serialize_npy(tensor));
  return write_file_atomically(path, ".npy file", [&](const ByteSink& sink) { return sink(bytes); });
}

}  // namespace hxrt::formats
