// Input generators of the backend parity sweep (parity_sweep_test.cc): for an op, one-node cases on ordinary and
// odd shapes (size 1, primes, non-multiples of the kernels' tile sizes), in every dtype the op is defined for. A
// kernel runs the cases whose dtypes it accepts.
//
// Note [Parity tolerances]
// Errors are normalised as ggml's test-backend-ops does: NMSE = sum (actual - ref)^2 / sum ref^2 over an output
// (a NaN or infinity anywhere, which is also what an unwritten poisoned element reads as, fails). Each case states
// its bound:
//   kExact (0): data movement (Reshape, Transpose, Concat, Slice, Gather, GatherRows of exact tables), integer
//     arithmetic, Relu, and Casts of values the target dtype holds exactly;
//   kF32Nmse (1e-10): f32 arithmetic against double. f32 rounding is 6e-8 relative per operation, so even a
//     reduction over a few hundred terms or a kernel's own exp/erf/tanh stays near NMSE 1e-13; 1e-10 (a relative
//     RMS error of 1e-5) keeps margin and is still eight orders below what an indexing bug gives (order 1);
//   kHalfNmse (1e-5): values that pass through f16/bf16 inside the kernel (bf16 keeps 8 bits: 4e-3 relative);
//   kQuantNmse (1e-3): MatMulQ with a block-quantized weight, whose kernel also quantizes each activation row to 8
//     bits (up to 0.4% relative error per term, so a relative RMS error near 1e-2 at worst).
//
// Thread-safety: pure functions of their arguments.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "differential/reference.h"
#include "hxrt/base/host_tensor.h"
#include "hxrt/graph/attribute.h"

namespace hxrt::parity {

inline constexpr double kExact = 0.0;
inline constexpr double kF32Nmse = 1e-10;
inline constexpr double kHalfNmse = 1e-5;
inline constexpr double kQuantNmse = 1e-3;

struct Operand {
  HostTensor value;
  bool constant = false;  // a graph initializer (shape operands, weights) rather than a graph input
};

struct Case {
  std::string label;  // dtypes and shapes, for reports: "f32[7,13] f32[7,1]"
  graph::AttributeMap attrs;
  std::vector<std::optional<Operand>> inputs;  // nullopt = an omitted optional input
  size_t num_outputs = 1;
  double tolerance = kF32Nmse;  // NMSE bound (Note [Parity tolerances])
  // For fused ops: the chain of unfused nodes the fusion pass rewrites into this op, over the case's inputs (named
  // "x0", "x1", ...) and ending in "y0". The sweep also plans it with fusion on and checks that the kernel under
  // test runs the rewritten node.
  struct PatternNode {
    std::string op_type, domain;
    int version = 1;
    std::vector<std::string> inputs;
    graph::AttributeMap attrs;
    std::string output;
  };
  std::vector<PatternNode> pattern;
  // For ops the reference interpreter (tests/differential/reference.h) does not have: the expected outputs.
  std::function<std::vector<differential::RefTensor>(const Case&)> reference;
};

using Generator = std::function<std::vector<Case>(std::mt19937&)>;

// Generators by (op type, domain). An op without one fails the sweep unless it is exempt (parity_sweep_test.cc).
const std::map<std::pair<std::string, std::string>, Generator>& generators();

// NMSE of `actual` against `expected` (Note [Parity tolerances]); infinity for a non-finite value or a dtype or
// shape mismatch, with the reason in `detail`.
double nmse(const HostTensor& actual, const differential::RefTensor& expected, std::string* detail);

}  // namespace hxrt::parity
