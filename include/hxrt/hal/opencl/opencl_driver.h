// The OpenCL driver: every device of every OpenCL platform the ICD loader finds (PoCL's CPU device on CI), behind
// the HAL contracts. Nothing here includes CL headers; the driver is compiled in when CMake finds an OpenCL ICD
// loader, and make_opencl_driver() otherwise returns a driver that reports Unavailable.
//
// Devices. One cl_context per opened device. DeviceInfo comes from clGetDeviceInfo (min_alignment is
// CL_DEVICE_MEM_BASE_ADDR_ALIGN in bytes, host_addressable is CL_DEVICE_HOST_UNIFIED_MEMORY, features are the
// device's extensions). unified_memory stays false: kDevice buffers are reached only through copies and map().
//
// Buffers. kDevice = clCreateBuffer; kHostPinned and kHostMapped = CL_MEM_ALLOC_HOST_PTR, mapped once for the
// buffer's life on host-unified devices (host_address() is then non-null); register_host = CL_MEM_USE_HOST_PTR.
// native_handle() is the cl_mem. Kernel arguments with a non-zero offset become sub-buffers, so a view's offset
// must be a multiple of min_alignment (the caching allocator's blocks are); other offsets are InvalidArgument.
//
// Streams. Each stream holds its commands in a host-side queue drained by one submitter thread, which hands a
// command to the stream's in-order, profiling-enabled cl_command_queue only after the previous one completed. So
// abort() discards exactly the commands not yet running, cross-stream waits are host-side (bounded and
// interruptible), and an event record is a marker whose CL_PROFILING_COMMAND_END, mapped onto the host steady
// clock, is the event's timestamp. See Note [OpenCL stream submission] in src/hal/opencl/opencl_stream.cc.
//
// Kernels (Device::load_module with ModuleSource::kOpenCLC). Module::kernel(name) takes the OpenCL function name;
// Kernel::name() is "<module>.<function>". Launch: global size = grid * block, local size = block; buffer
// arguments are cl_mem (sub-buffers for offsets), scalars are passed by bytes. A kernel may declare one parameter
// more than the launch passes, last, as `__global volatile int* ctl`: the stream then passes its control words —
// ctl[0] becomes non-zero when the stream is aborted (long kernels poll it and return; host-unified devices only),
// and a kernel that stores a StatusCode value (1..12, the C ABI numbering in status.h) into ctl[1] fails its
// stream with that code.
//
// JIT cache. Programs are cached in memory per device and on disk as program binaries, keyed by device name,
// driver version, build options and source hash. The directory is OpenClDriverOptions::cache_dir, else
// $HXRT_CACHE_DIR/opencl, else $XDG_CACHE_HOME/hxrt/opencl, else ~/.cache/hxrt/opencl. A binary that fails to load
// (driver upgrade, corrupt file) is rebuilt from source and replaced; writing the cache is best effort.
//
// Thread-safety: thread-safe (see Device/Stream/Event).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "hxrt/hal/driver.h"

namespace hxrt::hal {

struct OpenClDriverOptions {
  // Directory of the on-disk program cache; empty = the environment/default chain above.
  std::string cache_dir;
  // False keeps the program cache in memory only (tests, read-only file systems).
  bool disk_cache = true;
};

std::unique_ptr<Driver> make_opencl_driver(const OpenClDriverOptions& options = {});

// How a module's program was obtained, and what it cost.
struct OpenClModuleStats {
  enum class Origin : uint8_t { kCompiled, kMemoryCache, kDiskCache };
  Origin origin = Origin::kCompiled;
  double build_ms = 0.0;      // wall time of load_module's compile or binary load
  uint64_t binary_bytes = 0;  // size of the device binary (0 when the driver gives none)
  std::string cache_key;      // hex key of the cache entry
  bool cache_hit() const { return origin != Origin::kCompiled; }
};

// The statistics of a module made by an OpenCL device; InvalidArgument for any other module.
Result<OpenClModuleStats> opencl_module_stats(const Module& module);

}  // namespace hxrt::hal
