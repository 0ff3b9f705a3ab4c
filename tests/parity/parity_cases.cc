#include "parity/parity_cases.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "hxrt/base/float16.h"
#include "hxrt/base/quant_types.h"
#include "kernels/testing/device_compare.h"

namespace hxrt::parity {
namespace {

using Dims = std::vector<int64_t>;
constexpr DType kAllPlain[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kI32, DType::kI64};
constexpr DType kCastTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kI32,
                                DType::kI64, DType::kI8,  DType::kU8,   DType::kBool};
constexpr DType kFloats[] = {DType::kF32, DType::kF16, DType::kBF16};

// ONNX TensorProto data types (Cast's `to`).
int64_t onnx_type(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 1;
    case DType::kI32: return 6;
    case DType::kI64: return 7;
    case DType::kF16: return 10;
    case DType::kBF16: return 16;
    case DType::kU8: return 2;
    case DType::kI8: return 3;
    case DType::kBool: return 9;
    default: return 0;
  }
}

bool is_half(DType dtype) {
  return dtype == DType::kF16 || dtype == DType::kBF16;
}
bool is_int(DType dtype) {
  return !dtype_info(dtype).is_float && !dtype_info(dtype).is_quantized;
}

Shape shape_of(const Dims& dims) {
  return Shape::make(dims).value();
}

// A tensor of `dtype` from values (rounded to what the dtype holds).
HostTensor tensor(DType dtype, const Dims& dims, const std::vector<double>& values) {
  const Shape shape = shape_of(dims);
  switch (dtype) {
    case DType::kI32: return HostTensor::i32(shape, std::vector<int32_t>(values.begin(), values.end()));
    case DType::kI64: return HostTensor::i64(shape, std::vector<int64_t>(values.begin(), values.end()));
    case DType::kF16:
    case DType::kBF16: {
      std::vector<std::byte> bytes(values.size() * 2);
      for (size_t i = 0; i < values.size(); ++i) {
        const float v = static_cast<float>(values[i]);
        const uint16_t h = dtype == DType::kF16 ? f32_to_f16(v) : f32_to_bf16(v);
        std::memcpy(bytes.data() + 2 * i, &h, 2);
      }
      return HostTensor::raw(dtype, shape, std::move(bytes));
    }
    case DType::kI8:
    case DType::kU8:
    case DType::kBool: {
      std::vector<std::byte> bytes;
      for (double v : values) bytes.push_back(static_cast<std::byte>(static_cast<int8_t>(v)));
      return HostTensor::raw(dtype, shape, std::move(bytes));
    }
    default: return HostTensor::f32(shape, std::vector<float>(values.begin(), values.end()));
  }
}

int64_t count(const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// Uniform values in [lo, hi); integers for integer dtypes.
HostTensor random(std::mt19937& rng, DType dtype, const Dims& dims, double lo = -1.0, double hi = 1.0) {
  std::vector<double> values(static_cast<size_t>(count(dims)));
  if (is_int(dtype)) {
    std::uniform_int_distribution<int64_t> dist(static_cast<int64_t>(lo), static_cast<int64_t>(hi) - 1);
    for (double& v : values) v = static_cast<double>(dist(rng));
  } else {
    std::uniform_real_distribution<double> dist(lo, hi);
    for (double& v : values) v = dist(rng);
  }
  return tensor(dtype, dims, values);
}

Operand in(HostTensor value) {
  return Operand{std::move(value), false};
}
Operand constant(HostTensor value) {
  return Operand{std::move(value), true};
}
HostTensor ints(const Dims& values) {
  return HostTensor::i64(Shape{static_cast<int64_t>(values.size())}, values);
}

std::string label_of(const Case& c) {
  std::vector<std::string> parts;
  for (const auto& input : c.inputs) {
    parts.push_back(input ? fmt::format("{}{}", input->value.dtype, input->value.shape) : std::string("-"));
  }
  return fmt::format("{}", fmt::join(parts, " "));
}

Case make(std::vector<std::optional<Operand>> inputs, double tolerance, graph::AttributeMap attrs = {}) {
  Case c;
  c.inputs = std::move(inputs);
  c.tolerance = tolerance;
  c.attrs = std::move(attrs);
  c.label = label_of(c);
  if (c.attrs.size() != 0) c.label += " " + c.attrs.to_string();
  return c;
}

double float_tolerance(DType dtype) {
  return is_half(dtype) ? kHalfNmse : kF32Nmse;
}

std::vector<Case> binary_cases(std::mt19937& rng, bool divide) {
  const std::pair<Dims, Dims> shapes[] = {{{7, 13}, {7, 13}}, {{3, 1, 13}, {7, 1}}, {{}, {31}},
                                          {{1}, {1}},         {{2, 64}, {64}},      {{5, 67}, {5, 67}}};
  std::vector<Case> cases;
  for (DType dtype : kAllPlain) {
    for (const auto& [a, b] : shapes) {
      // Divisors away from zero: [0.5, 2) for floats, 1..9 for integers (integer Div truncates toward zero).
      HostTensor rhs = !divide ? random(rng, dtype, b, -20, 20)
                       : is_int(dtype) ? random(rng, dtype, b, 1, 10)
                                       : random(rng, dtype, b, 0.5, 2.0);
      cases.push_back(make({in(random(rng, dtype, a, -20, 20)), in(std::move(rhs))},
                           is_int(dtype) ? kExact : float_tolerance(dtype)));
    }
  }
  return cases;
}

std::vector<Case> unary_cases(std::mt19937& rng, const std::vector<graph::AttributeMap>& variants, bool exact) {
  const Dims shapes[] = {{1}, {13}, {7, 31}, {2, 3, 64}};
  std::vector<Case> cases;
  for (DType dtype : kFloats) {
    for (const graph::AttributeMap& attrs : variants) {
      for (const Dims& dims : shapes) {
        cases.push_back(
            make({in(random(rng, dtype, dims, -4.0, 4.0))}, exact ? kExact : float_tolerance(dtype), attrs));
      }
    }
  }
  return cases;
}

graph::AttributeMap attrs(std::initializer_list<std::pair<const char*, graph::Attribute>> list) {
  graph::AttributeMap map;
  for (const auto& [name, value] : list) map.set(name, value);
  return map;
}

std::vector<Case> cast_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  for (DType from : kCastTypes) {
    for (DType to : kCastTypes) {
      // Integral values every dtype of the pair holds exactly (0 and 1 for bool, [0, 64) for u8, else [-64, 64]),
      // so every cast is exact.
      const bool boolean = from == DType::kBool || to == DType::kBool;
      const bool unsigned_range = from == DType::kU8 || to == DType::kU8;
      const double lo = boolean || unsigned_range ? 0 : -64, hi = boolean ? 2 : unsigned_range ? 64 : 65;
      for (const Dims& dims : {Dims{1}, Dims{7, 13}}) {
        cases.push_back(make({in(random(rng, from, dims, lo, hi))}, kExact, attrs({{"to", onnx_type(to)}})));
      }
    }
    if (!is_int(from)) {
      for (DType to : kFloats) {  // fractional values: rounded to the narrower float the same way as the reference
        cases.push_back(make({in(random(rng, from, {31}))}, float_tolerance(to), attrs({{"to", onnx_type(to)}})));
      }
    }
  }
  return cases;
}

std::vector<Case> softmax_cases(std::mt19937& rng) {
  const std::pair<Dims, int64_t> shapes[] = {
      {{1, 1}, -1}, {{7, 13}, -1}, {{3, 5, 31}, -1}, {{13, 7}, 0}, {{3, 5, 31}, 1}};
  std::vector<Case> cases;
  for (DType dtype : kFloats) {
    for (const auto& [dims, axis] : shapes) {
      cases.push_back(make({in(random(rng, dtype, dims, -3.0, 3.0))}, float_tolerance(dtype), attrs({{"axis", axis}})));
    }
  }
  return cases;
}

std::vector<Case> layer_norm_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  for (DType dtype : kFloats) {
    cases.push_back(
        make({in(random(rng, dtype, {7, 31})), constant(random(rng, dtype, {31})), constant(random(rng, dtype, {31}))},
             float_tolerance(dtype)));
    cases.push_back(make({in(random(rng, dtype, {1, 13})), constant(random(rng, dtype, {13})), std::nullopt},
                         float_tolerance(dtype)));
    cases.push_back(make(
        {in(random(rng, dtype, {2, 3, 64})), constant(random(rng, dtype, {64})), constant(random(rng, dtype, {64}))},
        float_tolerance(dtype), attrs({{"epsilon", 1e-3}})));
    cases.push_back(make(
        {in(random(rng, dtype, {2, 3, 5})), constant(random(rng, dtype, {3, 5})), constant(random(rng, dtype, {3, 5}))},
        float_tolerance(dtype), attrs({{"axis", int64_t{1}}})));
  }
  return cases;
}

std::vector<Case> rms_norm_cases(std::mt19937& rng, bool with_weight) {
  std::vector<Case> cases;
  for (DType dtype : kFloats) {
    for (const Dims& dims : {Dims{1, 1}, Dims{7, 31}, Dims{2, 3, 64}, Dims{3, 67}}) {
      std::vector<std::optional<Operand>> inputs = {in(random(rng, dtype, dims))};
      if (with_weight) inputs.push_back(constant(random(rng, dtype, {dims.back()})));
      cases.push_back(make(std::move(inputs), float_tolerance(dtype), attrs({{"epsilon", 1e-5}})));
    }
  }
  return cases;
}

// RoPE angles are pos * theta^(-2i/d) evaluated in f32 by the kernels: positions below 50 keep the angle error near
// 50 * 6e-8, an NMSE of order 1e-11; the stated 1e-8 leaves margin.
std::vector<Case> rope_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  for (DType dtype : kFloats) {
    for (DType pos_type : {DType::kI32, DType::kI64}) {
      for (const char* mode : {"normal", "neox"}) {
        cases.push_back(make({in(random(rng, dtype, {7, 3, 16})), in(random(rng, pos_type, {7}, 0, 50))},
                             is_half(dtype) ? kHalfNmse : 1e-8, attrs({{"mode", mode}})));
        cases.push_back(make({in(random(rng, dtype, {1, 1, 2})), in(random(rng, pos_type, {1}, 0, 50))},
                             is_half(dtype) ? kHalfNmse : 1e-8, attrs({{"mode", mode}})));
        cases.push_back(make({in(random(rng, dtype, {2, 5, 2, 34})), in(random(rng, pos_type, {5}, 0, 50))},
                             is_half(dtype) ? kHalfNmse : 1e-8, attrs({{"mode", mode}, {"rotary_dims", int64_t{18}}})));
      }
    }
  }
  // Scaled: Llama 3.1's frequency factors, linear and YaRN scaling (the kernels compute these angles in double).
  for (const char* mode : {"normal", "neox"}) {
    cases.push_back(make({in(random(rng, DType::kF32, {6, 2, 16})), in(random(rng, DType::kI32, {6}, 0, 50)),
                          in(random(rng, DType::kF32, {8}, 1.0, 8.0))},
                         1e-8, attrs({{"mode", mode}})));
    cases.push_back(make({in(random(rng, DType::kF32, {6, 2, 16})), in(random(rng, DType::kI64, {6}, 0, 50)), std::nullopt},
                         1e-8,
                         attrs({{"mode", mode}, {"freq_scale", 0.25}, {"ext_factor", 1.0}, {"attn_factor", 1.1386},
                                {"n_ctx_orig", int64_t{16}}})));
  }
  return cases;
}

std::vector<Case> gather_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  for (DType dtype : kAllPlain) {
    for (DType index_type : {DType::kI32, DType::kI64}) {
      cases.push_back(make({in(random(rng, dtype, {13, 7}, -9, 9)), in(random(rng, index_type, {5}, 0, 13))}, kExact));
      cases.push_back(make({in(random(rng, dtype, {13, 7}, -9, 9)), in(random(rng, index_type, {2, 3}, -7, 7))}, kExact,
                           attrs({{"axis", int64_t{1}}})));
      cases.push_back(make({in(random(rng, dtype, {31}, -9, 9)), in(random(rng, index_type, {1}, 0, 31))}, kExact));
    }
  }
  return cases;
}

std::vector<Case> data_movement_cases(std::mt19937& rng, const std::string& op) {
  std::vector<Case> cases;
  for (DType dtype : kAllPlain) {
    auto x = [&](const Dims& dims) { return in(random(rng, dtype, dims, -9, 9)); };
    if (op == "Reshape") {
      cases.push_back(make({x({7, 13}), constant(ints({13, 7}))}, kExact));
      cases.push_back(make({x({91}), constant(ints({1, -1}))}, kExact));
      cases.push_back(make({x({1}), constant(ints({}))}, kExact));
    } else if (op == "Transpose") {
      cases.push_back(make({x({7, 13})}, kExact, attrs({{"perm", Dims{1, 0}}})));
      cases.push_back(make({x({2, 3, 5})}, kExact, attrs({{"perm", Dims{2, 0, 1}}})));
      cases.push_back(make({x({1, 31})}, kExact, attrs({{"perm", Dims{1, 0}}})));
      cases.push_back(make({x({3, 1, 67, 2})}, kExact, attrs({{"perm", Dims{3, 2, 0, 1}}})));
    } else if (op == "Concat") {
      cases.push_back(make({x({7, 13}), x({7, 5})}, kExact, attrs({{"axis", int64_t{1}}})));
      cases.push_back(make({x({1, 13}), x({6, 13}), x({3, 13})}, kExact, attrs({{"axis", int64_t{0}}})));
      cases.push_back(make({x({1}), x({1})}, kExact, attrs({{"axis", int64_t{-1}}})));
    } else if (op == "Slice") {
      cases.push_back(make({x({13, 31}), constant(ints({1, 2})), constant(ints({12, 29})), constant(ints({0, 1})),
                            constant(ints({1, 3}))},
                           kExact));
      cases.push_back(make(
          {x({31}), constant(ints({29})), constant(ints({2})), constant(ints({0})), constant(ints({-3}))}, kExact));
      cases.push_back(make({x({1, 7}), constant(ints({0})), constant(ints({1})), std::nullopt, std::nullopt}, kExact));
      // The same slices with i32 starts, ends, axes and steps.
      auto ints32 = [](const Dims& values) {
        return HostTensor::i32(Shape{static_cast<int64_t>(values.size())},
                               std::vector<int32_t>(values.begin(), values.end()));
      };
      cases.push_back(make({x({13, 31}), constant(ints32({1, 2})), constant(ints32({12, 29})), constant(ints32({0, 1})),
                            constant(ints32({1, 3}))},
                           kExact));
      cases.push_back(
          make({x({31}), constant(ints32({29})), constant(ints32({2})), constant(ints32({0})), constant(ints32({-3}))},
               kExact));
    }
  }
  return cases;
}

std::vector<Case> matmul_cases(std::mt19937& rng) {
  const std::pair<Dims, Dims> shapes[] = {
      {{7, 13}, {13, 31}}, {{1, 1}, {1, 1}}, {{2, 7, 13}, {13, 5}}, {{33, 65}, {65, 17}}, {{2, 3, 4, 8}, {1, 8, 5}}};
  std::vector<Case> cases;
  for (DType a_type : kFloats) {
    for (DType b_type : kFloats) {
      for (bool weight : {false, true}) {
        for (const auto& [a, b] : shapes) {
          Operand rhs{random(rng, b_type, b), weight};
          cases.push_back(make({in(random(rng, a_type, a)), std::move(rhs)},
                               is_half(a_type) || is_half(b_type) ? kHalfNmse : kF32Nmse));
        }
      }
    }
  }
  return cases;
}

std::vector<Case> gemm_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  for (DType dtype : kFloats) {
    const double tol = float_tolerance(dtype);
    auto r = [&](const Dims& dims) { return random(rng, dtype, dims); };
    cases.push_back(make({in(r({7, 13})), constant(r({13, 31})), constant(r({31}))}, tol));
    cases.push_back(make({in(r({13, 7})), constant(r({13, 31})), constant(r({7, 31}))}, tol,
                         attrs({{"transA", int64_t{1}}, {"alpha", 0.5}, {"beta", 2.0}})));
    cases.push_back(make({in(r({7, 13})), constant(r({31, 13})), std::nullopt}, tol, attrs({{"transB", int64_t{1}}})));
    cases.push_back(make({in(r({1, 1})), constant(r({1, 1})), constant(r({1}))}, tol));
    cases.push_back(make({in(r({33, 65})), constant(r({65, 17})), constant(r({1}))}, tol));
  }
  return cases;
}

// GGUF block-quantized rows of `n` x `k` (k a whole number of blocks): random blocks (fill_random_blocks).
HostTensor quantized(std::mt19937& rng, DType dtype, int64_t n, int64_t k) {
  return kernels::testing::random_quantized(dtype, n, k, rng);
}

// Every type with GGUF rows (quant_types.h): the weights of MatMulQ and MatMulQGroup, the tables of GatherRows.
std::vector<DType> gguf_row_types() { return row_dequantizable_types(); }

// K of a case: `k` values, rounded up to a whole number of `dtype`'s blocks (256 for the K-quants).
int64_t k_for(DType dtype, int64_t k) {
  const int64_t block = dtype_info(dtype).block_elements;
  return (k + block - 1) / block * block;
}

std::vector<Case> matmul_q_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  // (A one-output case of a quantized W is a single relative error: it is kept to the float types.)
  const std::pair<Dims, int64_t> shapes[] = {{{1, 32}, 1}, {{7, 96}, 13}, {{2, 3, 64}, 31}, {{5, 256}, 67}};
  for (DType wtype : gguf_row_types()) {
    for (auto [x, n] : shapes) {  // NOLINT(performance-for-range-copy): x and n are adjusted per type
      const int64_t k = k_for(wtype, x.back());
      x.back() = k;
      if (dtype_info(wtype).is_quantized && n == 1) n = 4;
      HostTensor w =
          dtype_info(wtype).is_quantized ? quantized(rng, wtype, n, k) : random(rng, wtype, {n, k}, -0.2, 0.2);
      const double tol = dtype_info(wtype).is_quantized ? kQuantNmse : float_tolerance(wtype);
      cases.push_back(make({in(random(rng, DType::kF32, x)), constant(w), std::nullopt}, tol));
      cases.push_back(make(
          {in(random(rng, DType::kF32, x)), constant(std::move(w)), constant(random(rng, DType::kF32, {n}))}, tol));
    }
  }
  return cases;
}

// MatMulQGroup: one activation, 2 to 4 weights of one dtype, one output per weight (each as MatMulQ without bias).
std::vector<Case> matmul_q_group_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  const std::pair<Dims, std::vector<int64_t>> shapes[] = {
      {{1, 64}, {64, 16, 16}}, {{7, 96}, {13, 5}}, {{2, 3, 64}, {31, 8, 8, 4}}};
  for (DType wtype : gguf_row_types()) {
    for (auto [x, widths] : shapes) {
      const int64_t k = k_for(wtype, x.back());
      x.back() = k;
      std::vector<std::optional<Operand>> inputs = {in(random(rng, DType::kF32, x))};
      for (int64_t n : widths) {
        inputs.push_back(constant(dtype_info(wtype).is_quantized ? quantized(rng, wtype, n, k)
                                                                 : random(rng, wtype, {n, k}, -0.2, 0.2)));
      }
      Case c = make(std::move(inputs), dtype_info(wtype).is_quantized ? kQuantNmse : float_tolerance(wtype));
      c.num_outputs = widths.size();
      c.reference = [](const Case& self) {
        const differential::RefTensor a = differential::ref_from_host(self.inputs[0]->value);
        const int64_t depth = a.dims.back();
        const int64_t rows = a.num_elements() / depth;
        std::vector<differential::RefTensor> outs;
        for (size_t o = 1; o < self.inputs.size(); ++o) {
          const differential::RefTensor w = differential::ref_from_host(self.inputs[o]->value);
          const int64_t n = w.dims[0];
          differential::RefTensor y;
          y.dtype = DType::kF32;
          y.dims = a.dims;
          y.dims.back() = n;
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t j = 0; j < n; ++j) {
              double sum = 0.0;
              for (int64_t p = 0; p < depth; ++p) {
                sum += a.data[static_cast<size_t>(r * depth + p)] * w.data[static_cast<size_t>(j * depth + p)];
              }
              y.data.push_back(sum);
            }
          }
          outs.push_back(std::move(y));
        }
        return outs;
      };
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

std::vector<Case> gather_rows_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  for (DType table_type : gguf_row_types()) {
    for (auto [rows, cols, n] : {std::tuple<int64_t, int64_t, int64_t>{11, 64, 5}, {1, 32, 1}, {13, 96, 7}}) {
      cols = k_for(table_type, cols);
      const DType index_type = n == 1 ? DType::kI64 : DType::kI32;
      HostTensor table = dtype_info(table_type).is_quantized ? quantized(rng, table_type, rows, cols)
                                                             : random(rng, table_type, {rows, cols});
      // Rows of the dequantized table: the kernels dequantize with ggml's float formulas, which are exact for one f16
      // scale times an integer (or a narrow float widened); the K-quants' d·sc·q − dmin·m rounds once or twice in
      // float.
      const bool rounds = dtype_info(table_type).block_elements == 256 || table_type == DType::kQ5_1;
      Case c = make({constant(std::move(table)), in(random(rng, index_type, {n}, 0, rows))}, rounds ? kF32Nmse : kExact);
      c.reference = [](const Case& self) {
        const HostTensor& rows_of = self.inputs[0]->value;
        const std::vector<double> values = differential::ref_from_host(rows_of).data;
        const std::vector<int64_t> indices = self.inputs[1]->value.to_i64();
        const int64_t width = rows_of.shape.dim(1);
        differential::RefTensor out;
        out.dtype = DType::kF32;
        out.dims = {static_cast<int64_t>(indices.size()), width};
        for (int64_t row : indices) {
          for (int64_t col = 0; col < width; ++col) out.data.push_back(values[static_cast<size_t>(row * width + col)]);
        }
        return std::vector<differential::RefTensor>{out};
      };
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

// Grouped-query attention over a paged cache: two sequences with histories already in the cache, and this launch's
// tokens (written into their slots first, rounded to the cache dtype). The reference attends in double over the
// cache after those writes; an f16 cache rounds the new keys and values (and the kernels take the products at f16
// precision), well inside kHalfNmse.
// MoeRoute: softmax over the experts, the k best (the lower id on ties), weights renormalised / scaled.
std::vector<Case> moe_route_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  for (const auto& [tokens, experts, k, normalize, scale] :
       {std::tuple<int64_t, int64_t, int64_t, int64_t, double>{5, 8, 2, 1, 0.0}, {3, 16, 4, 0, 2.5}, {1, 4, 4, 1, 1.0}}) {
    Case c = make({in(random(rng, DType::kF32, {tokens, experts}, -4.0, 4.0))}, kF32Nmse,
                  attrs({{"k", k}, {"normalize", normalize}, {"scale", scale}}));
    c.num_outputs = 2;
    c.reference = [=](const Case& self) {
      const std::vector<double> x = differential::ref_from_host(self.inputs[0]->value).data;
      differential::RefTensor ids{.dtype = DType::kI32, .dims = {tokens, k}, .data = {}};
      differential::RefTensor weights{.dtype = DType::kF32, .dims = {tokens, k}, .data = {}};
      for (int64_t t = 0; t < tokens; ++t) {
        std::vector<double> p(static_cast<size_t>(experts));
        double max = -INFINITY, sum = 0.0;
        for (int64_t e = 0; e < experts; ++e) max = std::max(max, x[static_cast<size_t>(t * experts + e)]);
        for (int64_t e = 0; e < experts; ++e) sum += p[static_cast<size_t>(e)] = std::exp(x[static_cast<size_t>(t * experts + e)] - max);
        std::vector<int64_t> order(static_cast<size_t>(experts));
        for (int64_t e = 0; e < experts; ++e) order[static_cast<size_t>(e)] = e;
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[static_cast<size_t>(a)] > p[static_cast<size_t>(b)]; });
        double chosen = 0.0;
        for (int64_t s = 0; s < k; ++s) chosen += p[static_cast<size_t>(order[static_cast<size_t>(s)])] / sum;
        for (int64_t s = 0; s < k; ++s) {
          double w = p[static_cast<size_t>(order[static_cast<size_t>(s)])] / sum;
          if (normalize != 0) w /= chosen;
          if (scale != 0.0 && scale != 1.0) w *= scale;
          ids.data.push_back(static_cast<double>(order[static_cast<size_t>(s)]));
          weights.data.push_back(w);
        }
      }
      return std::vector<differential::RefTensor>{ids, weights};
    };
    cases.push_back(std::move(c));
  }
  return cases;
}

// MatMulQExperts over every weight type: A shared by the slots or one row per slot, with and without weights.
std::vector<Case> matmul_q_experts_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  const int64_t tokens = 5, slots = 2, experts = 3, n = 7;
  const std::vector<int32_t> ids = {2, 0, 1, 1, 0, 2, 2, 2, 1, 0};
  for (DType wtype : gguf_row_types()) {
    const int64_t k = k_for(wtype, 64);
    for (const bool per_slot : {false, true}) {
      for (const bool weighted : {false, true}) {
        HostTensor w = dtype_info(wtype).is_quantized ? quantized(rng, wtype, experts * n, k)
                                                      : random(rng, wtype, {experts * n, k}, -0.2, 0.2);
        w.shape = Shape{experts, n, k};
        std::vector<std::optional<Operand>> inputs = {
            in(random(rng, DType::kF32, per_slot ? Dims{tokens, slots, k} : Dims{tokens, k})), constant(std::move(w)),
            in(HostTensor::i32(Shape{tokens, slots}, ids)), std::nullopt};
        if (weighted) inputs[3] = in(random(rng, DType::kF32, {tokens, slots}, 0.1, 1.0));
        Case c = make(std::move(inputs), dtype_info(wtype).is_quantized ? kQuantNmse : float_tolerance(wtype));
        c.reference = [=](const Case& self) {
          const std::vector<double> a = differential::ref_from_host(self.inputs[0]->value).data;
          const std::vector<double> wv = differential::ref_from_host(self.inputs[1]->value).data;
          std::vector<double> weights;
          if (weighted) weights = differential::ref_from_host(self.inputs[3]->value).data;
          differential::RefTensor y{.dtype = DType::kF32, .dims = weighted ? Dims{tokens, n} : Dims{tokens, slots, n},
                                    .data = std::vector<double>(static_cast<size_t>((weighted ? tokens : tokens * slots) * n))};
          for (int64_t t = 0; t < tokens; ++t) {
            for (int64_t s = 0; s < slots; ++s) {
              const int64_t e = ids[static_cast<size_t>(t * slots + s)];
              const double* x = a.data() + (per_slot ? t * slots + s : t) * k;
              for (int64_t j = 0; j < n; ++j) {
                double dot = 0.0;
                for (int64_t i = 0; i < k; ++i) dot += x[i] * wv[static_cast<size_t>((e * n + j) * k + i)];
                if (weighted) {
                  y.data[static_cast<size_t>(t * n + j)] += weights[static_cast<size_t>(t * slots + s)] * dot;
                } else {
                  y.data[static_cast<size_t>((t * slots + s) * n + j)] = dot;
                }
              }
            }
          }
          return std::vector<differential::RefTensor>{y};
        };
        cases.push_back(std::move(c));
      }
    }
  }
  return cases;
}

std::vector<Case> paged_attention_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  for (DType cache_type : {DType::kF32, DType::kF16}) {
    for (const auto& [heads, n_kv, head_dim] : {std::tuple<int64_t, int64_t, int64_t>{4, 2, 16}, {3, 1, 40}}) {
      const int64_t n_layers = 2, n_blocks = 8, block_size = 4, max_blocks = 3, layer = 1;
      const std::vector<int32_t> tables = {3, 1, 6, 0, 5, 2};  // (2 sequences, max_blocks)
      const std::vector<int32_t> token_seq = {0, 0, 1}, positions = {5, 6, 2};
      const int64_t tokens = static_cast<int64_t>(token_seq.size());
      const Dims cache_dims = {n_layers, n_blocks, block_size, n_kv, head_dim};
      Case c = make({in(random(rng, DType::kF32, {tokens, heads, head_dim})),
                     in(random(rng, DType::kF32, {tokens, n_kv, head_dim})),
                     in(random(rng, DType::kF32, {tokens, n_kv, head_dim})), in(random(rng, cache_type, cache_dims)),
                     in(random(rng, cache_type, cache_dims)), in(HostTensor::i32(Shape{2, max_blocks}, tables)),
                     in(HostTensor::i32(Shape{tokens}, token_seq)), in(HostTensor::i32(Shape{tokens}, positions))},
                    float_tolerance(cache_type), attrs({{"layer", layer}}));
      c.reference = [=](const Case& self) {
        auto values = [&](size_t i) { return differential::ref_from_host(self.inputs[i]->value).data; };
        const std::vector<double> q = values(0), k = values(1), v = values(2);
        std::vector<double> kc = values(3), vc = values(4);
        auto slot = [&](int64_t s, int64_t p) {
          return tables[static_cast<size_t>(s * max_blocks + p / block_size)] * block_size + p % block_size;
        };
        auto at = [&](int64_t slot_index, int64_t g) {
          return static_cast<size_t>(((layer * n_blocks * block_size + slot_index) * n_kv + g) * head_dim);
        };
        auto stored = [&](double x) {
          return cache_type == DType::kF16 ? static_cast<double>(f16_to_f32(f32_to_f16(static_cast<float>(x)))) : x;
        };
        for (int64_t t = 0; t < tokens; ++t) {
          for (int64_t g = 0; g < n_kv; ++g) {
            const size_t base = at(slot(token_seq[static_cast<size_t>(t)], positions[static_cast<size_t>(t)]), g);
            for (int64_t d = 0; d < head_dim; ++d) {
              kc[base + static_cast<size_t>(d)] = stored(k[static_cast<size_t>((t * n_kv + g) * head_dim + d)]);
              vc[base + static_cast<size_t>(d)] = stored(v[static_cast<size_t>((t * n_kv + g) * head_dim + d)]);
            }
          }
        }
        differential::RefTensor out;
        out.dims = {tokens, heads, head_dim};
        out.data.assign(static_cast<size_t>(tokens * heads * head_dim), 0.0);
        const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
        for (int64_t t = 0; t < tokens; ++t) {
          const int64_t s = token_seq[static_cast<size_t>(t)], p = positions[static_cast<size_t>(t)];
          for (int64_t h = 0; h < heads; ++h) {
            const int64_t g = h / (heads / n_kv);
            std::vector<double> scores(static_cast<size_t>(p + 1));
            double max_score = -INFINITY, sum = 0.0;
            for (int64_t j = 0; j <= p; ++j) {
              double acc = 0.0;
              for (int64_t d = 0; d < head_dim; ++d) {
                acc += q[static_cast<size_t>((t * heads + h) * head_dim + d)] *
                       kc[at(slot(s, j), g) + static_cast<size_t>(d)];
              }
              scores[static_cast<size_t>(j)] = acc * scale;
              max_score = std::max(max_score, acc * scale);
            }
            for (double& x : scores) sum += (x = std::exp(x - max_score));
            for (int64_t j = 0; j <= p; ++j) {
              for (int64_t d = 0; d < head_dim; ++d) {
                out.data[static_cast<size_t>((t * heads + h) * head_dim + d)] +=
                    scores[static_cast<size_t>(j)] / sum * vc[at(slot(s, j), g) + static_cast<size_t>(d)];
              }
            }
          }
        }
        return std::vector<differential::RefTensor>{out};
      };
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

std::vector<Case> conv_cases(std::mt19937& rng, bool fused) {
  std::vector<Case> cases;
  struct Shape2d {
    Dims x, w;
    graph::AttributeMap attrs;
  };
  const Shape2d shapes[] = {
      {{1, 3, 9, 11}, {4, 3, 3, 3}, attrs({{"pads", Dims{1, 1, 1, 1}}})},
      {{2, 1, 7, 7}, {1, 1, 1, 1}, {}},
      {{1, 2, 13, 5}, {3, 2, 3, 2}, attrs({{"strides", Dims{2, 1}}, {"pads", Dims{0, 1, 2, 0}}})},
  };
  for (DType dtype : kFloats) {
    for (const Shape2d& s : shapes) {
      const int64_t out_channels = s.w[0];
      std::vector<std::optional<Operand>> inputs = {in(random(rng, dtype, s.x)), constant(random(rng, dtype, s.w)),
                                                    constant(random(rng, dtype, {out_channels}))};
      graph::AttributeMap a = s.attrs;
      if (fused) {
        inputs.push_back(constant(random(rng, dtype, {out_channels}, 0.5, 1.5)));
        inputs.push_back(constant(random(rng, dtype, {out_channels})));
        inputs.push_back(constant(random(rng, dtype, {out_channels})));
        inputs.push_back(constant(random(rng, dtype, {out_channels}, 0.5, 2.0)));
        a.set("relu", int64_t{1});
      }
      cases.push_back(make(std::move(inputs), float_tolerance(dtype), std::move(a)));
    }
  }
  return cases;
}

std::vector<Case> batch_norm_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  for (DType dtype : kFloats) {
    for (const Dims& dims : {Dims{2, 3, 5, 7}, Dims{1, 1, 1, 1}, Dims{1, 13, 31}}) {
      const int64_t c = dims[1];
      cases.push_back(make(
          {in(random(rng, dtype, dims)), constant(random(rng, dtype, {c}, 0.5, 1.5)), constant(random(rng, dtype, {c})),
           constant(random(rng, dtype, {c})), constant(random(rng, dtype, {c}, 0.5, 2.0))},
          float_tolerance(dtype)));
    }
  }
  return cases;
}

std::vector<Case> matmul_bias_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  for (DType dtype : kFloats) {
    for (const char* activation : {"none", "gelu", "gelu_tanh"}) {
      for (const auto& [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{7, 13, 31}, {1, 1, 1}, {33, 65, 17}}) {
        cases.push_back(make(
            {in(random(rng, dtype, {m, k})), constant(random(rng, dtype, {k, n})), constant(random(rng, dtype, {n}))},
            float_tolerance(dtype), attrs({{"activation", activation}})));
      }
    }
  }
  return cases;
}

std::vector<Case> swiglu_cases(std::mt19937& rng) {
  std::vector<Case> cases;
  for (DType dtype : kFloats) {
    for (const Dims& dims : {Dims{1}, Dims{7, 31}, Dims{2, 3, 67}}) {
      cases.push_back(
          make({in(random(rng, dtype, dims, -4, 4)), in(random(rng, dtype, dims, -4, 4))}, float_tolerance(dtype)));
    }
  }
  return cases;
}

}  // namespace

// Adds to each case of a fused op the unfused chain it stands for (the patterns of ops/fusion.h).
Generator with_pattern(Generator generator, const std::string& fused_op) {
  return [generator = std::move(generator), fused_op](std::mt19937& rng) {
    std::vector<Case> cases = generator(rng);
    for (Case& c : cases) {
      using Node = Case::PatternNode;
      if (fused_op == "SwiGLU") {
        c.pattern = {Node{"Silu", "hxrt", 1, {"x0"}, {}, "t0"}, Node{"Mul", "", 14, {"t0", "x1"}, {}, "y0"}};
      } else if (fused_op == "RMSNormMul") {
        c.pattern = {Node{"RMSNorm", "hxrt", 1, {"x0"}, c.attrs, "t0"}, Node{"Mul", "", 14, {"t0", "x1"}, {}, "y0"}};
      } else if (fused_op == "MatMulBias") {
        const std::string activation = c.attrs.get_string("activation", "none").value();
        c.pattern = {Node{"MatMul", "", 13, {"x0", "x1"}, {}, "t0"},
                     Node{"Add", "", 14, {"t0", "x2"}, {}, activation == "none" ? "y0" : "t1"}};
        if (activation != "none") {
          c.pattern.push_back(
              Node{"Gelu", "", 20, {"t1"}, attrs({{"approximate", activation == "gelu" ? "none" : "tanh"}}), "y0"});
        }
      } else if (fused_op == "ConvBnRelu") {
        graph::AttributeMap conv = c.attrs;
        conv.erase("relu");
        c.pattern = {Node{"Conv", "", 11, {"x0", "x1", "x2"}, conv, "t0"},
                     Node{"BatchNormalization", "", 15, {"t0", "x3", "x4", "x5", "x6"}, {}, "t1"},
                     Node{"Relu", "", 14, {"t1"}, {}, "y0"}};
      }
    }
    return cases;
  };
}

const std::map<std::pair<std::string, std::string>, Generator>& generators() {
  static const auto* table = [] {
    auto* g = new std::map<std::pair<std::string, std::string>, Generator>();
    for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
      const bool divide = std::string(op) == "Div";
      (*g)[{op, ""}] = [divide](std::mt19937& rng) { return binary_cases(rng, divide); };
    }
    for (const char* op : {"Sigmoid", "Tanh"})
      (*g)[{op, ""}] = [](std::mt19937& rng) { return unary_cases(rng, {{}}, false); };
    (*g)[{"Relu", ""}] = [](std::mt19937& rng) { return unary_cases(rng, {{}}, true); };
    (*g)[{"Silu", "hxrt"}] = [](std::mt19937& rng) { return unary_cases(rng, {{}}, false); };
    (*g)[{"LeakyRelu", ""}] = [](std::mt19937& rng) {
      return unary_cases(rng, {{}, attrs({{"alpha", 0.2f}}), attrs({{"alpha", -1.5f}})}, false);
    };
    (*g)[{"Gelu", ""}] = [](std::mt19937& rng) {
      return unary_cases(rng, {attrs({{"approximate", "none"}}), attrs({{"approximate", "tanh"}})}, false);
    };
    (*g)[{"Cast", ""}] = cast_cases;
    (*g)[{"Softmax", ""}] = softmax_cases;
    (*g)[{"LayerNormalization", ""}] = layer_norm_cases;
    (*g)[{"RMSNorm", "hxrt"}] = [](std::mt19937& rng) { return rms_norm_cases(rng, false); };
    (*g)[{"RoPE", "hxrt"}] = rope_cases;
    (*g)[{"Gather", ""}] = gather_cases;
    for (const char* op : {"Reshape", "Transpose", "Concat", "Slice"}) {
      (*g)[{op, ""}] = [op = std::string(op)](std::mt19937& rng) { return data_movement_cases(rng, op); };
    }
    (*g)[{"MatMul", ""}] = matmul_cases;
    (*g)[{"Gemm", ""}] = gemm_cases;
    (*g)[{"MatMulQ", "hxrt"}] = matmul_q_cases;
    (*g)[{"MatMulQGroup", "hxrt"}] = matmul_q_group_cases;
    (*g)[{"GatherRows", "hxrt"}] = gather_rows_cases;
    (*g)[{"PagedAttention", "hxrt"}] = paged_attention_cases;
    (*g)[{"MoeRoute", "hxrt"}] = moe_route_cases;
    (*g)[{"MatMulQExperts", "hxrt"}] = matmul_q_experts_cases;
    (*g)[{"Conv", ""}] = [](std::mt19937& rng) { return conv_cases(rng, false); };
    (*g)[{"BatchNormalization", ""}] = batch_norm_cases;
    (*g)[{"ConvBnRelu", "hxrt.fused"}] =
        with_pattern([](std::mt19937& rng) { return conv_cases(rng, true); }, "ConvBnRelu");
    (*g)[{"MatMulBias", "hxrt.fused"}] = with_pattern(matmul_bias_cases, "MatMulBias");
    (*g)[{"RMSNormMul", "hxrt.fused"}] =
        with_pattern([](std::mt19937& rng) { return rms_norm_cases(rng, true); }, "RMSNormMul");
    (*g)[{"SwiGLU", "hxrt.fused"}] = with_pattern(swiglu_cases, "SwiGLU");
    return g;
  }();
  return *table;
}

double nmse(const HostTensor& actual, const differential::RefTensor& expected, std::string* detail) {
  const std::vector<int64_t> actual_dims(actual.shape.dims().begin(), actual.shape.dims().end());
  if (actual.dtype != expected.dtype || actual_dims != expected.dims) {
    *detail = fmt::format("got {}{}, the reference has {}{}", actual.dtype, actual.shape, expected.dtype,
                          expected.shape_string());
    return INFINITY;
  }
  const differential::RefTensor got = differential::ref_from_host(actual);
  double error = 0.0, norm = 0.0, worst = 0.0;
  size_t worst_at = 0;
  for (size_t i = 0; i < got.data.size(); ++i) {
    const double diff = std::isfinite(got.data[i]) ? got.data[i] - expected.data[i] : INFINITY;
    if (!(std::abs(diff) <= worst)) {
      worst = std::abs(diff);
      worst_at = i;
    }
    error += diff * diff;
    norm += expected.data[i] * expected.data[i];
  }
  if (!got.data.empty()) {
    *detail = fmt::format("worst at flat index {}: got {}, expected {}", worst_at, got.data[worst_at],
                          expected.data[worst_at]);
  }
  // Elements below 1e-2 in magnitude are judged on that absolute scale (the denominator is at least N * 1e-4), so a
  // case whose few reference values are all tiny does not turn a kernel's last-bit differences into a large ratio.
  return error / std::max(norm, 1e-4 * static_cast<double>(got.data.size()));
}

}  // namespace hxrt::parity
