#include "hxrt/formats/npy.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "hxrt/base/fault_injection.h"
#include "hxrt/base/float16.h"

namespace hxrt::formats {
namespace {

std::vector<std::byte> as_bytes(std::string_view text) {
  std::vector<std::byte> out(text.size());
  std::memcpy(out.data(), text.data(), text.size());
  return out;
}

// A .npy file with a hand-written header: magic, version, little-endian header length, header, data.
std::vector<std::byte> npy_file(int major, std::string_view header, std::span<const std::byte> data = {}) {
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  const size_t length_bytes = major == 1 ? 2 : 4;
  for (size_t i = 0; i < length_bytes; ++i) out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  out += header;
  std::vector<std::byte> bytes = as_bytes(out);
  bytes.insert(bytes.end(), data.begin(), data.end());
  return bytes;
}

std::vector<std::byte> f32_bytes(const std::vector<float>& values) {
  std::vector<std::byte> out(values.size() * sizeof(float));
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// Random bytes valid for `dtype` (bool as 0/1).
HostTensor random_tensor(DType dtype, Shape shape, std::mt19937& rng) {
  const uint64_t bytes = storage_bytes(dtype, static_cast<uint64_t>(shape.num_elements())).value();
  std::vector<std::byte> data(bytes);
  std::uniform_int_distribution<int> byte(0, 255);
  for (std::byte& b : data) b = static_cast<std::byte>(dtype == DType::kBool ? byte(rng) & 1 : byte(rng));
  return HostTensor::raw(dtype, shape, std::move(data));
}

void expect_error(const Result<HostTensor>& result, StatusCode code, std::string_view needle) {
  ASSERT_FALSE(result.ok()) << "expected " << status_code_name(code) << " containing '" << needle << "'";
  EXPECT_EQ(result.status().code(), code) << result.status().to_string();
  EXPECT_NE(result.status().to_string().find(needle), std::string::npos) << result.status().to_string();
}

TEST(NpyTest, RoundTripsEveryDtypeAndShape) {
  std::mt19937 rng(7);
  const DType dtypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kI64,
                          DType::kI32, DType::kI8,  DType::kU8,   DType::kBool};
  const Shape shapes[] = {Shape{}, Shape{1}, Shape{7}, Shape{3, 5}, Shape{2, 0, 4}, Shape{2, 3, 1, 2, 1, 1, 2, 3}};
  for (DType dtype : dtypes) {
    for (const Shape& shape : shapes) {
      const HostTensor tensor = random_tensor(dtype, shape, rng);
      const std::string label = fmt::format("{}{}", dtype, shape);
      Result<std::vector<std::byte>> bytes = serialize_npy(tensor);
      ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
      Result<NpyHeader> header = parse_npy_header(*bytes);
      ASSERT_TRUE(header.ok()) << header.status().to_string();
      EXPECT_EQ(header->major_version, 1);
      EXPECT_EQ(header->data_offset % kNpyAlignment, 0u) << "data aligned to 64 bytes";
      EXPECT_EQ(header->data_bytes, tensor.bytes.size());
      EXPECT_EQ(static_cast<char>((*bytes)[header->data_offset - 1]), '\n') << "the header ends with a newline";
      Result<HostTensor> back = read_npy_from_memory(*bytes);
      ASSERT_TRUE(back.ok()) << label << ": " << back.status().to_string();
      EXPECT_EQ(*back, tensor) << label;
    }
  }
}

TEST(NpyTest, WritesExactlyWhatNumPyWrites) {
  // np.save of np.arange(6, dtype='<f4').reshape(2, 3): a 118-byte header ('v'), data at offset 128.
  const std::vector<float> values = {0, 1, 2, 3, 4, 5};
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  header.resize(117, ' ');
  header += '\n';
  const std::vector<std::byte> expected = npy_file(1, header, f32_bytes(values));
  ASSERT_EQ(expected.size(), 128u + 24u);
  Result<std::vector<std::byte>> bytes = serialize_npy(HostTensor::f32({2, 3}, values));
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  EXPECT_EQ(*bytes, expected);
}

TEST(NpyTest, DescrsOfEveryDtype) {
  EXPECT_EQ(npy_descr(DType::kF32).value(), "<f4");
  EXPECT_EQ(npy_descr(DType::kF16).value(), "<f2");
  EXPECT_EQ(npy_descr(DType::kBF16).value(), "bfloat16");
  EXPECT_EQ(npy_descr(DType::kI64).value(), "<i8");
  EXPECT_EQ(npy_descr(DType::kI32).value(), "<i4");
  EXPECT_EQ(npy_descr(DType::kI8).value(), "|i1");
  EXPECT_EQ(npy_descr(DType::kU8).value(), "|u1");
  EXPECT_EQ(npy_descr(DType::kBool).value(), "|b1");
  EXPECT_EQ(npy_descr(DType::kQ4_0).status().code(), StatusCode::kInvalidArgument);
  // Byte-order variants NumPy may produce.
  EXPECT_EQ(dtype_from_npy_descr("=f4").value(), DType::kF32);
  EXPECT_EQ(dtype_from_npy_descr("<u1").value(), DType::kU8);
  EXPECT_EQ(dtype_from_npy_descr("|b1").value(), DType::kBool);
  EXPECT_EQ(dtype_from_npy_descr(">i1").value(), DType::kI8) << "byte order is irrelevant for one byte";
}

TEST(NpyTest, ReadsHandWrittenHeadersOfEachVersion) {
  const std::vector<float> values = {1.5f, -2.0f, 3.25f, 4.0f, -5.5f, 6.0f};
  const HostTensor expected = HostTensor::f32({3, 2}, values);
  for (int major : {1, 2, 3}) {
    // Unaligned, unpadded, no trailing newline: still valid.
    const auto bytes = npy_file(major, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2)}", f32_bytes(values));
    Result<HostTensor> t = read_npy_from_memory(bytes);
    ASSERT_TRUE(t.ok()) << "version " << major << ": " << t.status().to_string();
    EXPECT_EQ(*t, expected);
    EXPECT_EQ(parse_npy_header(bytes)->major_version, major);
  }
  // Whitespace, double quotes, another key order, trailing commas, Python 2 long dims.
  const char* variants[] = {
      "{ \"shape\" : ( 3 , 2 , ) , \"descr\":\"<f4\",\"fortran_order\":False,}   \n",
      "{'fortran_order': False,\n 'shape': (3L, 2L), 'descr': '=f4'}\n",
      "\t{'descr':'<f4','fortran_order':False,'shape':(3,2)}",
  };
  for (const char* header : variants) {
    Result<HostTensor> t = read_npy_from_memory(npy_file(1, header, f32_bytes(values)));
    ASSERT_TRUE(t.ok()) << header << ": " << t.status().to_string();
    EXPECT_EQ(*t, expected) << header;
  }
  // Version 3.0 headers may hold UTF-8; padding is ignored.
  Result<HostTensor> scalar =
      read_npy_from_memory(npy_file(3, "{'descr': '<i8', 'fortran_order': False, 'shape': (), }          \n",
                                    as_bytes(std::string_view("\x2a\0\0\0\0\0\0\0", 8))));
  ASSERT_TRUE(scalar.ok()) << scalar.status().to_string();
  EXPECT_EQ(scalar->shape.rank(), 0);
  EXPECT_EQ(scalar->to_i64(), (std::vector<int64_t>{42}));
  Result<HostTensor> rank1 =
      read_npy_from_memory(npy_file(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }\n", as_bytes("abc")));
  ASSERT_TRUE(rank1.ok()) << rank1.status().to_string();
  EXPECT_EQ(rank1->shape, Shape{3});
  Result<HostTensor> empty =
      read_npy_from_memory(npy_file(1, "{'descr': '<f2', 'fortran_order': False, 'shape': (0, 4), }\n"));
  ASSERT_TRUE(empty.ok()) << empty.status().to_string();
  EXPECT_EQ(empty->shape, (Shape{0, 4}));
}

TEST(NpyTest, BFloat16UsesItsOwnDescr) {
  const std::vector<uint16_t> bits = {f32_to_bf16(1.0f), f32_to_bf16(-0.5f), f32_to_bf16(3.0f)};
  std::vector<std::byte> data(bits.size() * 2);
  std::memcpy(data.data(), bits.data(), data.size());
  const HostTensor tensor = HostTensor::raw(DType::kBF16, {3}, data);
  const std::vector<std::byte> bytes = serialize_npy(tensor).value();
  EXPECT_EQ(parse_npy_header(bytes)->descr, "bfloat16");
  EXPECT_EQ(read_npy_from_memory(bytes)->to_f32(), (std::vector<float>{1.0f, -0.5f, 3.0f}));
  expect_error(read_npy_from_memory(npy_file(1, "{'descr': '<V2', 'fortran_order': False, 'shape': (3,), }\n", data)),
               StatusCode::kInvalidArgument, "ambiguous");
}

TEST(NpyTest, RejectsUnsupportedButValidFiles) {
  const auto data = f32_bytes({1, 2});
  expect_error(read_npy_from_memory(npy_file(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }\n", data)),
               StatusCode::kInvalidArgument, "fortran_order");
  expect_error(read_npy_from_memory(npy_file(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }\n", data)),
               StatusCode::kInvalidArgument, "unsupported descr '<f8'");
  expect_error(read_npy_from_memory(npy_file(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }\n", data)),
               StatusCode::kInvalidArgument, "big-endian");
  expect_error(read_npy_from_memory(npy_file(1, "{'descr': '<U5', 'fortran_order': False, 'shape': (2,), }\n", data)),
               StatusCode::kInvalidArgument, "unsupported descr");
  expect_error(
      read_npy_from_memory(npy_file(1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }\n", data)),
      StatusCode::kInvalidArgument, "structured");
  expect_error(read_npy_from_memory(npy_file(4, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n", data)),
               StatusCode::kInvalidArgument, "version 4.0");
  expect_error(read_npy_from_memory(
                   npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,2), }\n", data)),
               StatusCode::kInvalidArgument, "more than 8 dims");
  HostTensor quantized = HostTensor::raw(DType::kQ8_0, {32}, std::vector<std::byte>(34));
  EXPECT_EQ(serialize_npy(quantized).status().code(), StatusCode::kInvalidArgument);
}

TEST(NpyTest, RejectsCorruptedFilesWithAClearStatus) {
  const auto data = f32_bytes({1, 2, 3, 4});
  const std::string good = "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }\n";
  expect_error(read_npy_from_memory({}), StatusCode::kDataLoss, "shorter than the 6-byte magic");
  expect_error(read_npy_from_memory(as_bytes("PK\x03\x04 this is a zip")), StatusCode::kDataLoss, "bad magic");
  expect_error(read_npy_from_memory(as_bytes("\x93NUMPY\x01")), StatusCode::kDataLoss, "no version");
  expect_error(read_npy_from_memory(as_bytes(std::string("\x93NUMPY\x01\x00\x10", 9))), StatusCode::kDataLoss,
               "shorter than the 10-byte prefix");
  expect_error(read_npy_from_memory(as_bytes(std::string("\x93NUMPY\x02\x00\xff\xff\xff\x7f{}", 14))),
               StatusCode::kDataLoss, "runs past the end of the file");
  // Header length larger than the header actually present (file cut inside the header).
  std::vector<std::byte> cut = npy_file(1, good, data);
  cut.resize(30);
  expect_error(read_npy_from_memory(cut), StatusCode::kDataLoss, "runs past the end");
  // Data shorter or longer than the header says.
  std::vector<std::byte> short_data = npy_file(1, good, data);
  short_data.pop_back();
  expect_error(read_npy_from_memory(short_data), StatusCode::kDataLoss, "truncated .npy data");
  std::vector<std::byte> long_data = npy_file(1, good, data);
  long_data.push_back(std::byte{0});
  expect_error(read_npy_from_memory(long_data), StatusCode::kDataLoss, "1 extra");
  // Absurd dims: element counts that overflow, sizes far past the file, negative and non-numeric dims.
  expect_error(read_npy_from_memory(
                   npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }", data)),
               StatusCode::kOutOfRange, "more elements than fit in int64");
  expect_error(read_npy_from_memory(
                   npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", data)),
               StatusCode::kDataLoss, "does not fit in 64 bits");
  expect_error(read_npy_from_memory(
                   npy_file(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (1152921504606846976, 2), }", data)),
               StatusCode::kOutOfRange, "");
  expect_error(read_npy_from_memory(
                   npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000, 1000000), }", data)),
               StatusCode::kDataLoss, "truncated .npy data");
  expect_error(read_npy_from_memory(npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-4,), }", data)),
               StatusCode::kDataLoss, "negative dim");
  expect_error(read_npy_from_memory(npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (four,), }", data)),
               StatusCode::kDataLoss, "a dim (an integer)");
  // Malformed dicts.
  const std::pair<const char*, const char*> malformed[] = {
      {"'descr': '<f4', 'fortran_order': False, 'shape': (4,)}", "expected the header dict"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4,)", "found the end of the header"},
      {"{'descr': '<f4', 'fortran_order': False}", "no 'shape' key"},
      {"{'descr': '<f4', 'shape': (4,)}", "no 'fortran_order' key"},
      {"{'fortran_order': False, 'shape': (4,)}", "no 'descr' key"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (4,)}", "duplicate key 'descr'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'extra': 1}", "unexpected key 'extra'"},
      {"{'descr' '<f4', 'fortran_order': False, 'shape': (4,)}", "expected ':'"},
      {"{'descr': '<f4, 'fortran_order': False, 'shape': (4,)}", "',' or '}' after the value of 'descr'"},
      {"{'descr': '<f4', 'fortran_order': false, 'shape': (4,)}", "True or False"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [4]}", "a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4 4)}", "',' or ')'"},
      {"{'descr': '<f4' 'fortran_order': False, 'shape': (4,)}", "',' or '}'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4,)} junk", "unexpected text after the header dict"},
      {"{'descr': '<f\\x34', 'fortran_order': False, 'shape': (4,)}", "escape sequences"},
      {"{'descr': '<f4", "unterminated string"},
  };
  for (const auto& [header, needle] : malformed) {
    expect_error(read_npy_from_memory(npy_file(1, header, data)), StatusCode::kDataLoss, needle);
  }
}

// Every prefix of a valid file, and every single-byte change of its header, is rejected or read without crashing
// (this test is meant for the ASan build).
TEST(NpyTest, TruncationsAndByteFlipsNeverCrash) {
  std::mt19937 rng(3);
  const std::vector<std::byte> file = serialize_npy(HostTensor::random_f32({3, 4}, rng)).value();
  for (size_t size = 0; size < file.size(); ++size) {
    Result<HostTensor> t = read_npy_from_memory(std::span(file).first(size));
    EXPECT_FALSE(t.ok()) << "prefix of " << size << " bytes";
  }
  const uint64_t data_offset = parse_npy_header(file)->data_offset;
  for (size_t i = 0; i < data_offset; ++i) {
    for (int value : {0x00, 0x20, 0x27, 0x28, 0x29, 0x2c, 0x39, 0x7d, 0xff}) {
      std::vector<std::byte> changed = file;
      changed[i] = static_cast<std::byte>(value);
      Result<HostTensor> t = read_npy_from_memory(changed);
      if (t.ok()) {
        EXPECT_EQ(t->bytes.size(), file.size() - data_offset);
      }
    }
  }
}

TEST(NpyTest, FilesRoundTripAndMissingFilesAreNotFound) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / fmt::format("hxrt_npy_test_{}", ::getpid());
  std::filesystem::create_directories(dir);
  std::mt19937 rng(11);
  const HostTensor tensor = HostTensor::random_f32({4, 64}, rng);
  const std::string path = (dir / "x.npy").string();
  ASSERT_TRUE(write_npy(path, tensor).ok());
  Result<HostTensor> back = read_npy(path);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, tensor);
  EXPECT_EQ(std::filesystem::file_size(path), 128u + 4 * 64 * 4);

  Result<HostTensor> missing = read_npy((dir / "missing.npy").string());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().to_string().find("missing.npy"), std::string::npos);
  EXPECT_EQ(read_npy(dir.string()).status().code(), StatusCode::kInvalidArgument) << "a directory";
  {
    std::ofstream out(dir / "bad.npy", std::ios::binary);
    out << "not numpy";
  }
  Result<HostTensor> bad = read_npy((dir / "bad.npy").string());
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(bad.status().to_string().find("bad.npy"), std::string::npos) << "the context names the file";
  EXPECT_FALSE(write_npy((dir / "no_such_dir" / "y.npy").string(), tensor).ok());
  std::filesystem::remove_all(dir);
}

TEST(NpyTest, InjectedFileFaultsFailCleanlyAndLeaveNoFileBehind) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / fmt::format("hxrt_npy_fault_test_{}", ::getpid());
  std::filesystem::create_directories(dir);
  std::mt19937 rng(12);
  const HostTensor tensor = HostTensor::random_f32({3, 5}, rng);
  const std::string path = (dir / "x.npy").string();
  for (const fault::Site site : {fault::Site::kFileOpen, fault::Site::kFileWrite}) {
    fault::arm(fault::Plan{.fail_at = 1, .sites = fault::site_bit(site)});
    const Status written = write_npy(path, tensor);
    fault::disarm();
    ASSERT_FALSE(written.ok()) << fault::site_name(site);
    EXPECT_NE(written.message().find(fault::site_name(site)), std::string::npos) << written.to_string();
    EXPECT_TRUE(std::filesystem::is_empty(dir)) << "a failed write leaves neither the file nor its temporary";
  }
  ASSERT_TRUE(write_npy(path, tensor).ok());
  for (const fault::Site site : {fault::Site::kFileOpen, fault::Site::kFileMap}) {
    fault::arm(fault::Plan{.fail_at = 1, .sites = fault::site_bit(site)});
    const Result<HostTensor> read = read_npy(path);
    fault::disarm();
    ASSERT_FALSE(read.ok()) << fault::site_name(site);
    EXPECT_NE(read.status().to_string().find("x.npy"), std::string::npos) << read.status().to_string();
  }
  Result<HostTensor> back = read_npy(path);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, tensor);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hxrt::formats
