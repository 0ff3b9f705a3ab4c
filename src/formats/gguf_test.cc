#include "hxrt/formats/gguf.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "hxrt/base/float16.h"
#include "testing/default_model.h"

namespace hxrt::formats {
namespace {

using graph::WeightData;
using Bytes = std::vector<std::byte>;

constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();

// ---- Fixtures made by code ----------------------------------------------------------------------------------

// Random bytes, never all zero, so data read from the wrong place shows.
WeightData random_weight(uint64_t bytes, std::mt19937& rng) {
  std::vector<std::byte> data(bytes);
  std::uniform_int_distribution<int> byte(1, 255);
  for (std::byte& b : data) b = static_cast<std::byte>(byte(rng));
  return WeightData::copy_of(data);
}

uint64_t bytes_of(uint32_t ggml_type, const std::vector<uint64_t>& dims) {
  uint64_t elements = 1;
  for (uint64_t d : dims) elements *= d;
  Result<uint64_t> bytes = ggml_storage_bytes(ggml_type, elements);
  EXPECT_TRUE(bytes.ok()) << bytes.status().to_string();
  return bytes.ok() ? *bytes : 0;
}

void add_random_tensor(GgufWriter& writer, const std::string& name, uint32_t ggml_type, std::vector<uint64_t> dims,
                       std::mt19937& rng) {
  const uint64_t bytes = bytes_of(ggml_type, dims);
  Status status = writer.add_tensor(name, ggml_type, std::move(dims), random_weight(bytes, rng));
  ASSERT_TRUE(status.ok()) << status.to_string();
}

Bytes serialize(const GgufWriter& writer) {
  Result<Bytes> bytes = writer.serialize();
  EXPECT_TRUE(bytes.ok()) << bytes.status().to_string();
  return bytes.ok() ? *bytes : Bytes{};
}

Result<GgufFile> read(const Bytes& bytes) {
  return GgufFile::from_memory(bytes, nullptr);
}

template <typename T>
void expect_error(const Result<T>& result, StatusCode code, std::string_view needle) {
  ASSERT_FALSE(result.ok()) << "expected " << status_code_name(code) << " containing '" << needle << "'";
  EXPECT_EQ(result.status().code(), code) << result.status().to_string();
  EXPECT_NE(result.status().to_string().find(needle), std::string::npos) << result.status().to_string();
}

void expect_error(const Status& status, StatusCode code, std::string_view needle) {
  ASSERT_FALSE(status.ok()) << "expected " << status_code_name(code) << " containing '" << needle << "'";
  EXPECT_EQ(status.code(), code) << status.to_string();
  EXPECT_NE(status.to_string().find(needle), std::string::npos) << status.to_string();
}

template <typename T>
void poke(Bytes& bytes, size_t at, T value) {
  ASSERT_LE(at + sizeof(T), bytes.size());
  std::memcpy(bytes.data() + at, &value, sizeof(T));
}

// The offset just past the string `text` as GGUF writes it (u64 length, bytes); the text must occur once.
size_t after_string(const Bytes& bytes, std::string_view text) {
  std::string needle(8, '\0');
  const uint64_t length = text.size();
  std::memcpy(needle.data(), &length, 8);
  needle += text;
  const std::string_view haystack(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  const size_t at = haystack.find(needle);
  EXPECT_NE(at, std::string_view::npos) << "string '" << text << "' not found";
  EXPECT_EQ(haystack.find(needle, at + 1), std::string_view::npos) << "string '" << text << "' occurs twice";
  return at == std::string_view::npos ? 0 : at + needle.size();
}

// Random values of every element type, for arrays.
template <typename T>
std::vector<T> random_items(size_t n, std::mt19937& rng) {
  std::vector<T> items;
  for (size_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, bool>) {
      items.push_back((rng() & 1) != 0);
    } else if constexpr (std::is_same_v<T, std::string>) {
      std::string text(rng() % 12, 'a');
      for (char& c : text) c = static_cast<char>('a' + rng() % 26);
      items.push_back(text);
    } else if constexpr (std::is_floating_point_v<T>) {
      items.push_back(static_cast<T>(std::uniform_real_distribution<double>(-1e6, 1e6)(rng)));
    } else {
      items.push_back(static_cast<T>(rng() ^ (uint64_t{rng()} << 32)));
    }
  }
  return items;
}

// A file with every value type, arrays of every element type (one empty), nested arrays, and tensors of several
// types and ranks. Its last tensor is a whole number of alignment units, so the file ends exactly at its data.
GgufWriter make_rich_writer(std::mt19937& rng) {
  GgufWriter w;
  auto add = [&](std::string key, GgufValue value) {
    Status status = w.add(std::move(key), std::move(value));
    EXPECT_TRUE(status.ok()) << status.to_string();
  };
  add("general.architecture", GgufValue("llama"));
  add("v.u8", GgufValue(uint8_t{200}));
  add("v.i8", GgufValue(int8_t{-100}));
  add("v.u16", GgufValue(uint16_t{60000}));
  add("v.i16", GgufValue(int16_t{-30000}));
  add("v.u32", GgufValue(uint32_t{4000000000u}));
  add("v.i32", GgufValue(int32_t{-2000000000}));
  add("v.f32", GgufValue(3.5f));
  add("v.bool.true", GgufValue(true));
  add("v.bool.false", GgufValue(false));
  add("v.string", GgufValue(std::string("na\0me \xc3\xbcn\xc3\xaf", 11)));
  add("v.string.empty", GgufValue(""));
  add("v.u64", GgufValue(uint64_t{(uint64_t{1} << 63) + 5}));
  add("v.i64", GgufValue(int64_t{-(int64_t{1} << 62)}));
  add("v.f64", GgufValue(-1e300));
  add("a.u8", GgufValue(GgufArray(random_items<uint8_t>(17, rng))));
  add("a.i8", GgufValue(GgufArray(random_items<int8_t>(3, rng))));
  add("a.u16", GgufValue(GgufArray(random_items<uint16_t>(5, rng))));
  add("a.i16", GgufValue(GgufArray(random_items<int16_t>(6, rng))));
  add("a.u32", GgufValue(GgufArray(random_items<uint32_t>(7, rng))));
  add("a.i32", GgufValue(GgufArray(random_items<int32_t>(8, rng))));
  add("a.f32", GgufValue(GgufArray(random_items<float>(9, rng))));
  add("a.bool", GgufValue(GgufArray(random_items<bool>(10, rng))));
  add("a.string", GgufValue(GgufArray(random_items<std::string>(11, rng))));
  add("a.u64", GgufValue(GgufArray(random_items<uint64_t>(12, rng))));
  add("a.i64", GgufValue(GgufArray(random_items<int64_t>(13, rng))));
  add("a.f64", GgufValue(GgufArray(random_items<double>(14, rng))));
  add("a.empty", GgufValue(GgufArray(std::vector<std::string>{})));
  add("a.nested", GgufValue(GgufArray(std::vector<GgufArray>{
                      GgufArray(random_items<uint8_t>(2, rng)), GgufArray(std::vector<std::string>{"x", ""}),
                      GgufArray(std::vector<GgufArray>{GgufArray(random_items<int32_t>(3, rng)), GgufArray()})})));
  add("a.nested.empty", GgufValue(GgufArray(std::vector<GgufArray>{})));

  add_random_tensor(w, "t.f16", 1, {16}, rng);
  add_random_tensor(w, "t.bf16", 30, {4, 2}, rng);
  add_random_tensor(w, "t.q8_0", 8, {64, 2}, rng);
  add_random_tensor(w, "t.q4_0", 2, {32, 3}, rng);
  add_random_tensor(w, "t.q4_1.4d", 3, {32, 2, 1, 3}, rng);
  add_random_tensor(w, "t.q6_K", 14, {256}, rng);
  add_random_tensor(w, "t.i8", 24, {7}, rng);
  add_random_tensor(w, "t.i32", 26, {5}, rng);
  add_random_tensor(w, "t.i64", 27, {3}, rng);
  add_random_tensor(w, "t.scalar", 0, {}, rng);
  add_random_tensor(w, "t.f32", 0, {8, 3}, rng);  // 96 bytes: ends on an alignment boundary
  return w;
}

// ---- ggml types ---------------------------------------------------------------------------------------------

TEST(GgufTypes, BlockLayoutsMatchGgml) {
  struct Expected {
    uint32_t id;
    std::string_view name;
    uint32_t block_elements;
    uint32_t block_bytes;
  };
  const Expected expected[] = {
      {0, "f32", 1, 4},         {1, "f16", 1, 2},         {2, "q4_0", 32, 18},     {3, "q4_1", 32, 20},
      {6, "q5_0", 32, 22},      {7, "q5_1", 32, 24},      {8, "q8_0", 32, 34},     {9, "q8_1", 32, 36},
      {15, "q8_K", 256, 292},   {16, "iq2_xxs", 256, 66}, {17, "iq2_xs", 256, 74}, {18, "iq3_xxs", 256, 98},
      {19, "iq1_s", 256, 50},   {20, "iq4_nl", 32, 18},   {21, "iq3_s", 256, 110}, {22, "iq2_s", 256, 82},
      {23, "iq4_xs", 256, 136}, {24, "i8", 1, 1},         {25, "i16", 1, 2},       {26, "i32", 1, 4},
      {27, "i64", 1, 8},        {28, "f64", 1, 8},        {29, "iq1_m", 256, 56},  {30, "bf16", 1, 2},
      {34, "tq1_0", 256, 54},   {35, "tq2_0", 256, 66},   {39, "mxfp4", 32, 17},
  };
  for (const Expected& e : expected) {
    const GgmlTypeInfo* info = find_ggml_type(e.id);
    ASSERT_NE(info, nullptr) << e.name;
    EXPECT_EQ(info->name, e.name);
    EXPECT_EQ(info->block_elements, e.block_elements) << e.name;
    EXPECT_EQ(info->block_bytes, e.block_bytes) << e.name;
  }
  // The k-quants' published bits per weight (llama.cpp PR #1684).
  const std::pair<uint32_t, double> bits_per_weight[] = {{10, 2.625}, {11, 3.4375}, {12, 4.5}, {13, 5.5}, {14, 6.5625}};
  for (const auto& [id, bpw] : bits_per_weight) {
    const GgmlTypeInfo* info = find_ggml_type(id);
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(info->block_elements, 256u) << info->name;
    EXPECT_DOUBLE_EQ(info->block_bytes * 8.0 / info->block_elements, bpw) << info->name;
  }
  for (uint32_t retired : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 1000u}) {
    EXPECT_EQ(find_ggml_type(retired), nullptr) << retired;
    EXPECT_EQ(ggml_type_name(retired), fmt::format("ggml type {}", retired));
  }
  EXPECT_EQ(ggml_type_name(14), "q6_K");
}

TEST(GgufTypes, AgreeWithHxrtDTypes) {
  int mapped = 0;
  for (int i = 0; i < kDTypeCount; ++i) {
    const DTypeInfo& dtype = dtype_info(static_cast<DType>(i));
    if (!dtype.ggml_type) continue;
    ++mapped;
    const GgmlTypeInfo* info = find_ggml_type(*dtype.ggml_type);
    ASSERT_NE(info, nullptr) << dtype.name;
    EXPECT_EQ(info->name, dtype.name);
    EXPECT_EQ(info->block_elements, dtype.block_elements) << dtype.name;
    EXPECT_EQ(info->block_bytes, dtype.block_bytes) << dtype.name;
  }
  EXPECT_GE(mapped, 6);
}

TEST(GgufTypes, StorageBytesAreChecked) {
  EXPECT_EQ(*ggml_storage_bytes(2, 64), 36u);
  EXPECT_EQ(*ggml_storage_bytes(14, 512), 420u);
  expect_error(ggml_storage_bytes(2, 33), StatusCode::kInvalidArgument, "whole number");
  expect_error(ggml_storage_bytes(4, 32), StatusCode::kInvalidArgument, "unknown ggml type id 4");
  expect_error(ggml_storage_bytes(28, uint64_t{1} << 62), StatusCode::kOutOfRange, "overflow");
}

// ---- Values -------------------------------------------------------------------------------------------------

TEST(GgufValues, TypesWideningAndText) {
  EXPECT_EQ(GgufValue(uint32_t{30}).type(), GgufValueType::kU32);
  EXPECT_EQ(GgufValue("x").type(), GgufValueType::kString);
  EXPECT_EQ(GgufValue(GgufArray(std::vector<float>{1.0f})).type(), GgufValueType::kArray);
  EXPECT_EQ(GgufValue(uint32_t{7}).as_i64(), 7);
  EXPECT_EQ(GgufValue(int8_t{-7}).as_i64(), -7);
  EXPECT_FALSE(GgufValue(int8_t{-7}).as_u64().has_value()) << "a signed type never reads as unsigned";
  EXPECT_FALSE(GgufValue(uint64_t{7}).as_i64().has_value()) << "u64 does not fit int64 as a type";
  EXPECT_FALSE(GgufValue(1.0f).as_i64().has_value());
  EXPECT_FALSE(GgufValue(true).as_u64().has_value());
  EXPECT_EQ(GgufValue(uint32_t{30}).to_string(), "30");
  EXPECT_EQ(GgufValue(int8_t{-3}).to_string(), "-3");
  EXPECT_EQ(GgufValue("llama").to_string(), "\"llama\"");
  EXPECT_EQ(GgufValue(GgufArray(std::vector<std::string>{"a", "b", "c"})).to_string(2),
            "[3 x string: \"a\", \"b\", ...]");
  EXPECT_EQ(GgufValue(GgufArray(std::vector<GgufArray>{GgufArray(std::vector<bool>{true})})).to_string(),
            "[1 x array: [1 x bool: true]]");
  EXPECT_EQ(gguf_value_type_name(GgufValueType::kF64), "f64");
  EXPECT_EQ(gguf_value_type_name(static_cast<GgufValueType>(13)), "value type 13");
}

// ---- Round trips --------------------------------------------------------------------------------------------

TEST(GgufRoundTrip, EveryValueTypeAndSeveralTensorTypes) {
  std::mt19937 rng(11);
  const GgufWriter writer = make_rich_writer(rng);
  const Bytes bytes = serialize(writer);
  Result<GgufFile> file = read(bytes);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  EXPECT_EQ(file->version(), 3u);
  EXPECT_EQ(file->alignment(), 32u);
  EXPECT_EQ(file->file_size(), bytes.size());
  EXPECT_EQ(file->data_offset() % 32, 0u);

  // Write the file again from what was read: the bytes must come out identical.
  GgufWriter again;
  for (const GgufKeyValue& kv : file->metadata()) ASSERT_TRUE(again.add(kv.key, kv.value).ok()) << kv.key;
  uint64_t expected_offset = 0;
  for (const GgufTensor& t : file->tensors()) {
    EXPECT_EQ(t.offset, expected_offset) << t.name << ": tensors are packed in order, as ggml requires";
    expected_offset = (t.offset + t.bytes + 31) / 32 * 32;
    const std::span<const std::byte> data = file->tensor_bytes(t);
    EXPECT_EQ(data.size(), t.bytes);
    EXPECT_EQ(static_cast<size_t>(data.data() - bytes.data()) % 32, 0u) << t.name;
    EXPECT_EQ(t.bytes, bytes_of(t.ggml_type, t.dims)) << t.name;
    ASSERT_TRUE(again.add_tensor(t.name, t.ggml_type, t.dims, WeightData::copy_of(data)).ok()) << t.name;
  }
  EXPECT_EQ(serialize(again), bytes);

  // Values individually, against what was written.
  std::mt19937 rng2(11);
  const Bytes reference = serialize(make_rich_writer(rng2));
  ASSERT_EQ(reference, bytes) << "serialization is deterministic";
  ASSERT_EQ(file->metadata().size(), 30u);
  EXPECT_EQ(file->metadata()[0].key, "general.architecture");
  EXPECT_EQ(*file->get_string("v.string"), std::string_view("na\0me \xc3\xbcn\xc3\xaf", 11));
  EXPECT_EQ(*file->get_u64("v.u64"), (uint64_t{1} << 63) + 5);
  EXPECT_EQ(*file->get_f64("v.f64"), -1e300);
  EXPECT_FALSE(*file->get_bool("v.bool.false"));
  EXPECT_TRUE(*file->get_bool("v.bool.true"));
  ASSERT_NE(file->find("a.nested"), nullptr);
  EXPECT_EQ(file->find("a.nested")->get_if<GgufArray>()->depth(), 3);
  for (uint32_t type = 0; type < kGgufValueTypeCount; ++type) {
    const std::string name = gguf_value_type_name(static_cast<GgufValueType>(type));
    if (type == static_cast<uint32_t>(GgufValueType::kArray)) continue;
    const GgufValue* array = file->find("a." + name);
    ASSERT_NE(array, nullptr) << name;
    EXPECT_EQ(static_cast<uint32_t>(array->get_if<GgufArray>()->element_type()), type) << name;
  }

  ASSERT_EQ(file->tensors().size(), 11u);
  const GgufTensor& q41 = *file->find_tensor("t.q4_1.4d");
  EXPECT_EQ(q41.dims, (std::vector<uint64_t>{32, 2, 1, 3}));
  EXPECT_EQ(q41.elements, 192u);
  EXPECT_EQ(q41.shape(), (Shape{3, 1, 2, 32}));
  EXPECT_EQ(file->find_tensor("t.scalar")->shape(), Shape{});
  EXPECT_EQ(file->find_tensor("t.scalar")->bytes, 4u);
  EXPECT_EQ(file->find_tensor("nope"), nullptr);
  expect_error(file->tensor("nope"), StatusCode::kNotFound, "nope");
}

// Also with `prefetch` (the whole file mapped at open, MAP_POPULATE): the same reader over the same bytes.
TEST(GgufRoundTrip, FileIsMappedAndWeightsOutliveIt) {
  for (const bool prefetch : {false, true}) {
    SCOPED_TRACE(prefetch ? "prefetch" : "no prefetch");
    std::mt19937 rng(5);
    const GgufWriter writer = make_rich_writer(rng);
    const Bytes bytes = serialize(writer);
    const std::string path =
        (std::filesystem::temp_directory_path() / fmt::format("hxrt_gguf_{}.gguf", getpid())).string();
    ASSERT_TRUE(writer.write(path).ok());
    WeightData weight;
    {
      Result<GgufFile> file = GgufFile::open(path, prefetch);
      ASSERT_TRUE(file.ok()) << file.status().to_string();
      EXPECT_EQ(file->file_size(), bytes.size());
      const GgufTensor& t = *file->find_tensor("t.q8_0");
      Result<WeightData> w = file->weight(t);
      ASSERT_TRUE(w.ok()) << w.status().to_string();
      EXPECT_EQ(w->data, file->tensor_bytes(t).data()) << "zero copy: the weight points into the mapping";
      EXPECT_EQ(*file->tensor_dtype(t), DType::kQ8_0);
      EXPECT_NE(w->keepalive, nullptr);
      weight = *w;
    }
    std::filesystem::remove(path);  // the mapping outlives both the GgufFile and the directory entry
    Result<GgufFile> from_memory = read(bytes);
    ASSERT_TRUE(from_memory.ok());
    const std::span<const std::byte> expected = from_memory->tensor_bytes(*from_memory->find_tensor("t.q8_0"));
    ASSERT_EQ(weight.size, expected.size());
    EXPECT_EQ(std::memcmp(weight.data, expected.data(), weight.size), 0);
  }
}

TEST(GgufRoundTrip, AlignmentsOtherThan32) {
  for (uint32_t alignment : {1u, 8u, 64u, 256u, 4096u}) {
    std::mt19937 rng(alignment);
    GgufWriter w;
    ASSERT_TRUE(w.set_alignment(alignment).ok());
    ASSERT_TRUE(w.add("general.name", GgufValue("odd sizes")).ok());
    add_random_tensor(w, "a", 24, {3}, rng);
    add_random_tensor(w, "b", 0, {5}, rng);
    add_random_tensor(w, "c", 8, {32}, rng);
    const Bytes bytes = serialize(w);
    Result<GgufFile> file = read(bytes);
    ASSERT_TRUE(file.ok()) << alignment << ": " << file.status().to_string();
    EXPECT_EQ(file->alignment(), alignment);
    EXPECT_EQ(*file->get_u32("general.alignment"), alignment);
    EXPECT_EQ(file->data_offset() % alignment, 0u);
    for (const GgufTensor& t : file->tensors()) EXPECT_EQ(t.offset % alignment, 0u) << alignment << " " << t.name;
    const auto padded = [&](uint64_t n) { return (n + alignment - 1) / alignment * alignment; };
    EXPECT_EQ(file->find_tensor("c")->offset, padded(3) + padded(20)) << "tensors packed in order";
  }
  GgufWriter w;
  ASSERT_TRUE(w.set_alignment(64).ok());
  ASSERT_TRUE(w.set_alignment(16).ok()) << "setting again replaces the value";
  EXPECT_EQ(w.alignment(), 16u);
  expect_error(w.set_alignment(0), StatusCode::kInvalidArgument, "power of two");
  expect_error(w.set_alignment(48), StatusCode::kInvalidArgument, "power of two");
  GgufWriter w2;
  expect_error(w2.add("general.alignment", GgufValue(uint64_t{32})), StatusCode::kInvalidArgument, "u32");
}

TEST(GgufRoundTrip, EmptyFileAndHandWrittenFileWithoutPadding) {
  Result<GgufFile> empty = read(serialize(GgufWriter()));
  ASSERT_TRUE(empty.ok()) << empty.status().to_string();
  EXPECT_TRUE(empty->metadata().empty());
  EXPECT_TRUE(empty->tensors().empty());
  // No tensors: the file may end right after the metadata, without padding to the data section.
  Bytes bytes = serialize(GgufWriter());
  bytes.resize(24);
  poke<uint64_t>(bytes, 16, 0);
  EXPECT_TRUE(read(bytes).ok());
}

// ---- Typed accessors ----------------------------------------------------------------------------------------

TEST(GgufAccessors, TypedGettersWidenLosslesslyAndNameMismatches) {
  GgufWriter w;
  ASSERT_TRUE(w.add("u8", GgufValue(uint8_t{200})).ok());
  ASSERT_TRUE(w.add("u16", GgufValue(uint16_t{60000})).ok());
  ASSERT_TRUE(w.add("u32", GgufValue(uint32_t{4000000000u})).ok());
  ASSERT_TRUE(w.add("u64", GgufValue(uint64_t{5})).ok());
  ASSERT_TRUE(w.add("i8", GgufValue(int8_t{-8})).ok());
  ASSERT_TRUE(w.add("i32", GgufValue(int32_t{-32})).ok());
  ASSERT_TRUE(w.add("i64", GgufValue(int64_t{-64})).ok());
  ASSERT_TRUE(w.add("f32", GgufValue(0.25f)).ok());
  ASSERT_TRUE(w.add("f64", GgufValue(0.125)).ok());
  ASSERT_TRUE(w.add("bool", GgufValue(true)).ok());
  ASSERT_TRUE(w.add("string", GgufValue("text")).ok());
  ASSERT_TRUE(w.add("strings", GgufValue(GgufArray(std::vector<std::string>{"a", "bc"}))).ok());
  ASSERT_TRUE(w.add("i32s", GgufValue(GgufArray(std::vector<int32_t>{-1, 2}))).ok());
  ASSERT_TRUE(w.add("u32s", GgufValue(GgufArray(std::vector<uint32_t>{4000000000u}))).ok());
  ASSERT_TRUE(w.add("u64s", GgufValue(GgufArray(std::vector<uint64_t>{1}))).ok());
  ASSERT_TRUE(w.add("f32s", GgufValue(GgufArray(std::vector<float>{0.5f, -2.0f}))).ok());
  ASSERT_TRUE(w.add("f64s", GgufValue(GgufArray(std::vector<double>{0.5}))).ok());
  Result<GgufFile> file = read(serialize(w));
  ASSERT_TRUE(file.ok()) << file.status().to_string();

  EXPECT_EQ(*file->get_u32("u8"), 200u);
  EXPECT_EQ(*file->get_u32("u16"), 60000u);
  EXPECT_EQ(*file->get_u32("u32"), 4000000000u);
  EXPECT_EQ(*file->get_u64("u32"), 4000000000u);
  EXPECT_EQ(*file->get_i64("u32"), 4000000000);
  EXPECT_EQ(*file->get_u64("u64"), 5u);
  EXPECT_EQ(*file->get_i32("u16"), 60000);
  EXPECT_EQ(*file->get_i32("i8"), -8);
  EXPECT_EQ(*file->get_i64("i32"), -32);
  EXPECT_EQ(*file->get_i64("i64"), -64);
  EXPECT_EQ(*file->get_f32("f32"), 0.25f);
  EXPECT_EQ(*file->get_f64("f32"), 0.25);
  EXPECT_EQ(*file->get_f64("f64"), 0.125);
  EXPECT_TRUE(*file->get_bool("bool"));
  EXPECT_EQ(*file->get_string("string"), "text");
  EXPECT_EQ(*file->get_string_array("strings"), (std::vector<std::string_view>{"a", "bc"}));
  EXPECT_EQ(*file->get_int_array("i32s"), (std::vector<int64_t>{-1, 2}));
  EXPECT_EQ(*file->get_int_array("u32s"), (std::vector<int64_t>{4000000000}));
  const std::span<const float> f32s = *file->get_f32_array("f32s");
  EXPECT_EQ(std::vector<float>(f32s.begin(), f32s.end()), (std::vector<float>{0.5f, -2.0f}));

  expect_error(file->get_u32("missing.key"), StatusCode::kNotFound, "missing.key");
  expect_error(file->get_u32("u64"), StatusCode::kInvalidArgument, "'u64' is u64, expected u32");
  expect_error(file->get_u32("i32"), StatusCode::kInvalidArgument, "'i32' is i32, expected u32");
  expect_error(file->get_u64("i8"), StatusCode::kInvalidArgument, "is i8");
  expect_error(file->get_i32("u32"), StatusCode::kInvalidArgument, "is u32, expected i32");
  expect_error(file->get_i64("u64"), StatusCode::kInvalidArgument, "is u64");
  expect_error(file->get_f32("f64"), StatusCode::kInvalidArgument, "is f64, expected f32");
  expect_error(file->get_f64("i32"), StatusCode::kInvalidArgument, "is i32");
  expect_error(file->get_bool("u8"), StatusCode::kInvalidArgument, "is u8, expected bool");
  expect_error(file->get_string("strings"), StatusCode::kInvalidArgument, "is array of string, expected string");
  expect_error(file->get_string_array("i32s"), StatusCode::kInvalidArgument,
               "'i32s' is array of i32, expected array of string");
  expect_error(file->get_string_array("string"), StatusCode::kInvalidArgument, "is string");
  expect_error(file->get_int_array("u64s"), StatusCode::kInvalidArgument, "array of u64");
  expect_error(file->get_int_array("f32s"), StatusCode::kInvalidArgument, "array of f32");
  expect_error(file->get_f32_array("f64s"), StatusCode::kInvalidArgument, "array of f64, expected array of f32");
  expect_error(file->get_f32_array("missing"), StatusCode::kNotFound, "missing");
}

// ---- Tensors hxrt cannot compute ----------------------------------------------------------------------------

TEST(GgufTensors, UnsupportedTypesOpenListAndExplainThemselves) {
  std::mt19937 rng(3);
  GgufWriter w;
  add_random_tensor(w, "blk.0.ffn_down.weight", 16, {256, 2}, rng);  // iq2_xxs
  add_random_tensor(w, "q6k", 14, {256}, rng);
  add_random_tensor(w, "q4k", 12, {512}, rng);
  add_random_tensor(w, "tq1", 34, {256}, rng);
  add_random_tensor(w, "fp4", 39, {64}, rng);
  add_random_tensor(w, "f64", 28, {3}, rng);
  add_random_tensor(w, "i16", 25, {4}, rng);
  add_random_tensor(w, "q8", 8, {32}, rng);
  add_random_tensor(w, "i8", 24, {2}, rng);
  add_random_tensor(w, "i32", 26, {2}, rng);
  add_random_tensor(w, "i64", 27, {2}, rng);
  add_random_tensor(w, "bf16", 30, {2}, rng);
  Result<GgufFile> file = read(serialize(w));
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  ASSERT_EQ(file->tensors().size(), 12u);
  const GgufTensor& iq2 = *file->find_tensor("blk.0.ffn_down.weight");
  EXPECT_EQ(file->tensor_bytes(iq2).size(), 132u);
  expect_error(file->tensor_dtype(iq2), StatusCode::kUnimplemented, "'blk.0.ffn_down.weight' has ggml type iq2_xxs");
  expect_error(file->weight(iq2), StatusCode::kUnimplemented, "blk.0.ffn_down.weight");
  expect_error(file->weight(*file->find_tensor("f64")), StatusCode::kUnimplemented, "f64");
  EXPECT_EQ(file->tensor_bytes(*file->find_tensor("fp4")).size(), 34u);
  const std::pair<std::string_view, DType> computable[] = {
      {"q8", DType::kQ8_0},   {"i8", DType::kI8},    {"i32", DType::kI32}, {"i64", DType::kI64},
      {"bf16", DType::kBF16}, {"q6k", DType::kQ6_K}, {"q4k", DType::kQ4_K}};
  for (const auto& [name, dtype] : computable) {
    const GgufTensor& t = *file->find_tensor(name);
    EXPECT_EQ(*file->tensor_dtype(t), dtype) << name;
    EXPECT_EQ(file->weight(t)->size, t.bytes) << name;
  }
}

// ---- Writer errors ------------------------------------------------------------------------------------------

TEST(GgufWriterErrors, AreReportedWhenAdding) {
  GgufWriter w;
  WeightData four = WeightData::copy_of(Bytes(4));
  expect_error(w.add("", GgufValue(true)), StatusCode::kInvalidArgument, "empty");
  ASSERT_TRUE(w.add("k", GgufValue(true)).ok());
  expect_error(w.add("k", GgufValue(false)), StatusCode::kAlreadyExists, "'k'");
  expect_error(w.add_tensor("", 0, {1}, four), StatusCode::kInvalidArgument, "empty");
  ASSERT_TRUE(w.add_tensor("t", 0, {1}, four).ok());
  expect_error(w.add_tensor("t", 0, {1}, four), StatusCode::kAlreadyExists, "'t'");
  expect_error(w.add_tensor("u", 4, {32}, four), StatusCode::kInvalidArgument, "unknown ggml type id 4");
  expect_error(w.add_tensor("u", 0, {1, 1, 1, 1, 1}, four), StatusCode::kInvalidArgument, "5 dims");
  expect_error(w.add_tensor("u", 0, {1, 0}, four), StatusCode::kInvalidArgument, "ne[1] is 0");
  expect_error(w.add_tensor("u", 8, {16, 2}, WeightData::copy_of(Bytes(34))), StatusCode::kInvalidArgument,
               "whole number");
  expect_error(w.add_tensor("u", 0, {2}, four), StatusCode::kInvalidArgument, "take 8 bytes, the data has 4");
  expect_error(w.add_tensor("u", 0, {uint64_t{1} << 40, uint64_t{1} << 40}, four), StatusCode::kOutOfRange,
               "overflows");
  expect_error(w.add_tensor("u", DType::kU8, {4}, four), StatusCode::kInvalidArgument, "no ggml type");
  EXPECT_TRUE(w.add_tensor("u", DType::kF32, {1}, four).ok());
  GgufArray deep;
  for (int i = 0; i < kGgufMaxArrayDepth; ++i) deep = GgufArray(std::vector<GgufArray>{deep});
  EXPECT_EQ(deep.depth(), kGgufMaxArrayDepth + 1);
  expect_error(w.add("deep", GgufValue(deep)), StatusCode::kInvalidArgument, "nest");
  expect_error(w.write("/nonexistent-dir/x.gguf"), StatusCode::kNotFound, "nonexistent-dir");
}

TEST(GgufWriterErrors, OpenErrors) {
  expect_error(GgufFile::open("/nonexistent-dir/x.gguf"), StatusCode::kNotFound, "x.gguf");
  expect_error(GgufFile::open(std::filesystem::temp_directory_path().string()), StatusCode::kInvalidArgument,
               "not a regular file");
  const std::string path =
      (std::filesystem::temp_directory_path() / fmt::format("hxrt_gguf_empty_{}", getpid())).string();
  { std::ofstream create(path); }
  expect_error(GgufFile::open(path), StatusCode::kDataLoss, "empty");
  std::ofstream(path) << "not a gguf file";
  expect_error(GgufFile::open(path), StatusCode::kInvalidArgument, "not a GGUF file");
  std::filesystem::remove(path);
}

// ---- Malformed input ----------------------------------------------------------------------------------------

TEST(GgufCorruption, TruncationAtEveryOffsetFails) {
  std::mt19937 rng(17);
  const Bytes bytes = serialize(make_rich_writer(rng));
  Result<GgufFile> whole = read(bytes);
  ASSERT_TRUE(whole.ok()) << whole.status().to_string();
  const GgufTensor& last = whole->tensors().back();
  ASSERT_EQ(whole->data_offset() + last.offset + last.bytes, bytes.size()) << "no trailing padding in the fixture";
  for (size_t n = 0; n < bytes.size(); ++n) {
    const Bytes prefix(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));  // exact size, for ASan
    Result<GgufFile> file = read(prefix);
    ASSERT_FALSE(file.ok()) << "a file truncated to " << n << " of " << bytes.size() << " bytes was accepted";
    EXPECT_EQ(file.status().code(), StatusCode::kDataLoss) << n << ": " << file.status().to_string();
    EXPECT_NE(file.status().to_string().find("offset"), std::string::npos) << file.status().to_string();
  }
}

// A small file whose fields the cases below edit.
Bytes corruption_fixture() {
  std::mt19937 rng(23);
  GgufWriter w;
  EXPECT_TRUE(w.set_alignment(32).ok());
  EXPECT_TRUE(w.add("general.architecture", GgufValue("llama")).ok());
  EXPECT_TRUE(w.add("key.a", GgufValue(uint32_t{7})).ok());
  EXPECT_TRUE(w.add("key.b", GgufValue(uint32_t{8})).ok());
  EXPECT_TRUE(w.add("flags", GgufValue(GgufArray(std::vector<bool>{true, false}))).ok());
  EXPECT_TRUE(w.add("names", GgufValue(GgufArray(std::vector<std::string>{"x", "y"}))).ok());
  add_random_tensor(w, "t.one", 8, {64, 2}, rng);  // q8_0, 136 bytes at data offset 0, padded to 160
  add_random_tensor(w, "t.two", 0, {8}, rng);      // f32, 32 bytes at data offset 160
  return serialize(w);
}

TEST(GgufCorruption, EditedFieldsAreNamedWithTheirOffsets) {
  const Bytes good = corruption_fixture();
  ASSERT_TRUE(read(good).ok());
  // Field positions: a key's value type follows its text; a tensor's n_dims follows its name.
  const size_t alignment_value = after_string(good, "general.alignment") + 4;
  const size_t key_b = after_string(good, "key.b");
  const size_t key_a_type = after_string(good, "key.a");
  const size_t flags = after_string(good, "flags") + 4;  // element type, count, then the bools
  const size_t names = after_string(good, "names") + 4;
  const size_t one = after_string(good, "t.one");  // n_dims, ne[0], ne[1], type, offset
  const size_t two = after_string(good, "t.two");  // n_dims, ne[0], type, offset
  const size_t first_key_length = 24;

  struct Case {
    std::string name;
    std::function<void(Bytes&)> edit;
    StatusCode code;
    std::string needle;
  };
  const Case cases[] = {
      {"bad magic", [](Bytes& b) { b[3] = std::byte{'G'}; }, StatusCode::kInvalidArgument, "not a GGUF file"},
      {"version 1", [](Bytes& b) { poke<uint32_t>(b, 4, 1); }, StatusCode::kUnimplemented, "version 1"},
      {"version 0", [](Bytes& b) { poke<uint32_t>(b, 4, 0); }, StatusCode::kInvalidArgument, "version 0"},
      {"version 4", [](Bytes& b) { poke<uint32_t>(b, 4, 4); }, StatusCode::kInvalidArgument, "version 4"},
      {"big-endian", [](Bytes& b) { poke<uint32_t>(b, 4, 0x03000000); }, StatusCode::kUnimplemented, "big-endian"},
      {"huge tensor_count", [](Bytes& b) { poke<uint64_t>(b, 8, uint64_t{1} << 60); }, StatusCode::kDataLoss,
       "tensor_count at offset 8"},
      {"huge kv_count", [](Bytes& b) { poke<uint64_t>(b, 16, kU64Max); }, StatusCode::kDataLoss,
       "kv_count at offset 16"},
      {"one kv too many", [](Bytes& b) { poke<uint64_t>(b, 16, 7); }, StatusCode::kDataLoss, "offset"},
      {"huge key length", [&](Bytes& b) { poke<uint64_t>(b, first_key_length, uint64_t{1} << 62); },
       StatusCode::kDataLoss, "key of metadata entry #0 at offset 24"},
      {"unknown value type", [&](Bytes& b) { poke<uint32_t>(b, key_a_type, 13); }, StatusCode::kInvalidArgument,
       "'key.a' at offset"},
      {"unknown value type max", [&](Bytes& b) { poke<uint32_t>(b, key_a_type, 0xffffffffu); },
       StatusCode::kInvalidArgument, "unknown value type 4294967295"},
      {"unknown element type", [&](Bytes& b) { poke<uint32_t>(b, names, 13); }, StatusCode::kInvalidArgument,
       "unknown value type 13"},
      {"huge array length", [&](Bytes& b) { poke<uint64_t>(b, names + 4, uint64_t{1} << 61); }, StatusCode::kDataLoss,
       "array length"},
      {"array length one too many", [&](Bytes& b) { poke<uint64_t>(b, names + 4, 3); }, StatusCode::kDataLoss,
       "offset"},
      {"bool not 0 or 1", [&](Bytes& b) { b[flags + 12] = std::byte{2}; }, StatusCode::kDataLoss, "bool byte is 2"},
      {"duplicate key", [&](Bytes& b) { b[key_b - 1] = std::byte{'a'}; }, StatusCode::kDataLoss, "'key.a' at offset"},
      {"alignment 48", [&](Bytes& b) { poke<uint32_t>(b, alignment_value, 48); }, StatusCode::kDataLoss,
       "not a power of two"},
      {"alignment 0", [&](Bytes& b) { poke<uint32_t>(b, alignment_value, 0); }, StatusCode::kDataLoss,
       "not a power of two"},
      {"alignment as i32", [&](Bytes& b) { poke<uint32_t>(b, alignment_value - 4, 5); }, StatusCode::kDataLoss,
       "is i32, expected u32"},
      {"alignment 64 leaves an offset unaligned", [&](Bytes& b) { poke<uint32_t>(b, alignment_value, 64); },
       StatusCode::kDataLoss, "not a multiple of the alignment 64"},
      {"n_dims 5", [&](Bytes& b) { poke<uint32_t>(b, one, 5); }, StatusCode::kDataLoss, "'t.one' n_dims at offset"},
      {"zero dim", [&](Bytes& b) { poke<uint64_t>(b, one + 12, 0); }, StatusCode::kDataLoss, "ne[1] at offset"},
      {"negative dim", [&](Bytes& b) { poke<uint64_t>(b, one + 12, uint64_t{1} << 63); }, StatusCode::kDataLoss,
       "negative"},
      {"element count overflow",
       [&](Bytes& b) {
         poke<uint64_t>(b, one + 4, uint64_t{1} << 32);
         poke<uint64_t>(b, one + 12, uint64_t{1} << 32);
       },
       StatusCode::kDataLoss, "overflows int64"},
      {"byte size overflow",
       [&](Bytes& b) {
         poke<uint64_t>(b, two + 4, uint64_t{1} << 62);
         poke<uint32_t>(b, two + 12, 28);  // f64
       },
       StatusCode::kDataLoss, "overflow"},
      {"row not whole blocks", [&](Bytes& b) { poke<uint64_t>(b, one + 4, 48); }, StatusCode::kDataLoss,
       "not a whole number of 32-value q8_0 blocks"},
      {"row not whole q6_K blocks", [&](Bytes& b) { poke<uint32_t>(b, two + 12, 14); }, StatusCode::kDataLoss, "q6_K"},
      {"retired type id", [&](Bytes& b) { poke<uint32_t>(b, one + 20, 4); }, StatusCode::kInvalidArgument,
       "unknown ggml type id 4"},
      {"unknown type id", [&](Bytes& b) { poke<uint32_t>(b, one + 20, 1000); }, StatusCode::kInvalidArgument,
       "unknown ggml type id 1000"},
      {"unaligned offset", [&](Bytes& b) { poke<uint64_t>(b, two + 16, 161); }, StatusCode::kDataLoss,
       "'t.two' offset at offset"},
      {"offset past the end", [&](Bytes& b) { poke<uint64_t>(b, two + 16, uint64_t{1} << 40); }, StatusCode::kDataLoss,
       "run past the end"},
      {"bytes overlap the end", [&](Bytes& b) { poke<uint64_t>(b, two + 16, 192); }, StatusCode::kDataLoss,
       "run past the end"},
      {"offset near 2^64", [&](Bytes& b) { poke<uint64_t>(b, two + 16, kU64Max - 31); }, StatusCode::kDataLoss,
       "run past the end"},
      {"tensor bigger than the file", [&](Bytes& b) { poke<uint64_t>(b, one + 12, 1000); }, StatusCode::kDataLoss,
       "run past the end"},
      {"duplicate tensor name", [&](Bytes& b) { std::memcpy(b.data() + two - 3, "one", 3); }, StatusCode::kDataLoss,
       "'t.one' of tensor info #1 at offset"},
      {"huge tensor name length", [&](Bytes& b) { poke<uint64_t>(b, two - 13, kU64Max); }, StatusCode::kDataLoss,
       "name of tensor info #1"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Bytes bytes = good;
    c.edit(bytes);
    Result<GgufFile> file = read(bytes);
    expect_error(file, c.code, c.needle);
    if (!file.ok()) {
      EXPECT_NE(file.status().to_string().find("offset"), std::string::npos);
    }
  }
}

// Hand-written: a file with no tensors and one array value nested `depth` deep.
Bytes nested_array_file(int depth) {
  Bytes b(4);
  std::memcpy(b.data(), kGgufMagic, 4);
  auto put32 = [&](uint32_t v) {
    b.resize(b.size() + 4);
    std::memcpy(b.data() + b.size() - 4, &v, 4);
  };
  auto put64 = [&](uint64_t v) {
    b.resize(b.size() + 8);
    std::memcpy(b.data() + b.size() - 8, &v, 8);
  };
  put32(3);
  put64(0);  // tensors
  put64(1);  // kvs
  put64(4);
  for (char c : std::string("deep")) b.push_back(static_cast<std::byte>(c));
  put32(static_cast<uint32_t>(GgufValueType::kArray));
  for (int level = 1; level < depth; ++level) {
    put32(static_cast<uint32_t>(GgufValueType::kArray));
    put64(1);
  }
  put32(static_cast<uint32_t>(GgufValueType::kU8));
  put64(0);
  return b;
}

TEST(GgufCorruption, ArrayNestingIsLimited) {
  Result<GgufFile> ok = read(nested_array_file(kGgufMaxArrayDepth));
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ(ok->find("deep")->get_if<GgufArray>()->depth(), kGgufMaxArrayDepth);
  expect_error(read(nested_array_file(kGgufMaxArrayDepth + 1)), StatusCode::kDataLoss, "nest deeper than 8");
  expect_error(read(nested_array_file(100000)), StatusCode::kDataLoss, "nest deeper");
}

TEST(GgufCorruption, RandomEditsNeverCrash) {
  const Bytes good = corruption_fixture();
  std::mt19937 rng(99);
  int accepted = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    Bytes bytes = good;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) bytes[rng() % bytes.size()] = static_cast<std::byte>(rng() & 0xff);
    Result<GgufFile> file = read(bytes);
    if (!file.ok()) continue;
    ++accepted;  // edits in strings or tensor data leave a valid file; reading it must then be safe
    for (const GgufTensor& t : file->tensors()) {
      const std::span<const std::byte> data = file->tensor_bytes(t);
      ASSERT_GE(data.data(), bytes.data());
      ASSERT_LE(data.data() + data.size(), bytes.data() + bytes.size());
    }
  }
  EXPECT_GT(accepted, 0);
}

// ---- Concurrency: an open file is immutable ---------------------------------------------------------------

TEST(GgufConcurrency, ReadersShareOneFile) {
  std::mt19937 rng(31);
  const Bytes bytes = serialize(make_rich_writer(rng));
  Result<GgufFile> file = read(bytes);
  ASSERT_TRUE(file.ok());
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      for (int k = 0; k < 200; ++k) {
        if (!file->get_string("general.architecture").ok() || !file->get_string_array("a.string").ok() ||
            !file->weight(*file->find_tensor("t.q8_0")).ok()) {
          ++failures;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

// ---- The real model -----------------------------------------------------------------------------------------

TEST(GgufRealModel, SmolLM2) {
  const std::string path = hxrt::testing::find_default_model();
  if (path.empty()) GTEST_SKIP() << hxrt::testing::kDefaultModelMissing;
  Result<GgufFile> file = GgufFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  EXPECT_EQ(file->version(), 3u);
  EXPECT_EQ(file->tensors().size(), 272u);
  EXPECT_EQ(file->metadata().size(), 33u);
  EXPECT_EQ(*file->get_string("general.architecture"), "llama");
  EXPECT_EQ(*file->get_u32("llama.block_count"), 30u);
  EXPECT_EQ(*file->get_u64("llama.block_count"), 30u);
  EXPECT_EQ(*file->get_u32("llama.embedding_length"), 576u);
  Result<std::vector<std::string_view>> tokens = file->get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok()) << tokens.status().to_string();
  EXPECT_EQ(tokens->size(), 49152u);
  Result<std::vector<std::string_view>> merges = file->get_string_array("tokenizer.ggml.merges");
  ASSERT_TRUE(merges.ok()) << merges.status().to_string();
  EXPECT_EQ(merges->size(), 48900u);

  ASSERT_NE(file->find_tensor("token_embd.weight"), nullptr);
  ASSERT_NE(file->find_tensor("blk.0.attn_q.weight"), nullptr);
  const GgufTensor& embd = **file->tensor("token_embd.weight");
  EXPECT_EQ(ggml_type_name(embd.ggml_type), "q8_0");
  EXPECT_EQ(embd.dims, (std::vector<uint64_t>{576, 49152}));
  EXPECT_EQ(embd.shape(), (Shape{49152, 576}));
  EXPECT_EQ(*file->tensor_dtype(embd), DType::kQ8_0);
  const GgufTensor& q = **file->tensor("blk.0.attn_q.weight");
  EXPECT_EQ(ggml_type_name(q.ggml_type), "q4_1");
  EXPECT_EQ(q.dims, (std::vector<uint64_t>{576, 576}));
  EXPECT_EQ(*file->tensor_dtype(q), DType::kQ4_1);

  // The first block of each is readable (its f16 scale is finite), and the weight is the mapped bytes.
  for (const GgufTensor* t : {&embd, &q}) {
    Result<WeightData> weight = file->weight(*t);
    ASSERT_TRUE(weight.ok()) << weight.status().to_string();
    EXPECT_EQ(weight->data, file->tensor_bytes(*t).data());
    EXPECT_EQ(weight->size, t->bytes);
    uint16_t scale = 0;
    std::memcpy(&scale, weight->data, 2);
    EXPECT_TRUE(std::isfinite(f16_to_f32(scale))) << t->name;
  }
  uint64_t end = 0;
  for (const GgufTensor& t : file->tensors()) end = std::max(end, file->data_offset() + t.offset + t.bytes);
  EXPECT_LE(end, file->file_size());

  // hxrt's writer packs like llama.cpp's: writing back what was read reproduces the file byte for byte.
  GgufWriter writer;
  for (const GgufKeyValue& kv : file->metadata()) ASSERT_TRUE(writer.add(kv.key, kv.value).ok()) << kv.key;
  for (const GgufTensor& t : file->tensors()) {
    const std::span<const std::byte> data = file->tensor_bytes(t);
    ASSERT_TRUE(writer.add_tensor(t.name, t.ggml_type, t.dims, WeightData{data.data(), data.size(), nullptr}).ok());
  }
  Result<Bytes> rewritten = writer.serialize();
  ASSERT_TRUE(rewritten.ok()) << rewritten.status().to_string();
  ASSERT_EQ(rewritten->size(), file->file_size());
  const std::byte* original = file->tensor_bytes(embd).data() - file->data_offset() - embd.offset;
  EXPECT_EQ(std::memcmp(rewritten->data(), original, rewritten->size()), 0);
}

}  // namespace
}  // namespace hxrt::formats
