// The CUDA libraries the cuda driver uses, loaded at run time (dlopen): the driver API (libcuda.so.1), NVRTC and
// cuBLAS. Each is a table of function pointers filled once per process; a library that is absent or too old leaves its
// table unloaded with the reason, and only what needs it fails (Unavailable). The CUDA headers are used for types
// only; no symbol of a CUDA library is linked.
//
// Thread-safety: the loaders are thread-safe (loaded once); the tables are immutable afterwards.
#pragma once

#include <cublas_api.h>
#include <cuda.h>
#include <nvrtc.h>

#include <string>
#include <string_view>

#include "hxrt/base/status.h"

namespace hxrt::hal::cuda {

// The driver API functions hxrt calls. Names follow the CUDA headers' macros (cuMemAlloc is cuMemAlloc_v2).
struct DriverApi {
  decltype(&::cuInit) init = nullptr;
  decltype(&::cuDriverGetVersion) driver_get_version = nullptr;
  decltype(&::cuGetErrorName) get_error_name = nullptr;
  decltype(&::cuGetErrorString) get_error_string = nullptr;
  decltype(&::cuDeviceGetCount) device_get_count = nullptr;
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDeviceGetName) device_get_name = nullptr;
  decltype(&::cuDeviceGetAttribute) device_get_attribute = nullptr;
  decltype(&::cuDeviceTotalMem) device_total_mem = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) primary_ctx_retain = nullptr;
  decltype(&::cuDevicePrimaryCtxRelease) primary_ctx_release = nullptr;
  decltype(&::cuCtxSetCurrent) ctx_set_current = nullptr;
  decltype(&::cuCtxSynchronize) ctx_synchronize = nullptr;
  decltype(&::cuMemGetInfo) mem_get_info = nullptr;
  decltype(&::cuMemAlloc) mem_alloc = nullptr;
  decltype(&::cuMemFree) mem_free = nullptr;
  decltype(&::cuMemHostAlloc) mem_host_alloc = nullptr;
  decltype(&::cuMemFreeHost) mem_free_host = nullptr;
  decltype(&::cuMemHostGetDevicePointer) mem_host_get_device_pointer = nullptr;
  decltype(&::cuMemHostRegister) mem_host_register = nullptr;
  decltype(&::cuMemHostUnregister) mem_host_unregister = nullptr;
  decltype(&::cuMemcpyHtoD) memcpy_htod = nullptr;
  decltype(&::cuMemcpyDtoH) memcpy_dtoh = nullptr;
  decltype(&::cuMemcpyHtoDAsync) memcpy_htod_async = nullptr;
  decltype(&::cuMemcpyDtoHAsync) memcpy_dtoh_async = nullptr;
  decltype(&::cuMemcpyDtoDAsync) memcpy_dtod_async = nullptr;
  decltype(&::cuMemsetD8Async) memset_d8_async = nullptr;
  decltype(&::cuMemsetD16Async) memset_d16_async = nullptr;
  decltype(&::cuMemsetD32Async) memset_d32_async = nullptr;
  decltype(&::cuStreamCreate) stream_create = nullptr;
  decltype(&::cuStreamDestroy) stream_destroy = nullptr;
  decltype(&::cuStreamSynchronize) stream_synchronize = nullptr;
  decltype(&::cuStreamQuery) stream_query = nullptr;
  decltype(&::cuEventCreate) event_create = nullptr;
  decltype(&::cuEventDestroy) event_destroy = nullptr;
  decltype(&::cuEventRecord) event_record = nullptr;
  decltype(&::cuEventSynchronize) event_synchronize = nullptr;
  decltype(&::cuEventElapsedTime) event_elapsed_time = nullptr;
  decltype(&::cuModuleLoadData) module_load_data = nullptr;
  decltype(&::cuModuleUnload) module_unload = nullptr;
  decltype(&::cuModuleGetFunction) module_get_function = nullptr;
  decltype(&::cuLaunchKernel) launch_kernel = nullptr;
  decltype(&::cuFuncGetParamInfo) func_get_param_info = nullptr;  // optional (driver >= 12.4): null when absent
};

struct NvrtcApi {
  decltype(&::nvrtcVersion) version = nullptr;
  decltype(&::nvrtcGetErrorString) get_error_string = nullptr;
  decltype(&::nvrtcCreateProgram) create_program = nullptr;
  decltype(&::nvrtcDestroyProgram) destroy_program = nullptr;
  decltype(&::nvrtcCompileProgram) compile_program = nullptr;
  decltype(&::nvrtcGetProgramLogSize) get_program_log_size = nullptr;
  decltype(&::nvrtcGetProgramLog) get_program_log = nullptr;
  decltype(&::nvrtcGetCUBINSize) get_cubin_size = nullptr;
  decltype(&::nvrtcGetCUBIN) get_cubin = nullptr;
};

struct CublasApi {
  cublasStatus_t (*create)(cublasHandle_t*) = nullptr;
  cublasStatus_t (*destroy)(cublasHandle_t) = nullptr;
  cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t) = nullptr;
  cublasStatus_t (*gemm_strided_batched_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                            const void*, const void*, cudaDataType, int, long long int, const void*,
                                            cudaDataType, int, long long int, const void*, void*, cudaDataType, int,
                                            long long int, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
  const char* (*get_status_string)(cublasStatus_t) = nullptr;
};

// The loaded tables, or Unavailable saying which library (or symbol) is missing. The driver API is also initialised
// (cuInit) on first use.
Result<const DriverApi*> driver_api();
Result<const NvrtcApi*> nvrtc_api();
Result<const CublasApi*> cublas_api();

// "CUDA_ERROR_OUT_OF_MEMORY: out of memory", or the number when the driver cannot name it.
std::string cu_error_text(CUresult result);
// The hxrt code of a driver error: invalid values/handles → InvalidArgument, allocation failures → OutOfMemory,
// no device / no driver → Unavailable, faults that poison the context → Internal, the rest → Internal.
StatusCode cu_status_code(CUresult result);
// OK for CUDA_SUCCESS, else a Status naming `call` and the error.
Status cu_status(CUresult result, std::string_view call);
// True for the errors after which the CUDA context cannot be used any more (illegal address, launch failure, ...).
bool cu_context_lost(CUresult result);

#define HXRT_CU_RETURN_IF_ERROR(call_expr, call_name)                                            \
  do {                                                                                           \
    const CUresult hxrt_cu_err_ = (call_expr);                                                   \
    if (hxrt_cu_err_ != CUDA_SUCCESS) return ::hxrt::hal::cuda::cu_status(hxrt_cu_err_, call_name); \
  } while (false)

}  // namespace hxrt::hal::cuda
