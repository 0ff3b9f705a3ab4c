// OpenCL streams: a host-side command queue drained by one submitter thread into an in-order, profiling-enabled
// cl_command_queue, one command at a time (Note [OpenCL stream submission] in opencl_stream.cc).
//
// Thread-safety: thread-safe. Host callbacks run on the submitter thread, never under the stream's lock.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "hal/opencl/cl_common.h"
#include "hal/opencl/opencl_event.h"
#include "hal/opencl/opencl_module.h"
#include "hxrt/hal/stream.h"

namespace hxrt::hal::opencl {

class OpenClDevice;

class OpenClStream final : public Stream {
 public:
  static Result<std::unique_ptr<Stream>> create(OpenClDevice* device, std::string name);
  ~OpenClStream() override;

  Status synchronize(Duration timeout) override;
  StreamState query() const override;
  Status status() const override;
  void abort() override;
  Status reset() override;

 protected:
  Status do_launch(const Kernel& kernel, const LaunchConfig& config, std::span<const KernelArg> args) override;
  Status do_copy(BufferView dst, BufferView src) override;
  Status do_copy_from_host(BufferView dst, const void* src) override;
  Status do_copy_to_host(void* dst, BufferView src) override;
  Status do_fill(BufferView dst, uint32_t pattern, uint32_t pattern_bytes) override;
  Status do_host_callback(HostCallback callback) override;
  Status do_record(Event& event) override;
  Status do_wait(Event& event, Duration timeout) override;

 private:
  // One resolved kernel argument: a cl_mem (buffer views, offsets already turned into sub-buffers) or bytes.
  struct Arg {
    ClMem mem;
    std::array<std::byte, KernelArg::kMaxScalarBytes> bytes{};
    uint8_t scalar_size = 0;
  };
  // Where one side of a copy lives: a cl_mem of this device plus an offset, or host memory.
  struct Place {
    ClMem mem;
    uint64_t offset = 0;
    char* host = nullptr;
  };
  enum class Op : uint8_t { kLaunch, kCopy, kFill, kCallback, kRecord, kWait };
  struct Command {
    Command() = default;
    explicit Command(Op o) : op(o) {}
    Op op = Op::kLaunch;
    const OpenClKernel* kernel = nullptr;  // kLaunch
    LaunchConfig config;                   // kLaunch
    std::vector<Arg> args;                 // kLaunch
    bool pass_ctl = false;                 // kLaunch: the kernel takes the control words last
    Place dst;                             // kCopy, kFill
    Place src;                             // kCopy
    uint64_t bytes = 0;                    // kCopy, kFill
    uint32_t pattern = 0;                  // kFill
    uint32_t pattern_bytes = 0;            // kFill
    HostCallback callback;                 // kCallback
    std::shared_ptr<EventSignal> signal;   // kRecord, kWait
    Duration timeout = kInfinite;          // kWait
  };

  OpenClStream(OpenClDevice* device, std::string name, ClQueue queue, ClMem ctl, int* ctl_host);

  Result<Place> resolve(const BufferView& view, const char* what) const;
  Status enqueue(Command command, const std::function<void()>& on_enqueued = {});
  void submitter_loop();
  // Submits one command and waits for it; returns its failure (with context) or OK.
  Status execute(Command& command);
  Status execute_launch(Command& command);
  Status execute_copy(Command& command);
  Status execute_fill(Command& command);
  Status execute_record(Command& command);
  Status execute_wait(Command& command);
  // Waits for `event` and turns a negative execution status into a Status.
  Status wait_for(const ClEvent& event, std::string_view what);
  void skip(Command& command, const Status& error);
  void fail_locked(Status error);
  Status sticky_error_locked() const;
  void set_cancel_word(int value);

  OpenClDevice* cl_device_;
  ClQueue queue_;
  ClMem ctl_;      // two ints: [0] cancel (host writes), [1] kernel status (kernel writes)
  int* ctl_host_;  // persistent mapping of ctl_ on host-unified devices, else null

  mutable std::mutex mutex_;
  std::condition_variable work_cv_;
  std::condition_variable idle_cv_;
  std::deque<Command> queue_commands_;       // guarded by mutex_
  Status error_;                             // guarded by mutex_; first failure
  bool stopping_ = false;                    // guarded by mutex_
  std::shared_ptr<EventSignal> waiting_on_;  // guarded by mutex_; the signal a kWait is blocked on
  std::atomic<int> sync_waiters_{0};

  std::atomic<uint64_t> enqueued_{0};
  std::atomic<uint64_t> completed_{0};
  std::atomic<bool> failed_{false};
  std::atomic<bool> cancel_{false};

  std::thread submitter_;
};

}  // namespace hxrt::hal::opencl
