#include "hxrt/ops/kernel_def.h"

#include <memory>

#include "hxrt/hal/cpu/cpu_kernel.h"

namespace hxrt::ops {

std::string_view kernel_kind_name(KernelKind kind) {
  switch (kind) {
    case KernelKind::kBuiltin: return "built-in";
    case KernelKind::kCustom: return "custom";
    case KernelKind::kFused: return "fused";
  }
  return "unknown";
}

int64_t Tiling::get(std::string_view name, int64_t fallback) const {
  for (const auto& [key, value] : values) {
    if (key == name) return value;
  }
  return fallback;
}

std::string Tiling::key() const {
  std::string out;
  for (const auto& [name, value] : values) {
    if (!out.empty()) out += ',';
    out += fmt::format("{}={}", name, value);
  }
  if (launch.grid != std::array<uint32_t, 3>{1, 1, 1} || launch.block != std::array<uint32_t, 3>{1, 1, 1}) {
    if (!out.empty()) out += ',';
    out += fmt::format("grid={}x{}x{},block={}x{}x{}", launch.grid[0], launch.grid[1], launch.grid[2],
                       launch.block[0], launch.block[1], launch.block[2]);
  }
  return out.empty() ? "default" : out;
}

LaunchFn cpu_launch(std::string name, CpuComputeFn compute) {
  // One hal kernel per KernelDef, shared by every launch of it. Its only argument is the KernelLaunch, which the
  // caller keeps alive until the stream has run it.
  auto kernel = std::make_shared<const hal::CpuKernel>(
      std::move(name), [compute = std::move(compute)](const hal::CpuLaunchContext& context) {
        const auto* launch = context.host_pointer<KernelLaunch>(0);
        const CpuComputeContext compute_context(*launch, context.pool(), &context.cancel_flag());
        return compute(compute_context);
      });
  return [kernel](hal::Stream& stream, const KernelLaunch& launch) {
    const hal::KernelArg args[] = {hal::KernelArg::host_pointer(&launch)};
    return stream.launch(*kernel, launch.tiling ? launch.tiling->launch : hal::LaunchConfig{}, args);
  };
}

}  // namespace hxrt::ops
