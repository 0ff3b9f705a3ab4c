// MatMulQ on each JIT backend's device against the CPU kernel. Both quantize the activations to 8-bit blocks the same way and sum in the
// same lane order, so the results are bit-identical where the CPU kernel runs its AVX2/AVX-512 path (the tolerance
// leaves room for its scalar path).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/quant_matmul.h"
#include "kernels/jit/device_test_util.h"

namespace hxrt::kernels::jit {
namespace {

HostTensor random_weight(DType dtype, int64_t n, int64_t k, std::mt19937& rng) {
  if (dtype_info(dtype).is_quantized) return random_quantized(dtype, n, k, rng);
  HostTensor w = random_signed(Shape{n, k}, rng, 0.01f, 0.1f);
  if (dtype == DType::kF32) return w;
  std::vector<std::byte> halves(static_cast<size_t>(n * k * 2));
  const std::vector<float> values = w.to_f32();
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t h = f32_to_f16(values[i]);
    std::memcpy(&halves[2 * i], &h, 2);
  }
  return HostTensor::raw(DType::kF16, Shape{n, k}, std::move(halves));
}

class DeviceMatMulQTest : public DeviceKernelTest {};

TEST_P(DeviceMatMulQTest, EveryWeightTypeAndTileMatchesTheCpu) {
  std::mt19937 rng(41);
  struct Case {
    int64_t m, n, k;
  };
  // Decode (m = 1) and prefill tiles, ragged n, SmolLM2's K = 576 and 1536, a K too large for an 8-row tile.
  const std::vector<Case> cases = {{1, 576, 576}, {5, 192, 576}, {3, 70, 64}, {17, 130, 1536}, {1, 9, 4096}, {9, 33, 4096}};
  for (DType dtype : {DType::kQ8_0, DType::kQ4_1, DType::kF16, DType::kF32}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(fmt::format("{} m={} n={} k={}", dtype, c.m, c.n, c.k));
      OpCall call{.op_type = "MatMulQ", .domain = "hxrt"};
      call.inputs = {random_signed(Shape{c.m, c.k}, rng), random_weight(dtype, c.n, c.k, rng)};
      call.constant_inputs = {1};
      expect_close_to_cpu(call, device(), "MatMulQ", 1e-5);
    }
  }
}

// The other block types (kernels/jit/quant_blocks.cc) keep the CPU AVX2 kernel's lanes: bit-identical to it (the
// CPU runs those kernels on AVX2 and AVX-512 machines alike), within float rounding of its scalar path. q4_0 and
// iq4_nl (Note [Block integers] in kernels/cpu/quant_matmul_blockint.h) are bit-identical to every CPU path.
TEST_P(DeviceMatMulQTest, EveryBlockTypeMatchesTheCpuBitForBit) {
  std::mt19937 rng(44);
  const bool cpu_lanes = cpu::quant_best_isa() != cpu::QuantIsa::kScalar;
  struct Case {
    int64_t m, n, k;
  };
  const std::vector<Case> cases = {{1, 200, 1536}, {5, 70, 512}, {3, 9, 256}, {17, 65, 768}, {2, 33, 8192}};
  for (DType dtype : {DType::kQ4_0, DType::kQ5_0, DType::kQ5_1, DType::kIQ4_NL, DType::kQ2_K, DType::kQ3_K,
                      DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kIQ4_XS}) {
    for (const Case& c : cases) {
      for (bool bias : {false, true}) {
        SCOPED_TRACE(fmt::format("{} m={} n={} k={} bias={}", dtype, c.m, c.n, c.k, bias));
        OpCall call{.op_type = "MatMulQ", .domain = "hxrt"};
        call.inputs = {random_signed(Shape{c.m, c.k}, rng), random_weight(dtype, c.n, c.k, rng)};
        call.constant_inputs = {1};
        if (bias) {
          call.inputs.push_back(random_signed(Shape{c.n}, rng));
          call.constant_inputs.push_back(2);
        }
        if (cpu_lanes || dtype == DType::kQ4_0 || dtype == DType::kIQ4_NL) {
          expect_same_bytes(call, device(), "MatMulQBlocks");
        } else {
          expect_close_to_cpu(call, device(), "MatMulQBlocks", 1e-5);
        }
      }
    }
  }
}

TEST_P(DeviceMatMulQTest, BiasAndBatchDimsMatchTheCpu) {
  std::mt19937 rng(42);
  for (DType dtype : {DType::kQ4_1, DType::kF32}) {
    OpCall call{.op_type = "MatMulQ", .domain = "hxrt"};
    call.inputs = {random_signed(Shape{2, 3, 96}, rng), random_weight(dtype, 40, 96, rng), random_signed(Shape{40}, rng)};
    call.constant_inputs = {1, 2};
    expect_close_to_cpu(call, device(), "MatMulQ", 1e-5);
  }
}

TEST_P(DeviceMatMulQTest, DecodeRowsAreBatchInvariant) {
  // A row's result does not depend on the rows sharing its launch (Note [Batch invariance] in the CPU header).
  std::mt19937 rng(43);
  const HostTensor w = random_quantized(DType::kQ4_1, 100, 576, rng);
  const HostTensor a = random_signed(Shape{6, 576}, rng);
  OpCall batch{.op_type = "MatMulQ", .domain = "hxrt", .device = device()};
  batch.inputs = {a, w};
  Result<OpResult> all = testing::run_op(batch);
  ASSERT_TRUE(all.ok()) << all.status().to_string();
  const std::vector<float> rows = all->outputs[0].to_f32();
  const std::vector<float> values = a.to_f32();
  for (int64_t r : {0, 5}) {
    OpCall one = batch;
    one.inputs[0] = HostTensor::f32(Shape{1, 576}, std::vector<float>(values.begin() + r * 576, values.begin() + (r + 1) * 576));
    Result<OpResult> single = testing::run_op(one);
    ASSERT_TRUE(single.ok()) << single.status().to_string();
    const std::vector<float> got = single->outputs[0].to_f32();
    for (int64_t j = 0; j < 100; ++j) ASSERT_EQ(got[static_cast<size_t>(j)], rows[static_cast<size_t>(r * 100 + j)]) << r << "," << j;
  }
}

HXRT_DEVICE_KERNEL_TESTS(DeviceMatMulQTest);

}  // namespace
}  // namespace hxrt::kernels::jit
