// A plain double-precision reference interpreter for hxrt graphs: evaluates a graph::Graph node by node, in
// topological order, with every op of docs/ops.md that is not quantized arithmetic (MatMulQ dequantizes its
// weight and then multiplies in double), including the fused ops of `hxrt.fused`.
//
// It is written for readability, not speed: every op is a direct loop over output elements following the
// semantics in docs/ops.md (numpy broadcasting, ONNX attribute meanings). It shares no code with hxrt's planner,
// shape inference or kernels — it reads only the graph structure and the weights — so that a disagreement
// between it and the runtime points at one of them, never at both.
//
// Thread-safety: pure functions over their arguments.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hxrt/base/host_tensor.h"
#include "hxrt/base/status.h"
#include "hxrt/graph/graph.h"

namespace hxrt::differential {

// A tensor whose element values are held in double. `dtype` is the graph dtype the tensor stands for: values of
// f16/bf16/integer tensors are already rounded or truncated to what that dtype can hold; quantized weights are
// held dequantized.
struct RefTensor {
  DType dtype = DType::kF32;
  std::vector<int64_t> dims;  // row-major; empty = a scalar
  std::vector<double> data;

  int64_t num_elements() const;
  std::string shape_string() const;  // "[2, 3]"
};

// Values by name: graph inputs, initializers and every node output.
using RefValues = std::map<std::string, RefTensor, std::less<>>;

// Evaluates `graph` with `inputs` (by graph input name). Every value of the graph is returned, so callers can
// compare intermediates too. Errors name the node and what was wrong (an unsupported op, shapes that do not
// broadcast, an out-of-range index ...).
using HostTensors = std::map<std::string, HostTensor, std::less<>>;
Result<RefValues> evaluate_reference(const graph::Graph& graph, const HostTensors& inputs);

// Converts a host tensor to its double values (quantized blocks dequantized; aborts on malformed bytes).
RefTensor ref_from_host(const HostTensor& tensor);

}  // namespace hxrt::differential
