// The example graphs (examples/mlp.hxrt, examples/cnn_block.hxrt) planned with the OpenCL kernels alone, with and
// without fusion, run on an OpenCL session and compared with the same graph on the CPU: every op of the examples
// (and every fused op they become) has an OpenCL kernel, so they need no CPU fallback.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "hxrt/kernels/builtin_registries.h"
#include "hxrt/runtime/model.h"
#include "kernels/opencl/opencl_test_util.h"

namespace hxrt::kernels::opencl {
namespace {

std::string example_path(const std::string& name) {
  return (std::filesystem::path(HXRT_SOURCE_DIR) / "examples" / name).string();
}

// One graph planned for one device: a runtime::Model on a bundle with that device's kernels only (the model
// borrows the bundle, so the bundle is declared first and destroyed last).
struct PlannedGraph {
  std::unique_ptr<ops::Registries> registries;
  std::unique_ptr<runtime::Model> model;
};

Result<std::unique_ptr<PlannedGraph>> plan_graph(const std::string& path, const std::string& device, bool fuse) {
  auto planned = std::make_unique<PlannedGraph>();
  // The OpenCL plan gets the OpenCL kernels only, so a node without one fails instead of falling back.
  HXRT_ASSIGN_OR_RETURN(planned->registries,
                        make_builtin_registries({.cpu_kernels = device != "opencl", .opencl_kernels = device == "opencl"}));
  runtime::ModelOptions options{.device = device, .registries = planned->registries.get()};
  options.plan.fuse = fuse;
  HXRT_ASSIGN_OR_RETURN(planned->model, runtime::Model::load(path, options));
  return planned;
}

// Plans `file` for OpenCL (fusion on and off), checks that every node runs an OpenCL kernel (and, fused, the
// expected fused kernel), and compares the output with the CPU plan's on `input`.
void expect_example_matches_cpu(const std::string& file, const HostTensor& input, const std::string& output,
                                const std::string& fused_kernel) {
  const std::string path = example_path(file);
  Result<std::unique_ptr<PlannedGraph>> cpu = plan_graph(path, "cpu", true);
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  Result<runtime::TensorMap> expected = (*cpu)->model->run({{"x", input}});
  ASSERT_TRUE(expected.ok()) << expected.status().to_string();
  const std::vector<float> reference = expected->at(output).to_f32();
  for (bool fuse : {true, false}) {
    SCOPED_TRACE(fmt::format("{} fusion {}", file, fuse ? "on" : "off"));
    Result<std::unique_ptr<PlannedGraph>> cl = plan_graph(path, "opencl", fuse);
    ASSERT_TRUE(cl.ok()) << cl.status().to_string();
    bool saw_fused = false;
    for (const runtime::ExecutionObject& object : (*cl)->model->plan().objects()) {
      EXPECT_EQ(object.kernel->device, hal::DeviceKind::kOpenCL) << object.kernel->name;
      saw_fused = saw_fused || object.kernel->name == fused_kernel;
    }
    EXPECT_EQ(saw_fused, fuse) << (*cl)->model->plan().describe();
    Result<runtime::TensorMap> got = (*cl)->model->run({{"x", input}});
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    ASSERT_EQ(got->at(output).shape, expected->at(output).shape);
    const double error = testing::normalized_max_error(got->at(output).to_f32(),
                                                       std::vector<double>(reference.begin(), reference.end()));
    EXPECT_LE(error, 1e-5);
    std::printf("  %s on opencl, fusion %s: max normalised error %.3g vs cpu\n", file.c_str(), fuse ? "on" : "off",
                error);
  }
}

TEST(OpenClExampleGraphsTest, MlpPlansWhollyOnOpenClAndMatchesTheCpu) {
  HXRT_SKIP_WITHOUT_OPENCL();
  std::mt19937 rng(81);
  expect_example_matches_cpu("mlp.hxrt", random_signed(Shape{3, 64}, rng), "probs", "MatMulBias");
}

TEST(OpenClExampleGraphsTest, CnnBlockPlansWhollyOnOpenClAndMatchesTheCpu) {
  HXRT_SKIP_WITHOUT_OPENCL();
  std::mt19937 rng(82);
  expect_example_matches_cpu("cnn_block.hxrt", random_signed(Shape{1, 3, 32, 32}, rng), "block2.out", "ConvBnRelu");
}

}  // namespace
}  // namespace hxrt::kernels::opencl
