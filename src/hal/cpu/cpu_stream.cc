#include "hal/cpu/cpu_stream.h"

#include <cstring>

#include "hxrt/hal/cpu/cpu_kernel.h"
#include "hxrt/hal/device.h"

namespace hxrt::hal::cpu {
namespace {

// Copies at least this large are split over the intra-op pool.
constexpr uint64_t kParallelCopyBytes = uint64_t{4} << 20;
constexpr int64_t kCopyChunkBytes = int64_t{1} << 20;

}  // namespace

CpuStream::CpuStream(Device* device, std::string name, ThreadPool* pool, std::chrono::microseconds spin)
    : HostQueuedStream(device, std::move(name), HostQueuedStreamOptions{.spin = spin}), pool_(pool) {
  start();
}

CpuStream::~CpuStream() { stop(); }

Status CpuStream::prepare(Command& command) {
  switch (command.kind) {
    case CommandKind::kLaunch:
      if (dynamic_cast<const CpuKernel*>(command.kernel) == nullptr) {
        return invalid_argument("kernel '{}' is not a CpuKernel", command.kernel->name());
      }
      return ok_status();
    case CommandKind::kCopy:
      if (command.dst.host_address() == nullptr || command.src.host_address() == nullptr) {
        return unimplemented("cpu stream '{}' can only copy between host-addressable memory", name());
      }
      return ok_status();
    case CommandKind::kFill:
      if (command.dst.host_address() == nullptr) {
        return unimplemented("cpu stream '{}': fill target is not host-addressable", name());
      }
      return ok_status();
    default: return ok_status();
  }
}

Status CpuStream::execute_launch(Command& command) {
  const auto& kernel = static_cast<const CpuKernel&>(*command.kernel);  // checked by prepare()
  CpuLaunchContext context(command.config, command.args, *pool_, cancel_flag());
  Status status = kernel.run(context);
  if (!status.ok()) status.with_context(fmt::format("running kernel '{}' on stream '{}'", kernel.name(), name()));
  return status;
}

Status CpuStream::execute_copy(Command& command) {
  auto* dst = static_cast<char*>(command.dst.host_address());
  const auto* src = static_cast<const char*>(command.src.host_address());
  if (command.bytes < kParallelCopyBytes) return HostQueuedStream::execute_copy(command);
  pool_->parallel_for(static_cast<int64_t>(command.bytes), kCopyChunkBytes, [&](int64_t begin, int64_t end) {
    std::memmove(dst + begin, src + begin, static_cast<size_t>(end - begin));
  });
  return ok_status();
}

}  // namespace hxrt::hal::cpu
