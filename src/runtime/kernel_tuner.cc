#include "hxrt/runtime/kernel_tuner.h"

#include <algorithm>
#include <random>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hxrt/base/float16.h"
#include "hxrt/ops/kernel_registry.h"

namespace hxrt::runtime {
namespace {

std::string_view outcome_name(TunedNode::Outcome outcome) {
  switch (outcome) {
    case TunedNode::Outcome::kMeasured: return "measured";
    case TunedNode::Outcome::kCached: return "cached";
    case TunedNode::Outcome::kSkipped: return "skipped";
  }
  return "?";
}

// Bytes for an input the tuner makes up: floats in [-1, 1) without zeros, everything else zero (a valid index).
std::vector<std::byte> synthetic_bytes(DType dtype, int64_t elements, uint64_t bytes, std::mt19937& rng) {
  std::vector<std::byte> out(bytes);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  auto next = [&] {
    float v = uniform(rng);
    return v == 0.0f ? 0.5f : v;
  };
  if (dtype == DType::kF32) {
    auto* p = reinterpret_cast<float*>(out.data());
    for (int64_t i = 0; i < elements; ++i) p[i] = next();
  } else if (dtype == DType::kF16) {
    auto* p = reinterpret_cast<uint16_t*>(out.data());
    for (int64_t i = 0; i < elements; ++i) p[i] = f32_to_f16(next());
  } else if (dtype == DType::kBF16) {
    auto* p = reinterpret_cast<uint16_t*>(out.data());
    for (int64_t i = 0; i < elements; ++i) p[i] = f32_to_bf16(next());
  }
  return out;
}

int64_t median(std::vector<int64_t> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

Result<std::unique_ptr<KernelTuner>> KernelTuner::create(hal::Device& device, ops::TimingCache& cache,
                                                         TunerOptions options) {
  if (options.repetitions < 1 || options.warmup < 0) {
    return invalid_argument("kernel tuner: repetitions must be >= 1 and warmup >= 0 (got {} and {})",
                            options.repetitions, options.warmup);
  }
  HXRT_ASSIGN_OR_RETURN(std::unique_ptr<hal::Stream> stream, device.create_stream({.name = "tuner"}));
  return std::unique_ptr<KernelTuner>(new KernelTuner(device, cache, std::move(options), std::move(stream)));
}

int KernelTuner::measured() const {
  return static_cast<int>(std::count_if(nodes_.begin(), nodes_.end(),
                                        [](const TunedNode& n) { return n.outcome == TunedNode::Outcome::kMeasured; }));
}

Status KernelTuner::measure(const graph::Graph& graph, const graph::Node& node,
                            std::span<const ops::KernelDef* const> candidates) {
  TunedNode tuned;
  tuned.node = node.name;
  tuned.op_type = node.op_type;
  tuned.bucket = ops::shape_bucket(graph, node, device_.info(), options_.dims);
  auto finish = [&](TunedNode::Outcome outcome) {
    tuned.outcome = outcome;
    for (const ops::KernelDef* kernel : candidates) {
      if (std::optional<int64_t> ns = cache_.find(kernel->name, tuned.bucket)) tuned.times_ns.emplace_back(kernel->name, *ns);
    }
    nodes_.push_back(std::move(tuned));
    return ok_status();
  };
  if (!options_.remeasure && std::all_of(candidates.begin(), candidates.end(), [&](const ops::KernelDef* k) {
        return cache_.find(k->name, tuned.bucket).has_value();
      })) {
    return finish(TunedNode::Outcome::kCached);
  }

  // Concrete shapes of every input and output; a dim left symbolic means the node cannot be measured.
  std::vector<std::unique_ptr<hal::Buffer>> buffers;
  std::vector<ops::TensorRef> inputs, outputs;
  std::mt19937 rng(options_.seed);
  auto make_tensor = [&](graph::ValueId id, bool fill) -> Result<ops::TensorRef> {
    const graph::Value& value = graph.value(id);
    Result<Shape> shape = value.desc.shape.resolve(options_.dims);
    if (!shape.ok()) {
      return failed_precondition("'{}' has shape {}: {} (give the symbol a value to measure)", value.name,
                                 value.desc.shape.to_string(), shape.status().message());
    }
    HXRT_ASSIGN_OR_RETURN(uint64_t bytes, storage_bytes(value.desc.dtype, static_cast<uint64_t>(shape->num_elements())));
    HXRT_ASSIGN_OR_RETURN(std::unique_ptr<hal::Buffer> buffer,
                          device_.allocate(std::max<uint64_t>(bytes, 1), hal::MemoryKind::kDevice));
    ops::TensorRef ref{value.desc.dtype, *shape, hal::BufferView(buffer.get(), 0, bytes)};
    if (fill && bytes > 0) {
      if (value.is_initializer) {
        HXRT_RETURN_IF_ERROR(stream_->copy_from_host(ref.view, value.weight.data));
      } else {
        std::vector<std::byte> host = synthetic_bytes(value.desc.dtype, shape->num_elements(), bytes, rng);
        HXRT_RETURN_IF_ERROR(stream_->copy_from_host(ref.view, host.data()));
        HXRT_RETURN_IF_ERROR(stream_->synchronize(options_.timeout));  // `host` goes out of scope
      }
    }
    buffers.push_back(std::move(buffer));
    return ref;
  };
  for (graph::ValueId id : node.inputs) {
    if (id == graph::kNoValue) {
      inputs.push_back(ops::TensorRef{});
      continue;
    }
    Result<ops::TensorRef> ref = make_tensor(id, /*fill=*/true);
    if (!ref.ok()) {
      if (ref.status().code() != StatusCode::kFailedPrecondition) return ref.status();
      tuned.notes.emplace_back(ref.status().message());
      return finish(TunedNode::Outcome::kSkipped);
    }
    inputs.push_back(*ref);
  }
  for (graph::ValueId id : node.outputs) {
    Result<ops::TensorRef> ref = make_tensor(id, /*fill=*/false);
    if (!ref.ok()) {
      if (ref.status().code() != StatusCode::kFailedPrecondition) return ref.status();
      tuned.notes.emplace_back(ref.status().message());
      return finish(TunedNode::Outcome::kSkipped);
    }
    outputs.push_back(*ref);
  }
  HXRT_RETURN_IF_ERROR(stream_->synchronize(options_.timeout));

  for (const ops::KernelDef* kernel : candidates) {
    Result<int64_t> ns = time_candidate(graph, node, *kernel, inputs, outputs);
    if (ns.ok()) {
      cache_.record(kernel->name, tuned.bucket, *ns);
    } else {
      cache_.record(kernel->name, tuned.bucket, ops::TimingCache::kFailed);
      tuned.notes.push_back(fmt::format("{} failed: {}", kernel->name, ns.status().message()));
      HXRT_RETURN_IF_ERROR(stream_->reset());
    }
  }
  return finish(TunedNode::Outcome::kMeasured);
}

Result<int64_t> KernelTuner::time_candidate(const graph::Graph& graph, const graph::Node& node,
                                            const ops::KernelDef& kernel, std::vector<ops::TensorRef>& inputs,
                                            std::vector<ops::TensorRef>& outputs) {
  std::unique_ptr<ops::KernelParams> params;
  if (kernel.parse_attrs) {
    HXRT_ASSIGN_OR_RETURN(params, kernel.parse_attrs(graph, node));
  }
  ops::Tiling tiling;
  if (kernel.tiling) {
    HXRT_ASSIGN_OR_RETURN(tiling, kernel.tiling(ops::TilingQuery{params.get(), inputs, outputs, &device_.info()}));
  }
  const ops::KernelLaunch launch{&node, params.get(), &tiling, inputs, outputs};
  for (int i = 0; i < options_.warmup; ++i) HXRT_RETURN_IF_ERROR(kernel.launch(*stream_, launch));
  std::vector<std::unique_ptr<hal::Event>> events;
  for (int i = 0; i <= options_.repetitions; ++i) {
    HXRT_ASSIGN_OR_RETURN(std::unique_ptr<hal::Event> event, device_.create_event());
    events.push_back(std::move(event));
  }
  // Back-to-back launches between events: each interval is one launch as the stream runs it.
  HXRT_RETURN_IF_ERROR(stream_->record(*events[0]));
  for (int i = 1; i <= options_.repetitions; ++i) {
    HXRT_RETURN_IF_ERROR(kernel.launch(*stream_, launch));
    HXRT_RETURN_IF_ERROR(stream_->record(*events[static_cast<size_t>(i)]));
  }
  HXRT_RETURN_IF_ERROR(stream_->synchronize(options_.timeout));
  std::vector<int64_t> intervals;
  for (size_t i = 1; i < events.size(); ++i) {
    HXRT_ASSIGN_OR_RETURN(hal::Duration elapsed, events[i]->elapsed_since(*events[i - 1]));
    intervals.push_back(std::max<int64_t>(elapsed.count(), 0));
  }
  return median(std::move(intervals));
}

std::string KernelTuner::report() const {
  std::string out;
  for (const TunedNode& n : nodes_) {
    std::vector<std::string> times;
    for (const auto& [kernel, ns] : n.times_ns) {
      times.push_back(ns == ops::TimingCache::kFailed ? fmt::format("{} failed", kernel)
                                                      : fmt::format("{} {:.1f} us", kernel, static_cast<double>(ns) / 1e3));
    }
    out += fmt::format("{} ({}) on {}: {}{}{}\n", n.node, n.op_type, n.bucket, outcome_name(n.outcome),
                       times.empty() ? "" : ": ", fmt::join(times, ", "));
    for (const std::string& note : n.notes) out += fmt::format("  {}\n", note);
  }
  return out;
}

}  // namespace hxrt::runtime
