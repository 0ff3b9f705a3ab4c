// OpenCL JIT modules and their program cache.
#include "hal/opencl/opencl_module.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/ranges.h>

#include "hal/opencl/opencl_device.h"
#include "hxrt/base/fault_injection.h"
#include "hxrt/base/logging.h"

namespace hxrt::hal::opencl {
namespace {

// Bumped when the cache file layout or the key's ingredients change.
constexpr std::string_view kCacheFormat = "hxrt-opencl-cache-v1";
constexpr char kCacheMagic[8] = {'H', 'X', 'R', 'T', 'C', 'L', 'B', '1'};

uint64_t fnv1a64(std::string_view bytes, uint64_t hash = 0xcbf29ce484222325ULL) {
  for (const char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

// What a cache entry must match besides the source: the device, its driver, the build options.
std::string cache_identity(const OpenClDevice& device, const ModuleSource& source) {
  return fmt::format("{}\n{}\n{}\n{}", kCacheFormat, device.info().name, device.info().driver_version, source.options);
}

std::string cache_key(const std::string& identity, const ModuleSource& source) {
  const uint64_t source_hash = fnv1a64(source.code);
  const uint64_t key = fnv1a64(source.code, fnv1a64(identity));
  return fmt::format("{:016x}{:016x}", key, source_hash);
}

std::string build_log(cl_program program, cl_device_id device) {
  size_t bytes = 0;
  if (clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &bytes) != CL_SUCCESS || bytes == 0) {
    return "(no build log)";
  }
  std::string log(bytes, '\0');
  if (clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, bytes, log.data(), nullptr) != CL_SUCCESS) {
    return "(no build log)";
  }
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

Status build_program(cl_program program, const OpenClDevice& device, const ModuleSource& source) {
  cl_device_id id = device.device_id();
  const cl_int err = clBuildProgram(program, 1, &id, source.options.c_str(), nullptr, nullptr);
  if (err == CL_SUCCESS) return ok_status();
  return Status(cl_status_code(err) == StatusCode::kInternal ? StatusCode::kInvalidArgument : cl_status_code(err),
                fmt::format("building OpenCL module '{}' (options '{}') failed: {} ({}); build log:\n{}", source.name,
                            source.options, cl_error_name(err), err, build_log(program, id)));
}

std::string program_binary(cl_program program) {
  size_t size = 0;
  if (clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof(size), &size, nullptr) != CL_SUCCESS || size == 0) {
    return {};
  }
  std::string binary(size, '\0');
  auto* pointer = reinterpret_cast<unsigned char*>(binary.data());
  if (clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof(pointer), &pointer, nullptr) != CL_SUCCESS) return {};
  return binary;
}

Result<ClProgram> program_from_binary(const OpenClDevice& device, const std::string& binary,
                                      const ModuleSource& source) {
  cl_device_id id = device.device_id();
  const size_t size = binary.size();
  const auto* bytes = reinterpret_cast<const unsigned char*>(binary.data());
  cl_int binary_status = CL_SUCCESS;
  cl_int err = CL_SUCCESS;
  ClProgram program(clCreateProgramWithBinary(device.context(), 1, &id, &size, &bytes, &binary_status, &err));
  if (err != CL_SUCCESS) return cl_status(err, "clCreateProgramWithBinary");
  if (binary_status != CL_SUCCESS) return cl_status(binary_status, "clCreateProgramWithBinary (binary status)");
  HXRT_RETURN_IF_ERROR(build_program(program.get(), device, source));
  return program;
}

Result<ClProgram> program_from_source(const OpenClDevice& device, const ModuleSource& source) {
  const char* text = source.code.c_str();
  const size_t length = source.code.size();
  cl_int err = CL_SUCCESS;
  ClProgram program(clCreateProgramWithSource(device.context(), 1, &text, &length, &err));
  if (err != CL_SUCCESS) return cl_status(err, "clCreateProgramWithSource");
  HXRT_RETURN_IF_ERROR(build_program(program.get(), device, source));
  return program;
}

// Cache file: magic, identity length (u64), identity, source size (u64), binary.
std::string read_cache_file(const std::filesystem::path& path, const std::string& identity, uint64_t source_size) {
  std::error_code error;
  const uintmax_t file_size = std::filesystem::file_size(path, error);
  if (error || file_size == 0) return {};
  // A cache that cannot be read is a miss: the program is built from source.
  if (!fault::check(fault::Site::kFileRead, [&] { return fmt::format("OpenCL cache file '{}'", path.string()); })
           .ok()) {
    return {};
  }
  std::ifstream in(path, std::ios::binary);
  std::string data(static_cast<size_t>(file_size), '\0');
  if (!in.read(data.data(), static_cast<std::streamsize>(data.size()))) return {};
  const size_t header = sizeof(kCacheMagic) + sizeof(uint64_t);
  if (data.size() < header || data.compare(0, sizeof(kCacheMagic), kCacheMagic, sizeof(kCacheMagic)) != 0) return {};
  uint64_t identity_size = 0;
  std::memcpy(&identity_size, data.data() + sizeof(kCacheMagic), sizeof(identity_size));
  if (identity_size != identity.size() || data.size() < header + identity_size + sizeof(uint64_t)) return {};
  if (data.compare(header, identity_size, identity) != 0) return {};
  uint64_t stored_source_size = 0;
  std::memcpy(&stored_source_size, data.data() + header + identity_size, sizeof(stored_source_size));
  if (stored_source_size != source_size) return {};
  return data.substr(header + identity_size + sizeof(uint64_t));
}

void write_cache_file(const std::filesystem::path& path, const std::string& identity, uint64_t source_size,
                      const std::string& binary) {
  static std::atomic<uint64_t> counter{0};
  std::error_code error;
  if (!fault::check(fault::Site::kFileWrite, [&] { return fmt::format("OpenCL cache file '{}'", path.string()); })
           .ok()) {
    return;  // an unwritten cache only costs a rebuild next time
  }
  std::filesystem::create_directories(path.parent_path(), error);
  if (error) {
    HXRT_LOG(kDebug, "opencl cache: cannot create {}: {}", path.parent_path().string(), error.message());
    return;
  }
  // Written to a unique temporary name and renamed, so concurrent writers and readers never see a partial file.
  const std::filesystem::path temporary =
      path.string() + fmt::format(".tmp.{}.{}", static_cast<long>(getpid()), counter.fetch_add(1));
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    const uint64_t identity_size = identity.size();
    out.write(kCacheMagic, sizeof(kCacheMagic));
    out.write(reinterpret_cast<const char*>(&identity_size), sizeof(identity_size));
    out.write(identity.data(), static_cast<std::streamsize>(identity.size()));
    out.write(reinterpret_cast<const char*>(&source_size), sizeof(source_size));
    out.write(binary.data(), static_cast<std::streamsize>(binary.size()));
    if (!out) {
      HXRT_LOG(kDebug, "opencl cache: cannot write {}", temporary.string());
      std::filesystem::remove(temporary, error);
      return;
    }
  }
  std::filesystem::rename(temporary, path, error);
  if (error) std::filesystem::remove(temporary, error);
}

Result<std::vector<std::unique_ptr<OpenClKernel>>> make_kernels(cl_program program, const std::string& module_name) {
  cl_uint count = 0;
  HXRT_CL_RETURN_IF_ERROR(clCreateKernelsInProgram(program, 0, nullptr, &count), "clCreateKernelsInProgram");
  std::vector<cl_kernel> raw(count);
  if (count > 0) {
    HXRT_CL_RETURN_IF_ERROR(clCreateKernelsInProgram(program, count, raw.data(), nullptr), "clCreateKernelsInProgram");
  }
  std::vector<ClKernelHandle> handles;
  for (cl_kernel k : raw) handles.emplace_back(k);  // adopt every kernel before anything can fail
  std::vector<std::unique_ptr<OpenClKernel>> kernels;
  for (ClKernelHandle& handle : handles) {
    size_t bytes = 0;
    HXRT_CL_RETURN_IF_ERROR(clGetKernelInfo(handle.get(), CL_KERNEL_FUNCTION_NAME, 0, nullptr, &bytes),
                            "clGetKernelInfo");
    std::string function(bytes, '\0');
    HXRT_CL_RETURN_IF_ERROR(clGetKernelInfo(handle.get(), CL_KERNEL_FUNCTION_NAME, bytes, function.data(), nullptr),
                            "clGetKernelInfo");
    while (!function.empty() && function.back() == '\0') function.pop_back();
    cl_uint num_args = 0;
    HXRT_CL_RETURN_IF_ERROR(clGetKernelInfo(handle.get(), CL_KERNEL_NUM_ARGS, sizeof(num_args), &num_args, nullptr),
                            "clGetKernelInfo");
    kernels.push_back(
        std::make_unique<OpenClKernel>(fmt::format("{}.{}", module_name, function), std::move(handle), num_args));
  }
  return kernels;
}

}  // namespace

std::string opencl_cache_dir(const OpenClDriverOptions& options) {
  if (!options.cache_dir.empty()) return options.cache_dir;
  if (const char* dir = std::getenv("HXRT_CACHE_DIR"); dir != nullptr && *dir != '\0') {
    return (std::filesystem::path(dir) / "opencl").string();
  }
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return (std::filesystem::path(xdg) / "hxrt" / "opencl").string();
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return (std::filesystem::path(home) / ".cache" / "hxrt" / "opencl").string();
  }
  return {};
}

Result<const Kernel*> OpenClModule::kernel(std::string_view name) const {
  std::vector<std::string_view> names;
  for (const auto& kernel : kernels_) {
    const std::string_view function = std::string_view(kernel->name()).substr(name_.size() + 1);
    if (function == name) return static_cast<const Kernel*>(kernel.get());
    names.push_back(function);
  }
  return not_found("OpenCL module '{}' has no kernel '{}' (it has: {})", name_, name, fmt::join(names, ", "));
}

Result<std::unique_ptr<Module>> load_opencl_module(OpenClDevice& device, const ModuleSource& source) {
  if (source.language != ModuleSource::Language::kOpenCLC) {
    return unimplemented("OpenCL device '{}' loads OpenCL C modules only (module '{}')", device.info().name,
                         source.name);
  }
  const auto start = std::chrono::steady_clock::now();
  const std::string identity = cache_identity(device, source);
  OpenClModuleStats stats;
  stats.cache_key = cache_key(identity, source);

  ClProgram program = device.cached_program(stats.cache_key);
  std::string binary;
  if (program) {
    stats.origin = OpenClModuleStats::Origin::kMemoryCache;
  } else {
    const std::string dir = device.options().disk_cache ? opencl_cache_dir(device.options()) : std::string();
    const std::filesystem::path path =
        dir.empty() ? std::filesystem::path() : std::filesystem::path(dir) / (stats.cache_key + ".bin");
    if (!path.empty()) {
      binary = read_cache_file(path, identity, source.code.size());
      if (!binary.empty()) {
        Result<ClProgram> loaded = program_from_binary(device, binary, source);
        if (loaded.ok()) {
          program = std::move(loaded).value();
          stats.origin = OpenClModuleStats::Origin::kDiskCache;
        } else {
          HXRT_LOG(kInfo, "opencl cache: rebuilding '{}' from source: {}", source.name, loaded.status().to_string());
          binary.clear();
        }
      }
    }
    if (!program) {
      HXRT_ASSIGN_OR_RETURN(program, program_from_source(device, source));
      stats.origin = OpenClModuleStats::Origin::kCompiled;
      binary = program_binary(program.get());
      if (!path.empty() && !binary.empty()) write_cache_file(path, identity, source.code.size(), binary);
    }
    device.cache_program(stats.cache_key, program);
  }
  stats.binary_bytes = binary.empty() ? program_binary(program.get()).size() : binary.size();
  HXRT_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<OpenClKernel>> kernels, make_kernels(program.get(), source.name));
  stats.build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  HXRT_LOG(kDebug, "opencl module '{}': {} in {:.2f} ms", source.name,
           stats.origin == OpenClModuleStats::Origin::kCompiled ? "compiled" : "cache hit", stats.build_ms);
  return std::unique_ptr<Module>(
      std::make_unique<OpenClModule>(source.name, std::move(program), std::move(kernels), std::move(stats)));
}

}  // namespace hxrt::hal::opencl

namespace hxrt::hal {
Result<OpenClModuleStats> opencl_module_stats(const Module& module) {
  const auto* cl_module = dynamic_cast<const opencl::OpenClModule*>(&module);
  if (cl_module == nullptr) return invalid_argument("opencl_module_stats: not a module of an OpenCL device");
  return cl_module->stats();
}
}  // namespace hxrt::hal
