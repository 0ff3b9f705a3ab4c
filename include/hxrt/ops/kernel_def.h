// KernelDef: one implementation of one op on one device kind, and what it sees when it runs.
//
// A kernel goes through three stages, each a function of its KernelDef:
//   parse_attrs (once, at plan time): node attributes → KernelParams, the kernel's own parsed parameters;
//   tiling (once per shape bucket, cached): params + concrete shapes + device capabilities → Tiling, the launch
//     geometry and tile sizes, with a key for caches and traces;
//   launch (every run): enqueue the work on a stream with the bound tensors.
// KernelParams, Tiling and KernelLaunch must outlive the asynchronous work they describe; the runtime owns them.
//
// Thread-safety: KernelDefs are immutable after registration; their functions must be reentrant.
#pragma once

#include <climits>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hxrt/base/check.h"
#include "hxrt/base/dtype.h"
#include "hxrt/base/shape.h"
#include "hxrt/base/status.h"
#include "hxrt/base/thread_pool.h"
#include "hxrt/graph/graph.h"
#include "hxrt/hal/buffer.h"
#include "hxrt/hal/device.h"
#include "hxrt/hal/kernel.h"
#include "hxrt/hal/stream.h"

namespace hxrt::ops {

enum class KernelKind : uint8_t { kBuiltin, kCustom, kFused };
std::string_view kernel_kind_name(KernelKind kind);

inline constexpr int kMaxOpVersion = INT_MAX;

// Objects that know their dynamic type, so that readers downcast them checked: a type derives from
// Typed<Self, Base> and declares `static constexpr std::string_view kName`; checked_as<T>() aborts naming both
// types when the object is not a T. KernelParams and KernelGeometry are the two kinds.
class TypedObject {
 public:
  virtual ~TypedObject() = default;
  // Identity of the most-derived type (typed_object_id<T>()); null for an object that declares no type.
  virtual const void* type_id() const { return nullptr; }
  virtual std::string_view type_name() const { return "(untyped)"; }
};

// One address per type: the identity that checked_as<T>() compares.
template <typename T>
inline constexpr char typed_object_tag = 0;
template <typename T>
constexpr const void* typed_object_id() {
  return &typed_object_tag<T>;
}

template <typename Self, typename Base>
class Typed : public Base {
 public:
  const void* type_id() const final { return typed_object_id<Self>(); }
  std::string_view type_name() const final { return Self::kName; }
};

// `object` viewed as a T; `what` names the role in the message. Programmer error (HXRT_CHECK, naming both types)
// when it is null or of another type.
template <typename T>
const T& checked_as(const TypedObject* object, std::string_view what) {
  HXRT_CHECK(object != nullptr, "{}: expected {}, got none", what, T::kName);
  HXRT_CHECK(object->type_id() == typed_object_id<T>(), "{}: expected {}, got {}", what, T::kName, object->type_name());
  return static_cast<const T&>(*object);
}

// A kernel's parsed attributes. to_string() is shown by `hxrt inspect` and in error reports. The built-in ops'
// params live in include/hxrt/ops/params/, one header per op family, shared by the schemas and every backend; a
// params struct derives from TypedParams<Self> and is read through params_as<T>() (KernelLaunch, TilingQuery,
// CpuComputeContext).
class KernelParams : public TypedObject {
 public:
  virtual std::string to_string() const { return ""; }
};
template <typename Self>
using TypedParams = Typed<Self, KernelParams>;
template <typename T>
const T& params_as(const KernelParams* params) {
  return checked_as<T>(params, "kernel params");
}

// What a tiling function derived from params and concrete shapes (loop bounds, strides, merged dims) and launch
// needs again: computed once per tiling (cached per kernel, shapes and params) and carried in Tiling::geometry.
class KernelGeometry : public TypedObject {};
template <typename Self>
using TypedGeometry = Typed<Self, KernelGeometry>;

// A tensor as a kernel sees it at run time: concrete dtype and shape, and its memory (row-major, contiguous).
struct TensorRef {
  DType dtype = DType::kF32;
  Shape shape;
  hal::BufferView view;

  // Host address (CPU kernels and host-addressable memory); null otherwise.
  template <typename T = void>
  T* data() const {
    return static_cast<T*>(view.host_address());
  }
  int64_t num_elements() const { return shape.num_elements(); }
};

// Launch geometry and named tile sizes, computed from concrete shapes.
struct Tiling {
  hal::LaunchConfig launch;
  std::vector<std::pair<std::string, int64_t>> values;  // {"tile_m", 64}, {"block_dim", 8}, ...
  // Optional geometry for launch (immutable, shared by copies of this Tiling); read with geometry_as<T>().
  std::shared_ptr<const KernelGeometry> geometry;
  template <typename T>
  const T& geometry_as() const {
    return checked_as<T>(geometry.get(), "tiling geometry");
  }
  int64_t get(std::string_view name, int64_t fallback = 0) const;
  // "block_dim=8,tile_m=64" — stable, used as the tiling cache and trace key.
  std::string key() const;
};

// What tiling() receives: parsed params, concrete input/output shapes (views may be empty), the device.
struct TilingQuery {
  const KernelParams* params = nullptr;
  std::span<const TensorRef> inputs;
  std::span<const TensorRef> outputs;
  const hal::DeviceInfo* device = nullptr;
  template <typename T>
  const T& params_as() const {
    return ops::params_as<T>(params);
  }
};

// What launch() receives. Inputs are in node input order (an omitted optional input has an empty view and
// rank-0 shape); outputs in node output order.
struct KernelLaunch {
  const graph::Node* node = nullptr;
  const KernelParams* params = nullptr;
  const Tiling* tiling = nullptr;
  std::vector<TensorRef> inputs;
  std::vector<TensorRef> outputs;
  template <typename T>
  const T& params_as() const {
    return ops::params_as<T>(params);
  }
};

using SupportsFn = std::function<bool(const graph::Graph&, const graph::Node&, std::string* why_not)>;
using ParseAttrsFn = std::function<Result<std::unique_ptr<KernelParams>>(const graph::Graph&, const graph::Node&)>;
using TilingFn = std::function<Result<Tiling>(const TilingQuery&)>;
using LaunchFn = std::function<Status(hal::Stream&, const KernelLaunch&)>;

struct KernelDef {
  std::string op_type;
  std::string domain;  // "" = default domain
  int since_version = 1;
  int end_version = kMaxOpVersion;  // inclusive
  hal::DeviceKind device = hal::DeviceKind::kCpu;
  // Allowed dtypes per input index; an empty list (or an index past the end) accepts any dtype.
  std::vector<std::vector<DType>> input_dtypes;
  KernelKind kind = KernelKind::kBuiltin;
  std::string name;      // implementation name, unique per (op, domain, device): "MatMul", "BatchMatMulV3"
  int impl_version = 1;  // revision of this implementation
  int priority = 0;      // higher wins under the default policy
  std::string description;

  SupportsFn supports;   // optional extra capability check (layouts, attribute values)
  ParseAttrsFn parse_attrs;  // optional; null means no parameters
  TilingFn tiling;       // optional; null means a single default Tiling
  LaunchFn launch;       // required
};

// CPU kernels: a compute function run on a CPU stream's worker, with the device's intra-op pool.
class CpuComputeContext {
 public:
  CpuComputeContext(const KernelLaunch& launch, ThreadPool& pool, const std::atomic<bool>* cancel)
      : launch_(launch), pool_(pool), cancel_(cancel) {}
  const KernelLaunch& launch() const { return launch_; }
  const TensorRef& input(size_t i) const { return launch_.inputs.at(i); }
  const TensorRef& output(size_t i) const { return launch_.outputs.at(i); }
  size_t num_inputs() const { return launch_.inputs.size(); }
  bool has_input(size_t i) const { return i < launch_.inputs.size() && launch_.inputs[i].view.buffer != nullptr; }
  // Checked as params_as<P>().
  template <typename P>
  const P& params() const {
    return ops::params_as<P>(launch_.params);
  }
  const Tiling& tiling() const { return *launch_.tiling; }
  ThreadPool& pool() const { return pool_; }
  bool cancelled() const { return cancel_ != nullptr && cancel_->load(std::memory_order_relaxed); }

 private:
  const KernelLaunch& launch_;
  ThreadPool& pool_;
  const std::atomic<bool>* cancel_;
};

using CpuComputeFn = std::function<Status(const CpuComputeContext&)>;
// A LaunchFn that enqueues `compute` on a CPU stream (the KernelLaunch is passed by pointer and must outlive the
// work). `name` names the hal kernel in stream errors.
LaunchFn cpu_launch(std::string name, CpuComputeFn compute);

}  // namespace hxrt::ops
