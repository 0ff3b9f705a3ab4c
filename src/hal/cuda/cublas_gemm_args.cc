// The packing of CublasGemm into kernel arguments (hxrt/hal/cuda/cuda_driver.h). Built with or without the CUDA
// toolkit: code that prepares cuBLAS launches compiles everywhere.
#include <cstdint>

#include "hxrt/hal/cuda/cuda_driver.h"

namespace hxrt::hal {
namespace {

struct StrideFlags {
  int64_t stride_c;
  int32_t flags;
  int32_t magic;  // tells these arguments from other 16-byte scalars
};
constexpr int32_t kMagic = 0x47454d4d;  // "GEMM"

}  // namespace

std::array<KernelArg, kCublasGemmArgs> cublas_gemm_args(BufferView a, BufferView b, BufferView c,
                                                        const CublasGemm& gemm) {
  const std::array<int32_t, 4> dims = {gemm.m, gemm.n, gemm.k, gemm.batch};
  const std::array<int64_t, 2> strides_ab = {gemm.stride_a, gemm.stride_b};
  const int32_t flags = (gemm.trans_a ? 1 : 0) | (gemm.trans_b ? 2 : 0) | (gemm.allow_tf32 ? 4 : 0) |
                        (static_cast<int32_t>(gemm.type) << 4);
  const StrideFlags sf{gemm.stride_c, flags, kMagic};
  const std::array<float, 2> scale = {gemm.alpha, gemm.beta};
  return {KernelArg::buffer(a),           KernelArg::buffer(b),           KernelArg::buffer(c),
          KernelArg::scalar(dims),        KernelArg::scalar(strides_ab), KernelArg::scalar(sf),
          KernelArg::scalar(scale)};
}

Result<CublasGemm> cublas_gemm_from_args(std::span<const KernelArg> args) {
  if (args.size() != kCublasGemmArgs) {
    return invalid_argument("cublas.gemm takes {} arguments (cublas_gemm_args), got {}", kCublasGemmArgs, args.size());
  }
  for (size_t i = 0; i < 3; ++i) {
    if (args[i].kind() != KernelArg::Kind::kBuffer) return invalid_argument("cublas.gemm: argument {} must be a buffer", i);
  }
  if (args[3].scalar_bytes().size() != 16 || args[4].scalar_bytes().size() != 16 ||
      args[5].scalar_bytes().size() != 16 || args[6].scalar_bytes().size() != 8) {
    return invalid_argument("cublas.gemm: scalar arguments are not what cublas_gemm_args makes");
  }
  const auto dims = args[3].scalar_as<std::array<int32_t, 4>>();
  const auto strides_ab = args[4].scalar_as<std::array<int64_t, 2>>();
  const auto sf = args[5].scalar_as<StrideFlags>();
  const auto scale = args[6].scalar_as<std::array<float, 2>>();
  if (sf.magic != kMagic || (sf.flags >> 4) > 2) {
    return invalid_argument("cublas.gemm: scalar arguments are not what cublas_gemm_args makes");
  }
  CublasGemm g;
  g.m = dims[0];
  g.n = dims[1];
  g.k = dims[2];
  g.batch = dims[3];
  g.stride_a = strides_ab[0];
  g.stride_b = strides_ab[1];
  g.stride_c = sf.stride_c;
  g.trans_a = (sf.flags & 1) != 0;
  g.trans_b = (sf.flags & 2) != 0;
  g.allow_tf32 = (sf.flags & 4) != 0;
  g.type = static_cast<CublasGemm::Type>(sf.flags >> 4);
  g.alpha = scale[0];
  g.beta = scale[1];
  return g;
}

}  // namespace hxrt::hal
