// Kernels, their arguments and launch configurations.
//
// A Kernel is a device-specific entry point: a C++ function on the CPU device (hal/cpu/cpu_kernel.h), a
// compiled OpenCL/CUDA function obtained from a Module (Device::load_module) elsewhere. Kernels are owned by
// whoever created them (a Module, the kernel registry) and must outlive every launch that uses them.
//
// Thread-safety: Kernel and Module are immutable after creation; KernelArg and LaunchConfig are values.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "hxrt/base/check.h"
#include "hxrt/base/status.h"
#include "hxrt/hal/buffer.h"
#include "hxrt/hal/types.h"

namespace hxrt::hal {

// Grid of work: `grid` blocks of `block` threads (CUDA terms; OpenCL global = grid * block, local = block).
// The CPU device hands it to the kernel, which decides how to split work over the intra-op pool.
struct LaunchConfig {
  std::array<uint32_t, 3> grid{1, 1, 1};
  std::array<uint32_t, 3> block{1, 1, 1};
  uint32_t shared_bytes = 0;
};

class KernelArg {
 public:
  enum class Kind : uint8_t { kBuffer, kScalar, kHostPointer };
  static constexpr size_t kMaxScalarBytes = 16;

  static KernelArg buffer(BufferView view) {
    KernelArg arg(Kind::kBuffer);
    arg.view_ = view;
    return arg;
  }
  template <typename T>
  static KernelArg scalar(const T& value) {
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= kMaxScalarBytes, "scalar too large");
    KernelArg arg(Kind::kScalar);
    std::memcpy(arg.bytes_.data(), &value, sizeof(T));
    arg.scalar_size_ = sizeof(T);
    return arg;
  }
  // An opaque host pointer (CPU kernels only): parameters owned by the caller that outlive the launch.
  static KernelArg host_pointer(const void* pointer) {
    KernelArg arg(Kind::kHostPointer);
    arg.host_pointer_ = pointer;
    return arg;
  }

  Kind kind() const { return kind_; }
  const BufferView& view() const {
    HXRT_CHECK(kind_ == Kind::kBuffer, "kernel argument is not a buffer");
    return view_;
  }
  std::span<const std::byte> scalar_bytes() const { return {bytes_.data(), scalar_size_}; }
  template <typename T>
  T scalar_as() const {
    HXRT_CHECK(kind_ == Kind::kScalar && scalar_size_ == sizeof(T), "kernel argument is not a {}-byte scalar",
               sizeof(T));
    T value;
    std::memcpy(&value, bytes_.data(), sizeof(T));
    return value;
  }
  const void* host_pointer() const {
    HXRT_CHECK(kind_ == Kind::kHostPointer, "kernel argument is not a host pointer");
    return host_pointer_;
  }

 private:
  explicit KernelArg(Kind kind) : kind_(kind) {}
  Kind kind_;
  uint8_t scalar_size_ = 0;
  BufferView view_;
  const void* host_pointer_ = nullptr;
  std::array<std::byte, kMaxScalarBytes> bytes_{};
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  Kernel(const Kernel&) = delete;
  Kernel& operator=(const Kernel&) = delete;

  const std::string& name() const { return name_; }
  DeviceKind device_kind() const { return device_kind_; }

 protected:
  Kernel(std::string name, DeviceKind kind) : name_(std::move(name)), device_kind_(kind) {}

 private:
  std::string name_;
  DeviceKind device_kind_;
};

// Source (or binary) for JIT-compiled kernels, or the name of a vendor library whose entry points a device offers as
// kernels (kLibrary: `name` chooses the library, e.g. "cublas" on cuda; `code` and `options` are unused).
struct ModuleSource {
  enum class Language : uint8_t { kOpenCLC, kCudaCpp, kPtx, kBinary, kLibrary };
  Language language = Language::kOpenCLC;
  std::string name;     // for diagnostics and cache keys
  std::string code;     // source text or binary bytes
  std::string options;  // build options, e.g. "-D TILE_M=64"
};

class Module {
 public:
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  // The kernel named `name`, owned by the module; NotFound lists the names the module has.
  virtual Result<const Kernel*> kernel(std::string_view name) const = 0;

 protected:
  Module() = default;
};

}  // namespace hxrt::hal
