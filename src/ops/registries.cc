#include "hxrt/ops/registries.h"

namespace hxrt::ops {

Result<std::unique_ptr<Registries>> make_registries(const RegistriesOptions& options) {
  auto registries = std::make_unique<Registries>();
  if (options.builtin_schemas) {
    HXRT_RETURN_IF_ERROR_CTX(register_builtin_schemas(registries->schemas), "registering the built-in op schemas");
  }
  if (options.builtin_fusions) {
    HXRT_RETURN_IF_ERROR_CTX(register_builtin_fusions(registries->fusions), "registering the built-in fusions");
  }
  return registries;
}

}  // namespace hxrt::ops
