// OpenCL includes and the helpers every file of the OpenCL driver shares: CL error codes to Status, owning handles
// for CL objects, and typed clGet*Info wrappers.
//
// Thread-safety: free functions are thread-safe; ClHandle is thread-compatible.
#pragma once

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 300
#endif
#include <CL/cl.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hxrt/base/status.h"

namespace hxrt::hal::opencl {

// "CL_OUT_OF_RESOURCES", or "CL_ERROR(<code>)" for codes this table does not know.
std::string cl_error_name(cl_int code);
// The hxrt code for a CL error: CL_INVALID_* and build failures → InvalidArgument, allocation failures and
// CL_OUT_OF_RESOURCES → OutOfMemory, missing devices/compilers → Unavailable, the rest → Internal.
StatusCode cl_status_code(cl_int code);
// A Status for `code` returned by `call` (e.g. "clCreateBuffer"), naming the CL error; OK for CL_SUCCESS.
Status cl_status(cl_int code, std::string_view call);

#define HXRT_CL_RETURN_IF_ERROR(call_expr, call_name)                                               \
  do {                                                                                              \
    const cl_int hxrt_cl_err_ = (call_expr);                                                        \
    if (hxrt_cl_err_ != CL_SUCCESS) return ::hxrt::hal::opencl::cl_status(hxrt_cl_err_, call_name); \
  } while (false)

// Owns one reference to a CL object (cl_mem, cl_event, cl_kernel, ...).
template <typename T, cl_int (*Release)(T), cl_int (*Retain)(T)>
class ClHandle {
 public:
  ClHandle() = default;
  explicit ClHandle(T object) : object_(object) {}  // adopts a reference
  ~ClHandle() { reset(); }
  ClHandle(const ClHandle& other) : object_(other.object_) {
    if (object_ != nullptr) Retain(object_);
  }
  ClHandle& operator=(const ClHandle& other) {
    if (this != &other) {
      reset();
      object_ = other.object_;
      if (object_ != nullptr) Retain(object_);
    }
    return *this;
  }
  ClHandle(ClHandle&& other) noexcept : object_(std::exchange(other.object_, nullptr)) {}
  ClHandle& operator=(ClHandle&& other) noexcept {
    if (this != &other) {
      reset();
      object_ = std::exchange(other.object_, nullptr);
    }
    return *this;
  }

  T get() const { return object_; }
  T* out() {  // for APIs that return the object through a pointer
    reset();
    return &object_;
  }
  explicit operator bool() const { return object_ != nullptr; }
  void reset() {
    if (object_ != nullptr) Release(std::exchange(object_, nullptr));
  }

 private:
  T object_ = nullptr;
};

using ClMem = ClHandle<cl_mem, clReleaseMemObject, clRetainMemObject>;
using ClEvent = ClHandle<cl_event, clReleaseEvent, clRetainEvent>;
using ClKernelHandle = ClHandle<cl_kernel, clReleaseKernel, clRetainKernel>;
using ClProgram = ClHandle<cl_program, clReleaseProgram, clRetainProgram>;
using ClQueue = ClHandle<cl_command_queue, clReleaseCommandQueue, clRetainCommandQueue>;
using ClContext = ClHandle<cl_context, clReleaseContext, clRetainContext>;

// Typed clGetDeviceInfo; the value-initialised T when the query fails.
template <typename T>
T device_info(cl_device_id device, cl_device_info param) {
  T value{};
  if (clGetDeviceInfo(device, param, sizeof(T), &value, nullptr) != CL_SUCCESS) return T{};
  return value;
}
std::string device_info_string(cl_device_id device, cl_device_info param);
std::string platform_info_string(cl_platform_id platform, cl_platform_info param);

// Every device of every platform, in platform order (the driver's ordinals). Unavailable when there is none.
struct ClDeviceId {
  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
};
Result<std::vector<ClDeviceId>> enumerate_cl_devices();

}  // namespace hxrt::hal::opencl
