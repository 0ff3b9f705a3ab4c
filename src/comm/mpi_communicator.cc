// The MPI backend of comm/: a Communicator over the MPI plugin's transport (comm/mpi/mpi_transport.h).
#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "comm/backends.h"
#include "comm/mpi/mpi_transport.h"
#include "hxrt/base/spin.h"

namespace hxrt::comm {

// Note [The MPI plugin]
// Only libhxrt_comm_mpi.so (mpi/mpi_transport.cc) is compiled against mpi.h and linked to libmpi; hxrt loads it
// with dlopen the first time a program opens an MPI communicator. So libhxrt, the C API library and the Python
// module carry no MPI dependency, a machine without MPI runs everything else, and asking for MPI there is an
// Unavailable error that says what was looked for — never a link or load error. The plugin is looked up at
// $HXRT_COMM_MPI_PLUGIN when set (only there), else beside the build (the build tree's path, for tests and the
// CLI run from build/), else in the install's lib/hxrt/, else by the dynamic loader's search. It is opened with
// RTLD_GLOBAL: Open MPI loads its own components with dlopen and they resolve libmpi's symbols globally.
// The transport is non-blocking (MPI_Iallreduce and friends); the communicator polls the request, the peers'
// failure notices and the deadline (Note [Collective failures] in communicator.cc), backing off from spinning to
// yielding to short sleeps so that a rank waiting on an oversubscribed machine leaves the cores to the rank it
// waits for.

namespace {

struct Transport {
  const HxrtMpiTransport* api = nullptr;
  std::string path;
  Status error;  // why it is unavailable
};

const Transport& transport() {
  static const Transport* loaded = [] {
    auto* result = new Transport;
    std::vector<std::string> candidates;
    if (const char* path = std::getenv("HXRT_COMM_MPI_PLUGIN"); path != nullptr && *path != '\0') {
      candidates.emplace_back(path);
    } else {
#ifdef HXRT_COMM_MPI_PLUGIN_BUILD_PATH
      candidates.emplace_back(HXRT_COMM_MPI_PLUGIN_BUILD_PATH);
#endif
#ifdef HXRT_COMM_MPI_PLUGIN_INSTALL_PATH
      candidates.emplace_back(HXRT_COMM_MPI_PLUGIN_INSTALL_PATH);
#endif
      candidates.emplace_back("libhxrt_comm_mpi.so");
    }
    std::string tried;
    for (const std::string& path : candidates) {
      void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
      if (handle == nullptr) {
        const char* why = dlerror();
        tried += fmt::format("\n  {}: {}", path, why != nullptr ? why : "not loadable");
        continue;
      }
      auto entry = reinterpret_cast<HxrtMpiTransportEntry>(dlsym(handle, "hxrt_mpi_transport"));
      const HxrtMpiTransport* api = entry != nullptr ? entry() : nullptr;
      if (api == nullptr || api->abi != HXRT_MPI_TRANSPORT_ABI) {
        tried += fmt::format("\n  {}: not an hxrt MPI plugin of ABI {}", path, HXRT_MPI_TRANSPORT_ABI);
        continue;
      }
      result->api = api;
      result->path = path;
      return result;
    }
    result->error = unavailable(
        "mpi: hxrt's MPI plugin (libhxrt_comm_mpi.so) is not loadable; it is built where CMake finds MPI "
        "(Debian: libopenmpi-dev) and needs the MPI library at run time. Tried:{}",
        tried);
    return result;
  }();
  return *loaded;
}

// What a destroyed communicator left in flight: requests a failure abandoned (a late peer may still complete them;
// freeing a pending collective's request is erroneous in MPI) and the handle they belong to. Kept, reachable, to
// the end of the process.
struct Remains {
  void* handle;
  std::vector<void*> requests;
};
std::mutex g_remains_mutex;
std::vector<Remains>* g_remains = new std::vector<Remains>();

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(const HxrtMpiTransport* api, void* handle, std::string name, int rank, int size,
                  hal::Duration timeout)
      : Communicator("mpi", std::move(name), rank, size, timeout), api_(api), handle_(handle) {}

  ~MpiCommunicator() override {
    // Requests a failure abandoned: a late peer may still complete them; waited for briefly, else kept (Remains).
    // They touch no caller memory (Note [Staged requests]).
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    while (!orphans_.empty() && std::chrono::steady_clock::now() < end) {
      for (size_t i = 0; i < orphans_.size();) {
        int done = 0;
        char error[256];
        if (api_->test(orphans_[i], &done, error, sizeof error) != 0 || done) {
          orphans_.erase(orphans_.begin() + static_cast<std::ptrdiff_t>(i));
        } else {
          ++i;
        }
      }
      if (!orphans_.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (orphans_.empty()) {
      api_->free_comm(handle_);
    } else {
      std::lock_guard<std::mutex> lock(g_remains_mutex);
      g_remains->push_back(Remains{handle_, std::move(orphans_)});
    }
  }

 protected:
  Status run(const Operation& operation, hal::Deadline deadline, const std::atomic<bool>* cancel) override {
    char error[1024];
    void* request = nullptr;
    if (api_->start(handle_, static_cast<int>(operation.kind), operation.send, operation.recv, operation.count,
                    transport_dtype(operation.dtype), transport_op(operation.op), operation.peer, &request, error,
                    sizeof error) != 0) {
      return unavailable("MPI: {}", error);
    }
    const auto started = std::chrono::steady_clock::now();
    for (uint64_t poll = 0;; ++poll) {
      int done = 0;
      if (api_->test(request, &done, error, sizeof error) != 0) return unavailable("MPI: {}", error);
      if (done) return ok_status();
      if (poll % 16 == 0) {
        int from = -1;
        char notice[2048];
        if (api_->poll_abort(handle_, &from, notice, sizeof notice) != 0) {
          abandon(request);
          return peer_failure(from, notice);
        }
        if (Status failed = status(); !failed.ok()) {
          // Another thread of this rank failed the communicator (abort()): its peers were told; stop waiting.
          abandon(request);
          return aborted("this rank's communicator failed while the operation waited: {}", failed.to_string());
        }
        if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) {
          abandon(request);
          return aborted("cancelled while waiting for the peers (the stream was aborted)");
        }
        if (deadline.passed()) {
          abandon(request);
          return deadline_exceeded(
              "not complete after {} ms: a peer has not reached it (stopped, stuck, or issuing collectives in "
              "another order)",
              std::chrono::duration_cast<std::chrono::milliseconds>(timeout()).count());
        }
      }
      // MPI advances a non-blocking collective only inside MPI calls: a large one moves as fast as it is polled.
      // So: spin, then yield (the peers on this machine get the cores), and sleep between polls only once the wait
      // has lasted long enough to be an idle one (a follower waiting for the next request).
      if (poll < 2048) {
        cpu_relax();
      } else if (std::chrono::steady_clock::now() - started < std::chrono::milliseconds(20)) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
  }

  Result<std::shared_ptr<Communicator>> do_split(int color, int key, std::string name) override {
    char error[1024];
    void* handle = nullptr;
    int rank = 0;
    int size = 0;
    if (api_->split(handle_, color, key, &handle, &rank, &size, error, sizeof error) != 0) {
      return unavailable("MPI: {}", error);
    }
    if (handle == nullptr) return std::shared_ptr<Communicator>();
    return std::shared_ptr<Communicator>(
        std::make_shared<MpiCommunicator>(api_, handle, std::move(name), rank, size, timeout()));
  }

  void post_abort(const std::string& message) override { api_->post_abort(handle_, message.c_str()); }

 private:
  static int transport_dtype(DType dtype) {
    switch (dtype) {
      case DType::kF32: return HXRT_MPI_F32;
      case DType::kF16: return HXRT_MPI_F16;
      case DType::kBF16: return HXRT_MPI_BF16;
      case DType::kI8: return HXRT_MPI_I8;
      case DType::kU8: return HXRT_MPI_U8;
      case DType::kI32: return HXRT_MPI_I32;
      case DType::kI64: return HXRT_MPI_I64;
      default: return -1;  // refused by the base class before it gets here
    }
  }
  static int transport_op(ReduceOp op) {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: return HXRT_MPI_SUM;
      case ReduceOp::kProd: return HXRT_MPI_PROD;
      case ReduceOp::kMax: return HXRT_MPI_MAX;
      case ReduceOp::kMin: return HXRT_MPI_MIN;
    }
    return HXRT_MPI_SUM;
  }

  void abandon(void* request) {
    api_->abandon(request);
    orphans_.push_back(request);
  }

  const HxrtMpiTransport* api_;
  void* handle_;
  std::vector<void*> orphans_;  // guarded by the base's run lock: requests a failure left in flight
};

}  // namespace

Result<std::shared_ptr<Communicator>> open_mpi_world(hal::Duration timeout) {
  const Transport& loaded = transport();
  if (loaded.api == nullptr) return loaded.error;
  char error[1024];
  void* handle = nullptr;
  int rank = 0;
  int size = 0;
  if (loaded.api->init(&handle, &rank, &size, error, sizeof error) != 0) {
    return unavailable("mpi: initialising MPI through {} failed: {}", loaded.path, error);
  }
  return std::shared_ptr<Communicator>(std::make_shared<MpiCommunicator>(loaded.api, handle, "world", rank, size, timeout));
}

Result<std::string> mpi_library_version() {
  const Transport& loaded = transport();
  if (loaded.api == nullptr) return loaded.error;
  std::string version = loaded.api->library_version();
  if (version.empty()) return failed_precondition("mpi: MPI is not initialised yet (open comm::world first)");
  return version;
}

}  // namespace hxrt::comm
