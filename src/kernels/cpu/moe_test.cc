// MoeRoute and MatMulQExperts on the CPU against double-precision references: routing is softmax + stable top-k (+
// renormalisation and scale), and each expert row's product is within MatMulQ's error bound of the exact dot with
// the dequantized expert weight; batching rows per expert changes no bit (Note [Expert batching]).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "hxrt/base/float16.h"
#include "hxrt/base/quant_types.h"
#include "kernels/testing/device_compare.h"
#include "kernels/testing/kernel_harness.h"
#include "kernels/testing/test_data.h"

namespace hxrt::kernels::cpu {
namespace {

using testing::HostTensor;
using testing::OpCall;
using testing::run_op;

TEST(MoeRouteTest, SoftmaxTopKWeightsAsTheReference) {
  std::mt19937 rng(71);
  for (const bool normalize : {false, true}) {
    for (const double scale : {0.0, 2.5}) {
      SCOPED_TRACE(fmt::format("normalize {} scale {}", normalize, scale));
      const int64_t n_tokens = 37, n_experts = 16, k = 4;
      std::normal_distribution<float> logit(0.0f, 3.0f);
      std::vector<float> logits(static_cast<size_t>(n_tokens * n_experts));
      for (float& v : logits) v = logit(rng);
      logits[5] = logits[6];  // a tie: the lower id goes first
      OpCall call{.op_type = "MoeRoute", .domain = "hxrt", .num_outputs = 2};
      call.attrs.set("k", graph::Attribute(k));
      call.attrs.set("normalize", graph::Attribute(int64_t{normalize ? 1 : 0}));
      call.attrs.set("scale", graph::Attribute(scale));
      call.inputs = {HostTensor::f32(Shape{n_tokens, n_experts}, logits)};
      Result<testing::OpResult> result = run_op(call);
      ASSERT_TRUE(result.ok()) << result.status().to_string();
      const std::vector<int64_t> ids = result->outputs[0].to_i64();
      const std::vector<float> weights = result->outputs[1].to_f32();
      for (int64_t t = 0; t < n_tokens; ++t) {
        const float* row = logits.data() + t * n_experts;
        std::vector<double> p(static_cast<size_t>(n_experts));
        const double max = *std::max_element(row, row + n_experts);
        double sum = 0;
        for (int64_t e = 0; e < n_experts; ++e) sum += p[static_cast<size_t>(e)] = std::exp(row[e] - max);
        std::vector<int32_t> order(static_cast<size_t>(n_experts));
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
        double chosen = 0;
        for (int64_t s = 0; s < k; ++s) chosen += p[static_cast<size_t>(order[static_cast<size_t>(s)])] / sum;
        for (int64_t s = 0; s < k; ++s) {
          const int32_t e = order[static_cast<size_t>(s)];
          double w = p[static_cast<size_t>(e)] / sum;
          if (normalize) w /= chosen;
          if (scale != 0) w *= scale;
          EXPECT_EQ(ids[static_cast<size_t>(t * k + s)], e) << "token " << t << " slot " << s;
          EXPECT_NEAR(weights[static_cast<size_t>(t * k + s)], w, 1e-6 * std::max(1.0, w)) << "token " << t;
        }
      }
    }
  }
}

TEST(MoeRouteTest, KBeyondTheExpertsIsRefused) {
  OpCall call{.op_type = "MoeRoute", .domain = "hxrt", .num_outputs = 2};
  call.attrs.set("k", graph::Attribute(int64_t{5}));
  call.inputs = {HostTensor::f32(Shape{2, 4}, std::vector<float>(8, 0.0f))};
  Result<testing::OpResult> result = run_op(call);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().to_string().find("'k' = 5"), std::string::npos) << result.status().to_string();
}

// Y[t, s] = A[t (, s)] · W[ids[t, s]]ᵀ against the exact dot with the dequantized weight, and the weighted sum.
TEST(MatMulQExpertsTest, EveryTypeMatchesTheDoubleReference) {
  std::mt19937 rng(72);
  const int64_t n_tokens = 9, n_slots = 3, n_experts = 5, n = 24, k = 256;
  for (const DType dtype : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ4_K, DType::kQ6_K,
                            DType::kIQ4_XS, DType::kF16, DType::kF32}) {
    for (const bool per_slot : {false, true}) {
      for (const bool weighted : {false, true}) {
        SCOPED_TRACE(fmt::format("{} per_slot {} weighted {}", dtype, per_slot, weighted));
        HostTensor w = dtype == DType::kF32 || dtype == DType::kF16
                           ? testing::random_signed(Shape{n_experts * n, k}, rng)
                           : testing::random_quantized(dtype, n_experts * n, k, rng);
        if (dtype == DType::kF16) {
          std::vector<std::byte> halves(static_cast<size_t>(n_experts * n * k) * 2);
          const std::vector<float> values = w.to_f32();
          for (size_t i = 0; i < values.size(); ++i) {
            const uint16_t h = f32_to_f16(values[i]);
            std::memcpy(halves.data() + 2 * i, &h, 2);
          }
          w = HostTensor::raw(DType::kF16, Shape{n_experts * n, k}, std::move(halves));
        }
        w.shape = Shape{n_experts, n, k};
        HostTensor a = testing::random_signed(per_slot ? Shape{n_tokens, n_slots, k} : Shape{n_tokens, k}, rng);
        std::vector<int32_t> ids(static_cast<size_t>(n_tokens * n_slots));
        std::uniform_int_distribution<int32_t> expert(0, static_cast<int32_t>(n_experts - 1));
        for (int32_t& id : ids) id = expert(rng);
        std::vector<float> weights(ids.size());
        std::uniform_real_distribution<float> wt(0.0f, 1.0f);
        for (float& v : weights) v = wt(rng);
        OpCall call{.op_type = "MatMulQExperts", .domain = "hxrt"};
        call.inputs = {a, w, HostTensor::i32(Shape{n_tokens, n_slots}, ids)};
        if (weighted) call.inputs.push_back(HostTensor::f32(Shape{n_tokens, n_slots}, weights));
        Result<testing::OpResult> result = run_op(call);
        ASSERT_TRUE(result.ok()) << result.status().to_string();
        const std::vector<float> y = result->outputs[0].to_f32();
        const std::vector<float> av = a.to_f32();
        const uint64_t row_bytes = storage_bytes(dtype, static_cast<uint64_t>(k)).value();
        std::vector<double> reference(static_cast<size_t>((weighted ? n_tokens : n_tokens * n_slots) * n), 0.0);
        double scale = 0;
        for (int64_t t = 0; t < n_tokens; ++t) {
          for (int64_t s = 0; s < n_slots; ++s) {
            const int32_t e = ids[static_cast<size_t>(t * n_slots + s)];
            const std::span<const float> x(av.data() + (per_slot ? t * n_slots + s : t) * k, static_cast<size_t>(k));
            for (int64_t j = 0; j < n; ++j) {
              const std::byte* row = w.bytes.data() + static_cast<uint64_t>(e * n + j) * row_bytes;
              const double dot = dot_row_f64(dtype, row, x).value();
              const size_t at = static_cast<size_t>(weighted ? t * n + j : (t * n_slots + s) * n + j);
              reference[at] += weighted ? weights[static_cast<size_t>(t * n_slots + s)] * dot : dot;
              scale = std::max(scale, std::fabs(dot));
            }
          }
        }
        double worst = 0;
        for (size_t i = 0; i < y.size(); ++i) worst = std::max(worst, std::fabs(y[i] - reference[i]) / scale);
        // q8 activations: MatMulQ's bound (Note [Error bounds] in base/quant_types.h) is ~1e-2 of the row scale.
        EXPECT_LT(worst, dtype == DType::kF32 || dtype == DType::kF16 ? 1e-2 : 2e-2);
      }
    }
  }
}

// One row routed alone gives the bits it gets among many (batch invariance through the per-expert gathering).
TEST(MatMulQExpertsTest, ARowsResultDoesNotDependOnWhatElseIsRouted) {
  std::mt19937 rng(73);
  const int64_t n_experts = 4, n = 32, k = 64;
  HostTensor w = testing::random_quantized(DType::kQ8_0, n_experts * n, k, rng);
  w.shape = Shape{n_experts, n, k};
  HostTensor a = testing::random_signed(Shape{12, k}, rng);
  std::vector<int32_t> ids(24);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7) % n_experts);
  OpCall many{.op_type = "MatMulQExperts", .domain = "hxrt"};
  many.inputs = {a, w, HostTensor::i32(Shape{12, 2}, ids)};
  Result<testing::OpResult> all = run_op(many);
  ASSERT_TRUE(all.ok()) << all.status().to_string();
  const std::vector<float> a_values = a.to_f32();
  OpCall one{.op_type = "MatMulQExperts", .domain = "hxrt"};
  one.inputs = {HostTensor::f32(Shape{1, k}, std::vector<float>(a_values.begin() + 5 * k, a_values.begin() + 6 * k)), w,
                HostTensor::i32(Shape{1, 2}, {ids[10], ids[11]})};
  Result<testing::OpResult> alone = run_op(one);
  ASSERT_TRUE(alone.ok()) << alone.status().to_string();
  const std::vector<float> y_all = all->outputs[0].to_f32(), y_one = alone->outputs[0].to_f32();
  for (int64_t i = 0; i < 2 * n; ++i) EXPECT_EQ(y_one[static_cast<size_t>(i)], y_all[static_cast<size_t>(5 * 2 * n + i)]);
}

TEST(MatMulQExpertsTest, AnIdOutsideTheExpertsIsAnError) {
  std::mt19937 rng(74);
  HostTensor w = testing::random_quantized(DType::kQ8_0, 2 * 8, 32, rng);
  w.shape = Shape{2, 8, 32};
  OpCall call{.op_type = "MatMulQExperts", .domain = "hxrt"};
  call.inputs = {testing::random_signed(Shape{1, 32}, rng), w, HostTensor::i32(Shape{1, 1}, {2})};
  Result<testing::OpResult> result = run_op(call);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(result.status().to_string().find("outside the 2 experts"), std::string::npos) << result.status().to_string();
}

}  // namespace
}  // namespace hxrt::kernels::cpu
