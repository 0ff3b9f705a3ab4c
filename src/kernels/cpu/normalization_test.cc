#include "kernels/cpu/normalization.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kernels/testing/infer_node.h"
#include "kernels/testing/kernel_harness.h"
#include "kernels/testing/test_data.h"
#include "ops/schemas/schemas.h"

namespace hxrt::kernels::cpu {
namespace {

using testing::HostTensor;
using testing::infer_node;
using testing::InferResult;
using testing::normalized_max_error;
using testing::OpCall;
using testing::random_values;
using testing::run_op;

int64_t product(const Shape& s, int begin, int end) {
  int64_t p = 1;
  for (int d = begin; d < end; ++d) p *= s.dims()[d];
  return p;
}

// ---- Softmax ----

std::vector<double> reference_softmax(const std::vector<float>& x, const Shape& shape, int axis) {
  const int64_t outer = product(shape, 0, axis);
  const int64_t len = shape.dims()[axis];
  const int64_t inner = product(shape, axis + 1, shape.rank());
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) {
      double m = -INFINITY;
      for (int64_t a = 0; a < len; ++a) m = std::max(m, static_cast<double>(x[(o * len + a) * inner + j]));
      double sum = 0.0;
      for (int64_t a = 0; a < len; ++a) sum += std::exp(x[(o * len + a) * inner + j] - m);
      for (int64_t a = 0; a < len; ++a) {
        const size_t i = static_cast<size_t>((o * len + a) * inner + j);
        y[i] = std::exp(x[i] - m) / sum;
      }
    }
  }
  return y;
}

TEST(NormalizationTest, SoftmaxEveryAxisAgainstReference) {
  std::mt19937 rng(1);
  for (const Shape& shape : {Shape{1}, Shape{17}, Shape{3, 129}, Shape{2, 5, 7}, Shape{3, 300, 2}, Shape{2, 3, 257}}) {
    for (int axis = -shape.rank(); axis < shape.rank(); ++axis) {
      auto x = random_values(shape.num_elements(), rng, 0.05f, 8.0f);
      x[0] = 80.0f;  // exp(80) overflows float without the max subtraction
      OpCall call{.op_type = "Softmax"};
      call.attrs.set("axis", int64_t{axis});
      call.inputs = {HostTensor::f32(shape, x)};
      auto result = run_op(call);
      ASSERT_TRUE(result.ok()) << result.status().to_string();
      const int a = axis < 0 ? axis + shape.rank() : axis;
      EXPECT_LT(normalized_max_error(result->outputs[0].to_f32(), reference_softmax(x, shape, a)), 1e-6)
          << shape.to_string() << " axis " << axis;
    }
  }
  // Default axis = -1.
  const auto x = random_values(2 * 9, rng, 0.05f, 3.0f);
  OpCall call{.op_type = "Softmax"};
  call.inputs = {HostTensor::f32(Shape{2, 9}, x)};
  auto result = run_op(call);
  ASSERT_TRUE(result.ok());
  EXPECT_LT(normalized_max_error(result->outputs[0].to_f32(), reference_softmax(x, Shape{2, 9}, 1)), 1e-6);
}

TEST(NormalizationTest, SoftmaxRejectsBadAxis) {
  std::mt19937 rng(2);
  OpCall call{.op_type = "Softmax"};
  call.attrs.set("axis", int64_t{2});
  call.inputs = {HostTensor::random_f32(Shape{3, 4}, rng)};
  auto result = run_op(call);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().to_string().find("'axis'"), std::string::npos) << result.status().to_string();
}

// ---- LayerNormalization ----

std::vector<double> reference_layer_norm(const std::vector<float>& x, const std::vector<float>& scale,
                                         const std::vector<float>* bias, int64_t n, double eps) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / static_cast<size_t>(n); ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < n; ++i) mean += x[r * n + i];
    mean /= static_cast<double>(n);
    for (int64_t i = 0; i < n; ++i) var += (x[r * n + i] - mean) * (x[r * n + i] - mean);
    var /= static_cast<double>(n);
    for (int64_t i = 0; i < n; ++i) {
      y[r * n + i] = (x[r * n + i] - mean) / std::sqrt(var + eps) * scale[i] + (bias ? (*bias)[i] : 0.0);
    }
  }
  return y;
}

TEST(NormalizationTest, LayerNormAxesBiasAndEpsilon) {
  std::mt19937 rng(3);
  struct Case {
    Shape shape;
    int axis;
    bool bias;
    double eps;
  };
  const std::vector<Case> cases = {
      {{1}, -1, true, 1e-5},      {{3, 17}, -1, true, 1e-5},   {{4, 129}, 1, false, 1e-3},  {{2, 3, 5}, 1, true, 1e-5},
      {{2, 3, 5}, -2, true, 0.5}, {{2, 3, 5}, 0, false, 1e-5}, {{7, 1000}, -1, true, 1e-6},
  };
  for (const Case& c : cases) {
    const int axis = c.axis < 0 ? c.axis + c.shape.rank() : c.axis;
    const int64_t n = product(c.shape, axis, c.shape.rank());
    std::vector<int64_t> norm_dims(c.shape.dims().begin() + axis, c.shape.dims().end());
    const Shape norm_shape = Shape::make(norm_dims).value();
    const auto x = random_values(c.shape.num_elements(), rng, 0.05f, 3.0f);
    const auto scale = random_values(n, rng, 0.05f, 2.0f);
    const auto bias = random_values(n, rng, 0.05f, 1.0f);
    OpCall call{.op_type = "LayerNormalization"};
    call.attrs.set("axis", int64_t{c.axis});
    if (c.eps != 1e-5) call.attrs.set("epsilon", c.eps);
    call.inputs = {HostTensor::f32(c.shape, x), HostTensor::f32(norm_shape, scale)};
    if (c.bias) call.inputs.push_back(HostTensor::f32(norm_shape, bias));
    auto result = run_op(call);
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    EXPECT_LT(normalized_max_error(result->outputs[0].to_f32(),
                                   reference_layer_norm(x, scale, c.bias ? &bias : nullptr, n, c.eps)),
              2e-6)
        << c.shape.to_string() << " axis " << c.axis;
  }
}

TEST(NormalizationTest, LayerNormRejectsWrongScaleShape) {
  std::mt19937 rng(4);
  OpCall call{.op_type = "LayerNormalization"};
  call.inputs = {HostTensor::random_f32(Shape{3, 8}, rng), HostTensor::random_f32(Shape{7}, rng)};
  auto result = run_op(call);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().to_string().find("Scale"), std::string::npos) << result.status().to_string();
}

// ---- RMSNorm ----

std::vector<double> reference_rms_norm(const std::vector<float>& x, int64_t n, double eps,
                                       const std::vector<float>* weight = nullptr) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / static_cast<size_t>(n); ++r) {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[r * n + i]) * x[r * n + i];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
    for (int64_t i = 0; i < n; ++i) y[r * n + i] = x[r * n + i] * inv * (weight ? (*weight)[i] : 1.0);
  }
  return y;
}

TEST(NormalizationTest, RmsNormAgainstReference) {
  std::mt19937 rng(5);
  for (const Shape& shape : {Shape{1}, Shape{17}, Shape{3, 129}, Shape{2, 3, 576}, Shape{5, 4097}}) {
    for (double eps : {1e-5, 1e-6, 0.1}) {
      const auto x = random_values(shape.num_elements(), rng, 0.05f, 3.0f);
      OpCall call{.op_type = "RMSNorm", .domain = "hxrt"};
      call.attrs.set("epsilon", eps);
      call.inputs = {HostTensor::f32(shape, x)};
      auto result = run_op(call);
      ASSERT_TRUE(result.ok()) << result.status().to_string();
      // Sums of squares accumulate in double; the only error left is float rounding of each output.
      EXPECT_LT(normalized_max_error(result->outputs[0].to_f32(), reference_rms_norm(x, shape.dim(-1), eps)), 1e-6)
          << shape.to_string() << " eps " << eps;
    }
  }
}

TEST(NormalizationTest, RmsNormRowFunctionsForFusedKernels) {
  std::mt19937 rng(6);
  const int64_t n = 1000;
  const auto x = random_values(n, rng, 0.05f, 3.0f);
  const auto w = random_values(n, rng, 0.05f, 2.0f);
  std::vector<float> y(n), yw(n);
  rms_norm_row(x.data(), y.data(), n, 1e-5f);
  rms_norm_mul_row(x.data(), w.data(), yw.data(), n, 1e-5f);
  EXPECT_LT(normalized_max_error(y, reference_rms_norm(x, n, 1e-5)), 1e-6);
  EXPECT_LT(normalized_max_error(yw, reference_rms_norm(x, n, 1e-5, &w)), 1e-6);
  // In place.
  std::vector<float> z = x;
  rms_norm_row(z.data(), z.data(), n, 1e-5f);
  EXPECT_EQ(z, y);
}

// ---- RoPE ----

// Double reference straight from docs/ops.md: pair i rotates by pos·theta^(-2i/rotary_dims).
std::vector<double> reference_rope(const std::vector<float>& x, const Shape& shape, const std::vector<int64_t>& pos,
                                   double theta, int64_t rotary_dims, bool neox) {
  const int64_t n_tokens = shape.dim(-3), n_heads = shape.dim(-2), head_dim = shape.dim(-1);
  const int64_t r = rotary_dims == 0 ? head_dim : rotary_dims;
  std::vector<double> y(x.begin(), x.end());
  const int64_t rows = shape.num_elements() / (n_heads * head_dim);
  for (int64_t row = 0; row < rows; ++row) {
    const double p = static_cast<double>(pos[static_cast<size_t>(row % n_tokens)]);
    for (int64_t h = 0; h < n_heads; ++h) {
      const int64_t base = (row * n_heads + h) * head_dim;
      for (int64_t i = 0; i < r / 2; ++i) {
        const double angle = p * std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(r));
        const int64_t i0 = neox ? i : 2 * i;
        const int64_t i1 = neox ? i + r / 2 : 2 * i + 1;
        const double x0 = x[base + i0], x1 = x[base + i1];
        y[base + i0] = x0 * std::cos(angle) - x1 * std::sin(angle);
        y[base + i1] = x0 * std::sin(angle) + x1 * std::cos(angle);
      }
    }
  }
  return y;
}

TEST(NormalizationTest, RopeModesPositionsAndRotaryDims) {
  std::mt19937 rng(7);
  struct Case {
    Shape shape;
    int64_t rotary_dims;
    std::string mode;
    double theta;
    bool i32_positions;
  };
  const std::vector<Case> cases = {
      {{1, 1, 2}, 0, "normal", 10000.0, false},    {{5, 3, 64}, 0, "normal", 10000.0, false},
      {{5, 3, 64}, 0, "neox", 10000.0, true},      {{7, 2, 16}, 8, "normal", 500000.0, false},
      {{7, 2, 16}, 6, "neox", 10000.0, true},      {{2, 17, 3, 8}, 0, "neox", 1000.0, false},
      {{2, 17, 3, 8}, 4, "normal", 10000.0, true},
  };
  for (const Case& c : cases) {
    const int64_t n_tokens = c.shape.dim(-3);
    std::vector<int64_t> pos(static_cast<size_t>(n_tokens));
    std::uniform_int_distribution<int64_t> p(0, 4000);
    for (int64_t& v : pos) v = p(rng);
    pos[0] = 3;
    const auto x = random_values(c.shape.num_elements(), rng, 0.05f, 2.0f);
    OpCall call{.op_type = "RoPE", .domain = "hxrt"};
    call.attrs.set("mode", c.mode);
    call.attrs.set("theta", c.theta);
    if (c.rotary_dims != 0) call.attrs.set("rotary_dims", c.rotary_dims);
    if (c.i32_positions) {
      call.inputs = {HostTensor::f32(c.shape, x),
                     HostTensor::i32(Shape{n_tokens}, std::vector<int32_t>(pos.begin(), pos.end()))};
    } else {
      call.inputs = {HostTensor::f32(c.shape, x), HostTensor::i64(Shape{n_tokens}, pos)};
    }
    auto result = run_op(call);
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    // Angles are computed in double; cos/sin are rounded to float once.
    EXPECT_LT(normalized_max_error(result->outputs[0].to_f32(),
                                   reference_rope(x, c.shape, pos, c.theta, c.rotary_dims, c.mode == "neox")),
              1e-6)
        << c.shape.to_string() << " " << c.mode << " rotary_dims " << c.rotary_dims;
  }
}

// ggml's rope_yarn (ggml-cpu/ops.cpp) written out in double: the angle of pair i at position p with frequency
// factors, linear scaling and YaRN's ramp between the correction dims, cos/sin times attn_factor.
struct RopeScaling {
  std::vector<float> factors;  // empty: none
  double freq_scale = 1.0, ext_factor = 0.0, attn_factor = 1.0, beta_fast = 32.0, beta_slow = 1.0;
  int64_t n_ctx_orig = 0;
};

std::vector<double> reference_scaled_rope(const std::vector<float>& x, const Shape& shape, const std::vector<int64_t>& pos,
                                          double theta, bool neox, const RopeScaling& s) {
  const int64_t n_tokens = shape.dim(-3), n_heads = shape.dim(-2), r = shape.dim(-1);
  const double kPi = std::acos(-1.0);
  const auto corr_dim = [&](double rotations) {
    return static_cast<double>(r) * std::log(static_cast<double>(s.n_ctx_orig) / (rotations * 2 * kPi)) /
           (2 * std::log(theta));
  };
  const double low = s.ext_factor == 0 ? 0 : std::max(0.0, std::floor(corr_dim(s.beta_fast)));
  const double high = s.ext_factor == 0 ? 0 : std::min(static_cast<double>(r - 1), std::ceil(corr_dim(s.beta_slow)));
  std::vector<double> y(x.begin(), x.end());
  const int64_t rows = shape.num_elements() / (n_heads * r);
  for (int64_t row = 0; row < rows; ++row) {
    const double p = static_cast<double>(pos[static_cast<size_t>(row % n_tokens)]);
    for (int64_t i = 0; i < r / 2; ++i) {
      const double factor = s.factors.empty() ? 1.0 : s.factors[static_cast<size_t>(i)];
      const double extrap = p * std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(r)) / factor;
      const double interp = s.freq_scale * extrap;
      const double ramp = 1 - std::min(1.0, std::max(0.0, (static_cast<double>(i) - low) / std::max(0.001, high - low)));
      const double mix = s.ext_factor * ramp;
      const double angle = interp * (1 - mix) + extrap * mix;
      const double c = std::cos(angle) * s.attn_factor, sn = std::sin(angle) * s.attn_factor;
      for (int64_t h = 0; h < n_heads; ++h) {
        const int64_t base = (row * n_heads + h) * r;
        const int64_t i0 = neox ? i : 2 * i;
        const int64_t i1 = neox ? i + r / 2 : 2 * i + 1;
        const double x0 = x[base + i0], x1 = x[base + i1];
        y[base + i0] = x0 * c - x1 * sn;
        y[base + i1] = x0 * sn + x1 * c;
      }
    }
  }
  return y;
}

TEST(NormalizationTest, RopeFrequencyFactorsLinearAndYarnScalingMatchTheReference) {
  std::mt19937 rng(17);
  const Shape shape{6, 3, 64};
  std::vector<int64_t> pos = {0, 1, 17, 4095, 9000, 131071};
  const auto x = random_values(shape.num_elements(), rng, 0.05f, 2.0f);
  std::vector<float> factors(32);
  std::uniform_real_distribution<float> f(1.0f, 8.0f);
  for (float& v : factors) v = f(rng);
  struct Case {
    const char* name;
    RopeScaling s;
  };
  const std::vector<Case> cases = {
      {"llama3 factors", {.factors = factors}},
      {"linear x4", {.freq_scale = 0.25}},
      {"yarn x4 over 4096", {.freq_scale = 0.25, .ext_factor = 1.0, .attn_factor = 0.1 * std::log(4.0) + 1.0,
                             .n_ctx_orig = 4096}},
      {"yarn half mix, betas", {.freq_scale = 0.125, .ext_factor = 0.5, .attn_factor = 1.2, .beta_fast = 16,
                                .beta_slow = 2, .n_ctx_orig = 2048}},
      {"phi3 factors + attn_factor", {.factors = factors, .attn_factor = 1.19}},
  };
  for (const bool neox : {false, true}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(fmt::format("{} {}", c.name, neox ? "neox" : "normal"));
      OpCall call{.op_type = "RoPE", .domain = "hxrt"};
      call.attrs.set("mode", neox ? "neox" : "normal");
      call.attrs.set("theta", 500000.0);
      call.attrs.set("freq_scale", c.s.freq_scale);
      call.attrs.set("ext_factor", c.s.ext_factor);
      call.attrs.set("attn_factor", c.s.attn_factor);
      call.attrs.set("beta_fast", c.s.beta_fast);
      call.attrs.set("beta_slow", c.s.beta_slow);
      call.attrs.set("n_ctx_orig", c.s.n_ctx_orig);
      call.inputs = {HostTensor::f32(shape, x), HostTensor::i64(Shape{6}, pos)};
      if (!c.s.factors.empty()) call.inputs.push_back(HostTensor::f32(Shape{32}, c.s.factors));
      auto result = run_op(call);
      ASSERT_TRUE(result.ok()) << result.status().to_string();
      const auto reference = reference_scaled_rope(x, shape, pos, 500000.0, neox, c.s);
      EXPECT_LT(normalized_max_error(result->outputs[0].to_f32(), reference), 1e-6);
      // The scaling really acts: plain RoPE is far from it at the far positions.
      EXPECT_GT(normalized_max_error(result->outputs[0].to_f32(), reference_scaled_rope(x, shape, pos, 500000.0, neox, {})),
                1e-3);
    }
  }
}

// Note [RoPE tables]: a launch whose positions all lie in the shared table gives the bits of one that computes its
// rows (a position past kRopeTablePositions sends the whole launch that way), for each parameter set — also two
// that differ only in their frequency factors, which must not share a table — and the table grows as positions do.
TEST(NormalizationTest, RopeTablesGiveTheBitsOfComputedRows) {
  std::mt19937 rng(23);
  const int64_t heads = 2, head_dim = 64;
  std::vector<float> factors_a(32), factors_b(32);
  std::uniform_real_distribution<float> f(1.0f, 8.0f);
  for (float& v : factors_a) v = f(rng);
  for (float& v : factors_b) v = f(rng);
  const auto rope = [&](const std::vector<int64_t>& pos, const std::vector<float>& x, double freq_scale,
                        const std::vector<float>* factors) {
    OpCall call{.op_type = "RoPE", .domain = "hxrt"};
    call.attrs.set("mode", "neox");
    call.attrs.set("theta", 10000.0);
    call.attrs.set("freq_scale", freq_scale);
    const auto n = static_cast<int64_t>(pos.size());
    call.inputs = {HostTensor::f32(Shape{n, heads, head_dim}, x), HostTensor::i64(Shape{n}, pos)};
    if (factors != nullptr) call.inputs.push_back(HostTensor::f32(Shape{32}, *factors));
    auto result = run_op(call);
    EXPECT_TRUE(result.ok()) << result.status().to_string();
    return result.ok() ? result->outputs[0].to_f32() : std::vector<float>{};
  };
  const int64_t row = heads * head_dim;
  for (const std::vector<int64_t>& in_table :
       {std::vector<int64_t>{0, 3, 17}, std::vector<int64_t>{5, 200, 4095}, std::vector<int64_t>{1, 2}}) {
    std::vector<int64_t> with_far = in_table;
    with_far.push_back(kRopeTablePositions + 7);
    const auto x = random_values(static_cast<int64_t>(with_far.size()) * row, rng, 0.05f, 2.0f);
    const std::vector<float> x_in(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(in_table.size()) * row);
    const std::vector<float>* const factor_sets[] = {nullptr, &factors_a, &factors_b};
    for (const std::vector<float>* factors : factor_sets) {
      for (double freq_scale : {1.0, 0.25}) {
        SCOPED_TRACE(fmt::format("positions {} factors {} freq_scale {}", fmt::join(in_table, ","),
                                 factors == nullptr ? "none" : factors == &factors_a ? "a" : "b", freq_scale));
        const std::vector<float> tabled = rope(in_table, x_in, freq_scale, factors);
        const std::vector<float> computed = rope(with_far, x, freq_scale, factors);
        ASSERT_EQ(tabled.size(), x_in.size());
        EXPECT_EQ(0, std::memcmp(tabled.data(), computed.data(), tabled.size() * sizeof(float)));
      }
    }
  }
}

TEST(NormalizationTest, RopeScalingRejectsBadAttributesAndFactors) {
  std::mt19937 rng(18);
  const Shape shape{2, 1, 8};
  auto run = [&](graph::AttributeMap attrs, std::optional<HostTensor> factors) {
    OpCall call{.op_type = "RoPE", .domain = "hxrt", .attrs = std::move(attrs)};
    call.inputs = {HostTensor::random_f32(shape, rng), HostTensor::i64(Shape{2}, {1, 2})};
    if (factors) call.inputs.push_back(*factors);
    return run_op(call);
  };
  const auto attr = [](const char* name, graph::Attribute value) {
    graph::AttributeMap a;
    a.set(name, std::move(value));
    return a;
  };
  EXPECT_TRUE(run({}, HostTensor::f32(Shape{4}, {1, 2, 3, 4})).ok());
  EXPECT_FALSE(run({}, HostTensor::f32(Shape{3}, {1, 2, 3})).ok());       // not rotary_dims / 2
  EXPECT_FALSE(run({}, HostTensor::f32(Shape{2, 2}, {1, 2, 3, 4})).ok());  // not 1-D
  EXPECT_FALSE(run(attr("freq_scale", graph::Attribute(0.0)), std::nullopt).ok());
  EXPECT_FALSE(run(attr("ext_factor", graph::Attribute(1.5)), std::nullopt).ok());
  Result<testing::OpResult> yarn = run(attr("ext_factor", graph::Attribute(1.0)), std::nullopt);  // no n_ctx_orig
  ASSERT_FALSE(yarn.ok());
  EXPECT_NE(yarn.status().message().find("n_ctx_orig"), std::string::npos) << yarn.status().to_string();
}

TEST(NormalizationTest, RopeNormalAndNeoxDiffer) {
  // Guards against a mode mix-up that both references would share: (x0, x1) = (1, 0) at angle 1 in "normal"
  // mode rotates the adjacent pair only.
  const std::vector<float> x = {1, 0, 0, 0};
  std::vector<float> cos_sin(4);
  ops::RopeGeometry g;
  g.rotary_dims = 4;
  rope_cos_sin(1, ops::RopeParams{}, g, nullptr, cos_sin.data());
  EXPECT_FLOAT_EQ(cos_sin[0], static_cast<float>(std::cos(1.0)));
  EXPECT_FLOAT_EQ(cos_sin[1], static_cast<float>(std::sin(1.0)));
  std::vector<float> normal(4), neox(4);
  rope_head(x.data(), normal.data(), 4, 4, cos_sin.data(), RopeMode::kNormal);
  rope_head(x.data(), neox.data(), 4, 4, cos_sin.data(), RopeMode::kNeox);
  EXPECT_FLOAT_EQ(normal[1], static_cast<float>(std::sin(1.0)));
  EXPECT_FLOAT_EQ(normal[2], 0.0f);
  EXPECT_FLOAT_EQ(neox[1], 0.0f);
  EXPECT_FLOAT_EQ(neox[2], static_cast<float>(std::sin(1.0)));
}

TEST(NormalizationTest, RopeRejectsBadInputs) {
  std::mt19937 rng(8);
  auto run = [&](const Shape& x_shape, const Shape& pos_shape, graph::AttributeMap attrs) {
    OpCall call{.op_type = "RoPE", .domain = "hxrt", .attrs = std::move(attrs)};
    std::vector<int64_t> pos(static_cast<size_t>(pos_shape.num_elements()), 1);
    call.inputs = {HostTensor::random_f32(x_shape, rng), HostTensor::i64(pos_shape, pos)};
    return run_op(call);
  };
  EXPECT_FALSE(run(Shape{4, 8}, Shape{4}, {}).ok());     // rank < 3
  EXPECT_FALSE(run(Shape{4, 2, 8}, Shape{5}, {}).ok());  // positions length
  graph::AttributeMap odd;
  odd.set("rotary_dims", int64_t{3});
  EXPECT_FALSE(run(Shape{4, 2, 8}, Shape{4}, odd).ok());  // odd rotary_dims
  graph::AttributeMap too_many;
  too_many.set("rotary_dims", int64_t{10});
  EXPECT_FALSE(run(Shape{4, 2, 8}, Shape{4}, too_many).ok());  // rotary_dims > head_dim
  graph::AttributeMap mode;
  mode.set("mode", "glm");
  auto bad_mode = run(Shape{4, 2, 8}, Shape{4}, mode);
  ASSERT_FALSE(bad_mode.ok());
  EXPECT_NE(bad_mode.status().to_string().find("'mode'"), std::string::npos);
}

// ---- Symbolic shape inference ----

InferResult infer(const std::string& op_type, const std::string& domain, const std::vector<graph::TensorDesc>& inputs,
                  graph::AttributeMap attrs = {}) {
  return infer_node(op_type, domain, testing::graph_inputs(inputs), std::move(attrs));
}

TEST(NormalizationTest, SymbolicInference) {
  const graph::Dim n = graph::Dim::symbol("n_tokens");
  const graph::TensorDesc x{DType::kF32, {n, 576}};
  EXPECT_EQ(infer("Softmax", "", {x}).desc, "f32[n_tokens, 576]");
  EXPECT_EQ(infer("RMSNorm", "hxrt", {x}).desc, "f32[n_tokens, 576]");
  InferResult ln = infer("LayerNormalization", "", {x, {DType::kF32, {576}}, {DType::kF32, {576}}});
  ASSERT_TRUE(ln.status.ok()) << ln.status.to_string();
  EXPECT_EQ(ln.desc, "f32[n_tokens, 576]");
  EXPECT_FALSE(infer("LayerNormalization", "", {x, {DType::kF32, {575}}}).status.ok());

  const graph::TensorDesc q{DType::kF32, {n, 9, 64}};
  InferResult rope = infer("RoPE", "hxrt", {q, {DType::kI32, {n}}});
  ASSERT_TRUE(rope.status.ok()) << rope.status.to_string();
  EXPECT_EQ(rope.desc, "f32[n_tokens, 9, 64]");
  EXPECT_TRUE(rope.checks.empty());
  // A positions length that is another symbol is checked at bind time.
  InferResult other = infer("RoPE", "hxrt", {q, {DType::kI64, {graph::Dim::symbol("m")}}});
  ASSERT_TRUE(other.status.ok());
  EXPECT_EQ(other.checks.size(), 1u);
  // Wrong dtype of positions is caught by the schema.
  EXPECT_FALSE(infer("RoPE", "hxrt", {q, {DType::kF32, {n}}}).status.ok());

  EXPECT_EQ(infer("LogSoftmax", "", {x}).desc, "f32[n_tokens, 576]");
  EXPECT_EQ(infer("Hardmax", "", {x}).desc, "f32[n_tokens, 576]");
  graph::AttributeMap last;
  last.set("axis", int64_t{-1});
  last.set("keepdims", int64_t{0});
  EXPECT_EQ(infer("ArgMax", "", {x}, last).desc, "i64[n_tokens]");
  EXPECT_EQ(infer("ArgMin", "", {x}).desc, "i64[1, 576]");
  // Without 'axes' every dim is reduced.
  EXPECT_EQ(infer("ReduceMean", "", {x}).desc, "f32[1, 1]");
}

// ---- LogSoftmax and Hardmax ----

TEST(NormalizationTest, LogSoftmaxAndHardmaxEveryAxis) {
  std::mt19937 rng(11);
  for (const Shape& shape : {Shape{1}, Shape{3, 4, 5}, Shape{2, 129}, Shape{1, 3}}) {
    for (int axis = -shape.rank(); axis < shape.rank(); ++axis) {
      auto x = random_values(shape.num_elements(), rng, 0.05f, 8.0f);
      x[0] = 1000.0f;  // exp overflows without the max subtraction
      const int a = axis < 0 ? axis + shape.rank() : axis;
      const std::vector<double> soft = reference_softmax(x, shape, a);
      OpCall log_call{.op_type = "LogSoftmax"};
      log_call.attrs.set("axis", int64_t{axis});
      log_call.inputs = {HostTensor::f32(shape, x)};
      auto log_result = run_op(log_call);
      ASSERT_TRUE(log_result.ok()) << log_result.status().to_string();
      std::vector<double> log_expected(soft.size());
      for (size_t i = 0; i < soft.size(); ++i) {
        // log(softmax) from the shifted logits, exact even where softmax underflows.
        log_expected[i] = std::log(soft[i]);
      }
      const std::vector<float> log_actual = log_result->outputs[0].to_f32();
      for (size_t i = 0; i < soft.size(); ++i) {
        if (soft[i] > 1e-300) {
          EXPECT_NEAR(log_actual[i], log_expected[i], 1e-5 * std::max(1.0, std::abs(log_expected[i])))
              << shape.to_string() << " axis " << axis << " element " << i;
        }
      }

      OpCall hard_call{.op_type = "Hardmax"};
      hard_call.attrs.set("axis", int64_t{axis});
      hard_call.inputs = {HostTensor::f32(shape, x)};
      auto hard_result = run_op(hard_call);
      ASSERT_TRUE(hard_result.ok()) << hard_result.status().to_string();
      // Hardmax is 1 where softmax is largest along the axis (values are distinct floats).
      const int64_t outer = product(shape, 0, a);
      const int64_t len = shape.dims()[a];
      const int64_t inner = product(shape, a + 1, shape.rank());
      std::vector<float> hard_expected(x.size(), 0.0f);
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t j = 0; j < inner; ++j) {
          int64_t best = 0;
          for (int64_t k = 1; k < len; ++k) {
            if (x[(o * len + k) * inner + j] > x[(o * len + best) * inner + j]) best = k;
          }
          hard_expected[(o * len + best) * inner + j] = 1.0f;
        }
      }
      EXPECT_EQ(hard_result->outputs[0].to_f32(), hard_expected) << shape.to_string() << " axis " << axis;
    }
  }
}

TEST(NormalizationTest, HardmaxTakesTheFirstOfEqualMaxima) {
  OpCall call{.op_type = "Hardmax"};
  call.inputs = {HostTensor::f32(Shape{2, 4}, {1, 3, 3, 2, -1, -1, -1, -1})};
  auto result = run_op(call);
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  EXPECT_EQ(result->outputs[0].to_f32(), (std::vector<float>{0, 1, 0, 0, 1, 0, 0, 0}));
}

// ---- LRN ----

TEST(NormalizationTest, LrnAgainstReference) {
  std::mt19937 rng(12);
  for (const int64_t size : {1, 2, 3, 5}) {
    const Shape shape{2, 5, 3, 2};
    const auto x = random_values(shape.num_elements(), rng, 0.05f, 3.0f);
    const double alpha = 2e-2, beta = 0.6, bias = 1.5;
    OpCall call{.op_type = "LRN"};
    call.attrs.set("size", int64_t{size});
    call.attrs.set("alpha", alpha);
    call.attrs.set("beta", beta);
    call.attrs.set("bias", bias);
    call.inputs = {HostTensor::f32(shape, x)};
    auto result = run_op(call);
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    std::vector<double> expected(x.size());
    const int64_t channels = 5, inner = 6;
    for (int64_t n = 0; n < 2; ++n) {
      for (int64_t c = 0; c < channels; ++c) {
        for (int64_t i = 0; i < inner; ++i) {
          double square_sum = 0;
          for (int64_t k = c - (size - 1) / 2; k <= c + size / 2; ++k) {
            if (k < 0 || k >= channels) continue;
            const double v = x[(n * channels + k) * inner + i];
            square_sum += v * v;
          }
          const size_t at = static_cast<size_t>((n * channels + c) * inner + i);
          expected[at] = x[at] / std::pow(bias + alpha / static_cast<double>(size) * square_sum, beta);
        }
      }
    }
    EXPECT_LT(normalized_max_error(result->outputs[0].to_f32(), expected), 1e-6) << "size " << size;
  }
}

TEST(NormalizationTest, LrnRequiresSize) {
  std::mt19937 rng(13);
  OpCall call{.op_type = "LRN"};
  call.inputs = {HostTensor::random_f32(Shape{1, 3, 2, 2}, rng)};
  auto result = run_op(call);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().to_string().find("'size'"), std::string::npos) << result.status().to_string();
  call.attrs.set("size", int64_t{0});
  result = run_op(call);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().to_string().find("'size'"), std::string::npos) << result.status().to_string();
}

// ---- MeanVarianceNormalization ----

TEST(NormalizationTest, MeanVarianceNormalizationOverAxes) {
  std::mt19937 rng(14);
  struct Case {
    Shape shape;
    std::vector<int64_t> axes;  // empty: the default [0, 2, 3]
  };
  for (const Case& c : {Case{{3, 3, 3, 1}, {}}, Case{{2, 5, 4}, {1}}, Case{{2, 5, 4}, {-1, 0}}, Case{{7}, {0}}}) {
    const auto x = random_values(c.shape.num_elements(), rng, 0.05f, 3.0f);
    OpCall call{.op_type = "MeanVarianceNormalization"};
    if (!c.axes.empty()) call.attrs.set("axes", c.axes);
    call.inputs = {HostTensor::f32(c.shape, x)};
    auto result = run_op(call);
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    const std::vector<int64_t> axes = c.axes.empty() ? std::vector<int64_t>{0, 2, 3} : c.axes;
    const int rank = c.shape.rank();
    // Group elements by their coordinates outside `axes`.
    auto key = [&](int64_t i) {
      int64_t k = 0;
      for (int d = rank - 1; d >= 0; --d) {
        const int64_t dim = c.shape.dims()[d];
        const bool reduced = std::find_if(axes.begin(), axes.end(),
                                          [&](int64_t a) { return (a < 0 ? a + rank : a) == d; }) != axes.end();
        if (!reduced) k = k * 1000 + i % dim;
        i /= dim;
      }
      return k;
    };
    std::vector<double> expected(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      double sum = 0, squares = 0, count = 0;
      for (size_t j = 0; j < x.size(); ++j) {
        if (key(static_cast<int64_t>(j)) != key(static_cast<int64_t>(i))) continue;
        sum += x[j];
        squares += static_cast<double>(x[j]) * x[j];
        count += 1;
      }
      const double mean = sum / count;
      expected[i] = (x[i] - mean) / (std::sqrt(squares / count - mean * mean) + 1e-9);
    }
    EXPECT_LT(normalized_max_error(result->outputs[0].to_f32(), expected), 1e-5) << c.shape.to_string();
  }
}

// ---- InstanceNormalization ----

TEST(NormalizationTest, InstanceNormalizationAgainstReference) {
  std::mt19937 rng(15);
  for (const Shape& shape : {Shape{2, 3, 4, 5}, Shape{1, 2, 1, 3}, Shape{3, 1, 7}}) {
    const int64_t channels = shape.dims()[1];
    const int64_t n = product(shape, 2, shape.rank());
    const auto x = random_values(shape.num_elements(), rng, 0.05f, 3.0f);
    const auto scale = random_values(channels, rng, 0.05f, 2.0f);
    const auto bias = random_values(channels, rng, 0.05f, 1.0f);
    const double eps = 1e-2;
    OpCall call{.op_type = "InstanceNormalization"};
    call.attrs.set("epsilon", eps);
    call.inputs = {HostTensor::f32(shape, x), HostTensor::f32(Shape{channels}, scale),
                   HostTensor::f32(Shape{channels}, bias)};
    auto result = run_op(call);
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    std::vector<double> expected(x.size());
    for (int64_t r = 0; r < shape.dims()[0] * channels; ++r) {
      double mean = 0, var = 0;
      for (int64_t i = 0; i < n; ++i) mean += x[r * n + i];
      mean /= static_cast<double>(n);
      for (int64_t i = 0; i < n; ++i) var += (x[r * n + i] - mean) * (x[r * n + i] - mean);
      var /= static_cast<double>(n);
      for (int64_t i = 0; i < n; ++i) {
        expected[r * n + i] = scale[r % channels] * (x[r * n + i] - mean) / std::sqrt(var + eps) + bias[r % channels];
      }
    }
    EXPECT_LT(normalized_max_error(result->outputs[0].to_f32(), expected), 2e-6) << shape.to_string();
  }
}

TEST(NormalizationTest, InstanceNormalizationRejectsNegativeEpsilon) {
  std::mt19937 rng(16);
  OpCall call{.op_type = "InstanceNormalization"};
  call.attrs.set("epsilon", -1.0);
  call.inputs = {HostTensor::random_f32(Shape{1, 2, 3}, rng), HostTensor::random_f32(Shape{2}, rng),
                 HostTensor::random_f32(Shape{2}, rng)};
  auto result = run_op(call);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().to_string().find("'epsilon'"), std::string::npos) << result.status().to_string();
}

// ---- LayerNormalization's Mean and InvStdDev ----

TEST(NormalizationTest, LayerNormMeanAndInvStdDevOutputs) {
  std::mt19937 rng(17);
  const Shape shape{2, 3, 5};
  const auto x = random_values(shape.num_elements(), rng, 0.05f, 3.0f);
  const auto scale = random_values(15, rng, 0.05f, 2.0f);
  OpCall call{.op_type = "LayerNormalization", .num_outputs = 3};
  call.attrs.set("axis", int64_t{1});
  call.attrs.set("epsilon", 0.1);
  call.inputs = {HostTensor::f32(shape, x), HostTensor::f32(Shape{3, 5}, scale)};
  auto result = run_op(call);
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  ASSERT_EQ(result->outputs.size(), 3u);
  EXPECT_EQ(result->outputs[1].shape, (Shape{2, 1, 1}));
  EXPECT_EQ(result->outputs[2].shape, (Shape{2, 1, 1}));
  EXPECT_LT(normalized_max_error(result->outputs[0].to_f32(), reference_layer_norm(x, scale, nullptr, 15, 0.1)), 2e-6);
  std::vector<double> mean(2), inv(2);
  for (int64_t r = 0; r < 2; ++r) {
    double m = 0, v = 0;
    for (int64_t i = 0; i < 15; ++i) m += x[r * 15 + i];
    m /= 15;
    for (int64_t i = 0; i < 15; ++i) v += (x[r * 15 + i] - m) * (x[r * 15 + i] - m);
    mean[r] = m;
    inv[r] = 1.0 / std::sqrt(v / 15 + 0.1);
  }
  EXPECT_LT(normalized_max_error(result->outputs[1].to_f32(), mean), 1e-6);
  EXPECT_LT(normalized_max_error(result->outputs[2].to_f32(), inv), 1e-6);
}

}  // namespace
}  // namespace hxrt::kernels::cpu
