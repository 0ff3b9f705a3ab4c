#include "kernels/cpu/conv.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/testing/kernel_harness.h"
#include "kernels/testing/test_data.h"

namespace hxrt::kernels::cpu {
namespace {

using testing::HostTensor;
using testing::OpCall;
using testing::random_floats;
using testing::run_op;

// Tolerance: normalised max error against double; float sums over C·kH·kW <= a few hundred terms.
constexpr double kTolerance = 1e-5;

struct ConvCase {
  std::string name;
  Shape x;  // [n, c, h, w]
  Shape w;  // [m, c/group, kh, kw]
  std::vector<int64_t> strides{1, 1};
  std::vector<int64_t> pads{0, 0, 0, 0};  // top, left, bottom, right (explicit padding for the reference)
  std::vector<int64_t> dilations{1, 1};
  int64_t group = 1;
  std::string auto_pad = "NOTSET";
  bool bias = true;
};

// Direct convolution in double with explicit pads.
std::vector<double> reference_conv(const ConvCase& c, const std::vector<float>& x, const std::vector<float>& w,
                                   const std::vector<float>* bias, Shape* out_shape) {
  const int64_t n = c.x.dim(0), ch = c.x.dim(1), h = c.x.dim(2), wd = c.x.dim(3);
  const int64_t m = c.w.dim(0), cg = c.w.dim(1), kh = c.w.dim(2), kw = c.w.dim(3);
  const int64_t mg = m / c.group;
  const int64_t oh = (h + c.pads[0] + c.pads[2] - (c.dilations[0] * (kh - 1) + 1)) / c.strides[0] + 1;
  const int64_t ow = (wd + c.pads[1] + c.pads[3] - (c.dilations[1] * (kw - 1) + 1)) / c.strides[1] + 1;
  *out_shape = Shape{n, m, oh, ow};
  std::vector<double> y(static_cast<size_t>(n * m * oh * ow));
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t oc = 0; oc < m; ++oc) {
      const int64_t g = oc / mg;
      for (int64_t oy = 0; oy < oh; ++oy) {
        for (int64_t ox = 0; ox < ow; ++ox) {
          double sum = bias != nullptr ? (*bias)[static_cast<size_t>(oc)] : 0.0;
          for (int64_t ci = 0; ci < cg; ++ci) {
            for (int64_t ki = 0; ki < kh; ++ki) {
              for (int64_t kj = 0; kj < kw; ++kj) {
                const int64_t iy = oy * c.strides[0] - c.pads[0] + ki * c.dilations[0];
                const int64_t ix = ox * c.strides[1] - c.pads[1] + kj * c.dilations[1];
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                sum += double{x[static_cast<size_t>(((b * ch + g * cg + ci) * h + iy) * wd + ix)]} *
                       w[static_cast<size_t>(((oc * cg + ci) * kh + ki) * kw + kj)];
              }
            }
          }
          y[static_cast<size_t>(((b * m + oc) * oh + oy) * ow + ox)] = sum;
        }
      }
    }
  }
  return y;
}

std::vector<ConvCase> conv_cases() {
  std::vector<ConvCase> cases;
  cases.push_back({.name = "3x3 pad 1", .x = Shape{2, 3, 7, 9}, .w = Shape{4, 3, 3, 3}, .pads = {1, 1, 1, 1}});
  cases.push_back({.name = "strided dilated asymmetric pads",
                   .x = Shape{1, 2, 11, 10},
                   .w = Shape{5, 2, 3, 2},
                   .strides = {2, 1},
                   .pads = {0, 1, 2, 0},
                   .dilations = {2, 2},
                   .bias = false});
  cases.push_back({.name = "group 2", .x = Shape{2, 4, 6, 5}, .w = Shape{6, 2, 3, 2}, .pads = {1, 0, 1, 1}, .group = 2});
  cases.push_back({.name = "depthwise", .x = Shape{1, 3, 8, 8}, .w = Shape{3, 1, 3, 3}, .pads = {1, 1, 1, 1}, .group = 3});
  // Note [Depthwise convolution]: strides, dilations, asymmetric and oversized pads (output rows and columns with
  // no tap inside the image), a 5x5 filter, and a plane split into column blocks that start mid-row.
  cases.push_back({.name = "depthwise strided dilated", .x = Shape{2, 4, 13, 11}, .w = Shape{4, 1, 3, 3},
                   .strides = {2, 3}, .pads = {2, 0, 1, 3}, .dilations = {2, 1}, .group = 4});
  cases.push_back({.name = "depthwise 5x5 pad 4", .x = Shape{1, 2, 6, 7}, .w = Shape{2, 1, 5, 5},
                   .pads = {4, 4, 4, 4}, .group = 2});
  cases.push_back({.name = "depthwise 67x45", .x = Shape{1, 3, 67, 45}, .w = Shape{3, 1, 3, 3}, .strides = {1, 2},
                   .pads = {1, 1, 1, 1}, .group = 3});
  cases.push_back({.name = "1x1 direct", .x = Shape{2, 5, 6, 7}, .w = Shape{7, 5, 1, 1}});
  // SAME_UPPER on 7 with k=3, s=2: out 4, total pad 2 → 1 / 1; SAME_LOWER on 6 with k=4, s=1: total 3 → 2 / 1.
  cases.push_back({.name = "SAME_UPPER", .x = Shape{1, 2, 7, 7}, .w = Shape{3, 2, 3, 3}, .strides = {2, 2},
                   .pads = {1, 1, 1, 1}, .auto_pad = "SAME_UPPER"});
  cases.push_back({.name = "SAME_LOWER", .x = Shape{1, 2, 6, 6}, .w = Shape{3, 2, 4, 4}, .pads = {2, 2, 1, 1},
                   .auto_pad = "SAME_LOWER"});
  cases.push_back({.name = "VALID", .x = Shape{1, 3, 9, 9}, .w = Shape{2, 3, 4, 4}, .strides = {3, 3},
                   .auto_pad = "VALID"});
  // A larger image so that the output splits into several column blocks.
  cases.push_back({.name = "65x33", .x = Shape{1, 8, 65, 33}, .w = Shape{16, 8, 3, 3}, .pads = {1, 1, 1, 1}});
  // Note [Shifted convolution] (stride 1, rows of 16+ columns): PP-OCR's 3x3 and SAME_UPPER 2x2, asymmetric and
  // oversized pads, two images, groups with several channels each, 11 output channels (a partial register tile),
  // and rows of 20 columns so that column blocks start mid-row.
  cases.push_back({.name = "shifted 3x3", .x = Shape{2, 64, 12, 32}, .w = Shape{16, 64, 3, 3}, .pads = {1, 1, 1, 1}});
  cases.push_back({.name = "shifted 2x2 SAME_UPPER", .x = Shape{1, 16, 24, 32}, .w = Shape{8, 16, 2, 2},
                   .pads = {0, 0, 1, 1}, .auto_pad = "SAME_UPPER"});
  cases.push_back({.name = "shifted pads 2/0/3/4", .x = Shape{1, 5, 9, 20}, .w = Shape{11, 5, 3, 5},
                   .pads = {2, 0, 3, 4}});
  cases.push_back({.name = "shifted groups", .x = Shape{2, 6, 7, 20}, .w = Shape{9, 2, 3, 3}, .pads = {1, 1, 1, 1},
                   .group = 3});
  cases.push_back({.name = "shifted 20 wide", .x = Shape{1, 3, 40, 20}, .w = Shape{4, 3, 3, 3}, .pads = {0, 1, 2, 1}});
  return cases;
}

OpCall conv_call(const ConvCase& c, const std::vector<float>& x, const std::vector<float>& w,
                 const std::vector<float>* bias) {
  OpCall call;
  call.op_type = "Conv";
  call.attrs.set("strides", c.strides);
  call.attrs.set("dilations", c.dilations);
  call.attrs.set("group", c.group);
  if (c.auto_pad == "NOTSET") {
    call.attrs.set("pads", c.pads);
  } else {
    call.attrs.set("auto_pad", c.auto_pad);
  }
  call.inputs = {HostTensor::f32(c.x, x), HostTensor::f32(c.w, w)};
  if (bias != nullptr) call.inputs.push_back(HostTensor::f32(Shape{c.w.dim(0)}, *bias));
  call.constant_inputs = {1};
  return call;
}

TEST(ConvOpTest, MatchesDirectConvolution) {
  std::mt19937 rng(21);
  for (const ConvCase& c : conv_cases()) {
    const std::vector<float> x = random_floats(c.x.num_elements(), rng);
    const std::vector<float> w = random_floats(c.w.num_elements(), rng);
    const std::vector<float> bias = random_floats(c.w.dim(0), rng);
    Shape expected_shape;
    const std::vector<double> expected = reference_conv(c, x, w, c.bias ? &bias : nullptr, &expected_shape);
    auto result = run_op(conv_call(c, x, w, c.bias ? &bias : nullptr));
    ASSERT_TRUE(result.ok()) << c.name << ": " << result.status().to_string();
    EXPECT_EQ(result->outputs[0].shape, expected_shape) << c.name << ": " << result->outputs[0].shape.to_string();
    EXPECT_LE(testing::normalized_max_error(result->outputs[0].to_f32(), expected), kTolerance) << c.name;
  }
}

TEST(ConvOpTest, SchemaRejectsChannelMismatchAndBadAttributes) {
  std::mt19937 rng(3);
  ConvCase c{.name = "bad", .x = Shape{1, 3, 5, 5}, .w = Shape{4, 2, 3, 3}};
  auto mismatch = run_op(conv_call(c, random_floats(75, rng), random_floats(72, rng), nullptr));
  ASSERT_FALSE(mismatch.ok());
  EXPECT_EQ(mismatch.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mismatch.status().to_string().find("channels"), std::string::npos) << mismatch.status().to_string();

  ConvCase strided{.name = "zero stride", .x = Shape{1, 2, 5, 5}, .w = Shape{4, 2, 3, 3}, .strides = {0, 1}};
  auto zero = run_op(conv_call(strided, random_floats(50, rng), random_floats(72, rng), nullptr));
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().to_string().find("strides"), std::string::npos) << zero.status().to_string();

  ConvCase too_big{.name = "kernel too big", .x = Shape{1, 2, 2, 2}, .w = Shape{4, 2, 3, 3}};
  EXPECT_FALSE(run_op(conv_call(too_big, random_floats(8, rng), random_floats(72, rng), nullptr)).ok());
}

TEST(ConvGeometryTest, SamePaddingSplitsLikeOnnx) {
  ops::ConvParams attrs;
  attrs.strides = {1, 1};
  attrs.auto_pad = "SAME_UPPER";
  auto upper = conv2d_geometry(attrs, Shape{1, 1, 6, 6}, Shape{1, 1, 4, 4});
  ASSERT_TRUE(upper.ok());
  EXPECT_EQ(upper->pad_top, 1);  // total 3: 1 before, 2 after
  EXPECT_EQ(upper->oh, 6);
  attrs.auto_pad = "SAME_LOWER";
  EXPECT_EQ(conv2d_geometry(attrs, Shape{1, 1, 6, 6}, Shape{1, 1, 4, 4})->pad_top, 2);
}

TEST(BatchNormOpTest, MatchesReferenceForRank4AndRank2) {
  std::mt19937 rng(8);
  for (const Shape& shape : {Shape{2, 5, 3, 4}, Shape{3, 5}}) {
    const int64_t channels = shape.dim(1);
    const std::vector<float> x = random_floats(shape.num_elements(), rng);
    const std::vector<float> scale = random_floats(channels, rng);
    const std::vector<float> b = random_floats(channels, rng);
    const std::vector<float> mean = random_floats(channels, rng);
    const std::vector<float> var = random_floats(channels, rng, 0.1f, 2.0f);
    const double epsilon = 1e-3;
    const int64_t inner = shape.num_elements() / (shape.dim(0) * channels);
    std::vector<double> expected(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const size_t c = static_cast<size_t>((static_cast<int64_t>(i) / inner) % channels);
      expected[i] = (x[i] - double{mean[c]}) / std::sqrt(double{var[c]} + epsilon) * scale[c] + b[c];
    }
    OpCall call;
    call.op_type = "BatchNormalization";
    call.attrs.set("epsilon", epsilon);
    call.inputs = {HostTensor::f32(shape, x), HostTensor::f32(Shape{channels}, scale),
                   HostTensor::f32(Shape{channels}, b), HostTensor::f32(Shape{channels}, mean),
                   HostTensor::f32(Shape{channels}, var)};
    auto result = run_op(call);
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    EXPECT_EQ(result->outputs[0].shape, shape);
    EXPECT_LE(testing::normalized_max_error(result->outputs[0].to_f32(), expected), kTolerance);
  }
}

TEST(BatchNormOpTest, SchemaRejectsWrongParameterLength) {
  std::mt19937 rng(1);
  OpCall call;
  call.op_type = "BatchNormalization";
  call.inputs = {HostTensor::random_f32(Shape{1, 4, 2, 2}, rng), HostTensor::random_f32(Shape{4}, rng),
                 HostTensor::random_f32(Shape{3}, rng), HostTensor::random_f32(Shape{4}, rng),
                 HostTensor::random_f32(Shape{4}, rng, 0.5f, 1.0f)};
  auto result = run_op(call);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().to_string().find("'B'"), std::string::npos) << result.status().to_string();
}

// ---- ConvTranspose ----

struct ConvTransposeCase {
  Shape x;  // [n, c, d...]
  Shape w;  // [c, m/group, k...]
  // Empty when absent.
  std::vector<int64_t> strides, pads, dilations, output_padding, output_shape;
  int64_t group = 1;
  std::string auto_pad = "NOTSET";
  bool bias = false;
};

// Transposed convolution from its definition: y[o] = sum of x[i] · w[k] over o = i·stride + k·dilation - pad_begin,
// the output extent and pads derived as the ONNX operator page states.
std::vector<double> reference_conv_transpose(const ConvTransposeCase& c, const std::vector<float>& x,
                                             const std::vector<float>& w, const std::vector<float>& bias,
                                             std::vector<int64_t>* out_dims) {
  const size_t k = static_cast<size_t>(c.x.rank() - 2);
  const int64_t n = c.x.dim(0), ch = c.x.dim(1), mg = c.w.dim(1), m = mg * c.group, cg = ch / c.group;
  std::vector<int64_t> in(k), kern(k), out(k), pb(k), s(k), d(k);
  for (size_t a = 0; a < k; ++a) {
    in[a] = c.x.dim(static_cast<int>(a) + 2);
    kern[a] = c.w.dim(static_cast<int>(a) + 2);
    s[a] = c.strides.empty() ? 1 : c.strides[a];
    d[a] = c.dilations.empty() ? 1 : c.dilations[a];
    const int64_t full =
        s[a] * (in[a] - 1) + (c.output_padding.empty() ? 0 : c.output_padding[a]) + (kern[a] - 1) * d[a] + 1;
    if (!c.output_shape.empty() || c.auto_pad != "NOTSET") {
      out[a] = c.output_shape.empty() ? in[a] * s[a] : c.output_shape[a];
      const int64_t total = full - out[a];
      const int64_t half = static_cast<int64_t>(std::floor(static_cast<double>(total) / 2));
      pb[a] = c.auto_pad == "SAME_UPPER" ? half : total - half;
    } else {
      pb[a] = c.pads.empty() ? 0 : c.pads[a];
      out[a] = full - pb[a] - (c.pads.empty() ? 0 : c.pads[a + k]);
    }
  }
  *out_dims = {n, m};
  out_dims->insert(out_dims->end(), out.begin(), out.end());
  int64_t in_plane = 1, out_plane = 1, taps = 1;
  for (size_t a = 0; a < k; ++a) {
    in_plane *= in[a];
    out_plane *= out[a];
    taps *= kern[a];
  }
  std::vector<double> y(static_cast<size_t>(n * m * out_plane), 0.0);
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t oc = 0; oc < m; ++oc) {
      const int64_t g = oc / mg;
      for (int64_t o = 0; o < out_plane; ++o) {
        y[static_cast<size_t>((b * m + oc) * out_plane + o)] = c.bias ? bias[static_cast<size_t>(oc)] : 0.0;
      }
      for (int64_t ci = g * cg; ci < (g + 1) * cg; ++ci) {
        for (int64_t i = 0; i < in_plane; ++i) {
          for (int64_t t = 0; t < taps; ++t) {
            int64_t ri = i, rt = t, o = 0;
            bool inside = true;
            std::vector<int64_t> ipos(k), tpos(k);
            for (size_t a = k; a-- > 0;) {
              ipos[a] = ri % in[a];
              ri /= in[a];
              tpos[a] = rt % kern[a];
              rt /= kern[a];
            }
            for (size_t a = 0; a < k; ++a) {
              const int64_t p = ipos[a] * s[a] + tpos[a] * d[a] - pb[a];
              inside = inside && p >= 0 && p < out[a];
              o = o * out[a] + p;
            }
            if (!inside) continue;
            y[static_cast<size_t>((b * m + oc) * out_plane + o)] +=
                static_cast<double>(x[static_cast<size_t>((b * ch + ci) * in_plane + i)]) *
                w[static_cast<size_t>((ci * mg + oc % mg) * taps + t)];
          }
        }
      }
    }
  }
  return y;
}

TEST(ConvTransposeOpTest, MatchesDefinition) {
  const std::vector<ConvTransposeCase> cases = {
      {.x = {1, 1, 3}, .w = {1, 2, 3}},
      {.x = {2, 3, 5}, .w = {3, 2, 4}, .strides = {3}, .pads = {1, 2}, .bias = true},
      {.x = {1, 1, 3, 3}, .w = {1, 2, 3, 3}, .strides = {3, 2}, .output_padding = {1, 1}},
      {.x = {1, 1, 3, 3}, .w = {1, 2, 3, 3}, .strides = {3, 2}, .output_shape = {10, 8}},
      {.x = {1, 2, 3, 4}, .w = {2, 1, 3, 3}, .strides = {2, 2}, .auto_pad = "SAME_UPPER"},
      {.x = {1, 2, 4, 3}, .w = {2, 3, 2, 3}, .strides = {2, 1}, .auto_pad = "SAME_LOWER", .bias = true},
      {.x = {1, 1, 3, 3}, .w = {1, 1, 2, 2}, .dilations = {2, 2}},
      {.x = {2, 4, 5, 3}, .w = {4, 3, 3, 2}, .strides = {2, 3}, .pads = {1, 0, 2, 1}, .group = 2, .bias = true},
      {.x = {1, 1, 3, 4, 5}, .w = {1, 2, 3, 3, 3}},
      {.x = {1, 2, 2, 3, 3}, .w = {2, 2, 2, 3, 2}, .strides = {2, 1, 2}, .pads = {0, 1, 0, 1, 0, 1}, .bias = true},
      // Note [Unfolding ConvTranspose]: stride = kernel — PP-OCR's upsampling, groups, output padding, cropping
      // end pads, 1-D, and enough rows for several row blocks.
      {.x = {1, 16, 24, 32}, .w = {16, 16, 2, 2}, .strides = {2, 2}, .bias = true},
      {.x = {2, 4, 5, 7}, .w = {4, 3, 3, 2}, .strides = {3, 2}, .group = 2, .bias = true},
      {.x = {1, 2, 3, 3}, .w = {2, 2, 2, 2}, .strides = {2, 2}, .output_padding = {1, 1}, .bias = true},
      {.x = {1, 2, 3, 4}, .w = {2, 1, 2, 2}, .strides = {2, 2}, .pads = {0, 0, 1, 1}},
      {.x = {1, 3, 7}, .w = {3, 2, 2}, .strides = {2}},
      {.x = {1, 2, 20, 64}, .w = {2, 64, 2, 2}, .strides = {2, 2}, .output_padding = {1, 0}, .bias = true},
  };
  std::mt19937 rng(21);
  for (const ConvTransposeCase& c : cases) {
    const std::vector<float> x = random_floats(c.x.num_elements(), rng);
    const std::vector<float> w = random_floats(c.w.num_elements(), rng);
    const std::vector<float> bias = random_floats(c.w.dim(1) * c.group, rng);
    OpCall call{.op_type = "ConvTranspose"};
    if (!c.strides.empty()) call.attrs.set("strides", c.strides);
    if (!c.pads.empty()) call.attrs.set("pads", c.pads);
    if (!c.dilations.empty()) call.attrs.set("dilations", c.dilations);
    if (!c.output_padding.empty()) call.attrs.set("output_padding", c.output_padding);
    if (!c.output_shape.empty()) call.attrs.set("output_shape", c.output_shape);
    call.attrs.set("group", c.group);
    call.attrs.set("auto_pad", c.auto_pad);
    call.inputs = {HostTensor::f32(c.x, x), HostTensor::f32(c.w, w)};
    if (c.bias) call.inputs.push_back(HostTensor::f32(Shape{c.w.dim(1) * c.group}, bias));
    call.constant_inputs = {1};
    auto result = run_op(call);
    ASSERT_TRUE(result.ok()) << c.x.to_string() << ": " << result.status().to_string();
    std::vector<int64_t> out_dims;
    const std::vector<double> expected = reference_conv_transpose(c, x, w, bias, &out_dims);
    const Shape& got = result->outputs[0].shape;
    ASSERT_EQ(std::vector<int64_t>(got.dims().begin(), got.dims().end()), out_dims) << c.x.to_string();
    EXPECT_LT(testing::normalized_max_error(result->outputs[0].to_f32(), expected), kTolerance) << c.x.to_string();
  }
}

TEST(ConvTransposeOpTest, RejectsBadAttributesAndChannels) {
  std::mt19937 rng(22);
  OpCall call{.op_type = "ConvTranspose"};
  call.attrs.set("group", int64_t{0});
  call.inputs = {HostTensor::f32(Shape{1, 2, 3, 3}, random_floats(18, rng)),
                 HostTensor::f32(Shape{2, 1, 2, 2}, random_floats(8, rng))};
  auto group = run_op(call);
  ASSERT_FALSE(group.ok());
  EXPECT_NE(group.status().message().find("group"), std::string::npos) << group.status().to_string();

  call.attrs.set("group", int64_t{1});
  call.attrs.set("strides", std::vector<int64_t>{1, 1});
  call.attrs.set("pads", std::vector<int64_t>{0, 0, 0});
  auto pads = run_op(call);
  ASSERT_FALSE(pads.ok());
  EXPECT_NE(pads.status().message().find("pads"), std::string::npos) << pads.status().to_string();

  OpCall channels{.op_type = "ConvTranspose"};
  channels.inputs = {HostTensor::f32(Shape{1, 3, 3, 3}, random_floats(27, rng)),
                     HostTensor::f32(Shape{2, 1, 2, 2}, random_floats(8, rng))};
  auto mismatch = run_op(channels);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.status().message().find("channels"), std::string::npos) << mismatch.status().to_string();
}

}  // namespace
}  // namespace hxrt::kernels::cpu
