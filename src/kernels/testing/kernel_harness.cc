#include "kernels/testing/kernel_harness.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "hxrt/hal/driver.h"
#include "hxrt/kernels/builtin_registries.h"
#include "hxrt/ops/registries.h"

namespace hxrt::kernels::testing {
namespace {

constexpr uint64_t kGuardBytes = 256;
constexpr uint8_t kSentinel = 0xA5;
constexpr uint8_t kPoison = 0xFF;  // all-ones: NaN for floats, -1 for integers

// The built-in registries and the devices shared by every call (creating a device starts threads).
struct Environment {
  std::unique_ptr<ops::Registries> registries;
  hal::DriverRegistry drivers;
  std::map<std::string, std::unique_ptr<hal::Device>> devices;
  std::map<std::string, std::unique_ptr<hal::Stream>> streams;
  Status init_status;
  std::mutex mutex;

  Environment() {
    Result<std::unique_ptr<ops::Registries>> made = make_builtin_registries();
    init_status = made.status();
    if (init_status.ok()) registries = std::move(made).value();
    if (init_status.ok()) init_status = hal::register_builtin_drivers(drivers);
  }

  Result<std::pair<hal::Device*, hal::Stream*>> device(const std::string& spec) {
    auto it = devices.find(spec);
    if (it == devices.end()) {
      HXRT_ASSIGN_OR_RETURN(std::unique_ptr<hal::Device> opened, drivers.open(spec));
      HXRT_ASSIGN_OR_RETURN(std::unique_ptr<hal::Stream> stream,
                            opened->create_stream(hal::StreamOptions{.name = "harness"}));
      streams[spec] = std::move(stream);
      it = devices.emplace(spec, std::move(opened)).first;
    }
    return std::make_pair(it->second.get(), streams[spec].get());
  }
};

Environment& environment() {
  static Environment* env = new Environment();  // never destroyed: tests may run kernels until exit
  return *env;
}

}  // namespace

double normalized_max_error(const std::vector<float>& actual, const std::vector<double>& expected) {
  HXRT_CHECK(actual.size() == expected.size(), "{} vs {} values", actual.size(), expected.size());
  double scale = 1.0;
  for (double e : expected) scale = std::max(scale, std::abs(e));
  double worst = 0.0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double diff = std::abs(static_cast<double>(actual[i]) - expected[i]);
    if (std::isnan(diff)) return INFINITY;
    worst = std::max(worst, diff);
  }
  return worst / scale;
}

Result<OpResult> run_op(const OpCall& call) {
  Environment& env = environment();
  HXRT_RETURN_IF_ERROR(env.init_status);
  std::lock_guard<std::mutex> lock(env.mutex);
  HXRT_ASSIGN_OR_RETURN(auto device_and_stream, env.device(call.device));
  auto [device, stream] = device_and_stream;

  // A one-node graph.
  graph::Graph graph("harness");
  std::vector<std::string> input_names;
  for (size_t i = 0; i < call.inputs.size(); ++i) {
    if (!call.inputs[i].has_value()) {
      input_names.emplace_back();
      continue;
    }
    const HostTensor& tensor = *call.inputs[i];
    const graph::TensorDesc desc{tensor.dtype, graph::SymShape::from(tensor.shape)};
    std::string name = fmt::format("in{}", i);
    const bool constant = std::find(call.constant_inputs.begin(), call.constant_inputs.end(), i) !=
                          call.constant_inputs.end();
    if (constant) {
      HXRT_RETURN_IF_ERROR(graph.add_initializer(name, desc, graph::WeightData::copy_of(tensor.bytes)).status());
    } else {
      HXRT_RETURN_IF_ERROR(graph.add_input(name, desc).status());
    }
    input_names.push_back(std::move(name));
  }
  std::vector<std::string> output_names;
  for (size_t i = 0; i < call.num_outputs; ++i) output_names.push_back(fmt::format("out{}", i));
  int version = call.version;
  if (version <= 0) {
    HXRT_ASSIGN_OR_RETURN(const ops::OpSchema* schema, env.registries->schemas.find(call.op_type, call.domain, 0));
    version = schema->since_version;
  }
  HXRT_ASSIGN_OR_RETURN(graph::NodeId node_id, graph.add_node("op", call.op_type, input_names, output_names,
                                                              call.attrs, call.domain, version));
  for (const std::string& name : output_names) HXRT_RETURN_IF_ERROR(graph.mark_output(name));

  // Schema: defaults, checks, shape inference; every dim is static here.
  HXRT_RETURN_IF_ERROR_CTX(env.registries->schemas.apply_defaults(graph.mutable_node(node_id)), "applying attribute defaults");
  std::vector<ops::DimCheck> checks;
  HXRT_RETURN_IF_ERROR_CTX(env.registries->schemas.infer_node(graph, node_id, &checks), "shape inference");
  const graph::Node& node = graph.node(node_id);

  // Kernel selection, attributes, tiling.
  ops::SelectionOptions options;
  if (!call.force_kernel.empty()) options.forced["op"] = call.force_kernel;
  HXRT_ASSIGN_OR_RETURN(ops::Selection selection, env.registries->kernels.select(graph, node, device->info(), options));
  const ops::KernelDef& kernel = *selection.chosen;
  std::unique_ptr<ops::KernelParams> params;
  if (kernel.parse_attrs) {
    Result<std::unique_ptr<ops::KernelParams>> parsed = kernel.parse_attrs(graph, node);
    if (!parsed.ok()) return std::move(parsed).take_status().with_context("parsing attributes");
    params = std::move(parsed).value();
  }

  // Device buffers: inputs uploaded; outputs poisoned and fenced by sentinels.
  std::vector<std::unique_ptr<hal::Buffer>> buffers;
  // Every exit drains the stream before the buffers and the caller's host tensors go away: uploads are
  // asynchronous, and an early error return (tiling, allocation) must not leave a copy reading freed memory.
  struct DrainOnExit {
    hal::Stream* stream;
    ~DrainOnExit() {
      if (!stream->synchronize().ok()) stream->reset().ignore();
    }
  } drain{stream};
  ops::KernelLaunch launch;
  launch.node = &node;
  launch.params = params.get();
  for (size_t i = 0; i < call.inputs.size(); ++i) {
    if (!call.inputs[i].has_value()) {
      launch.inputs.push_back(ops::TensorRef{});
      continue;
    }
    const HostTensor& tensor = *call.inputs[i];
    HXRT_ASSIGN_OR_RETURN(std::unique_ptr<hal::Buffer> buffer,
                          device->allocate(tensor.bytes.size() + kGuardBytes, hal::MemoryKind::kDevice));
    const hal::BufferView view(buffer.get(), 0, tensor.bytes.size());
    if (!tensor.bytes.empty()) HXRT_RETURN_IF_ERROR(stream->copy_from_host(view, tensor.bytes.data()));
    launch.inputs.push_back(ops::TensorRef{tensor.dtype, tensor.shape, view});
    buffers.push_back(std::move(buffer));
  }
  std::vector<uint64_t> output_bytes;
  std::vector<hal::Buffer*> output_buffers;
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    const graph::TensorDesc& desc = graph.value(node.outputs[i]).desc;
    HXRT_ASSIGN_OR_RETURN(Shape shape, desc.shape.resolve({}));
    HXRT_ASSIGN_OR_RETURN(uint64_t bytes, storage_bytes(desc.dtype, static_cast<uint64_t>(shape.num_elements())));
    HXRT_ASSIGN_OR_RETURN(std::unique_ptr<hal::Buffer> buffer,
                          device->allocate(bytes + 2 * kGuardBytes, hal::MemoryKind::kDevice));
    HXRT_RETURN_IF_ERROR(stream->fill(*buffer, kSentinel, 1));
    const hal::BufferView view(buffer.get(), kGuardBytes, bytes);
    if (bytes > 0) HXRT_RETURN_IF_ERROR(stream->fill(view, kPoison, 1));
    launch.outputs.push_back(ops::TensorRef{desc.dtype, shape, view});
    output_bytes.push_back(bytes);
    output_buffers.push_back(buffer.get());
    buffers.push_back(std::move(buffer));
  }

  ops::Tiling tiling;
  if (kernel.tiling) {
    const ops::TilingQuery query{params.get(), launch.inputs, launch.outputs, &device->info()};
    Result<ops::Tiling> computed = kernel.tiling(query);
    if (!computed.ok()) return std::move(computed).take_status().with_context("computing the tiling");
    tiling = std::move(computed).value();
  }
  launch.tiling = &tiling;
  Status launched = kernel.launch(*stream, launch);
  Status synced = stream->synchronize();
  if (!launched.ok() || !synced.ok()) {
    Status error = launched.ok() ? synced : launched;
    HXRT_RETURN_IF_ERROR(stream->reset());
    return std::move(error).with_context(fmt::format("launching kernel '{}'", kernel.name));
  }

  OpResult result;
  result.kernel = kernel.name;
  result.tiling = tiling.key();
  for (size_t i = 0; i < output_buffers.size(); ++i) {
    std::vector<std::byte> whole(output_bytes[i] + 2 * kGuardBytes);
    HXRT_RETURN_IF_ERROR(stream->copy_to_host(whole.data(), *output_buffers[i]));
    HXRT_RETURN_IF_ERROR(stream->synchronize());
    for (uint64_t b = 0; b < whole.size(); ++b) {
      if (b >= kGuardBytes && b < kGuardBytes + output_bytes[i]) continue;
      if (whole[b] != std::byte{kSentinel}) {
        return internal_error("kernel '{}' wrote outside output {}: byte {} {} the tensor", kernel.name, i,
                              b < kGuardBytes ? kGuardBytes - b : b - kGuardBytes - output_bytes[i] + 1,
                              b < kGuardBytes ? "before" : "after");
      }
    }
    HostTensor out;
    out.dtype = launch.outputs[i].dtype;
    out.shape = launch.outputs[i].shape;
    out.bytes.assign(whole.begin() + kGuardBytes, whole.begin() + static_cast<std::ptrdiff_t>(kGuardBytes + output_bytes[i]));
    result.outputs.push_back(std::move(out));
  }
  return result;
}

}  // namespace hxrt::kernels::testing
