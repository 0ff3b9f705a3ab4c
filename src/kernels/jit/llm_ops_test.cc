// GatherRows and PagedAttention on each JIT backend's device against the CPU kernels: both repeat the CPU's float
// operations, so the tolerance is 0 (skipped where the device is absent).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "hxrt/base/float16.h"
#include "kernels/jit/device_test_util.h"

namespace hxrt::kernels::jit {
namespace {

// A table of `rows` rows of `cols` values in `dtype`, random and never zero.
HostTensor random_table(DType dtype, int64_t rows, int64_t cols, std::mt19937& rng) {
  if (dtype_info(dtype).is_quantized) return random_quantized(dtype, rows, cols, rng);
  HostTensor f32 = random_signed(Shape{rows, cols}, rng);
  if (dtype == DType::kF32) return f32;
  const std::vector<float> values = f32.to_f32();
  std::vector<std::byte> bytes(values.size() * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &values[i], 4);
    const uint16_t h = dtype == DType::kF16 ? f32_to_f16(values[i]) : static_cast<uint16_t>(bits >> 16);
    std::memcpy(&bytes[2 * i], &h, 2);
  }
  return HostTensor::raw(dtype, Shape{rows, cols}, std::move(bytes));
}

class DeviceLlmOpsTest : public DeviceKernelTest {};

TEST_P(DeviceLlmOpsTest, GatherRowsWidensEveryFormatExactlyAsTheCpu) {
  std::mt19937 rng(51);
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_1}) {
    SCOPED_TRACE(fmt::format("{}", dtype));
    OpCall call{.op_type = "GatherRows", .domain = "hxrt"};
    call.inputs = {random_table(dtype, 13, 576, rng), HostTensor::i32(Shape{5}, {12, 0, 7, 7, 3})};
    call.constant_inputs = {0};
    expect_close_to_cpu(call, device(), "GatherRowsDequant", 0.0);
    call.inputs[1] = HostTensor::i64(Shape{2}, {1, 11});
    expect_close_to_cpu(call, device(), "GatherRowsDequant", 0.0);
  }
}

// q5_0, q5_1, iq4_nl and the K-quants (kernels/jit/quant_blocks.cc): ggml's float arithmetic, as the CPU's.
TEST_P(DeviceLlmOpsTest, GatherRowsWidensEveryBlockTypeExactlyAsTheCpu) {
  std::mt19937 rng(52);
  for (DType dtype : {DType::kQ5_0, DType::kQ5_1, DType::kIQ4_NL, DType::kQ2_K, DType::kQ3_K, DType::kQ4_K,
                      DType::kQ5_K, DType::kQ6_K, DType::kIQ4_XS}) {
    SCOPED_TRACE(fmt::format("{}", dtype));
    OpCall call{.op_type = "GatherRows", .domain = "hxrt"};
    call.inputs = {random_quantized(dtype, 13, 768, rng), HostTensor::i32(Shape{5}, {12, 0, 7, 7, 3})};
    call.constant_inputs = {0};
    expect_same_bytes(call, device(), "GatherRowsBlocks");
    call.inputs[1] = HostTensor::i64(Shape{2}, {1, 11});
    expect_same_bytes(call, device(), "GatherRowsBlocks");
    call.inputs[1] = HostTensor::i32(Shape{1}, {13});
    EXPECT_EQ(device_status(call, device()).code(), StatusCode::kInvalidArgument);
  }
}

TEST_P(DeviceLlmOpsTest, GatherRowsIndexOutOfRangeFailsTheLaunch) {
  std::mt19937 rng(52);
  OpCall call{.op_type = "GatherRows", .domain = "hxrt", .device = device()};
  call.inputs = {random_table(DType::kQ8_0, 4, 64, rng), HostTensor::i32(Shape{2}, {1, 4})};
  Result<OpResult> result = testing::run_op(call);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument) << result.status().to_string();
}

// A paged-cache launch: every cache slot holds random history; sequences bring new tokens (a prefill chunk and
// decode steps) whose k/v the kernel writes before attending.
struct AttentionCase {
  int64_t n_heads, n_kv, head_dim, n_layers, n_blocks, block_size, max_blocks, layer;
  DType cache_type;
  std::vector<std::vector<int32_t>> positions;  // per sequence: the positions of its tokens in this launch
};

OpCall attention_call(const AttentionCase& c, std::mt19937& rng) {
  const auto n_seqs = static_cast<int64_t>(c.positions.size());
  // Block tables: a random permutation of the cache's blocks, max_blocks per sequence.
  std::vector<int32_t> blocks(static_cast<size_t>(c.n_blocks));
  std::iota(blocks.begin(), blocks.end(), 0);
  std::shuffle(blocks.begin(), blocks.end(), rng);
  std::vector<int32_t> tables(static_cast<size_t>(n_seqs * c.max_blocks));
  for (size_t i = 0; i < tables.size(); ++i) tables[i] = blocks[i % blocks.size()];
  std::vector<int32_t> token_seq, positions;
  for (int64_t s = 0; s < n_seqs; ++s) {
    for (int32_t p : c.positions[static_cast<size_t>(s)]) {
      token_seq.push_back(static_cast<int32_t>(s));
      positions.push_back(p);
    }
  }
  const auto n_tokens = static_cast<int64_t>(token_seq.size());
  const Shape cache_shape{c.n_layers, c.n_blocks, c.block_size, c.n_kv, c.head_dim};
  const int64_t cache_rows = cache_shape.num_elements() / c.head_dim;
  OpCall call{.op_type = "PagedAttention", .domain = "hxrt"};
  call.attrs.set("layer", graph::Attribute(c.layer));
  HostTensor k_cache = random_table(c.cache_type, cache_rows, c.head_dim, rng);
  HostTensor v_cache = random_table(c.cache_type, cache_rows, c.head_dim, rng);
  k_cache.shape = cache_shape;
  v_cache.shape = cache_shape;
  call.inputs = {random_signed(Shape{n_tokens, c.n_heads, c.head_dim}, rng),
                 random_signed(Shape{n_tokens, c.n_kv, c.head_dim}, rng),
                 random_signed(Shape{n_tokens, c.n_kv, c.head_dim}, rng),
                 k_cache,
                 v_cache,
                 HostTensor::i32(Shape{n_seqs, c.max_blocks}, tables),
                 HostTensor::i32(Shape{n_tokens}, token_seq),
                 HostTensor::i32(Shape{n_tokens}, positions)};
  return call;
}

TEST_P(DeviceLlmOpsTest, PagedAttentionMatchesTheCpu) {
  std::mt19937 rng(53);
  const std::vector<AttentionCase> cases = {
      // Small: head_dim 36 (a dot-product tail of 4 lanes), a prefill chunk after history, two decode steps.
      {6, 2, 36, 2, 16, 4, 5, 1, DType::kF16, {{3, 4, 5, 6, 7}, {9}, {13}}},
      {6, 2, 40, 2, 12, 4, 5, 0, DType::kF32, {{0, 1, 2}, {19}}},
      // SmolLM2's attention (9 heads, 3 kv heads, head_dim 64) with a context beyond the smallest MAX_CTX.
      {9, 3, 64, 3, 40, 16, 20, 2, DType::kF16, {{300}, {0, 1, 2, 3, 4}}},
      {9, 3, 64, 2, 40, 16, 20, 1, DType::kF32, {{150, 151}, {7}}},  // an f32 cache
      // The largest context CUDA takes (MAX_CTX 8192), attended from its last position.
      {9, 3, 64, 1, 1024, 16, 512, 0, DType::kF16, {{8191}, {4000}}},
  };
  for (const AttentionCase& c : cases) {
    SCOPED_TRACE(fmt::format("heads {}/{} head_dim {} cache {}", c.n_heads, c.n_kv, c.head_dim, c.cache_type));
    expect_close_to_cpu(attention_call(c, rng), device(), "PagedAttentionF32", 0.0);
  }
}

TEST_P(DeviceLlmOpsTest, SlidingWindowAndSoftcapMatchTheCpu) {
  std::mt19937 rng(57);
  struct Case {
    AttentionCase attention;
    int64_t window;
    double softcap;
  };
  const std::vector<Case> cases = {
      // Small heads (head_dim < the group) with windows shorter than the history, and a capped one.
      {{6, 2, 36, 2, 16, 4, 5, 1, DType::kF16, {{3, 4, 5, 6, 7}, {9}, {13}}}, 4, 0.0},
      {{6, 2, 40, 2, 12, 4, 5, 0, DType::kF32, {{0, 1, 2}, {19}}}, 3, 1.5},
      {{6, 2, 36, 2, 16, 4, 5, 1, DType::kF16, {{3, 4, 5, 6, 7}, {9}, {13}}}, 0, 50.0},
      {{2, 1, 8, 1, 8, 4, 4, 0, DType::kF16, {{14, 15}}}, 1, 0.0},
      // Gemma 3's head_dim 256 with a 512 window, queries before and after it.
      {{4, 1, 256, 1, 80, 16, 64, 0, DType::kF16, {{100}, {700, 701}, {1023}}}, 512, 0.0},
      // Gemma 2's: head_dim 256, window 4096 not reached, softcap 50.
      {{8, 4, 256, 1, 40, 16, 20, 0, DType::kF16, {{250}, {0, 1}}}, 4096, 50.0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("head_dim {} window {} softcap {}", c.attention.head_dim, c.window, c.softcap));
    OpCall call = attention_call(c.attention, rng);
    call.attrs.set("window", graph::Attribute(c.window));
    call.attrs.set("softcap", graph::Attribute(c.softcap));
    expect_close_to_cpu(call, device(), "PagedAttentionF32", 0.0);
  }
}

TEST_P(DeviceLlmOpsTest, PagedAttentionBadBlockTableFailsTheLaunch) {
  std::mt19937 rng(54);
  OpCall call = attention_call({2, 1, 8, 1, 4, 4, 2, 0, DType::kF16, {{5}}}, rng);
  call.inputs[5] = HostTensor::i32(Shape{1, 2}, {0, 9});  // block 9 of a 4-block cache
  call.device = device();
  Result<OpResult> result = testing::run_op(call);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument) << result.status().to_string();
}

TEST_P(DeviceLlmOpsTest, PagedAttentionPastTheBackendsContextLimitIsUnimplemented) {
  std::mt19937 rng(55);
  // Block tables spanning 600 blocks of 16 positions: MAX_CTX would be 16384 scores. CUDA keeps scores in 48 KiB of
  // static shared memory (8192 positions) and refuses; OpenCL has no such limit and computes it.
  OpCall call = attention_call({2, 1, 8, 1, 4, 16, 600, 0, DType::kF16, {{5}}}, rng);
  const Status status = device_status(call, device());
  if (device() == "cuda") {
    EXPECT_EQ(status.code(), StatusCode::kUnimplemented) << status.to_string();
  } else {
    EXPECT_TRUE(status.ok()) << status.to_string();
  }
}

TEST_P(DeviceLlmOpsTest, MoeRouteChoosesTheCpusExperts) {
  std::mt19937 rng(58);
  for (const bool normalize : {false, true}) {
    OpCall call{.op_type = "MoeRoute", .domain = "hxrt", .num_outputs = 2};
    call.attrs.set("k", graph::Attribute(int64_t{4}));
    call.attrs.set("normalize", graph::Attribute(int64_t{normalize ? 1 : 0}));
    call.inputs = {random_signed(Shape{33, 16}, rng, 0.1f, 6.0f)};
    // The ids exactly; the weights to float rounding (the device sums the exponentials in float, the CPU in double).
    expect_close_to_cpu(call, device(), "MoeRouteSoftmaxTopK", 1e-6);
  }
}

TEST_P(DeviceLlmOpsTest, MatMulQExpertsMatchesTheCpu) {
  std::mt19937 rng(59);
  const int64_t n_tokens = 7, n_slots = 2, n_experts = 4, n = 40, k = 256;
  for (const DType dtype : {DType::kQ8_0, DType::kQ4_0, DType::kQ5_0, DType::kQ4_K, DType::kQ6_K, DType::kF32}) {
    for (const bool weighted : {false, true}) {
      SCOPED_TRACE(fmt::format("{} weighted {}", dtype, weighted));
      HostTensor w = dtype == DType::kF32 ? random_signed(Shape{n_experts * n, k}, rng)
                                          : testing::random_quantized(dtype, n_experts * n, k, rng);
      w.shape = Shape{n_experts, n, k};
      std::vector<int32_t> ids(static_cast<size_t>(n_tokens * n_slots));
      for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 3 + 1) % n_experts);
      OpCall call{.op_type = "MatMulQExperts", .domain = "hxrt"};
      call.inputs = {random_signed(Shape{n_tokens, k}, rng), w, HostTensor::i32(Shape{n_tokens, n_slots}, ids)};
      if (weighted) call.inputs.push_back(random_signed(Shape{n_tokens, n_slots}, rng, 0.1f, 1.0f));
      // The device dots f32 activations, the CPU q8 ones (Note [Device experts] in kernels/jit/quant_blocks.cc).
      expect_close_to_cpu(call, device(), "MatMulQExperts", 2e-2);
    }
  }
}

HXRT_DEVICE_KERNEL_TESTS(DeviceLlmOpsTest);

}  // namespace
}  // namespace hxrt::kernels::jit
