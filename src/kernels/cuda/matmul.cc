// CUDA dense f32 matrix products through cuBLAS: MatMul (numpy batching and broadcasting, rank-1 operands as in
// numpy), Gemm (transA/transB, alpha, beta, a C broadcast to [M, N]) and the fused MatMulBias (bias and Gelu after
// the product). The same ops, dtypes and checks as the OpenCL family (kernels/opencl/matmul.cc).
//
// The products are the "gemm" kernel of the device's cuBLAS library module (hal/cuda/cuda_driver.h): row-major
// C = alpha·op(A)·op(B) + beta·C over a strided batch, f32 accumulation, TF32 off so that results stay within the
// CPU reference's tolerance (they differ from OpenBLAS only in the order of the K sums).
//
// Batches. MatMul's output batch entries are walked in order with the CPU geometry's per-entry offsets of A and B
// (ops::matmul_geometry) and cut into runs in which both offsets advance by a constant, non-negative step: each run
// is one cublasGemmStridedBatchedEx call (stride 0 broadcasts a matrix). When the merged batch dims are a single
// strided dim (equal batches, or one side broadcast) that is one run and one call; otherwise the runs are the
// innermost merged dim, one call per outer batch index. Unlike the OpenCL kernel there is no cap on how many batch
// dims remain after merging.
//
// Epilogues, as small CUDA kernels on the same stream:
//   Gemm's C: `broadcast_c` writes beta·C, broadcast to [M, N], into Y, then the GEMM runs with beta = 1 and Y as
//   its C, so Y = alpha·op(A)·op(B) + beta·C is rounded as the CPU kernel rounds it (it pre-scales C the same way).
//   MatMulBias: the GEMM writes A·B into Y, then `bias_act` adds the bias and applies the activation in place,
//   with the CPU's float operations (its gelu_erf / gelu_tanh: erff for std::erf, hx_exp for std::exp).
// K = 0 needs no GEMM: Y is beta·C, or zeros (then the bias epilogue, for MatMulBias).
#include <algorithm>
#include <climits>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "hxrt/hal/cuda/cuda_driver.h"
#include "hxrt/ops/params/linear.h"
#include "kernels/cuda/registration.h"

namespace hxrt::kernels::cuda {
namespace {

constexpr uint32_t kEpilogueGroup = 256;
constexpr uint64_t kF32Bytes = 4;

constexpr std::string_view kSource = R"CUDA(
#ifndef ACT
#define ACT 0
#endif

// y[i, j] = scale · c[i·c_rs + j·c_cs] for y [m, n] contiguous (m·n < 2^31): Gemm's C, broadcast and scaled by beta.
extern "C" __global__ void broadcast_c(const float* c, float* y, int m, int n, int c_rs, int c_cs, float scale) {
  const unsigned idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (unsigned)m * (unsigned)n) return;
  const int i = (int)(idx / (unsigned)n);
  const int j = (int)(idx - (unsigned)i * (unsigned)n);
  y[idx] = scale * c[(long long)i * c_rs + (long long)j * c_cs];
}

// y[r, j] = act(y[r, j] + bias[j]) in place for y [total / n, n]; ACT 0 none, 1 Gelu (erf), 2 Gelu (tanh).
extern "C" __global__ void bias_act(const float* bias, float* y, int total, int n) {
  const unsigned idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (unsigned)total) return;
  float v = y[idx] + bias[idx % (unsigned)n];
#if ACT == 1
  v = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
#elif ACT == 2
  v = v / (1.0f + hx_exp(-2.0f * (0.79788456080286536f * (v + 0.044715f * v * v * v))));
#endif
  y[idx] = v;
}
)CUDA";

const CudaProgram& epilogue_program() {
  static const CudaProgram program("hxrt_linear", kSource);
  return program;
}

// The build of the epilogue program for an activation; broadcast_c is taken from the ACT=0 build, so that Gemm and
// an activation-free MatMulBias share one module.
std::string act_options(ops::Activation activation) {
  const int act = activation == ops::Activation::kGelu       ? 1
                  : activation == ops::Activation::kGeluTanh ? 2
                                                             : 0;
  return fmt::format("-D ACT={}", act);
}

enum class GemmOp : uint8_t { kMatMul, kGemm, kMatMulBias };

// One cuBLAS call: `count` consecutive output matrices, starting at these element offsets of A, B and Y.
struct GemmRun {
  int64_t a_offset = 0, b_offset = 0, y_offset = 0;
  int64_t stride_a = 0, stride_b = 0;
  int32_t count = 1;
};

// What launch needs, computed at tiling time.
struct GemmGeometry final : ops::TypedGeometry<GemmGeometry> {
  static constexpr std::string_view kName = "cuda::GemmGeometry";
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  std::vector<GemmRun> runs;
  Shape out;
};

// The batch entries cut into strided runs (see the top of the file). A step that would be negative starts a new run:
// cuBLAS's strides are signed, but the library module's bounds check reads them as extents.
std::vector<GemmRun> strided_runs(const ops::MatMulGeometry& cpu_g) {
  std::vector<GemmRun> runs;
  const std::vector<int64_t>& a = cpu_g.a_offsets;
  const std::vector<int64_t>& b = cpu_g.b_offsets;
  const size_t batch = a.size();
  size_t i = 0;
  while (i < batch) {
    GemmRun run{.a_offset = a[i], .b_offset = b[i], .y_offset = static_cast<int64_t>(i) * cpu_g.m * cpu_g.n};
    size_t end = i + 1;
    if (end < batch && a[end] >= a[i] && b[end] >= b[i]) {
      run.stride_a = a[end] - a[i];
      run.stride_b = b[end] - b[i];
      while (end < batch && end - i < static_cast<size_t>(INT_MAX) && a[end] - a[end - 1] == run.stride_a &&
             b[end] - b[end - 1] == run.stride_b) {
        ++end;
      }
    }
    run.count = static_cast<int32_t>(end - i);
    runs.push_back(run);
    i = end;
  }
  return runs;
}

Status check_dims(const GemmGeometry& g) {
  HXRT_RETURN_IF_ERROR(check_int32(g.m, "M"));
  HXRT_RETURN_IF_ERROR(check_int32(g.n, "N"));
  return check_int32(g.k, "K");
}

Result<GemmGeometry> matmul_geometry(const Shape& a, const Shape& b) {
  HXRT_ASSIGN_OR_RETURN(const ops::MatMulGeometry cpu_g, ops::matmul_geometry(a, b));
  GemmGeometry g;
  g.m = cpu_g.m;
  g.n = cpu_g.n;
  g.k = cpu_g.k;
  g.out = cpu_g.out;
  HXRT_RETURN_IF_ERROR(check_dims(g));
  g.runs = strided_runs(cpu_g);
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
  g.trans_a = params.trans_a;
  g.trans_b = params.trans_b;
  g.out = Shape{g.m, g.n};
  HXRT_RETURN_IF_ERROR(check_dims(g));
  g.runs = {GemmRun{}};
  return g;
}

Result<ops::Tiling> gemm_tiling(const ops::TilingQuery& query, GemmOp op) {
  if (query.inputs.size() < 2) return invalid_argument("matmul tiling needs A and B");
  const Shape& a = query.inputs[0].shape;
  const Shape& b = query.inputs[1].shape;
  HXRT_ASSIGN_OR_RETURN(GemmGeometry g, op == GemmOp::kGemm
                                            ? gemm_geometry(query.params_as<ops::GemmParams>(), a, b)
                                            : matmul_geometry(a, b));
  // The epilogue kernels index Y with 32-bit ints.
  if (op != GemmOp::kMatMul) HXRT_RETURN_IF_ERROR(check_int32(g.out.num_elements(), "Y elements"));
  ops::Tiling tiling;
  tiling.values = {{"gemm_calls", static_cast<int64_t>(g.runs.size())}};
  tiling.geometry = std::make_shared<GemmGeometry>(std::move(g));
  return tiling;
}

Status require_f32(const ops::TensorRef& t, std::string_view what) {
  if (t.dtype != DType::kF32) return invalid_argument("{} must be f32, got {}", what, t.dtype);
  return ok_status();
}

// The part of a tensor's view from element `offset` on: a batch entry's first matrix.
Result<hal::BufferView> view_from(const ops::TensorRef& t, int64_t offset, std::string_view what) {
  const uint64_t bytes = static_cast<uint64_t>(offset) * kF32Bytes;
  if (bytes > t.view.size) return invalid_argument("{}: element {} is past its {}-byte view", what, offset, t.view.size);
  return t.view.subview(bytes, t.view.size - bytes);
}

Result<const hal::Kernel*> cublas_gemm_kernel(hal::Device& device) {
  HXRT_ASSIGN_OR_RETURN(const hal::Module* module, device.shared_module("cublas", [] {
    return hal::ModuleSource{.language = hal::ModuleSource::Language::kLibrary, .name = "cublas"};
  }));
  return module->kernel("gemm");
}

// Y (+)= alpha · op(A) · op(B), one cuBLAS call per strided run; `beta` is 0 (Y written) or 1 (Y holds beta·C).
Status enqueue_gemms(hal::Stream& stream, const GemmGeometry& g, const ops::TensorRef& a, const ops::TensorRef& b,
                     const ops::TensorRef& y, float alpha, float beta) {
  HXRT_ASSIGN_OR_RETURN(const hal::Kernel* kernel, cublas_gemm_kernel(stream.device()));
  for (const GemmRun& run : g.runs) {
    hal::CublasGemm gemm;
    gemm.m = static_cast<int32_t>(g.m);
    gemm.n = static_cast<int32_t>(g.n);
    gemm.k = static_cast<int32_t>(g.k);
    gemm.batch = run.count;
    gemm.stride_a = run.stride_a;
    gemm.stride_b = run.stride_b;
    gemm.stride_c = g.m * g.n;
    gemm.trans_a = g.trans_a;
    gemm.trans_b = g.trans_b;
    gemm.type = hal::CublasGemm::Type::kF32;
    gemm.allow_tf32 = false;  // TF32 rounds the inputs to 10 mantissa bits: far outside the CPU's tolerance
    gemm.alpha = alpha;
    gemm.beta = beta;
    HXRT_ASSIGN_OR_RETURN(const hal::BufferView a_view, view_from(a, run.a_offset, "input A"));
    HXRT_ASSIGN_OR_RETURN(const hal::BufferView b_view, view_from(b, run.b_offset, "input B"));
    HXRT_ASSIGN_OR_RETURN(const hal::BufferView y_view, view_from(y, run.y_offset, "output Y"));
    HXRT_RETURN_IF_ERROR(
        stream.launch(*kernel, hal::LaunchConfig{}, hal::cublas_gemm_args(a_view, b_view, y_view, gemm)));
  }
  return ok_status();
}

// MatMul and MatMulBias run as a Gemm with alpha = 1 and no transposes.
Status gemm_launch(hal::Stream& stream, const ops::KernelLaunch& launch, GemmOp op) {
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
  int32_t c_rs = 0;
  int32_t c_cs = 0;
  if (has_c) {
    const ops::TensorRef& c = launch.inputs[2];
    HXRT_RETURN_IF_ERROR(require_f32(c, op == GemmOp::kGemm ? "input C" : "bias"));
    if (op == GemmOp::kMatMulBias) {
      if (b.shape.rank() < 2 || c.num_elements() != g.n) {
        return invalid_argument("MatMulBias bias {} must have N values for B {}", c.shape, b.shape);
      }
    } else {
      const int r = c.shape.rank();
      if (r > 2) return invalid_argument("Gemm C must have rank <= 2, got {}", c.shape);
      const int64_t c_rows = r == 2 ? c.shape.dim(0) : 1;
      const int64_t c_cols = r >= 1 ? c.shape.dim(-1) : 1;
      if ((c_rows != 1 && c_rows != g.m) || (c_cols != 1 && c_cols != g.n)) {
        return invalid_argument("Gemm C {} does not broadcast to [{}, {}]", c.shape, g.m, g.n);
      }
      c_rs = static_cast<int32_t>(c_rows == 1 ? 0 : c_cols);
      c_cs = c_cols == 1 ? 0 : 1;
    }
  } else if (op == GemmOp::kMatMulBias) {
    return invalid_argument("MatMulBias needs its bias input");
  }
  const int64_t y_elements = y.num_elements();
  if (y_elements == 0) return ok_status();

  float gemm_beta = 0.0f;
  if (op == GemmOp::kGemm && has_c) {
    std::vector<hal::KernelArg> args;
    add_tensor_arg(args, launch.inputs[2]);
    add_tensor_arg(args, y);
    args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(g.m)));
    args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(g.n)));
    args.push_back(hal::KernelArg::scalar(c_rs));
    args.push_back(hal::KernelArg::scalar(c_cs));
    args.push_back(hal::KernelArg::scalar(params.beta));
    HXRT_RETURN_IF_ERROR(launch_kernel(stream, epilogue_program(), "broadcast_c", act_options(ops::Activation::kNone),
                                       launch_1d(y_elements, kEpilogueGroup), args));
    gemm_beta = 1.0f;
  } else if (g.k == 0) {
    // No product to compute: Y = 0 (no C term), as the CPU kernels write it.
    HXRT_RETURN_IF_ERROR(stream.fill(y.view.subview(0, static_cast<uint64_t>(y_elements) * kF32Bytes), 0, 4));
  }
  if (g.k > 0) HXRT_RETURN_IF_ERROR(enqueue_gemms(stream, g, a, b, y, params.alpha, gemm_beta));

  if (op == GemmOp::kMatMulBias) {
    std::vector<hal::KernelArg> args;
    add_tensor_arg(args, launch.inputs[2]);
    add_tensor_arg(args, y);
    args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(y_elements)));
    args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(g.n)));
    HXRT_RETURN_IF_ERROR(launch_kernel(stream, epilogue_program(), "bias_act", act_options(activation),
                                       launch_1d(y_elements, kEpilogueGroup), args));
  }
  return ok_status();
}

ops::KernelDef gemm_def(GemmOp op, std::string op_type, std::string domain, int since_version, size_t inputs,
                        std::string name, std::string description) {
  ops::KernelDef def = cuda_def(std::move(op_type), std::move(domain), since_version, std::move(name),
                                std::move(description));
  def.input_dtypes.assign(inputs, {DType::kF32});
  def.priority = 10;
  def.tiling = [op](const ops::TilingQuery& query) { return gemm_tiling(query, op); };
  def.launch = [op](hal::Stream& stream, const ops::KernelLaunch& launch) { return gemm_launch(stream, launch, op); };
  return def;
}

}  // namespace

Status register_linear(ops::KernelRegistry& registry) {
  ops::KernelDef matmul =
      gemm_def(GemmOp::kMatMul, "MatMul", "", 13, 2, "MatMulCublas",
               "cuBLAS strided-batched SGEMM (f32 accumulation, no TF32), one call per strided run of the batch");
  matmul.parse_attrs = [](const graph::Graph&, const graph::Node&) -> Result<std::unique_ptr<ops::KernelParams>> {
    return ops::boxed(ops::NoParams{});
  };
  HXRT_RETURN_IF_ERROR(registry.add(std::move(matmul)));

  ops::KernelDef gemm = gemm_def(GemmOp::kGemm, "Gemm", "", 13, 3, "GemmCublas",
                                 "cuBLAS SGEMM with transposes and alpha, onto beta·C broadcast into Y by a kernel");
  gemm.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_gemm_params(node));
  };
  HXRT_RETURN_IF_ERROR(registry.add(std::move(gemm)));

  ops::KernelDef bias = gemm_def(GemmOp::kMatMulBias, "MatMulBias", "hxrt.fused", 1, 3, "MatMulBiasCublas",
                                 "cuBLAS strided-batched SGEMM, then a bias + activation kernel");
  bias.kind = ops::KernelKind::kFused;
  bias.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_matmul_bias_params(node));
  };
  return registry.add(std::move(bias));
}

std::vector<ProgramBuild> linear_builds() {
  return {
      {&epilogue_program(), act_options(ops::Activation::kNone), {"broadcast_c", "bias_act"}},
      {&epilogue_program(), act_options(ops::Activation::kGelu), {"bias_act"}},
      {&epilogue_program(), act_options(ops::Activation::kGeluTanh), {"bias_act"}},
  };
}

}  // namespace hxrt::kernels::cuda
