// Buffer: one device allocation, and BufferView: a byte range of one.
//
// A Buffer is created by Device::allocate or Device::register_host and freed when its owner destroys it; it must
// outlive every stream command that uses it. The caching allocator (memory/) sub-allocates large Buffers, so most
// tensors are BufferViews (buffer + offset + size), never raw pointers: an OpenCL buffer has no host address.
//
// Host access:
//  - host_address() is non-null when the bytes are directly addressable from the host (CPU device, host-mapped
//    and host-pinned memory on backends that map them permanently).
//  - map()/unmap() give host access to any buffer that supports it; on the CPU device they return the address
//    itself.
//  - flush() makes host writes visible to the device, invalidate() makes device writes visible to the host. On a
//    coherent device both succeed and do nothing; callers still call them, so code stays correct on devices that
//    are not coherent.
//
// Thread-safety: a Buffer's properties are immutable; map/unmap/flush/invalidate are thread-safe.
#pragma once

#include <cstdint>

#include "hxrt/base/status.h"
#include "hxrt/hal/types.h"

namespace hxrt::hal {

class Device;

enum class MapAccess : uint8_t { kRead, kWrite, kReadWrite };

class Buffer {
 public:
  virtual ~Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  Device& device() const { return *device_; }
  uint64_t size() const { return size_; }
  MemoryKind kind() const { return kind_; }
  // True when the buffer wraps caller-owned host memory (Device::register_host); it never frees that memory.
  bool is_registered_host() const { return registered_host_; }
  // Host address of byte 0 when host-addressable without mapping, else nullptr.
  void* host_address() const { return host_address_; }
  // The backend's handle: the host pointer (cpu), cl_mem (opencl), CUdeviceptr (cuda).
  virtual uint64_t native_handle() const = 0;

  // Host access to [offset, offset + size). Fails with InvalidArgument/OutOfRange on a bad range, Unimplemented
  // where the backend cannot map this kind of memory.
  Result<void*> map(uint64_t offset, uint64_t size, MapAccess access);
  Status unmap(void* host_pointer);
  Status flush(uint64_t offset, uint64_t size);
  Status invalidate(uint64_t offset, uint64_t size);

 protected:
  Buffer(Device* device, uint64_t size, MemoryKind kind, void* host_address, bool registered_host)
      : device_(device), size_(size), kind_(kind), host_address_(host_address), registered_host_(registered_host) {}

  virtual Result<void*> do_map(uint64_t offset, uint64_t size, MapAccess access) = 0;
  virtual Status do_unmap(void* host_pointer) = 0;
  virtual Status do_flush(uint64_t offset, uint64_t size) = 0;
  virtual Status do_invalidate(uint64_t offset, uint64_t size) = 0;

 private:
  Status check_range(uint64_t offset, uint64_t size, const char* what) const;

  Device* device_;
  uint64_t size_;
  MemoryKind kind_;
  void* host_address_;
  bool registered_host_;
};

// A byte range of a Buffer. Views are cheap values; they do not own the buffer.
struct BufferView {
  Buffer* buffer = nullptr;
  uint64_t offset = 0;
  uint64_t size = 0;

  BufferView() = default;
  BufferView(Buffer& b) : buffer(&b), offset(0), size(b.size()) {}  // NOLINT(google-explicit-constructor)
  BufferView(Buffer* b, uint64_t off, uint64_t bytes) : buffer(b), offset(off), size(bytes) {}

  bool valid() const { return buffer != nullptr && offset <= buffer->size() && size <= buffer->size() - offset; }
  // Host address of byte `offset` when the buffer is host-addressable, else nullptr.
  void* host_address() const {
    return buffer && buffer->host_address() ? static_cast<char*>(buffer->host_address()) + offset : nullptr;
  }
  // A sub-range; aborts when it does not fit (programmer error).
  BufferView subview(uint64_t off, uint64_t bytes) const;
};

}  // namespace hxrt::hal
