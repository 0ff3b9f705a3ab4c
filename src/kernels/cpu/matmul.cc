#include "kernels/cpu/matmul.h"

#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <utility>

#include "hxrt/base/check.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/cpu/registration.h"

namespace hxrt::kernels::cpu {

std::string_view gemm_isa_name(GemmIsa isa) {
  switch (isa) {
    case GemmIsa::kScalar: return "scalar";
    case GemmIsa::kAvx2: return "avx2";
    case GemmIsa::kAvx512: return "avx512";
  }
  return "unknown";
}

bool gemm_isa_supported(GemmIsa isa) {
  switch (isa) {
    case GemmIsa::kScalar: return true;
    case GemmIsa::kAvx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case GemmIsa::kAvx512: return __builtin_cpu_supports("avx512f");
  }
  return false;
}

GemmIsa gemm_best_isa() {
  static const GemmIsa best = [] {
    if (gemm_isa_supported(GemmIsa::kAvx512)) return GemmIsa::kAvx512;
    if (gemm_isa_supported(GemmIsa::kAvx2)) return GemmIsa::kAvx2;
    return GemmIsa::kScalar;
  }();
  return best;
}

void blas_use_single_thread() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

void sgemm_blas(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i) std::fill_n(c + i * ldc, n, 0.0f);
    return;
  }
  blas_use_single_thread();
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(m), static_cast<blasint>(n),
              static_cast<blasint>(k), 1.0f, a, static_cast<blasint>(lda), b, static_cast<blasint>(ldb), 0.0f, c,
              static_cast<blasint>(ldc));
}

// ---------------------------------------------------------------------------------------------------------------
// Blocked kernel. Note [Blocked sgemm]: no packing; C is computed in (kMr rows × NR columns) register tiles that
// stream a kKc-deep slice of A's rows (broadcast) and B's rows (vector loads). The K loop is cut into kKc slices so
// the B panel (kKc × NR) stays in L1 while every row tile of the task reuses it; partial sums are carried in C. The
// row loops are unrolled by pragma: without it GCC 12 kept the accumulators on the stack (a load, an FMA and a store
// per row and vector), 2.5-3x slower, which is why OpenBLAS was the faster kernel until then.
namespace {

constexpr int64_t kKc = 256;  // depth of one K slice
constexpr int kMr = 6;        // rows per register tile (AVX2: 12 of the 16 ymm accumulate)
constexpr int kMr512 = 8;     // with AVX-512's 32 zmm: 16 accumulate (a 7-token prompt in one tile)

// B's two vectors of row p: plain loads for a whole 32-column tile; masked ones only for a partial last tile (on AMD
// Zen 5 a masked load waits for its cache lines and holds up the loads behind it, which made every B row a full
// memory latency: 70% of MiniLM's time at batch 1 went to this kernel before the split).
template <bool kFull>
__attribute__((target("avx512f,fma"))) inline __m512 load_b(const float* p, __mmask16 mask) {
  if constexpr (kFull) return _mm512_loadu_ps(p);
  return _mm512_maskz_loadu_ps(mask, p);
}

template <int R, bool kFull>
__attribute__((target("avx512f,fma"))) void tile_avx512_loop(int64_t kc, const float* a, int64_t lda, const float* b,
                                                              int64_t ldb, float* c, int64_t ldc, __mmask16 mask0,
                                                              __mmask16 mask1, bool accumulate) {
  __m512 acc0[R];
  __m512 acc1[R];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    acc0[r] = _mm512_setzero_ps();
    acc1[r] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < kc; ++p) {
    const __m512 b0 = load_b<kFull>(b + p * ldb, mask0);
    const __m512 b1 = load_b<kFull>(b + p * ldb + 16, mask1);
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(a[r * lda + p]);
      acc0[r] = _mm512_fmadd_ps(av, b0, acc0[r]);
      acc1[r] = _mm512_fmadd_ps(av, b1, acc1[r]);
    }
  }
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    float* row = c + r * ldc;
    if (accumulate) {
      acc0[r] = _mm512_add_ps(acc0[r], load_b<kFull>(row, mask0));
      acc1[r] = _mm512_add_ps(acc1[r], load_b<kFull>(row + 16, mask1));
    }
    if constexpr (kFull) {
      _mm512_storeu_ps(row, acc0[r]);
      _mm512_storeu_ps(row + 16, acc1[r]);
    } else {
      _mm512_mask_storeu_ps(row, mask0, acc0[r]);
      _mm512_mask_storeu_ps(row + 16, mask1, acc1[r]);
    }
  }
}

template <int R>
__attribute__((target("avx512f,fma"))) void tile_avx512(int64_t kc, const float* a, int64_t lda, const float* b,
                                                         int64_t ldb, float* c, int64_t ldc, int64_t cols,
                                                         bool accumulate) {
  // (R rows × 32 columns) in two zmm per row; `cols` <= 32 selects the valid columns.
  if (cols >= 32) {
    tile_avx512_loop<R, true>(kc, a, lda, b, ldb, c, ldc, __mmask16{0xFFFF}, __mmask16{0xFFFF}, accumulate);
    return;
  }
  const __mmask16 mask0 = cols >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << cols) - 1u);
  const __mmask16 mask1 = cols <= 16 ? __mmask16{0} : static_cast<__mmask16>((1u << (cols - 16)) - 1u);
  tile_avx512_loop<R, false>(kc, a, lda, b, ldb, c, ldc, mask0, mask1, accumulate);
}

__attribute__((target("avx2"))) __m256i avx2_column_mask(int64_t cols) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::clamp<int64_t>(cols, 0, 8))), lanes);
}

template <int R>
__attribute__((target("avx2,fma"))) void tile_avx2(int64_t kc, const float* a, int64_t lda, const float* b,
                                                    int64_t ldb, float* c, int64_t ldc, int64_t cols,
                                                    bool accumulate) {
  // (R rows × 16 columns) in two ymm per row; `cols` <= 16.
  const __m256i mask0 = avx2_column_mask(cols);
  const __m256i mask1 = avx2_column_mask(cols - 8);
  __m256 acc0[R];
  __m256 acc1[R];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    acc0[r] = _mm256_setzero_ps();
    acc1[r] = _mm256_setzero_ps();
  }
  for (int64_t p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_maskload_ps(b + p * ldb, mask0);
    const __m256 b1 = _mm256_maskload_ps(b + p * ldb + 8, mask1);
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + r * lda + p);
      acc0[r] = _mm256_fmadd_ps(av, b0, acc0[r]);
      acc1[r] = _mm256_fmadd_ps(av, b1, acc1[r]);
    }
  }
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    float* row = c + r * ldc;
    if (accumulate) {
      acc0[r] = _mm256_add_ps(acc0[r], _mm256_maskload_ps(row, mask0));
      acc1[r] = _mm256_add_ps(acc1[r], _mm256_maskload_ps(row + 8, mask1));
    }
    _mm256_maskstore_ps(row, mask0, acc0[r]);
    _mm256_maskstore_ps(row + 8, mask1, acc1[r]);
  }
}

void tile_scalar(int rows, int64_t kc, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                 int64_t ldc, int64_t cols, bool accumulate) {
  for (int r = 0; r < rows; ++r) {
    float* row = c + r * ldc;
    if (!accumulate) std::fill_n(row, cols, 0.0f);
    for (int64_t p = 0; p < kc; ++p) {
      const float av = a[r * lda + p];
      const float* brow = b + p * ldb;
      for (int64_t j = 0; j < cols; ++j) row[j] += av * brow[j];
    }
  }
}

using TileFn = void (*)(int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t, bool);

constexpr TileFn kAvx512Tiles[kMr512 + 1] = {nullptr,         &tile_avx512<1>, &tile_avx512<2>, &tile_avx512<3>,
                                             &tile_avx512<4>, &tile_avx512<5>, &tile_avx512<6>, &tile_avx512<7>,
                                             &tile_avx512<8>};
constexpr TileFn kAvx2Tiles[kMr + 1] = {nullptr,       &tile_avx2<1>, &tile_avx2<2>, &tile_avx2<3>,
                                        &tile_avx2<4>, &tile_avx2<5>, &tile_avx2<6>};

}  // namespace

namespace {

// C = A · B (add_to_c: C += A · B) through the register tiles.
void blocked_product(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                     float* c, int64_t ldc, GemmIsa isa, bool add_to_c) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (!add_to_c) {
      for (int64_t i = 0; i < m; ++i) std::fill_n(c + i * ldc, n, 0.0f);
    }
    return;
  }
  HXRT_CHECK(gemm_isa_supported(isa), "sgemm_blocked: ISA {} is not supported here", gemm_isa_name(isa));
  const int64_t nr = isa == GemmIsa::kAvx512 ? 32 : 16;
  for (int64_t k0 = 0; k0 < k; k0 += kKc) {
    const int64_t kc = std::min(kKc, k - k0);
    const bool accumulate = add_to_c || k0 > 0;
    for (int64_t j0 = 0; j0 < n; j0 += nr) {
      const int64_t cols = std::min(nr, n - j0);
      const int64_t mr = isa == GemmIsa::kAvx512 ? kMr512 : kMr;
      for (int64_t i0 = 0; i0 < m; i0 += mr) {
        const int rows = static_cast<int>(std::min<int64_t>(mr, m - i0));
        const float* at = a + i0 * lda + k0;
        const float* bt = b + k0 * ldb + j0;
        float* ct = c + i0 * ldc + j0;
        switch (isa) {
          case GemmIsa::kAvx512: kAvx512Tiles[rows](kc, at, lda, bt, ldb, ct, ldc, cols, accumulate); break;
          case GemmIsa::kAvx2: kAvx2Tiles[rows](kc, at, lda, bt, ldb, ct, ldc, cols, accumulate); break;
          case GemmIsa::kScalar: tile_scalar(rows, kc, at, lda, bt, ldb, ct, ldc, cols, accumulate); break;
        }
      }
    }
  }
}

}  // namespace

void sgemm_blocked(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                   float* c, int64_t ldc, GemmIsa isa) {
  blocked_product(m, n, k, a, lda, b, ldb, c, ldc, isa, /*add_to_c=*/false);
}

void sgemm_accumulate(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                      float* c, int64_t ldc) {
  blocked_product(m, n, k, a, lda, b, ldb, c, ldc, gemm_best_isa(), /*add_to_c=*/true);
}

// Note [Few-row MatMul]: with fewer rows than threads' worth of M-blocks (a transformer layer at batch 1 × 7 tokens
// is 7 rows) the M-blocks alone left one thread computing the whole product, so the tiling also splits N into
// column blocks of a multiple of the kernels' 32-column tiles. Up to kWholeRows rows are never split: B (the
// weights) is the large operand then, and every M-block reads all of it, so two 16-row blocks of a 32-row product
// read a 21 MB BERT's weights twice per run where two column blocks read each half once.
constexpr int64_t kColumnBlockUnit = 32;
constexpr int64_t kWholeRows = 64;
constexpr int64_t kMinColumnBlock = 64;

// Note [Blocked or OpenBLAS]: the blocked kernel (Note [Blocked sgemm]) keeps its register tile in registers and
// reads B in place; OpenBLAS 0.3.21 packs B on every call and runs its Haswell (AVX2) kernel on AVX-512 CPUs it does
// not know (Zen 4, Zen 5). BM_SgemmBlas vs BM_SgemmBlocked, 1 thread, Zen 5 (family 26 model 2): 512³ 127 vs 199
// GFLOP/s, 128 × 576 × 576 125 vs 209, 32 × 1536 × 384 108 vs 171, 7 × 1536 × 384 41 vs 98. With AVX2 only
// (BM_SgemmBlockedAvx2 on the same CPU) the blocked kernel is OpenBLAS's equal from 12 rows (103–110 vs 108–127)
// and ahead below 8 (78 vs 41), where packing B costs more than the few rows gain from it. So: blocked with AVX-512
// or under kBlasMinRows rows, OpenBLAS otherwise.
constexpr int64_t kBlasMinRows = 8;

void sgemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
           int64_t ldc) {
  const GemmIsa isa = gemm_best_isa();
  if (isa == GemmIsa::kAvx512 || m < kBlasMinRows) {
    sgemm_blocked(m, n, k, a, lda, b, ldb, c, ldc, isa);
  } else {
    sgemm_blas(m, n, k, a, lda, b, ldb, c, ldc);
  }
}

Result<ops::Tiling> matmul_tiling(const ops::TilingQuery& query) {
  if (query.inputs.size() < 2) return invalid_argument("matmul tiling needs two inputs");
  HXRT_ASSIGN_OR_RETURN(const MatMulGeometry g, matmul_geometry(query.inputs[0].shape, query.inputs[1].shape));
  const int64_t units = query.device != nullptr && query.device->compute_units > 0 ? query.device->compute_units : 1;
  // A few tasks per thread for balance, but at least 16 rows per task so B's panel is reused; up to kWholeRows rows
  // stay one block and N is split instead (Note [Few-row MatMul]).
  const int64_t tasks_per_batch = std::max<int64_t>(1, (4 * units + g.batch() - 1) / std::max<int64_t>(1, g.batch()));
  int64_t tile_m = std::max<int64_t>(16, (g.m + tasks_per_batch - 1) / tasks_per_batch);
  if (g.m <= kWholeRows) tile_m = g.m;
  tile_m = std::clamp<int64_t>(tile_m, 1, std::max<int64_t>(1, g.m));
  const int64_t m_blocks = (g.m + tile_m - 1) / tile_m;
  // Column blocks when the (batch × M-block) tasks would not give every thread two (Note [Few-row MatMul]).
  int64_t tile_n = std::max<int64_t>(1, g.n);
  const int64_t row_tasks = std::max<int64_t>(1, g.batch()) * m_blocks;
  if (units > 1 && row_tasks < 2 * units) {
    const int64_t splits = (2 * units + row_tasks - 1) / row_tasks;
    const int64_t cols = (g.n + splits - 1) / splits;
    tile_n = std::max(kMinColumnBlock, (cols + kColumnBlockUnit - 1) / kColumnBlockUnit * kColumnBlockUnit);
    tile_n = std::min(tile_n, std::max<int64_t>(1, g.n));
  }
  const int64_t n_blocks = (std::max<int64_t>(1, g.n) + tile_n - 1) / tile_n;
  ops::Tiling tiling;
  tiling.values = {{"tile_m", tile_m}, {"tile_n", tile_n}, {"kc", kKc}};
  tiling.launch.grid = {static_cast<uint32_t>(std::max<int64_t>(1, m_blocks * n_blocks)),
                        static_cast<uint32_t>(std::clamp<int64_t>(g.batch(), 1, UINT32_MAX)), 1};
  return tiling;
}

namespace {

Status check_f32(const ops::TensorRef& t, std::string_view what) {
  if (t.dtype != DType::kF32) return invalid_argument("{} must be f32, got {}", what, t.dtype);
  if (t.data<float>() == nullptr && t.num_elements() > 0) return invalid_argument("{} is not host-addressable", what);
  return ok_status();
}

}  // namespace

Status matmul_compute(const ops::CpuComputeContext& ctx, MatMulImpl impl, const RowBlockEpilogue* epilogue) {
  if (ctx.num_inputs() < 2) return invalid_argument("MatMul needs inputs A and B");
  const ops::TensorRef& a = ctx.input(0);
  const ops::TensorRef& b = ctx.input(1);
  const ops::TensorRef& y = ctx.output(0);
  HXRT_RETURN_IF_ERROR(check_f32(a, "input A"));
  HXRT_RETURN_IF_ERROR(check_f32(b, "input B"));
  HXRT_RETURN_IF_ERROR(check_f32(y, "output Y"));
  HXRT_ASSIGN_OR_RETURN(const MatMulGeometry g, matmul_geometry(a.shape, b.shape));
  if (!(g.out == y.shape)) return invalid_argument("MatMul output shape {} differs from expected {}", y.shape, g.out);
  if (y.num_elements() == 0) return ok_status();
  const int64_t tile_m = std::max<int64_t>(1, ctx.tiling().get("tile_m", 64));
  const int64_t tile_n = std::max<int64_t>(1, ctx.tiling().get("tile_n", g.n));
  const int64_t m_blocks = (g.m + tile_m - 1) / tile_m;
  const int64_t n_blocks = (g.n + tile_n - 1) / tile_n;
  const float* ap = a.data<float>();
  const float* bp = b.data<float>();
  float* yp = y.data<float>();
  const GemmIsa isa = gemm_best_isa();
  ctx.pool().parallel_for(g.batch() * m_blocks * n_blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t batch = task / (m_blocks * n_blocks);
      const int64_t m0 = (task / n_blocks % m_blocks) * tile_m;
      const int64_t n0 = (task % n_blocks) * tile_n;
      const int64_t rows = std::min(tile_m, g.m - m0);
      const int64_t cols = std::min(tile_n, g.n - n0);
      const float* at = ap + g.a_offsets[static_cast<size_t>(batch)] + m0 * g.k;
      const float* bt = bp + g.b_offsets[static_cast<size_t>(batch)] + n0;
      float* yt = yp + batch * g.m * g.n + m0 * g.n + n0;
      if (impl == MatMulImpl::kAuto) {
        sgemm(rows, cols, g.k, at, g.k, bt, g.n, yt, g.n);
      } else {
        sgemm_blocked(rows, cols, g.k, at, g.k, bt, g.n, yt, g.n, isa);
      }
      if (epilogue != nullptr) (*epilogue)(yt, rows, cols, g.n, n0);
    }
  });
  return ok_status();
}

// ---------------------------------------------------------------------------------------------------------------
// Gemm
namespace {

Result<std::unique_ptr<ops::KernelParams>> parse_gemm(const graph::Graph& /*graph*/, const graph::Node& node) {
  return ops::boxed(ops::parse_gemm_params(node));
}

Result<ops::Tiling> gemm_tiling(const ops::TilingQuery& query) {
  if (query.inputs.size() < 2 || query.params == nullptr) return invalid_argument("Gemm tiling needs A, B, params");
  const auto& params = query.params_as<ops::GemmParams>();
  const Shape& a = query.inputs[0].shape;
  if (a.rank() != 2) return invalid_argument("Gemm A must be 2-D, got {}", a);
  const int64_t m = params.trans_a ? a.dim(1) : a.dim(0);
  const int64_t units = query.device != nullptr && query.device->compute_units > 0 ? query.device->compute_units : 1;
  const int64_t tile_m = std::clamp<int64_t>((m + 4 * units - 1) / (4 * units), 16, std::max<int64_t>(16, m));
  ops::Tiling tiling;
  tiling.values = {{"tile_m", tile_m}};
  tiling.launch.grid = {static_cast<uint32_t>(std::max<int64_t>(1, (m + tile_m - 1) / tile_m)), 1, 1};
  return tiling;
}

Status gemm_compute(const ops::CpuComputeContext& ctx) {
  const auto& params = ctx.params<ops::GemmParams>();
  const ops::TensorRef& a = ctx.input(0);
  const ops::TensorRef& b = ctx.input(1);
  const ops::TensorRef& y = ctx.output(0);
  HXRT_RETURN_IF_ERROR(check_f32(a, "input A"));
  HXRT_RETURN_IF_ERROR(check_f32(b, "input B"));
  HXRT_RETURN_IF_ERROR(check_f32(y, "output Y"));
  if (a.shape.rank() != 2 || b.shape.rank() != 2) {
    return invalid_argument("Gemm needs 2-D A and B, got A {} and B {}", a.shape, b.shape);
  }
  const int64_t m = params.trans_a ? a.shape.dim(1) : a.shape.dim(0);
  const int64_t k = params.trans_a ? a.shape.dim(0) : a.shape.dim(1);
  const int64_t kb = params.trans_b ? b.shape.dim(1) : b.shape.dim(0);
  const int64_t n = params.trans_b ? b.shape.dim(0) : b.shape.dim(1);
  if (k != kb) return invalid_argument("Gemm inner dims differ: op(A) has K={}, op(B) has K={}", k, kb);
  if (!(y.shape == Shape{m, n})) return invalid_argument("Gemm output shape {} is not [{}, {}]", y.shape, m, n);
  // C broadcast to [m, n]: strides 0 along broadcast dims.
  const bool has_c = ctx.has_input(2) && params.beta != 0.0f;
  int64_t c_row_stride = 0;
  int64_t c_col_stride = 0;
  const float* cp = nullptr;
  if (has_c) {
    const ops::TensorRef& c = ctx.input(2);
    HXRT_RETURN_IF_ERROR(check_f32(c, "input C"));
    cp = c.data<float>();
    const int r = c.shape.rank();
    if (r > 2) return invalid_argument("Gemm C must have rank <= 2, got {}", c.shape);
    const int64_t c_rows = r == 2 ? c.shape.dim(0) : 1;
    const int64_t c_cols = r >= 1 ? c.shape.dim(-1) : 1;
    if ((c_rows != 1 && c_rows != m) || (c_cols != 1 && c_cols != n)) {
      return invalid_argument("Gemm C {} does not broadcast to [{}, {}]", c.shape, m, n);
    }
    c_row_stride = c_rows == 1 ? 0 : c_cols;
    c_col_stride = c_cols == 1 ? 0 : 1;
  }
  if (y.num_elements() == 0) return ok_status();
  const int64_t tile_m = std::max<int64_t>(1, ctx.tiling().get("tile_m", 64));
  const int64_t m_blocks = (m + tile_m - 1) / tile_m;
  const float* ap = a.data<float>();
  const float* bp = b.data<float>();
  float* yp = y.data<float>();
  blas_use_single_thread();
  ctx.pool().parallel_for(m_blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t block = begin; block < end; ++block) {
      const int64_t m0 = block * tile_m;
      const int64_t rows = std::min(tile_m, m - m0);
      float* yt = yp + m0 * n;
      float beta = 0.0f;
      if (has_c) {
        for (int64_t i = 0; i < rows; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            yt[i * n + j] = params.beta * cp[(m0 + i) * c_row_stride + j * c_col_stride];
          }
        }
        beta = 1.0f;
      }
      if (k == 0) {
        if (!has_c) std::fill_n(yt, rows * n, 0.0f);
        continue;
      }
      // Row block of op(A): rows m0.. of A, or columns m0.. of a [K, M] A.
      const float* at = params.trans_a ? ap + m0 : ap + m0 * k;
      cblas_sgemm(CblasRowMajor, params.trans_a ? CblasTrans : CblasNoTrans,
                  params.trans_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(rows), static_cast<blasint>(n),
                  static_cast<blasint>(k), params.alpha, at, static_cast<blasint>(params.trans_a ? m : k), bp,
                  static_cast<blasint>(params.trans_b ? k : n), beta, yt, static_cast<blasint>(n));
    }
  });
  return ok_status();
}

ops::KernelDef matmul_def(std::string name, int priority, MatMulImpl impl, std::string description) {
  ops::KernelDef def;
  def.op_type = "MatMul";
  def.device = hal::DeviceKind::kCpu;
  def.input_dtypes = {{DType::kF32}, {DType::kF32}};
  def.name = name;
  def.priority = priority;
  def.description = std::move(description);
  def.tiling = matmul_tiling;
  def.launch = ops::cpu_launch(std::move(name),
                               [impl](const ops::CpuComputeContext& ctx) { return matmul_compute(ctx, impl, nullptr); });
  return def;
}

}  // namespace

Status register_linear(ops::KernelRegistry& registry) {
  HXRT_RETURN_IF_ERROR(registry.add(
      matmul_def("MatMul", 10, MatMulImpl::kAuto,
                 fmt::format("per batch matrix, M- and N-block: {} (Note [Blocked or OpenBLAS])",
                             gemm_best_isa() == GemmIsa::kAvx512 ? "hxrt's blocked sgemm (avx512)"
                                                                 : "OpenBLAS sgemm, hxrt's blocked one under 8 rows"))));
  HXRT_RETURN_IF_ERROR(registry.add(matmul_def(
      "BatchMatMulV3", 5, MatMulImpl::kBlocked,
      fmt::format("hxrt cache-blocked sgemm ({} on this CPU)", gemm_isa_name(gemm_best_isa())))));

  ops::KernelDef gemm;
  gemm.op_type = "Gemm";
  gemm.device = hal::DeviceKind::kCpu;
  gemm.input_dtypes = {{DType::kF32}, {DType::kF32}, {DType::kF32}};
  gemm.name = "Gemm";
  gemm.priority = 10;
  gemm.description = "OpenBLAS sgemm with transposes, alpha/beta and a broadcast C, split over M-blocks";
  gemm.parse_attrs = parse_gemm;
  gemm.tiling = gemm_tiling;
  gemm.launch = ops::cpu_launch("Gemm", gemm_compute);
  HXRT_RETURN_IF_ERROR(registry.add(std::move(gemm)));

  return register_quant_matmul(registry);
}

}  // namespace hxrt::kernels::cpu
