// CUDA MatMul, Gemm and MatMulBias (cuBLAS plus the epilogue kernels) against the CPU kernels (OpenBLAS): the sums
// run in another order, so the comparison is by normalised error.
#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kernels/cuda/cuda_test_util.h"

namespace hxrt::kernels::cuda {
namespace {

constexpr double kTolerance = 1e-5;

TEST(CudaMatMulTest, BatchedAndBroadcastMatMulMatchesTheCpu) {
  HXRT_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(61);
  struct Case {
    Shape a, b;
  };
  const std::vector<Case> cases = {
      {Shape{1, 1}, Shape{1, 1}},           {Shape{5, 7}, Shape{7, 3}},
      {Shape{33, 65}, Shape{65, 17}},       {Shape{40, 50}, Shape{50, 70}},
      {Shape{2, 3, 5, 7}, Shape{7, 4}},                                        // batched A, shared B: one call
      {Shape{4, 130, 257}, Shape{4, 257, 129}},                                // equal batches: one call
      {Shape{3, 1, 4, 5}, Shape{2, 5, 6}},                                     // both broadcast: a call per row
      {Shape{7}, Shape{2, 7, 3}},                                              // rank-1 A
      {Shape{2, 4, 7}, Shape{7}},                                              // rank-1 B
      {Shape{1, 20, 18}, Shape{6, 18, 19}},
      {Shape{2, 1, 2, 1, 2, 3, 4}, Shape{1, 2, 1, 2, 1, 4, 2}},                // five merged batch dims
      {Shape{3, 0}, Shape{0, 4}},                                              // K = 0: zeros
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("{} x {}", c.a, c.b));
    OpCall call{.op_type = "MatMul"};
    call.inputs = {random_signed(c.a, rng), random_signed(c.b, rng)};
    expect_close_to_cpu(call, "MatMulCublas", kTolerance);
  }
}

TEST(CudaMatMulTest, GemmTransposesScalesAndBroadcastsCLikeTheCpu) {
  HXRT_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(62);
  constexpr int64_t m = 19, k = 23, n = 17;
  struct Case {
    int64_t trans_a, trans_b;
    double alpha, beta;
    std::optional<Shape> c;
  };
  const std::vector<Case> cases = {
      {0, 0, 1.0, 1.0, Shape{n}}, {1, 0, 0.5, 2.0, Shape{m, n}},  {0, 1, -1.5, 0.25, Shape{m, 1}},
      {1, 1, 2.0, 1.0, Shape{1}}, {0, 0, 1.0, 1.0, std::nullopt}, {1, 1, 0.75, 0.0, Shape{1, n}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("transA {} transB {} alpha {} beta {} C {}", c.trans_a, c.trans_b, c.alpha, c.beta,
                             c.c ? c.c->to_string() : "none"));
    OpCall call{.op_type = "Gemm"};
    call.attrs.set("transA", graph::Attribute(c.trans_a));
    call.attrs.set("transB", graph::Attribute(c.trans_b));
    call.attrs.set("alpha", graph::Attribute(c.alpha));
    call.attrs.set("beta", graph::Attribute(c.beta));
    call.inputs = {random_signed(c.trans_a ? Shape{k, m} : Shape{m, k}, rng),
                   random_signed(c.trans_b ? Shape{n, k} : Shape{k, n}, rng)};
    if (c.c) call.inputs.push_back(random_signed(*c.c, rng));
    expect_close_to_cpu(call, "GemmCublas", kTolerance);
  }
}

TEST(CudaMatMulTest, MatMulBiasAppliesBiasAndActivationLikeTheCpu) {
  HXRT_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(63);
  for (const char* activation : {"none", "gelu", "gelu_tanh"}) {
    for (const Shape& a : {Shape{4, 64}, Shape{2, 9, 31}}) {
      const int64_t k = a.dim(-1);
      SCOPED_TRACE(fmt::format("{} {}", activation, a));
      OpCall call{.op_type = "MatMulBias", .domain = "hxrt.fused"};
      call.attrs.set("activation", graph::Attribute(activation));
      call.inputs = {random_signed(a, rng), random_signed(Shape{k, 45}, rng), random_signed(Shape{45}, rng)};
      call.constant_inputs = {1, 2};
      expect_close_to_cpu(call, "MatMulBiasCublas", kTolerance);
    }
  }
}

TEST(CudaMatMulTest, BadShapesReturnAnError) {
  HXRT_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(64);
  OpCall inner{.op_type = "MatMul"};
  inner.inputs = {random_signed(Shape{3, 4}, rng), random_signed(Shape{5, 2}, rng)};
  EXPECT_FALSE(cuda_status(inner).ok());

  OpCall batch{.op_type = "MatMul"};
  batch.inputs = {random_signed(Shape{2, 3, 4}, rng), random_signed(Shape{3, 4, 5}, rng)};  // 2 vs 3
  EXPECT_FALSE(cuda_status(batch).ok());

  OpCall gemm{.op_type = "Gemm"};
  gemm.inputs = {random_signed(Shape{3, 4}, rng), random_signed(Shape{4, 5}, rng), random_signed(Shape{2, 5}, rng)};
  EXPECT_FALSE(cuda_status(gemm).ok());  // C does not broadcast to [3, 5]

  OpCall bias{.op_type = "MatMulBias", .domain = "hxrt.fused"};
  bias.inputs = {random_signed(Shape{3, 4}, rng), random_signed(Shape{4, 5}, rng), random_signed(Shape{4}, rng)};
  EXPECT_FALSE(cuda_status(bias).ok());  // bias of K, not N, values
}

}  // namespace
}  // namespace hxrt::kernels::cuda
