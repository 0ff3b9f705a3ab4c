// KernelTuner: the measured arbitration policy's stopwatch. While a plan is built, a node with more than one
// compatible kernel and no complete timing for its shape bucket is handed to the tuner, which runs every candidate
// on the device on tensors of the bucket's shapes and records each median into the TimingCache; the registry then
// picks the fastest (KernelRegistry::select, policy "measured"). A bucket is measured once — the cache is saved and
// loaded as JSON (timing_cache.h), so later plans on the same machine measure nothing (as TensorRT's timing cache).
//
// What is measured: for each candidate, attributes parsed and tiling computed as the executor would, `warmup` launches,
// then `repetitions` launches each bracketed by device events; the median of the event intervals. Weights
// (initializers) are the graph's own bytes; other inputs are random values (floats in [-1, 1), never zero; integer
// inputs zero, a valid index for gathers). Symbolic dims take their values from TunerOptions::dims — the shapes a
// deployment expects most (e.g. n_tokens=1 for decode); a node whose shapes stay symbolic is skipped and reported.
// A candidate that fails on the bucket's shapes is reported and recorded as TimingCache::kFailed: it never wins there.
//
// Thread-safety: thread-compatible (one plan build at a time); the TimingCache it writes is thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "hxrt/base/status.h"
#include "hxrt/graph/dim.h"
#include "hxrt/graph/graph.h"
#include "hxrt/hal/device.h"
#include "hxrt/hal/stream.h"
#include "hxrt/ops/kernel_def.h"
#include "hxrt/ops/timing_cache.h"

namespace hxrt::runtime {

struct TunerOptions {
  int warmup = 1;
  int repetitions = 5;
  graph::SymbolBindings dims;  // values for symbolic dims while measuring (and in the bucket key)
  bool remeasure = false;      // measure buckets the cache already holds
  hal::Duration timeout = std::chrono::seconds(60);  // per candidate
  uint32_t seed = 1;
};

// What happened to one node.
struct TunedNode {
  std::string node;
  std::string op_type;
  std::string bucket;
  enum class Outcome : uint8_t { kMeasured, kCached, kSkipped } outcome = Outcome::kMeasured;
  std::vector<std::pair<std::string, int64_t>> times_ns;  // candidate → median ns (measured or cached)
  std::vector<std::string> notes;                         // skipped: why; failed candidates: kernel and error
};

class KernelTuner {
 public:
  // `device` and `cache` must outlive the tuner.
  static Result<std::unique_ptr<KernelTuner>> create(hal::Device& device, ops::TimingCache& cache,
                                                     TunerOptions options = {});

  // Records a timing for every candidate of `node` on its bucket unless the cache holds them all (and remeasure is
  // off). Errors only for the tuner's own failures (no memory for the tensors, a device that cannot record events);
  // a candidate's failure is a note, not an error.
  Status measure(const graph::Graph& graph, const graph::Node& node, std::span<const ops::KernelDef* const> candidates);

  ops::TimingCache& cache() const { return cache_; }
  const TunerOptions& options() const { return options_; }
  const std::vector<TunedNode>& nodes() const { return nodes_; }
  int measured() const;  // nodes measured by this tuner
  // One line per node: bucket, each candidate's time, the outcome and notes.
  std::string report() const;

 private:
  KernelTuner(hal::Device& device, ops::TimingCache& cache, TunerOptions options, std::unique_ptr<hal::Stream> stream)
      : device_(device), cache_(cache), options_(std::move(options)), stream_(std::move(stream)) {}
  Result<int64_t> time_candidate(const graph::Graph& graph, const graph::Node& node, const ops::KernelDef& kernel,
                                 std::vector<ops::TensorRef>& inputs, std::vector<ops::TensorRef>& outputs);

  hal::Device& device_;
  ops::TimingCache& cache_;
  TunerOptions options_;
  std::unique_ptr<hal::Stream> stream_;
  std::vector<TunedNode> nodes_;
};

}  // namespace hxrt::runtime
