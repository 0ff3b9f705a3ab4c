// The CUDA emulator: a "cuda" driver whose one device runs CUDA C++ kernels on the host, so that hxrt's CUDA kernels
// and their launch code are tested on machines without a GPU (include/hxrt/hal/cuda/cuda_driver.h, emulate).
//
// Note [CUDA emulation]
// A module's CUDA C++ is preprocessed with its build options and HXRT_CUDA_EMULATION defined, its extern "C"
// __global__ functions are found in the result, and the host compiler builds it into a shared library together with
// a shim (kShim: CUDA's qualifiers, built-in variables and intrinsics as host C++) and one entry point per kernel that
// unpacks cuLaunchKernel-style parameters. A launch runs every block of the grid, blocks spread over host threads.
// The threads of a block run on one host thread as fibers (ucontext) that switch only at __syncthreads(), so a block
// of 256 threads costs 256 calls, not 256 OS threads; `__shared__` variables are `static thread_local`, one copy per
// host thread, which runs one block at a time. A kernel whose first launch reached no barrier runs its later launches
// as plain calls, one thread after another. Arithmetic is the host's IEEE float and double with contraction off
// (-ffp-contract=off), which is what the kernels are written to match (Note [Matching the CPU kernels on CUDA]).
//
// It is a test device, not a simulator: memory is host memory, warps do not exist (the kernels use none of their
// primitives), and execution order inside a block is a legal schedule, not the GPU's. Its streams are the synchronous
// host-queued streams of the cpu driver; cuBLAS is a plain f32 loop.
#include <dlfcn.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "hal/cuda/cuda_drivers.h"
#include "hal/cuda/jit_options.h"
#include "hal/host_queued_stream.h"
#include "hal/memory_counters.h"
#include "hal/signal_event.h"
#include "hxrt/base/check.h"
#include "hxrt/base/logging.h"
#include "hxrt/hal/cuda/cuda_driver.h"

namespace hxrt::hal {
namespace {

constexpr uint32_t kAlignment = 256;
constexpr size_t kFiberStackBytes = 64 * 1024;
constexpr uint32_t kMaxBlockThreads = 1024;
// Bumped when the shim or the generated entry points change (it is part of every cache key).
constexpr std::string_view kEmulatorVersion = "hxrt-cuda-emulator-v2";

constexpr std::string_view kShim = R"SHIM(
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <chrono>
#include <cmath>
#include <type_traits>
#define HXRT_CUDA_EMULATION 1
#define __global__
#define __device__
#define __forceinline__ inline
#define __constant__ static
#define __shared__ static thread_local
#define __launch_bounds__(...)
struct hxemu_dim { unsigned x, y, z; };
extern thread_local hxemu_dim threadIdx, blockIdx, blockDim, gridDim;
extern "C" void (*hxemu_barrier)();
inline void __syncthreads() { hxemu_barrier(); }
struct int2 { int x, y; };
struct int4 { int x, y, z, w; };
struct uint4 { unsigned x, y, z, w; };
struct float4 { float x, y, z, w; };
using std::isinf;
using std::isnan;
// CUDA's min/max overloads, by value in the usual arithmetic conversions (int and unsigned mixed: unsigned).
template <class A, class B> inline std::common_type_t<A, B> min(A a, B b) { return b < a ? b : a; }
template <class A, class B> inline std::common_type_t<A, B> max(A a, B b) { return a < b ? b : a; }
template <class T, class F> inline T hxemu_bits(F from) { T to; memcpy(&to, &from, sizeof(T)); return to; }
inline float __int_as_float(int v) { return hxemu_bits<float>(v); }
inline int __float_as_int(float v) { return hxemu_bits<int>(v); }
inline float __uint_as_float(unsigned v) { return hxemu_bits<float>(v); }
inline unsigned __float_as_uint(float v) { return hxemu_bits<unsigned>(v); }
inline long long __double_as_longlong(double v) { return hxemu_bits<long long>(v); }
inline double __longlong_as_double(long long v) { return hxemu_bits<double>(v); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
// IEEE binary16 <-> binary32, round to nearest even (what cvt.rn.f16.f32 and cvt.f32.f16 do).
inline float hxemu_f16_to_f32(unsigned short h) {
  const unsigned sign = (unsigned)(h & 0x8000u) << 16;
  unsigned exponent = (h >> 10) & 0x1fu;
  unsigned mantissa = h & 0x3ffu;
  unsigned bits;
  if (exponent == 0x1fu) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {
    exponent = 113u;
    while ((mantissa & 0x400u) == 0) { mantissa <<= 1; --exponent; }
    bits = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
  }
  return hxemu_bits<float>(bits);
}
inline unsigned short hxemu_f32_to_f16(float f) {
  const unsigned x = hxemu_bits<unsigned>(f);
  const unsigned sign = (x >> 16) & 0x8000u;
  const unsigned abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return (unsigned short)(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));  // NaN, quiet
  if (abs >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);  // rounds to infinity
  if (abs < 0x38800000u) {  // subnormal or zero in f16
    if (abs < 0x33000000u) return (unsigned short)sign;  // below half the smallest subnormal
    const unsigned exponent = abs >> 23;
    const unsigned mantissa = (abs & 0x7fffffu) | 0x800000u;
    const unsigned shift = 126u - exponent;
    unsigned half = mantissa >> shift;
    const unsigned rest = mantissa & ((1u << shift) - 1u);
    const unsigned halfway = 1u << (shift - 1u);
    if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
    return (unsigned short)(sign | half);
  }
  unsigned half = ((abs >> 13) - (112u << 10));
  const unsigned rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
  return (unsigned short)(sign | half);
}
inline unsigned long long hxemu_global_ns() {
  return (unsigned long long)std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::steady_clock::now().time_since_epoch()).count();
}
)SHIM";

// ---- compiling modules ----

struct KernelSignature {
  std::string name;
  std::vector<std::string> param_types;
};

// The extern "C" __global__ functions of preprocessed source, with their parameter types.
Result<std::vector<KernelSignature>> find_kernels(const std::string& source) {
  static const std::regex kHead(R"re(extern\s+"C"\s+__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\()re");
  std::vector<KernelSignature> kernels;
  for (auto it = std::sregex_iterator(source.begin(), source.end(), kHead); it != std::sregex_iterator(); ++it) {
    KernelSignature k;
    k.name = (*it)[1].str();
    size_t pos = static_cast<size_t>(it->position(0) + it->length(0));
    int depth = 1;
    std::string params;
    for (; pos < source.size() && depth > 0; ++pos) {
      const char c = source[pos];
      if (c == '(') ++depth;
      if (c == ')' && --depth == 0) break;
      params += c;
    }
    std::vector<std::string> pieces;
    std::string piece;
    int nesting = 0;
    for (const char c : params) {
      if (c == '(' || c == '<' || c == '[') ++nesting;
      if (c == ')' || c == '>' || c == ']') --nesting;
      if (c == ',' && nesting == 0) {
        pieces.push_back(piece);
        piece.clear();
      } else {
        piece += c;
      }
    }
    if (!std::regex_match(piece, std::regex(R"(\s*(void)?\s*)"))) pieces.push_back(piece);
    static const std::regex kNamed(R"re(^\s*(.*?[\s*&])\s*(\w+)\s*$)re");
    for (std::string p : pieces) {
      p = std::regex_replace(p, std::regex(R"(__restrict__)"), "");
      std::smatch m;
      if (!std::regex_match(p, m, kNamed)) {
        return invalid_argument("cuda emulator: cannot read parameter '{}' of kernel '{}'", p, k.name);
      }
      k.param_types.push_back(m[1].str());
    }
    kernels.push_back(std::move(k));
  }
  return kernels;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (const char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

Status run_compiler(const std::string& command, const std::string& what) {
  std::string output;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return unavailable("cuda emulator: cannot run the host compiler for {}", what);
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof(buffer), pipe)) output.append(buffer, n);
  const int rc = pclose(pipe);
  if (rc != 0) {
    if (output.size() > 8000) output = output.substr(0, 8000) + "\n...";
    return invalid_argument("cuda emulator: {} failed (exit {}):\n{}", what, rc, output);
  }
  return ok_status();
}

std::string host_compiler() {
  if (const char* cxx = std::getenv("HXRT_CUDA_EMULATOR_CXX"); cxx != nullptr && *cxx != '\0') return cxx;
#ifdef HXRT_HOST_CXX
  return HXRT_HOST_CXX;
#else
  return "c++";
#endif
}

std::filesystem::path emulator_cache_dir(const CudaDriverOptions& options) {
  if (!options.cache_dir.empty()) return std::filesystem::path(options.cache_dir) / "emulator";
  if (const char* dir = std::getenv("HXRT_CACHE_DIR"); dir != nullptr && *dir != '\0') {
    return std::filesystem::path(dir) / "cuda-emulator";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return std::filesystem::path(home) / ".cache" / "hxrt" / "cuda-emulator";
  }
  return std::filesystem::temp_directory_path() / "hxrt-cuda-emulator";
}

uint64_t fnv1a64(std::string_view bytes, uint64_t hash = 0xcbf29ce484222325ULL) {
  for (const char c : bytes) hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  return hash;
}

// ---- running blocks ----

using EntryPoint = void (*)(void**);
using SetIds = void (*)(unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, unsigned, unsigned);
using SetThread = void (*)(unsigned, unsigned, unsigned);

struct LoadedLibrary {
  void* handle = nullptr;
  SetIds set_block = nullptr;
  SetThread set_thread = nullptr;
  void (**barrier)() = nullptr;
};

// One host thread's fibers: runs the threads of one block at a time.
class BlockRunner {
 public:
  BlockRunner() = default;
  BlockRunner(const BlockRunner&) = delete;
  BlockRunner& operator=(const BlockRunner&) = delete;
  ~BlockRunner() {
    if (stacks_ != nullptr) munmap(stacks_, kFiberStackBytes * kMaxBlockThreads);
  }

  // Runs one block; returns whether any thread reached a barrier. Fails (divergent barrier) with a message.
  Result<bool> run_fibers(const LoadedLibrary& lib, EntryPoint entry, void** params, const std::array<uint32_t, 3>& block,
                          uint32_t threads) {
    if (stacks_ == nullptr) {
      void* memory = mmap(nullptr, kFiberStackBytes * kMaxBlockThreads, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (memory == MAP_FAILED) return out_of_memory("cuda emulator: no memory for fiber stacks");
      stacks_ = static_cast<char*>(memory);
    }
    lib_ = &lib;
    entry_ = entry;
    params_ = params;
    block_ = block;
    in_fibers_ = true;
    fibers_.assign(threads, Fiber{});
    for (uint32_t t = 0; t < threads; ++t) {
      Fiber& f = fibers_[t];
      getcontext(&f.context);
      f.context.uc_stack.ss_sp = stacks_ + kFiberStackBytes * t;
      f.context.uc_stack.ss_size = kFiberStackBytes;
      f.context.uc_link = &scheduler_;
      makecontext(&f.context, &BlockRunner::trampoline, 0);
    }
    bool barriers = false;
    for (;;) {
      uint32_t done = 0, waiting = 0;
      for (uint32_t t = 0; t < threads; ++t) {
        Fiber& f = fibers_[t];
        if (f.done) {
          ++done;
          continue;
        }
        f.at_barrier = false;
        set_thread(t);
        current_ = t;
        swapcontext(&scheduler_, &f.context);
        if (f.done) {
          ++done;
        } else {
          ++waiting;
        }
      }
      if (done == threads) {
        in_fibers_ = false;
        return barriers;
      }
      if (done != 0) {
        in_fibers_ = false;
        return internal_error("cuda emulator: {} thread(s) of a block reached __syncthreads() after {} returned "
                              "(a barrier every thread must reach)",
                              waiting, done);
      }
      barriers = true;
    }
  }

  void run_plain(const LoadedLibrary& lib, EntryPoint entry, void** params, const std::array<uint32_t, 3>& block,
                 uint32_t threads) {
    lib_ = &lib;
    block_ = block;
    for (uint32_t t = 0; t < threads; ++t) {
      set_thread(t);
      entry(params);
    }
  }

  static BlockRunner& current() {
    thread_local BlockRunner runner;
    return runner;
  }

  // The shim's __syncthreads() on a fiber: back to the scheduler until every thread arrived.
  static void barrier() {
    BlockRunner& r = current();
    HXRT_CHECK(r.in_fibers_, "cuda emulator: a kernel reached __syncthreads() after a launch of it that reached none");
    Fiber& f = r.fibers_[r.current_];
    f.at_barrier = true;
    swapcontext(&f.context, &r.scheduler_);
  }

 private:
  struct Fiber {
    ucontext_t context{};
    bool done = false;
    bool at_barrier = false;
  };

  void set_thread(uint32_t t) {
    const uint32_t x = t % block_[0];
    const uint32_t y = (t / block_[0]) % block_[1];
    const uint32_t z = t / (block_[0] * block_[1]);
    lib_->set_thread(x, y, z);
  }

  static void trampoline() {
    BlockRunner& r = current();
    const uint32_t t = r.current_;
    r.entry_(r.params_);
    r.fibers_[t].done = true;  // uc_link returns to the scheduler
  }

  char* stacks_ = nullptr;
  bool in_fibers_ = false;
  ucontext_t scheduler_{};
  std::vector<Fiber> fibers_;
  uint32_t current_ = 0;
  const LoadedLibrary* lib_ = nullptr;
  EntryPoint entry_ = nullptr;
  void** params_ = nullptr;
  std::array<uint32_t, 3> block_{1, 1, 1};
};

// Runs body(block index) for n blocks over the caller and up to workers - 1 helper threads.
void for_each_block(uint64_t n, unsigned workers, const std::function<void(uint64_t)>& body) {
  std::atomic<uint64_t> next{0};
  auto loop = [&] {
    for (uint64_t b = next.fetch_add(1); b < n; b = next.fetch_add(1)) body(b);
  };
  std::vector<std::thread> helpers;
  const unsigned extra = static_cast<unsigned>(std::min<uint64_t>(n, workers)) - 1;
  for (unsigned i = 0; i < extra; ++i) helpers.emplace_back(loop);
  loop();
  for (std::thread& t : helpers) t.join();
}

// ---- HAL objects ----

class EmuDevice;

class EmuKernel final : public Kernel {
 public:
  EmuKernel(std::string name, const LoadedLibrary* lib, EntryPoint entry, int params)
      : Kernel(std::move(name), DeviceKind::kCuda), lib_(lib), entry_(entry), params_(params) {}
  int param_count() const { return params_; }
  // Runs the grid; `params` as for cuLaunchKernel.
  Status run(const LaunchConfig& config, void** params, unsigned workers) const;

 private:
  const LoadedLibrary* lib_;
  EntryPoint entry_;
  int params_;
  // 0 unknown, 1 no barriers (plain calls), 2 barriers (fibers)
  mutable std::atomic<int> mode_{0};
};

Status EmuKernel::run(const LaunchConfig& config, void** params, unsigned workers) const {
  const uint32_t threads = config.block[0] * config.block[1] * config.block[2];
  const uint64_t blocks = uint64_t{config.grid[0]} * config.grid[1] * config.grid[2];
  const bool plain = mode_.load(std::memory_order_acquire) == 1;
  std::mutex error_mutex;
  Status error;
  std::atomic<bool> any_barrier{false};
  for_each_block(blocks, workers, [&](uint64_t b) {
    const uint32_t bx = static_cast<uint32_t>(b % config.grid[0]);
    const uint32_t by = static_cast<uint32_t>((b / config.grid[0]) % config.grid[1]);
    const uint32_t bz = static_cast<uint32_t>(b / (uint64_t{config.grid[0]} * config.grid[1]));
    lib_->set_block(bx, by, bz, config.block[0], config.block[1], config.block[2], config.grid[0], config.grid[1],
                    config.grid[2], 0, 0, 0);
    BlockRunner& runner = BlockRunner::current();
    if (plain) {
      runner.run_plain(*lib_, entry_, params, config.block, threads);
      return;
    }
    Result<bool> ran = runner.run_fibers(*lib_, entry_, params, config.block, threads);
    if (!ran.ok()) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (error.ok()) error = ran.status();
    } else if (*ran) {
      any_barrier.store(true, std::memory_order_relaxed);
    }
  });
  if (!plain && error.ok()) mode_.store(any_barrier.load() ? 2 : 1, std::memory_order_release);
  if (!error.ok()) return std::move(error).with_context(fmt::format("running kernel '{}'", name()));
  return ok_status();
}

class EmuModule final : public Module {
 public:
  EmuModule(std::string name, LoadedLibrary lib, const std::vector<KernelSignature>& signatures)
      : name_(std::move(name)), lib_(std::move(lib)) {
    for (const KernelSignature& s : signatures) {
      auto entry = reinterpret_cast<EntryPoint>(dlsym(lib_.handle, ("hxemu_k_" + s.name).c_str()));
      if (entry == nullptr) continue;
      kernels_.emplace(s.name, std::make_unique<EmuKernel>(fmt::format("{}.{}", name_, s.name), &lib_, entry,
                                                           static_cast<int>(s.param_types.size())));
    }
  }
  ~EmuModule() override {
    kernels_.clear();
    dlclose(lib_.handle);
  }
  Result<const Kernel*> kernel(std::string_view name) const override {
    auto it = kernels_.find(name);
    if (it == kernels_.end()) return not_found("CUDA module '{}' has no kernel '{}'", name_, name);
    return it->second.get();
  }

 private:
  std::string name_;
  LoadedLibrary lib_;
  std::map<std::string, std::unique_ptr<EmuKernel>, std::less<>> kernels_;
};

// cuBLAS's gemm as a plain f32 loop (k in order, then alpha and beta as cuBLAS applies them).
class EmuGemmKernel final : public Kernel {
 public:
  EmuGemmKernel() : Kernel("cublas.gemm", DeviceKind::kCuda) {}
};

class EmuBuffer final : public Buffer {
 public:
  EmuBuffer(Device* device, MemoryCounters* counters, char* memory, uint64_t size, MemoryKind kind)
      : Buffer(device, size, kind, kind == MemoryKind::kDevice ? nullptr : memory, false),
        counters_(counters),
        memory_(memory) {
    counters_->on_created(size, false);
  }
  ~EmuBuffer() override {
    std::free(memory_);
    counters_->on_destroyed(size(), false);
  }
  char* memory() const { return memory_; }
  uint64_t native_handle() const override { return reinterpret_cast<uint64_t>(memory_); }

 protected:
  // Device memory has no host address (as on a GPU); map() gives the bytes themselves, which the emulated device
  // shares with the host, so flush and invalidate have nothing to do.
  Result<void*> do_map(uint64_t offset, uint64_t, MapAccess) override { return static_cast<void*>(memory_ + offset); }
  Status do_unmap(void*) override { return ok_status(); }
  Status do_flush(uint64_t, uint64_t) override { return ok_status(); }
  Status do_invalidate(uint64_t, uint64_t) override { return ok_status(); }

 private:
  MemoryCounters* counters_;
  char* memory_;
};

class EmuStream final : public HostQueuedStream {
 public:
  EmuStream(Device* device, std::string name, unsigned workers)
      : HostQueuedStream(device, std::move(name), HostQueuedStreamOptions{}), workers_(workers) {
    start();
  }
  ~EmuStream() override { stop(); }

 protected:
  struct LaunchPayload final : DriverPayload {
    std::vector<std::array<std::byte, KernelArg::kMaxScalarBytes>> values;
    std::vector<void*> params;
    bool gemm = false;
  };

  Result<char*> address(const BufferView& view, const char* what) const {
    if (auto* b = dynamic_cast<EmuBuffer*>(view.buffer); b != nullptr && &b->device() == &device()) {
      return b->memory() + view.offset;
    }
    if (void* host = view.host_address(); host != nullptr) return static_cast<char*>(host);
    return invalid_argument("{} on cuda stream '{}': a buffer of device '{}' that is not host-addressable", what, name(),
                            view.buffer->device().info().name);
  }

  Status prepare(Command& command) override {
    if (command.kind == CommandKind::kCopy || command.kind == CommandKind::kFill) {
      for (Place* place : {&command.dst, &command.src}) {
        if (place->view.buffer == nullptr) continue;
        HXRT_ASSIGN_OR_RETURN(char* at, address(place->view, "copy"));
        place->host = at;
        place->view = BufferView();  // resolved: host memory from here on
      }
      return ok_status();
    }
    if (command.kind != CommandKind::kLaunch) return ok_status();
    auto payload = std::make_unique<LaunchPayload>();
    if (dynamic_cast<const EmuGemmKernel*>(command.kernel) != nullptr) {
      HXRT_RETURN_IF_ERROR(cublas_gemm_from_args(command.args).status());
      payload->gemm = true;
      command.payload = std::move(payload);
      return ok_status();
    }
    const auto* kernel = dynamic_cast<const EmuKernel*>(command.kernel);
    if (kernel == nullptr) {
      return invalid_argument("cuda stream '{}' cannot launch kernel '{}' of a {} device", name(),
                              command.kernel->name(), device_kind_name(command.kernel->device_kind()));
    }
    const LaunchConfig& c = command.config;
    const uint64_t threads = uint64_t{c.block[0]} * c.block[1] * c.block[2];
    if (threads == 0 || threads > kMaxBlockThreads || c.grid[0] == 0 || c.grid[1] == 0 || c.grid[2] == 0 ||
        c.grid[1] > 65535 || c.grid[2] > 65535) {
      return invalid_argument("kernel '{}': launch grid ({}, {}, {}) of blocks ({}, {}, {}) is outside CUDA's limits",
                              kernel->name(), c.grid[0], c.grid[1], c.grid[2], c.block[0], c.block[1], c.block[2]);
    }
    const size_t passed = command.args.size();
    const bool pass_ctl = static_cast<size_t>(kernel->param_count()) == passed + 1;
    if (!pass_ctl && static_cast<size_t>(kernel->param_count()) != passed) {
      return invalid_argument("kernel '{}' declares {} parameters, the launch passes {}", kernel->name(),
                              kernel->param_count(), passed);
    }
    payload->values.resize(passed + (pass_ctl ? 1 : 0));
    payload->params.resize(payload->values.size());
    for (size_t i = 0; i < passed; ++i) {
      const KernelArg& arg = command.args[i];
      auto& value = payload->values[i];
      if (arg.kind() == KernelArg::Kind::kBuffer) {
        if (dynamic_cast<EmuBuffer*>(arg.view().buffer) == nullptr || &arg.view().buffer->device() != &device()) {
          return invalid_argument("kernel '{}' argument {}: the buffer has no device address", kernel->name(), i);
        }
        HXRT_ASSIGN_OR_RETURN(char* at, address(arg.view(), kernel->name().c_str()));
        std::memcpy(value.data(), &at, sizeof(at));
      } else if (arg.kind() == KernelArg::Kind::kScalar) {
        std::memcpy(value.data(), arg.scalar_bytes().data(), arg.scalar_bytes().size());
      } else {
        return invalid_argument("kernel '{}' argument {}: host pointers are for CPU kernels only", kernel->name(), i);
      }
      payload->params[i] = value.data();
    }
    if (pass_ctl) {
      volatile int32_t* ctl = ctl_;
      std::memcpy(payload->values.back().data(), &ctl, sizeof(ctl));
      payload->params.back() = payload->values.back().data();
    }
    command.payload = std::move(payload);
    return ok_status();
  }

  Status execute_launch(Command& command) override {
    auto* payload = static_cast<LaunchPayload*>(command.payload.get());
    if (payload->gemm) return gemm(command.args);
    const auto* kernel = static_cast<const EmuKernel*>(command.kernel);
    HXRT_RETURN_IF_ERROR(kernel->run(command.config, payload->params.data(), workers_));
    const int32_t code = ctl_[1];
    if (code == 0) return ok_status();
    ctl_[1] = 0;
    if (code < 1 || code > static_cast<int32_t>(StatusCode::kInternal)) {
      return internal_error("kernel '{}' stored status word {} (not a StatusCode)", kernel->name(), code);
    }
    return Status(static_cast<StatusCode>(code), fmt::format("kernel '{}' on cuda stream '{}' reported {}",
                                                             kernel->name(), name(),
                                                             status_code_name(static_cast<StatusCode>(code))));
  }

  void on_cancel(bool cancelled) override {
    ctl_[0] = cancelled ? 1 : 0;
    if (!cancelled) ctl_[1] = 0;
  }

 private:
  Status gemm(std::span<const KernelArg> args) const {
    HXRT_ASSIGN_OR_RETURN(const CublasGemm g, cublas_gemm_from_args(args));
    if (g.type != CublasGemm::Type::kF32) return unimplemented("cuda emulator: cublas.gemm emulates f32 only");
    float* p[3];
    for (int i = 0; i < 3; ++i) {
      HXRT_ASSIGN_OR_RETURN(char* at, address(args[static_cast<size_t>(i)].view(), "cublas.gemm"));
      p[i] = reinterpret_cast<float*>(at);
    }
    for (int64_t b = 0; b < g.batch; ++b) {
      const float* a = p[0] + b * g.stride_a;
      const float* bm = p[1] + b * g.stride_b;
      float* c = p[2] + b * g.stride_c;
      for (int32_t i = 0; i < g.m; ++i) {
        for (int32_t j = 0; j < g.n; ++j) {
          float acc = 0.0f;
          for (int32_t k = 0; k < g.k; ++k) {
            const float av = g.trans_a ? a[int64_t{k} * g.m + i] : a[int64_t{i} * g.k + k];
            const float bv = g.trans_b ? bm[int64_t{j} * g.k + k] : bm[int64_t{k} * g.n + j];
            acc += av * bv;
          }
          float& out = c[int64_t{i} * g.n + j];
          out = g.beta == 0.0f ? g.alpha * acc : g.alpha * acc + g.beta * out;
        }
      }
    }
    return ok_status();
  }

  const unsigned workers_;
  volatile int32_t ctl_[2] = {0, 0};
};

class EmuDevice final : public Device {
 public:
  EmuDevice(Driver* driver, DeviceInfo info, const CudaDriverOptions& options)
      : Device(driver, std::move(info)), options_(options) {}
  ~EmuDevice() override { release_shared_modules(); }

  DeviceMemoryStats memory_stats() const override { return counters_.stats(); }

 protected:
  Result<std::unique_ptr<Buffer>> do_allocate(uint64_t bytes, MemoryKind kind) override {
    const uint64_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    void* memory = std::aligned_alloc(kAlignment, rounded);
    if (memory == nullptr) return out_of_memory("cuda emulator: {} bytes", bytes);
    return std::unique_ptr<Buffer>(std::make_unique<EmuBuffer>(this, &counters_, static_cast<char*>(memory), bytes, kind));
  }
  Result<std::unique_ptr<Buffer>> do_register_host(void*, uint64_t) override {
    return unimplemented("register_host: the cuda device keeps host memory off its kernels' path");
  }
  Result<std::unique_ptr<Stream>> do_create_stream(const StreamOptions& options) override {
    std::string name = options.name.empty() ? fmt::format("stream{}", stream_counter_.fetch_add(1)) : options.name;
    return std::unique_ptr<Stream>(std::make_unique<EmuStream>(this, std::move(name), workers()));
  }
  Result<std::unique_ptr<Event>> do_create_event() override {
    return std::unique_ptr<Event>(std::make_unique<SignalEvent>(this));
  }
  Result<std::unique_ptr<Module>> do_load_module(const ModuleSource& source) override;

 private:
  unsigned workers() const { return std::max(1u, std::min(4u, std::thread::hardware_concurrency())); }

  CudaDriverOptions options_;
  MemoryCounters counters_;
  std::atomic<uint64_t> stream_counter_{0};
};

class CublasEmuModule final : public Module {
 public:
  Result<const Kernel*> kernel(std::string_view name) const override {
    if (name == "gemm") return &gemm_;
    return not_found("the cublas module has no kernel '{}' (it has: gemm)", name);
  }

 private:
  EmuGemmKernel gemm_;
};

Result<std::unique_ptr<Module>> EmuDevice::do_load_module(const ModuleSource& source) {
  if (source.language == ModuleSource::Language::kLibrary) {
    if (source.name != "cublas") return not_found("cuda: no library module '{}' (the cuda device offers: cublas)", source.name);
    return std::unique_ptr<Module>(std::make_unique<CublasEmuModule>());
  }
  if (source.language != ModuleSource::Language::kCudaCpp) {
    return unimplemented("the cuda emulator runs CUDA C++ modules only, not '{}'", source.name);
  }
  std::string defines;
  for (const std::string& option : cuda::split_jit_options(source.options)) {
    if (option.rfind("-D", 0) == 0 || option.rfind("-U", 0) == 0) defines += " " + shell_quote(option);
  }
  const std::string compiler = host_compiler();
  const std::string key = fmt::format("{:016x}", fnv1a64(source.code, fnv1a64(fmt::format(
                                                             "{}\n{}\n{}\n{}", kEmulatorVersion, kShim, defines, compiler))));
  const std::filesystem::path dir = emulator_cache_dir(options_);
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return unavailable("cuda emulator: cannot create '{}': {}", dir.string(), error.message());
  const std::filesystem::path library = dir / fmt::format("{}-{}.so", source.name, key);
  const std::filesystem::path preprocessed = dir / fmt::format("{}-{}.ii", source.name, key);
  if (!std::filesystem::exists(library) || !std::filesystem::exists(preprocessed)) {
    const std::string stem = (dir / fmt::format("{}-{}.tmp{}", source.name, key, getpid())).string();
    {
      std::ofstream out(stem + ".cu");
      out << source.code;
    }
    HXRT_RETURN_IF_ERROR(run_compiler(fmt::format("{} -E -P -x c++ -DHXRT_CUDA_EMULATION=1{} {} -o {}", compiler,
                                                  defines, shell_quote(stem + ".cu"), shell_quote(stem + ".ii")),
                                      fmt::format("preprocessing CUDA module '{}'", source.name)));
    std::string pre;
    {
      std::ifstream in(stem + ".ii");
      std::stringstream text;
      text << in.rdbuf();
      pre = text.str();
    }
    HXRT_ASSIGN_OR_RETURN(const std::vector<KernelSignature> kernels, find_kernels(pre));
    std::string unit = std::string(kShim) + pre;
    unit += "\nthread_local hxemu_dim threadIdx, blockIdx, blockDim, gridDim;\nextern \"C\" {\n";
    unit += "void (*hxemu_barrier)() = nullptr;\n";
    unit += "void hxemu_set_block(unsigned bx, unsigned by, unsigned bz, unsigned dx, unsigned dy, unsigned dz, "
            "unsigned gx, unsigned gy, unsigned gz, unsigned, unsigned, unsigned) {\n"
            "  blockIdx = {bx, by, bz}; blockDim = {dx, dy, dz}; gridDim = {gx, gy, gz};\n}\n";
    unit += "void hxemu_set_thread(unsigned x, unsigned y, unsigned z) { threadIdx = {x, y, z}; }\n";
    for (const KernelSignature& k : kernels) {
      unit += fmt::format("void hxemu_k_{}(void** p) {{ {}(", k.name, k.name);
      for (size_t i = 0; i < k.param_types.size(); ++i) {
        unit += fmt::format("{}*({}*)p[{}]", i == 0 ? "" : ", ", k.param_types[i], i);
      }
      unit += "); }\n";
    }
    unit += "}\n";
    {
      std::ofstream out(stem + ".cc");
      out << unit;
    }
    HXRT_RETURN_IF_ERROR(run_compiler(fmt::format("{} -std=c++17 -O2 -fPIC -shared -ffp-contract=off -w {} -o {}",
                                                  compiler, shell_quote(stem + ".cc"), shell_quote(stem + ".so")),
                                      fmt::format("compiling CUDA module '{}' for the host", source.name)));
    std::filesystem::rename(stem + ".ii", preprocessed, error);
    std::filesystem::rename(stem + ".so", library, error);
    std::filesystem::remove(stem + ".cu", error);
    std::filesystem::remove(stem + ".cc", error);
    if (error) return internal_error("cuda emulator: cannot store '{}': {}", library.string(), error.message());
  }
  std::string pre;
  {
    std::ifstream in(preprocessed);
    std::stringstream text;
    text << in.rdbuf();
    pre = text.str();
  }
  HXRT_ASSIGN_OR_RETURN(const std::vector<KernelSignature> kernels, find_kernels(pre));
  LoadedLibrary lib;
  lib.handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib.handle == nullptr) return internal_error("cuda emulator: dlopen '{}': {}", library.string(), dlerror());
  lib.set_block = reinterpret_cast<SetIds>(dlsym(lib.handle, "hxemu_set_block"));
  lib.set_thread = reinterpret_cast<SetThread>(dlsym(lib.handle, "hxemu_set_thread"));
  lib.barrier = reinterpret_cast<void (**)()>(dlsym(lib.handle, "hxemu_barrier"));
  if (lib.set_block == nullptr || lib.set_thread == nullptr || lib.barrier == nullptr) {
    dlclose(lib.handle);
    return internal_error("cuda emulator: '{}' lacks its entry points", library.string());
  }
  *lib.barrier = &BlockRunner::barrier;
  return std::unique_ptr<Module>(std::make_unique<EmuModule>(source.name, std::move(lib), kernels));
}

class EmuDriver final : public Driver {
 public:
  explicit EmuDriver(const CudaDriverOptions& options) : options_(options) {}
  std::string_view name() const override { return "cuda"; }
  DeviceKind kind() const override { return DeviceKind::kCuda; }
  Status available() const override { return ok_status(); }
  Result<std::vector<DeviceInfo>> enumerate() override { return std::vector<DeviceInfo>{info()}; }
  Result<std::unique_ptr<Device>> open_device(int ordinal) override {
    if (ordinal != 0) return not_found("cuda:{}: the CUDA emulator has one device (cuda:0)", ordinal);
    return std::unique_ptr<Device>(std::make_unique<EmuDevice>(this, info(), options_));
  }

 private:
  static DeviceInfo info() {
    DeviceInfo info;
    info.kind = DeviceKind::kCuda;
    info.ordinal = 0;
    info.name = "CUDA emulator (host CPU)";
    info.vendor = "hxrt";
    info.driver_version = std::string(kEmulatorVersion);
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page_size = sysconf(_SC_PAGE_SIZE);
    info.memory_bytes = pages > 0 && page_size > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size) : 0;
    info.max_allocation_bytes = info.memory_bytes;
    info.min_alignment = kAlignment;
    info.compute_units = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    info.features = {"sm_90", "emulated"};
    return info;
  }

  CudaDriverOptions options_;
};

}  // namespace

namespace cuda {

std::unique_ptr<Driver> make_emulator_driver(const CudaDriverOptions& options) {
  return std::make_unique<EmuDriver>(options);
}

}  // namespace cuda

}  // namespace hxrt::hal
