#include "kernels/cpu/pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/testing/infer_node.h"
#include "kernels/testing/kernel_harness.h"
#include "kernels/testing/test_data.h"
#include "ops/schemas/schemas.h"

namespace hxrt::kernels::cpu {
namespace {

using testing::dims_of;
using testing::HostTensor;
using testing::infer_node;
using testing::InferResult;
using testing::OpCall;
using testing::run_op;
using testing::unravel;

// Tolerance: normalised max error against double references.
constexpr double kTolerance = 1e-5;

int64_t product(const std::vector<int64_t>& dims) {
  return std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<>());
}

// ---- AveragePool / MaxPool ----

struct PoolCase {
  Shape x;
  std::vector<int64_t> kernel;
  std::vector<int64_t> strides;    // empty: 1s
  std::vector<int64_t> pads;       // empty: 0s
  std::vector<int64_t> dilations;  // empty: 1s (MaxPool only)
  std::string auto_pad = "NOTSET";
  bool ceil_mode = false;
  bool count_include_pad = false;
  int64_t storage_order = 0;
};

struct PoolReference {
  std::vector<int64_t> out_dims;
  std::vector<double> y;
  std::vector<int64_t> indices;
};

// Pooling straight from the definition: every output position visits its window; pads come from auto_pad the ONNX
// way (SAME: out = ceil(in / stride), the odd pad at the end for SAME_UPPER).
PoolReference reference_pool(const PoolCase& c, const std::vector<float>& x, bool max) {
  const size_t k = c.kernel.size();
  std::vector<int64_t> in(c.x.dims().begin() + 2, c.x.dims().end());
  std::vector<int64_t> stride = c.strides.empty() ? std::vector<int64_t>(k, 1) : c.strides;
  std::vector<int64_t> dil = c.dilations.empty() ? std::vector<int64_t>(k, 1) : c.dilations;
  std::vector<int64_t> pb(k, 0), pe(k, 0), out(k);
  for (size_t a = 0; a < k; ++a) {
    const int64_t eff = dil[a] * (c.kernel[a] - 1) + 1;
    if (c.auto_pad == "SAME_UPPER" || c.auto_pad == "SAME_LOWER") {
      out[a] = (in[a] + stride[a] - 1) / stride[a];
      const int64_t total = std::max<int64_t>(0, (out[a] - 1) * stride[a] + eff - in[a]);
      pb[a] = c.auto_pad == "SAME_UPPER" ? total / 2 : (total + 1) / 2;
      pe[a] = total - pb[a];
    } else {
      if (!c.pads.empty()) {
        pb[a] = c.pads[a];
        pe[a] = c.pads[a + k];
      }
      const double span = static_cast<double>(in[a] + pb[a] + pe[a] - eff) / static_cast<double>(stride[a]);
      out[a] = static_cast<int64_t>(c.ceil_mode ? std::ceil(span) : std::floor(span)) + 1;
      if (c.ceil_mode && (out[a] - 1) * stride[a] >= in[a] + pb[a]) --out[a];
    }
  }
  PoolReference r;
  r.out_dims = {c.x.dim(0), c.x.dim(1)};
  r.out_dims.insert(r.out_dims.end(), out.begin(), out.end());
  const int64_t planes = c.x.dim(0) * c.x.dim(1);
  const int64_t in_plane = product(in);
  const int64_t out_plane = product(out);
  for (int64_t p = 0; p < planes; ++p) {
    for (int64_t o = 0; o < out_plane; ++o) {
      const std::vector<int64_t> opos = unravel(o, out);
      double sum = 0.0, best = -std::numeric_limits<double>::infinity();
      int64_t count = 0, best_index = -1;
      int64_t include = 1;
      for (size_t a = 0; a < k; ++a) {
        int64_t n = 0;
        for (int64_t t = 0; t < c.kernel[a]; ++t) n += opos[a] * stride[a] - pb[a] + t * dil[a] < in[a] + pe[a];
        include *= n;
      }
      for (int64_t w = 0; w < product(c.kernel); ++w) {
        const std::vector<int64_t> kpos = unravel(w, c.kernel);
        std::vector<int64_t> ipos(k);
        bool inside = true;
        for (size_t a = 0; a < k; ++a) {
          ipos[a] = opos[a] * stride[a] - pb[a] + kpos[a] * dil[a];
          inside = inside && ipos[a] >= 0 && ipos[a] < in[a];
        }
        if (!inside) continue;
        int64_t flat = 0;
        for (size_t a = 0; a < k; ++a) flat = flat * in[a] + ipos[a];
        int64_t column = 0;  // column-major over the spatial dims
        for (size_t a = k; a-- > 0;) column = column * in[a] + ipos[a];
        const double v = x[static_cast<size_t>(p * in_plane + flat)];
        sum += v;
        ++count;
        if (v > best) {
          best = v;
          best_index = p * in_plane + (c.storage_order == 0 ? flat : column);
        }
      }
      r.y.push_back(max ? best : sum / static_cast<double>(c.count_include_pad ? include : count));
      r.indices.push_back(best_index);
    }
  }
  return r;
}

OpCall pool_call(const PoolCase& c, bool max, const std::vector<float>& x) {
  OpCall call{.op_type = max ? "MaxPool" : "AveragePool"};
  call.attrs.set("kernel_shape", c.kernel);
  if (!c.strides.empty()) call.attrs.set("strides", c.strides);
  if (!c.pads.empty()) call.attrs.set("pads", c.pads);
  if (!c.dilations.empty()) call.attrs.set("dilations", c.dilations);
  if (c.auto_pad != "NOTSET") call.attrs.set("auto_pad", c.auto_pad);
  if (c.ceil_mode) call.attrs.set("ceil_mode", int64_t{1});
  if (max) {
    call.attrs.set("storage_order", c.storage_order);
    call.num_outputs = 2;
  } else {
    call.attrs.set("count_include_pad", int64_t{c.count_include_pad ? 1 : 0});
  }
  call.inputs = {HostTensor::f32(c.x, x)};
  return call;
}

const std::vector<PoolCase>& pool_cases() {
  static const std::vector<PoolCase> cases = {
      {.x = {1, 3, 17}, .kernel = {2}},
      {.x = {2, 3, 13}, .kernel = {3}, .strides = {2}, .pads = {1, 2}},
      {.x = {1, 2, 7, 5}, .kernel = {3, 3}, .strides = {2, 2}, .ceil_mode = true},
      {.x = {2, 3, 9, 11}, .kernel = {3, 2}, .strides = {2, 3}, .pads = {1, 0, 2, 1}},
      {.x = {1, 2, 9, 11}, .kernel = {3, 2}, .strides = {2, 3}, .pads = {1, 0, 2, 1}, .count_include_pad = true},
      {.x = {1, 1, 6, 7}, .kernel = {2, 3}, .auto_pad = "SAME_UPPER"},
      {.x = {1, 2, 7, 6}, .kernel = {2, 2}, .strides = {2, 2}, .auto_pad = "SAME_LOWER"},
      {.x = {1, 2, 8, 9}, .kernel = {3, 3}, .strides = {1, 1}, .auto_pad = "VALID"},
      {.x = {1, 1, 5, 5}, .kernel = {5, 5}, .pads = {2, 2, 2, 2}, .storage_order = 1},
      {.x = {1, 2, 5, 4, 7}, .kernel = {2, 3, 2}, .strides = {1, 2, 2}, .pads = {0, 1, 1, 1, 0, 0}},
      {.x = {1, 1, 1, 1}, .kernel = {1, 1}},
      {.x = {3, 67, 5, 5}, .kernel = {2, 2}, .storage_order = 1},
      {.x = {2, 40, 12, 12}, .kernel = {3, 3}, .pads = {1, 1, 1, 1}},  // planes split over the pool
  };
  return cases;
}

TEST(PoolOpTest, AveragePoolAgainstReference) {
  std::mt19937 rng(11);
  for (const PoolCase& c : pool_cases()) {
    const HostTensor xt = HostTensor::random_f32(c.x, rng);
    const std::vector<float> x = xt.to_f32();
    auto result = run_op(pool_call(c, false, x));
    ASSERT_TRUE(result.ok()) << c.x.to_string() << ": " << result.status().to_string();
    const PoolReference ref = reference_pool(c, x, false);
    ASSERT_EQ(dims_of(result->outputs[0].shape), ref.out_dims) << c.x.to_string();
    EXPECT_LT(testing::normalized_max_error(result->outputs[0].to_f32(), ref.y), kTolerance) << c.x.to_string();
  }
}

TEST(PoolOpTest, MaxPoolAndIndicesAgainstReference) {
  std::mt19937 rng(12);
  std::vector<PoolCase> cases = pool_cases();
  cases.push_back({.x = {1, 2, 8, 9}, .kernel = {2, 2}, .dilations = {2, 3}});
  cases.push_back({.x = {1, 1, 9, 6, 5},
                   .kernel = {2, 2, 2},
                   .strides = {2, 1, 2},
                   .dilations = {2, 1, 1},
                   .ceil_mode = true,
                   .storage_order = 1});
  for (const PoolCase& c : cases) {
    const std::vector<float> x = HostTensor::random_f32(c.x, rng).to_f32();
    auto result = run_op(pool_call(c, true, x));
    ASSERT_TRUE(result.ok()) << c.x.to_string() << ": " << result.status().to_string();
    const PoolReference ref = reference_pool(c, x, true);
    ASSERT_EQ(dims_of(result->outputs[0].shape), ref.out_dims) << c.x.to_string();
    EXPECT_LT(testing::normalized_max_error(result->outputs[0].to_f32(), ref.y), kTolerance) << c.x.to_string();
    EXPECT_EQ(result->outputs[1].dtype, DType::kI64);
    EXPECT_EQ(result->outputs[1].to_i64(), ref.indices) << c.x.to_string();
  }
}

TEST(PoolOpTest, MaxPoolOnEightBitIntegers) {
  std::mt19937 rng(20);
  const PoolCase c{.x = {2, 3, 7, 6}, .kernel = {3, 2}, .strides = {2, 2}, .pads = {1, 0, 1, 1}, .storage_order = 1};
  for (DType dtype : {DType::kU8, DType::kI8}) {
    std::uniform_int_distribution<int> pick(dtype == DType::kU8 ? 0 : -128, dtype == DType::kU8 ? 255 : 127);
    std::vector<std::byte> bytes(static_cast<size_t>(c.x.num_elements()));
    for (std::byte& b : bytes) b = static_cast<std::byte>(pick(rng));  // ties included: the first maximum wins
    const HostTensor xt = HostTensor::raw(dtype, c.x, bytes);
    OpCall call = pool_call(c, true, xt.to_f32());
    call.inputs = {xt};
    auto result = run_op(call);
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    const PoolReference ref = reference_pool(c, xt.to_f32(), true);
    EXPECT_EQ(result->outputs[0].dtype, dtype);
    const std::vector<float> got = result->outputs[0].to_f32();
    EXPECT_EQ(std::vector<double>(got.begin(), got.end()), ref.y);
    EXPECT_EQ(result->outputs[1].to_i64(), ref.indices);
  }
}

TEST(PoolOpTest, MaxPoolWithoutIndicesOutput) {
  std::mt19937 rng(13);
  const PoolCase c{.x = {2, 3, 6, 6}, .kernel = {3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1}};
  const std::vector<float> x = HostTensor::random_f32(c.x, rng).to_f32();
  OpCall call = pool_call(c, true, x);
  call.num_outputs = 1;
  auto result = run_op(call);
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  EXPECT_LT(testing::normalized_max_error(result->outputs[0].to_f32(), reference_pool(c, x, true).y), kTolerance);
}

TEST(PoolOpTest, BadAttributesFailNamingThem) {
  OpCall call{.op_type = "MaxPool"};
  call.inputs = {HostTensor::f32(Shape{1, 1, 4, 4}, std::vector<float>(16, 1.5f))};
  auto missing = run_op(call);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("kernel_shape"), std::string::npos) << missing.status().to_string();

  call.attrs.set("kernel_shape", std::vector<int64_t>{2, 2});
  call.attrs.set("strides", std::vector<int64_t>{1, 1, 1});
  auto strides = run_op(call);
  ASSERT_FALSE(strides.ok());
  EXPECT_NE(strides.status().message().find("strides"), std::string::npos) << strides.status().to_string();

  OpCall average{.op_type = "AveragePool"};
  average.attrs.set("kernel_shape", std::vector<int64_t>{2, 2});
  average.attrs.set("auto_pad", "SAME");
  average.inputs = {HostTensor::f32(Shape{1, 1, 4, 4}, std::vector<float>(16, 1.5f))};
  auto auto_pad = run_op(average);
  ASSERT_FALSE(auto_pad.ok());
  EXPECT_NE(auto_pad.status().message().find("auto_pad"), std::string::npos) << auto_pad.status().to_string();

  average.attrs.set("auto_pad", "NOTSET");
  average.attrs.set("kernel_shape", std::vector<int64_t>{5, 2});  // larger than the input
  auto big = run_op(average);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("larger"), std::string::npos) << big.status().to_string();
}

// Note [Row max pool]: MaxPool without its Indices output (the row path for 1-D and 2-D pools) gives the values of
// the element-by-element loop that computes Indices, bit for bit: every pool case, rows wide enough for the
// eight-wide interior, strides, dilations, pads at either side and NaNs among the inputs.
TEST(PoolOpTest, MaxPoolRowPathGivesTheGenericLoopsBits) {
  std::mt19937 rng(31);
  std::vector<PoolCase> cases = pool_cases();
  cases.push_back({.x = {1, 16, 48, 64}, .kernel = {2, 2}, .auto_pad = "SAME_UPPER"});  // PP-OCR's
  cases.push_back({.x = {2, 3, 11, 37}, .kernel = {3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1}});
  cases.push_back({.x = {1, 2, 9, 40}, .kernel = {2, 3}, .pads = {0, 2, 1, 2}, .dilations = {2, 3}});
  cases.push_back({.x = {1, 1, 5, 29}, .kernel = {5, 4}, .strides = {1, 3}, .pads = {2, 3, 2, 3}, .ceil_mode = true});
  cases.push_back({.x = {2, 4, 45}, .kernel = {4}, .strides = {1}, .pads = {2, 1}});
  for (const PoolCase& c : cases) {
    std::vector<float> x = HostTensor::random_f32(c.x, rng).to_f32();
    for (size_t i = 0; i < x.size(); i += 13) x[i] = std::numeric_limits<float>::quiet_NaN();
    OpCall with_indices = pool_call(c, true, x);
    OpCall values_only = with_indices;
    values_only.num_outputs = 1;
    auto generic = run_op(with_indices);
    auto rows = run_op(values_only);
    ASSERT_TRUE(generic.ok() && rows.ok()) << c.x.to_string();
    const std::vector<float> a = generic->outputs[0].to_f32(), b = rows->outputs[0].to_f32();
    ASSERT_EQ(a.size(), b.size()) << c.x.to_string();
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << c.x.to_string();
  }
}

// ---- GlobalAveragePool / GlobalMaxPool ----

TEST(PoolOpTest, GlobalPoolsAgainstReference) {
  std::mt19937 rng(14);
  for (const Shape& s : {Shape{1, 3, 5, 5}, Shape{2, 5, 7}, Shape{1, 2, 3, 4, 5}, Shape{3, 1, 1, 1}}) {
    const std::vector<float> x = HostTensor::random_f32(s, rng).to_f32();
    const int64_t planes = s.dim(0) * s.dim(1);
    const int64_t inner = s.num_elements() / planes;
    std::vector<double> mean(static_cast<size_t>(planes)), max(static_cast<size_t>(planes));
    for (int64_t p = 0; p < planes; ++p) {
      double sum = 0.0, best = -1e300;
      for (int64_t i = 0; i < inner; ++i) {
        sum += x[static_cast<size_t>(p * inner + i)];
        best = std::max<double>(best, x[static_cast<size_t>(p * inner + i)]);
      }
      mean[static_cast<size_t>(p)] = sum / static_cast<double>(inner);
      max[static_cast<size_t>(p)] = best;
    }
    std::vector<int64_t> out_dims(static_cast<size_t>(s.rank()), 1);
    out_dims[0] = s.dim(0);
    out_dims[1] = s.dim(1);
    for (bool is_max : {false, true}) {
      OpCall call{.op_type = is_max ? "GlobalMaxPool" : "GlobalAveragePool"};
      call.inputs = {HostTensor::f32(s, x)};
      auto result = run_op(call);
      ASSERT_TRUE(result.ok()) << result.status().to_string();
      EXPECT_EQ(dims_of(result->outputs[0].shape), out_dims);
      EXPECT_LT(testing::normalized_max_error(result->outputs[0].to_f32(), is_max ? max : mean), kTolerance);
    }
  }
}

// ---- MaxUnpool ----

TEST(PoolOpTest, MaxUnpoolScattersMaxPoolsIndices) {
  std::mt19937 rng(15);
  const Shape s{2, 3, 6, 8};
  const std::vector<float> x = HostTensor::random_f32(s, rng).to_f32();
  const PoolCase c{.x = s, .kernel = {2, 2}, .strides = {2, 2}};
  auto pooled = run_op(pool_call(c, true, x));
  ASSERT_TRUE(pooled.ok()) << pooled.status().to_string();
  const std::vector<int64_t> indices = pooled->outputs[1].to_i64();
  const std::vector<float> values = pooled->outputs[0].to_f32();
  for (bool with_shape : {false, true}) {
    OpCall call{.op_type = "MaxUnpool"};
    call.attrs.set("kernel_shape", std::vector<int64_t>{2, 2});
    call.attrs.set("strides", std::vector<int64_t>{2, 2});
    call.inputs = {pooled->outputs[0], pooled->outputs[1]};
    // A larger output_shape keeps each index's position in the unpooled [2, 3, 6, 8].
    const std::vector<int64_t> out_dims = with_shape ? std::vector<int64_t>{2, 3, 7, 9} : dims_of(s);
    if (with_shape) {
      call.inputs.push_back(HostTensor::i64(Shape{4}, out_dims));
      call.constant_inputs = {2};
    }
    auto result = run_op(call);
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    ASSERT_EQ(dims_of(result->outputs[0].shape), out_dims);
    std::vector<double> expected(static_cast<size_t>(product(out_dims)), 0.0);
    for (size_t i = 0; i < indices.size(); ++i) {
      const std::vector<int64_t> pos = unravel(indices[i], dims_of(s));
      int64_t flat = 0;
      for (size_t d = 0; d < pos.size(); ++d) flat = flat * out_dims[d] + pos[d];
      expected[static_cast<size_t>(flat)] = values[i];
    }
    EXPECT_LT(testing::normalized_max_error(result->outputs[0].to_f32(), expected), kTolerance);
  }
  OpCall bad{.op_type = "MaxUnpool"};
  bad.attrs.set("kernel_shape", std::vector<int64_t>{2});
  bad.inputs = {HostTensor::f32(Shape{1, 1, 2}, {1.5f, 2.5f}), HostTensor::i64(Shape{1, 1, 2}, {0, 7})};
  auto out_of_range = run_op(bad);
  ASSERT_FALSE(out_of_range.ok());
  EXPECT_NE(out_of_range.status().message().find("index 7"), std::string::npos) << out_of_range.status().to_string();
}

// ---- Resize ----

struct ResizeCase {
  Shape x;
  std::string mode;
  std::string transform = "half_pixel";
  std::string nearest_mode = "round_prefer_floor";
  std::vector<float> scales;  // empty: sizes
  std::vector<int64_t> sizes;
  std::vector<float> roi;  // tf_crop_and_resize
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0.0;
};

// ONNX's reference algorithm, written again: one axis at a time from the outermost, each output coordinate taking
// the n input points nearest to its source coordinate (edges repeated), weighted by the mode's coefficients.
double interpolate_1d(const std::vector<double>& data, double scale, int64_t x, const ResizeCase& c, size_t axis,
                      size_t rank) {
  const double in = static_cast<double>(data.size());
  const double out_width = scale * in;
  double src = 0.0;
  const std::string& t = c.transform;
  if (t == "align_corners") {
    src = out_width == 1 ? 0 : static_cast<double>(x) * (in - 1) / (out_width - 1);
  } else if (t == "asymmetric") {
    src = static_cast<double>(x) / scale;
  } else if (t == "tf_crop_and_resize") {
    const double start = c.roi[axis], end = c.roi[axis + rank];
    src = out_width == 1 ? (end - start) * (in - 1) / 2
                         : static_cast<double>(x) * (end - start) * (in - 1) / (out_width - 1);
    src += start * (in - 1);
    if (src < 0 || src > in - 1) return c.extrapolation;
  } else if (t == "pytorch_half_pixel") {
    src = out_width == 1 ? -0.5 : (static_cast<double>(x) + 0.5) / scale - 0.5;
  } else {
    src = (static_cast<double>(x) + 0.5) / scale - 0.5;
  }
  const double base = std::floor(src);
  const double ratio = src == base ? 1.0 : src - base;
  std::vector<double> coeffs;
  if (c.mode == "nearest") {
    if (src == base) {
      coeffs = {0, 1};
    } else if (c.nearest_mode == "round_prefer_floor") {
      coeffs = {ratio <= 0.5 ? 1.0 : 0.0, ratio > 0.5 ? 1.0 : 0.0};
    } else if (c.nearest_mode == "round_prefer_ceil") {
      coeffs = {ratio < 0.5 ? 1.0 : 0.0, ratio >= 0.5 ? 1.0 : 0.0};
    } else if (c.nearest_mode == "floor") {
      coeffs = {1, 0};
    } else {
      coeffs = {0, 1};
    }
  } else if (c.mode == "linear") {
    coeffs = {1 - ratio, ratio};
  } else {
    const double a = c.cubic_a;
    auto near = [a](double s) { return ((a + 2) * s - (a + 3)) * s * s + 1; };
    auto far = [a](double s) { return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a; };
    coeffs = {far(ratio + 1), near(ratio), near(1 - ratio), far(2 - ratio)};
  }
  // The n nearest points of the edge-padded data (ties to the lower index).
  const int64_t n = static_cast<int64_t>(coeffs.size());
  const int64_t pad = (n + 1) / 2;
  const int64_t length = static_cast<int64_t>(data.size()) + 2 * pad;
  std::vector<int64_t> order(static_cast<size_t>(length));
  std::iota(order.begin(), order.end(), 0);
  const double xp = src + static_cast<double>(pad);
  std::stable_sort(order.begin(), order.end(), [xp](int64_t l, int64_t r) {
    return std::fabs(xp - static_cast<double>(l)) < std::fabs(xp - static_cast<double>(r));
  });
  std::vector<int64_t> picked(order.begin(), order.begin() + n);
  std::sort(picked.begin(), picked.end());
  double sum = 0.0, total = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t idx = picked[static_cast<size_t>(i)] - pad;
    double w = coeffs[static_cast<size_t>(i)];
    if (c.exclude_outside && (idx < 0 || idx >= static_cast<int64_t>(data.size()))) w = 0;
    total += w;
    sum += w * data[static_cast<size_t>(std::clamp<int64_t>(idx, 0, static_cast<int64_t>(data.size()) - 1))];
  }
  return c.exclude_outside && total != 0 ? sum / total : sum;
}

// Interpolates axis `axis` of `x` (dims `dims`) and recurses into the inner axes.
double interpolate_nd(const std::vector<double>& x, const std::vector<int64_t>& dims, const std::vector<double>& scales,
                      const std::vector<int64_t>& pos, const ResizeCase& c, size_t axis) {
  if (axis == dims.size()) return x[0];
  const int64_t inner = product(std::vector<int64_t>(dims.begin() + static_cast<std::ptrdiff_t>(axis) + 1, dims.end()));
  std::vector<double> line(static_cast<size_t>(dims[axis]));
  for (int64_t i = 0; i < dims[axis]; ++i) {
    std::vector<double> sub(x.begin() + i * inner, x.begin() + (i + 1) * inner);
    line[static_cast<size_t>(i)] = interpolate_nd(sub, dims, scales, pos, c, axis + 1);
  }
  return interpolate_1d(line, scales[axis], pos[axis], c, axis, dims.size());
}

TEST(ResizeOpTest, AgainstOnnxReferenceAlgorithm) {
  const std::vector<ResizeCase> cases = {
      {.x = {1, 1, 4, 5}, .mode = "nearest", .scales = {1, 1, 2, 1.5f}},
      {.x = {1, 2, 5, 4}, .mode = "nearest", .transform = "asymmetric", .nearest_mode = "floor", .sizes = {1, 2, 3, 9}},
      {.x = {1, 1, 4, 4},
       .mode = "nearest",
       .transform = "align_corners",
       .nearest_mode = "ceil",
       .sizes = {1, 1, 7, 3}},
      {.x = {2, 1, 3, 4}, .mode = "nearest", .nearest_mode = "round_prefer_ceil", .scales = {1, 1, 0.6f, 2.5f}},
      // Note [Nearest resize]: rank 1, and a crop whose outside positions take the extrapolation value.
      {.x = {5}, .mode = "nearest", .transform = "asymmetric", .nearest_mode = "floor", .sizes = {9}},
      {.x = {1, 1, 4, 4},
       .mode = "nearest",
       .transform = "tf_crop_and_resize",
       .sizes = {1, 1, 3, 3},
       .roi = {0, 0, 0.4f, 0.6f, 1, 1, 1.2f, 1.7f},
       .extrapolation = 10.0},
      {.x = {1, 1, 4, 6}, .mode = "linear", .scales = {1, 1, 0.75f, 1.5f}},
      {.x = {1, 2, 3, 5}, .mode = "linear", .transform = "align_corners", .scales = {1, 1, 2, 0.6f}},
      {.x = {1, 1, 4, 4}, .mode = "linear", .transform = "pytorch_half_pixel", .sizes = {1, 1, 3, 1}},
      {.x = {3, 7}, .mode = "linear", .transform = "asymmetric", .sizes = {5, 4}},
      {.x = {1, 1, 4, 4}, .mode = "cubic", .scales = {1, 1, 0.8f, 1.7f}},
      {.x = {1, 1, 5, 4}, .mode = "cubic", .transform = "align_corners", .sizes = {1, 1, 9, 3}},
      {.x = {1, 1, 4, 4}, .mode = "cubic", .scales = {1, 1, 2, 2}, .cubic_a = -0.5, .exclude_outside = true},
      {.x = {1, 1, 4, 5}, .mode = "cubic", .transform = "asymmetric", .sizes = {1, 1, 3, 11}},
      {.x = {1, 1, 4, 4},
       .mode = "linear",
       .transform = "tf_crop_and_resize",
       .sizes = {1, 1, 3, 3},
       .roi = {0, 0, 0.4f, 0.6f, 1, 1, 1.2f, 1.7f},
       .extrapolation = 10.0},
      {.x = {2, 3, 4},
       .mode = "cubic",
       .transform = "tf_crop_and_resize",
       .sizes = {2, 3, 5},
       .roi = {0, 0, -0.2f, 1, 1, 0.9f}},
  };
  std::mt19937 rng(16);
  for (const ResizeCase& c : cases) {
    const HostTensor xt = HostTensor::random_f32(c.x, rng);
    const std::vector<float> xf = xt.to_f32();
    OpCall call{.op_type = "Resize"};
    call.attrs.set("mode", c.mode);
    call.attrs.set("coordinate_transformation_mode", c.transform);
    call.attrs.set("nearest_mode", c.nearest_mode);
    call.attrs.set("cubic_coeff_a", c.cubic_a);
    call.attrs.set("exclude_outside", int64_t{c.exclude_outside ? 1 : 0});
    call.attrs.set("extrapolation_value", c.extrapolation);
    const int64_t rank = c.x.rank();
    call.inputs = {xt, std::nullopt, std::nullopt};
    if (!c.roi.empty()) call.inputs[1] = HostTensor::f32(Shape{2 * rank}, c.roi);
    if (!c.scales.empty()) {
      call.inputs[2] = HostTensor::f32(Shape{rank}, c.scales);
    } else {
      call.inputs.push_back(HostTensor::i64(Shape{rank}, c.sizes));
    }
    call.constant_inputs = {1, 2, 3};
    auto result = run_op(call);
    ASSERT_TRUE(result.ok()) << c.mode << " " << c.transform << ": " << result.status().to_string();
    // Reference output shape and scales.
    std::vector<int64_t> in_dims = dims_of(c.x), out_dims;
    std::vector<double> scales;
    for (size_t d = 0; d < in_dims.size(); ++d) {
      if (!c.scales.empty()) {
        scales.push_back(c.scales[d]);
        out_dims.push_back(static_cast<int64_t>(std::floor(static_cast<double>(in_dims[d]) * c.scales[d])));
      } else {
        scales.push_back(static_cast<double>(c.sizes[d]) / static_cast<double>(in_dims[d]));
        out_dims.push_back(c.sizes[d]);
      }
    }
    ASSERT_EQ(dims_of(result->outputs[0].shape), out_dims) << c.mode << " " << c.transform;
    const std::vector<double> x(xf.begin(), xf.end());
    std::vector<double> expected;
    for (int64_t o = 0; o < product(out_dims); ++o) {
      expected.push_back(interpolate_nd(x, in_dims, scales, unravel(o, out_dims), c, 0));
    }
    EXPECT_LT(testing::normalized_max_error(result->outputs[0].to_f32(), expected), 1e-5)
        << c.mode << " " << c.transform << " " << c.x.to_string();
  }
}

TEST(ResizeOpTest, BadAttributesAndMissingInputsFail) {
  OpCall call{.op_type = "Resize"};
  call.attrs.set("mode", "bicubic");
  call.inputs = {HostTensor::f32(Shape{1, 1, 2, 2}, {1.5f, 2.5f, 3.5f, 4.5f}), std::nullopt,
                 HostTensor::f32(Shape{4}, {1, 1, 2, 2})};
  call.constant_inputs = {2};
  auto mode = run_op(call);
  ASSERT_FALSE(mode.ok());
  EXPECT_NE(mode.status().message().find("'mode'"), std::string::npos) << mode.status().to_string();

  call.attrs.set("mode", "linear");
  call.constant_inputs = {};  // scales must be a constant for shape inference
  auto not_constant = run_op(call);
  ASSERT_FALSE(not_constant.ok());
  EXPECT_NE(not_constant.status().message().find("scales"), std::string::npos) << not_constant.status().to_string();

  call.constant_inputs = {2};
  call.inputs[2] = HostTensor::f32(Shape{3}, {1, 2, 2});
  auto length = run_op(call);
  ASSERT_FALSE(length.ok());
  EXPECT_NE(length.status().message().find("scales"), std::string::npos) << length.status().to_string();
}

// ---- GridSample ----

// PyTorch's bilinear and nearest sampling with zeros padding, from the definition.
double reference_grid_sample(const std::vector<float>& img, int64_t h, int64_t w, double gx, double gy,
                             bool align_corners, bool nearest) {
  auto unnormalize = [align_corners](double v, int64_t size) {
    return align_corners ? (v + 1) / 2 * static_cast<double>(size - 1) : ((v + 1) * static_cast<double>(size) - 1) / 2;
  };
  const double x = unnormalize(gx, w), y = unnormalize(gy, h);
  auto at = [&](int64_t iy, int64_t ix) {
    return iy < 0 || iy >= h || ix < 0 || ix >= w ? 0.0 : static_cast<double>(img[static_cast<size_t>(iy * w + ix)]);
  };
  if (nearest) return at(static_cast<int64_t>(std::nearbyint(y)), static_cast<int64_t>(std::nearbyint(x)));
  const int64_t x0 = static_cast<int64_t>(std::floor(x)), y0 = static_cast<int64_t>(std::floor(y));
  const double tx = x - std::floor(x), ty = y - std::floor(y);
  return at(y0, x0) * (1 - tx) * (1 - ty) + at(y0, x0 + 1) * tx * (1 - ty) + at(y0 + 1, x0) * (1 - tx) * ty +
         at(y0 + 1, x0 + 1) * tx * ty;
}

TEST(GridSampleOpTest, BilinearAndNearestZerosPaddingAgainstReference) {
  std::mt19937 rng(17);
  const int64_t n = 2, c = 3, h = 5, w = 7, oh = 4, ow = 6;
  const std::vector<float> x = HostTensor::random_f32(Shape{n, c, h, w}, rng).to_f32();
  const std::vector<float> grid = HostTensor::random_f32(Shape{n, oh, ow, 2}, rng, -1.2f, 1.2f).to_f32();
  for (bool align : {false, true}) {
    for (bool nearest : {false, true}) {
      OpCall call{.op_type = "GridSample"};
      call.attrs.set("mode", nearest ? "nearest" : "bilinear");
      call.attrs.set("align_corners", int64_t{align ? 1 : 0});
      call.inputs = {HostTensor::f32(Shape{n, c, h, w}, x), HostTensor::f32(Shape{n, oh, ow, 2}, grid)};
      auto result = run_op(call);
      ASSERT_TRUE(result.ok()) << result.status().to_string();
      ASSERT_EQ(dims_of(result->outputs[0].shape), (std::vector<int64_t>{n, c, oh, ow}));
      std::vector<double> expected;
      for (int64_t b = 0; b < n; ++b) {
        for (int64_t ch = 0; ch < c; ++ch) {
          const std::vector<float> img(x.begin() + (b * c + ch) * h * w, x.begin() + (b * c + ch + 1) * h * w);
          for (int64_t i = 0; i < oh * ow; ++i) {
            const size_t g = static_cast<size_t>((b * oh * ow + i) * 2);
            expected.push_back(reference_grid_sample(img, h, w, grid[g], grid[g + 1], align, nearest));
          }
        }
      }
      EXPECT_LT(testing::normalized_max_error(result->outputs[0].to_f32(), expected), kTolerance);
    }
  }
}

TEST(GridSampleOpTest, EveryModeReproducesPixelCentresAndPaddingClampsOutside) {
  std::mt19937 rng(18);
  const int64_t h = 4, w = 5;
  const std::vector<float> x = HostTensor::random_f32(Shape{1, 1, h, w}, rng).to_f32();
  // With align_corners, pixel (i, j) sits at (2j / (w-1) - 1, 2i / (h-1) - 1).
  std::vector<float> grid;
  for (int64_t i = 0; i < h; ++i) {
    for (int64_t j = 0; j < w; ++j) {
      grid.push_back(static_cast<float>(2.0 * static_cast<double>(j) / static_cast<double>(w - 1) - 1.0));
      grid.push_back(static_cast<float>(2.0 * static_cast<double>(i) / static_cast<double>(h - 1) - 1.0));
    }
  }
  for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
    for (const char* padding : {"zeros", "border", "reflection"}) {
      OpCall call{.op_type = "GridSample"};
      call.attrs.set("mode", mode);
      call.attrs.set("padding_mode", padding);
      call.attrs.set("align_corners", int64_t{1});
      call.inputs = {HostTensor::f32(Shape{1, 1, h, w}, x), HostTensor::f32(Shape{1, h, w, 2}, grid)};
      auto result = run_op(call);
      ASSERT_TRUE(result.ok()) << result.status().to_string();
      EXPECT_LT(testing::normalized_max_error(result->outputs[0].to_f32(), std::vector<double>(x.begin(), x.end())),
                kTolerance)
          << mode << " " << padding;
    }
  }
  // Far outside: border repeats the corner; zeros gives 0.
  for (const char* padding : {"zeros", "border"}) {
    OpCall call{.op_type = "GridSample"};
    call.attrs.set("padding_mode", padding);
    call.inputs = {HostTensor::f32(Shape{1, 1, h, w}, x), HostTensor::f32(Shape{1, 1, 1, 2}, {5.0f, -5.0f})};
    auto result = run_op(call);
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    const double expected = std::string(padding) == "zeros" ? 0.0 : x[static_cast<size_t>(w - 1)];
    EXPECT_NEAR(result->outputs[0].to_f32()[0], expected, 1e-6) << padding;
  }
  OpCall bad{.op_type = "GridSample"};
  bad.attrs.set("padding_mode", "wrap");
  bad.inputs = {HostTensor::f32(Shape{1, 1, h, w}, x), HostTensor::f32(Shape{1, 1, 1, 2}, {0.5f, 0.5f})};
  auto result = run_op(bad);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("padding_mode"), std::string::npos) << result.status().to_string();
}

// ---- RoiAlign ----

TEST(RoiAlignOpTest, AverageOfBilinearSamplesAgainstReference) {
  std::mt19937 rng(19);
  const int64_t n = 2, c = 3, h = 9, w = 11, oh = 3, ow = 4;
  const std::vector<float> x = HostTensor::random_f32(Shape{n, c, h, w}, rng).to_f32();
  const std::vector<float> rois = {0.5f, 1.0f, 7.5f, 6.0f, 2.0f, 0.0f, 10.0f, 8.5f, 3.0f, 3.0f, 3.5f, 4.0f};
  const std::vector<int64_t> batch = {1, 0, 1};
  for (bool half_pixel : {true, false}) {
    for (int64_t ratio : {0, 2}) {
      OpCall call{.op_type = "RoiAlign"};
      call.attrs.set("coordinate_transformation_mode", half_pixel ? "half_pixel" : "output_half_pixel");
      call.attrs.set("output_height", oh);
      call.attrs.set("output_width", ow);
      call.attrs.set("sampling_ratio", ratio);
      call.attrs.set("spatial_scale", 0.9);
      call.inputs = {HostTensor::f32(Shape{n, c, h, w}, x), HostTensor::f32(Shape{3, 4}, rois),
                     HostTensor::i64(Shape{3}, batch)};
      auto result = run_op(call);
      ASSERT_TRUE(result.ok()) << result.status().to_string();
      ASSERT_EQ(dims_of(result->outputs[0].shape), (std::vector<int64_t>{3, c, oh, ow}));
      // Bilinear sample with the input clamped at the far edges (samples inside [-1, size] only).
      auto sample = [&](const float* img, double y, double xx) {
        if (y < -1 || y > static_cast<double>(h) || xx < -1 || xx > static_cast<double>(w)) return 0.0;
        y = std::clamp(y, 0.0, static_cast<double>(h - 1));
        xx = std::clamp(xx, 0.0, static_cast<double>(w - 1));
        const int64_t y0 = static_cast<int64_t>(y), x0 = static_cast<int64_t>(xx);
        const int64_t y1 = std::min(y0 + 1, h - 1), x1 = std::min(x0 + 1, w - 1);
        const double ly = y - static_cast<double>(y0), lx = xx - static_cast<double>(x0);
        return (1 - ly) * (1 - lx) * img[y0 * w + x0] + (1 - ly) * lx * img[y0 * w + x1] +
               ly * (1 - lx) * img[y1 * w + x0] + ly * lx * img[y1 * w + x1];
      };
      std::vector<double> expected;
      for (size_t r = 0; r < 3; ++r) {
        const double off = half_pixel ? 0.5 : 0.0;
        const double x1 = rois[r * 4] * 0.9 - off, y1 = rois[r * 4 + 1] * 0.9 - off;
        double rw = rois[r * 4 + 2] * 0.9 - off - x1, rh = rois[r * 4 + 3] * 0.9 - off - y1;
        if (!half_pixel) {
          rw = std::max(rw, 1.0);
          rh = std::max(rh, 1.0);
        }
        const double bh = rh / oh, bw = rw / ow;
        const int64_t gh = ratio > 0 ? ratio : static_cast<int64_t>(std::ceil(bh));
        const int64_t gw = ratio > 0 ? ratio : static_cast<int64_t>(std::ceil(bw));
        for (int64_t ch = 0; ch < c; ++ch) {
          const float* img = x.data() + (batch[r] * c + ch) * h * w;
          for (int64_t py = 0; py < oh; ++py) {
            for (int64_t px = 0; px < ow; ++px) {
              double sum = 0.0;
              for (int64_t iy = 0; iy < gh; ++iy) {
                for (int64_t ix = 0; ix < gw; ++ix) {
                  sum += sample(
                      img,
                      y1 + (static_cast<double>(py) + (static_cast<double>(iy) + 0.5) / static_cast<double>(gh)) * bh,
                      x1 + (static_cast<double>(px) + (static_cast<double>(ix) + 0.5) / static_cast<double>(gw)) * bw);
                }
              }
              expected.push_back(sum / static_cast<double>(std::max<int64_t>(1, gh * gw)));
            }
          }
        }
      }
      EXPECT_LT(testing::normalized_max_error(result->outputs[0].to_f32(), expected), kTolerance)
          << half_pixel << " " << ratio;
    }
  }
  OpCall bad{.op_type = "RoiAlign"};
  bad.attrs.set("mode", "median");
  bad.inputs = {HostTensor::f32(Shape{1, 1, 2, 2}, {1.5f, 2.5f, 3.5f, 4.5f}),
                HostTensor::f32(Shape{1, 4}, {0, 0, 1, 1}), HostTensor::i64(Shape{1}, {0})};
  auto mode = run_op(bad);
  ASSERT_FALSE(mode.ok());
  EXPECT_NE(mode.status().message().find("'mode'"), std::string::npos) << mode.status().to_string();
  bad.attrs.set("mode", "avg");
  bad.inputs[2] = HostTensor::i64(Shape{1}, {3});
  auto index = run_op(bad);
  ASSERT_FALSE(index.ok());
  EXPECT_NE(index.status().message().find("batch index 3"), std::string::npos) << index.status().to_string();
}

// ---- Symbolic shape inference ----

// Output desc of one node of `op_type` on graph inputs `inputs`; `constant` (when given) is an initializer appended
// as the last input, after `omitted` empty optional inputs.
std::string infer(const std::string& op_type, const std::vector<graph::TensorDesc>& inputs, graph::AttributeMap attrs,
                  const std::optional<HostTensor>& constant = std::nullopt, int omitted = 0) {
  std::vector<testing::InferInput> node_inputs = testing::graph_inputs(inputs);
  for (int i = 0; i < omitted; ++i) node_inputs.push_back({.omitted = true});
  if (constant) node_inputs.push_back({.constant = *constant});
  const InferResult result = infer_node(op_type, "", node_inputs, std::move(attrs));
  return result.status.ok() ? result.desc : result.status.to_string();
}

TEST(PoolSchemaTest, SymbolicDimsFollowTheOutputFormulas) {
  const graph::Dim n = graph::Dim::symbol("n");
  const graph::Dim h = graph::Dim::symbol("h");
  graph::AttributeMap pool;
  pool.set("kernel_shape", std::vector<int64_t>{3, 2});
  pool.set("strides", std::vector<int64_t>{2, 2});
  pool.set("pads", std::vector<int64_t>{1, 0, 1, 0});
  EXPECT_EQ(infer("MaxPool", {{DType::kF32, {n, 3, h, 9}}}, pool), "f32[n, 3, (((h - 1) / 2) + 1), 4]");
  pool.set("auto_pad", "SAME_UPPER");
  EXPECT_EQ(infer("AveragePool", {{DType::kF32, {n, 3, h, 9}}}, pool), "f32[n, 3, ((h + 1) / 2), 5]");
  EXPECT_EQ(infer("GlobalMaxPool", {{DType::kF32, {n, 3, h, 9, 2}}}, {}), "f32[n, 3, 1, 1, 1]");

  graph::AttributeMap transpose;
  transpose.set("strides", std::vector<int64_t>{2, 3});
  EXPECT_EQ(infer("ConvTranspose", {{DType::kF32, {n, 2, h, 4}}, {DType::kF32, {2, 5, 3, 3}}}, transpose),
            "f32[n, 5, ((h * 2) + 1), 12]");

  graph::AttributeMap resize;
  resize.set("mode", "linear");
  const HostTensor scales = HostTensor::f32(Shape{4}, {1, 1, 2, 0.5f});
  EXPECT_EQ(infer("Resize", {{DType::kF32, {n, 3, h, 9}}}, resize, scales, 1), "f32[n, 3, (h * 2), 4]");
  const HostTensor odd = HostTensor::f32(Shape{4}, {1, 1, 1.5f, 1});
  EXPECT_NE(infer("Resize", {{DType::kF32, {n, 3, h, 9}}}, resize, odd, 1).find("whole number"), std::string::npos);
}

}  // namespace
}  // namespace hxrt::kernels::cpu
