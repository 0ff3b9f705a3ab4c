// CUDA JIT modules, the cubin cache, and the cuBLAS library module.
#include "hal/cuda/cuda_module.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "hal/cuda/cuda_device.h"
#include "hal/cuda/jit_options.h"
#include "hal/cuda/cuda_stream.h"
#include "hxrt/base/fault_injection.h"
#include "hxrt/base/logging.h"

namespace hxrt::hal {
namespace cuda {
namespace {

// Bumped when the cache file layout or the key's ingredients change.
constexpr std::string_view kCacheFormat = "hxrt-cuda-cache-v1";

uint64_t fnv1a64(std::string_view bytes, uint64_t hash = 0xcbf29ce484222325ULL) {
  for (const char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

Result<CudaCompiled> compile(std::string_view name, std::string_view source, std::string_view options,
                             std::string_view arch) {
  HXRT_ASSIGN_OR_RETURN(const NvrtcApi* nvrtc, nvrtc_api());
  const auto start = std::chrono::steady_clock::now();
  const std::string program_name = fmt::format("{}.cu", name);
  const std::string code(source);
  nvrtcProgram program = nullptr;
  if (const nvrtcResult r = nvrtc->create_program(&program, code.c_str(), program_name.c_str(), 0, nullptr, nullptr);
      r != NVRTC_SUCCESS) {
    return internal_error("nvrtcCreateProgram for '{}' failed: {}", name, nvrtc->get_error_string(r));
  }
  std::vector<std::string> args = split_jit_options(options);
  args.push_back(fmt::format("--gpu-architecture={}", arch));
  args.emplace_back("-std=c++17");
  std::vector<const char*> argv;
  argv.reserve(args.size());
  for (const std::string& a : args) argv.push_back(a.c_str());
  const nvrtcResult compiled = nvrtc->compile_program(program, static_cast<int>(argv.size()), argv.data());
  CudaCompiled out;
  size_t log_size = 0;
  if (nvrtc->get_program_log_size(program, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    out.log.resize(log_size);
    nvrtc->get_program_log(program, out.log.data());
    while (!out.log.empty() && (out.log.back() == '\0' || out.log.back() == '\n')) out.log.pop_back();
  }
  if (compiled != NVRTC_SUCCESS) {
    nvrtc->destroy_program(&program);
    return invalid_argument("compiling CUDA module '{}' for {} (options '{}') failed: {}; log:\n{}", name, arch, options,
                            nvrtc->get_error_string(compiled), out.log);
  }
  size_t cubin_size = 0;
  nvrtcResult r = nvrtc->get_cubin_size(program, &cubin_size);
  if (r == NVRTC_SUCCESS) {
    out.cubin.resize(cubin_size);
    r = nvrtc->get_cubin(program, out.cubin.data());
  }
  nvrtc->destroy_program(&program);
  if (r != NVRTC_SUCCESS || out.cubin.empty()) {
    return internal_error("NVRTC produced no cubin for '{}' ({}): {}", name, arch, nvrtc->get_error_string(r));
  }
  out.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return out;
}

std::filesystem::path cache_directory(const CudaDriverOptions& options) {
  if (!options.cache_dir.empty()) return options.cache_dir;
  if (const char* dir = std::getenv("HXRT_CACHE_DIR"); dir != nullptr && *dir != '\0') {
    return std::filesystem::path(dir) / "cuda";
  }
  if (const char* dir = std::getenv("XDG_CACHE_HOME"); dir != nullptr && *dir != '\0') {
    return std::filesystem::path(dir) / "hxrt" / "cuda";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return std::filesystem::path(home) / ".cache" / "hxrt" / "cuda";
  }
  return {};
}

// The key of a source build: what a cached cubin must match (arch, NVRTC version, options, source).
std::string cache_key(const CudaDevice& device, const ModuleSource& source, const std::string& nvrtc) {
  const std::string identity =
      fmt::format("{}\n{}\n{}\n{}", kCacheFormat, device.arch(), nvrtc, source.options);
  return fmt::format("{:016x}{:016x}", fnv1a64(source.code, fnv1a64(identity)), fnv1a64(source.code));
}

std::string read_file(const std::filesystem::path& path) {
  if (!fault::check(fault::Site::kFileRead, [&] { return fmt::format("CUDA cache file '{}'", path.string()); }).ok()) {
    return {};  // a cache that cannot be read is a miss
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// Best effort: written to a temporary name, then renamed, so readers never see half a file.
void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::error_code error;
  std::filesystem::create_directories(path.parent_path(), error);
  if (error) return;
  static std::atomic<uint64_t> counter{0};
  const std::filesystem::path temp = path.string() + fmt::format(".tmp{}.{}", getpid(), counter.fetch_add(1));
  {
    std::ofstream out(temp, std::ios::binary);
    if (!out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()))) {
      std::filesystem::remove(temp, error);
      return;
    }
  }
  std::filesystem::rename(temp, path, error);
  if (error) std::filesystem::remove(temp, error);
}

class CudaModule final : public Module {
 public:
  CudaModule(CudaDevice* device, std::string name, CUmodule module)
      : device_(device), name_(std::move(name)), module_(module) {}
  ~CudaModule() override {
    ScopedContext context(*device_);
    kernels_.clear();
    device_->api().module_unload(module_);
  }

  Result<const Kernel*> kernel(std::string_view name) const override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = kernels_.find(name); it != kernels_.end()) return it->second.get();
    const DriverApi& api = device_->api();
    ScopedContext context(*device_);
    HXRT_RETURN_IF_ERROR(context.status());
    CUfunction function = nullptr;
    const std::string function_name(name);
    if (const CUresult r = api.module_get_function(&function, module_, function_name.c_str()); r != CUDA_SUCCESS) {
      return not_found("CUDA module '{}' has no kernel '{}' ({}); kernels must be extern \"C\" __global__", name_,
                       name, cu_error_text(r));
    }
    int params = -1;
    if (api.func_get_param_info != nullptr) {
      params = 0;
      size_t offset = 0;
      size_t size = 0;
      while (params < 256 && api.func_get_param_info(function, static_cast<size_t>(params), &offset, &size) ==
                                 CUDA_SUCCESS) {
        ++params;
      }
    }
    auto kernel = std::make_unique<CudaKernel>(fmt::format("{}.{}", name_, name), function, params);
    const Kernel* out = kernel.get();
    kernels_.emplace(function_name, std::move(kernel));
    return out;
  }

 private:
  CudaDevice* device_;
  std::string name_;
  CUmodule module_;
  mutable std::mutex mutex_;
  mutable std::map<std::string, std::unique_ptr<CudaKernel>, std::less<>> kernels_;  // guarded by mutex_
};

// ---- cuBLAS ----

cudaDataType data_type(CublasGemm::Type type) {
  switch (type) {
    case CublasGemm::Type::kF32: return CUDA_R_32F;
    case CublasGemm::Type::kF16: return CUDA_R_16F;
    case CublasGemm::Type::kBF16: return CUDA_R_16BF;
  }
  return CUDA_R_32F;
}

uint64_t element_bytes(CublasGemm::Type type) { return type == CublasGemm::Type::kF32 ? 4 : 2; }

// Note [Row-major GEMM through cuBLAS]
// cuBLAS is column-major. A row-major m×n C is a column-major n×m Cᵀ, and Cᵀ = op(B)ᵀ · op(A)ᵀ, so the call swaps the
// operands (B first) and m with n; each stored matrix is read with its own row length as the leading dimension.
class CublasGemmKernel final : public CudaLibraryKernel {
 public:
  CublasGemmKernel() : CudaLibraryKernel("cublas.gemm") {}

  Status check(std::span<const KernelArg> args) const override {
    HXRT_ASSIGN_OR_RETURN(const CublasGemm g, cublas_gemm_from_args(args));
    if (g.m < 0 || g.n < 0 || g.k < 0 || g.batch < 1) {
      return invalid_argument("cublas.gemm: m={} n={} k={} batch={} must be >= 0 (batch >= 1)", g.m, g.n, g.k, g.batch);
    }
    const uint64_t e = element_bytes(g.type);
    const auto need = [&](int64_t rows, int64_t cols, int64_t stride) {
      return (static_cast<uint64_t>(g.batch - 1) * static_cast<uint64_t>(stride) +
              static_cast<uint64_t>(rows) * static_cast<uint64_t>(cols)) * e;
    };
    const uint64_t sizes[3] = {need(g.m, g.k, g.stride_a), need(g.k, g.n, g.stride_b), need(g.m, g.n, g.stride_c)};
    for (int i = 0; i < 3; ++i) {
      if (args[static_cast<size_t>(i)].view().size < sizes[i]) {
        return invalid_argument("cublas.gemm: operand {} holds {} bytes, the GEMM reads {}", "ABC"[i],
                                args[static_cast<size_t>(i)].view().size, sizes[i]);
      }
    }
    return ok_status();
  }

  Status run(CudaStream& stream, std::span<const KernelArg> args) const override {
    HXRT_ASSIGN_OR_RETURN(const CublasGemm g, cublas_gemm_from_args(args));
    if (g.m == 0 || g.n == 0) return ok_status();
    HXRT_ASSIGN_OR_RETURN(const CublasApi* blas, cublas_api());
    HXRT_ASSIGN_OR_RETURN(cublasHandle_t handle, stream.cublas_handle());
    const auto pointer = [](const KernelArg& arg) {
      return reinterpret_cast<void*>(static_cast<CudaBuffer*>(arg.view().buffer)->device_pointer() + arg.view().offset);
    };
    const int lda = std::max(1, g.trans_a ? g.m : g.k);  // row length of A as stored (cuBLAS wants >= 1, also for k = 0)
    const int ldb = std::max(1, g.trans_b ? g.k : g.n);
    const cudaDataType type = data_type(g.type);
    const cublasComputeType_t compute =
        g.type == CublasGemm::Type::kF32 && g.allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    const cublasStatus_t status = blas->gemm_strided_batched_ex(
        handle, g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, g.n, g.m, g.k, &g.alpha,
        pointer(args[1]), type, ldb, g.stride_b, pointer(args[0]), type, lda, g.stride_a, &g.beta, pointer(args[2]),
        type, g.n, g.stride_c, g.batch, compute, CUBLAS_GEMM_DEFAULT);
    if (status != CUBLAS_STATUS_SUCCESS) {
      return internal_error("cublasGemmStridedBatchedEx (m={} n={} k={} batch={}) failed: {}", g.m, g.n, g.k, g.batch,
                            blas->get_status_string(status));
    }
    return ok_status();
  }
};

class CublasModule final : public Module {
 public:
  Result<const Kernel*> kernel(std::string_view name) const override {
    if (name == "gemm") return &gemm_;
    return not_found("the cublas module has no kernel '{}' (it has: gemm)", name);
  }

 private:
  CublasGemmKernel gemm_;
};

Result<std::unique_ptr<Module>> load_image(CudaDevice& device, const ModuleSource& source, const std::string& image) {
  ScopedContext context(device);
  HXRT_RETURN_IF_ERROR(context.status());
  CUmodule module = nullptr;
  const CUresult r = device.api().module_load_data(&module, image.data());
  if (r != CUDA_SUCCESS) {
    return cu_status(r, "cuModuleLoadData").with_context(fmt::format("loading CUDA module '{}'", source.name));
  }
  return std::unique_ptr<Module>(std::make_unique<CudaModule>(&device, source.name, module));
}

}  // namespace

Result<std::unique_ptr<Module>> load_cuda_module(CudaDevice& device, const ModuleSource& source) {
  switch (source.language) {
    case ModuleSource::Language::kLibrary:
      if (source.name != "cublas") {
        return not_found("cuda: no library module '{}' (the cuda device offers: cublas)", source.name);
      }
      HXRT_RETURN_IF_ERROR(cublas_api().status());
      return std::unique_ptr<Module>(std::make_unique<CublasModule>());
    case ModuleSource::Language::kPtx: {
      std::string image = source.code;
      if (image.back() != '\0') image.push_back('\0');  // cuModuleLoadData reads PTX as a C string
      return load_image(device, source, image);
    }
    case ModuleSource::Language::kBinary: return load_image(device, source, source.code);
    case ModuleSource::Language::kCudaCpp: break;
    case ModuleSource::Language::kOpenCLC:
      return unimplemented("cuda device cannot load OpenCL C module '{}'", source.name);
  }
  HXRT_ASSIGN_OR_RETURN(const std::string nvrtc, nvrtc_version());
  const std::string key = cache_key(device, source, nvrtc);
  std::string cubin = device.cached_cubin(key);
  const std::filesystem::path dir = device.options().disk_cache ? cache_directory(device.options())
                                                                : std::filesystem::path();
  const std::filesystem::path file = dir.empty() ? dir : dir / fmt::format("{}-{}.cubin", device.arch(), key);
  bool from_disk = false;
  if (cubin.empty() && !file.empty()) {
    cubin = read_file(file);
    from_disk = !cubin.empty();
  }
  if (!cubin.empty()) {
    Result<std::unique_ptr<Module>> module = load_image(device, source, cubin);
    if (module.ok()) {
      if (from_disk) device.cache_cubin(key, std::move(cubin));
      return module;
    }
    HXRT_LOG(kWarn, "cuda: cached cubin for '{}' did not load ({}); rebuilding", source.name,
             module.status().message());
  }
  HXRT_ASSIGN_OR_RETURN(CudaCompiled compiled, compile(source.name, source.code, source.options, device.arch()));
  if (!compiled.log.empty()) HXRT_LOG(kDebug, "cuda: NVRTC log for '{}':\n{}", source.name, compiled.log);
  HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Module> module, load_image(device, source, compiled.cubin));
  if (!file.empty()) write_file(file, compiled.cubin);
  device.cache_cubin(key, std::move(compiled.cubin));
  return module;
}

}  // namespace cuda

Result<CudaCompiled> cuda_compile(std::string_view name, std::string_view source, std::string_view options,
                                  std::string_view arch) {
  return cuda::compile(name, source, options, arch);
}

Result<std::string> nvrtc_version() {
  HXRT_ASSIGN_OR_RETURN(const cuda::NvrtcApi* nvrtc, cuda::nvrtc_api());
  int major = 0;
  int minor = 0;
  if (nvrtc->version(&major, &minor) != NVRTC_SUCCESS) return unavailable("cuda: nvrtcVersion failed");
  return fmt::format("{}.{}", major, minor);
}

}  // namespace hxrt::hal
