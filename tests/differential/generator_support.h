// The random graph generator's vocabulary: generated values (Val), the ops it emits with their opset versions,
// and the shape arithmetic it plans with (symbolic dims counted as kSymbolGuess). Used by random_graph.cc only.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "differential/random_graph.h"

namespace hxrt::differential::generator {

using graph::Dim;
using SymDims = std::vector<Dim>;

inline constexpr int kMaxRank = 5;
inline constexpr int64_t kMaxElements = 4096;  // per value, with every symbol counted as kSymbolGuess
inline constexpr int64_t kSymbolGuess = 6;
inline constexpr double kMagnitudeBound = 6.0;  // above this a value is squashed by Tanh before further use

// An f32 value the generator can use as an operand.
struct Val {
  std::string name;
  SymDims dims;      // (symbolic) shape, as the generator derived it
  double magnitude;  // rough bound on |element|
  double tolerance;  // normalised error allowed (precision class of what it depends on)
  bool is_input = false;
};

struct OpInfo {
  const char* domain;
  int version;
};

// Opset versions from docs/ops.md.
inline OpInfo op_info(const std::string& op) {
  static const std::map<std::string, OpInfo, std::less<>> kOps = {
      {"Add", {"", 14}},        {"Sub", {"", 14}},        {"Mul", {"", 14}},     {"Div", {"", 14}},
      {"Relu", {"", 14}},       {"Gelu", {"", 20}},       {"Sigmoid", {"", 13}}, {"Tanh", {"", 13}},
      {"Silu", {"hxrt", 1}},    {"Cast", {"", 19}},       {"Softmax", {"", 13}}, {"LayerNormalization", {"", 17}},
      {"RMSNorm", {"hxrt", 1}}, {"RoPE", {"hxrt", 1}},    {"Gather", {"", 13}},  {"Reshape", {"", 14}},
      {"Transpose", {"", 13}},  {"Concat", {"", 13}},     {"Slice", {"", 13}},   {"MatMul", {"", 13}},
      {"Gemm", {"", 13}},       {"MatMulQ", {"hxrt", 1}}, {"Conv", {"", 11}},    {"BatchNormalization", {"", 15}},
  };
  auto it = kOps.find(op);
  if (it == kOps.end()) {
    std::fprintf(stderr, "random_graph: unknown op %s\n", op.c_str());
    std::abort();
  }
  return it->second;
}

inline int64_t guess_elements(const SymDims& dims) {
  int64_t n = 1;
  for (const Dim& d : dims) n *= d.is_static() ? d.value() : kSymbolGuess;
  return n;
}

inline bool all_static(const SymDims& dims, size_t begin = 0) {
  for (size_t i = begin; i < dims.size(); ++i) {
    if (!dims[i].is_static()) return false;
  }
  return true;
}

inline bool is_plain_symbol(const Dim& d) {
  if (d.is_static()) return false;
  const std::vector<std::string> symbols = d.symbols();
  return symbols.size() == 1 && d.to_string() == symbols[0];
}

inline bool fits(const SymDims& dims) {
  return static_cast<int>(dims.size()) <= kMaxRank && guess_elements(dims) <= kMaxElements && guess_elements(dims) > 0;
}

// Numpy broadcast of symbolic shapes; nullopt when a pair of dims is neither equal nor a static 1.
inline std::optional<SymDims> broadcast(const SymDims& a, const SymDims& b) {
  const size_t rank = std::max(a.size(), b.size());
  SymDims out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const Dim da = i < rank - a.size() ? Dim(1) : a[i - (rank - a.size())];
    const Dim db = i < rank - b.size() ? Dim(1) : b[i - (rank - b.size())];
    if (da == db) {
      out[i] = da;
    } else if (da == Dim(1)) {
      out[i] = db;
    } else if (db == Dim(1)) {
      out[i] = da;
    } else {
      return std::nullopt;
    }
  }
  return out;
}

inline std::vector<int64_t> static_dims(const SymDims& dims) {
  std::vector<int64_t> out;
  for (const Dim& d : dims) out.push_back(d.value());
  return out;
}

inline SymDims sym(const std::vector<int64_t>& dims) {
  return SymDims(dims.begin(), dims.end());
}

inline int64_t count(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

template <typename T>
inline std::vector<std::byte> bytes_of(const std::vector<T>& values) {
  std::vector<std::byte> bytes(values.size() * sizeof(T));
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// Output length of one ONNX Slice axis (the same rules the reference implements, computed independently here
// only to keep generated slices non-empty).
inline int64_t slice_length(int64_t n, int64_t start, int64_t end, int64_t step) {
  if (start < 0) start += n;
  if (end < 0) end += n;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, n);
    end = std::clamp<int64_t>(end, 0, n);
    return std::max<int64_t>(0, (end - start + step - 1) / step);
  }
  start = std::clamp<int64_t>(start, 0, n - 1);
  end = std::clamp<int64_t>(end, -1, n - 1);
  return std::max<int64_t>(0, (start - end - step - 1) / -step);
}

// A normalisation over a few elements rescales its input's error along with its values: a quantized-class input
// (relative error ~1%) can come out a few times worse, so its tolerance widens; f32 errors stay far below it.
inline double normalised_tolerance(double input_tolerance) {
  return input_tolerance > kF32Tolerance ? 3.0 * input_tolerance : input_tolerance;
}

}  // namespace hxrt::differential::generator
