// The CUDA driver of a build without the CUDA toolkit's headers: it registers, and says why it cannot work.
#include "hal/cuda/cuda_drivers.h"

namespace hxrt::hal {
namespace {

Status no_cuda() {
  return unavailable("cuda: this build of hxrt has no CUDA support (CMake found no CUDA toolkit headers)");
}

class UnavailableCudaDriver final : public Driver {
 public:
  std::string_view name() const override { return "cuda"; }
  DeviceKind kind() const override { return DeviceKind::kCuda; }
  Status available() const override { return no_cuda(); }
  Result<std::vector<DeviceInfo>> enumerate() override { return no_cuda(); }
  Result<std::unique_ptr<Device>> open_device(int /*ordinal*/) override { return no_cuda(); }
};

}  // namespace

namespace cuda {

std::unique_ptr<Driver> make_hardware_driver(const CudaDriverOptions& /*options*/) {
  return std::make_unique<UnavailableCudaDriver>();
}

}  // namespace cuda

Result<CudaCompiled> cuda_compile(std::string_view /*name*/, std::string_view /*source*/, std::string_view /*options*/,
                                  std::string_view /*arch*/) {
  return no_cuda();
}

Result<std::string> nvrtc_version() { return no_cuda(); }

}  // namespace hxrt::hal
