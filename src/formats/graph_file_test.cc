#include "hxrt/formats/graph_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <new>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hxrt::formats {
namespace {

using graph::AttributeMap;
using graph::Dim;
using graph::Graph;
using graph::NodeId;
using graph::SymShape;
using graph::TensorDesc;
using graph::TensorValue;
using graph::ValueId;
using graph::WeightData;
using nlohmann::json;
using Names = std::vector<std::string>;

// ---- Fixtures made by code ----------------------------------------------------------------------------------

// Bytes that differ per tensor and position, so a weight read from the wrong place shows.
WeightData pattern(uint64_t bytes, uint8_t seed) {
  std::vector<std::byte> data(bytes);
  for (uint64_t i = 0; i < bytes; ++i) data[i] = static_cast<std::byte>((i * 131 + seed * 7 + (i >> 8)) & 0xff);
  return WeightData::copy_of(data);
}

WeightData weight_for(DType dtype, uint64_t elements, uint8_t seed) {
  Result<uint64_t> bytes = storage_bytes(dtype, elements);
  EXPECT_TRUE(bytes.ok()) << bytes.status().to_string();
  return pattern(*bytes, seed);
}

// A graph with several dtypes (q4_1, q8_0, f16, bf16, i8), symbolic dims, every attribute type, an omitted
// optional input, a two-output node, a fused node and a declared intermediate desc.
Graph make_rich_graph() {
  Graph g("rich model");
  const Dim n = Dim::symbol("n_tokens");
  EXPECT_TRUE(g.add_input("x", TensorDesc{DType::kF32, SymShape{n, 64}}).ok());
  EXPECT_TRUE(g.add_input("pos", TensorDesc{DType::kI32, SymShape{n}}).ok());
  EXPECT_TRUE(
      g.add_initializer("w_q41", TensorDesc{DType::kQ4_1, SymShape{64, 64}}, weight_for(DType::kQ4_1, 4096, 1)).ok());
  EXPECT_TRUE(g.add_initializer("norm", TensorDesc{DType::kF16, SymShape{64}}, weight_for(DType::kF16, 64, 2)).ok());
  EXPECT_TRUE(g.add_initializer("table", TensorDesc{DType::kI8, SymShape{3}}, weight_for(DType::kI8, 3, 3)).ok());
  EXPECT_TRUE(g.add_initializer("empty", TensorDesc{DType::kF32, SymShape{0, 4}}, WeightData{}).ok());
  EXPECT_TRUE(
      g.add_initializer("w_q80", TensorDesc{DType::kQ8_0, SymShape{2, 32}}, weight_for(DType::kQ8_0, 64, 4)).ok());
  EXPECT_TRUE(g.add_initializer("bias", TensorDesc{DType::kBF16, SymShape{64}}, weight_for(DType::kBF16, 64, 5)).ok());
  EXPECT_TRUE(
      g.declare_value("h", TensorDesc{DType::kF16, SymShape{(n + Dim(1)) * Dim(2) / Dim::symbol("b"), 64}}).ok());

  AttributeMap every;
  every.set("axis", -1);
  every.set("epsilon", 1e-5);
  every.set("neg_inf", -std::numeric_limits<double>::infinity());
  every.set("big", int64_t{1} << 62);
  every.set("mode", "tanh \"quoted\" \xce\xbb");
  every.set("transpose", true);
  every.set("pads", std::vector<int64_t>{1, 1, -2, 2});
  every.set("scales", std::vector<double>{0.5, std::numeric_limits<double>::infinity(), -0.0, 1.0 / 3.0});
  every.set("names", std::vector<std::string>{"a", "", "c d"});
  std::vector<std::byte> lut(2 * 3 * 4);
  for (size_t i = 0; i < lut.size(); ++i) lut[i] = static_cast<std::byte>(i * 11);
  every.set("lut", TensorValue{DType::kF32, Shape{2, 3}, lut});
  every.set("scalar", TensorValue{DType::kI64, Shape{}, std::vector<std::byte>(8, std::byte{7})});
  every.set("no_elems", TensorValue{DType::kF16, Shape{0}, {}});
  EXPECT_TRUE(g.add_node("mm", "MatMul", Names{"x", "w_q41", ""}, Names{"h"}, every, "", 1).ok());
  EXPECT_TRUE(g.add_node("split", "Split", Names{"h"}, Names{"s0", "s1"}, {}, "", 13).ok());
  Result<NodeId> fused =
      g.add_node("norm+add", "RmsNormAdd", Names{"s0", "norm", "bias", "s1"}, Names{"y"}, {}, "hxrt.fused", 2);
  EXPECT_TRUE(fused.ok());
  g.mutable_node(*fused).kernel_hint = "cpu.rms_norm_add.avx512";
  g.mutable_node(*fused).fusion_id = 7;
  g.mutable_node(*fused).fused_from = {"norm", "add"};
  EXPECT_TRUE(g.add_node("gather", "Gather", Names{"table", "pos"}, Names{"g"}, {}, "", 1).ok());
  EXPECT_TRUE(g.add_node("q", "Dequant", Names{"w_q80", "empty"}, Names{"dq"}, {}, "", 1).ok());
  EXPECT_TRUE(g.mark_output("y").ok());
  EXPECT_TRUE(g.mark_output("g").ok());
  EXPECT_TRUE(g.mark_output("dq").ok());
  EXPECT_TRUE(g.mark_output("norm").ok());  // an initializer that is also an output
  EXPECT_TRUE(g.validate().ok()) << g.validate().to_string();
  return g;
}

void expect_same_graph(const Graph& a, const Graph& b) {
  EXPECT_EQ(a.name(), b.name());
  ASSERT_EQ(a.num_values(), b.num_values());
  for (ValueId v = 0; v < a.num_values(); ++v) {
    const graph::Value& x = a.value(v);
    const graph::Value& y = b.value(v);
    EXPECT_EQ(x.id, y.id);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.desc, y.desc) << x.desc.to_string() << " vs " << y.desc.to_string();
    EXPECT_EQ(x.producer, y.producer) << x.name;
    EXPECT_EQ(x.consumers, y.consumers) << x.name;
    EXPECT_EQ(x.is_input, y.is_input) << x.name;
    EXPECT_EQ(x.is_output, y.is_output) << x.name;
    EXPECT_EQ(x.is_initializer, y.is_initializer) << x.name;
    ASSERT_EQ(x.weight.size, y.weight.size) << x.name;
    if (x.weight.size > 0) {
      EXPECT_EQ(std::memcmp(x.weight.data, y.weight.data, x.weight.size), 0) << x.name;
    }
  }
  ASSERT_EQ(a.num_nodes(), b.num_nodes());
  for (NodeId n = 0; n < a.num_nodes(); ++n) {
    const graph::Node& x = a.node(n);
    const graph::Node& y = b.node(n);
    EXPECT_EQ(x.id, y.id);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.op_type, y.op_type);
    EXPECT_EQ(x.domain, y.domain);
    EXPECT_EQ(x.version, y.version);
    EXPECT_EQ(x.attrs, y.attrs) << x.attrs.to_string() << " vs " << y.attrs.to_string();
    EXPECT_EQ(x.inputs, y.inputs);
    EXPECT_EQ(x.outputs, y.outputs);
    EXPECT_EQ(x.kernel_hint, y.kernel_hint);
    EXPECT_EQ(x.fusion_id, y.fusion_id);
    EXPECT_EQ(x.fused_from, y.fused_from);
  }
  EXPECT_EQ(a.inputs(), b.inputs());
  EXPECT_EQ(a.outputs(), b.outputs());
  EXPECT_EQ(a.initializers(), b.initializers());
  EXPECT_EQ(a.to_string(), b.to_string());
}

std::string temp_path(std::string_view tag) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return (std::filesystem::path(::testing::TempDir()) / fmt::format("hxrt_{}_{}_{}.hxg", info->name(), tag, getpid()))
      .string();
}

// An exactly sized, 64-byte aligned copy (so ASan sees any read past the end) that the graph keeps alive.
struct AlignedBytes {
  std::shared_ptr<std::byte> data;
  size_t size = 0;
  std::span<const std::byte> span() const { return {data.get(), size}; }
};

AlignedBytes aligned_copy(std::span<const std::byte> bytes) {
  auto* p = static_cast<std::byte*>(::operator new (std::max<size_t>(bytes.size(), 1), std::align_val_t{64}));
  if (!bytes.empty()) std::memcpy(p, bytes.data(), bytes.size());
  return {std::shared_ptr<std::byte>(p, [](std::byte* q) { ::operator delete (q, std::align_val_t{64}); }),
          bytes.size()};
}

Result<Graph> read_bytes(std::span<const std::byte> bytes, GraphFileReadOptions options = {}) {
  AlignedBytes copy = aligned_copy(bytes);
  return read_graph_file_from_memory(copy.span(), copy.data, options);
}

std::vector<std::byte> serialized_rich_graph() {
  Result<std::vector<std::byte>> bytes = serialize_graph(make_rich_graph());
  EXPECT_TRUE(bytes.ok()) << bytes.status().to_string();
  return std::move(bytes).value();
}

uint64_t u64_at(std::span<const std::byte> b, size_t off) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint64_t>(b[off + static_cast<size_t>(i)]);
  return v;
}
uint32_t u32_at(std::span<const std::byte> b, size_t off) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint32_t>(b[off + static_cast<size_t>(i)]);
  return v;
}
void put_u64(std::byte* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
}
void put_u32(std::byte* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
}

// The parts of a graph file, split by its header.
struct Parts {
  std::string description;
  std::vector<std::byte> weights;
};

Parts split(std::span<const std::byte> file) {
  const uint64_t desc_offset = u64_at(file, 16);
  const uint64_t desc_size = u64_at(file, 24);
  const uint64_t weights_offset = u64_at(file, 32);
  const uint64_t weights_size = u64_at(file, 40);
  Parts parts;
  parts.description.assign(reinterpret_cast<const char*>(file.data() + desc_offset), desc_size);
  parts.weights.assign(file.begin() + static_cast<ptrdiff_t>(weights_offset),
                       file.begin() + static_cast<ptrdiff_t>(weights_offset + weights_size));
  return parts;
}

// Builds a file from parts with correct checksums; `patch` edits header fields before the header checksum is
// computed, so it produces files whose only fault is the patched field.
std::vector<std::byte> assemble(const Parts& parts, const std::function<void(std::byte*)>& patch = {}) {
  const uint64_t weights_offset = (64 + parts.description.size() + 63) / 64 * 64;
  std::vector<std::byte> file(weights_offset + parts.weights.size());
  std::byte* h = file.data();
  std::memcpy(h, "HXRTGRPH", 8);
  put_u32(h + 8, 1);
  put_u32(h + 12, 0);
  put_u64(h + 16, 64);
  put_u64(h + 24, parts.description.size());
  put_u64(h + 32, weights_offset);
  put_u64(h + 40, parts.weights.size());
  std::memcpy(h + 64, parts.description.data(), parts.description.size());
  put_u64(h + 48, graph_file_checksum(std::as_bytes(std::span(parts.description))));
  if (!parts.weights.empty()) std::memcpy(h + weights_offset, parts.weights.data(), parts.weights.size());
  if (patch) patch(h);
  put_u64(h + 56, graph_file_checksum(std::span<const std::byte>(h, 56)));
  return file;
}

// A file whose description JSON was edited by `edit` (checksums correct).
std::vector<std::byte> with_json_edit(const std::function<void(json&)>& edit) {
  Parts parts = split(serialized_rich_graph());
  json doc = json::parse(parts.description);
  edit(doc);
  parts.description = doc.dump();
  return assemble(parts);
}

json& value_named(json& doc, std::string_view name) {
  for (json& v : doc["values"]) {
    if (v["name"] == name) return v;
  }
  ADD_FAILURE() << "no value " << name;
  return doc["values"][0];
}

json& node_named(json& doc, std::string_view name) {
  for (json& n : doc["nodes"]) {
    if (n["name"] == name) return n;
  }
  ADD_FAILURE() << "no node " << name;
  return doc["nodes"][0];
}

// Address ranges of this process's mappings of the file at `canonical_path`, from /proc/self/maps (a deleted
// file's line ends in " (deleted)").
std::vector<std::pair<uintptr_t, uintptr_t>> mappings_of(const std::string& canonical_path) {
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find(" " + canonical_path) == std::string::npos) continue;
    std::istringstream in(line);
    std::string range;
    in >> range;
    const size_t dash = range.find('-');
    ranges.emplace_back(std::stoull(range.substr(0, dash), nullptr, 16),
                        std::stoull(range.substr(dash + 1), nullptr, 16));
  }
  return ranges;
}

// ---- Round trip ---------------------------------------------------------------------------------------------

TEST(GraphFile, ChecksumIsFnv1a64) {
  EXPECT_EQ(graph_file_checksum({}), 0xcbf29ce484222325ULL);
  const std::string a = "a";
  EXPECT_EQ(graph_file_checksum(std::as_bytes(std::span(a))), 0xaf63dc4c8601ec8cULL);
  const std::string foobar = "foobar";
  EXPECT_EQ(graph_file_checksum(std::as_bytes(std::span(foobar))), 0x85944171f73967e8ULL);
}

TEST(GraphFile, RoundTripThroughFileIsZeroCopy) {
  const Graph original = make_rich_graph();
  const std::string path = temp_path("rt");
  ASSERT_TRUE(write_graph_file(original, path).ok());
  Result<Graph> read = read_graph_file(path, {.verify_weights = true});
  ASSERT_TRUE(read.ok()) << read.status().to_string();
  expect_same_graph(original, *read);

  const std::string canonical = std::filesystem::canonical(path).string();
  const auto ranges = mappings_of(canonical);
  ASSERT_FALSE(ranges.empty()) << "the file is not mapped";
  const uint64_t file_size = std::filesystem::file_size(path);
  std::shared_ptr<const void> keepalive;
  for (ValueId id : read->initializers()) {
    const WeightData& w = read->value(id).weight;
    if (w.size == 0) continue;
    const auto address = reinterpret_cast<uintptr_t>(w.data);
    EXPECT_EQ(address % 64, 0u) << read->value(id).name;
    bool inside = false;
    for (const auto& [begin, end] : ranges) inside |= address >= begin && address + w.size <= end;
    EXPECT_TRUE(inside) << read->value(id).name << " is not inside the mapping of " << path;
    EXPECT_NE(w.keepalive, nullptr);
    if (keepalive == nullptr) keepalive = w.keepalive;
    EXPECT_EQ(w.keepalive, keepalive) << "all weights share one mapping";
    EXPECT_LE(w.size, file_size);
  }

  // The mapping outlives the file's name and the graph it was read into, through a clone.
  std::filesystem::remove(path);
  Graph clone = read->clone();
  read = Result<Graph>(Graph());
  keepalive.reset();
  const WeightData& w = clone.value(*clone.find_value("bias")).weight;
  const WeightData& expected = original.value(*original.find_value("bias")).weight;
  ASSERT_EQ(w.size, expected.size);
  EXPECT_EQ(std::memcmp(w.data, expected.data, w.size), 0);
  EXPECT_FALSE(mappings_of(canonical).empty());
  clone = Graph();
  EXPECT_TRUE(mappings_of(canonical).empty()) << "the last graph using the mapping is gone, so is the mapping";
}

TEST(GraphFile, SerializeMatchesFileAndReadsFromMemory) {
  const Graph original = make_rich_graph();
  const std::string path = temp_path("mem");
  ASSERT_TRUE(write_graph_file(original, path).ok());
  std::ifstream in(path, std::ios::binary);
  std::vector<char> on_disk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(path);
  const std::vector<std::byte> bytes = serialized_rich_graph();
  ASSERT_EQ(bytes.size(), on_disk.size());
  EXPECT_EQ(std::memcmp(bytes.data(), on_disk.data(), bytes.size()), 0);

  AlignedBytes copy = aligned_copy(bytes);
  Result<Graph> read = read_graph_file_from_memory(copy.span(), copy.data);
  ASSERT_TRUE(read.ok()) << read.status().to_string();
  expect_same_graph(original, *read);
  for (ValueId id : read->initializers()) {
    const WeightData& w = read->value(id).weight;
    if (w.size == 0) continue;
    EXPECT_GE(w.data, copy.data.get());
    EXPECT_LE(w.data + w.size, copy.data.get() + copy.size);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(w.data) % 64, 0u);
  }
}

TEST(GraphFile, LayoutMatchesTheSpecification) {
  const std::vector<std::byte> file = serialized_rich_graph();
  ASSERT_GE(file.size(), 64u);
  EXPECT_EQ(std::memcmp(file.data(), "HXRTGRPH", 8), 0);
  EXPECT_EQ(u32_at(file, 8), kGraphFileVersion);
  EXPECT_EQ(u32_at(file, 12), 0u);
  EXPECT_EQ(u64_at(file, 16), 64u);
  const uint64_t weights_offset = u64_at(file, 32);
  EXPECT_EQ(weights_offset % 64, 0u);
  EXPECT_GE(weights_offset, 64 + u64_at(file, 24));
  EXPECT_EQ(weights_offset + u64_at(file, 40), file.size());
  EXPECT_EQ(u64_at(file, 56), graph_file_checksum(std::span(file).first(56)));

  const Parts parts = split(file);
  EXPECT_EQ(u64_at(file, 48), graph_file_checksum(std::as_bytes(std::span(parts.description))));
  json doc = json::parse(parts.description);
  EXPECT_EQ(doc["name"], "rich model");
  EXPECT_EQ(doc["inputs"], json::array({"x", "pos"}));
  const Graph g = make_rich_graph();
  for (const json& v : doc["values"]) {
    if (!v.contains("weight")) continue;
    const uint64_t offset = v["weight"]["offset"];
    const uint64_t size = v["weight"]["size"];
    EXPECT_EQ(offset % 64, 0u) << v.dump();
    const WeightData& w = g.value(*g.find_value(v["name"].get<std::string>())).weight;
    ASSERT_EQ(size, w.size);
    if (size > 0) {
      EXPECT_EQ(std::memcmp(parts.weights.data() + offset, w.data, size), 0) << v.dump();
    }
  }
  EXPECT_EQ(value_named(doc, "h")["shape"], json::array({"(((n_tokens + 1) * 2) / b)", "64"}));
}

TEST(GraphFile, GraphWithoutWeightsAndRemovedNodes) {
  Graph g("tiny");
  ASSERT_TRUE(g.add_input("x", TensorDesc{DType::kF32, SymShape{4}}).ok());
  ASSERT_TRUE(g.add_node("dead", "Relu", Names{"x"}, Names{"d"}, {}, "", 1).ok());
  ASSERT_TRUE(g.add_node("live", "Relu", Names{"x"}, Names{"y"}, {}, "", 1).ok());
  ASSERT_TRUE(g.mark_output("y").ok());
  ASSERT_TRUE(g.remove_node(0).ok());
  Result<std::vector<std::byte>> bytes = serialize_graph(g);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  Result<Graph> read = read_bytes(*bytes);
  ASSERT_TRUE(read.ok()) << read.status().to_string();
  EXPECT_EQ(read->num_nodes(), 1);
  EXPECT_EQ(read->node(0).name, "live");
  EXPECT_EQ(read->num_values(), 3);  // the orphaned 'd' is kept, unproduced and unused
  EXPECT_TRUE(read->initializers().empty());
}

TEST(GraphFile, WriteErrors) {
  Graph bad = make_rich_graph();
  bad.mutable_value(*bad.find_value("bias")).weight = WeightData::copy_of(std::vector<std::byte>(3));
  Status invalid = write_graph_file(bad, temp_path("bad"));
  EXPECT_EQ(invalid.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(invalid.to_string().find("initializer 'bias'"), std::string::npos) << invalid.to_string();
  EXPECT_FALSE(std::filesystem::exists(temp_path("bad")));

  EXPECT_EQ(write_graph_file(make_rich_graph(), "/nonexistent-dir/x.hxg").code(), StatusCode::kNotFound);

  Graph not_utf8("bad \xff name");
  Status utf8 = serialize_graph(not_utf8).status();
  EXPECT_EQ(utf8.code(), StatusCode::kInvalidArgument) << utf8.to_string();
}

TEST(GraphFile, ReadErrorsOnFiles) {
  EXPECT_EQ(read_graph_file(temp_path("missing")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(read_graph_file(::testing::TempDir()).status().code(), StatusCode::kInvalidArgument);
  const std::string empty = temp_path("empty");
  { std::ofstream out(empty); }
  Status s = read_graph_file(empty).status();
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.to_string().find("is empty"), std::string::npos) << s.to_string();
  std::filesystem::remove(empty);

  // Truncated real files go through the mmap path.
  const std::vector<std::byte> bytes = serialized_rich_graph();
  const std::string path = temp_path("trunc");
  for (size_t keep : {size_t{8}, size_t{64}, size_t{200}, bytes.size() / 2, bytes.size() - 1}) {
    {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(keep));
    }
    Status t = read_graph_file(path).status();
    EXPECT_EQ(t.code(), StatusCode::kDataLoss) << keep << ": " << t.to_string();
    EXPECT_NE(t.to_string().find(path), std::string::npos) << t.to_string();
  }
  std::filesystem::remove(path);
}

TEST(GraphFile, MisalignedMemoryIsRejected) {
  const std::vector<std::byte> bytes = serialized_rich_graph();
  std::vector<std::byte> shifted(bytes.size() + 64 + 1);
  auto* base = reinterpret_cast<std::byte*>((reinterpret_cast<uintptr_t>(shifted.data()) + 63) / 64 * 64 + 1);
  std::memcpy(base, bytes.data(), bytes.size());
  Status s = read_graph_file_from_memory({base, bytes.size()}, nullptr).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
}

// ---- Corruption -----------------------------------------------------------------------------------------------

TEST(GraphFileCorruption, TruncationAtEveryOffset) {
  const std::vector<std::byte> file = serialized_rich_graph();
  const uint64_t weights_offset = u64_at(file, 32);
  for (size_t keep = 0; keep < file.size(); keep += (keep < weights_offset + 128 ? 1 : 61)) {
    Result<Graph> read = read_bytes(std::span(file).first(keep));
    ASSERT_FALSE(read.ok()) << "truncated at " << keep;
    EXPECT_EQ(read.status().code(), StatusCode::kDataLoss) << keep << ": " << read.status().to_string();
  }
  EXPECT_FALSE(read_bytes(std::span(file).first(file.size() - 1)).ok());
}

TEST(GraphFileCorruption, HeaderByteFlipsAreCaught) {
  const std::vector<std::byte> file = serialized_rich_graph();
  for (size_t i = 0; i < 64; ++i) {
    for (uint8_t mask : {0x01, 0x10, 0x80, 0xff}) {
      std::vector<std::byte> bad = file;
      bad[i] ^= std::byte{mask};
      Result<Graph> read = read_bytes(bad);
      ASSERT_FALSE(read.ok()) << "flip at " << i;
      const StatusCode code = read.status().code();
      EXPECT_TRUE(code == StatusCode::kDataLoss || code == StatusCode::kInvalidArgument) << read.status().to_string();
    }
  }
}

TEST(GraphFileCorruption, DescriptionByteFlipsFailTheChecksum) {
  const std::vector<std::byte> file = serialized_rich_graph();
  const uint64_t desc_size = u64_at(file, 24);
  for (size_t i = 64; i < 64 + desc_size; ++i) {
    std::vector<std::byte> bad = file;
    bad[i] ^= std::byte{0x20};
    Result<Graph> read = read_bytes(bad);
    ASSERT_FALSE(read.ok()) << "flip at " << i;
    EXPECT_EQ(read.status().code(), StatusCode::kDataLoss);
    EXPECT_NE(read.status().message().find("checksum"), std::string_view::npos) << read.status().to_string();
  }
}

TEST(GraphFileCorruption, WeightByteFlipsAreCaughtWhenVerifying) {
  const std::vector<std::byte> file = serialized_rich_graph();
  const Parts parts = split(file);
  const json doc = json::parse(parts.description);
  const uint64_t weights_offset = u64_at(file, 32);
  for (const json& v : doc["values"]) {
    if (!v.contains("weight") || v["weight"]["size"] == 0) continue;
    for (uint64_t at : {uint64_t{0}, v["weight"]["size"].get<uint64_t>() - 1}) {
      const uint64_t offset = weights_offset + v["weight"]["offset"].get<uint64_t>() + at;
      std::vector<std::byte> bad = file;
      bad[offset] ^= std::byte{0x04};
      // Without verification the read is zero-copy and sees the flipped byte.
      Result<Graph> lazy = read_bytes(bad, {.verify_weights = false});
      ASSERT_TRUE(lazy.ok()) << lazy.status().to_string();
      const WeightData& w = lazy->value(*lazy->find_value(v["name"].get<std::string>())).weight;
      EXPECT_EQ(w.data[at], bad[offset]);
      Result<Graph> verified = read_bytes(bad);  // verified by default
      ASSERT_FALSE(verified.ok()) << v.dump();
      EXPECT_EQ(verified.status().code(), StatusCode::kDataLoss);
      EXPECT_NE(verified.status().message().find("do not match their checksum"), std::string_view::npos)
          << verified.status().to_string();
    }
  }
  EXPECT_TRUE(read_bytes(file, {.verify_weights = true}).ok());
}

struct HeaderCase {
  const char* what;
  std::function<void(std::byte*)> patch;
  StatusCode code;
  const char* message;
};

TEST(GraphFileCorruption, ConsistentlyChecksummedBadHeaders) {
  const Parts parts = split(serialized_rich_graph());
  const std::vector<HeaderCase> cases = {
      {"magic", [](std::byte* h) { h[0] = std::byte{'X'}; }, StatusCode::kInvalidArgument, "bad magic at offset 0"},
      {"version", [](std::byte* h) { put_u32(h + 8, 2); }, StatusCode::kInvalidArgument, "version 2 at offset 8"},
      {"flags", [](std::byte* h) { put_u32(h + 12, 1); }, StatusCode::kInvalidArgument, "flags 0x1 at offset 12"},
      {"desc offset inside header", [](std::byte* h) { put_u64(h + 16, 8); }, StatusCode::kDataLoss, "description"},
      {"desc past end", [](std::byte* h) { put_u64(h + 16, uint64_t{1} << 40); }, StatusCode::kDataLoss,
       "does not fit"},
      {"desc size overflow", [](std::byte* h) { put_u64(h + 24, UINT64_MAX - 10); }, StatusCode::kDataLoss,
       "does not fit"},
      {"desc size short",
       [](std::byte* h) {
         put_u64(h + 24, u64_at({h, 64}, 24) - 1);
       },
       StatusCode::kDataLoss, "checksum"},
      {"weights misaligned",
       [](std::byte* h) {
         put_u64(h + 32, u64_at({h, 64}, 32) + 8);
       },
       StatusCode::kDataLoss, "not 64-byte aligned"},
      {"weights overlap description", [](std::byte* h) { put_u64(h + 32, 64); }, StatusCode::kDataLoss,
       "weight section"},
      {"weights past end",
       [](std::byte* h) {
         put_u64(h + 40, u64_at({h, 64}, 40) + 1);
       },
       StatusCode::kDataLoss, "truncated"},
      {"weights overflow", [](std::byte* h) { put_u64(h + 40, UINT64_MAX - 63); }, StatusCode::kDataLoss,
       "weight section"},
      {"weights offset huge", [](std::byte* h) { put_u64(h + 32, UINT64_MAX - 63); }, StatusCode::kDataLoss,
       "weight section"},
      {"weights short", [](std::byte* h) { put_u64(h + 40, 64); }, StatusCode::kDataLoss, "weight section"},
      {"desc checksum", [](std::byte* h) { h[48] ^= std::byte{1}; }, StatusCode::kDataLoss, "checksum"},
  };
  for (const HeaderCase& c : cases) {
    Result<Graph> read = read_bytes(assemble(parts, c.patch));
    ASSERT_FALSE(read.ok()) << c.what;
    EXPECT_EQ(read.status().code(), c.code) << c.what << ": " << read.status().to_string();
    EXPECT_NE(read.status().message().find(c.message), std::string_view::npos)
        << c.what << ": " << read.status().to_string();
  }
  EXPECT_TRUE(read_bytes(assemble(parts)).ok());
}

struct JsonCase {
  const char* what;
  std::function<void(json&)> edit;
  StatusCode code;
  const char* message;
};

TEST(GraphFileCorruption, ConsistentlyChecksummedBadDescriptions) {
  const std::vector<JsonCase> cases = {
      {"unknown dtype", [](json& d) { d["values"][0]["dtype"] = "q9_9"; }, StatusCode::kInvalidArgument,
       "values[0].dtype: unknown dtype 'q9_9'"},
      {"dtype not a string", [](json& d) { d["values"][0]["dtype"] = 3; }, StatusCode::kDataLoss,
       "values[0].dtype: expected a string"},
      {"misaligned weight", [](json& d) { value_named(d, "norm")["weight"]["offset"] = 4; }, StatusCode::kDataLoss,
       "weight.offset: 4"},
      {"weight past end", [](json& d) { value_named(d, "bias")["weight"]["offset"] = uint64_t{1} << 62; },
       StatusCode::kDataLoss, "runs past the end"},
      {"weight offset+size overflow",
       [](json& d) {
         value_named(d, "bias")["weight"]["offset"] = UINT64_MAX - 63;
         value_named(d, "bias")["weight"]["size"] = 128;
       },
       StatusCode::kDataLoss, "runs past the end"},
      {"weight size huge", [](json& d) { value_named(d, "norm")["weight"]["size"] = UINT64_MAX; },
       StatusCode::kDataLoss, "runs past the end"},
      {"weight size wrong for q4_1", [](json& d) { value_named(d, "w_q41")["weight"]["size"] = 2559; },
       StatusCode::kDataLoss, "q4_1[64, 64] needs 2560"},
      {"weight negative offset", [](json& d) { value_named(d, "w_q41")["weight"]["offset"] = -64; },
       StatusCode::kDataLoss, "non-negative"},
      {"shape not whole q4_1 blocks",
       [](json& d) {
         value_named(d, "w_q41")["shape"] = json::array({"3", "5"});
       },
       StatusCode::kDataLoss, "values[2].shape"},
      {"missing weight", [](json& d) { value_named(d, "bias").erase("weight"); }, StatusCode::kDataLoss,
       "weight: missing"},
      {"rank too high", [](json& d) { d["values"][0]["shape"] = json(std::vector<std::string>(9, "1")); },
       StatusCode::kDataLoss, "values[0].shape: 9 entries exceed the limit of 8"},
      {"bad dim text", [](json& d) { d["values"][0]["shape"][0] = "n_tokens +"; }, StatusCode::kDataLoss,
       "position 10"},
      {"huge nested dim", [](json& d) { d["values"][0]["shape"][0] = std::string(5000, '('); }, StatusCode::kDataLoss,
       "values[0].shape[0]"},
      {"values not an array", [](json& d) { d["values"] = json::object(); }, StatusCode::kDataLoss,
       "values: expected an array"},
      {"missing nodes", [](json& d) { d.erase("nodes"); }, StatusCode::kDataLoss, "nodes: missing"},
      {"root not an object", [](json& d) { d = json::array(); }, StatusCode::kDataLoss, "expected an object"},
      {"duplicate value", [](json& d) { d["values"][1]["name"] = "x"; }, StatusCode::kDataLoss, "already exists"},
      {"unknown node input", [](json& d) { node_named(d, "split")["inputs"][0] = "w9"; }, StatusCode::kDataLoss,
       "node 'split' input 0: value 'w9' does not exist"},
      {"node output is an input", [](json& d) { node_named(d, "split")["outputs"][0] = "x"; }, StatusCode::kDataLoss,
       "nodes[1]"},
      {"version out of range", [](json& d) { node_named(d, "split")["version"] = int64_t{1} << 40; },
       StatusCode::kDataLoss, "nodes[1].version"},
      {"fusion id below -1", [](json& d) { node_named(d, "split")["fusion_id"] = -5; }, StatusCode::kDataLoss,
       "nodes[1].fusion_id"},
      {"unknown flag", [](json& d) { d["values"][0]["flags"] = 9; }, StatusCode::kDataLoss, "unknown bits"},
      {"input and initializer", [](json& d) { d["values"][0]["flags"] = 5; }, StatusCode::kDataLoss,
       "both input and initializer"},
      {"unknown attribute type", [](json& d) { node_named(d, "mm")["attrs"]["axis"]["type"] = "complex"; },
       StatusCode::kDataLoss, "unknown attribute type 'complex'"},
      {"attribute mistyped", [](json& d) { node_named(d, "mm")["attrs"]["axis"]["value"] = "one"; },
       StatusCode::kDataLoss, "attrs.axis.value: expected an integer"},
      {"bool not a bool", [](json& d) { node_named(d, "mm")["attrs"]["transpose"]["value"] = 1; },
       StatusCode::kDataLoss, "expected a bool"},
      {"float list with junk", [](json& d) { node_named(d, "mm")["attrs"]["scales"]["value"][1] = "infinity"; },
       StatusCode::kDataLoss, "scales.value[1]"},
      {"int too big", [](json& d) { node_named(d, "mm")["attrs"]["axis"]["value"] = UINT64_MAX; },
       StatusCode::kDataLoss, "does not fit in int64"},
      {"tensor bad base64",
       [](json& d) { node_named(d, "mm")["attrs"]["lut"]["value"]["data"] = "AAAA!" + std::string(27, 'A'); },
       StatusCode::kDataLoss, "bad base64 character at position 4"},
      {"tensor data short", [](json& d) { node_named(d, "mm")["attrs"]["lut"]["value"]["data"] = "AAAA"; },
       StatusCode::kDataLoss, "cannot hold the 24 bytes"},
      {"tensor absurd shape",
       [](json& d) {
         node_named(d, "mm")["attrs"]["lut"]["value"]["shape"] = json::array({int64_t{1} << 40, int64_t{1} << 40});
       },
       StatusCode::kDataLoss, "lut.value.shape"},
      {"tensor negative dim",
       [](json& d) { node_named(d, "mm")["attrs"]["lut"]["value"]["shape"] = json::array({-1}); },
       StatusCode::kDataLoss, "negative"},
      {"tensor unknown dtype", [](json& d) { node_named(d, "mm")["attrs"]["lut"]["value"]["dtype"] = "f8"; },
       StatusCode::kInvalidArgument, "unknown dtype 'f8'"},
      {"inputs list mismatch",
       [](json& d) {
         d["inputs"] = json::array({"pos", "x"});
       },
       StatusCode::kDataLoss, "inputs: does not list"},
      {"outputs list unknown", [](json& d) { d["outputs"][0] = "nobody"; }, StatusCode::kDataLoss,
       "outputs[0]: value 'nobody' does not exist"},
      {"outputs list mismatch", [](json& d) { d["outputs"].erase(0); }, StatusCode::kDataLoss,
       "outputs: does not match"},
      {"output never produced",
       [](json& d) {
         d["values"].push_back({{"name", "ghost"}, {"dtype", "f32"}, {"shape", json::array()}, {"flags", 2}});
         d["outputs"].push_back("ghost");
       },
       StatusCode::kDataLoss, "describes an invalid graph: graph output 4: value 'ghost' is not produced"},
      {"cycle", [](json& d) { node_named(d, "split")["inputs"][0] = "y"; }, StatusCode::kDataLoss, "cycle"},
  };
  for (const JsonCase& c : cases) {
    Result<Graph> read = read_bytes(with_json_edit(c.edit));
    ASSERT_FALSE(read.ok()) << c.what;
    EXPECT_EQ(read.status().code(), c.code) << c.what << ": " << read.status().to_string();
    EXPECT_NE(read.status().message().find(c.message), std::string_view::npos)
        << c.what << ": " << read.status().to_string();
  }
}

TEST(GraphFileCorruption, MalformedJsonWithValidChecksums) {
  Parts parts = split(serialized_rich_graph());
  const std::vector<std::string> texts = {
      "",
      "{",
      "{\"name\": \"x\",}",
      "nul",
      "{\"name\": \"\xff\"}",
      std::string(100000, '[') + std::string(100000, ']'),
      "[1e400]",
      std::string("{\"name\": \"a\0b\"}", 14),
  };
  for (const std::string& text : texts) {
    parts.description = text;
    Result<Graph> read = read_bytes(assemble(parts));
    ASSERT_FALSE(read.ok()) << text.substr(0, 40);
    EXPECT_EQ(read.status().code(), StatusCode::kDataLoss) << read.status().to_string();
  }
  parts.description = "{\"name\": ";
  Status s = read_bytes(assemble(parts)).status();
  EXPECT_NE(s.message().find("malformed JSON"), std::string_view::npos) << s.to_string();
}

// Random edits with the checksums fixed up, so they reach the JSON and graph checks. Any outcome but a crash (or a
// sanitizer report) is acceptable.
TEST(GraphFileCorruption, RandomEditsNeverCrash) {
  const std::vector<std::byte> file = serialized_rich_graph();
  const Parts parts = split(file);
  std::mt19937_64 rng(1234);
  int failures = 0;
  for (int iteration = 0; iteration < 3000; ++iteration) {
    Parts edited = parts;
    std::string& d = edited.description;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits && !d.empty(); ++e) {
      const size_t at = rng() % d.size();
      switch (rng() % 4) {
        case 0: d[at] = static_cast<char>(rng() & 0xff); break;
        case 1: d[at] = "0123456789{}[]\",:-e."[rng() % 20]; break;
        case 2: d.erase(at, 1 + rng() % 8); break;
        default: d.insert(at, 1, "9\"[{"[rng() % 4]); break;
      }
    }
    Result<Graph> read = read_bytes(assemble(edited), {.verify_weights = (iteration % 2) == 0});
    failures += read.ok() ? 0 : 1;
  }
  EXPECT_GT(failures, 1500);  // most edits break something
  // Raw flips anywhere, checksums not fixed.
  for (int iteration = 0; iteration < 2000; ++iteration) {
    std::vector<std::byte> bad = file;
    bad[rng() % bad.size()] ^= static_cast<std::byte>(1 + rng() % 255);
    (void)read_bytes(bad).ok();
  }
}

}  // namespace
}  // namespace hxrt::formats
