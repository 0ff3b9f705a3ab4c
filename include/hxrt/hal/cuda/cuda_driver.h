// The CUDA driver: every NVIDIA GPU the CUDA driver library reports, behind the HAL contracts. Nothing here includes
// CUDA headers, and hxrt links no CUDA library: the driver library (libcuda.so.1), NVRTC and cuBLAS are loaded at run
// time, so one hxrt binary runs on machines with and without a GPU. Where libcuda is absent or cuInit fails,
// available() says Unavailable and why; nothing else fails. The driver is compiled in when CMake finds the CUDA
// toolkit's headers (make_cuda_driver() otherwise returns a driver that reports Unavailable).
//
// Devices. One device = the GPU's primary context (shared with cuBLAS and any CUDA runtime code in the process).
// DeviceInfo comes from cuDeviceGetAttribute: compute_units are SMs, min_alignment 256 bytes, features "sm_90",
// "tensor_cores", ...; host_addressable stays false (kernels could read mapped host memory, but over the bus: weights
// are copied to device memory).
//
// Buffers. kDevice = cuMemAlloc; kHostPinned = cuMemHostAlloc (page-locked, host_address() set); kHostMapped =
// cuMemHostAlloc with DEVICEMAP (host_address() set, kernels address it too: the zero-copy path). register_host is
// Unimplemented, as on every device whose host_addressable is false. native_handle() is the CUdeviceptr. Pinned and mapped memory is coherent: flush()/invalidate() succeed
// and do nothing. map() of device memory copies the range to a host staging allocation; unmap() of a writable mapping
// copies it back.
//
// Streams. Host-queued streams (hal/host_queued_stream.h) with asynchronous submission: the stream's worker submits
// each command to its own CUstream without waiting and awaits the device only at event records, host callbacks,
// cross-stream waits and when idle (Note [Asynchronous submission]). An event's timestamp is a CUevent's time mapped
// onto the host steady clock. Each stream has two control words in mapped pinned memory: ctl[0] becomes non-zero when
// the stream is aborted, and a kernel that stores a StatusCode value (1..12) into ctl[1] fails the stream with that
// code. A kernel declared with one parameter more than its launch passes gets `volatile int* ctl` there, and its
// launch is awaited before the next command is submitted (Note [CUDA stream submission]).
// A device fault (an illegal address) poisons the CUDA context for the whole process (CUDA's rule): the stream fails
// with Internal and says so, and every later CUDA call fails until the process restarts.
//
// Kernels. Device::load_module compiles ModuleSource::kCudaCpp with NVRTC for the device's architecture (cubin), or
// loads kPtx / kBinary (cubin, fatbin) as they are. Module::kernel(name) takes the function's name (extern "C").
// Launch: grid and block as given, shared_bytes of dynamic shared memory; a buffer argument is the CUdeviceptr of its
// view's first byte (any offset), a scalar is passed by its bytes. ModuleSource::kLibrary with name "cublas" gives the
// cuBLAS entry points (CublasGemm below).
//
// JIT cache. Cubins are cached in memory per device and on disk, keyed by the architecture, NVRTC's version, the
// options and a hash of the source, in CudaDriverOptions::cache_dir, else $HXRT_CACHE_DIR/cuda, else
// $XDG_CACHE_HOME/hxrt/cuda, else ~/.cache/hxrt/cuda. A cubin that fails to load is rebuilt and replaced.
//
// Thread-safety: thread-safe (see Device/Stream/Event).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <memory>
#include <string>
#include <string_view>

#include "hxrt/hal/driver.h"

namespace hxrt::hal {

struct CudaDriverOptions {
  // Directory of the on-disk cubin cache; empty = the environment/default chain above.
  std::string cache_dir;
  // False keeps compiled modules in memory only.
  bool disk_cache = true;
  // Await the device after every launch, so that a kernel's failure names exactly that kernel (as
  // CUDA_LAUNCH_BLOCKING=1 does for the runtime API); slower. The environment variable HXRT_CUDA_SYNC=1 sets it too.
  bool synchronous = false;
  // The CUDA emulator instead of the GPU: one device, "CUDA emulator (host CPU)", that compiles each module's CUDA C++
  // with the host's C++ compiler and runs its kernels on the CPU (Note [CUDA emulation] in
  // src/hal/cuda/cuda_emulator.cc). For testing hxrt's CUDA kernels on machines without a GPU; slow. The environment
  // variable HXRT_CUDA_EMULATOR=1 sets it too. Its cache is <cache_dir>/emulator, else $HXRT_CACHE_DIR/cuda-emulator,
  // else ~/.cache/hxrt/cuda-emulator.
  bool emulate = false;
};

std::unique_ptr<Driver> make_cuda_driver(const CudaDriverOptions& options = {});

// NVRTC without a device: compiles CUDA C++ for `arch` ("sm_90") to a cubin, as load_module does. For build checks
// and tools on machines without a GPU; Unavailable when NVRTC cannot be loaded, InvalidArgument with the compiler's
// log when the source does not compile.
struct CudaCompiled {
  std::string cubin;
  std::string log;  // NVRTC's log (warnings), possibly empty
  double compile_ms = 0.0;
};
Result<CudaCompiled> cuda_compile(std::string_view name, std::string_view source, std::string_view options,
                                  std::string_view arch);
// NVRTC's version "13.0", or Unavailable.
Result<std::string> nvrtc_version();

// The cuBLAS library module (ModuleSource{.language = kLibrary, .name = "cublas"}) has one kernel, "gemm", launched
// with the arguments cublas_gemm_args() makes (the launch config is ignored). It computes, for each of `batch` matrices, C = alpha · op(A) · op(B) + beta · C in row-major terms: op(A) is m×k,
// op(B) is k×n, C is m×n, each matrix contiguous, the next one `stride_*` elements further.
struct CublasGemm {
  enum class Type : uint8_t { kF32, kF16, kBF16 };  // element type of A, B and C; accumulation is always f32
  int32_t m = 0, n = 0, k = 0;
  int32_t batch = 1;
  // Elements between consecutive matrices of a batch (0 broadcasts one matrix to every batch entry).
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  bool trans_a = false;  // A is stored k×m
  bool trans_b = false;  // B is stored n×k
  Type type = Type::kF32;
  bool allow_tf32 = false;  // f32 GEMMs may use TF32 tensor cores
  float alpha = 1.0f, beta = 0.0f;
};
inline constexpr size_t kCublasGemmArgs = 7;
// A, B, C, then the parameters packed into four scalars (a KernelArg scalar holds at most 16 bytes).
std::array<KernelArg, kCublasGemmArgs> cublas_gemm_args(BufferView a, BufferView b, BufferView c,
                                                        const CublasGemm& gemm);
// The parameters back from a launch's arguments; InvalidArgument when they are not what cublas_gemm_args made.
Result<CublasGemm> cublas_gemm_from_args(std::span<const KernelArg> args);

}  // namespace hxrt::hal
