// CUDA streams: host-queued streams (hal/host_queued_stream.h) with asynchronous submission, whose worker submits each
// command to one CUstream and awaits it only where the contract needs completion (Note [CUDA stream submission] in
// cuda_stream.cc).
//
// Thread-safety: thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hal/cuda/cuda_api.h"
#include "hal/cuda/cuda_module.h"
#include "hal/host_queued_stream.h"

namespace hxrt::hal::cuda {

class CudaDevice;

class CudaStream final : public HostQueuedStream {
 public:
  static Result<std::unique_ptr<Stream>> create(CudaDevice* device, std::string name);
  ~CudaStream() override;

  CUstream handle() const { return stream_; }
  // The stream's cuBLAS handle, created on first use (worker thread only).
  Result<cublasHandle_t> cublas_handle();

 protected:
  Status prepare(Command& command) override;
  Status execute_launch(Command& command) override;
  Status execute_copy(Command& command) override;
  Status execute_fill(Command& command) override;
  Result<int64_t> execute_record() override;
  void on_cancel(bool cancelled) override;
  Status await_device() override;

 private:
  // A launch resolved at enqueue: the kernel's parameter bytes (device pointers and scalars) and pointers to each.
  struct LaunchPayload final : DriverPayload {
    const CudaKernel* kernel = nullptr;          // a compiled kernel, or
    const CudaLibraryKernel* library = nullptr;  // a library entry point (gets the original arguments)
    bool pass_ctl = false;  // the kernel takes the control words: it may fail or stop, so it is awaited
    std::vector<std::array<std::byte, KernelArg::kMaxScalarBytes>> values;
    std::vector<void*> params;
  };
  // One side of a copy or fill: a device address, or host memory CUDA did not allocate.
  struct CuPlace {
    CUdeviceptr device = 0;
    char* host = nullptr;
  };
  struct CopyPayload final : DriverPayload {
    CuPlace dst;
    CuPlace src;
  };

  CudaStream(CudaDevice* device, std::string name, CUstream stream, CUevent record_event, volatile int32_t* ctl,
             CUdeviceptr ctl_device);

  Status prepare_launch(Command& command);
  Result<CuPlace> resolve(const Place& place, const char* what) const;
  Status make_current();

  CudaDevice* cuda_device_;
  CUstream stream_;
  CUevent record_event_;
  volatile int32_t* ctl_;    // two words in mapped pinned memory: [0] cancel (host writes), [1] kernel status
  CUdeviceptr ctl_device_;   // their device address
  cublasHandle_t cublas_ = nullptr;  // worker thread only
  // Worker thread only: what ran since the last await, for the error message of a failure found there.
  uint64_t launches_since_await_ = 0;
  const Kernel* last_launch_ = nullptr;
};

}  // namespace hxrt::hal::cuda
