// The CPU driver, device and buffers.
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <string>

#include "hal/signal_event.h"
#include "hal/cpu/cpu_stream.h"
#include "hal/memory_counters.h"
#include "hxrt/base/thread_pool.h"
#include "hxrt/hal/cpu/cpu_driver.h"
#include "hxrt/hal/driver.h"

namespace hxrt::hal::cpu {
namespace {

// Alignment of every CPU allocation: a cache line pair, enough for AVX-512 loads and for adjacent-line prefetch.
constexpr uint32_t kCpuAlignment = 128;
// Note [Mapped device buffers]
// Buffers of at least this size (the memory pool's segments, weights uploaded by copy, KV caches) are anonymous
// mappings of their own, unmapped when destroyed: their pages go back to the system at once, and they stay out of
// malloc's heap. Through malloc, the first such free raises glibc's dynamic mmap threshold to its size, after which
// same-sized buffers come from the heap and are kept by it when freed, so a pool trimmed after a prefill kept the
// process's resident memory at the prefill's peak (16 decoding sequences of SmolLM2: 220 MiB against 202 MiB).
// Smaller buffers stay with malloc, which serves their churn without a system call each.
constexpr uint64_t kMapThreshold = 256 * 1024;

uint64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page_size > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size) : 0;
}

std::string cpu_model_name() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos && colon + 2 <= line.size()) return line.substr(colon + 2);
    }
  }
  return "host cpu";
}

std::vector<std::string> cpu_features() {
  std::vector<std::string> features;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2")) features.emplace_back("avx2");
  if (__builtin_cpu_supports("fma")) features.emplace_back("fma");
  // clang 14's __builtin_cpu_supports does not know "f16c": read CPUID leaf 1, ECX bit 29.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0) features.emplace_back("f16c");
  if (__builtin_cpu_supports("avx512f")) features.emplace_back("avx512f");
  if (__builtin_cpu_supports("avx512bw")) features.emplace_back("avx512bw");
  if (__builtin_cpu_supports("avx512vnni")) features.emplace_back("avx512vnni");
  if (__builtin_cpu_supports("avx512bf16")) features.emplace_back("avx512bf16");
#endif
  return features;
}

class CpuDevice;

class CpuBuffer final : public Buffer {
 public:
  CpuBuffer(CpuDevice* device, void* memory, uint64_t size, MemoryKind kind, bool registered);
  ~CpuBuffer() override;
  uint64_t native_handle() const override { return reinterpret_cast<uint64_t>(host_address()); }

 protected:
  Result<void*> do_map(uint64_t offset, uint64_t /*size*/, MapAccess /*access*/) override {
    return static_cast<void*>(static_cast<char*>(host_address()) + offset);
  }
  Status do_unmap(void* host_pointer) override {
    auto* begin = static_cast<char*>(host_address());
    auto* p = static_cast<char*>(host_pointer);
    if (p < begin || p >= begin + size()) return invalid_argument("unmap: pointer is not inside this buffer");
    return ok_status();
  }
  // Host and CPU device share one coherent memory: nothing to flush or invalidate.
  Status do_flush(uint64_t /*offset*/, uint64_t /*size*/) override { return ok_status(); }
  Status do_invalidate(uint64_t /*offset*/, uint64_t /*size*/) override { return ok_status(); }

 private:
  CpuDevice* cpu_device_;
};

class CpuDevice final : public Device {
 public:
  CpuDevice(Driver* driver, DeviceInfo info, const CpuDriverOptions& options)
      : Device(driver, std::move(info)),
        pool_(options.num_threads > 0 ? options.num_threads : ThreadPool::default_thread_count(), options.pool_spin),
        spin_(options.worker_spin) {}

  // The length a buffer's memory was obtained with (Note [Mapped device buffers]).
  static uint64_t rounded_size(uint64_t bytes) { return (bytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment; }
  DeviceMemoryStats memory_stats() const override { return counters_.stats(); }
  MemoryCounters& counters() { return counters_; }

 protected:
  Result<std::unique_ptr<Buffer>> do_allocate(uint64_t bytes, MemoryKind kind) override {
    const uint64_t rounded = rounded_size(bytes);
    void* memory = nullptr;
    if (rounded >= kMapThreshold) {
      void* mapped = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      memory = mapped == MAP_FAILED ? nullptr : mapped;  // page-aligned, so kCpuAlignment-aligned
    } else {
      memory = std::aligned_alloc(kCpuAlignment, rounded);
    }
    if (memory == nullptr) {
      const DeviceMemoryStats stats = counters_.stats();
      return out_of_memory("cpu device: the host could not allocate {} bytes ({} live buffers, {} bytes held)",
                           bytes, stats.live_buffers, stats.allocated_bytes);
    }
    return std::unique_ptr<Buffer>(std::make_unique<CpuBuffer>(this, memory, bytes, kind, false));
  }


  Result<std::unique_ptr<Buffer>> do_register_host(void* host_pointer, uint64_t bytes) override {
    return std::unique_ptr<Buffer>(
        std::make_unique<CpuBuffer>(this, host_pointer, bytes, MemoryKind::kHostMapped, true));
  }

  Result<std::unique_ptr<Stream>> do_create_stream(const StreamOptions& options) override {
    const uint64_t index = stream_counter_.fetch_add(1, std::memory_order_relaxed);
    std::string name = options.name.empty() ? fmt::format("stream{}", index) : options.name;
    return std::unique_ptr<Stream>(std::make_unique<CpuStream>(this, std::move(name), &pool_, spin_));
  }

  Result<std::unique_ptr<Event>> do_create_event() override {
    return std::unique_ptr<Event>(std::make_unique<SignalEvent>(this));
  }

  Result<std::unique_ptr<Module>> do_load_module(const ModuleSource& source) override {
    return unimplemented(
        "cpu device cannot compile kernel source (module '{}'); register a C++ function as a CpuKernel instead",
        source.name);
  }

 private:
  ThreadPool pool_;
  std::chrono::microseconds spin_;
  std::atomic<uint64_t> stream_counter_{0};
  MemoryCounters counters_;
};

CpuBuffer::CpuBuffer(CpuDevice* device, void* memory, uint64_t size, MemoryKind kind, bool registered)
    : Buffer(device, size, kind, memory, registered), cpu_device_(device) {
  cpu_device_->counters().on_created(size, registered);
}

CpuBuffer::~CpuBuffer() {
  if (!is_registered_host()) {
    const uint64_t rounded = CpuDevice::rounded_size(size());
    if (rounded >= kMapThreshold) {
      munmap(host_address(), rounded);
    } else {
      std::free(host_address());
    }
  }
  cpu_device_->counters().on_destroyed(size(), is_registered_host());
}

class CpuDriver final : public Driver {
 public:
  explicit CpuDriver(const CpuDriverOptions& options) : options_(options) {}

  std::string_view name() const override { return "cpu"; }
  DeviceKind kind() const override { return DeviceKind::kCpu; }
  Status available() const override { return ok_status(); }

  Result<std::vector<DeviceInfo>> enumerate() override { return std::vector<DeviceInfo>{device_info()}; }

  Result<std::unique_ptr<Device>> open_device(int ordinal) override {
    if (ordinal != 0) return not_found("cpu driver has one device (ordinal 0), not {}", ordinal);
    return std::unique_ptr<Device>(std::make_unique<CpuDevice>(this, device_info(), options_));
  }

 private:
  DeviceInfo device_info() const {
    DeviceInfo info;
    info.kind = DeviceKind::kCpu;
    info.ordinal = 0;
    info.name = cpu_model_name();
    info.vendor = "host";
    info.driver_version = "hxrt-cpu";
    info.memory_bytes = physical_memory_bytes();
    info.max_allocation_bytes = info.memory_bytes;
    info.min_alignment = kCpuAlignment;
    info.host_addressable = true;
    info.unified_memory = true;
    info.compute_units = options_.num_threads > 0 ? options_.num_threads : ThreadPool::default_thread_count();
    info.supports_fp16 = false;  // kernels convert f16 to f32 for arithmetic
    info.features = cpu_features();
    info.supports_bf16 = std::find(info.features.begin(), info.features.end(), "avx512bf16") != info.features.end();
    info.timestamp_resolution_ns = 1.0;
    return info;
  }

  CpuDriverOptions options_;
};

}  // namespace
}  // namespace hxrt::hal::cpu

namespace hxrt::hal {
std::unique_ptr<Driver> make_cpu_driver(const CpuDriverOptions& options) {
  return std::make_unique<cpu::CpuDriver>(options);
}
}  // namespace hxrt::hal
