// Shared by the device kernel tests (opencl, cuda): run one op on the CPU device and on another device through the
// kernel harness (poisoned outputs, sentinels around them) and compare the outputs by normalised error; random inputs.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "hxrt/base/float16.h"
#include "kernels/testing/kernel_harness.h"
#include "kernels/testing/test_data.h"

namespace hxrt::kernels::testing {

struct Comparison {
  OpResult cpu;
  OpResult device;
  std::vector<double> errors;  // per output: normalised max error of the device vs the CPU (f32 outputs)
};

// Runs `call` on "cpu" and on `device`; every output must be f32.
inline Result<Comparison> compare_with_cpu(OpCall call, const std::string& device) {
  Comparison c;
  call.device = "cpu";
  HXRT_ASSIGN_OR_RETURN(c.cpu, run_op(call));
  call.device = device;
  HXRT_ASSIGN_OR_RETURN(c.device, run_op(call));
  for (size_t i = 0; i < c.cpu.outputs.size(); ++i) {
    if (!(c.cpu.outputs[i].shape == c.device.outputs[i].shape)) {
      return internal_error("output {}: cpu shape {} vs {} {}", i, c.cpu.outputs[i].shape, device,
                            c.device.outputs[i].shape);
    }
    const std::vector<float> reference = c.cpu.outputs[i].to_f32();
    c.errors.push_back(
        normalized_max_error(c.device.outputs[i].to_f32(), std::vector<double>(reference.begin(), reference.end())));
  }
  return c;
}

// Runs the comparison and checks that `device` ran `kernel` and every output is within `tolerance`.
inline void expect_close_to_cpu(const OpCall& call, const std::string& device, const std::string& kernel,
                                double tolerance) {
  Result<Comparison> c = compare_with_cpu(call, device);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->device.kernel, kernel);
  for (size_t i = 0; i < c->errors.size(); ++i) {
    EXPECT_LE(c->errors[i], tolerance) << call.op_type << " output " << i << " (tiling " << c->device.tiling << ")";
  }
  const double worst = *std::max_element(c->errors.begin(), c->errors.end());
  ::testing::Test::RecordProperty("max_normalized_error", std::to_string(worst));
  std::printf("  %s on %s (%s): max normalised error %.3g vs cpu\n", kernel.c_str(), device.c_str(),
              c->device.tiling.c_str(), worst);
}

// Runs `call` on the CPU and on `device` and expects `device` to run `kernel` with outputs bit-identical to the CPU's
// (copies, conversions).
inline void expect_same_bytes(OpCall call, const std::string& device, const std::string& kernel) {
  call.device = "cpu";
  Result<OpResult> cpu = run_op(call);
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  call.device = device;
  Result<OpResult> other = run_op(call);
  ASSERT_TRUE(other.ok()) << other.status().to_string();
  EXPECT_EQ(other->kernel, kernel);
  ASSERT_EQ(other->outputs.size(), cpu->outputs.size());
  for (size_t i = 0; i < cpu->outputs.size(); ++i) EXPECT_EQ(other->outputs[i], cpu->outputs[i]) << "output " << i;
}

// Runs `call` on `device` only and returns its status (bad inputs must fail with a Status, never crash).
inline Status device_status(OpCall call, const std::string& device) {
  call.device = device;
  Result<OpResult> result = run_op(call);
  return result.ok() ? ok_status() : result.status();
}

// Random f32 values in [lo, hi) with random signs (never zero when lo > 0).
inline HostTensor random_signed(Shape shape, std::mt19937& rng, float lo = 0.1f, float hi = 2.0f) {
  std::uniform_real_distribution<float> magnitude(lo, hi);
  std::bernoulli_distribution negative(0.5);
  std::vector<float> values(static_cast<size_t>(shape.num_elements()));
  for (float& v : values) v = negative(rng) ? -magnitude(rng) : magnitude(rng);
  return HostTensor::f32(shape, values);
}

// Random GGUF blocks of any quantized dtype for `rows` rows of `cols` values: random bits everywhere, then f16
// scales (and minimums) in a range that keeps the values of order 0.1-1 (fill_random_blocks, test_data.h).
inline HostTensor random_quantized(DType dtype, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::vector<std::byte> bytes(storage_bytes(dtype, static_cast<uint64_t>(rows * cols)).value());
  fill_random_blocks(dtype, bytes, rng);
  return HostTensor::raw(dtype, Shape{rows, cols}, std::move(bytes));
}

}  // namespace hxrt::kernels::testing
