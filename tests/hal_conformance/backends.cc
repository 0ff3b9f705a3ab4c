#include "hal_conformance/conformance.h"

namespace hxrt::hal::cts {

const std::vector<Backend>& conformance_backends() {
  static const std::vector<Backend> backends = {cpu_backend(), opencl_backend(), cuda_backend()};
  return backends;
}

}  // namespace hxrt::hal::cts
