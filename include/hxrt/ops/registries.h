// Registries: the bundle a plan draws on — op schemas, kernels and fusion patterns — held together so that a
// caller makes it in one call and passes one object (runtime::PlanContext::of, runtime::Model, the LLM engine).
//
// Layers: the bundle type lives here in ops/, which cannot see the kernels (kernels/ is registered into ops/, not
// the other way round). make_registries() below fills schemas and fusions only; the one call that adds the kernels
// of every driver is kernels::make_builtin_registries() (hxrt/kernels/builtin_registries.h). Custom kernels and
// fusion patterns are added to the members afterwards, before the bundle is shared.
//
// Lifetime: plans keep pointers to the bundle's KernelDefs, so the bundle must outlive every plan built from it. It
// holds nothing a device made (hxrt/kernels/opencl_kernels.h), so it may outlive the devices it launched on too.
//
// Thread-safety: thread-compatible, as its members: fill it, then share it read-only.
#pragma once

#include <memory>

#include "hxrt/base/status.h"
#include "hxrt/ops/fusion.h"
#include "hxrt/ops/kernel_registry.h"
#include "hxrt/ops/op_schema.h"

namespace hxrt::ops {

struct Registries {
  Registries() = default;
  Registries(const Registries&) = delete;
  Registries& operator=(const Registries&) = delete;

  OpSchemaRegistry schemas;
  KernelRegistry kernels;
  FusionRegistry fusions;
};

struct RegistriesOptions {
  bool builtin_schemas = true;
  bool builtin_fusions = true;
};

// A bundle with the built-in schemas and fusion patterns (as `options` asks) and no kernels.
Result<std::unique_ptr<Registries>> make_registries(const RegistriesOptions& options = {});

}  // namespace hxrt::ops
