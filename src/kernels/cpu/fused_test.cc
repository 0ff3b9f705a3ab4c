#include "kernels/cpu/fused.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/testing/kernel_harness.h"
#include "kernels/testing/test_data.h"

namespace hxrt::kernels::cpu {
namespace {

using testing::HostTensor;
using testing::OpCall;
using testing::random_floats;
using testing::run_op;

// Normalised max error against double references; every fused op here sums at most a few hundred float terms.
constexpr double kTolerance = 1e-5;

double gelu_ref(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh_ref(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

TEST(ConvBnReluOpTest, MatchesConvThenBatchNormThenRelu) {
  std::mt19937 rng(31);
  const Shape xs{2, 4, 9, 7};
  const Shape ws{6, 2, 3, 3};  // group 2
  const int64_t m = 6, oh = 5, ow = 4;  // stride 2, pads 1
  for (bool relu : {false, true}) {
    for (bool with_b : {false, true}) {
      const std::vector<float> x = random_floats(xs.num_elements(), rng);
      const std::vector<float> w = random_floats(ws.num_elements(), rng);
      const std::vector<float> b = random_floats(m, rng);
      const std::vector<float> scale = random_floats(m, rng);
      const std::vector<float> bias = random_floats(m, rng);
      const std::vector<float> mean = random_floats(m, rng);
      const std::vector<float> var = random_floats(m, rng, 0.2f, 2.0f);
      std::vector<double> expected(static_cast<size_t>(2 * m * oh * ow));
      for (int64_t n = 0; n < 2; ++n) {
        for (int64_t oc = 0; oc < m; ++oc) {
          const int64_t g = oc / 3;
          for (int64_t oy = 0; oy < oh; ++oy) {
            for (int64_t ox = 0; ox < ow; ++ox) {
              double sum = with_b ? b[static_cast<size_t>(oc)] : 0.0;
              for (int64_t ci = 0; ci < 2; ++ci) {
                for (int64_t ki = 0; ki < 3; ++ki) {
                  for (int64_t kj = 0; kj < 3; ++kj) {
                    const int64_t iy = oy * 2 - 1 + ki;
                    const int64_t ix = ox * 2 - 1 + kj;
                    if (iy < 0 || iy >= 9 || ix < 0 || ix >= 7) continue;
                    sum += double{x[static_cast<size_t>(((n * 4 + g * 2 + ci) * 9 + iy) * 7 + ix)]} *
                           w[static_cast<size_t>(((oc * 2 + ci) * 3 + ki) * 3 + kj)];
                  }
                }
              }
              const size_t c = static_cast<size_t>(oc);
              double v = (sum - mean[c]) / std::sqrt(double{var[c]} + 1e-5) * scale[c] + bias[c];
              if (relu) v = std::max(v, 0.0);
              expected[static_cast<size_t>(((n * m + oc) * oh + oy) * ow + ox)] = v;
            }
          }
        }
      }
      OpCall call;
      call.op_type = "ConvBnRelu";
      call.domain = "hxrt.fused";
      call.attrs.set("strides", std::vector<int64_t>{2, 2});
      call.attrs.set("pads", std::vector<int64_t>{1, 1, 1, 1});
      call.attrs.set("group", 2);
      call.attrs.set("relu", int64_t{relu});
      call.inputs.push_back(HostTensor::f32(xs, x));
      call.inputs.push_back(HostTensor::f32(ws, w));
      if (with_b) {
        call.inputs.push_back(HostTensor::f32(Shape{m}, b));
      } else {
        call.inputs.push_back(std::nullopt);
      }
      for (const std::vector<float>* p : {&scale, &bias, &mean, &var}) call.inputs.push_back(HostTensor::f32(Shape{m}, *p));
      call.constant_inputs = {1};
      auto result = run_op(call);
      ASSERT_TRUE(result.ok()) << result.status().to_string();
      EXPECT_EQ(result->kernel, "ConvBnRelu");
      EXPECT_EQ(result->outputs[0].shape, (Shape{2, m, oh, ow}));
      EXPECT_LE(testing::normalized_max_error(result->outputs[0].to_f32(), expected), kTolerance)
          << "relu=" << relu << " B=" << with_b;
    }
  }
}

TEST(MatMulBiasOpTest, BiasAndActivationsWithBatchBroadcast) {
  std::mt19937 rng(17);
  const Shape as{2, 5, 33};
  const Shape bs{33, 17};
  const int64_t rows = 10, n = 17, k = 33;
  for (const char* activation : {"none", "gelu", "gelu_tanh"}) {
    for (const Shape& bias_shape : {Shape{n}, Shape{1, n}}) {
      const std::vector<float> a = random_floats(as.num_elements(), rng, -2.0f, 2.0f);
      const std::vector<float> b = random_floats(bs.num_elements(), rng);
      const std::vector<float> bias = random_floats(n, rng);
      std::vector<double> expected(static_cast<size_t>(rows * n));
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double sum = bias[static_cast<size_t>(j)];
          for (int64_t p = 0; p < k; ++p) sum += double{a[static_cast<size_t>(i * k + p)]} * b[static_cast<size_t>(p * n + j)];
          const std::string act = activation;
          expected[static_cast<size_t>(i * n + j)] =
              act == "gelu" ? gelu_ref(sum) : act == "gelu_tanh" ? gelu_tanh_ref(sum) : sum;
        }
      }
      OpCall call;
      call.op_type = "MatMulBias";
      call.domain = "hxrt.fused";
      call.attrs.set("activation", activation);
      call.inputs = {HostTensor::f32(as, a), HostTensor::f32(bs, b), HostTensor::f32(bias_shape, bias)};
      auto result = run_op(call);
      ASSERT_TRUE(result.ok()) << result.status().to_string();
      EXPECT_EQ(result->outputs[0].shape, (Shape{2, 5, n}));
      EXPECT_LE(testing::normalized_max_error(result->outputs[0].to_f32(), expected), kTolerance) << activation;
    }
  }
}

// Note [Few-row MatMul]: a few rows (3 of them, a batch of one, as a short prompt gives) split N into column blocks
// (200 columns: blocks of whole 32-column tiles and a partial last one); each block gets its own columns' bias and
// activation.
TEST(MatMulBiasOpTest, FewRowsSplitTheColumnsAndKeepTheirBias) {
  std::mt19937 rng(23);
  const int64_t m = 3, k = 48, n = 200;
  const std::vector<float> a = random_floats(m * k, rng, -2.0f, 2.0f);
  const std::vector<float> b = random_floats(k * n, rng);
  const std::vector<float> bias = random_floats(n, rng);
  std::vector<double> expected(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = bias[static_cast<size_t>(j)];
      for (int64_t p = 0; p < k; ++p) {
        sum += double{a[static_cast<size_t>(i * k + p)]} * b[static_cast<size_t>(p * n + j)];
      }
      expected[static_cast<size_t>(i * n + j)] = gelu_ref(sum);
    }
  }
  OpCall call;
  call.op_type = "MatMulBias";
  call.domain = "hxrt.fused";
  call.attrs.set("activation", "gelu");
  call.inputs = {HostTensor::f32(Shape{1, m, k}, a), HostTensor::f32(Shape{k, n}, b), HostTensor::f32(Shape{n}, bias)};
  auto result = run_op(call);
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  EXPECT_LE(testing::normalized_max_error(result->outputs[0].to_f32(), expected), kTolerance);
  // The harness's CPU device has at least one thread; with two or more the columns are split.
  if (std::thread::hardware_concurrency() > 1) {
    EXPECT_EQ(result->tiling.find("tile_n=200"), std::string::npos) << result->tiling;
  }
}

TEST(MatMulBiasOpTest, SchemaRejectsUnknownActivationAndWrongBias) {
  std::mt19937 rng(2);
  OpCall call;
  call.op_type = "MatMulBias";
  call.domain = "hxrt.fused";
  call.attrs.set("activation", "relu6");
  call.inputs = {HostTensor::random_f32(Shape{3, 4}, rng), HostTensor::random_f32(Shape{4, 5}, rng),
                 HostTensor::random_f32(Shape{5}, rng)};
  auto bad_activation = run_op(call);
  ASSERT_FALSE(bad_activation.ok());
  EXPECT_NE(bad_activation.status().to_string().find("activation"), std::string::npos);
  call.attrs.set("activation", "none");
  call.inputs[2] = HostTensor::random_f32(Shape{6}, rng);
  auto bad_bias = run_op(call);
  ASSERT_FALSE(bad_bias.ok());
  EXPECT_NE(bad_bias.status().to_string().find("bias"), std::string::npos) << bad_bias.status().to_string();
}

TEST(RMSNormMulOpTest, MatchesReference) {
  std::mt19937 rng(5);
  const Shape xs{3, 5, 65};
  const std::vector<float> x = random_floats(xs.num_elements(), rng, -3.0f, 3.0f);
  const std::vector<float> weight = random_floats(65, rng);
  const double epsilon = 1e-6;
  std::vector<double> expected(x.size());
  for (int64_t r = 0; r < 15; ++r) {
    double ss = 0.0;
    for (int64_t i = 0; i < 65; ++i) ss += double{x[static_cast<size_t>(r * 65 + i)]} * x[static_cast<size_t>(r * 65 + i)];
    const double inv = 1.0 / std::sqrt(ss / 65.0 + epsilon);
    for (int64_t i = 0; i < 65; ++i) {
      expected[static_cast<size_t>(r * 65 + i)] = x[static_cast<size_t>(r * 65 + i)] * inv * weight[static_cast<size_t>(i)];
    }
  }
  OpCall call;
  call.op_type = "RMSNormMul";
  call.domain = "hxrt.fused";
  call.attrs.set("epsilon", epsilon);
  call.inputs = {HostTensor::f32(xs, x), HostTensor::f32(Shape{65}, weight)};
  auto result = run_op(call);
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  EXPECT_EQ(result->outputs[0].shape, xs);
  EXPECT_LE(testing::normalized_max_error(result->outputs[0].to_f32(), expected), kTolerance);

  call.inputs[1] = HostTensor::random_f32(Shape{64}, rng);
  EXPECT_FALSE(run_op(call).ok());
}

TEST(SwiGLUOpTest, MatchesReference) {
  std::mt19937 rng(6);
  const Shape shape{7, 130};
  const std::vector<float> gate = random_floats(shape.num_elements(), rng, -4.0f, 4.0f);
  const std::vector<float> up = random_floats(shape.num_elements(), rng);
  std::vector<double> expected(gate.size());
  for (size_t i = 0; i < gate.size(); ++i) expected[i] = gate[i] / (1.0 + std::exp(-double{gate[i]})) * up[i];
  OpCall call;
  call.op_type = "SwiGLU";
  call.domain = "hxrt.fused";
  call.inputs = {HostTensor::f32(shape, gate), HostTensor::f32(shape, up)};
  auto result = run_op(call);
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  EXPECT_LE(testing::normalized_max_error(result->outputs[0].to_f32(), expected), kTolerance);

  call.inputs[1] = HostTensor::random_f32(Shape{7, 129}, rng);
  auto mismatch = run_op(call);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_EQ(mismatch.status().code(), StatusCode::kInvalidArgument);
}

TEST(FusedMathTest, ActivationNames) {
  EXPECT_EQ(activation_from_name("gelu_tanh").value(), Activation::kGeluTanh);
  EXPECT_EQ(activation_from_name("swish").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hxrt::kernels::cpu
