// CPU streams: host-queued streams (hal/host_queued_stream.h) whose worker runs each command itself — kernels with
// the device's intra-op ThreadPool, copies and fills with memmove/memset (large copies split over the pool).
//
// The worker spins briefly for new work before sleeping (CpuDriverOptions::worker_spin), trading a little CPU for
// launch latency.
//
// Thread-safety: thread-safe.
#pragma once

#include <chrono>

#include "hal/host_queued_stream.h"
#include "hxrt/base/thread_pool.h"

namespace hxrt::hal::cpu {

class CpuStream final : public HostQueuedStream {
 public:
  CpuStream(Device* device, std::string name, ThreadPool* pool, std::chrono::microseconds spin);
  ~CpuStream() override;

 protected:
  Status prepare(Command& command) override;
  Status execute_launch(Command& command) override;
  Status execute_copy(Command& command) override;

 private:
  ThreadPool* pool_;
};

}  // namespace hxrt::hal::cpu
