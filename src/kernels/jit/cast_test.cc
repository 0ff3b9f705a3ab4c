// Cast on each JIT backend's device against the CPU kernel: every pair of the eight dtypes, bit for bit, on values that exercise rounding
// (f16/bf16 ties, subnormals), saturation (beyond every integer range, ±inf, NaN) and integer wrap-around.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "hxrt/base/float16.h"
#include "kernels/jit/device_test_util.h"

namespace hxrt::kernels::jit {
namespace {

// ONNX TensorProto codes of the dtypes Cast takes.
struct CastType {
  DType dtype;
  int64_t onnx;
};
constexpr CastType kTypes[] = {{DType::kF32, 1}, {DType::kF16, 10}, {DType::kBF16, 16}, {DType::kI8, 3},
                               {DType::kU8, 2},  {DType::kI32, 6},  {DType::kI64, 7},   {DType::kBool, 9}};

template <typename T>
void append(std::vector<std::byte>& bytes, T value) {
  const size_t at = bytes.size();
  bytes.resize(at + sizeof(T));
  std::memcpy(&bytes[at], &value, sizeof(T));
}

// `count` random values of `dtype` (plus special values for the float types), as raw bytes.
HostTensor cast_input(DType dtype, int64_t count, std::mt19937& rng) {
  std::vector<std::byte> bytes;
  std::uniform_real_distribution<float> exponent(-30.0f, 70.0f);  // magnitudes from 1e-9 to 1e21
  std::bernoulli_distribution negative(0.5);
  std::vector<float> floats;
  for (int64_t i = 0; i < count; ++i) {
    const float magnitude = std::exp2(exponent(rng) * 0.5f);
    floats.push_back(negative(rng) ? -magnitude : magnitude);
  }
  // Specials: ties and saturation boundaries, infinities and NaN.
  const std::vector<float> specials = {0.5f,
                                       -2.5f,
                                       255.5f,
                                       127.99f,
                                       -128.7f,
                                       256.0f,
                                       2147483520.0f,
                                       -2147483648.0f,
                                       3e9f,
                                       -3e9f,
                                       9.3e18f,
                                       -9.3e18f,
                                       65519.0f,
                                       65520.0f,
                                       1e-7f,
                                       6e-8f,
                                       std::numeric_limits<float>::infinity(),
                                       -std::numeric_limits<float>::infinity(),
                                       std::numeric_limits<float>::quiet_NaN()};
  floats.insert(floats.end(), specials.begin(), specials.end());
  const auto n = static_cast<int64_t>(floats.size());
  std::uniform_int_distribution<int64_t> any64(std::numeric_limits<int64_t>::min(),
                                               std::numeric_limits<int64_t>::max());
  std::uniform_int_distribution<int32_t> any32(std::numeric_limits<int32_t>::min(),
                                               std::numeric_limits<int32_t>::max());
  std::uniform_int_distribution<int> any8(0, 255);
  std::uniform_int_distribution<int> boolean(0, 1);
  for (int64_t i = 0; i < n; ++i) {
    const float f = floats[static_cast<size_t>(i)];
    switch (dtype) {
      case DType::kF32: append(bytes, f); break;
      case DType::kF16: append(bytes, f32_to_f16(f)); break;
      case DType::kBF16: append(bytes, f32_to_bf16(f)); break;
      case DType::kI8: append(bytes, static_cast<int8_t>(any8(rng) - 128)); break;
      case DType::kU8: append(bytes, static_cast<uint8_t>(any8(rng))); break;
      case DType::kI32: append(bytes, any32(rng)); break;
      case DType::kI64: append(bytes, i % 2 == 0 ? any64(rng) : static_cast<int64_t>(any32(rng))); break;
      case DType::kBool: append(bytes, static_cast<uint8_t>(boolean(rng))); break;
      default: break;
    }
  }
  return HostTensor::raw(dtype, Shape{n}, std::move(bytes));
}

class DeviceCastTest : public DeviceKernelTest {};

TEST_P(DeviceCastTest, EveryPairMatchesTheCpuBitForBit) {
  std::mt19937 rng(51);
  for (const CastType& from : kTypes) {
    const HostTensor input = cast_input(from.dtype, 1000, rng);  // 1019 values: a ragged last block
    for (const CastType& to : kTypes) {
      SCOPED_TRACE(fmt::format("{} -> {}", from.dtype, to.dtype));
      OpCall call{.op_type = "Cast"};
      call.attrs.set("to", graph::Attribute(to.onnx));
      call.inputs = {input};
      expect_same_bytes(call, device(), "Cast");
    }
  }
}

TEST_P(DeviceCastTest, MultiDimensionalAndEmptyTensors) {
  std::mt19937 rng(52);
  OpCall call{.op_type = "Cast"};
  call.attrs.set("to", graph::Attribute(int64_t{10}));  // f16
  call.inputs = {random_signed(Shape{3, 5, 7}, rng)};
  expect_same_bytes(call, device(), "Cast");
  call.inputs = {HostTensor::f32(Shape{0, 7}, {})};
  expect_same_bytes(call, device(), "Cast");
}

TEST_P(DeviceCastTest, BadCastsReturnAnError) {
  std::mt19937 rng(53);
  OpCall missing_to{.op_type = "Cast"};  // `to` is required
  missing_to.inputs = {random_signed(Shape{4}, rng)};
  const Status missing = device_status(missing_to, device());
  EXPECT_EQ(missing.code(), StatusCode::kInvalidArgument) << missing.to_string();
  OpCall quantized{.op_type = "Cast"};  // no Cast from a block-quantized dtype
  quantized.attrs.set("to", graph::Attribute(int64_t{1}));
  quantized.inputs = {random_quantized(DType::kQ8_0, 1, 32, rng)};
  EXPECT_FALSE(device_status(quantized, device()).ok());
}

HXRT_DEVICE_KERNEL_TESTS(DeviceCastTest);

}  // namespace
}  // namespace hxrt::kernels::jit
