// CPU kernels: C++ functions launched on CPU streams.
//
// A CpuKernel wraps a function that receives a CpuLaunchContext: the launch config, the arguments with buffer
// views resolved to host addresses, the device's intra-op ThreadPool, and a cancellation flag raised by
// Stream::abort() (long kernels should poll it). The function returns OK or a Status; a failure makes the stream
// fail (see stream.h).
//
// Thread-safety: a CpuKernel is immutable; its function may run on several streams at once and must be reentrant.
#pragma once

#include <atomic>
#include <functional>
#include <span>
#include <string>

#include "hxrt/base/status.h"
#include "hxrt/base/thread_pool.h"
#include "hxrt/hal/kernel.h"

namespace hxrt::hal {

class CpuLaunchContext {
 public:
  CpuLaunchContext(const LaunchConfig& config, std::span<const KernelArg> args, ThreadPool& pool,
                   const std::atomic<bool>& cancel)
      : config_(config), args_(args), pool_(pool), cancel_(cancel) {}

  const LaunchConfig& config() const { return config_; }
  std::span<const KernelArg> args() const { return args_; }
  size_t num_args() const { return args_.size(); }
  ThreadPool& pool() const { return pool_; }
  bool cancelled() const { return cancel_.load(std::memory_order_relaxed); }
  const std::atomic<bool>& cancel_flag() const { return cancel_; }

  // Host address of buffer argument `index` (aborts when the argument is not a buffer).
  template <typename T = void>
  T* buffer(size_t index) const {
    return static_cast<T*>(args_[index].view().host_address());
  }
  uint64_t buffer_bytes(size_t index) const { return args_[index].view().size; }
  template <typename T>
  T scalar(size_t index) const {
    return args_[index].scalar_as<T>();
  }
  template <typename T>
  const T* host_pointer(size_t index) const {
    return static_cast<const T*>(args_[index].host_pointer());
  }

 private:
  const LaunchConfig& config_;
  std::span<const KernelArg> args_;
  ThreadPool& pool_;
  const std::atomic<bool>& cancel_;
};

using CpuKernelFn = std::function<Status(const CpuLaunchContext&)>;

class CpuKernel final : public Kernel {
 public:
  CpuKernel(std::string name, CpuKernelFn fn) : Kernel(std::move(name), DeviceKind::kCpu), fn_(std::move(fn)) {}
  Status run(const CpuLaunchContext& context) const { return fn_(context); }

 private:
  CpuKernelFn fn_;
};

}  // namespace hxrt::hal
