#include "kernels/cpu/matmul.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kernels/testing/kernel_harness.h"

namespace hxrt::kernels::cpu {
namespace {

using testing::HostTensor;
using testing::OpCall;
using testing::run_op;

std::vector<float> random_floats(int64_t count, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = dist(rng);
  return v;
}

// Tolerance for f32 GEMM against double: normalised max error (see normalized_max_error) of 1e-5 covers float
// accumulation over K up to a few thousand.
constexpr double kTolerance = 1e-5;

struct GemmShape {
  int64_t m, n, k;
};
constexpr GemmShape kShapes[] = {{1, 1, 1}, {7, 33, 65}, {130, 65, 257}, {6, 32, 256}, {13, 1, 300}, {5, 130, 7}};

TEST(SgemmTest, BlockedAndBlasMatchDoubleWithLeadingDimensions) {
  std::mt19937 rng(1);
  for (const GemmShape& s : kShapes) {
    const int64_t lda = s.k + 3;
    const int64_t ldb = s.n + 5;
    const int64_t ldc = s.n + 2;
    const std::vector<float> a = random_floats(s.m * lda, rng);
    const std::vector<float> b = random_floats(s.k * ldb, rng);
    std::vector<double> expected(static_cast<size_t>(s.m * s.n));
    for (int64_t i = 0; i < s.m; ++i) {
      for (int64_t j = 0; j < s.n; ++j) {
        double sum = 0.0;
        for (int64_t p = 0; p < s.k; ++p) sum += double{a[static_cast<size_t>(i * lda + p)]} * b[static_cast<size_t>(p * ldb + j)];
        expected[static_cast<size_t>(i * s.n + j)] = sum;
      }
    }
    const auto check = [&](const std::vector<float>& c, const std::string& what) {
      std::vector<float> packed(static_cast<size_t>(s.m * s.n));
      for (int64_t i = 0; i < s.m; ++i) {
        for (int64_t j = 0; j < ldc; ++j) {
          const float v = c[static_cast<size_t>(i * ldc + j)];
          if (j < s.n) {
            packed[static_cast<size_t>(i * s.n + j)] = v;
          } else {
            EXPECT_EQ(v, 1234.5f) << what << ": wrote past n at row " << i;
          }
        }
      }
      EXPECT_LE(testing::normalized_max_error(packed, expected), kTolerance)
          << what << " m=" << s.m << " n=" << s.n << " k=" << s.k;
    };
    for (GemmIsa isa : {GemmIsa::kScalar, GemmIsa::kAvx2, GemmIsa::kAvx512}) {
      if (!gemm_isa_supported(isa)) continue;
      std::vector<float> c(static_cast<size_t>(s.m * ldc), 1234.5f);
      for (int64_t i = 0; i < s.m; ++i) std::fill_n(c.begin() + i * ldc, s.n, std::nanf(""));
      sgemm_blocked(s.m, s.n, s.k, a.data(), lda, b.data(), ldb, c.data(), ldc, isa);
      check(c, std::string(gemm_isa_name(isa)));
    }
    std::vector<float> c(static_cast<size_t>(s.m * ldc), 1234.5f);
    for (int64_t i = 0; i < s.m; ++i) std::fill_n(c.begin() + i * ldc, s.n, std::nanf(""));
    sgemm_blas(s.m, s.n, s.k, a.data(), lda, b.data(), ldb, c.data(), ldc);
    check(c, "blas");
  }
}

TEST(MatMulGeometryTest, BroadcastsBatchAndHandlesVectors) {
  auto g = matmul_geometry(Shape{2, 1, 3, 4}, Shape{5, 4, 6});
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(g->out, (Shape{2, 5, 3, 6}));
  ASSERT_EQ(g->batch(), 10);
  // Output batch (1, 3): A batch 1 (its dim of 5 broadcasts), B batch 3.
  EXPECT_EQ(g->a_offsets[8], 1 * 3 * 4);
  EXPECT_EQ(g->b_offsets[8], 3 * 4 * 6);
  EXPECT_EQ(matmul_geometry(Shape{4}, Shape{4, 6})->out, (Shape{6}));
  EXPECT_EQ(matmul_geometry(Shape{2, 3, 4}, Shape{4})->out, (Shape{2, 3}));
  EXPECT_EQ(matmul_geometry(Shape{4}, Shape{4})->out, Shape{});
  EXPECT_EQ(matmul_geometry(Shape{3, 4}, Shape{5, 6}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(matmul_geometry(Shape{2, 3, 4}, Shape{3, 4, 6}).status().code(), StatusCode::kInvalidArgument);
}

// numpy matmul in double on shapes that matmul_geometry accepts.
std::vector<double> reference_matmul(const std::vector<float>& a, const Shape& as, const std::vector<float>& b,
                                     const Shape& bs) {
  const MatMulGeometry g = matmul_geometry(as, bs).value();
  std::vector<double> y(static_cast<size_t>(g.out.num_elements()));
  for (int64_t batch = 0; batch < g.batch(); ++batch) {
    for (int64_t i = 0; i < g.m; ++i) {
      for (int64_t j = 0; j < g.n; ++j) {
        double sum = 0.0;
        for (int64_t p = 0; p < g.k; ++p) {
          sum += double{a[static_cast<size_t>(g.a_offsets[static_cast<size_t>(batch)] + i * g.k + p)]} *
                 b[static_cast<size_t>(g.b_offsets[static_cast<size_t>(batch)] + p * g.n + j)];
        }
        y[static_cast<size_t>((batch * g.m + i) * g.n + j)] = sum;
      }
    }
  }
  return y;
}

struct MatMulCase {
  Shape a;
  Shape b;
  Shape out;
};

TEST(MatMulOpTest, BothImplementationsMatchDoubleReference) {
  const MatMulCase cases[] = {
      {Shape{7, 33}, Shape{33, 65}, Shape{7, 65}},
      {Shape{1, 1}, Shape{1, 1}, Shape{1, 1}},
      {Shape{130, 257}, Shape{257, 65}, Shape{130, 65}},
      {Shape{2, 1, 5, 33}, Shape{3, 33, 7}, Shape{2, 3, 5, 7}},
      {Shape{4, 9, 16}, Shape{1, 16, 130}, Shape{4, 9, 130}},
      {Shape{33}, Shape{33, 7}, Shape{7}},
      {Shape{4, 5, 33}, Shape{33}, Shape{4, 5}},
  };
  std::mt19937 rng(9);
  for (const MatMulCase& c : cases) {
    const std::vector<float> a = random_floats(c.a.num_elements(), rng);
    const std::vector<float> b = random_floats(c.b.num_elements(), rng);
    const std::vector<double> expected = reference_matmul(a, c.a, b, c.b);
    for (const char* kernel : {"MatMul", "BatchMatMulV3"}) {
      OpCall call;
      call.op_type = "MatMul";
      call.inputs = {HostTensor::f32(c.a, a), HostTensor::f32(c.b, b)};
      call.force_kernel = kernel;
      auto result = run_op(call);
      ASSERT_TRUE(result.ok()) << kernel << " " << c.a.to_string() << " x " << c.b.to_string() << ": " << result.status().to_string();
      EXPECT_EQ(result->kernel, kernel);
      EXPECT_EQ(result->outputs[0].shape, c.out) << kernel;
      EXPECT_LE(testing::normalized_max_error(result->outputs[0].to_f32(), expected), kTolerance)
          << kernel << " " << c.a.to_string() << " x " << c.b.to_string();
    }
  }
}

TEST(MatMulOpTest, ArbitrationPrefersBlasAndSchemaRejectsMismatchedK) {
  std::mt19937 rng(4);
  OpCall call;
  call.op_type = "MatMul";
  call.inputs = {HostTensor::random_f32(Shape{3, 8}, rng), HostTensor::random_f32(Shape{8, 5}, rng)};
  auto chosen = run_op(call);
  ASSERT_TRUE(chosen.ok()) << chosen.status().to_string();
  EXPECT_EQ(chosen->kernel, "MatMul");

  call.inputs[1] = HostTensor::random_f32(Shape{9, 5}, rng);
  auto mismatched = run_op(call);
  ASSERT_FALSE(mismatched.ok());
  EXPECT_EQ(mismatched.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mismatched.status().to_string().find("inner dim K"), std::string::npos) << mismatched.status().to_string();

  call.inputs[1] = HostTensor::i64(Shape{8, 5}, std::vector<int64_t>(40, 1));
  auto wrong_type = run_op(call);
  ASSERT_FALSE(wrong_type.ok());
  EXPECT_NE(wrong_type.status().to_string().find("'B'"), std::string::npos) << wrong_type.status().to_string();
}

struct GemmCase {
  bool trans_a;
  bool trans_b;
  float alpha;
  float beta;
  std::optional<Shape> c;  // broadcast to [m, n]
};

TEST(GemmOpTest, TransposesAlphaBetaAndBroadcastC) {
  const int64_t m = 7;
  const int64_t n = 33;
  const int64_t k = 65;
  const GemmCase cases[] = {
      {false, false, 1.0f, 1.0f, std::nullopt}, {true, false, 0.5f, 2.0f, Shape{n}},
      {false, true, 1.5f, -1.0f, Shape{m, 1}},  {true, true, 1.0f, 0.5f, Shape{m, n}},
      {false, false, 2.0f, 3.0f, Shape{}},       {false, true, 1.0f, 1.0f, Shape{1, n}},
  };
  std::mt19937 rng(12);
  for (const GemmCase& gc : cases) {
    const Shape as = gc.trans_a ? Shape{k, m} : Shape{m, k};
    const Shape bs = gc.trans_b ? Shape{n, k} : Shape{k, n};
    const std::vector<float> a = random_floats(as.num_elements(), rng);
    const std::vector<float> b = random_floats(bs.num_elements(), rng);
    std::vector<float> c;
    if (gc.c) c = random_floats(gc.c->num_elements(), rng);
    std::vector<double> expected(static_cast<size_t>(m * n));
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0.0;
        for (int64_t p = 0; p < k; ++p) {
          const double av = a[static_cast<size_t>(gc.trans_a ? p * m + i : i * k + p)];
          const double bv = b[static_cast<size_t>(gc.trans_b ? j * k + p : p * n + j)];
          sum += av * bv;
        }
        double cv = 0.0;
        if (gc.c) {
          const int r = gc.c->rank();
          const int64_t rows = r == 2 ? gc.c->dim(0) : 1;
          const int64_t cols = r >= 1 ? gc.c->dim(-1) : 1;
          cv = c[static_cast<size_t>((rows == 1 ? 0 : i) * cols + (cols == 1 ? 0 : j))];
        }
        expected[static_cast<size_t>(i * n + j)] = gc.alpha * sum + gc.beta * cv;
      }
    }
    OpCall call;
    call.op_type = "Gemm";
    call.attrs.set("alpha", gc.alpha);
    call.attrs.set("beta", gc.beta);
    call.attrs.set("transA", int64_t{gc.trans_a});
    call.attrs.set("transB", int64_t{gc.trans_b});
    call.inputs = {HostTensor::f32(as, a), HostTensor::f32(bs, b)};
    if (gc.c) call.inputs.push_back(HostTensor::f32(*gc.c, c));
    auto result = run_op(call);
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    EXPECT_EQ(result->outputs[0].shape, (Shape{m, n}));
    EXPECT_LE(testing::normalized_max_error(result->outputs[0].to_f32(), expected), kTolerance)
        << "transA=" << gc.trans_a << " transB=" << gc.trans_b;
  }
}

TEST(GemmOpTest, SchemaRejectsCThatDoesNotBroadcast) {
  std::mt19937 rng(2);
  OpCall call;
  call.op_type = "Gemm";
  call.inputs = {HostTensor::random_f32(Shape{4, 3}, rng), HostTensor::random_f32(Shape{3, 5}, rng),
                 HostTensor::random_f32(Shape{4, 2}, rng)};
  auto result = run_op(call);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument) << result.status().to_string();
}

}  // namespace
}  // namespace hxrt::kernels::cpu
