// A seeded generator of random, valid hxrt graphs for differential testing.
//
// generate_random_graph(seed) builds a DAG of 5–40 nodes drawn from the built-in ops of docs/ops.md with random
// but valid shapes and attributes: f32 activations (graph inputs, some with the symbolic dims `batch` and `seq`),
// weights as initializers (never zero), integer index/position inputs where an op needs them. Operands are drawn
// from every value made so far, so graphs branch and join (work for several streams), and the generator plants
// the chains the fusion pass rewrites (MatMul→Add(bias)→Gelu, RMSNorm→Mul(weight), Silu→Mul, Conv→BN→Relu) —
// sometimes with a second consumer or a graph output in the middle, so the same chain must then stay unfused.
//
// Magnitudes are kept O(1) (weights scaled by 1/sqrt(fan-in), a Tanh inserted before a value whose estimated
// magnitude grew past a bound), so a normalised-error comparison is meaningful in every output.
//
// The same seed gives the same graph, bindings and tolerances on every machine.
//
// Thread-safety: pure functions of their arguments.
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "differential/reference.h"
#include "hxrt/graph/graph.h"

namespace hxrt::differential {

// How the values of one graph input are drawn.
struct InputSpec {
  enum class Kind : uint8_t { kFloat, kInteger };
  std::string name;
  graph::TensorDesc desc;
  Kind kind = Kind::kFloat;
  double lo = -1.0;  // kFloat: uniform in [lo, hi), never zero; kInteger: uniform integers in [lo, hi)
  double hi = 1.0;
};

// Normalised max error allowed for a value computed in f32 from f32 inputs and weights (f16 weights included):
// see Note [Tolerances] in differential_test.cc.
inline constexpr double kF32Tolerance = 1e-4;
// ... for a value downstream of a MatMulQ with a block-quantized weight, whose kernel quantizes activations to 8 bits.
inline constexpr double kQuantizedTolerance = 3e-2;

struct RandomGraph {
  uint64_t seed = 0;
  graph::Graph graph;
  std::vector<InputSpec> inputs;
  // Symbol values to run the graph with; one empty map when the graph is static.
  std::vector<graph::SymbolBindings> bindings;
  // Normalised max error allowed for each value (by name), from the precision of what it depends on.
  std::map<std::string, double, std::less<>> tolerance;
};

struct GeneratorOptions {
  int min_nodes = 5;
  int max_nodes = 40;
};

RandomGraph generate_random_graph(uint64_t seed, const GeneratorOptions& options = {});

// Random inputs for `graph` with the symbols bound to `bindings`.
HostTensors make_inputs(const RandomGraph& graph, const graph::SymbolBindings& bindings, std::mt19937_64& rng);

}  // namespace hxrt::differential
