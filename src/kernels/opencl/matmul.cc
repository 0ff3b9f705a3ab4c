// OpenCL dense f32 matrix products: MatMul (numpy batching and broadcasting, rank-1 operands as in numpy), Gemm
// (transA/transB, alpha, beta, a C broadcast to [M, N]) and the fused MatMulBias (bias and Gelu in the epilogue).
//
// All three run one tiled kernel, `gemm`: a work-group of TILE × TILE work-items owns a TILE × TILE block of Y; for
// each TILE-deep slice of K the group stages the slice of op(A) and of op(B) in local memory, then every work-item
// accumulates its output (fma, as the CPU's BLAS) from local memory. Transposes are strides (A(i, k) is read at
// a[i·a_rs + k·a_cs]), and the batch dims, merged as in elementwise.cc to at most four, give each batch's offsets,
// so one program (per TILE) serves every op, layout and epilogue. The epilogue is y = alpha·acc (+ beta·C) then the
// activation; with alpha = beta = 1 that is the CPU's MatMul(+bias) exactly, and the results differ from the
// CPU's only in the order of the K sums (normalised error ~1e-7).
//
// TILE comes from the tiling: 16, or 8 when M or N is below 16 (a decode row, a narrow classifier head).
#include <algorithm>
#include <array>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "hxrt/ops/params/linear.h"
#include "kernels/opencl/jit_program.h"
#include "kernels/opencl/registration.h"

namespace hxrt::kernels::opencl {
namespace {

constexpr int64_t kLargeTile = 16;
constexpr int64_t kSmallTile = 8;
constexpr int kMaxBatchRank = kMaxMergedDims;  // merged batch dims

constexpr std::string_view kSource = R"CLC(
#ifndef TILE
#define TILE 16
#endif
#define ACT_NONE 0
#define ACT_GELU 1
#define ACT_GELU_TANH 2

// Y[b](i, j) = act(alpha · Σ_k A[b](i, k) · B[b](k, j) (+ beta · C(i, j))) for Y [batch, m, n] contiguous.
// ab_strides: A's row and column strides, then B's (in elements). The batch index (grid dim 2) is decomposed in
// batch_dims (outermost first) and stepped by batch_a / batch_b. epilogue: bit 0 = add beta·C at
// c[i·c_strides.x + j·c_strides.y]; bits 1.. = the activation.
__kernel void gemm(__global const uchar* a_buf, ulong a_off, __global const uchar* b_buf, ulong b_off,
                   __global const uchar* c_buf, ulong c_off, __global uchar* y_buf, ulong y_off, int m, int n, int k,
                   int4 ab_strides, int4 batch_dims, int4 batch_a, int4 batch_b, float alpha, float beta,
                   int2 c_strides, int epilogue, __global volatile int* ctl) {
  __local float a_tile[TILE][TILE + 1];  // (i, k) of the current K slice
  __local float b_tile[TILE][TILE + 1];  // (k, j)
  __local int stop;
  const int li = get_local_id(1);
  const int lj = get_local_id(0);
  const int i = get_group_id(1) * TILE + li;
  const int j = get_group_id(0) * TILE + lj;
  const int batch = get_group_id(2);
  if (li == 0 && lj == 0) stop = ctl[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  if (stop != 0) {
    if (li == 0 && lj == 0) ctl[1] = HX_ABORTED;
    return;
  }
  const int4 coords = (int4)(batch / (batch_dims.y * batch_dims.z * batch_dims.w),
                             batch / (batch_dims.z * batch_dims.w) % batch_dims.y, batch / batch_dims.w % batch_dims.z,
                             batch % batch_dims.w);
  const long a_base = (long)coords.x * batch_a.x + (long)coords.y * batch_a.y + (long)coords.z * batch_a.z +
                      (long)coords.w * batch_a.w;
  const long b_base = (long)coords.x * batch_b.x + (long)coords.y * batch_b.y + (long)coords.z * batch_b.z +
                      (long)coords.w * batch_b.w;
  __global const float* a = HX_AT(const float, a_buf, a_off) + a_base;
  __global const float* b = HX_AT(const float, b_buf, b_off) + b_base;
  float acc = 0.0f;
  for (int k0 = 0; k0 < k; k0 += TILE) {
    const int ka = k0 + lj;
    const int kb = k0 + li;
    a_tile[li][lj] = (i < m && ka < k) ? a[(long)i * ab_strides.x + (long)ka * ab_strides.y] : 0.0f;
    b_tile[li][lj] = (kb < k && j < n) ? b[(long)kb * ab_strides.z + (long)j * ab_strides.w] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int p = 0; p < TILE; ++p) acc = fma(a_tile[li][p], b_tile[p][lj], acc);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (i >= m || j >= n) return;
  float v = alpha * acc;
  if (epilogue & 1) v += beta * HX_AT(const float, c_buf, c_off)[(long)i * c_strides.x + (long)j * c_strides.y];
  const int act = epilogue >> 1;
  if (act == ACT_GELU) {
    v = 0.5f * v * (1.0f + erf(v * 0.70710678118654752f));
  } else if (act == ACT_GELU_TANH) {
    v = 0.5f * v * (1.0f + tanh(0.79788456080286536f * (v + 0.044715f * v * v * v)));
  }
  HX_AT(float, y_buf, y_off)[((long)batch * m + i) * n + j] = v;
}
)CLC";

using Int2 = std::array<int32_t, 2>;
using Int4 = std::array<int32_t, 4>;

enum class GemmOp : uint8_t { kMatMul, kGemm, kMatMulBias };

// One launch of the gemm kernel: the matrices' geometry and strides, computed at tiling time.
struct GemmGeometry final : ops::TypedGeometry<GemmGeometry> {
  static constexpr std::string_view kName = "opencl::GemmGeometry";
  int64_t m = 0, n = 0, k = 0, batch = 1;
  Int4 ab_strides{0, 0, 0, 0};  // a_rs, a_cs, b_rs, b_cs
  Int4 batch_dims{1, 1, 1, 1};
  Int4 batch_a{0, 0, 0, 0};
  Int4 batch_b{0, 0, 0, 0};
  Shape out;
};

// MatMul's batch dims (numpy broadcast of A's and B's leading dims) merged, innermost first, where both operands
// step through adjacent dims contiguously or stay put, into at most kMaxBatchRank dims (right-aligned).
Status merge_batch(const Shape& a, const Shape& b, GemmGeometry& g) {
  const std::span<const int64_t> a_batch = std::span(a.dims()).first(static_cast<size_t>(std::max(0, a.rank() - 2)));
  const std::span<const int64_t> b_batch = std::span(b.dims()).first(static_cast<size_t>(std::max(0, b.rank() - 2)));
  const MergedBroadcast merged = merge_broadcast_dims(a_batch, b_batch, g.m * g.k, g.k * g.n);
  if (merged.merged_rank > kMaxBatchRank) {
    return unimplemented("OpenCL MatMul: the batch dims of {} and {} need {} dims after merging (at most {})", a, b,
                         merged.merged_rank, kMaxBatchRank);
  }
  g.batch_dims = merged.dims;
  g.batch_a = merged.a_strides;
  g.batch_b = merged.b_strides;
  return ok_status();
}

Status check_sizes(const GemmGeometry& g, const Shape& a, const Shape& b) {
  HXRT_RETURN_IF_ERROR(check_int32(a.num_elements(), "A elements"));
  HXRT_RETURN_IF_ERROR(check_int32(b.num_elements(), "B elements"));
  HXRT_RETURN_IF_ERROR(check_int32(g.out.num_elements(), "Y elements"));
  HXRT_RETURN_IF_ERROR(check_int32(g.batch, "batch"));
  return ok_status();
}

Result<GemmGeometry> matmul_geometry(const Shape& a, const Shape& b) {
  HXRT_ASSIGN_OR_RETURN(const ops::MatMulGeometry cpu_g, ops::matmul_geometry(a, b));
  GemmGeometry g;
  g.m = cpu_g.m;
  g.n = cpu_g.n;
  g.k = cpu_g.k;
  g.batch = cpu_g.batch();
  g.out = cpu_g.out;
  g.ab_strides = {static_cast<int32_t>(g.k), 1, static_cast<int32_t>(g.n), 1};
  HXRT_RETURN_IF_ERROR(check_sizes(g, a, b));
  HXRT_RETURN_IF_ERROR(merge_batch(a, b, g));
  return g;
}

Result<GemmGeometry> gemm_geometry(const ops::GemmParams& params, const Shape& a, const Shape& b) {
  if (a.rank() != 2 || b.rank() != 2) return invalid_argument("Gemm needs 2-D A and B, got A {} and B {}", a, b);
  GemmGeometry g;
  g.m = params.trans_a ? a.dim(1) : a.dim(0);
  g.k = params.trans_a ? a.dim(0) : a.dim(1);
  const int64_t kb = params.trans_b ? b.dim(1) : b.dim(0);
  g.n = params.trans_b ? b.dim(0) : b.dim(1);
  if (g.k != kb) return invalid_argument("Gemm inner dims differ: op(A) has K={}, op(B) has K={}", g.k, kb);
  g.out = Shape{g.m, g.n};
  HXRT_RETURN_IF_ERROR(check_sizes(g, a, b));
  g.ab_strides = {static_cast<int32_t>(params.trans_a ? 1 : g.k), static_cast<int32_t>(params.trans_a ? g.m : 1),
                  static_cast<int32_t>(params.trans_b ? 1 : g.n), static_cast<int32_t>(params.trans_b ? g.k : 1)};
  return g;
}

Result<ops::Tiling> gemm_tiling(const ops::TilingQuery& query, GemmOp op) {
  if (query.inputs.size() < 2) return invalid_argument("matmul tiling needs A and B");
  const Shape& a = query.inputs[0].shape;
  const Shape& b = query.inputs[1].shape;
  HXRT_ASSIGN_OR_RETURN(const GemmGeometry g, op == GemmOp::kGemm
                                                  ? gemm_geometry(query.params_as<ops::GemmParams>(), a, b)
                                                  : matmul_geometry(a, b));
  const int64_t tile = std::min(g.m, g.n) >= kLargeTile ? kLargeTile : kSmallTile;
  ops::Tiling tiling;
  tiling.launch.grid = {static_cast<uint32_t>(std::max<int64_t>(1, (g.n + tile - 1) / tile)),
                        static_cast<uint32_t>(std::max<int64_t>(1, (g.m + tile - 1) / tile)),
                        static_cast<uint32_t>(std::max<int64_t>(1, g.batch))};
  tiling.launch.block = {static_cast<uint32_t>(tile), static_cast<uint32_t>(tile), 1};
  tiling.values = {{"tile", tile}};
  tiling.geometry = std::make_shared<GemmGeometry>(g);
  return tiling;
}

Status require_f32(const ops::TensorRef& t, std::string_view what) {
  if (t.dtype != DType::kF32) return invalid_argument("{} must be f32, got {}", what, t.dtype);
  return ok_status();
}

// MatMul and MatMulBias run as a Gemm with alpha = beta = 1 and no transposes.
Status gemm_launch(hal::Stream& stream, const JitProgram& program, const ops::KernelLaunch& launch, GemmOp op) {
  const ops::GemmParams params = op == GemmOp::kGemm ? launch.params_as<ops::GemmParams>() : ops::GemmParams{};
  const ops::Activation activation =
      op == GemmOp::kMatMulBias ? launch.params_as<ops::MatMulBiasParams>().activation : ops::Activation::kNone;
  const ops::TensorRef& a = launch.inputs[0];
  const ops::TensorRef& b = launch.inputs[1];
  const ops::TensorRef& y = launch.outputs[0];
  HXRT_RETURN_IF_ERROR(require_f32(a, "input A"));
  HXRT_RETURN_IF_ERROR(require_f32(b, "input B"));
  HXRT_RETURN_IF_ERROR(require_f32(y, "output Y"));
  const auto& g = launch.tiling->geometry_as<GemmGeometry>();
  if (!(g.out == y.shape)) return invalid_argument("output shape {} differs from the expected {}", y.shape, g.out);
  // The C term: Gemm's C broadcast to [M, N] (ignored when beta is 0, as on the CPU), or MatMulBias's [N] bias.
  const bool has_c = launch.inputs.size() > 2 && launch.inputs[2].view.buffer != nullptr &&
                     (op != GemmOp::kGemm || params.beta != 0.0f);
  Int2 c_strides{0, 0};
  if (has_c) {
    const ops::TensorRef& c = launch.inputs[2];
    HXRT_RETURN_IF_ERROR(require_f32(c, op == GemmOp::kGemm ? "input C" : "bias"));
    if (op == GemmOp::kMatMulBias) {
      if (b.shape.rank() < 2 || c.num_elements() != g.n) {
        return invalid_argument("MatMulBias bias {} must have N values for B {}", c.shape, b.shape);
      }
      c_strides = {0, 1};
    } else {
      const int r = c.shape.rank();
      if (r > 2) return invalid_argument("Gemm C must have rank <= 2, got {}", c.shape);
      const int64_t c_rows = r == 2 ? c.shape.dim(0) : 1;
      const int64_t c_cols = r >= 1 ? c.shape.dim(-1) : 1;
      if ((c_rows != 1 && c_rows != g.m) || (c_cols != 1 && c_cols != g.n)) {
        return invalid_argument("Gemm C {} does not broadcast to [{}, {}]", c.shape, g.m, g.n);
      }
      c_strides = {static_cast<int32_t>(c_rows == 1 ? 0 : c_cols), c_cols == 1 ? 0 : 1};
    }
  } else if (op == GemmOp::kMatMulBias) {
    return invalid_argument("MatMulBias needs its bias input");
  }
  if (y.num_elements() == 0) return ok_status();
  std::vector<hal::KernelArg> args;
  add_tensor_arg(args, a);
  add_tensor_arg(args, b);
  add_tensor_arg(args, has_c ? launch.inputs[2] : a);  // unread without C
  add_tensor_arg(args, y);
  for (int64_t v : {g.m, g.n, g.k}) args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(v)));
  args.push_back(hal::KernelArg::scalar(g.ab_strides));
  args.push_back(hal::KernelArg::scalar(g.batch_dims));
  args.push_back(hal::KernelArg::scalar(g.batch_a));
  args.push_back(hal::KernelArg::scalar(g.batch_b));
  args.push_back(hal::KernelArg::scalar(params.alpha));
  args.push_back(hal::KernelArg::scalar(params.beta));
  args.push_back(hal::KernelArg::scalar(c_strides));
  const int act = activation == ops::Activation::kGelu       ? 1   // ACT_GELU
                  : activation == ops::Activation::kGeluTanh ? 2   // ACT_GELU_TANH
                                                             : 0;  // ACT_NONE
  const int epilogue = (has_c ? 1 : 0) | (act << 1);
  args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(epilogue)));
  return launch_kernel(stream, program, "gemm", tiling_defines(*launch.tiling, {"tile"}), launch.tiling->launch, args);
}

ops::KernelDef gemm_def(std::shared_ptr<const JitProgram> program, GemmOp op, std::string op_type, std::string domain,
                        int since_version, size_t inputs, std::string description) {
  ops::KernelDef def = opencl_def(op_type, std::move(domain), since_version, op_type, std::move(description));
  def.input_dtypes.assign(inputs, {DType::kF32});
  def.priority = 10;
  def.tiling = [op](const ops::TilingQuery& query) { return gemm_tiling(query, op); };
  def.launch = [program, op](hal::Stream& stream, const ops::KernelLaunch& launch) {
    return gemm_launch(stream, *program, launch, op);
  };
  return def;
}

}  // namespace

Status register_linear(ops::KernelRegistry& registry) {
  auto program = std::make_shared<const JitProgram>("hxrt_gemm", kSource);
  ops::KernelDef matmul =
      gemm_def(program, GemmOp::kMatMul, "MatMul", "", 13, 2,
               "TILE×TILE output tiles staged through local memory, batch broadcast merged to 4 dims");
  matmul.parse_attrs = [](const graph::Graph&, const graph::Node&) -> Result<std::unique_ptr<ops::KernelParams>> {
    return ops::boxed(ops::NoParams{});
  };
  HXRT_RETURN_IF_ERROR(registry.add(std::move(matmul)));

  ops::KernelDef gemm = gemm_def(program, GemmOp::kGemm, "Gemm", "", 13, 3,
                                 "the tiled matmul with transposes as strides, alpha/beta and a broadcast C");
  gemm.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_gemm_params(node));
  };
  HXRT_RETURN_IF_ERROR(registry.add(std::move(gemm)));

  ops::KernelDef bias = gemm_def(program, GemmOp::kMatMulBias, "MatMulBias", "hxrt.fused", 1, 3,
                                 "the tiled matmul with the bias and activation in the epilogue");
  bias.kind = ops::KernelKind::kFused;
  bias.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_matmul_bias_params(node));
  };
  return registry.add(std::move(bias));
}

}  // namespace hxrt::kernels::opencl
