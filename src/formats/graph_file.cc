#include "hxrt/formats/graph_file.h"


#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string_view>

#include <nlohmann/json.hpp>

#include "formats/file_io.h"
#include "hxrt/base/check.h"

namespace hxrt::formats {
namespace {

using graph::Attribute;
using graph::AttributeMap;
using graph::AttrType;
using graph::Dim;
using graph::Graph;
using graph::Node;
using graph::NodeId;
using graph::SymShape;
using graph::TensorDesc;
using graph::TensorValue;
using graph::Value;
using graph::ValueId;
using graph::WeightData;
using nlohmann::json;

constexpr uint32_t kFlagInput = 1;
constexpr uint32_t kFlagOutput = 2;
constexpr uint32_t kFlagInitializer = 4;

// Header field offsets (see the layout in graph_file.h).
constexpr size_t kOffVersion = 8;
constexpr size_t kOffFlags = 12;
constexpr size_t kOffDescOffset = 16;
constexpr size_t kOffDescSize = 24;
constexpr size_t kOffWeightsOffset = 32;
constexpr size_t kOffWeightsSize = 40;
constexpr size_t kOffDescChecksum = 48;
constexpr size_t kOffHeaderChecksum = 56;

// Bounds on counts in a description, far above any real model; they keep a hostile file from making the reader
// allocate or loop without end before a later check would reject it.
constexpr size_t kMaxValues = size_t{1} << 24;
constexpr size_t kMaxNodes = size_t{1} << 24;
constexpr size_t kMaxNodeArity = size_t{1} << 16;

uint64_t align_up(uint64_t x) {
  return (x + kGraphFileAlignment - 1) / kGraphFileAlignment * kGraphFileAlignment;
}

void put_u32(std::byte* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
}
void put_u64(std::byte* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
}
uint32_t get_u32(const std::byte* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint32_t>(p[i]);
  return v;
}
uint64_t get_u64(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint64_t>(p[i]);
  return v;
}

std::span<const std::byte> as_bytes(std::string_view s) {
  return std::as_bytes(std::span<const char>(s));
}

// ---- base64 (RFC 4648, with padding) --------------------------------------------------------------------------

constexpr std::string_view kBase64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string base64_encode(std::span<const std::byte> bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t chunk = 0;
    for (size_t k = 0; k < 3; ++k) chunk = (chunk << 8) | (k < n ? static_cast<uint32_t>(bytes[i + k]) : 0u);
    for (size_t k = 0; k < 4; ++k) {
      out.push_back(k <= n ? kBase64Alphabet[(chunk >> (18 - 6 * k)) & 0x3f] : '=');
    }
  }
  return out;
}

int base64_digit(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Strict decoding: length a multiple of 4, padding only at the end; the error names the character position.
Result<std::vector<std::byte>> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return data_loss("base64 text of {} characters is not a multiple of 4", text.size());
  std::vector<std::byte> out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    uint32_t chunk = 0;
    size_t pad = 0;
    for (size_t k = 0; k < 4; ++k) {
      const char c = text[i + k];
      if (c == '=' && last && k >= 2 && (k == 3 || text[i + 3] == '=')) {
        ++pad;
        chunk <<= 6;
        continue;
      }
      const int d = base64_digit(c);
      if (d < 0 || pad > 0) return data_loss("bad base64 character at position {}", i + k);
      chunk = (chunk << 6) | static_cast<uint32_t>(d);
    }
    for (size_t k = 0; k < 3 - pad; ++k) out.push_back(static_cast<std::byte>((chunk >> (16 - 8 * k)) & 0xff));
  }
  return out;
}

// ---- Writing ------------------------------------------------------------------------------------------------

json float_to_json(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

json attribute_to_json(const Attribute& attr) {
  json out = json::object();
  out["type"] = std::string(graph::attr_type_name(attr.type()));
  struct Visitor {
    json& out;
    void operator()(int64_t v) const { out["value"] = v; }
    void operator()(double v) const { out["value"] = float_to_json(v); }
    void operator()(const std::string& v) const { out["value"] = v; }
    void operator()(bool v) const { out["value"] = v; }
    void operator()(const std::vector<int64_t>& v) const { out["value"] = v; }
    void operator()(const std::vector<double>& v) const {
      json list = json::array();
      for (double d : v) list.push_back(float_to_json(d));
      out["value"] = std::move(list);
    }
    void operator()(const std::vector<std::string>& v) const { out["value"] = v; }
    void operator()(const TensorValue& v) const {
      json shape = json::array();
      for (int64_t d : v.shape.dims()) shape.push_back(d);
      out["value"] = json{
          {"dtype", std::string(dtype_name(v.dtype))}, {"shape", std::move(shape)}, {"data", base64_encode(v.data)}};
    }
  };
  std::visit(Visitor{out}, attr.storage());
  return out;
}

struct Layout {
  std::string description;                            // JSON text
  std::vector<std::pair<ValueId, uint64_t>> weights;  // initializer and its offset in the weight section, ascending
  uint64_t weights_offset = 0;                        // in the file
  uint64_t weights_size = 0;
};

Result<Layout> plan_layout(const Graph& g) {
  HXRT_RETURN_IF_ERROR_CTX(g.validate(), "writing graph '{}' to a graph file", g.name());
  for (graph::NodeId id = 0; id < g.num_nodes(); ++id) {
    if (g.has_node(id) && g.node(id).version == graph::kLatestVersion) {
      return invalid_argument(
          "writing graph '{}' to a graph file: node '{}' ({}) asks for the latest version, which a file cannot hold; "
          "resolve it first (ops::OpSchemaRegistry::resolve_versions)",
          g.name(), g.node(id).name, g.node(id).op_type);
    }
  }
  Layout layout;
  json values = json::array();
  json inputs = json::array();
  json outputs = json::array();
  uint64_t cursor = 0;
  for (ValueId id = 0; id < g.num_values(); ++id) {
    const Value& v = g.value(id);
    if (v.desc.shape.rank() > Shape::kMaxRank) {
      return invalid_argument("value '{}' has rank {}; a graph file holds ranks up to {}", v.name, v.desc.shape.rank(),
                              Shape::kMaxRank);
    }
    json shape = json::array();
    for (const Dim& d : v.desc.shape.dims()) shape.push_back(d.to_string());
    const uint32_t flags =
        (v.is_input ? kFlagInput : 0) | (v.is_output ? kFlagOutput : 0) | (v.is_initializer ? kFlagInitializer : 0);
    json record = {{"name", v.name},
                   {"dtype", std::string(dtype_name(v.desc.dtype))},
                   {"shape", std::move(shape)},
                   {"flags", flags}};
    if (v.is_initializer) {
      const uint64_t offset = align_up(cursor);
      const std::span<const std::byte> bytes(v.weight.data, v.weight.size);
      record["weight"] = {{"offset", offset}, {"size", v.weight.size}, {"fnv1a64", graph_file_checksum(bytes)}};
      layout.weights.emplace_back(id, offset);
      cursor = offset + v.weight.size;
    }
    values.push_back(std::move(record));
  }
  for (ValueId id : g.inputs()) inputs.push_back(g.value(id).name);
  for (ValueId id : g.outputs()) outputs.push_back(g.value(id).name);

  json nodes = json::array();
  for (NodeId id = 0; id < g.num_nodes(); ++id) {
    if (!g.has_node(id)) continue;
    const Node& n = g.node(id);
    json attrs = json::object();
    for (const auto& [name, attr] : n.attrs.items()) attrs[name] = attribute_to_json(attr);
    json ins = json::array();
    json outs = json::array();
    for (ValueId v : n.inputs) ins.push_back(v == graph::kNoValue ? std::string() : g.value(v).name);
    for (ValueId v : n.outputs) outs.push_back(g.value(v).name);
    nodes.push_back({{"name", n.name},
                     {"op_type", n.op_type},
                     {"domain", n.domain},
                     {"version", n.version},
                     {"attrs", std::move(attrs)},
                     {"inputs", std::move(ins)},
                     {"outputs", std::move(outs)},
                     {"kernel_hint", n.kernel_hint},
                     {"fusion_id", n.fusion_id},
                     {"fused_from", n.fused_from}});
  }
  json doc = {{"name", g.name()},
              {"values", std::move(values)},
              {"nodes", std::move(nodes)},
              {"inputs", std::move(inputs)},
              {"outputs", std::move(outputs)}};
  try {
    layout.description = doc.dump();
  } catch (const json::exception& e) {
    // nlohmann rejects strings that are not valid UTF-8.
    return invalid_argument("graph '{}' cannot be written: {}", g.name(), e.what());
  }
  layout.weights_offset = align_up(kGraphFileHeaderSize + layout.description.size());
  layout.weights_size = cursor;
  return layout;
}

std::array<std::byte, kGraphFileHeaderSize> make_header(const Layout& layout) {
  std::array<std::byte, kGraphFileHeaderSize> h{};
  std::memcpy(h.data(), kGraphFileMagic, sizeof(kGraphFileMagic));
  put_u32(h.data() + kOffVersion, kGraphFileVersion);
  put_u32(h.data() + kOffFlags, 0);
  put_u64(h.data() + kOffDescOffset, kGraphFileHeaderSize);
  put_u64(h.data() + kOffDescSize, layout.description.size());
  put_u64(h.data() + kOffWeightsOffset, layout.weights_offset);
  put_u64(h.data() + kOffWeightsSize, layout.weights_size);
  put_u64(h.data() + kOffDescChecksum, graph_file_checksum(as_bytes(layout.description)));
  put_u64(h.data() + kOffHeaderChecksum, graph_file_checksum(std::span(h).first(kOffHeaderChecksum)));
  return h;
}

using Sink = std::function<Status(std::span<const std::byte>)>;

// Emits the whole file through `sink` in order.
Status emit(const Graph& g, const Layout& layout, const Sink& sink) {
  static constexpr std::array<std::byte, kGraphFileAlignment> kZeros{};
  uint64_t written = 0;
  auto put = [&](std::span<const std::byte> bytes) -> Status {
    written += bytes.size();
    return sink(bytes);
  };
  auto pad_to = [&](uint64_t offset) -> Status {
    HXRT_CHECK(offset >= written && offset - written < kGraphFileAlignment);
    return put(std::span(kZeros).first(offset - written));
  };
  const auto header = make_header(layout);
  HXRT_RETURN_IF_ERROR(put(header));
  HXRT_RETURN_IF_ERROR(put(as_bytes(layout.description)));
  HXRT_RETURN_IF_ERROR(pad_to(layout.weights_offset));
  for (const auto& [id, offset] : layout.weights) {
    const WeightData& w = g.value(id).weight;
    HXRT_RETURN_IF_ERROR(pad_to(layout.weights_offset + offset));
    HXRT_RETURN_IF_ERROR(put(std::span(w.data, w.size)));
  }
  return ok_status();
}

// ---- Reading ------------------------------------------------------------------------------------------------

// Checked access to the parsed description. Every error names the JSON path of the field ("nodes[3].inputs[1]").
class Reader {
 public:
  Reader(std::span<const std::byte> file, std::shared_ptr<const void> keepalive, const GraphFileReadOptions& options)
      : file_(file), keepalive_(std::move(keepalive)), options_(options) {}

  Result<Graph> read() {
    HXRT_RETURN_IF_ERROR(read_header());
    const auto* text = reinterpret_cast<const char*>(file_.data() + desc_offset_);
    json doc;
    try {
      doc = json::parse(text, text + desc_size_);
    } catch (const json::parse_error& e) {
      return data_loss("graph file description (file offset {}) is malformed JSON near byte {} (file offset {}): {}",
                       desc_offset_, e.byte, desc_offset_ + e.byte, e.what());
    } catch (const json::exception& e) {  // out_of_range for numbers that overflow a double
      return data_loss("graph file description (file offset {}) is malformed JSON: {}", desc_offset_, e.what());
    }
    try {
      return read_description(doc);
    } catch (const json::exception& e) {
      // The accessors below check types before reading, so this is a backstop rather than a path.
      return data_loss("graph file description: {}", e.what());
    }
  }

 private:
  Status read_header() {
    if (reinterpret_cast<uintptr_t>(file_.data()) % kGraphFileAlignment != 0) {
      return invalid_argument("graph file bytes must start at a {}-byte aligned address", kGraphFileAlignment);
    }
    if (file_.size() < kGraphFileHeaderSize) {
      return data_loss("graph file is truncated: {} bytes, shorter than the {}-byte header", file_.size(),
                       kGraphFileHeaderSize);
    }
    const std::byte* h = file_.data();
    if (std::memcmp(h, kGraphFileMagic, sizeof(kGraphFileMagic)) != 0) {
      return invalid_argument("not an hxrt graph file: bad magic at offset 0 (expected \"HXRTGRPH\")");
    }
    const uint32_t version = get_u32(h + kOffVersion);
    if (version != kGraphFileVersion) {
      return invalid_argument("graph file format version {} at offset {} is not supported (this reader reads {})",
                              version, kOffVersion, kGraphFileVersion);
    }
    const uint64_t header_sum = graph_file_checksum(file_.first(kOffHeaderChecksum));
    if (header_sum != get_u64(h + kOffHeaderChecksum)) {
      return data_loss("graph file header checksum at offset {} does not match the header (corrupted header)",
                       kOffHeaderChecksum);
    }
    const uint32_t flags = get_u32(h + kOffFlags);
    if (flags != 0) return invalid_argument("graph file flags 0x{:x} at offset {} are not supported", flags, kOffFlags);

    desc_offset_ = get_u64(h + kOffDescOffset);
    desc_size_ = get_u64(h + kOffDescSize);
    weights_offset_ = get_u64(h + kOffWeightsOffset);
    weights_size_ = get_u64(h + kOffWeightsSize);
    const uint64_t file_size = file_.size();
    uint64_t desc_end = 0;
    if (desc_offset_ < kGraphFileHeaderSize || __builtin_add_overflow(desc_offset_, desc_size_, &desc_end) ||
        desc_end > file_size) {
      return data_loss(
          "graph file description section (offset {} at header offset {}, size {} at header offset {}) does not fit "
          "in the {}-byte file after the header",
          desc_offset_, kOffDescOffset, desc_size_, kOffDescSize, file_size);
    }
    uint64_t weights_end = 0;
    if (weights_offset_ % kGraphFileAlignment != 0) {
      return data_loss("graph file weight section offset {} (header offset {}) is not {}-byte aligned", weights_offset_,
                       kOffWeightsOffset, kGraphFileAlignment);
    }
    if (weights_offset_ < desc_end || __builtin_add_overflow(weights_offset_, weights_size_, &weights_end) ||
        weights_end > file_size) {
      return data_loss(
          "graph file weight section (offset {} at header offset {}, size {} at header offset {}) does not fit in the "
          "{}-byte file after the description (which ends at {}); the file may be truncated",
          weights_offset_, kOffWeightsOffset, weights_size_, kOffWeightsSize, file_size, desc_end);
    }
    const uint64_t desc_sum = graph_file_checksum(file_.subspan(desc_offset_, desc_size_));
    if (desc_sum != get_u64(h + kOffDescChecksum)) {
      return data_loss("graph file description (offset {}, {} bytes) does not match its checksum at header offset {}",
                       desc_offset_, desc_size_, kOffDescChecksum);
    }
    return ok_status();
  }

  // ---- field access ----

  static Status field_error(std::string_view path, std::string_view problem) {
    return data_loss("graph file description: {}: {}", path, problem);
  }

  static Result<const json*> member(const json& obj, std::string_view path, const char* key) {
    if (!obj.is_object()) return field_error(path, "expected an object");
    auto it = obj.find(key);
    if (it == obj.end()) return field_error(fmt::format("{}.{}", path, key), "missing");
    return &*it;
  }
  static Result<std::string> string_at(const json& j, std::string_view path) {
    if (!j.is_string()) return field_error(path, fmt::format("expected a string, found {}", j.type_name()));
    return j.get<std::string>();
  }
  static Result<int64_t> int_at(const json& j, std::string_view path) {
    if (!j.is_number_integer()) return field_error(path, fmt::format("expected an integer, found {}", j.type_name()));
    if (j.is_number_unsigned() && j.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      return field_error(path, "integer does not fit in int64");
    }
    return j.get<int64_t>();
  }
  static Result<uint64_t> u64_at(const json& j, std::string_view path) {
    if (!j.is_number_integer()) return field_error(path, fmt::format("expected an integer, found {}", j.type_name()));
    if (!j.is_number_unsigned() && j.get<int64_t>() < 0) return field_error(path, "expected a non-negative integer");
    return j.get<uint64_t>();
  }
  static Result<int32_t> int32_at(const json& j, std::string_view path, int64_t min) {
    HXRT_ASSIGN_OR_RETURN(const int64_t v, int_at(j, path));
    if (v < min || v > INT32_MAX)
      return field_error(path, fmt::format("{} is out of range [{}, {}]", v, min, INT32_MAX));
    return static_cast<int32_t>(v);
  }
  static Result<double> float_at(const json& j, std::string_view path) {
    if (j.is_number()) return j.get<double>();
    if (j.is_string()) {
      const auto& s = j.get_ref<const std::string&>();
      if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
      if (s == "inf") return std::numeric_limits<double>::infinity();
      if (s == "-inf") return -std::numeric_limits<double>::infinity();
    }
    return field_error(path, fmt::format("expected a number (or \"nan\", \"inf\", \"-inf\"), found {}", j.type_name()));
  }
  static Result<const json*> array_at(const json& j, std::string_view path, size_t max_size) {
    if (!j.is_array()) return field_error(path, fmt::format("expected an array, found {}", j.type_name()));
    if (j.size() > max_size)
      return field_error(path, fmt::format("{} entries exceed the limit of {}", j.size(), max_size));
    return &j;
  }
  template <typename T, typename Fn>
  static Result<std::vector<T>> list_at(const json& j, std::string_view path, size_t max_size, Fn element) {
    HXRT_ASSIGN_OR_RETURN(const json* list, array_at(j, path, max_size));
    std::vector<T> out;
    out.reserve(list->size());
    for (size_t i = 0; i < list->size(); ++i) {
      HXRT_ASSIGN_OR_RETURN(T v, element((*list)[i], fmt::format("{}[{}]", path, i)));
      out.push_back(std::move(v));
    }
    return out;
  }
  static Result<DType> dtype_at(const json& j, std::string_view path) {
    HXRT_ASSIGN_OR_RETURN(const std::string name, string_at(j, path));
    Result<DType> dtype = dtype_from_name(name);
    if (!dtype.ok()) return invalid_argument("graph file description: {}: unknown dtype '{}'", path, name);
    return *dtype;
  }

  // ---- description ----

  Result<Graph> read_description(const json& doc) {
    HXRT_ASSIGN_OR_RETURN(const json* name, member(doc, "$", "name"));
    HXRT_ASSIGN_OR_RETURN(std::string graph_name, string_at(*name, "name"));
    Graph g(std::move(graph_name));

    HXRT_ASSIGN_OR_RETURN(const json* values_field, member(doc, "$", "values"));
    HXRT_ASSIGN_OR_RETURN(const json* values, array_at(*values_field, "values", kMaxValues));
    std::vector<std::string> flagged_inputs;
    std::vector<std::string> flagged_outputs;
    for (size_t i = 0; i < values->size(); ++i) {
      HXRT_RETURN_IF_ERROR(read_value(g, (*values)[i], i, &flagged_inputs, &flagged_outputs));
    }

    HXRT_ASSIGN_OR_RETURN(const json* nodes_field, member(doc, "$", "nodes"));
    HXRT_ASSIGN_OR_RETURN(const json* nodes, array_at(*nodes_field, "nodes", kMaxNodes));
    for (size_t i = 0; i < nodes->size(); ++i) HXRT_RETURN_IF_ERROR(read_node(g, (*nodes)[i], i));

    auto names_at = [](const json& j, std::string_view path) -> Result<std::string> { return string_at(j, path); };
    HXRT_ASSIGN_OR_RETURN(const json* inputs_field, member(doc, "$", "inputs"));
    HXRT_ASSIGN_OR_RETURN(auto inputs, list_at<std::string>(*inputs_field, "inputs", kMaxValues, names_at));
    if (inputs != flagged_inputs) {
      return field_error("inputs", "does not list the values flagged as inputs, in value order");
    }
    HXRT_ASSIGN_OR_RETURN(const json* outputs_field, member(doc, "$", "outputs"));
    HXRT_ASSIGN_OR_RETURN(auto outputs, list_at<std::string>(*outputs_field, "outputs", kMaxValues, names_at));
    for (size_t i = 0; i < outputs.size(); ++i) {
      const std::string path = fmt::format("outputs[{}]", i);
      Result<ValueId> id = g.find_value(outputs[i]);
      if (!id.ok()) return field_error(path, fmt::format("value '{}' does not exist", outputs[i]));
      if (g.value(*id).is_output) return field_error(path, fmt::format("value '{}' is listed twice", outputs[i]));
      HXRT_RETURN_IF_ERROR(g.mark_output(outputs[i]));
    }
    std::sort(outputs.begin(), outputs.end());
    std::sort(flagged_outputs.begin(), flagged_outputs.end());
    if (outputs != flagged_outputs) return field_error("outputs", "does not match the values flagged as outputs");

    Status valid = g.validate();
    if (!valid.ok()) return data_loss("graph file describes an invalid graph: {}", valid.message());
    return g;
  }

  Status read_value(Graph& g, const json& record, size_t index, std::vector<std::string>* inputs,
                    std::vector<std::string>* outputs) {
    const std::string path = fmt::format("values[{}]", index);
    HXRT_ASSIGN_OR_RETURN(const json* name_field, member(record, path, "name"));
    HXRT_ASSIGN_OR_RETURN(std::string name, string_at(*name_field, path + ".name"));
    HXRT_ASSIGN_OR_RETURN(const json* dtype_field, member(record, path, "dtype"));
    HXRT_ASSIGN_OR_RETURN(const DType dtype, dtype_at(*dtype_field, path + ".dtype"));
    HXRT_ASSIGN_OR_RETURN(const json* shape_field, member(record, path, "shape"));
    HXRT_ASSIGN_OR_RETURN(auto dims, list_at<Dim>(*shape_field, path + ".shape", Shape::kMaxRank, read_dim));
    TensorDesc desc{dtype, SymShape(std::move(dims))};
    HXRT_ASSIGN_OR_RETURN(const json* flags_field, member(record, path, "flags"));
    HXRT_ASSIGN_OR_RETURN(const uint64_t flags, u64_at(*flags_field, path + ".flags"));
    if ((flags & ~uint64_t{kFlagInput | kFlagOutput | kFlagInitializer}) != 0) {
      return field_error(path + ".flags", fmt::format("unknown bits in 0x{:x}", flags));
    }
    const bool is_input = (flags & kFlagInput) != 0;
    const bool is_initializer = (flags & kFlagInitializer) != 0;
    if (is_input && is_initializer) return field_error(path + ".flags", "both input and initializer");
    if ((flags & kFlagOutput) != 0) outputs->push_back(name);

    if (is_input) inputs->push_back(name);
    WeightData weight;
    if (is_initializer) {
      HXRT_ASSIGN_OR_RETURN(weight, read_weight(record, path, desc));
    }
    Result<ValueId> added = is_input         ? g.add_input(std::move(name), std::move(desc))
                            : is_initializer ? g.add_initializer(std::move(name), std::move(desc), std::move(weight))
                                             : g.declare_value(std::move(name), std::move(desc));
    if (!added.ok()) return field_error(path, added.status().message());
    if (*added != static_cast<ValueId>(index)) return internal_error("value {} was given id {}", index, *added);
    return ok_status();
  }

  static Result<Dim> read_dim(const json& j, std::string_view path) {
    if (j.is_number_integer()) {
      HXRT_ASSIGN_OR_RETURN(const int64_t v, int_at(j, path));
      return Dim(v);
    }
    HXRT_ASSIGN_OR_RETURN(const std::string text, string_at(j, path));
    Result<Dim> dim = Dim::parse(text);
    if (!dim.ok()) return field_error(path, dim.status().message());
    return *dim;
  }

  Result<WeightData> read_weight(const json& record, const std::string& path, const TensorDesc& desc) {
    const std::string wpath = path + ".weight";
    HXRT_ASSIGN_OR_RETURN(const json* weight, member(record, path, "weight"));
    HXRT_ASSIGN_OR_RETURN(const json* offset_field, member(*weight, wpath, "offset"));
    HXRT_ASSIGN_OR_RETURN(const uint64_t offset, u64_at(*offset_field, wpath + ".offset"));
    HXRT_ASSIGN_OR_RETURN(const json* size_field, member(*weight, wpath, "size"));
    HXRT_ASSIGN_OR_RETURN(const uint64_t size, u64_at(*size_field, wpath + ".size"));
    HXRT_ASSIGN_OR_RETURN(const json* sum_field, member(*weight, wpath, "fnv1a64"));
    HXRT_ASSIGN_OR_RETURN(const uint64_t checksum, u64_at(*sum_field, wpath + ".fnv1a64"));
    if (offset % kGraphFileAlignment != 0) {
      return field_error(wpath + ".offset",
                         fmt::format("{} (file offset {}) is not {}-byte aligned", offset,
                                     weights_offset_ + std::min(offset, weights_size_), kGraphFileAlignment));
    }
    if (offset > weights_size_ || size > weights_size_ - offset) {
      return field_error(wpath, fmt::format("offset {} + size {} runs past the end of the {}-byte weight section "
                                            "(file offset {})",
                                            offset, size, weights_size_, weights_offset_));
    }
    if (desc.shape.is_static()) {
      uint64_t elements = 1;
      for (const Dim& d : desc.shape.dims()) {
        if (d.value() < 0 || __builtin_mul_overflow(elements, static_cast<uint64_t>(d.value()), &elements)) {
          return field_error(path + ".shape", fmt::format("{} is not a valid weight shape", desc.shape.to_string()));
        }
      }
      Result<uint64_t> expected = storage_bytes(desc.dtype, elements);
      if (!expected.ok()) return field_error(path + ".shape", expected.status().message());
      if (*expected != size) {
        return field_error(wpath + ".size",
                           fmt::format("{} bytes, but {} needs {}", size, desc.to_string(), *expected));
      }
    }
    const std::span<const std::byte> bytes = file_.subspan(weights_offset_ + offset, size);
    if (options_.verify_weights && graph_file_checksum(bytes) != checksum) {
      return data_loss(
          "graph file description: {}: weight bytes at file offset {} ({} bytes) do not match their "
          "checksum",
          wpath, weights_offset_ + offset, size);
    }
    return WeightData{.data = bytes.data(), .size = size, .keepalive = keepalive_};
  }

  Status read_node(Graph& g, const json& record, size_t index) {
    const std::string path = fmt::format("nodes[{}]", index);
    auto string_field = [&](const char* key) -> Result<std::string> {
      HXRT_ASSIGN_OR_RETURN(const json* f, member(record, path, key));
      return string_at(*f, fmt::format("{}.{}", path, key));
    };
    auto names_field = [&](const char* key) -> Result<std::vector<std::string>> {
      HXRT_ASSIGN_OR_RETURN(const json* f, member(record, path, key));
      return list_at<std::string>(*f, fmt::format("{}.{}", path, key), kMaxNodeArity, string_at);
    };
    HXRT_ASSIGN_OR_RETURN(std::string name, string_field("name"));
    HXRT_ASSIGN_OR_RETURN(std::string op_type, string_field("op_type"));
    HXRT_ASSIGN_OR_RETURN(std::string domain, string_field("domain"));
    HXRT_ASSIGN_OR_RETURN(std::string kernel_hint, string_field("kernel_hint"));
    HXRT_ASSIGN_OR_RETURN(const json* version_field, member(record, path, "version"));
    HXRT_ASSIGN_OR_RETURN(const int32_t version, int32_at(*version_field, path + ".version", INT32_MIN));
    HXRT_ASSIGN_OR_RETURN(const json* fusion_field, member(record, path, "fusion_id"));
    HXRT_ASSIGN_OR_RETURN(const int32_t fusion_id, int32_at(*fusion_field, path + ".fusion_id", -1));
    HXRT_ASSIGN_OR_RETURN(std::vector<std::string> inputs, names_field("inputs"));
    HXRT_ASSIGN_OR_RETURN(std::vector<std::string> outputs, names_field("outputs"));
    HXRT_ASSIGN_OR_RETURN(std::vector<std::string> fused_from, names_field("fused_from"));

    HXRT_ASSIGN_OR_RETURN(const json* attrs_field, member(record, path, "attrs"));
    if (!attrs_field->is_object()) return field_error(path + ".attrs", "expected an object");
    AttributeMap attrs;
    for (const auto& [key, attr] : attrs_field->items()) {
      HXRT_ASSIGN_OR_RETURN(Attribute value, read_attribute(attr, fmt::format("{}.attrs.{}", path, key)));
      attrs.set(key, std::move(value));
    }

    Result<NodeId> id =
        g.add_node(std::move(name), std::move(op_type), inputs, outputs, std::move(attrs), std::move(domain), version);
    if (!id.ok()) return field_error(path, id.status().message());
    Node& node = g.mutable_node(*id);
    node.kernel_hint = std::move(kernel_hint);
    node.fusion_id = fusion_id;
    node.fused_from = std::move(fused_from);
    return ok_status();
  }

  static Result<Attribute> read_attribute(const json& attr, const std::string& path) {
    HXRT_ASSIGN_OR_RETURN(const json* type_field, member(attr, path, "type"));
    HXRT_ASSIGN_OR_RETURN(const std::string type, string_at(*type_field, path + ".type"));
    HXRT_ASSIGN_OR_RETURN(const json* v, member(attr, path, "value"));
    const std::string vpath = path + ".value";
    constexpr size_t kMaxList = std::numeric_limits<int32_t>::max();
    if (type == "int") {
      HXRT_ASSIGN_OR_RETURN(const int64_t i, int_at(*v, vpath));
      return Attribute(i);
    }
    if (type == "float") {
      HXRT_ASSIGN_OR_RETURN(const double d, float_at(*v, vpath));
      return Attribute(d);
    }
    if (type == "string") {
      HXRT_ASSIGN_OR_RETURN(std::string s, string_at(*v, vpath));
      return Attribute(std::move(s));
    }
    if (type == "bool") {
      if (!v->is_boolean()) return field_error(vpath, fmt::format("expected a bool, found {}", v->type_name()));
      return Attribute(v->get<bool>());
    }
    if (type == "ints") {
      HXRT_ASSIGN_OR_RETURN(auto list, list_at<int64_t>(*v, vpath, kMaxList, int_at));
      return Attribute(std::move(list));
    }
    if (type == "floats") {
      HXRT_ASSIGN_OR_RETURN(auto list, list_at<double>(*v, vpath, kMaxList, float_at));
      return Attribute(std::move(list));
    }
    if (type == "strings") {
      HXRT_ASSIGN_OR_RETURN(auto list, list_at<std::string>(*v, vpath, kMaxList, string_at));
      return Attribute(std::move(list));
    }
    if (type == "tensor") {
      HXRT_ASSIGN_OR_RETURN(const json* dtype_field, member(*v, vpath, "dtype"));
      HXRT_ASSIGN_OR_RETURN(const DType dtype, dtype_at(*dtype_field, vpath + ".dtype"));
      HXRT_ASSIGN_OR_RETURN(const json* shape_field, member(*v, vpath, "shape"));
      HXRT_ASSIGN_OR_RETURN(auto dims, list_at<int64_t>(*shape_field, vpath + ".shape", Shape::kMaxRank, int_at));
      Result<Shape> shape = Shape::make(dims);
      if (!shape.ok()) return field_error(vpath + ".shape", shape.status().message());
      HXRT_ASSIGN_OR_RETURN(const json* data_field, member(*v, vpath, "data"));
      HXRT_ASSIGN_OR_RETURN(const std::string text, string_at(*data_field, vpath + ".data"));
      Result<uint64_t> expected = storage_bytes(dtype, static_cast<uint64_t>(shape->num_elements()));
      if (!expected.ok()) return field_error(vpath + ".shape", expected.status().message());
      // Check the size before decoding, so an absurd shape never drives an allocation.
      if (*expected > text.size() || text.size() != (*expected + 2) / 3 * 4) {
        return field_error(vpath + ".data", fmt::format("{} base64 characters cannot hold the {} bytes of {}{}",
                                                        text.size(), *expected, dtype_name(dtype), shape->to_string()));
      }
      Result<std::vector<std::byte>> data = base64_decode(text);
      if (!data.ok()) return field_error(vpath + ".data", data.status().message());
      if (data->size() != *expected) {
        return field_error(vpath + ".data", fmt::format("{} bytes, but {}{} needs {}", data->size(), dtype_name(dtype),
                                                        shape->to_string(), *expected));
      }
      return Attribute(TensorValue{dtype, *shape, std::move(*data)});
    }
    return field_error(path + ".type", fmt::format("unknown attribute type '{}'", type));
  }

  std::span<const std::byte> file_;
  std::shared_ptr<const void> keepalive_;
  GraphFileReadOptions options_;
  uint64_t desc_offset_ = 0;
  uint64_t desc_size_ = 0;
  uint64_t weights_offset_ = 0;
  uint64_t weights_size_ = 0;
};

}  // namespace

uint64_t graph_file_checksum(std::span<const std::byte> bytes) {
  uint64_t hash = 0xcbf29ce484222325ULL;  // FNV-1a 64 offset basis
  for (std::byte b : bytes) {
    hash ^= static_cast<uint64_t>(b);
    hash *= 0x100000001b3ULL;  // FNV 64 prime
  }
  return hash;
}

Result<std::vector<std::byte>> serialize_graph(const Graph& graph) {
  HXRT_ASSIGN_OR_RETURN(const Layout layout, plan_layout(graph));
  std::vector<std::byte> out;
  out.reserve(layout.weights_offset + layout.weights_size);
  HXRT_RETURN_IF_ERROR(emit(graph, layout, [&](std::span<const std::byte> bytes) {
    out.insert(out.end(), bytes.begin(), bytes.end());
    return ok_status();
  }));
  return out;
}

Status write_graph_file(const Graph& graph, const std::string& path) {
  HXRT_ASSIGN_OR_RETURN(const Layout layout, plan_layout(graph));
  return write_file_atomically(path, "graph file", [&](const ByteSink& sink) { return emit(graph, layout, sink); });
}

Result<Graph> read_graph_file_from_memory(std::span<const std::byte> bytes, std::shared_ptr<const void> keepalive,
                                          const GraphFileReadOptions& options) {
  return Reader(bytes, std::move(keepalive), options).read();
}

Result<Graph> read_graph_file(const std::string& path, const GraphFileReadOptions& options) {
  HXRT_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> mapping, map_file(path, "graph file"));
  if (mapping->bytes().size() < kGraphFileHeaderSize) {
    return data_loss("graph file '{}' is truncated: {} bytes, shorter than the {}-byte header", path,
                     mapping->bytes().size(), kGraphFileHeaderSize);
  }
  Result<Graph> graph = read_graph_file_from_memory(mapping->bytes(), mapping, options);
  if (!graph.ok()) return std::move(graph).take_status().with_context(fmt::format("reading graph file '{}'", path));
  return graph;
}

}  // namespace hxrt::formats
