// OpenCL streams: host-queued streams (hal/host_queued_stream.h) whose worker submits each command to an in-order,
// profiling-enabled cl_command_queue and waits for it (Note [OpenCL stream submission] in opencl_stream.cc).
//
// Thread-safety: thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "hal/opencl/cl_common.h"
#include "hal/host_queued_stream.h"
#include "hal/opencl/opencl_module.h"

namespace hxrt::hal::opencl {

class OpenClDevice;

class OpenClStream final : public HostQueuedStream {
 public:
  static Result<std::unique_ptr<Stream>> create(OpenClDevice* device, std::string name);
  ~OpenClStream() override;

 protected:
  Status prepare(Command& command) override;
  Status execute_launch(Command& command) override;
  Status execute_copy(Command& command) override;
  Status execute_fill(Command& command) override;
  Result<int64_t> execute_record() override;
  void on_cancel(bool cancelled) override;

 private:
  // One resolved kernel argument: a cl_mem (buffer views, offsets already turned into sub-buffers) or bytes.
  struct Arg {
    ClMem mem;
    std::array<std::byte, KernelArg::kMaxScalarBytes> bytes{};
    uint8_t scalar_size = 0;
  };
  // Where one side of a copy or fill lives: a cl_mem of this device plus an offset, or host memory.
  struct ClPlace {
    ClMem mem;
    uint64_t offset = 0;
    char* host = nullptr;
  };
  // What prepare() resolves, held by the command until it ran (the cl_mem handles stay retained).
  struct LaunchPayload final : DriverPayload {
    std::vector<Arg> args;
    bool pass_ctl = false;  // the kernel takes the control words last
  };
  struct CopyPayload final : DriverPayload {
    ClPlace dst;
    ClPlace src;  // kCopy
  };

  OpenClStream(OpenClDevice* device, std::string name, ClQueue queue, ClMem ctl, int* ctl_host);

  Status prepare_launch(Command& command);
  Result<ClPlace> resolve(const Place& place, const char* what) const;
  // Waits for `event` and turns a negative execution status into a Status.
  Status wait_for(const ClEvent& event, std::string_view what);

  OpenClDevice* cl_device_;
  ClQueue queue_;
  ClMem ctl_;      // two ints: [0] cancel (host writes), [1] kernel status (kernel writes)
  int* ctl_host_;  // persistent mapping of ctl_ on host-unified devices, else null
};

}  // namespace hxrt::hal::opencl
