// ONNX ModelProto -> hxrt Graph (include/hxrt/formats/onnx.h; Note [Values known at import] in converter.h).

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <google/protobuf/io/coded_stream.h>
#include <onnx/onnx_pb.h>

#include "formats/file_io.h"
#include "formats/onnx/converter.h"
#include "hxrt/formats/onnx.h"
#include "hxrt/ops/params/shape_ops.h"

namespace hxrt::formats {

namespace {

namespace pb = ::onnx;

struct ValueState {
  std::string hxrt_name;                 // the hxrt value carrying it
  std::optional<graph::TensorDesc> desc;
  std::optional<graph::WeightData> known;  // its bytes when known at import
  bool in_graph = false;                 // a graph input, an initializer added, or a node output
  std::set<std::string> value_deps;      // graph inputs whose values it depends on
  bool shape_dependent = false;          // depends on the shapes of graph inputs (Shape, Size of a symbolic value)
  // Note [Shape values]: the elements of an integer scalar or vector computed from shapes (Shape, Gather of a
  // Shape, Concat of those ...), as dims that may be symbolic.
  std::optional<std::vector<graph::Dim>> dims;
};

// Note [Shape values]
// Exported models compute shapes at run time: Shape(x) -> Gather -> Unsqueeze -> Concat -> Reshape. The importer
// follows such integer vectors as lists of graph::Dim through the hxrt ops that move or combine them (Shape, Gather,
// the element-preserving Reshape/Unsqueeze/Squeeze/Flatten/Identity, Concat, Slice, Cast, and Add/Sub/Mul/Div of
// dims). When every dim of the result is static (the input shapes are known, always the case at bind time) the
// value is known: the node is taken out of the graph again and the value folds on (Note [Values known at import]).
constexpr int64_t kMaxShapeValue = 64;  // elements of an integer vector followed as dims

bool is_int(DType d) { return d == DType::kI64 || d == DType::kI32; }

int64_t int_attr(const graph::AttributeMap& attrs, std::string_view name, int64_t fallback) {
  Result<int64_t> v = attrs.get_int(name, fallback);
  return v.ok() ? *v : fallback;
}

int64_t read_int(const std::byte* p, DType dtype, int64_t i) {
  if (dtype == DType::kI32) {
    int32_t v;
    std::memcpy(&v, p + 4 * i, 4);
    return v;
  }
  int64_t v;
  std::memcpy(&v, p + 8 * i, 8);
  return v;
}

// The dims of a value: followed ones, or those of a small known integer vector.
std::optional<std::vector<graph::Dim>> dims_of(const ValueState& s) {
  if (s.dims) return s.dims;
  if (!s.known || !s.desc || !is_int(s.desc->dtype) || !s.desc->shape.is_static() || s.desc->shape.rank() > 1) {
    return std::nullopt;
  }
  const int64_t n = s.desc->shape.num_elements().value();
  if (n > kMaxShapeValue) return std::nullopt;
  std::vector<graph::Dim> dims;
  for (int64_t i = 0; i < n; ++i) dims.emplace_back(read_int(s.known->data, s.desc->dtype, i));
  return dims;
}

// The integer value of known dims (nullopt while one is symbolic or negative-free arithmetic failed).
std::optional<std::vector<int64_t>> static_values(const std::vector<graph::Dim>& dims) {
  std::vector<int64_t> out;
  for (const graph::Dim& d : dims) {
    if (!d.is_static()) return std::nullopt;
    out.push_back(d.value());
  }
  return out;
}

// Dims of output 0 of an hxrt op from its inputs' dims (Note [Shape values]); nullopt when not followed.
std::optional<std::vector<graph::Dim>> propagate_dims(const graph::Node& node, const std::vector<ValueState*>& in,
                                                      const graph::TensorDesc& out) {
  const std::string& op = node.op_type;
  const graph::AttributeMap& attrs = node.attrs;
  if (!is_int(out.dtype) && op != "Shape" && op != "Size") return std::nullopt;
  if (out.shape.rank() > 1 || !out.shape.is_static()) return std::nullopt;
  const int64_t out_n = out.shape.num_elements().value();
  if (out_n > kMaxShapeValue) return std::nullopt;
  auto input_dims = [&](size_t i) -> std::optional<std::vector<graph::Dim>> {
    if (i >= in.size() || in[i] == nullptr) return std::nullopt;
    return dims_of(*in[i]);
  };
  if (op == "Shape") {
    if (in.empty() || in[0] == nullptr || !in[0]->desc) return std::nullopt;
    Result<ops::ShapeParams> params = ops::parse_shape_params(node);
    if (!params.ok()) return std::nullopt;
    const std::vector<graph::Dim>& all = in[0]->desc->shape.dims();
    const auto [first, last] = ops::shape_slice(*params, static_cast<int>(all.size()));
    std::vector<graph::Dim> dims(all.begin() + first, all.begin() + last);
    if (static_cast<int64_t>(dims.size()) != out_n) return std::nullopt;
    return dims;
  }
  if (op == "Size") {
    if (in.empty() || in[0] == nullptr || !in[0]->desc) return std::nullopt;
    return std::vector<graph::Dim>{in[0]->desc->shape.num_elements()};
  }
  if (op == "Reshape" || op == "Unsqueeze" || op == "Squeeze" || op == "Flatten" || op == "Identity" || op == "Cast") {
    auto dims = input_dims(0);
    if (!dims || static_cast<int64_t>(dims->size()) != out_n) return std::nullopt;
    return dims;
  }
  if (op == "Gather") {
    auto data = input_dims(0);
    auto indices = input_dims(1);
    if (!data || !indices || int_attr(attrs, "axis", 0) != 0) return std::nullopt;
    auto idx = static_values(*indices);
    if (!idx) return std::nullopt;
    std::vector<graph::Dim> dims;
    const auto n = static_cast<int64_t>(data->size());
    for (int64_t i : *idx) {
      if (i < -n || i >= n) return std::nullopt;
      dims.push_back((*data)[static_cast<size_t>(i < 0 ? i + n : i)]);
    }
    if (static_cast<int64_t>(dims.size()) != out_n) return std::nullopt;
    return dims;
  }
  if (op == "Concat") {
    std::vector<graph::Dim> dims;
    for (size_t i = 0; i < in.size(); ++i) {
      auto part = input_dims(i);
      if (!part) return std::nullopt;
      dims.insert(dims.end(), part->begin(), part->end());
    }
    if (static_cast<int64_t>(dims.size()) != out_n) return std::nullopt;
    return dims;
  }
  if (op == "Slice") {
    auto data = input_dims(0);
    auto starts = input_dims(1);
    auto ends = input_dims(2);
    if (!data || !starts || !ends) return std::nullopt;
    auto st = static_values(*starts);
    auto en = static_values(*ends);
    std::optional<std::vector<int64_t>> steps = std::vector<int64_t>{1};
    if (auto s = input_dims(4)) steps = static_values(*s);
    if (!st || !en || !steps || st->size() != 1 || en->size() != 1 || steps->size() != 1 || (*steps)[0] != 1) {
      return std::nullopt;
    }
    const auto n = static_cast<int64_t>(data->size());
    auto clamp = [n](int64_t v) { return std::clamp(v < 0 ? v + n : v, int64_t{0}, n); };
    std::vector<graph::Dim> dims;
    for (int64_t i = clamp((*st)[0]); i < clamp((*en)[0]); ++i) dims.push_back((*data)[static_cast<size_t>(i)]);
    if (static_cast<int64_t>(dims.size()) != out_n) return std::nullopt;
    return dims;
  }
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
    auto a = input_dims(0);
    auto b = input_dims(1);
    if (!a || !b) return std::nullopt;
    const size_t n = std::max(a->size(), b->size());
    if ((a->size() != n && a->size() != 1) || (b->size() != n && b->size() != 1)) return std::nullopt;
    std::vector<graph::Dim> dims;
    for (size_t i = 0; i < n; ++i) {
      const graph::Dim& x = (*a)[a->size() == 1 ? 0 : i];
      const graph::Dim& y = (*b)[b->size() == 1 ? 0 : i];
      if (op == "Div" && (!y.is_static() || y.value() <= 0)) return std::nullopt;
      if (op == "Sub" && (!x.is_static() || !y.is_static())) return std::nullopt;  // dims stay non-negative
      dims.push_back(op == "Add" ? x + y : op == "Sub" ? x - y : op == "Mul" ? x * y : x / y);
    }
    if (static_cast<int64_t>(dims.size()) != out_n) return std::nullopt;
    return dims;
  }
  return std::nullopt;
}

Result<int64_t> checked_count(const pb::TensorProto& t, const std::string& what) {
  std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
  Result<Shape> shape = Shape::make(dims);
  if (!shape.ok()) return invalid_argument("{}: bad dims: {}", what, shape.status().message());
  return shape->num_elements();
}

}  // namespace

Result<DType> dtype_from_onnx(int32_t data_type) {
  switch (data_type) {
    case pb::TensorProto::FLOAT: return DType::kF32;
    case pb::TensorProto::UINT8: return DType::kU8;
    case pb::TensorProto::INT8: return DType::kI8;
    case pb::TensorProto::INT32: return DType::kI32;
    case pb::TensorProto::INT64: return DType::kI64;
    case pb::TensorProto::BOOL: return DType::kBool;
    case pb::TensorProto::FLOAT16: return DType::kF16;
    case pb::TensorProto::BFLOAT16: return DType::kBF16;
    default: break;
  }
  const std::string name = pb::TensorProto::DataType_IsValid(data_type)
                               ? pb::TensorProto::DataType_Name(static_cast<pb::TensorProto::DataType>(data_type))
                               : fmt::format("code {}", data_type);
  return unimplemented("ONNX tensor type {} is not supported (hxrt reads float, float16, bfloat16, int8, uint8, "
                       "int32, int64, bool)", name);
}

int32_t dtype_to_onnx(DType dtype) {
  switch (dtype) {
    case DType::kF32: return pb::TensorProto::FLOAT;
    case DType::kF16: return pb::TensorProto::FLOAT16;
    case DType::kBF16: return pb::TensorProto::BFLOAT16;
    case DType::kI8: return pb::TensorProto::INT8;
    case DType::kU8: return pb::TensorProto::UINT8;
    case DType::kI32: return pb::TensorProto::INT32;
    case DType::kI64: return pb::TensorProto::INT64;
    case DType::kBool: return pb::TensorProto::BOOL;
    default: return pb::TensorProto::UNDEFINED;
  }
}

bool is_onnx_path(const std::string& path) {
  return path.size() >= 5 && path.compare(path.size() - 5, 5, ".onnx") == 0;
}

namespace {

// A tensor's bytes as hxrt stores them: raw_data in place (the proto stays alive through `keepalive`), typed
// fields converted, external data mapped from its file.
Result<graph::WeightData> tensor_bytes(const pb::TensorProto& t, DType dtype, const std::string& what,
                                       const std::shared_ptr<const void>& keepalive, const std::string& dir) {
  HXRT_ASSIGN_OR_RETURN(int64_t count, checked_count(t, what));
  HXRT_ASSIGN_OR_RETURN(const uint64_t bytes, storage_bytes(dtype, static_cast<uint64_t>(count)));
  if (t.data_location() == pb::TensorProto::EXTERNAL) {
    std::string location;
    uint64_t offset = 0;
    std::optional<uint64_t> length;
    for (const pb::StringStringEntryProto& entry : t.external_data()) {
      try {
        if (entry.key() == "location") location = entry.value();
        if (entry.key() == "offset") offset = std::stoull(entry.value());
        if (entry.key() == "length") length = std::stoull(entry.value());
      } catch (const std::exception&) {
        return invalid_argument("{}: external data field '{}' is not a number: '{}'", what, entry.key(),
                                entry.value());
      }
    }
    if (location.empty()) return invalid_argument("{}: external data without a location", what);
    if (location.find("..") != std::string::npos || location.front() == '/') {
      return invalid_argument("{}: external data location '{}' leaves the model's folder", what, location);
    }
    const std::string path = dir.empty() ? location : dir + "/" + location;
    Result<std::shared_ptr<const MappedFile>> mapped = map_file(path, "ONNX external data file");
    if (!mapped.ok()) return std::move(mapped).take_status().with_context(fmt::format("reading the data of {}", what));
    const std::shared_ptr<const MappedFile> file = std::move(mapped).value();
    const uint64_t size = length.value_or(bytes);
    if (size != bytes || offset > file->bytes().size() || size > file->bytes().size() - offset) {
      return invalid_argument("{}: external data '{}' offset {} length {} does not hold {} bytes (file of {})", what,
                              location, offset, size, bytes, file->bytes().size());
    }
    return graph::WeightData{file->bytes().data() + offset, bytes, file};
  }
  if (t.has_raw_data()) {
    if (t.raw_data().size() != bytes) {
      return invalid_argument("{}: raw_data holds {} bytes, {} elements of {} need {}", what, t.raw_data().size(),
                              count, dtype, bytes);
    }
    return graph::WeightData{reinterpret_cast<const std::byte*>(t.raw_data().data()), bytes, keepalive};
  }
  // The typed field must hold what the dims say before anything is allocated for it: the dims alone may claim
  // gigabytes (the onnx_import fuzz target's find).
  int64_t held = t.int32_data_size();
  std::string_view field = "int32_data";
  if (dtype == DType::kF32) {
    held = t.float_data_size();
    field = "float_data";
  } else if (dtype == DType::kI64) {
    held = t.int64_data_size();
    field = "int64_data";
  }
  if (held != count) return invalid_argument("{}: {} holds {} values, the dims need {}", what, field, held, count);
  std::vector<std::byte> out(bytes);
  switch (dtype) {
    case DType::kF32:
      if (count > 0) std::memcpy(out.data(), t.float_data().data(), bytes);
      break;
    case DType::kI64:
      if (count > 0) std::memcpy(out.data(), t.int64_data().data(), bytes);
      break;
    case DType::kI32:
      if (count > 0) std::memcpy(out.data(), t.int32_data().data(), bytes);
      break;
    case DType::kI8:
    case DType::kU8:
    case DType::kBool:
      for (int64_t i = 0; i < count; ++i) out[static_cast<size_t>(i)] = static_cast<std::byte>(t.int32_data(static_cast<int>(i)));
      break;
    case DType::kF16:
    case DType::kBF16:
      for (int64_t i = 0; i < count; ++i) {
        const auto bits = static_cast<uint16_t>(t.int32_data(static_cast<int>(i)));
        std::memcpy(out.data() + 2 * i, &bits, 2);
      }
      break;
    default: return unimplemented("{}: dtype {}", what, dtype);
  }
  return graph::WeightData::copy_of(out);
}

Result<graph::TensorValue> tensor_value(const pb::TensorProto& t, const std::string& what,
                                        const std::shared_ptr<const void>& keepalive, const std::string& dir) {
  Result<DType> dtype = dtype_from_onnx(t.data_type());
  if (!dtype.ok()) return invalid_argument("{}: {}", what, dtype.status().message());
  std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
  Result<Shape> shape = Shape::make(dims);
  if (!shape.ok()) return invalid_argument("{}: bad dims: {}", what, shape.status().message());
  HXRT_ASSIGN_OR_RETURN(graph::WeightData weight, tensor_bytes(t, *dtype, what, keepalive, dir));
  graph::TensorValue value{.dtype = *dtype, .shape = *shape};
  value.data.assign(weight.data, weight.data + weight.size);
  return value;
}

Result<graph::Attribute> convert_attribute(const pb::AttributeProto& a, const std::string& what,
                                           const std::shared_ptr<const void>& keepalive, const std::string& dir) {
  switch (a.type()) {
    case pb::AttributeProto::INT: return graph::Attribute(static_cast<int64_t>(a.i()));
    case pb::AttributeProto::FLOAT: return graph::Attribute(static_cast<double>(a.f()));
    case pb::AttributeProto::STRING: return graph::Attribute(a.s());
    case pb::AttributeProto::INTS: return graph::Attribute(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
    case pb::AttributeProto::FLOATS: {
      std::vector<double> values(a.floats().begin(), a.floats().end());
      return graph::Attribute(std::move(values));
    }
    case pb::AttributeProto::STRINGS:
      return graph::Attribute(std::vector<std::string>(a.strings().begin(), a.strings().end()));
    case pb::AttributeProto::TENSOR: {
      HXRT_ASSIGN_OR_RETURN(graph::TensorValue value, tensor_value(a.t(), what, keepalive, dir));
      return graph::Attribute(std::move(value));
    }
    default: break;
  }
  return unimplemented("{}: attribute type {} is not supported", what,
                       pb::AttributeProto::AttributeType_Name(a.type()));
}

// hxrt symbols are identifiers: "batch_size" stays, "seq len" becomes "seq_len", "2x" becomes "_2x".
std::string symbol_name(std::string_view param) {
  std::string out;
  for (char c : param) out += (std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_') ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out.front())) != 0) out.insert(out.begin(), '_');
  return out;
}

class Importer;

class Context final : public onnx::ConversionContext {
 public:
  Context(Importer& importer, const onnx::OnnxNodeView& node, OnnxNodeReport& report)
      : ConversionContext(node), importer_(importer), report_(report) {}

  std::string input(size_t i) const override;
  const graph::TensorDesc* input_desc(size_t i) const override;
  const graph::TensorValue* constant(size_t i) const override;
  Result<graph::TensorValue> require_constant(size_t i, std::string_view what) override;
  Status emit(std::string op_type, std::vector<std::string> inputs, std::vector<std::string> outputs,
              graph::AttributeMap attrs, std::string domain, int version) override;
  std::string temp(std::string_view hint) override;
  std::string add_constant(graph::TensorValue value, std::string_view hint) override;
  Status alias_output(size_t i, const std::string& value) override;

  const std::vector<std::string>& needed() const { return needed_; }

 private:
  Importer& importer_;
  OnnxNodeReport& report_;
  mutable std::vector<std::unique_ptr<graph::TensorValue>> constants_;  // what constant() handed out
  std::vector<std::string> needed_;  // the values require_constant asked for and did not find
  int emitted_ = 0;
};

class Importer {
 public:
  Importer(const OnnxImportOptions& options, const onnx::ConverterRegistry& converters, std::string file)
      : options_(options), converters_(converters), file_(std::move(file)) {}

  Result<OnnxImport> run(const pb::ModelProto& model, const std::shared_ptr<const void>& keepalive);

  ValueState* state(const std::string& hxrt_name) {
    auto it = states_.find(hxrt_name);
    return it == states_.end() ? nullptr : &it->second;
  }
  std::string fresh_name(std::string_view base) {
    std::string name(base);
    for (int k = 1; states_.count(name) != 0 || used_names_.count(name) != 0; ++k) name = fmt::format("{}_{}", base, k);
    used_names_.insert(name);
    return name;
  }
  std::string fresh_node_name(std::string_view base) {
    std::string name(base);
    for (int k = 1; node_names_.count(name) != 0; ++k) name = fmt::format("{}/{}", base, k);
    node_names_.insert(name);
    return name;
  }
  std::string add_known(graph::TensorValue value, std::string_view hint) {
    const std::string name = fresh_name(hint);
    ValueState& s = states_[name];
    s.hxrt_name = name;
    s.desc = graph::TensorDesc{value.dtype, graph::SymShape::from(value.shape)};
    const auto data = std::make_shared<const graph::TensorValue>(std::move(value));
    s.known = graph::WeightData{data->data.data(), data->data.size(), data};
    return name;
  }
  // Adds a known value to the graph as an initializer (once).
  Status materialize(ValueState& s) {
    if (s.in_graph) return ok_status();
    HXRT_RETURN_IF_ERROR(graph_.add_initializer(s.hxrt_name, *s.desc, *s.known).status());
    s.in_graph = true;
    return ok_status();
  }
  Status emit(Context& ctx, OnnxNodeReport& report, int index, std::string op_type, std::vector<std::string> inputs,
              std::vector<std::string> outputs, graph::AttributeMap attrs, std::string domain, int version);
  Status alias(const std::string& onnx_name, const std::string& hxrt_name) {
    ValueState* from = state(hxrt_name);
    if (from == nullptr) return invalid_argument("alias of unknown value '{}'", hxrt_name);
    if (states_.count(onnx_name) != 0) return invalid_argument("value '{}' is produced twice", onnx_name);
    ValueState copy = *from;
    states_[onnx_name] = std::move(copy);  // hxrt_name stays the aliased value's
    return ok_status();
  }
  std::set<std::string> deps_of(const std::string& hxrt_name) {
    ValueState* s = state(hxrt_name);
    return s == nullptr ? std::set<std::string>{} : s->value_deps;
  }

 private:
  Status add_graph_input(const pb::ValueInfoProto& info);
  Result<std::optional<std::vector<graph::TensorValue>>> try_fold(const std::string& node_name,
                                                                  const std::string& op_type,
                                                                  const std::vector<std::string>& inputs,
                                                                  size_t num_outputs, const graph::AttributeMap& attrs,
                                                                  const std::string& domain, int version);

  const OnnxImportOptions& options_;
  const onnx::ConverterRegistry& converters_;
  std::string file_;
  std::string dir_;
  graph::Graph graph_;
  std::unordered_map<std::string, ValueState> states_;  // by ONNX value name (and hxrt temps)
  std::set<std::string> used_names_;
  std::set<std::string> node_names_;
};

std::string Context::input(size_t i) const {
  if (!has_input(i)) return "";
  ValueState* s = importer_.state(node().inputs[i]);
  return s == nullptr ? node().inputs[i] : s->hxrt_name;
}

const graph::TensorDesc* Context::input_desc(size_t i) const {
  if (!has_input(i)) return nullptr;
  ValueState* s = importer_.state(node().inputs[i]);
  return s == nullptr || !s->desc ? nullptr : &*s->desc;
}

const graph::TensorValue* Context::constant(size_t i) const {
  if (!has_input(i)) return nullptr;
  ValueState* s = importer_.state(node().inputs[i]);
  if (s == nullptr || !s->known || !s->desc || !s->desc->shape.is_static()) return nullptr;
  auto value = std::make_unique<graph::TensorValue>();
  value->dtype = s->desc->dtype;
  value->shape = *s->desc->shape.resolve({});
  value->data.assign(s->known->data, s->known->data + s->known->size);
  constants_.push_back(std::move(value));
  return constants_.back().get();
}

Result<graph::TensorValue> Context::require_constant(size_t i, std::string_view what) {
  if (!has_input(i)) return error(fmt::format("input '{}' is required", what));
  if (const graph::TensorValue* value = constant(i)) return *value;
  needed_.push_back(node().inputs[i]);
  return failed_precondition("node '{}' ({}, opset {}): input '{}' ('{}') must be known before the graph runs, and "
                             "it is computed from the graph's inputs",
                             node().name, node().op_type, node().opset, what, node().inputs[i]);
}

Status Context::emit(std::string op_type, std::vector<std::string> inputs, std::vector<std::string> outputs,
                     graph::AttributeMap attrs, std::string domain, int version) {
  return importer_.emit(*this, report_, emitted_++, std::move(op_type), std::move(inputs), std::move(outputs),
                        std::move(attrs), std::move(domain), version);
}

std::string Context::temp(std::string_view hint) {
  return importer_.fresh_name(fmt::format("{}/{}", node().name, hint));
}

std::string Context::add_constant(graph::TensorValue value, std::string_view hint) {
  return importer_.add_known(std::move(value), fmt::format("{}/{}", node().name, hint));
}

Status Context::alias_output(size_t i, const std::string& value) {
  if (!has_output(i)) return ok_status();
  report_.aliased = true;
  Status status = importer_.alias(node().outputs[i], value);
  if (!status.ok()) return error(status.message());
  return ok_status();
}

Status Importer::add_graph_input(const pb::ValueInfoProto& info) {
  const std::string& name = info.name();
  if (name.empty()) return invalid_argument("a graph input has no name");
  if (!info.type().has_tensor_type()) {
    return unimplemented("graph input '{}' is not a tensor (sequences, maps and optionals are not supported)", name);
  }
  const pb::TypeProto::Tensor& tensor = info.type().tensor_type();
  Result<DType> dtype = dtype_from_onnx(tensor.elem_type());
  if (!dtype.ok()) return invalid_argument("graph input '{}': {}", name, dtype.status().message());
  ValueState s;
  s.hxrt_name = name;
  if (auto value = options_.input_values.find(name); value != options_.input_values.end()) {
    if (value->second.dtype != *dtype) {
      return invalid_argument("graph input '{}' is {}, the value bound to it {}", name, *dtype, value->second.dtype);
    }
    s.desc = graph::TensorDesc{*dtype, graph::SymShape::from(value->second.shape)};
    const auto data = std::make_shared<const graph::TensorValue>(value->second);
    s.known = graph::WeightData{data->data.data(), data->data.size(), data};
    used_names_.insert(name);
    states_[name] = std::move(s);
    return ok_status();
  }
  graph::SymShape shape;
  if (auto bound = options_.input_shapes.find(name); bound != options_.input_shapes.end()) {
    shape = graph::SymShape::from(bound->second);
  } else if (tensor.has_shape()) {
    for (int d = 0; d < tensor.shape().dim_size(); ++d) {
      const pb::TensorShapeProto::Dimension& dim = tensor.shape().dim(d);
      if (dim.has_dim_value()) {
        if (dim.dim_value() < 0) return invalid_argument("graph input '{}': dim {} is {}", name, d, dim.dim_value());
        shape.mutable_dims().push_back(graph::Dim(dim.dim_value()));
      } else if (dim.has_dim_param() && !dim.dim_param().empty()) {
        shape.mutable_dims().push_back(graph::Dim::symbol(symbol_name(dim.dim_param())));
      } else {
        shape.mutable_dims().push_back(graph::Dim::symbol(symbol_name(fmt::format("{}_dim{}", name, d))));
      }
    }
    if (shape.rank() > Shape::kMaxRank) return unimplemented("graph input '{}' has rank {} (at most {})", name, shape.rank(), Shape::kMaxRank);
  } else {
    return unimplemented("graph input '{}' has no shape (its rank must be known)", name);
  }
  s.desc = graph::TensorDesc{*dtype, shape};
  s.value_deps.insert(name);
  HXRT_RETURN_IF_ERROR(graph_.add_input(name, *s.desc).status());
  s.in_graph = true;
  used_names_.insert(name);
  states_[name] = std::move(s);
  return ok_status();
}

Result<std::optional<std::vector<graph::TensorValue>>> Importer::try_fold(
    const std::string& node_name, const std::string& op_type, const std::vector<std::string>& inputs,
    size_t num_outputs, const graph::AttributeMap& attrs, const std::string& domain, int version) {
  if (!options_.evaluate) return std::optional<std::vector<graph::TensorValue>>();
  bool any = false;
  for (const std::string& in : inputs) {
    if (in.empty()) continue;
    ValueState* s = state(in);
    if (s == nullptr || !s->known || !s->desc || !s->desc->shape.is_static()) return std::optional<std::vector<graph::TensorValue>>();
    any = true;
  }
  if (!any) return std::optional<std::vector<graph::TensorValue>>();
  graph::Graph g(node_name);
  std::vector<std::string> in_names;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].empty()) {
      in_names.emplace_back();
      continue;
    }
    ValueState* s = state(inputs[i]);
    const std::string name = fmt::format("in{}", i);
    HXRT_RETURN_IF_ERROR(g.add_initializer(name, *s->desc, *s->known).status());
    in_names.push_back(name);
  }
  std::vector<std::string> out_names;
  for (size_t i = 0; i < num_outputs; ++i) out_names.push_back(fmt::format("out{}", i));
  HXRT_RETURN_IF_ERROR(g.add_node(node_name, op_type, in_names, out_names, attrs, domain, version).status());
  for (const std::string& out : out_names) HXRT_RETURN_IF_ERROR(g.mark_output(out));
  Result<std::vector<graph::TensorValue>> values = options_.evaluate(std::move(g));
  if (!values.ok()) {
    // No host kernel for it: the node stays in the graph. Other failures (a bad attribute, an index out of
    // range) are the node's errors.
    if (values.status().code() == StatusCode::kNotFound || values.status().code() == StatusCode::kUnimplemented) {
      return std::optional<std::vector<graph::TensorValue>>();
    }
    return values.status();
  }
  return std::optional<std::vector<graph::TensorValue>>(std::move(values).value());
}

Status Importer::emit(Context& ctx, OnnxNodeReport& report, int index, std::string op_type,
                      std::vector<std::string> inputs, std::vector<std::string> outputs, graph::AttributeMap attrs,
                      std::string domain, int version) {
  // Shape and Size read only their input's shape: their outputs depend on the inputs' shapes, not values.
  const bool reads_shape = domain.empty() && (op_type == "Shape" || op_type == "Size");
  std::set<std::string> deps;
  bool shape_dependent = reads_shape;
  std::vector<ValueState*> in_states;  // null for an omitted input
  for (const std::string& in : inputs) {
    ValueState* s = in.empty() ? nullptr : state(in);
    if (!in.empty() && s == nullptr) return ctx.error(fmt::format("emits {} reading the unknown value '{}'", op_type, in));
    if (s != nullptr && !reads_shape) {
      deps.insert(s->value_deps.begin(), s->value_deps.end());
      shape_dependent = shape_dependent || s->shape_dependent;
    }
    in_states.push_back(s);
  }
  for (const std::string& out : outputs) {
    if (!out.empty() && states_.count(out) != 0) {
      return ctx.error(fmt::format("value '{}' is produced twice", out));
    }
  }
  const std::string node_name = fresh_node_name(index == 0 ? ctx.node().name : fmt::format("{}/{}", ctx.node().name, op_type));
  HXRT_ASSIGN_OR_RETURN(std::optional<std::vector<graph::TensorValue>> folded,
                        try_fold(node_name, op_type, inputs, outputs.size(), attrs, domain, version));
  if (folded) {
    ++report.folded;
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (outputs[i].empty()) continue;
      graph::TensorValue& v = (*folded)[i];
      ValueState& s = states_[outputs[i]];
      s.hxrt_name = outputs[i];
      s.desc = graph::TensorDesc{v.dtype, graph::SymShape::from(v.shape)};
      const auto data = std::make_shared<const graph::TensorValue>(std::move(v));
      s.known = graph::WeightData{data->data.data(), data->data.size(), data};
      used_names_.insert(outputs[i]);
    }
    return ok_status();
  }
  std::vector<std::string> hxrt_inputs;
  for (ValueState* s : in_states) {
    if (s != nullptr && !s->in_graph) HXRT_RETURN_IF_ERROR(materialize(*s));
    hxrt_inputs.push_back(s == nullptr ? std::string() : s->hxrt_name);
  }
  std::vector<std::string> hxrt_outputs;
  for (size_t i = 0; i < outputs.size(); ++i) {
    // An omitted optional output still needs a value in hxrt's graph.
    hxrt_outputs.push_back(outputs[i].empty() ? fresh_name(fmt::format("{}/unused{}", node_name, i)) : outputs[i]);
    used_names_.insert(hxrt_outputs.back());
  }
  Result<graph::NodeId> id = graph_.add_node(node_name, op_type, hxrt_inputs, hxrt_outputs, std::move(attrs), domain, version);
  if (!id.ok()) return ctx.error(id.status().message());
  std::vector<ops::DimCheck> checks;
  graph::Node& node = graph_.mutable_node(*id);
  Status status = options_.schemas->resolve_version(node);
  if (status.ok()) status = options_.schemas->check_node(graph_, node);
  if (status.ok()) status = options_.schemas->infer_node(graph_, *id, &checks);
  if (!status.ok()) {
    return std::move(status).with_context(fmt::format("converting ONNX node '{}' ({}, opset {})", ctx.node().name,
                                                      ctx.node().op_type, ctx.node().opset));
  }
  // Note [Shape values]: a single integer output computed from shapes is followed as dims, and folded when static.
  if (hxrt_outputs.size() == 1 && domain.empty()) {
    HXRT_ASSIGN_OR_RETURN(graph::ValueId vid, graph_.find_value(hxrt_outputs[0]));
    const graph::TensorDesc desc = graph_.value(vid).desc;
    std::optional<std::vector<graph::Dim>> dims = propagate_dims(graph_.node(*id), in_states, desc);
    if (dims) {
      if (std::optional<std::vector<int64_t>> values = static_values(*dims)) {
        HXRT_RETURN_IF_ERROR(graph_.remove_node(*id));
        graph::TensorValue value{.dtype = desc.dtype, .shape = *desc.shape.resolve({})};
        for (int64_t v : *values) {
          if (desc.dtype == DType::kI32) {
            const auto v32 = static_cast<int32_t>(v);
            const auto* p = reinterpret_cast<const std::byte*>(&v32);
            value.data.insert(value.data.end(), p, p + 4);
          } else {
            const auto* p = reinterpret_cast<const std::byte*>(&v);
            value.data.insert(value.data.end(), p, p + 8);
          }
        }
        const std::string known = add_known(std::move(value), fmt::format("{}/folded", hxrt_outputs[0]));
        if (!outputs[0].empty()) {
          ValueState copy = states_[known];
          states_[outputs[0]] = std::move(copy);
        }
        ++report.folded;
        return ok_status();
      }
    }
    if (!outputs[0].empty()) states_[outputs[0]].dims = std::move(dims);
  }
  for (const std::string& out : hxrt_outputs) {
    ValueState& s = states_[out];
    s.hxrt_name = out;
    HXRT_ASSIGN_OR_RETURN(graph::ValueId vid, graph_.find_value(out));
    s.desc = graph_.value(vid).desc;
    s.in_graph = true;
    s.value_deps = deps;
    s.shape_dependent = shape_dependent;
  }
  report.hxrt_nodes.push_back(fmt::format("{} ({})", node_name, op_type));
  return ok_status();
}

Result<OnnxImport> Importer::run(const pb::ModelProto& model, const std::shared_ptr<const void>& keepalive) {
  OnnxImport out;
  out.ir_version = model.ir_version();
  if (model.ir_version() < 3 || model.ir_version() > 10) {
    return unimplemented("IR version {} is not supported (hxrt reads IR 3 to 10)", model.ir_version());
  }
  out.producer = fmt::format("{} {}", model.producer_name(), model.producer_version());
  for (const pb::OperatorSetIdProto& opset : model.opset_import()) {
    const std::string domain = opset.domain() == "ai.onnx" ? "" : opset.domain();
    out.opsets[domain] = static_cast<int>(opset.version());
  }
  if (out.opsets.count("") == 0) return invalid_argument("the model imports no ai.onnx opset");
  if (!model.has_graph()) return invalid_argument("the model has no graph");
  const pb::GraphProto& g = model.graph();
  graph_ = graph::Graph(g.name().empty() ? "onnx" : g.name());
  dir_ = options_.external_data_dir;

  // Initializers (some exporters also list them as graph inputs: those are not inputs).
  std::set<std::string> initializer_names;
  for (int i = 0; i < g.initializer_size(); ++i) {
    const pb::TensorProto& t = g.initializer(i);
    const std::string what = fmt::format("initializer '{}'", t.name());
    if (t.name().empty()) return invalid_argument("initializer {} has no name", i);
    if (!initializer_names.insert(t.name()).second) return invalid_argument("{} is defined twice", what);
    Result<DType> dtype = dtype_from_onnx(t.data_type());
    if (!dtype.ok()) return invalid_argument("{}: {}", what, dtype.status().message());
    std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
    Result<Shape> shape = Shape::make(dims);
    if (!shape.ok()) return invalid_argument("{}: bad dims: {}", what, shape.status().message());
    HXRT_ASSIGN_OR_RETURN(graph::WeightData weight, tensor_bytes(t, *dtype, what, keepalive, dir_));
    ValueState s;
    s.hxrt_name = t.name();
    s.desc = graph::TensorDesc{*dtype, graph::SymShape::from(*shape)};
    s.known = std::move(weight);
    used_names_.insert(t.name());
    states_[t.name()] = std::move(s);
  }
  if (g.sparse_initializer_size() > 0) return unimplemented("sparse initializers are not supported");
  // Output names first: an import that stops for bind-time values still names them (their sources come last).
  for (const pb::ValueInfoProto& output : g.output()) out.outputs.push_back(OnnxOutput{.name = output.name()});
  for (const pb::ValueInfoProto& input : g.input()) {
    if (initializer_names.count(input.name()) != 0) continue;
    if (states_.count(input.name()) != 0) return invalid_argument("graph input '{}' is listed twice", input.name());
    HXRT_RETURN_IF_ERROR(add_graph_input(input));
    out.inputs.push_back(input.name());
    out.input_types.push_back(*states_[input.name()].desc);
  }

  // Nodes in topological order (ONNX requires it; a node reading a value produced later is a cycle or a dangling
  // input, reported as such).
  std::set<std::string> produced_later;
  for (const pb::NodeProto& n : g.node()) {
    for (const std::string& o : n.output()) if (!o.empty()) produced_later.insert(o);
  }
  for (int index = 0; index < g.node_size(); ++index) {
    const pb::NodeProto& n = g.node(index);
    onnx::OnnxNodeView view;
    view.op_type = n.op_type();
    view.domain = n.domain() == "ai.onnx" ? "" : n.domain();
    view.name = fresh_node_name(n.name().empty() ? fmt::format("{}_{}", n.op_type(), index) : n.name());
    node_names_.erase(view.name);  // emit() claims it for the first hxrt node
    auto opset = out.opsets.find(view.domain);
    if (opset == out.opsets.end()) {
      return invalid_argument("node '{}' ({}): the model imports no opset for its domain '{}'", view.name,
                              view.op_type, view.domain);
    }
    view.opset = opset->second;
    view.inputs.assign(n.input().begin(), n.input().end());
    view.outputs.assign(n.output().begin(), n.output().end());
    for (const std::string& in : view.inputs) {
      if (in.empty() || states_.count(in) != 0) continue;
      if (produced_later.count(in) != 0) {
        return failed_precondition("node '{}' ({}) reads '{}' before any node produced it: the graph has a cycle or "
                                   "is not in topological order", view.name, view.op_type, in);
      }
      return invalid_argument("node '{}' ({}) reads '{}', which is neither a graph input, an initializer nor a node "
                              "output", view.name, view.op_type, in);
    }
    for (const pb::AttributeProto& a : n.attribute()) {
      const std::string what = fmt::format("node '{}' ({}): attribute '{}'", view.name, view.op_type, a.name());
      if (!a.ref_attr_name().empty()) return unimplemented("{}: references a function attribute", what);
      HXRT_ASSIGN_OR_RETURN(graph::Attribute attr, convert_attribute(a, what, keepalive, dir_));
      view.attrs.set(a.name(), std::move(attr));
    }
    OnnxNodeReport& report = out.nodes.emplace_back();
    report.name = view.name;
    report.op_type = view.op_type;
    report.domain = view.domain;
    report.opset = view.opset;
    Result<const onnx::ConverterDef*> converter = converters_.find(view.domain, view.op_type, view.opset);
    if (!converter.ok()) {
      return std::move(converter).take_status().with_context(fmt::format("node '{}'", view.name));
    }
    report.converter = (*converter)->label();
    Context ctx(*this, view, report);
    Status status = (*converter)->convert(ctx);
    if (!status.ok()) {
      if (!ctx.needed().empty()) {
        std::set<std::string> deps;
        bool shapes = false;
        for (const std::string& needed : ctx.needed()) {
          const std::set<std::string> d = deps_of(needed);
          deps.insert(d.begin(), d.end());
          const ValueState* s = state(needed);
          shapes = shapes || (s != nullptr && s->shape_dependent);
        }
        // Shapes only (every input's shape is bound at bind time), or values of the inputs named.
        if (!deps.empty() || shapes) {
          out.bind_time = OnnxBindTimeNeeds{std::vector<std::string>(deps.begin(), deps.end()), std::string(status.message())};
          return out;
        }
      }
      return status;
    }
    for (const std::string& o : view.outputs) {
      if (!o.empty() && states_.count(o) == 0) {
        return internal_error("converter {} did not produce output '{}' of node '{}'", report.converter, o, view.name);
      }
    }
  }

  std::set<std::string> marked;
  for (size_t index = 0; index < out.outputs.size(); ++index) {
    const pb::ValueInfoProto& output = g.output(static_cast<int>(index));
    ValueState* s = state(output.name());
    if (s == nullptr) return invalid_argument("graph output '{}' is produced by no node", output.name());
    OnnxOutput& o = out.outputs[index];
    if (s->known && !s->in_graph) {
      graph::TensorValue value{.dtype = s->desc->dtype, .shape = *s->desc->shape.resolve({})};
      value.data.assign(s->known->data, s->known->data + s->known->size);
      o.constant = std::move(value);
      continue;
    }
    HXRT_ASSIGN_OR_RETURN(graph::ValueId vid, graph_.find_value(s->hxrt_name));
    const graph::Value& v = graph_.value(vid);
    if (v.is_input) {
      o.input = v.name;
    } else if (v.is_initializer) {
      graph::TensorValue value{.dtype = v.desc.dtype, .shape = *v.desc.shape.resolve({})};
      value.data.assign(v.weight.data, v.weight.data + v.weight.size);
      o.constant = std::move(value);
    } else {
      o.value = v.name;
      if (marked.insert(v.name).second) HXRT_RETURN_IF_ERROR(graph_.mark_output(v.name));
    }
  }
  graph_.compact();  // drops the outputs of nodes taken out again (Note [Shape values])
  out.graph = std::move(graph_);
  return out;
}

}  // namespace

Result<std::shared_ptr<const OnnxModelFile>> OnnxModelFile::parse(std::span<const std::byte> bytes,
                                                                   std::string name, std::string external_data_dir) {
  if (bytes.size() > static_cast<size_t>(INT_MAX)) {
    return unimplemented("ONNX file '{}' is {} bytes; protobuf reads at most 2 GiB (use external data)", name,
                         bytes.size());
  }
  auto model = std::make_shared<pb::ModelProto>();
  google::protobuf::io::CodedInputStream stream(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                static_cast<int>(bytes.size()));
  stream.SetTotalBytesLimit(INT_MAX);
  if (!model->ParseFromCodedStream(&stream) || !stream.ConsumedEntireMessage()) {
    return invalid_argument("'{}' is not a valid ONNX model: the protobuf does not parse (truncated or not ONNX)", name);
  }
  return std::shared_ptr<const OnnxModelFile>(
      new OnnxModelFile(std::move(model), std::move(name), std::move(external_data_dir)));
}

Result<std::shared_ptr<const OnnxModelFile>> OnnxModelFile::open(const std::string& path) {
  HXRT_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> file, map_file(path, "ONNX file"));
  const size_t slash = path.rfind('/');
  return parse(file->bytes(), path, slash == std::string::npos ? "." : path.substr(0, slash));
}

Result<OnnxImport> OnnxModelFile::import(const OnnxImportOptions& options) const {
  if (options.schemas == nullptr) return invalid_argument("import_onnx: OnnxImportOptions::schemas is required");
  onnx::ConverterRegistry builtin;
  const onnx::ConverterRegistry* converters = options.converters;
  if (converters == nullptr) {
    HXRT_RETURN_IF_ERROR(onnx::register_builtin_converters(builtin));
    converters = &builtin;
  }
  OnnxImportOptions with_dir = options;
  if (with_dir.external_data_dir.empty()) with_dir.external_data_dir = external_data_dir_;
  const auto& model = *static_cast<const pb::ModelProto*>(proto_.get());
  Importer importer(with_dir, *converters, name_);
  Result<OnnxImport> out = importer.run(model, proto_);
  if (!out.ok()) return std::move(out).take_status().with_context(fmt::format("importing ONNX model '{}'", name_));
  return out;
}

Result<OnnxImport> import_onnx(std::span<const std::byte> bytes, const OnnxImportOptions& options,
                               const std::string& name) {
  HXRT_ASSIGN_OR_RETURN(std::shared_ptr<const OnnxModelFile> file, OnnxModelFile::parse(bytes, name, ""));
  return file->import(options);
}

Result<OnnxImport> import_onnx_file(const std::string& path, const OnnxImportOptions& options) {
  HXRT_ASSIGN_OR_RETURN(std::shared_ptr<const OnnxModelFile> file, OnnxModelFile::open(path));
  return file->import(options);
}

Result<std::pair<std::string, graph::TensorValue>> read_onnx_tensor(std::span<const std::byte> bytes) {
  auto tensor = std::make_shared<pb::TensorProto>();
  if (!tensor->ParseFromArray(bytes.data(), static_cast<int>(std::min<size_t>(bytes.size(), INT_MAX)))) {
    return invalid_argument("not a serialized ONNX TensorProto");
  }
  HXRT_ASSIGN_OR_RETURN(graph::TensorValue value,
                        tensor_value(*tensor, fmt::format("tensor '{}'", tensor->name()), tensor, ""));
  return std::pair<std::string, graph::TensorValue>(tensor->name(), std::move(value));
}

}  // namespace hxrt::formats
