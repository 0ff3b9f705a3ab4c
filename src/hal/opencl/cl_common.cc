#include "hal/opencl/cl_common.h"

#include <array>

namespace hxrt::hal::opencl {
namespace {

struct ClErrorName {
  cl_int code;
  const char* name;
};

constexpr std::array<ClErrorName, 62> kClErrorNames = {{
    {CL_DEVICE_NOT_FOUND, "CL_DEVICE_NOT_FOUND"},
    {CL_DEVICE_NOT_AVAILABLE, "CL_DEVICE_NOT_AVAILABLE"},
    {CL_COMPILER_NOT_AVAILABLE, "CL_COMPILER_NOT_AVAILABLE"},
    {CL_MEM_OBJECT_ALLOCATION_FAILURE, "CL_MEM_OBJECT_ALLOCATION_FAILURE"},
    {CL_OUT_OF_RESOURCES, "CL_OUT_OF_RESOURCES"},
    {CL_OUT_OF_HOST_MEMORY, "CL_OUT_OF_HOST_MEMORY"},
    {CL_PROFILING_INFO_NOT_AVAILABLE, "CL_PROFILING_INFO_NOT_AVAILABLE"},
    {CL_MEM_COPY_OVERLAP, "CL_MEM_COPY_OVERLAP"},
    {CL_IMAGE_FORMAT_MISMATCH, "CL_IMAGE_FORMAT_MISMATCH"},
    {CL_IMAGE_FORMAT_NOT_SUPPORTED, "CL_IMAGE_FORMAT_NOT_SUPPORTED"},
    {CL_BUILD_PROGRAM_FAILURE, "CL_BUILD_PROGRAM_FAILURE"},
    {CL_MAP_FAILURE, "CL_MAP_FAILURE"},
    {CL_MISALIGNED_SUB_BUFFER_OFFSET, "CL_MISALIGNED_SUB_BUFFER_OFFSET"},
    {CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST, "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST"},
    {CL_COMPILE_PROGRAM_FAILURE, "CL_COMPILE_PROGRAM_FAILURE"},
    {CL_LINKER_NOT_AVAILABLE, "CL_LINKER_NOT_AVAILABLE"},
    {CL_LINK_PROGRAM_FAILURE, "CL_LINK_PROGRAM_FAILURE"},
    {CL_DEVICE_PARTITION_FAILED, "CL_DEVICE_PARTITION_FAILED"},
    {CL_KERNEL_ARG_INFO_NOT_AVAILABLE, "CL_KERNEL_ARG_INFO_NOT_AVAILABLE"},
    {CL_INVALID_VALUE, "CL_INVALID_VALUE"},
    {CL_INVALID_DEVICE_TYPE, "CL_INVALID_DEVICE_TYPE"},
    {CL_INVALID_PLATFORM, "CL_INVALID_PLATFORM"},
    {CL_INVALID_DEVICE, "CL_INVALID_DEVICE"},
    {CL_INVALID_CONTEXT, "CL_INVALID_CONTEXT"},
    {CL_INVALID_QUEUE_PROPERTIES, "CL_INVALID_QUEUE_PROPERTIES"},
    {CL_INVALID_COMMAND_QUEUE, "CL_INVALID_COMMAND_QUEUE"},
    {CL_INVALID_HOST_PTR, "CL_INVALID_HOST_PTR"},
    {CL_INVALID_MEM_OBJECT, "CL_INVALID_MEM_OBJECT"},
    {CL_INVALID_IMAGE_FORMAT_DESCRIPTOR, "CL_INVALID_IMAGE_FORMAT_DESCRIPTOR"},
    {CL_INVALID_IMAGE_SIZE, "CL_INVALID_IMAGE_SIZE"},
    {CL_INVALID_SAMPLER, "CL_INVALID_SAMPLER"},
    {CL_INVALID_BINARY, "CL_INVALID_BINARY"},
    {CL_INVALID_BUILD_OPTIONS, "CL_INVALID_BUILD_OPTIONS"},
    {CL_INVALID_PROGRAM, "CL_INVALID_PROGRAM"},
    {CL_INVALID_PROGRAM_EXECUTABLE, "CL_INVALID_PROGRAM_EXECUTABLE"},
    {CL_INVALID_KERNEL_NAME, "CL_INVALID_KERNEL_NAME"},
    {CL_INVALID_KERNEL_DEFINITION, "CL_INVALID_KERNEL_DEFINITION"},
    {CL_INVALID_KERNEL, "CL_INVALID_KERNEL"},
    {CL_INVALID_ARG_INDEX, "CL_INVALID_ARG_INDEX"},
    {CL_INVALID_ARG_VALUE, "CL_INVALID_ARG_VALUE"},
    {CL_INVALID_ARG_SIZE, "CL_INVALID_ARG_SIZE"},
    {CL_INVALID_KERNEL_ARGS, "CL_INVALID_KERNEL_ARGS"},
    {CL_INVALID_WORK_DIMENSION, "CL_INVALID_WORK_DIMENSION"},
    {CL_INVALID_WORK_GROUP_SIZE, "CL_INVALID_WORK_GROUP_SIZE"},
    {CL_INVALID_WORK_ITEM_SIZE, "CL_INVALID_WORK_ITEM_SIZE"},
    {CL_INVALID_GLOBAL_OFFSET, "CL_INVALID_GLOBAL_OFFSET"},
    {CL_INVALID_EVENT_WAIT_LIST, "CL_INVALID_EVENT_WAIT_LIST"},
    {CL_INVALID_EVENT, "CL_INVALID_EVENT"},
    {CL_INVALID_OPERATION, "CL_INVALID_OPERATION"},
    {CL_INVALID_GL_OBJECT, "CL_INVALID_GL_OBJECT"},
    {CL_INVALID_BUFFER_SIZE, "CL_INVALID_BUFFER_SIZE"},
    {CL_INVALID_MIP_LEVEL, "CL_INVALID_MIP_LEVEL"},
    {CL_INVALID_GLOBAL_WORK_SIZE, "CL_INVALID_GLOBAL_WORK_SIZE"},
    {CL_INVALID_PROPERTY, "CL_INVALID_PROPERTY"},
    {CL_INVALID_IMAGE_DESCRIPTOR, "CL_INVALID_IMAGE_DESCRIPTOR"},
    {CL_INVALID_COMPILER_OPTIONS, "CL_INVALID_COMPILER_OPTIONS"},
    {CL_INVALID_LINKER_OPTIONS, "CL_INVALID_LINKER_OPTIONS"},
    {CL_INVALID_DEVICE_PARTITION_COUNT, "CL_INVALID_DEVICE_PARTITION_COUNT"},
    {CL_INVALID_PIPE_SIZE, "CL_INVALID_PIPE_SIZE"},
    {CL_INVALID_DEVICE_QUEUE, "CL_INVALID_DEVICE_QUEUE"},
    {CL_INVALID_SPEC_ID, "CL_INVALID_SPEC_ID"},
    {CL_MAX_SIZE_RESTRICTION_EXCEEDED, "CL_MAX_SIZE_RESTRICTION_EXCEEDED"},
}};

// cl_icd.h's CL_PLATFORM_NOT_FOUND_KHR, returned by the ICD loader when no platform is installed.
constexpr cl_int kPlatformNotFoundKhr = -1001;

}  // namespace

std::string cl_error_name(cl_int code) {
  if (code == CL_SUCCESS) return "CL_SUCCESS";
  if (code == kPlatformNotFoundKhr) return "CL_PLATFORM_NOT_FOUND_KHR";
  for (const ClErrorName& entry : kClErrorNames) {
    if (entry.code == code) return entry.name;
  }
  return fmt::format("CL_ERROR({})", code);
}

StatusCode cl_status_code(cl_int code) {
  switch (code) {
    case CL_SUCCESS: return StatusCode::kOk;
    case CL_DEVICE_NOT_FOUND:
    case CL_DEVICE_NOT_AVAILABLE:
    case CL_COMPILER_NOT_AVAILABLE:
    case CL_LINKER_NOT_AVAILABLE:
    case CL_DEVICE_PARTITION_FAILED:
    case kPlatformNotFoundKhr: return StatusCode::kUnavailable;
    case CL_MEM_OBJECT_ALLOCATION_FAILURE:
    case CL_OUT_OF_RESOURCES:
    case CL_OUT_OF_HOST_MEMORY: return StatusCode::kOutOfMemory;
    case CL_BUILD_PROGRAM_FAILURE:
    case CL_COMPILE_PROGRAM_FAILURE:
    case CL_LINK_PROGRAM_FAILURE:
    case CL_MEM_COPY_OVERLAP:
    case CL_MISALIGNED_SUB_BUFFER_OFFSET:
    case CL_IMAGE_FORMAT_MISMATCH: return StatusCode::kInvalidArgument;
    case CL_IMAGE_FORMAT_NOT_SUPPORTED: return StatusCode::kUnimplemented;
    case CL_PROFILING_INFO_NOT_AVAILABLE:
    case CL_KERNEL_ARG_INFO_NOT_AVAILABLE: return StatusCode::kFailedPrecondition;
    case CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST: return StatusCode::kAborted;
    default: break;
  }
  // CL_INVALID_VALUE (-30) down to CL_INVALID_SPEC_ID (-71) and CL_MAX_SIZE_RESTRICTION_EXCEEDED (-72).
  if (code <= CL_INVALID_VALUE && code >= CL_MAX_SIZE_RESTRICTION_EXCEEDED) return StatusCode::kInvalidArgument;
  return StatusCode::kInternal;
}

Status cl_status(cl_int code, std::string_view call) {
  if (code == CL_SUCCESS) return ok_status();
  return Status(cl_status_code(code), fmt::format("{} failed: {} ({})", call, cl_error_name(code), code));
}

std::string device_info_string(cl_device_id device, cl_device_info param) {
  size_t bytes = 0;
  if (clGetDeviceInfo(device, param, 0, nullptr, &bytes) != CL_SUCCESS || bytes == 0) return {};
  std::string value(bytes, '\0');
  if (clGetDeviceInfo(device, param, bytes, value.data(), nullptr) != CL_SUCCESS) return {};
  while (!value.empty() && (value.back() == '\0' || value.back() == ' ')) value.pop_back();
  return value;
}

std::string platform_info_string(cl_platform_id platform, cl_platform_info param) {
  size_t bytes = 0;
  if (clGetPlatformInfo(platform, param, 0, nullptr, &bytes) != CL_SUCCESS || bytes == 0) return {};
  std::string value(bytes, '\0');
  if (clGetPlatformInfo(platform, param, bytes, value.data(), nullptr) != CL_SUCCESS) return {};
  while (!value.empty() && (value.back() == '\0' || value.back() == ' ')) value.pop_back();
  return value;
}

Result<std::vector<ClDeviceId>> enumerate_cl_devices() {
  cl_uint platform_count = 0;
  const cl_int err = clGetPlatformIDs(0, nullptr, &platform_count);
  if (err != CL_SUCCESS || platform_count == 0) {
    return unavailable("opencl: the ICD loader found no OpenCL platform ({}); install an ICD such as PoCL",
                       err == CL_SUCCESS ? std::string("0 platforms") : cl_error_name(err));
  }
  std::vector<cl_platform_id> platforms(platform_count);
  HXRT_CL_RETURN_IF_ERROR(clGetPlatformIDs(platform_count, platforms.data(), nullptr), "clGetPlatformIDs");
  std::vector<ClDeviceId> devices;
  for (cl_platform_id platform : platforms) {
    cl_uint count = 0;
    if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &count) != CL_SUCCESS || count == 0) continue;
    std::vector<cl_device_id> ids(count);
    if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, count, ids.data(), nullptr) != CL_SUCCESS) continue;
    for (cl_device_id id : ids) devices.push_back(ClDeviceId{platform, id});
  }
  if (devices.empty()) {
    return unavailable("opencl: {} platform(s) found but none has a device", platform_count);
  }
  return devices;
}

}  // namespace hxrt::hal::opencl
