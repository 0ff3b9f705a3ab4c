#include "hal/cuda/cuda_api.h"

#include <dlfcn.h>

#include <initializer_list>
#include <vector>

#include <fmt/format.h>

namespace hxrt::hal::cuda {
namespace {

// Note [Loading the CUDA libraries]
// hxrt links no CUDA library, so the same binary runs where there is no GPU (every CI machine here) and where there
// is one. Each library is looked up by its soname first (the dynamic loader's search path: LD_LIBRARY_PATH,
// ldconfig), then in the toolkit's library directory CMake found at build time, which is where NVRTC and cuBLAS live
// on a machine with the toolkit but no ldconfig entry for it. The driver library comes with the GPU driver and is
// only ever found by soname. Handles are never closed: the tables live for the process.
struct Library {
  void* handle = nullptr;
  std::string tried;  // what dlopen said for each name tried
};

Library open_library(std::initializer_list<const char*> sonames, bool toolkit_fallback) {
  Library library;
  std::vector<std::string> names(sonames.begin(), sonames.end());
#ifdef HXRT_CUDA_TOOLKIT_LIBRARY_DIR
  if (toolkit_fallback) {
    for (const char* soname : sonames) names.push_back(fmt::format("{}/{}", HXRT_CUDA_TOOLKIT_LIBRARY_DIR, soname));
  }
#else
  (void)toolkit_fallback;
#endif
  for (const std::string& name : names) {
    library.handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library.handle != nullptr) return library;
    const char* error = dlerror();
    library.tried += fmt::format("\n  {}: {}", name, error != nullptr ? error : "not found");
  }
  return library;
}

// Resolves `symbol` into `slot`; records the first missing symbol in `missing`.
template <typename Fn>
void resolve(void* handle, Fn& slot, const char* symbol, std::string& missing) {
  slot = reinterpret_cast<Fn>(dlsym(handle, symbol));
  if (slot == nullptr && missing.empty()) missing = symbol;
}

struct LoadedDriver {
  DriverApi api;
  Status status;
};

LoadedDriver load_driver() {
  LoadedDriver out;
  Library library = open_library({"libcuda.so.1", "libcuda.so"}, /*toolkit_fallback=*/false);
  if (library.handle == nullptr) {
    out.status = unavailable("cuda: the CUDA driver library is not installed (no NVIDIA driver on this machine):{}",
                             library.tried);
    return out;
  }
  DriverApi& a = out.api;
  std::string missing;
  std::string optional_v2;
  void* h = library.handle;
  resolve(h, a.init, "cuInit", missing);
  resolve(h, a.driver_get_version, "cuDriverGetVersion", missing);
  resolve(h, a.get_error_name, "cuGetErrorName", missing);
  resolve(h, a.get_error_string, "cuGetErrorString", missing);
  resolve(h, a.device_get_count, "cuDeviceGetCount", missing);
  resolve(h, a.device_get, "cuDeviceGet", missing);
  resolve(h, a.device_get_name, "cuDeviceGetName", missing);
  resolve(h, a.device_get_attribute, "cuDeviceGetAttribute", missing);
  resolve(h, a.device_total_mem, "cuDeviceTotalMem_v2", missing);
  resolve(h, a.primary_ctx_retain, "cuDevicePrimaryCtxRetain", missing);
  resolve(h, a.primary_ctx_release, "cuDevicePrimaryCtxRelease_v2", missing);
  resolve(h, a.ctx_set_current, "cuCtxSetCurrent", missing);
  resolve(h, a.ctx_synchronize, "cuCtxSynchronize", missing);
  resolve(h, a.mem_get_info, "cuMemGetInfo_v2", missing);
  resolve(h, a.mem_alloc, "cuMemAlloc_v2", missing);
  resolve(h, a.mem_free, "cuMemFree_v2", missing);
  resolve(h, a.mem_host_alloc, "cuMemHostAlloc", missing);
  resolve(h, a.mem_free_host, "cuMemFreeHost", missing);
  resolve(h, a.mem_host_get_device_pointer, "cuMemHostGetDevicePointer_v2", missing);
  resolve(h, a.mem_host_register, "cuMemHostRegister_v2", missing);
  resolve(h, a.mem_host_unregister, "cuMemHostUnregister", missing);
  resolve(h, a.memcpy_htod, "cuMemcpyHtoD_v2", missing);
  resolve(h, a.memcpy_dtoh, "cuMemcpyDtoH_v2", missing);
  resolve(h, a.memcpy_htod_async, "cuMemcpyHtoDAsync_v2", missing);
  resolve(h, a.memcpy_dtoh_async, "cuMemcpyDtoHAsync_v2", missing);
  resolve(h, a.memcpy_dtod_async, "cuMemcpyDtoDAsync_v2", missing);
  resolve(h, a.memset_d8_async, "cuMemsetD8Async", missing);
  resolve(h, a.memset_d16_async, "cuMemsetD16Async", missing);
  resolve(h, a.memset_d32_async, "cuMemsetD32Async", missing);
  resolve(h, a.stream_create, "cuStreamCreate", missing);
  resolve(h, a.stream_destroy, "cuStreamDestroy_v2", missing);
  resolve(h, a.stream_synchronize, "cuStreamSynchronize", missing);
  resolve(h, a.stream_query, "cuStreamQuery", missing);
  resolve(h, a.event_create, "cuEventCreate", missing);
  resolve(h, a.event_destroy, "cuEventDestroy_v2", missing);
  resolve(h, a.event_record, "cuEventRecord", missing);
  resolve(h, a.event_synchronize, "cuEventSynchronize", missing);
  resolve(h, a.event_elapsed_time, "cuEventElapsedTime_v2", optional_v2);
  if (a.event_elapsed_time == nullptr) resolve(h, a.event_elapsed_time, "cuEventElapsedTime", missing);  // < 12.8
  resolve(h, a.module_load_data, "cuModuleLoadData", missing);
  resolve(h, a.module_unload, "cuModuleUnload", missing);
  resolve(h, a.module_get_function, "cuModuleGetFunction", missing);
  resolve(h, a.launch_kernel, "cuLaunchKernel", missing);
  if (!missing.empty()) {
    out.status = unavailable("cuda: the CUDA driver library lacks {} (driver too old for hxrt)", missing);
    return out;
  }
  std::string optional;
  resolve(h, a.func_get_param_info, "cuFuncGetParamInfo", optional);
  if (const CUresult result = a.init(0); result != CUDA_SUCCESS) {
    const char* name = nullptr;
    a.get_error_name(result, &name);
    out.status = unavailable("cuda: cuInit failed with {} ({}): no usable NVIDIA GPU or driver",
                             name != nullptr ? name : "?", static_cast<int>(result));
  }
  return out;
}

struct LoadedNvrtc {
  NvrtcApi api;
  Status status;
};

LoadedNvrtc load_nvrtc() {
  LoadedNvrtc out;
  Library library = open_library({"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}, /*toolkit_fallback=*/true);
  if (library.handle == nullptr) {
    out.status = unavailable("cuda: NVRTC (the CUDA runtime compiler) is not installed:{}", library.tried);
    return out;
  }
  NvrtcApi& a = out.api;
  std::string missing;
  void* h = library.handle;
  resolve(h, a.version, "nvrtcVersion", missing);
  resolve(h, a.get_error_string, "nvrtcGetErrorString", missing);
  resolve(h, a.create_program, "nvrtcCreateProgram", missing);
  resolve(h, a.destroy_program, "nvrtcDestroyProgram", missing);
  resolve(h, a.compile_program, "nvrtcCompileProgram", missing);
  resolve(h, a.get_program_log_size, "nvrtcGetProgramLogSize", missing);
  resolve(h, a.get_program_log, "nvrtcGetProgramLog", missing);
  resolve(h, a.get_cubin_size, "nvrtcGetCUBINSize", missing);
  resolve(h, a.get_cubin, "nvrtcGetCUBIN", missing);
  if (!missing.empty()) out.status = unavailable("cuda: NVRTC lacks {} (NVRTC older than 11.2)", missing);
  return out;
}

struct LoadedCublas {
  CublasApi api;
  Status status;
};

LoadedCublas load_cublas() {
  LoadedCublas out;
  Library library = open_library({"libcublas.so.13", "libcublas.so.12", "libcublas.so"}, /*toolkit_fallback=*/true);
  if (library.handle == nullptr) {
    out.status = unavailable("cuda: cuBLAS is not installed:{}", library.tried);
    return out;
  }
  CublasApi& a = out.api;
  std::string missing;
  void* h = library.handle;
  resolve(h, a.create, "cublasCreate_v2", missing);
  resolve(h, a.destroy, "cublasDestroy_v2", missing);
  resolve(h, a.set_stream, "cublasSetStream_v2", missing);
  resolve(h, a.gemm_strided_batched_ex, "cublasGemmStridedBatchedEx", missing);
  resolve(h, a.get_status_string, "cublasGetStatusString", missing);
  if (!missing.empty()) out.status = unavailable("cuda: cuBLAS lacks {} (cuBLAS older than 11.4)", missing);
  return out;
}

}  // namespace

Result<const DriverApi*> driver_api() {
  static const LoadedDriver loaded = load_driver();
  if (!loaded.status.ok()) return loaded.status;
  return &loaded.api;
}

Result<const NvrtcApi*> nvrtc_api() {
  static const LoadedNvrtc loaded = load_nvrtc();
  if (!loaded.status.ok()) return loaded.status;
  return &loaded.api;
}

Result<const CublasApi*> cublas_api() {
  static const LoadedCublas loaded = load_cublas();
  if (!loaded.status.ok()) return loaded.status;
  return &loaded.api;
}

std::string cu_error_text(CUresult result) {
  Result<const DriverApi*> api = driver_api();
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.ok()) {
    (*api)->get_error_name(result, &name);
    (*api)->get_error_string(result, &text);
  }
  if (name == nullptr) return fmt::format("CUDA error {}", static_cast<int>(result));
  return text != nullptr ? fmt::format("{}: {}", name, text) : std::string(name);
}

bool cu_context_lost(CUresult result) {
  switch (result) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED: return true;
    default: return false;
  }
}

StatusCode cu_status_code(CUresult result) {
  switch (result) {
    case CUDA_SUCCESS: return StatusCode::kOk;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_HANDLE:
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_NOT_FOUND:
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
    case CUDA_ERROR_INVALID_SOURCE:
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION: return StatusCode::kInvalidArgument;
    case CUDA_ERROR_OUT_OF_MEMORY: return StatusCode::kOutOfMemory;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_DEINITIALIZED:
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE: return StatusCode::kUnavailable;
    case CUDA_ERROR_NOT_SUPPORTED: return StatusCode::kUnimplemented;
    default: return StatusCode::kInternal;
  }
}

Status cu_status(CUresult result, std::string_view call) {
  if (result == CUDA_SUCCESS) return ok_status();
  std::string message = fmt::format("{} failed: {}", call, cu_error_text(result));
  if (cu_context_lost(result)) {
    message += " (the CUDA context is lost: every later CUDA call of this process fails; restart the process)";
  }
  return Status(cu_status_code(result), std::move(message));
}

}  // namespace hxrt::hal::cuda
