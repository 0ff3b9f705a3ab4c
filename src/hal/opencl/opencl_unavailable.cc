// The OpenCL driver of a build without an OpenCL ICD loader: it registers, and says why it cannot work.
#include "hxrt/hal/opencl/opencl_driver.h"

namespace hxrt::hal {
namespace {

class UnavailableOpenClDriver final : public Driver {
 public:
  std::string_view name() const override { return "opencl"; }
  DeviceKind kind() const override { return DeviceKind::kOpenCL; }
  Status available() const override {
    return unavailable("opencl: this build of hxrt has no OpenCL support (CMake found no OpenCL ICD loader)");
  }
  Result<std::vector<DeviceInfo>> enumerate() override { return available(); }
  Result<std::unique_ptr<Device>> open_device(int /*ordinal*/) override { return available(); }
};

}  // namespace

std::unique_ptr<Driver> make_opencl_driver(const OpenClDriverOptions& /*options*/) {
  return std::make_unique<UnavailableOpenClDriver>();
}

Result<OpenClModuleStats> opencl_module_stats(const Module& /*module*/) {
  return invalid_argument("opencl_module_stats: this build has no OpenCL support");
}

}  // namespace hxrt::hal
