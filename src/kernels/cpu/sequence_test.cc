// The sequence family's CPU kernels through the kernel harness, against double-precision references.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <numbers>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "hxrt/graph/graph.h"
#include "hxrt/ops/op_schema.h"
#include "kernels/testing/kernel_harness.h"
#include "kernels/testing/test_data.h"

namespace hxrt::kernels::cpu {
namespace {

using testing::HostTensor;
using testing::OpCall;
using testing::random_floats;
using testing::run_op;

void expect_close(const std::vector<float>& actual, const std::vector<double>& expected, double tolerance,
                  const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  EXPECT_LE(testing::normalized_max_error(actual, expected), tolerance) << what;
}

HostTensor bool_scalar(bool v) {
  return HostTensor::raw(DType::kBool, Shape{}, {std::byte{static_cast<unsigned char>(v ? 1 : 0)}});
}

// ---- RNN / GRU / LSTM -------------------------------------------------------------------------------------------

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

struct RecurrentCase {
  std::string op;  // "RNN" "GRU" "LSTM"
  std::string direction = "forward";
  int64_t seq = 3, batch = 2, input = 3, hidden = 4;
  int64_t layout = 0;
  bool bias = true, lengths = false, initial = false, peepholes = false, linear_before_reset = false;
  std::optional<double> clip;
  bool leaky_first = false;  // activations: LeakyRelu (alpha 0.3) in place of the first function
};

// A plain reference: every gate computed on its own in double, directly from the ONNX equations.
struct RecurrentReference {
  std::vector<double> y, y_h, y_c;
};

RecurrentReference recurrent_reference(const RecurrentCase& c, const std::vector<float>& x, const std::vector<float>& w,
                                       const std::vector<float>& r, const std::vector<float>& b,
                                       const std::vector<int64_t>& lens, const std::vector<float>& h0,
                                       const std::vector<float>& c0, const std::vector<float>& p) {
  const int64_t dirs = c.direction == "bidirectional" ? 2 : 1;
  const int64_t gates = c.op == "RNN" ? 1 : c.op == "GRU" ? 3 : 4;
  const int64_t rows = gates * c.hidden;
  const int64_t hn = c.hidden;
  const bool bm = c.layout == 1;
  RecurrentReference out;
  out.y.assign(static_cast<size_t>(c.seq * dirs * c.batch * hn), 0.0);
  out.y_h.assign(static_cast<size_t>(dirs * c.batch * hn), 0.0);
  out.y_c = out.y_h;
  auto clip = [&](double v) { return c.clip ? std::clamp(v, -*c.clip, *c.clip) : v; };
  auto f = [&](double v) { return c.leaky_first ? (v >= 0 ? v : 0.3 * v) : c.op == "RNN" ? std::tanh(v) : sigmoid(v); };
  auto state_at = [&](int64_t d, int64_t bb, int64_t j) { return ((bm ? bb * dirs + d : d * c.batch + bb) * hn + j); };
  for (int64_t d = 0; d < dirs; ++d) {
    const bool back = c.direction == "reverse" || d == 1;
    for (int64_t bb = 0; bb < c.batch; ++bb) {
      const int64_t len = lens.empty() ? c.seq : lens[static_cast<size_t>(bb)];
      std::vector<double> h(static_cast<size_t>(hn), 0.0), cs(static_cast<size_t>(hn), 0.0);
      for (int64_t j = 0; j < hn; ++j) {
        if (!h0.empty()) h[j] = h0[state_at(d, bb, j)];
        if (!c0.empty()) cs[j] = c0[state_at(d, bb, j)];
      }
      for (int64_t s = 0; s < len; ++s) {
        const int64_t t = back ? len - 1 - s : s;
        auto xw = [&](int64_t g) {
          double acc = b.empty() ? 0.0 : b[d * 2 * rows + g];
          for (int64_t i = 0; i < c.input; ++i) {
            acc += double{w[(d * rows + g) * c.input + i]} * x[(bm ? bb * c.seq + t : t * c.batch + bb) * c.input + i];
          }
          return acc;
        };
        auto rv = [&](int64_t g, const std::vector<double>& v) {
          double acc = b.empty() ? 0.0 : b[d * 2 * rows + rows + g];
          for (int64_t i = 0; i < hn; ++i) acc += double{r[(d * rows + g) * hn + i]} * v[i];
          return acc;
        };
        std::vector<double> nh(static_cast<size_t>(hn)), nc = cs;
        for (int64_t j = 0; j < hn; ++j) {
          if (c.op == "RNN") {
            nh[j] = f(clip(xw(j) + rv(j, h)));
          } else if (c.op == "GRU") {
            const double z = f(clip(xw(j) + rv(j, h)));
            const double rg = f(clip(xw(hn + j) + rv(hn + j, h)));
            double pre;
            if (c.linear_before_reset && c.op == "GRU") {
              pre = xw(2 * hn + j) + rg * rv(2 * hn + j, h);
            } else {
              std::vector<double> rh(static_cast<size_t>(hn));
              for (int64_t k = 0; k < hn; ++k) rh[k] = f(clip(xw(hn + k) + rv(hn + k, h))) * h[k];
              pre = xw(2 * hn + j) + rv(2 * hn + j, rh);
            }
            nh[j] = (1 - z) * std::tanh(clip(pre)) + z * h[j];
          } else {
            const double pi = p.empty() ? 0.0 : p[d * 3 * hn + j];
            const double po = p.empty() ? 0.0 : p[d * 3 * hn + hn + j];
            const double pf = p.empty() ? 0.0 : p[d * 3 * hn + 2 * hn + j];
            const double ig = f(clip(xw(j) + rv(j, h) + pi * cs[j]));
            const double fg = f(clip(xw(2 * hn + j) + rv(2 * hn + j, h) + pf * cs[j]));
            const double cg = std::tanh(clip(xw(3 * hn + j) + rv(3 * hn + j, h)));
            nc[j] = fg * cs[j] + ig * cg;
            const double og = f(clip(xw(hn + j) + rv(hn + j, h) + po * nc[j]));
            nh[j] = og * std::tanh(nc[j]);
          }
        }
        h = nh;
        cs = nc;
        for (int64_t j = 0; j < hn; ++j) {
          out.y[(bm ? (bb * c.seq + t) * dirs + d : (t * dirs + d) * c.batch + bb) * hn + j] = h[j];
        }
      }
      for (int64_t j = 0; j < hn; ++j) {
        out.y_h[state_at(d, bb, j)] = h[j];
        out.y_c[state_at(d, bb, j)] = cs[j];
      }
    }
  }
  return out;
}

void run_recurrent_case(const RecurrentCase& c, std::mt19937& rng) {
  const int64_t dirs = c.direction == "bidirectional" ? 2 : 1;
  const int64_t gates = c.op == "RNN" ? 1 : c.op == "GRU" ? 3 : 4;
  const int64_t rows = gates * c.hidden;
  const Shape x_shape = c.layout == 1 ? Shape{c.batch, c.seq, c.input} : Shape{c.seq, c.batch, c.input};
  const Shape state_shape = c.layout == 1 ? Shape{c.batch, dirs, c.hidden} : Shape{dirs, c.batch, c.hidden};
  const auto x = random_floats(x_shape.num_elements(), rng);
  const auto w = random_floats(dirs * rows * c.input, rng, -0.7f, 0.7f);
  const auto r = random_floats(dirs * rows * c.hidden, rng, -0.7f, 0.7f);
  const auto b = c.bias ? random_floats(dirs * 2 * rows, rng) : std::vector<float>();
  std::vector<int64_t> lens;
  if (c.lengths) {
    for (int64_t i = 0; i < c.batch; ++i) lens.push_back(std::max<int64_t>(1, c.seq - i));
  }
  const auto h0 = c.initial ? random_floats(state_shape.num_elements(), rng) : std::vector<float>();
  const bool lstm = c.op == "LSTM";
  const auto c0 = c.initial && lstm ? random_floats(state_shape.num_elements(), rng) : std::vector<float>();
  const auto p = c.peepholes ? random_floats(dirs * 3 * c.hidden, rng) : std::vector<float>();

  OpCall call{.op_type = c.op};
  call.attrs.set("hidden_size", c.hidden);
  call.attrs.set("direction", c.direction);
  call.attrs.set("layout", c.layout);
  if (c.clip) call.attrs.set("clip", *c.clip);
  if (c.linear_before_reset && c.op == "GRU") call.attrs.set("linear_before_reset", int64_t{1});
  if (c.leaky_first) {
    std::vector<std::string> names = c.op == "RNN"   ? std::vector<std::string>{"LeakyRelu"}
                                     : c.op == "GRU" ? std::vector<std::string>{"LeakyRelu", "Tanh"}
                                                     : std::vector<std::string>{"LeakyRelu", "Tanh", "Tanh"};
    if (dirs == 2) {
      const std::vector<std::string> once = names;
      names.insert(names.end(), once.begin(), once.end());
    }
    call.attrs.set("activations", names);
    call.attrs.set("activation_alpha", std::vector<double>(static_cast<size_t>(dirs), 0.3));
  }
  call.inputs = {HostTensor::f32(x_shape, x), HostTensor::f32(Shape{dirs, rows, c.input}, w),
                 HostTensor::f32(Shape{dirs, rows, c.hidden}, r)};
  call.inputs.push_back(c.bias ? std::optional(HostTensor::f32(Shape{dirs, 2 * rows}, b)) : std::nullopt);
  call.inputs.push_back(c.lengths ? std::optional(HostTensor::i32(Shape{c.batch},
                                                                  std::vector<int32_t>(lens.begin(), lens.end())))
                                  : std::nullopt);
  call.inputs.push_back(c.initial ? std::optional(HostTensor::f32(state_shape, h0)) : std::nullopt);
  if (lstm) {
    call.inputs.push_back(c.initial ? std::optional(HostTensor::f32(state_shape, c0)) : std::nullopt);
    call.inputs.push_back(c.peepholes ? std::optional(HostTensor::f32(Shape{dirs, 3 * c.hidden}, p)) : std::nullopt);
  }
  call.num_outputs = lstm ? 3 : 2;
  auto result = run_op(call);
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  const RecurrentReference ref = recurrent_reference(c, x, w, r, b, lens, h0, c0, p);
  const std::string what = c.op + " " + c.direction + " layout " + std::to_string(c.layout);
  expect_close(result->outputs[0].to_f32(), ref.y, 1e-5, what + " Y");
  expect_close(result->outputs[1].to_f32(), ref.y_h, 1e-5, what + " Y_h");
  if (lstm) expect_close(result->outputs[2].to_f32(), ref.y_c, 1e-5, what + " Y_c");
}

TEST(SequenceTest, RecurrentOpsAgainstReference) {
  std::mt19937 rng(7);
  for (const char* op : {"RNN", "GRU", "LSTM"}) {
    std::vector<RecurrentCase> cases;
    cases.push_back({.op = op});
    cases.push_back({.op = op, .direction = "reverse", .seq = 4, .batch = 3, .input = 5, .hidden = 3,
                     .lengths = true, .initial = true});
    cases.push_back({.op = op, .direction = "bidirectional", .seq = 5, .batch = 1, .input = 2, .hidden = 7,
                     .layout = 1, .initial = true, .peepholes = std::string(op) == "LSTM"});
    cases.push_back({.op = op, .direction = "bidirectional", .seq = 3, .batch = 3, .input = 1, .hidden = 2,
                     .bias = false, .lengths = true, .linear_before_reset = true, .clip = 0.5, .leaky_first = true});
    cases.push_back({.op = op, .seq = 1, .batch = 5, .input = 4, .hidden = 1, .layout = 1, .lengths = true,
                     .peepholes = std::string(op) == "LSTM"});
    for (const RecurrentCase& c : cases) run_recurrent_case(c, rng);
  }
}

TEST(SequenceTest, RecurrentRejectsBadAttributes) {
  OpCall call{.op_type = "GRU"};
  call.attrs.set("hidden_size", int64_t{2});
  call.attrs.set("direction", "sideways");
  call.inputs = {HostTensor::f32(Shape{1, 1, 1}, {0.5f}), HostTensor::f32(Shape{1, 6, 1}, std::vector<float>(6, 0.5f)),
                 HostTensor::f32(Shape{1, 6, 2}, std::vector<float>(12, 0.5f))};
  auto result = run_op(call);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().to_string().find("direction"), std::string::npos) << result.status().to_string();

  call.attrs.set("direction", "forward");
  call.attrs.set("activations", std::vector<std::string>{"Sigmoid", "Cosh"});
  result = run_op(call);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().to_string().find("Cosh"), std::string::npos) << result.status().to_string();

  call.attrs.erase("activations");
  call.inputs.push_back(std::nullopt);
  call.inputs.push_back(HostTensor::i64(Shape{1}, {2}));  // longer than the sequence
  result = run_op(call);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().to_string().find("sequence_lens[0] = 2"), std::string::npos)
      << result.status().to_string();
}

TEST(SequenceTest, ShapeInferenceKeepsSymbolicDims) {
  ops::OpSchemaRegistry registry;
  ASSERT_TRUE(ops::register_builtin_schemas(registry).ok());
  const graph::Dim seq = graph::Dim::symbol("seq");
  const graph::Dim batch = graph::Dim::symbol("batch");
  const graph::Dim n = graph::Dim::symbol("n");
  graph::Graph g;
  ASSERT_TRUE(g.add_input("x", {DType::kF32, {batch, seq, 3}}).ok());
  ASSERT_TRUE(g.add_input("w", {DType::kF32, {2, 12, 3}}).ok());
  ASSERT_TRUE(g.add_input("r", {DType::kF32, {2, 12, 3}}).ok());
  ASSERT_TRUE(g.add_input("signal", {DType::kF32, {batch, n, 1}}).ok());
  graph::AttributeMap lstm;
  lstm.set("hidden_size", int64_t{3});
  lstm.set("direction", "bidirectional");
  lstm.set("layout", int64_t{1});
  const std::vector<std::string> lstm_in = {"x", "w", "r"};
  const std::vector<std::string> lstm_out = {"y", "y_h", "y_c"};
  ASSERT_TRUE(g.add_node("lstm", "LSTM", lstm_in, lstm_out, lstm).ok());
  graph::AttributeMap dft;
  dft.set("onesided", int64_t{1});
  const std::vector<std::string> dft_in = {"signal"};
  const std::vector<std::string> dft_out = {"spectrum"};
  ASSERT_TRUE(g.add_node("dft", "DFT", dft_in, dft_out, dft).ok());
  std::vector<ops::DimCheck> checks;
  const Status status = registry.infer_graph(g, &checks);
  ASSERT_TRUE(status.ok()) << status.to_string();
  const auto desc = [&](const char* name) { return g.value(*g.find_value(name)).desc.shape; };
  EXPECT_EQ(desc("y"), (graph::SymShape{batch, seq, 2, 3}));
  EXPECT_EQ(desc("y_c"), (graph::SymShape{batch, 2, 3}));
  EXPECT_EQ(desc("spectrum"), (graph::SymShape{batch, n / 2 + 1, 2}));
}

// ---- DFT / STFT -------------------------------------------------------------------------------------------------

TEST(SequenceTest, DftAgainstReference) {
  struct Case {
    Shape shape;
    int64_t axis;
    bool inverse, onesided;
    std::optional<int64_t> length;
  };
  const std::vector<Case> cases = {
      {{1, 10, 10, 1}, 1, false, false, std::nullopt}, {{1, 10, 10, 1}, 2, false, false, std::nullopt},
      {{2, 7, 3, 2}, 1, true, false, std::nullopt},    {{3, 9, 1}, -2, false, true, std::nullopt},
      {{2, 5, 2}, 1, false, false, 8},                 {{2, 6, 4, 2}, 2, false, true, 3},
  };
  std::mt19937 rng(11);
  for (const Case& c : cases) {
    const auto x = random_floats(c.shape.num_elements(), rng);
    OpCall call{.op_type = "DFT"};
    call.attrs.set("axis", c.axis);
    call.attrs.set("inverse", int64_t{c.inverse});
    call.attrs.set("onesided", int64_t{c.onesided});
    call.inputs = {HostTensor::f32(c.shape, x)};
    if (c.length) {
      call.inputs.push_back(HostTensor::i64(Shape{}, {*c.length}));
      call.constant_inputs = {1};
    }
    auto result = run_op(call);
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    const int rank = c.shape.rank();
    const int axis = static_cast<int>(c.axis < 0 ? c.axis + rank : c.axis);
    const int64_t n = c.shape.dim(axis);
    const int64_t len = c.length.value_or(n);
    const int64_t bins = c.onesided ? len / 2 + 1 : len;
    const int64_t comps = c.shape.dim(-1);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; ++d) outer *= c.shape.dim(d);
    for (int d = axis + 1; d < rank - 1; ++d) inner *= c.shape.dim(d);
    std::vector<double> expected(static_cast<size_t>(outer * bins * inner * 2));
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        for (int64_t k = 0; k < bins; ++k) {
          std::complex<double> sum = 0.0;
          for (int64_t j = 0; j < std::min(n, len); ++j) {
            const int64_t at = ((o * n + j) * inner + i) * comps;
            const std::complex<double> v(x[at], comps == 2 ? x[at + 1] : 0.0);
            const double angle = (c.inverse ? 2.0 : -2.0) * std::numbers::pi * static_cast<double>(j * k) /
                                 static_cast<double>(len);
            sum += v * std::polar(1.0, angle);
          }
          if (c.inverse) sum /= static_cast<double>(len);
          const int64_t at = ((o * bins + k) * inner + i) * 2;
          expected[at] = sum.real();
          expected[at + 1] = sum.imag();
        }
      }
    }
    expect_close(result->outputs[0].to_f32(), expected, 1e-5, "DFT " + c.shape.to_string());
  }
}

TEST(SequenceTest, DftRejectsBadAxis) {
  OpCall call{.op_type = "DFT"};
  call.attrs.set("axis", int64_t{2});
  call.inputs = {HostTensor::f32(Shape{2, 3, 1}, {1, 2, 3, 4, 5, 6})};
  auto result = run_op(call);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().to_string().find("axis"), std::string::npos) << result.status().to_string();
}

TEST(SequenceTest, StftAgainstReference) {
  std::mt19937 rng(5);
  struct Case {
    int64_t batch, length, comps, step, frame;
    bool window, onesided;
  };
  for (const Case& c : std::vector<Case>{{1, 128, 1, 8, 16, true, true},
                                         {2, 37, 1, 5, 9, false, true},
                                         {1, 20, 2, 3, 6, true, false}}) {
    const auto x = random_floats(c.batch * c.length * c.comps, rng);
    const auto win = random_floats(c.frame, rng, 0.1f, 1.0f);
    OpCall call{.op_type = "STFT"};
    call.attrs.set("onesided", int64_t{c.onesided});
    call.inputs = {HostTensor::f32(Shape{c.batch, c.length, c.comps}, x), HostTensor::i64(Shape{}, {c.step})};
    call.inputs.push_back(c.window ? std::optional(HostTensor::f32(Shape{c.frame}, win)) : std::nullopt);
    call.inputs.push_back(HostTensor::i64(Shape{}, {c.frame}));
    call.constant_inputs = {1, 3};
    auto result = run_op(call);
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    const int64_t frames = 1 + (c.length - c.frame) / c.step;
    const int64_t bins = c.onesided ? c.frame / 2 + 1 : c.frame;
    std::vector<double> expected;
    for (int64_t b = 0; b < c.batch; ++b) {
      for (int64_t f = 0; f < frames; ++f) {
        for (int64_t k = 0; k < bins; ++k) {
          std::complex<double> sum = 0.0;
          for (int64_t j = 0; j < c.frame; ++j) {
            const int64_t at = (b * c.length + f * c.step + j) * c.comps;
            const std::complex<double> v(x[at], c.comps == 2 ? x[at + 1] : 0.0);
            sum += v * (c.window ? double{win[j]} : 1.0) *
                   std::polar(1.0, -2.0 * std::numbers::pi * static_cast<double>(j * k) / static_cast<double>(c.frame));
          }
          expected.push_back(sum.real());
          expected.push_back(sum.imag());
        }
      }
    }
    expect_close(result->outputs[0].to_f32(), expected, 1e-5, "STFT");
  }
}

// ---- Det --------------------------------------------------------------------------------------------------------

double det_reference(const std::vector<double>& a, int64_t m) {  // Laplace expansion along the first row
  if (m == 1) return a[0];
  double det = 0.0;
  for (int64_t col = 0; col < m; ++col) {
    std::vector<double> minor;
    for (int64_t i = 1; i < m; ++i) {
      for (int64_t j = 0; j < m; ++j) {
        if (j != col) minor.push_back(a[i * m + j]);
      }
    }
    det += (col % 2 == 0 ? 1.0 : -1.0) * a[col] * det_reference(minor, m - 1);
  }
  return det;
}

TEST(SequenceTest, DetAgainstReference) {
  std::mt19937 rng(3);
  for (const Shape& shape : std::vector<Shape>{{2, 2}, {3, 2, 2}, {2, 3, 5, 5}, {1, 1}, {4, 3, 3}}) {
    const auto x = random_floats(shape.num_elements(), rng);
    OpCall call{.op_type = "Det"};
    call.inputs = {HostTensor::f32(shape, x)};
    auto result = run_op(call);
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    const int64_t m = shape.dim(-1);
    std::vector<double> expected;
    for (int64_t i = 0; i < shape.num_elements() / (m * m); ++i) {
      expected.push_back(det_reference(std::vector<double>(x.begin() + i * m * m, x.begin() + (i + 1) * m * m), m));
    }
    expect_close(result->outputs[0].to_f32(), expected, 1e-5, "Det " + shape.to_string());
  }
  OpCall bad{.op_type = "Det"};
  bad.inputs = {HostTensor::f32(Shape{2, 3}, {1, 2, 3, 4, 5, 6})};
  EXPECT_FALSE(run_op(bad).ok());
}

// ---- NonMaxSuppression ------------------------------------------------------------------------------------------

TEST(SequenceTest, NonMaxSuppressionSelectsByScoreAndIou) {
  // Two batches of six boxes (corner format, one flipped), two classes; box 0/1/2 overlap, 3/4 overlap.
  const std::vector<float> one = {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 1, 0.9f, 0, -0.1f, 0, 10, 1, 11, 0, 10.1f, 1, 11.1f,
                                  0, 100, 1, 101};
  std::vector<float> boxes = one;
  boxes.insert(boxes.end(), one.begin(), one.end());
  const std::vector<float> scores = {0.9f, 0.75f, 0.6f, 0.95f, 0.5f, 0.3f,   // batch 0 class 0
                                     0.1f, 0.2f,  0.3f, 0.4f,  0.5f, 0.6f,   // batch 0 class 1
                                     0.9f, 0.75f, 0.6f, 0.95f, 0.5f, 0.3f,   // batch 1 class 0
                                     0.6f, 0.5f,  0.4f, 0.3f,  0.2f, 0.1f};  // batch 1 class 1
  struct Case {
    int64_t max_out;
    float iou, score;
    bool center;
    std::vector<int64_t> expected;
  };
  const std::vector<Case> cases = {
      {3, 0.5f, 0.0f, false, {0, 0, 3, 0, 0, 0, 0, 0, 5, 0, 1, 5, 0, 1, 4, 0, 1, 2,
                              1, 0, 3, 1, 0, 0, 1, 0, 5, 1, 1, 0, 1, 1, 3, 1, 1, 5}},
      {2, 0.5f, 0.45f, false, {0, 0, 3, 0, 0, 0, 0, 1, 5, 0, 1, 4, 1, 0, 3, 1, 0, 0, 1, 1, 0}},
      {0, 0.5f, 0.0f, false, {}},
  };
  for (const Case& c : cases) {
    OpCall call{.op_type = "NonMaxSuppression"};
    call.inputs = {HostTensor::f32(Shape{2, 6, 4}, boxes), HostTensor::f32(Shape{2, 2, 6}, scores),
                   HostTensor::i64(Shape{1}, {c.max_out}), HostTensor::f32(Shape{1}, {c.iou}),
                   HostTensor::f32(Shape{1}, {c.score})};
    call.constant_inputs = {0, 1, 2, 3, 4};
    auto result = run_op(call);
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    EXPECT_EQ(result->outputs[0].shape, (Shape{static_cast<int64_t>(c.expected.size() / 3), 3}));
    EXPECT_EQ(result->outputs[0].to_i64(), c.expected) << "max " << c.max_out << " score " << c.score;
  }
  // Center format: the same first three boxes as (x_center, y_center, width, height).
  OpCall center{.op_type = "NonMaxSuppression"};
  center.attrs.set("center_point_box", int64_t{1});
  center.inputs = {HostTensor::f32(Shape{1, 3, 4}, {0.5f, 0.5f, 1, 1, 0.5f, 0.6f, 1, 1, 0.5f, 10.5f, 1, 1}),
                   HostTensor::f32(Shape{1, 1, 3}, {0.9f, 0.95f, 0.5f}), HostTensor::i64(Shape{1}, {5}),
                   HostTensor::f32(Shape{1}, {0.5f})};
  center.constant_inputs = {0, 1, 2, 3};
  auto result = run_op(center);
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  EXPECT_EQ(result->outputs[0].to_i64(), (std::vector<int64_t>{0, 0, 1, 0, 0, 2}));

  // Boxes that are not constants cannot be planned; the message names the input.
  OpCall dynamic = center;
  dynamic.constant_inputs = {1, 2, 3};
  auto failed = run_op(dynamic);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().to_string().find("'boxes'"), std::string::npos) << failed.status().to_string();
  dynamic.constant_inputs = {0, 1, 2, 3};
  dynamic.attrs.set("center_point_box", int64_t{2});
  EXPECT_FALSE(run_op(dynamic).ok());
}

// ---- Losses -----------------------------------------------------------------------------------------------------

struct LossCase {
  Shape input;
  std::string reduction;
  std::optional<int64_t> ignore_index;
  bool weight;
};

TEST(SequenceTest, LossesAgainstReference) {
  const std::vector<LossCase> cases = {
      {{3, 5}, "none", std::nullopt, false},   {{3, 5, 2}, "mean", 1, false},  {{3, 5, 6}, "mean", -1, true},
      {{2, 4, 3, 2}, "sum", 0, true},          {{3, 5, 2, 1, 3}, "none", 2, true}, {{1, 7}, "mean", std::nullopt, true},
      {{4, 3, 7}, "sum", std::nullopt, false},
  };
  std::mt19937 rng(9);
  for (bool softmax : {false, true}) {
    for (const LossCase& c : cases) {
      const int64_t n = c.input.dim(0);
      const int64_t classes = c.input.dim(1);
      const int64_t rest = c.input.num_elements() / (n * classes);
      std::vector<int64_t> target_dims = {n};
      for (int d = 2; d < c.input.rank(); ++d) target_dims.push_back(c.input.dim(d));
      const Shape target_shape = *Shape::make(target_dims);
      const auto x = random_floats(c.input.num_elements(), rng, -2.0f, 2.0f);
      const auto w = random_floats(classes, rng, 0.2f, 1.5f);
      std::uniform_int_distribution<int64_t> pick(0, classes - 1);
      std::vector<int64_t> target(static_cast<size_t>(n * rest));
      for (size_t i = 0; i < target.size(); ++i) {
        target[i] = pick(rng);
        if (c.ignore_index && i % 3 == 1) target[i] = *c.ignore_index;
      }
      OpCall call{.op_type = softmax ? "SoftmaxCrossEntropyLoss" : "NegativeLogLikelihoodLoss"};
      call.attrs.set("reduction", c.reduction);
      if (c.ignore_index) call.attrs.set("ignore_index", *c.ignore_index);
      call.inputs = {HostTensor::f32(c.input, x), HostTensor::i64(target_shape, target)};
      if (c.weight) call.inputs.push_back(HostTensor::f32(Shape{classes}, w));
      call.num_outputs = softmax ? 2 : 1;
      auto result = run_op(call);
      ASSERT_TRUE(result.ok()) << result.status().to_string();

      std::vector<double> lp(x.begin(), x.end());
      if (softmax) {
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t k = 0; k < rest; ++k) {
            double sum = 0.0;
            for (int64_t j = 0; j < classes; ++j) sum += std::exp(double{x[(i * classes + j) * rest + k]});
            for (int64_t j = 0; j < classes; ++j) lp[(i * classes + j) * rest + k] -= std::log(sum);
          }
        }
      }
      std::vector<double> losses;
      double total = 0.0, total_w = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t k = 0; k < rest; ++k) {
          const int64_t t = target[i * rest + k];
          if (c.ignore_index && t == *c.ignore_index) {
            losses.push_back(0.0);
            continue;
          }
          const double wt = c.weight ? w[t] : 1.0;
          losses.push_back(-lp[(i * classes + t) * rest + k] * wt);
          total += losses.back();
          total_w += wt;
        }
      }
      const std::vector<double> expected = c.reduction == "none" ? losses
                                           : c.reduction == "sum" ? std::vector<double>{total}
                                                                  : std::vector<double>{total / total_w};
      const std::string what = call.op_type + " " + c.input.to_string() + " " + c.reduction;
      expect_close(result->outputs[0].to_f32(), expected, 1e-5, what);
      if (softmax) expect_close(result->outputs[1].to_f32(), lp, 1e-5, what + " log_prob");
    }
  }
}

TEST(SequenceTest, LossesRejectBadReductionAndTargets) {
  OpCall call{.op_type = "NegativeLogLikelihoodLoss"};
  call.attrs.set("reduction", "avg");
  call.inputs = {HostTensor::f32(Shape{2, 3}, {-1, -2, -3, -4, -5, -6}), HostTensor::i64(Shape{2}, {0, 2})};
  auto result = run_op(call);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().to_string().find("reduction"), std::string::npos) << result.status().to_string();

  call.attrs.set("reduction", "sum");
  call.inputs[1] = HostTensor::i64(Shape{2}, {0, 3});
  result = run_op(call);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().to_string().find("target[1] = 3"), std::string::npos) << result.status().to_string();
}

// ---- Dropout ----------------------------------------------------------------------------------------------------

TEST(SequenceTest, DropoutIsTheIdentityInInference) {
  std::mt19937 rng(2);
  const Shape shape{3, 4, 5};
  const auto x = random_floats(shape.num_elements(), rng);
  OpCall call{.op_type = "Dropout"};
  call.attrs.set("seed", int64_t{0});
  call.inputs = {HostTensor::f32(shape, x), HostTensor::f32(Shape{}, {0.3f}), bool_scalar(false)};
  call.num_outputs = 2;
  auto result = run_op(call);
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  EXPECT_EQ(result->outputs[0].to_f32(), x);
  EXPECT_EQ(result->outputs[1].dtype, DType::kBool);
  EXPECT_EQ(result->outputs[1].to_i64(), std::vector<int64_t>(static_cast<size_t>(shape.num_elements()), 1));

  call.inputs[2] = bool_scalar(true);
  result = run_op(call);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().to_string().find("training_mode"), std::string::npos) << result.status().to_string();

  call.attrs.set("seed", "zero");
  call.inputs[2] = std::nullopt;
  EXPECT_FALSE(run_op(call).ok());
}

}  // namespace
}  // namespace hxrt::kernels::cpu
