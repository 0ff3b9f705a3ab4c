// The CPU driver: one device, the host. Memory is host memory (every MemoryKind is addressable and coherent), each
// stream is a worker thread draining an in-order queue, and kernels are C++ functions (cpu_kernel.h) that split
// their loops over one intra-op ThreadPool shared by all streams of the device.
//
// Thread-safety: thread-safe (see Device/Stream/Event).
#pragma once

#include <chrono>
#include <memory>

#include "hxrt/hal/driver.h"

namespace hxrt::hal {

struct CpuDriverOptions {
  // Intra-op threads, including the thread that calls parallel_for; 0 = ThreadPool::default_thread_count().
  int num_threads = 0;
  // How long an idle stream worker spins for new work before sleeping; trades CPU for launch latency.
  std::chrono::microseconds worker_spin{50};
  // How long an idle intra-op pool thread polls for the next parallel loop before sleeping (Note [Spinning pool]).
  std::chrono::microseconds pool_spin{200};
};

std::unique_ptr<Driver> make_cpu_driver(const CpuDriverOptions& options = {});

}  // namespace hxrt::hal
