// Every build of every CUDA kernel program, compiled by NVRTC for sm_90 (the H200's architecture) exactly as a CUDA
// device would compile it: this runs on machines without a GPU, so a kernel that does not compile fails CI here, not
// on the lent GPU. Each function the launch code looks up must be in the cubin.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "hxrt/hal/cuda/cuda_driver.h"
#include "hxrt/kernels/builtin_registries.h"
#include "kernels/cuda/registration.h"

namespace hxrt::kernels::cuda {
namespace {

std::vector<ProgramBuild> every_build() {
  std::vector<ProgramBuild> all;
  for (auto family : {elementwise_builds, cast_builds, normalization_builds, tensor_ops_builds, linear_builds,
                      quant_matmul_builds, llm_ops_builds}) {
    std::vector<ProgramBuild> builds = family();
    all.insert(all.end(), builds.begin(), builds.end());
  }
  return all;
}

TEST(CudaKernelsCompile, EveryProgramBuildCompilesForSm90) {
  if (Result<std::string> v = hal::nvrtc_version(); !v.ok()) GTEST_SKIP() << v.status().to_string();
  const std::vector<ProgramBuild> builds = every_build();
  ASSERT_FALSE(builds.empty());
  for (const ProgramBuild& build : builds) {
    SCOPED_TRACE(fmt::format("{} [{}]", build.program->name(), build.options));
    Result<hal::CudaCompiled> compiled = hal::cuda_compile(build.program->name(), build.program->source(),
                                                           CudaProgram::build_options(build.options), "sm_90");
    ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
    EXPECT_TRUE(compiled->log.empty() || compiled->log.find("warning") == std::string::npos) << compiled->log;
    for (const std::string& function : build.functions) {
      EXPECT_NE(compiled->cubin.find(function), std::string::npos) << function << " is not in the cubin";
    }
  }
}

TEST(CudaKernelsCompile, EveryOpOfTheDecoderGraphHasACudaKernel) {
  // What `hxrt generate --device cuda` plans (llm/llama_model.cc, after fusion): each op needs a CUDA kernel.
  Result<std::unique_ptr<ops::Registries>> registries = make_builtin_registries();
  ASSERT_TRUE(registries.ok()) << registries.status().to_string();
  const std::vector<std::pair<std::string, std::string>> ops = {
      {"MatMulQ", "hxrt"}, {"RMSNorm", "hxrt"},      {"RMSNormMul", "hxrt.fused"}, {"RoPE", "hxrt"},
      {"Silu", "hxrt"},    {"SwiGLU", "hxrt.fused"}, {"Mul", ""},                  {"Add", ""},
      {"Reshape", ""},     {"Gather", ""},           {"GatherRows", "hxrt"},       {"PagedAttention", "hxrt"},
      {"MatMul", ""},      {"Softmax", ""},          {"MemcpyToHost", "hxrt"},     {"MemcpyFromHost", "hxrt"}};
  for (const auto& [op, domain] : ops) {
    bool found = false;
    for (const ops::KernelDef* def : (*registries)->kernels.kernels_for(op, domain)) {
      found = found || def->device == hal::DeviceKind::kCuda;
    }
    EXPECT_TRUE(found) << domain << "::" << op << " has no CUDA kernel";
  }
}

}  // namespace
}  // namespace hxrt::kernels::cuda
