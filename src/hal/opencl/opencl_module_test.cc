// OpenCL JIT modules: the program cache (memory and disk), build errors, kernel lookup.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "hal/opencl/opencl_test_util.h"

namespace hxrt::hal::opencl {
namespace {

constexpr const char* kScale = R"CLC(
__kernel void scale(__global float* data, float factor, uint count) {
  for (uint i = get_global_id(0); i < count; i += get_global_size(0)) data[i] *= factor;
}
)CLC";

class OpenClModuleTest : public OpenClTest {
 protected:
  void SetUp() override {}  // each test opens the device with its own cache options
};

// A fresh directory per test, removed afterwards.
struct TempDir {
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           fmt::format("hxrt_opencl_cache_{}_{}", static_cast<long>(getpid()), counter++);
    std::filesystem::remove_all(path);
  }
  ~TempDir() {
    std::error_code error;
    std::filesystem::remove_all(path, error);
  }
  std::filesystem::path path;
  static inline int counter = 0;
};

TEST_F(OpenClModuleTest, DiskCacheColdThenWarm) {
  TempDir dir;
  // A source unique to this run, so neither our cache nor the driver's own sees it warm.
  const std::string source = fmt::format("{}\n// run {} {}\n", kScale, static_cast<long>(getpid()),
                                         std::chrono::steady_clock::now().time_since_epoch().count());
  OpenClModuleStats cold;
  {
    open(OpenClDriverOptions{.cache_dir = dir.path.string()});
    if (!device_) return;
    auto module = load("scale", source, "-cl-fast-relaxed-math");
    ASSERT_TRUE(module);
    cold = *opencl_module_stats(*module);
    EXPECT_EQ(cold.origin, OpenClModuleStats::Origin::kCompiled);
    EXPECT_FALSE(cold.cache_hit());
    EXPECT_GT(cold.binary_bytes, 0u);
    // Same device: the in-memory cache answers.
    auto again = load("scale", source, "-cl-fast-relaxed-math");
    ASSERT_TRUE(again);
    EXPECT_EQ(opencl_module_stats(*again)->origin, OpenClModuleStats::Origin::kMemoryCache);
    EXPECT_LT(opencl_module_stats(*again)->build_ms, cold.build_ms);
    // Other options are another program.
    auto other = load("scale", source, "-D UNUSED=1");
    ASSERT_TRUE(other);
    EXPECT_EQ(opencl_module_stats(*other)->origin, OpenClModuleStats::Origin::kCompiled);
    EXPECT_NE(opencl_module_stats(*other)->cache_key, cold.cache_key);
    device_.reset();
  }
  EXPECT_TRUE(std::filesystem::exists(dir.path / (cold.cache_key + ".bin")));
  // A new device (as in a new process): the disk cache answers, faster than the cold build.
  open(OpenClDriverOptions{.cache_dir = dir.path.string()});
  auto warm_module = load("scale", source, "-cl-fast-relaxed-math");
  ASSERT_TRUE(warm_module);
  const OpenClModuleStats warm = *opencl_module_stats(*warm_module);
  EXPECT_EQ(warm.origin, OpenClModuleStats::Origin::kDiskCache);
  EXPECT_EQ(warm.cache_key, cold.cache_key);
  EXPECT_LT(warm.build_ms, cold.build_ms);
  std::printf("JIT compile: cold %.2f ms, disk cache %.2f ms\n", cold.build_ms, warm.build_ms);

  // The cached program works.
  auto stream = take(device_->create_stream());
  auto buffer = take(device_->allocate(16 * sizeof(float), MemoryKind::kDevice));
  std::vector<float> values(16, 3.0f);
  ASSERT_TRUE(stream->copy_from_host(*buffer, values.data()).ok());
  const KernelArg args[] = {KernelArg::buffer(*buffer), KernelArg::scalar(2.0f), KernelArg::scalar(uint32_t{16})};
  ASSERT_TRUE(
      stream->launch(**warm_module->kernel("scale"), LaunchConfig{.grid = {4, 1, 1}, .block = {4, 1, 1}}, args).ok());
  ASSERT_TRUE(stream->copy_to_host(values.data(), *buffer).ok());
  ASSERT_TRUE(stream->synchronize().ok());
  EXPECT_EQ(values, std::vector<float>(16, 6.0f));
}

TEST_F(OpenClModuleTest, CorruptCacheFileIsRebuilt) {
  TempDir dir;
  open(OpenClDriverOptions{.cache_dir = dir.path.string()});
  if (!device_) return;
  auto module = load("scale", kScale);
  ASSERT_TRUE(module);
  const std::string key = opencl_module_stats(*module)->cache_key;
  device_.reset();
  {
    std::ofstream out(dir.path / (key + ".bin"), std::ios::binary | std::ios::trunc);
    out << "HXRTCLB1 garbage";
  }
  open(OpenClDriverOptions{.cache_dir = dir.path.string()});
  auto rebuilt = load("scale", kScale);
  ASSERT_TRUE(rebuilt);
  EXPECT_EQ(opencl_module_stats(*rebuilt)->origin, OpenClModuleStats::Origin::kCompiled);
}

TEST_F(OpenClModuleTest, BuildErrorCarriesTheLog) {
  open();
  if (!device_) return;
  Result<std::unique_ptr<Module>> broken = device_->load_module(
      ModuleSource{.language = ModuleSource::Language::kOpenCLC,
                   .name = "broken",
                   .code = "__kernel void broken(__global float* x) { x[0] = undeclared_identifier_42; }"});
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.status().code(), StatusCode::kInvalidArgument);
  const std::string text = broken.status().to_string();
  EXPECT_NE(text.find("CL_BUILD_PROGRAM_FAILURE"), std::string::npos) << text;
  EXPECT_NE(text.find("undeclared_identifier_42"), std::string::npos) << "the build log: " << text;
  EXPECT_NE(text.find("broken"), std::string::npos) << text;

  Result<std::unique_ptr<Module>> bad_options = device_->load_module(ModuleSource{
      .language = ModuleSource::Language::kOpenCLC, .name = "opts", .code = kScale, .options = "-no-such-flag"});
  ASSERT_FALSE(bad_options.ok());
  EXPECT_EQ(bad_options.status().code(), StatusCode::kInvalidArgument) << bad_options.status().to_string();
}

TEST_F(OpenClModuleTest, KernelLookupAndLanguages) {
  open();
  if (!device_) return;
  auto module = load("m", kScale);
  ASSERT_TRUE(module);
  Result<const Kernel*> scale = module->kernel("scale");
  ASSERT_TRUE(scale.ok());
  EXPECT_EQ((*scale)->name(), "m.scale");
  EXPECT_EQ((*scale)->device_kind(), DeviceKind::kOpenCL);
  Result<const Kernel*> missing = module->kernel("nope");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("scale"), std::string_view::npos) << "lists the kernels";
  EXPECT_EQ(device_->load_module(ModuleSource{.language = ModuleSource::Language::kCudaCpp, .name = "c", .code = "x"})
                .status()
                .code(),
            StatusCode::kUnimplemented);
  // Argument count is checked at enqueue.
  auto stream = take(device_->create_stream());
  const KernelArg one[] = {KernelArg::scalar(1.0f)};
  EXPECT_EQ(stream->launch(**scale, LaunchConfig{}, one).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(stream->synchronize().ok());
}

}  // namespace
}  // namespace hxrt::hal::opencl
