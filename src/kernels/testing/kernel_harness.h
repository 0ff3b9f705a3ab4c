// Test harness for kernels: runs one op through the real path — schema check and shape inference, kernel
// selection (or a forced implementation), attribute parsing, tiling, launch on a device stream — with every
// output poisoned before the launch (so unwritten elements show) and guarded by sentinel bytes on both sides (so
// out-of-bounds writes show).
//
// Thread-safety: thread-compatible.
#pragma once

#include <cstddef>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "hxrt/base/dtype.h"
#include "hxrt/base/host_tensor.h"
#include "hxrt/base/shape.h"
#include "hxrt/base/status.h"
#include "hxrt/graph/attribute.h"

namespace hxrt::kernels::testing {

using HostTensor = ::hxrt::HostTensor;  // base/host_tensor.h

struct OpCall {
  std::string op_type;
  std::string domain;  // "" default, "hxrt", "hxrt.fused"
  int version = 0;     // 0 = the newest schema version
  graph::AttributeMap attrs;
  // Inputs in order; nullopt = omitted optional input.
  std::vector<std::optional<HostTensor>> inputs;
  // Inputs that are graph initializers (constants): Reshape's shape, Slice's starts, weights.
  std::vector<size_t> constant_inputs;
  size_t num_outputs = 1;
  std::string force_kernel;  // run this implementation instead of the arbitration winner
  std::string device = "cpu";
};

struct OpResult {
  std::vector<HostTensor> outputs;
  std::string kernel;  // the implementation that ran
  std::string tiling;  // its tiling key
};

// Runs the op. Errors carry the pipeline stage ("shape inference", "kernel selection", "launch"); a sentinel
// overwrite is reported as an Internal error naming the output and byte offset.
Result<OpResult> run_op(const OpCall& call);

// Normalised max error: max |a - b| / max(1, max |b|), the measure backends are compared with.
double normalized_max_error(const std::vector<float>& actual, const std::vector<double>& expected);

}  // namespace hxrt::kernels::testing
