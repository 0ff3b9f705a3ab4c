// The parts of the CUDA driver that run without a GPU: registration and the Unavailable path, NVRTC compilation for
// sm_90, the option syntax, and the cuBLAS argument packing. Device behaviour is the conformance suite's
// (tests/hal_conformance, backend "cuda"), which runs where a GPU is present.
#include <gtest/gtest.h>

#include "hxrt/hal/cuda/cuda_driver.h"
#include "hxrt/hal/driver.h"

namespace hxrt::hal {
namespace {

#define SKIP_WITHOUT_NVRTC()                                                               \
  do {                                                                                     \
    if (Result<std::string> v = nvrtc_version(); !v.ok()) GTEST_SKIP() << v.status().to_string(); \
  } while (false)

TEST(CudaDriverTest, RegistersAndEitherWorksOrSaysWhyNot) {
  DriverRegistry registry;
  ASSERT_TRUE(register_builtin_drivers(registry).ok());
  Result<Driver*> driver = registry.find("cuda");
  ASSERT_TRUE(driver.ok()) << driver.status().to_string();
  EXPECT_EQ((*driver)->kind(), DeviceKind::kCuda);
  const Status available = (*driver)->available();
  if (!available.ok()) {
    EXPECT_EQ(available.code(), StatusCode::kUnavailable) << available.to_string();
    EXPECT_NE(available.message().find("cuda"), std::string::npos) << available.to_string();
    EXPECT_EQ(registry.open("cuda:0").status().code(), StatusCode::kUnavailable);
    EXPECT_EQ((*driver)->enumerate().status().code(), StatusCode::kUnavailable);
    return;
  }
  Result<std::vector<DeviceInfo>> devices = (*driver)->enumerate();
  ASSERT_TRUE(devices.ok()) << devices.status().to_string();
  ASSERT_FALSE(devices->empty());
  for (const DeviceInfo& info : *devices) {
    EXPECT_EQ(info.kind, DeviceKind::kCuda);
    EXPECT_GT(info.memory_bytes, 0u);
    EXPECT_GT(info.compute_units, 0);
    ASSERT_FALSE(info.features.empty());
    EXPECT_EQ(info.features[0].rfind("sm_", 0), 0u) << info.features[0];
  }
  EXPECT_EQ((*driver)->open_device(static_cast<int>(devices->size())).status().code(), StatusCode::kNotFound);
}

TEST(CudaDriverTest, NvrtcCompilesForSm90WithDefines) {
  SKIP_WITHOUT_NVRTC();
  constexpr const char* kSource = R"CUDA(
#if !defined(SCALE) || SCALE != 3
#error SCALE must be 3
#endif
extern "C" __global__ void scale(float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= SCALE;
}
)CUDA";
  Result<CudaCompiled> compiled = cuda_compile("scale", kSource, "-D SCALE=3 --fmad=false", "sm_90");
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  EXPECT_EQ(compiled->cubin.substr(0, 4), std::string("\x7f" "ELF"));
  EXPECT_GT(compiled->compile_ms, 0.0);
  // The joined form is accepted too, and a missing define reaches the #error.
  EXPECT_TRUE(cuda_compile("scale", kSource, "-DSCALE=3", "sm_90").ok());
  Result<CudaCompiled> missing = cuda_compile("scale", kSource, "", "sm_90");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("SCALE must be 3"), std::string::npos) << missing.status().to_string();
}

TEST(CudaDriverTest, CompileErrorsNameTheModuleAndLine) {
  SKIP_WITHOUT_NVRTC();
  Result<CudaCompiled> bad = cuda_compile("broken", "extern \"C\" __global__ void f() { int x = ; }\n", "", "sm_90");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("broken"), std::string::npos);
  EXPECT_NE(bad.status().message().find("broken.cu(1)"), std::string::npos) << bad.status().to_string();
  EXPECT_FALSE(cuda_compile("arch", "extern \"C\" __global__ void f() {}\n", "", "sm_1").ok());
}

TEST(CudaDriverTest, CublasGemmArgumentsRoundTrip) {
  CublasGemm gemm;
  gemm.m = 7;
  gemm.n = 3;
  gemm.k = 5;
  gemm.batch = 4;
  gemm.stride_a = 35;
  gemm.stride_b = 0;
  gemm.stride_c = 21;
  gemm.trans_b = true;
  gemm.type = CublasGemm::Type::kF16;
  gemm.alpha = 0.5f;
  gemm.beta = 1.0f;
  const auto args = cublas_gemm_args(BufferView(), BufferView(), BufferView(), gemm);
  Result<CublasGemm> back = cublas_gemm_from_args(args);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->m, 7);
  EXPECT_EQ(back->n, 3);
  EXPECT_EQ(back->k, 5);
  EXPECT_EQ(back->batch, 4);
  EXPECT_EQ(back->stride_a, 35);
  EXPECT_EQ(back->stride_b, 0);
  EXPECT_EQ(back->stride_c, 21);
  EXPECT_FALSE(back->trans_a);
  EXPECT_TRUE(back->trans_b);
  EXPECT_FALSE(back->allow_tf32);
  EXPECT_EQ(back->type, CublasGemm::Type::kF16);
  EXPECT_EQ(back->alpha, 0.5f);
  EXPECT_EQ(back->beta, 1.0f);

  // Arguments that are not cublas_gemm_args' are rejected, never misread.
  EXPECT_EQ(cublas_gemm_from_args(std::span(args).first(6)).status().code(), StatusCode::kInvalidArgument);
  auto wrong = args;
  wrong[5] = KernelArg::scalar(std::array<int64_t, 2>{21, 0});
  EXPECT_EQ(cublas_gemm_from_args(wrong).status().code(), StatusCode::kInvalidArgument);
  wrong = args;
  wrong[0] = KernelArg::scalar(1);
  EXPECT_EQ(cublas_gemm_from_args(wrong).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hxrt::hal
