// Dense f32 matrix multiplication on the CPU: MatMul (two implementations for arbitration) and Gemm.
//
//   "MatMul"         (priority 10): sgemm below per batch matrix, M-block and N-block: hxrt's blocked kernel on
//                                   AVX-512 CPUs and for few rows, OpenBLAS cblas_sgemm otherwise.
//   "BatchMatMulV3"  (priority 5):  hxrt's own cache-blocked kernel (AVX-512 / AVX2+FMA, scalar fallback) always.
//   "Gemm"           (priority 10): cblas_sgemm with transA/transB, alpha, beta and a broadcast C.
//
// Both MatMul implementations split the work into (batch × M-block) tasks over the device's intra-op pool; OpenBLAS
// itself is kept single-threaded (blas_use_single_thread) so its threads and ours never oversubscribe the cores.
//
// The pure functions below take pointers and leading dimensions (row-major, in elements) so tests and the fused
// kernels (MatMulBias) reuse them.
//
// Thread-safety: every function is reentrant; concurrent calls on disjoint outputs are safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "hxrt/base/shape.h"
#include "hxrt/base/status.h"
#include "hxrt/ops/kernel_def.h"
#include "hxrt/ops/params/linear.h"

namespace hxrt::kernels::cpu {

// Instruction sets of the blocked kernel; kScalar runs everywhere.
enum class GemmIsa : uint8_t { kScalar, kAvx2, kAvx512 };
std::string_view gemm_isa_name(GemmIsa isa);
bool gemm_isa_supported(GemmIsa isa);
GemmIsa gemm_best_isa();  // the widest supported ISA (detected once)

// Calls openblas_set_num_threads(1) once per process; every BLAS user of this library calls it before BLAS work.
void blas_use_single_thread();

// C[m, n] = A[m, k] · B[k, n], row-major with leading dimensions lda/ldb/ldc; C is overwritten (k == 0 gives 0).
void sgemm_blas(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                int64_t ldc);
void sgemm_blocked(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                   float* c, int64_t ldc, GemmIsa isa = gemm_best_isa());
// C[m, n] += A[m, k] · B[k, n] with the blocked kernel (the best ISA here).
void sgemm_accumulate(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                      float* c, int64_t ldc);

// MatMul's geometry and Gemm's params are the ops' (hxrt/ops/params/linear.h).
using ops::matmul_geometry;
using ops::MatMulGeometry;

// C = A · B (as sgemm_blas) with whichever of the two kernels is the faster for this CPU and row count (Note
// [Blocked or OpenBLAS] in matmul.cc): the blocked kernel on CPUs with AVX-512 and for fewer than 8 rows, OpenBLAS
// otherwise.
void sgemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
           int64_t ldc);

// kAuto: sgemm (the "MatMul" kernel); kBlocked: always the blocked kernel ("BatchMatMulV3").
enum class MatMulImpl : uint8_t { kAuto, kBlocked };

// Runs numpy matmul of ctx.input(0) × ctx.input(1) into ctx.output(0) as (batch × M-block × N-block) pool tasks,
// using the tiling values "tile_m" and "tile_n" (N is split only when the M-blocks alone would leave threads idle:
// Note [Few-row MatMul] in matmul.cc). `epilogue`, when set, is applied to each finished block (rows × cols at c,
// leading dimension ldc, its first column col0 of N) by the task that computed it, while the block is still in cache
// (MatMulBias uses it).
using RowBlockEpilogue = std::function<void(float* c, int64_t rows, int64_t cols, int64_t ldc, int64_t col0)>;
Status matmul_compute(const ops::CpuComputeContext& ctx, MatMulImpl impl, const RowBlockEpilogue* epilogue);

// Tiling shared by MatMul-like kernels: tile_m sized so that the pool gets a few tasks per thread.
Result<ops::Tiling> matmul_tiling(const ops::TilingQuery& query);

}  // namespace hxrt::kernels::cpu
