#include "differential/reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numbers>

#include "hxrt/base/check.h"
#include "hxrt/base/float16.h"
#include "hxrt/base/quant_types.h"

namespace hxrt::differential {
namespace {

using Dims = std::vector<int64_t>;

int64_t product(const Dims& dims, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= dims[i];
  return p;
}
int64_t product(const Dims& dims) {
  return product(dims, 0, dims.size());
}

std::string dims_string(const Dims& dims) {
  return fmt::format("[{}]", fmt::join(dims, ", "));
}

size_t at(int64_t i) {
  return static_cast<size_t>(i);
}

// The multi-index of flat position `flat` in a row-major tensor of `dims`.
Dims unravel(int64_t flat, const Dims& dims) {
  Dims index(dims.size());
  for (size_t i = dims.size(); i-- > 0;) {
    index[i] = dims[i] == 0 ? 0 : flat % dims[i];
    flat = dims[i] == 0 ? 0 : flat / dims[i];
  }
  return index;
}

// The flat offset of `index` in a row-major tensor of `dims`.
int64_t ravel(const Dims& index, const Dims& dims) {
  int64_t offset = 0;
  for (size_t i = 0; i < dims.size(); ++i) offset = offset * dims[i] + index[i];
  return offset;
}

// Numpy broadcasting: trailing dims aligned, a dim of 1 stretches.
Result<Dims> broadcast(const Dims& a, const Dims& b) {
  const size_t rank = std::max(a.size(), b.size());
  Dims out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) {
      return invalid_argument("shapes {} and {} do not broadcast", dims_string(a), dims_string(b));
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// The flat offset in a tensor of `src` dims of the element that broadcasts to `out_index` of the output.
int64_t broadcast_offset(const Dims& src, const Dims& out_index) {
  const size_t skip = out_index.size() - src.size();
  int64_t offset = 0;
  for (size_t i = 0; i < src.size(); ++i) offset = offset * src[i] + (src[i] == 1 ? 0 : out_index[i + skip]);
  return offset;
}

// What a value becomes when stored as `dtype`.
double round_to(DType dtype, double v) {
  switch (dtype) {
    case DType::kF32: return static_cast<float>(v);
    case DType::kF16: return f16_to_f32(f32_to_f16(static_cast<float>(v)));
    case DType::kBF16: return bf16_to_f32(f32_to_bf16(static_cast<float>(v)));
    case DType::kBool: return v != 0.0 ? 1.0 : 0.0;
    case DType::kI8:
    case DType::kI32:
    case DType::kI64:
    case DType::kU8: return std::trunc(v);  // float→int truncates toward zero; callers keep values in range
    default: return v;
  }
}

RefTensor make(DType dtype, Dims dims) {
  RefTensor t;
  t.dtype = dtype;
  t.data.assign(at(product(dims)), 0.0);
  t.dims = std::move(dims);
  return t;
}

int64_t normalize_axis(int64_t axis, size_t rank) {
  return axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
}

Result<int64_t> checked_axis(int64_t axis, size_t rank, std::string_view what) {
  const int64_t a = normalize_axis(axis, rank);
  if (a < 0 || a >= static_cast<int64_t>(rank))
    return invalid_argument("{} {} out of range for rank {}", what, axis, rank);
  return a;
}

// ---- elementwise ----------------------------------------------------------------------------------------------

double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}
double gelu_erf(double x) {
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}
double gelu_tanh(double x) {
  const double k = std::sqrt(2.0 / std::numbers::pi);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

template <typename Fn>
RefTensor unary(const RefTensor& x, Fn fn) {
  RefTensor y = x;
  for (double& v : y.data) v = fn(v);
  return y;
}

template <typename Fn>
Result<RefTensor> binary(const RefTensor& a, const RefTensor& b, Fn fn) {
  HXRT_ASSIGN_OR_RETURN(Dims dims, broadcast(a.dims, b.dims));
  RefTensor y = make(a.dtype, dims);
  for (int64_t i = 0; i < y.num_elements(); ++i) {
    const Dims index = unravel(i, dims);
    y.data[at(i)] = fn(a.data[at(broadcast_offset(a.dims, index))], b.data[at(broadcast_offset(b.dims, index))]);
  }
  return y;
}

Result<DType> dtype_of_onnx_type(int64_t to) {
  switch (to) {
    case 1: return DType::kF32;
    case 10: return DType::kF16;
    case 16: return DType::kBF16;
    case 2: return DType::kU8;
    case 3: return DType::kI8;
    case 6: return DType::kI32;
    case 7: return DType::kI64;
    case 9: return DType::kBool;
    default: return invalid_argument("Cast to unsupported ONNX type {}", to);
  }
}

// ---- normalization and position --------------------------------------------------------------------------------

RefTensor softmax(const RefTensor& x, int64_t axis) {
  const size_t a = at(axis);
  const int64_t outer = product(x.dims, 0, a), n = x.dims[a], inner = product(x.dims, a + 1, x.dims.size());
  RefTensor y = x;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      auto element = [&](int64_t k) -> double& { return y.data[at((o * n + k) * inner + in)]; };
      double max = -INFINITY, sum = 0.0;
      for (int64_t k = 0; k < n; ++k) max = std::max(max, element(k));
      for (int64_t k = 0; k < n; ++k) sum += std::exp(element(k) - max);
      for (int64_t k = 0; k < n; ++k) element(k) = std::exp(element(k) - max) / sum;
    }
  }
  return y;
}

// (x - mean) / sqrt(var + eps) over dims axis..end (population variance).
RefTensor standardize(const RefTensor& x, int64_t axis, double epsilon) {
  const int64_t outer = product(x.dims, 0, at(axis)), n = product(x.dims, at(axis), x.dims.size());
  RefTensor y = x;
  for (int64_t o = 0; o < outer; ++o) {
    double mean = 0.0, var = 0.0;
    for (int64_t k = 0; k < n; ++k) mean += x.data[at(o * n + k)];
    mean /= static_cast<double>(n);
    for (int64_t k = 0; k < n; ++k) var += (x.data[at(o * n + k)] - mean) * (x.data[at(o * n + k)] - mean);
    var /= static_cast<double>(n);
    for (int64_t k = 0; k < n; ++k) y.data[at(o * n + k)] = (x.data[at(o * n + k)] - mean) / std::sqrt(var + epsilon);
  }
  return y;
}

// x / sqrt(mean(x², last axis) + eps).
RefTensor rms_norm(const RefTensor& x, double epsilon) {
  const int64_t n = x.dims.empty() ? 1 : x.dims.back(), rows = n == 0 ? 0 : x.num_elements() / n;
  RefTensor y = x;
  for (int64_t r = 0; r < rows; ++r) {
    double sum_sq = 0.0;
    for (int64_t k = 0; k < n; ++k) sum_sq += x.data[at(r * n + k)] * x.data[at(r * n + k)];
    const double inv = 1.0 / std::sqrt(sum_sq / static_cast<double>(n) + epsilon);
    for (int64_t k = 0; k < n; ++k) y.data[at(r * n + k)] = x.data[at(r * n + k)] * inv;
  }
  return y;
}

// RoPE's scaling (docs/ops.md): frequency factors, linear interpolation, YaRN's ramp over the correction dims and
// the cos/sin magnitude, written from ggml's rope_yarn in double.
struct RopeScalingRef {
  const RefTensor* factors = nullptr;
  double freq_scale = 1.0, ext_factor = 0.0, attn_factor = 1.0, beta_fast = 32.0, beta_slow = 1.0;
  int64_t n_ctx_orig = 0;
};

Result<RefTensor> rope(const RefTensor& x, const RefTensor& positions, double theta, int64_t rotary_dims,
                       const std::string& mode, const RopeScalingRef& scaling = {}) {
  if (x.dims.size() < 3)
    return invalid_argument("RoPE input has rank {}, needs [..., tokens, heads, head_dim]", x.dims.size());
  const size_t r = x.dims.size();
  const int64_t tokens = x.dims[r - 3], heads = x.dims[r - 2], head_dim = x.dims[r - 1];
  const int64_t rot = rotary_dims == 0 ? head_dim : rotary_dims;
  if (rot % 2 != 0 || rot > head_dim) return invalid_argument("RoPE rotary_dims {} for head_dim {}", rot, head_dim);
  if (positions.num_elements() != tokens) {
    return invalid_argument("RoPE has {} positions for {} tokens", positions.num_elements(), tokens);
  }
  if (mode != "normal" && mode != "neox") return invalid_argument("RoPE mode '{}'", mode);
  if (scaling.factors != nullptr && scaling.factors->num_elements() != rot / 2) {
    return invalid_argument("RoPE has {} frequency factors for {} pairs", scaling.factors->num_elements(), rot / 2);
  }
  double low = 0, high = 0;
  if (scaling.ext_factor != 0) {
    const double pi = std::acos(-1.0);
    const auto corr = [&](double rotations) {
      return static_cast<double>(rot) * std::log(static_cast<double>(scaling.n_ctx_orig) / (rotations * 2 * pi)) /
             (2 * std::log(theta));
    };
    low = std::max(0.0, std::floor(corr(scaling.beta_fast)));
    high = std::min(static_cast<double>(rot - 1), std::ceil(corr(scaling.beta_slow)));
  }
  RefTensor y = x;
  const int64_t outer = product(x.dims, 0, r - 3);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t t = 0; t < tokens; ++t) {
      const double pos = positions.data[at(t)];
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t base = ((o * tokens + t) * heads + h) * head_dim;
        for (int64_t i = 0; i < rot / 2; ++i) {
          double extrap = pos * std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(rot));
          if (scaling.factors != nullptr) extrap /= scaling.factors->data[at(i)];
          const double ramp = 1 - std::min(1.0, std::max(0.0, (static_cast<double>(i) - low) / std::max(0.001, high - low)));
          const double mix = scaling.ext_factor * ramp;
          const double angle = scaling.freq_scale * extrap * (1 - mix) + extrap * mix;
          const double c = std::cos(angle) * scaling.attn_factor, sn = std::sin(angle) * scaling.attn_factor;
          const int64_t i0 = mode == "normal" ? 2 * i : i;
          const int64_t i1 = mode == "normal" ? 2 * i + 1 : i + rot / 2;
          const double x0 = x.data[at(base + i0)], x1 = x.data[at(base + i1)];
          y.data[at(base + i0)] = x0 * c - x1 * sn;
          y.data[at(base + i1)] = x0 * sn + x1 * c;
        }
      }
    }
  }
  return y;
}

// ---- tensor ops ---------------------------------------------------------------------------------------------------

Result<RefTensor> gather(const RefTensor& data, const RefTensor& indices, int64_t axis_attr) {
  HXRT_ASSIGN_OR_RETURN(const int64_t axis, checked_axis(axis_attr, data.dims.size(), "Gather axis"));
  const size_t a = at(axis);
  Dims dims(data.dims.begin(), data.dims.begin() + axis);
  dims.insert(dims.end(), indices.dims.begin(), indices.dims.end());
  dims.insert(dims.end(), data.dims.begin() + axis + 1, data.dims.end());
  const int64_t outer = product(data.dims, 0, a), n = data.dims[a], inner = product(data.dims, a + 1, data.dims.size());
  const int64_t count = indices.num_elements();
  RefTensor y = make(data.dtype, dims);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < count; ++j) {
      int64_t index = static_cast<int64_t>(indices.data[at(j)]);
      if (index < -n || index >= n) return out_of_range("Gather index {} out of range for a dim of {}", index, n);
      if (index < 0) index += n;
      for (int64_t in = 0; in < inner; ++in) {
        y.data[at((o * count + j) * inner + in)] = data.data[at((o * n + index) * inner + in)];
      }
    }
  }
  return y;
}

Result<RefTensor> reshape(const RefTensor& data, const RefTensor& shape, bool allow_zero) {
  Dims dims;
  int infer = -1;
  for (size_t i = 0; i < shape.data.size(); ++i) {
    int64_t d = static_cast<int64_t>(shape.data[i]);
    if (d == 0 && !allow_zero) {
      if (i >= data.dims.size())
        return invalid_argument("Reshape copies dim {} of a rank-{} input", i, data.dims.size());
      d = data.dims[i];
    }
    if (d == -1) {
      if (infer >= 0) return invalid_argument("Reshape has two -1 dims");
      infer = static_cast<int>(i);
      d = 1;
    }
    dims.push_back(d);
  }
  if (infer >= 0) {
    const int64_t known = product(dims);
    if (known == 0 || data.num_elements() % known != 0) return invalid_argument("Reshape cannot infer the -1 dim");
    dims[at(infer)] = data.num_elements() / known;
  }
  if (product(dims) != data.num_elements()) {
    return invalid_argument("Reshape of {} into {}", data.shape_string(), dims_string(dims));
  }
  RefTensor y = data;
  y.dims = dims;
  return y;
}

Result<RefTensor> transpose(const RefTensor& data, Dims perm) {
  const size_t rank = data.dims.size();
  if (perm.empty()) {
    for (size_t i = 0; i < rank; ++i) perm.push_back(static_cast<int64_t>(rank - 1 - i));
  }
  if (perm.size() != rank) return invalid_argument("Transpose perm {} for rank {}", dims_string(perm), rank);
  Dims dims(rank);
  for (size_t i = 0; i < rank; ++i) dims[i] = data.dims[at(perm[i])];
  RefTensor y = make(data.dtype, dims);
  for (int64_t i = 0; i < y.num_elements(); ++i) {
    const Dims out_index = unravel(i, dims);
    Dims in_index(rank);
    for (size_t k = 0; k < rank; ++k) in_index[at(perm[k])] = out_index[k];
    y.data[at(i)] = data.data[at(ravel(in_index, data.dims))];
  }
  return y;
}

Result<RefTensor> concat(const std::vector<const RefTensor*>& parts, int64_t axis_attr) {
  const RefTensor& first = *parts.front();
  HXRT_ASSIGN_OR_RETURN(const int64_t axis, checked_axis(axis_attr, first.dims.size(), "Concat axis"));
  const size_t a = at(axis);
  Dims dims = first.dims;
  dims[a] = 0;
  for (const RefTensor* p : parts) {
    for (size_t i = 0; i < dims.size(); ++i) {
      if (i != a && p->dims[i] != first.dims[i])
        return invalid_argument("Concat of {} and {}", first.shape_string(), p->shape_string());
    }
    dims[a] += p->dims[a];
  }
  RefTensor y = make(first.dtype, dims);
  const int64_t outer = product(dims, 0, a), inner = product(dims, a + 1, dims.size());
  int64_t offset = 0;  // along the axis
  for (const RefTensor* p : parts) {
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t k = 0; k < p->dims[a]; ++k) {
        for (int64_t in = 0; in < inner; ++in) {
          y.data[at((o * dims[a] + offset + k) * inner + in)] = p->data[at((o * p->dims[a] + k) * inner + in)];
        }
      }
    }
    offset += p->dims[a];
  }
  return y;
}

Result<RefTensor> slice(const RefTensor& data, const RefTensor& starts, const RefTensor& ends, const RefTensor* axes,
                        const RefTensor* steps) {
  const size_t rank = data.dims.size();
  const size_t count = starts.data.size();
  if (ends.data.size() != count) return invalid_argument("Slice starts and ends differ in length");
  Dims start(rank, 0), step(rank, 1), dims = data.dims;
  for (size_t i = 0; i < count; ++i) {
    int64_t axis = axes != nullptr ? static_cast<int64_t>(axes->data[i]) : static_cast<int64_t>(i);
    HXRT_ASSIGN_OR_RETURN(axis, checked_axis(axis, rank, "Slice axis"));
    const int64_t n = data.dims[at(axis)];
    const int64_t st = steps != nullptr ? static_cast<int64_t>(steps->data[i]) : 1;
    if (st == 0) return invalid_argument("Slice step 0");
    // Doubles hold the INT64 extremes only approximately; clamp before converting.
    const auto to_int = [](double v) {
      return v >= 9.2e18 ? INT64_MAX : v <= -9.2e18 ? INT64_MIN : static_cast<int64_t>(v);
    };
    int64_t s = to_int(starts.data[i]), e = to_int(ends.data[i]);
    if (s < 0) s += n;
    if (e < 0) e += n;
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, n);
      e = std::clamp<int64_t>(e, 0, n);
    } else {
      s = std::clamp<int64_t>(s, 0, n - 1);
      e = std::clamp<int64_t>(e, -1, n - 1);
    }
    const int64_t len = st > 0 ? (e - s + st - 1) / st : (s - e + (-st) - 1) / (-st);
    start[at(axis)] = s;
    step[at(axis)] = st;
    dims[at(axis)] = std::max<int64_t>(0, len);
  }
  RefTensor y = make(data.dtype, dims);
  for (int64_t i = 0; i < y.num_elements(); ++i) {
    Dims index = unravel(i, dims);
    for (size_t k = 0; k < rank; ++k) index[k] = start[k] + index[k] * step[k];
    y.data[at(i)] = data.data[at(ravel(index, data.dims))];
  }
  return y;
}

// ---- linear algebra -------------------------------------------------------------------------------------------------

// numpy matmul: batch dims broadcast; a rank-1 A gains a leading 1 and a rank-1 B a trailing 1, removed after.
Result<RefTensor> matmul(const RefTensor& a_in, const RefTensor& b_in) {
  RefTensor a = a_in, b = b_in;
  if (a.dims.empty() || b.dims.empty()) return invalid_argument("MatMul of a scalar");
  const bool a_vector = a.dims.size() == 1, b_vector = b.dims.size() == 1;
  if (a_vector) a.dims.insert(a.dims.begin(), 1);
  if (b_vector) b.dims.push_back(1);
  const int64_t m = a.dims[a.dims.size() - 2], k = a.dims.back(), n = b.dims.back();
  if (b.dims[b.dims.size() - 2] != k) {
    return invalid_argument("MatMul inner dims differ: {} x {}", a_in.shape_string(), b_in.shape_string());
  }
  const Dims a_batch(a.dims.begin(), a.dims.end() - 2), b_batch(b.dims.begin(), b.dims.end() - 2);
  HXRT_ASSIGN_OR_RETURN(Dims batch, broadcast(a_batch, b_batch));
  Dims dims = batch;
  dims.push_back(m);
  dims.push_back(n);
  RefTensor y = make(a.dtype, dims);
  for (int64_t bi = 0; bi < product(batch); ++bi) {
    const Dims index = unravel(bi, batch);
    const int64_t a_off = broadcast_offset(a_batch, index) * m * k, b_off = broadcast_offset(b_batch, index) * k * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0.0;
        for (int64_t p = 0; p < k; ++p) sum += a.data[at(a_off + i * k + p)] * b.data[at(b_off + p * n + j)];
        y.data[at((bi * m + i) * n + j)] = sum;
      }
    }
  }
  if (a_vector) y.dims.erase(y.dims.end() - 2);
  if (b_vector) y.dims.pop_back();
  return y;
}

Result<RefTensor> gemm(const RefTensor& a, const RefTensor& b, const RefTensor* c, double alpha, double beta,
                       bool trans_a, bool trans_b) {
  if (a.dims.size() != 2 || b.dims.size() != 2) return invalid_argument("Gemm needs rank-2 A and B");
  const int64_t m = trans_a ? a.dims[1] : a.dims[0], k = trans_a ? a.dims[0] : a.dims[1];
  const int64_t n = trans_b ? b.dims[0] : b.dims[1];
  if ((trans_b ? b.dims[1] : b.dims[0]) != k) return invalid_argument("Gemm inner dims differ");
  RefTensor y = make(a.dtype, {m, n});
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        sum += a.data[at(trans_a ? p * m + i : i * k + p)] * b.data[at(trans_b ? j * k + p : p * n + j)];
      }
      y.data[at(i * n + j)] = alpha * sum;
    }
  }
  if (c != nullptr) {
    HXRT_ASSIGN_OR_RETURN(Dims dims, broadcast(c->dims, y.dims));
    if (dims != y.dims) return invalid_argument("Gemm C {} does not broadcast to [{}, {}]", c->shape_string(), m, n);
    for (int64_t i = 0; i < y.num_elements(); ++i) {
      y.data[at(i)] += beta * c->data[at(broadcast_offset(c->dims, unravel(i, y.dims)))];
    }
  }
  return y;
}

// Y[..., N] = A[..., K] · W[N, K]ᵀ (+ bias[N]); W already dequantized.
Result<RefTensor> matmul_q(const RefTensor& a, const RefTensor& w, const RefTensor* bias) {
  if (a.dims.empty() || w.dims.size() != 2 || w.dims[1] != a.dims.back()) {
    return invalid_argument("MatMulQ of {} and W {}", a.shape_string(), w.shape_string());
  }
  const int64_t k = w.dims[1], n = w.dims[0], rows = a.num_elements() / std::max<int64_t>(k, 1);
  Dims dims = a.dims;
  dims.back() = n;
  RefTensor y = make(DType::kF32, dims);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = bias != nullptr ? bias->data[at(j)] : 0.0;
      for (int64_t p = 0; p < k; ++p) sum += a.data[at(r * k + p)] * w.data[at(j * k + p)];
      y.data[at(r * n + j)] = sum;
    }
  }
  return y;
}

// ---- convolution ------------------------------------------------------------------------------------------------

Result<RefTensor> conv(const RefTensor& x, const RefTensor& w, const RefTensor* bias,
                       const graph::AttributeMap& attrs) {
  if (x.dims.size() != 4 || w.dims.size() != 4)
    return invalid_argument("Conv is 2-D only: X {} W {}", x.shape_string(), w.shape_string());
  HXRT_ASSIGN_OR_RETURN(const int64_t group, attrs.get_int("group", 1));
  HXRT_ASSIGN_OR_RETURN(const Dims strides, attrs.get_ints("strides", {1, 1}));
  HXRT_ASSIGN_OR_RETURN(const Dims dilations, attrs.get_ints("dilations", {1, 1}));
  HXRT_ASSIGN_OR_RETURN(Dims pads, attrs.get_ints("pads", {0, 0, 0, 0}));
  HXRT_ASSIGN_OR_RETURN(const std::string auto_pad, attrs.get_string("auto_pad", "NOTSET"));
  const int64_t batch = x.dims[0], channels = x.dims[1], height = x.dims[2], width = x.dims[3];
  const int64_t out_channels = w.dims[0], group_channels = w.dims[1], kh = w.dims[2], kw = w.dims[3];
  if (group <= 0 || channels != group_channels * group || out_channels % group != 0) {
    return invalid_argument("Conv channels: X {} W {} group {}", x.shape_string(), w.shape_string(), group);
  }
  const int64_t in_size[2] = {height, width}, kernel[2] = {kh, kw};
  int64_t out_size[2];
  for (int d = 0; d < 2; ++d) {
    const int64_t extent = (kernel[d] - 1) * dilations[at(d)] + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      out_size[d] = (in_size[d] + strides[at(d)] - 1) / strides[at(d)];
      const int64_t total = std::max<int64_t>(0, (out_size[d] - 1) * strides[at(d)] + extent - in_size[d]);
      const int64_t small = total / 2, large = total - small;
      pads[at(d)] = auto_pad == "SAME_UPPER" ? small : large;
      pads[at(d + 2)] = auto_pad == "SAME_UPPER" ? large : small;
    } else if (auto_pad == "VALID") {
      pads[at(d)] = pads[at(d + 2)] = 0;
    }
    out_size[d] = (in_size[d] + pads[at(d)] + pads[at(d + 2)] - extent) / strides[at(d)] + 1;
    if (out_size[d] <= 0) return invalid_argument("Conv output dim {} is empty", d);
  }
  RefTensor y = make(x.dtype, {batch, out_channels, out_size[0], out_size[1]});
  const int64_t per_group = out_channels / group;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t m = 0; m < out_channels; ++m) {
      const int64_t g = m / per_group;
      for (int64_t oy = 0; oy < out_size[0]; ++oy) {
        for (int64_t ox = 0; ox < out_size[1]; ++ox) {
          double sum = bias != nullptr ? bias->data[at(m)] : 0.0;
          for (int64_t c = 0; c < group_channels; ++c) {
            for (int64_t ky = 0; ky < kh; ++ky) {
              for (int64_t kx = 0; kx < kw; ++kx) {
                const int64_t iy = oy * strides[0] - pads[0] + ky * dilations[0];
                const int64_t ix = ox * strides[1] - pads[1] + kx * dilations[1];
                if (iy < 0 || iy >= height || ix < 0 || ix >= width) continue;
                sum += x.data[at(((b * channels + g * group_channels + c) * height + iy) * width + ix)] *
                       w.data[at(((m * group_channels + c) * kh + ky) * kw + kx)];
              }
            }
          }
          y.data[at(((b * out_channels + m) * out_size[0] + oy) * out_size[1] + ox)] = sum;
        }
      }
    }
  }
  return y;
}

// Inference batch norm over channel axis 1.
Result<RefTensor> batch_norm(const RefTensor& x, const RefTensor& scale, const RefTensor& bias, const RefTensor& mean,
                             const RefTensor& var, double epsilon) {
  if (x.dims.size() < 2) return invalid_argument("BatchNormalization input {} has no channel axis", x.shape_string());
  const int64_t channels = x.dims[1], inner = product(x.dims, 2, x.dims.size());
  for (const RefTensor* p : {&scale, &bias, &mean, &var}) {
    if (p->num_elements() != channels)
      return invalid_argument("BatchNormalization parameter {} for {} channels", p->shape_string(), channels);
  }
  RefTensor y = x;
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    const size_t c = at((i / inner) % channels);
    y.data[at(i)] = (x.data[at(i)] - mean.data[c]) / std::sqrt(var.data[c] + epsilon) * scale.data[c] + bias.data[c];
  }
  return y;
}

// ---- weights --------------------------------------------------------------------------------------------------------

uint16_t u16_at(const std::byte* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Decodes `count` values of `dtype` from row-major bytes (quantized types dequantized, ggml block layouts).
Result<std::vector<double>> decode(DType dtype, const std::byte* bytes, uint64_t size, int64_t count) {
  HXRT_ASSIGN_OR_RETURN(const uint64_t expected, storage_bytes(dtype, static_cast<uint64_t>(count)));
  if (size != expected) return invalid_argument("{} bytes for {} values of {}", size, count, dtype);
  std::vector<double> out(at(count));
  if (dtype_info(dtype).is_quantized) {  // the exact values, from the quantization-type table
    HXRT_RETURN_IF_ERROR(dequantize_row_f64(dtype, bytes, count, out.data()));
    return out;
  }
  auto read = [&](auto sample, int64_t i) {
    decltype(sample) v;
    std::memcpy(&v, bytes + static_cast<size_t>(i) * sizeof v, sizeof v);
    return static_cast<double>(v);
  };
  for (int64_t i = 0; i < count; ++i) {
    switch (dtype) {
      case DType::kF32: out[at(i)] = read(float{}, i); break;
      case DType::kF16: out[at(i)] = f16_to_f32(u16_at(bytes + 2 * i)); break;
      case DType::kBF16: out[at(i)] = bf16_to_f32(u16_at(bytes + 2 * i)); break;
      case DType::kI8: out[at(i)] = read(int8_t{}, i); break;
      case DType::kU8: out[at(i)] = read(uint8_t{}, i); break;
      case DType::kBool: out[at(i)] = read(uint8_t{}, i) != 0 ? 1.0 : 0.0; break;
      case DType::kI32: out[at(i)] = read(int32_t{}, i); break;
      case DType::kI64: out[at(i)] = read(int64_t{}, i); break;
      default: break;  // the quantized types: above
    }
  }
  return out;
}

// ---- the interpreter --------------------------------------------------------------------------------------------

class Interpreter {
 public:
  explicit Interpreter(const graph::Graph& graph) : graph_(graph) {}

  Status load(const HostTensors& inputs) {
    for (graph::ValueId id : graph_.inputs()) {
      const graph::Value& v = graph_.value(id);
      auto it = inputs.find(v.name);
      if (it == inputs.end()) return invalid_argument("missing input '{}'", v.name);
      values_[v.name] = ref_from_host(it->second);
    }
    for (graph::ValueId id : graph_.initializers()) {
      const graph::Value& v = graph_.value(id);
      HXRT_ASSIGN_OR_RETURN(const Shape shape, v.desc.shape.resolve({}));
      RefTensor t;
      t.dtype = v.desc.dtype;
      t.dims.assign(shape.dims().begin(), shape.dims().end());
      HXRT_ASSIGN_OR_RETURN(t.data, decode(v.desc.dtype, v.weight.data, v.weight.size, shape.num_elements()));
      values_[v.name] = std::move(t);
    }
    return ok_status();
  }

  Status run() {
    HXRT_ASSIGN_OR_RETURN(const std::vector<graph::NodeId> order, graph_.topological_order());
    for (graph::NodeId id : order) {
      const graph::Node& node = graph_.node(id);
      Result<RefTensor> out = evaluate(node);
      if (!out.ok()) {
        return std::move(out).take_status().with_context(
            fmt::format("reference: node '{}' ({})", node.name, node.op_type));
      }
      if (node.outputs.size() != 1)
        return unimplemented("reference: node '{}' has {} outputs", node.name, node.outputs.size());
      values_[graph_.value(node.outputs[0]).name] = std::move(out).value();
    }
    return ok_status();
  }

  RefValues take() { return std::move(values_); }

 private:
  const RefTensor* input(const graph::Node& node, size_t i) const {
    if (i >= node.inputs.size() || node.inputs[i] == graph::kNoValue) return nullptr;
    return &values_.at(graph_.value(node.inputs[i]).name);
  }
  Result<const RefTensor*> required(const graph::Node& node, size_t i) const {
    const RefTensor* t = input(node, i);
    if (t == nullptr) return invalid_argument("input {} is missing", i);
    return t;
  }

  Result<RefTensor> evaluate(const graph::Node& node) const {
    const graph::AttributeMap& attrs = node.attrs;
    const std::string& op = node.op_type;
    HXRT_ASSIGN_OR_RETURN(const RefTensor* x, required(node, 0));

    if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
      HXRT_ASSIGN_OR_RETURN(const RefTensor* y, required(node, 1));
      // Integer Div truncates toward zero.
      const bool integer = !dtype_info(x->dtype).is_float;
      return binary(*x, *y, [&op, integer](double a, double b) {
        return op == "Add" ? a + b : op == "Sub" ? a - b : op == "Mul" ? a * b : integer ? std::trunc(a / b) : a / b;
      });
    }
    if (op == "Relu") return unary(*x, [](double v) { return std::max(v, 0.0); });
    if (op == "LeakyRelu") {
      HXRT_ASSIGN_OR_RETURN(const float alpha, attrs.get_float("alpha", 0.01f));
      return unary(*x, [alpha](double v) { return v >= 0.0 ? v : static_cast<double>(alpha) * v; });
    }
    if (op == "Sigmoid") return unary(*x, sigmoid);
    if (op == "Tanh") return unary(*x, [](double v) { return std::tanh(v); });
    if (op == "Silu") return unary(*x, [](double v) { return v * sigmoid(v); });
    if (op == "Gelu") {
      HXRT_ASSIGN_OR_RETURN(const std::string approximate, attrs.get_string("approximate", "none"));
      if (approximate == "tanh") return unary(*x, gelu_tanh);
      if (approximate == "none") return unary(*x, gelu_erf);
      return invalid_argument("Gelu approximate '{}'", approximate);
    }
    if (op == "Cast") {
      HXRT_ASSIGN_OR_RETURN(const int64_t to, attrs.get_int("to"));
      HXRT_ASSIGN_OR_RETURN(const DType dtype, dtype_of_onnx_type(to));
      RefTensor y = unary(*x, [dtype](double v) { return round_to(dtype, v); });
      y.dtype = dtype;
      return y;
    }
    if (op == "Softmax") {
      HXRT_ASSIGN_OR_RETURN(const int64_t axis_attr, attrs.get_int("axis", -1));
      HXRT_ASSIGN_OR_RETURN(const int64_t axis, checked_axis(axis_attr, x->dims.size(), "Softmax axis"));
      return softmax(*x, axis);
    }
    if (op == "LayerNormalization") {
      HXRT_ASSIGN_OR_RETURN(const int64_t axis_attr, attrs.get_int("axis", -1));
      HXRT_ASSIGN_OR_RETURN(const int64_t axis, checked_axis(axis_attr, x->dims.size(), "LayerNormalization axis"));
      HXRT_ASSIGN_OR_RETURN(const double epsilon, attrs.get_float("epsilon", 1e-5));
      HXRT_ASSIGN_OR_RETURN(const RefTensor* scale, required(node, 1));
      HXRT_ASSIGN_OR_RETURN(RefTensor y, binary(standardize(*x, axis, epsilon), *scale, std::multiplies<>()));
      if (const RefTensor* b = input(node, 2)) return binary(y, *b, std::plus<>());
      return y;
    }
    if (op == "RMSNorm") {
      HXRT_ASSIGN_OR_RETURN(const double epsilon, attrs.get_float("epsilon", 1e-5));
      return rms_norm(*x, epsilon);
    }
    if (op == "RoPE") {
      HXRT_ASSIGN_OR_RETURN(const RefTensor* positions, required(node, 1));
      HXRT_ASSIGN_OR_RETURN(const double theta, attrs.get_float("theta", 10000.0));
      HXRT_ASSIGN_OR_RETURN(const int64_t rotary_dims, attrs.get_int("rotary_dims", 0));
      HXRT_ASSIGN_OR_RETURN(const std::string mode, attrs.get_string("mode", "normal"));
      RopeScalingRef scaling;
      if (node.inputs.size() > 2 && node.inputs[2] != graph::kNoValue) {
        HXRT_ASSIGN_OR_RETURN(scaling.factors, required(node, 2));
      }
      HXRT_ASSIGN_OR_RETURN(scaling.freq_scale, attrs.get_float("freq_scale", 1.0));
      HXRT_ASSIGN_OR_RETURN(scaling.ext_factor, attrs.get_float("ext_factor", 0.0));
      HXRT_ASSIGN_OR_RETURN(scaling.attn_factor, attrs.get_float("attn_factor", 1.0));
      HXRT_ASSIGN_OR_RETURN(scaling.beta_fast, attrs.get_float("beta_fast", 32.0));
      HXRT_ASSIGN_OR_RETURN(scaling.beta_slow, attrs.get_float("beta_slow", 1.0));
      HXRT_ASSIGN_OR_RETURN(scaling.n_ctx_orig, attrs.get_int("n_ctx_orig", 0));
      return rope(*x, *positions, theta, rotary_dims, mode, scaling);
    }
    if (op == "Gather") {
      HXRT_ASSIGN_OR_RETURN(const RefTensor* indices, required(node, 1));
      HXRT_ASSIGN_OR_RETURN(const int64_t axis, attrs.get_int("axis", 0));
      return gather(*x, *indices, axis);
    }
    if (op == "Reshape") {
      HXRT_ASSIGN_OR_RETURN(const RefTensor* shape, required(node, 1));
      HXRT_ASSIGN_OR_RETURN(const int64_t allow_zero, attrs.get_int("allowzero", 0));
      return reshape(*x, *shape, allow_zero != 0);
    }
    if (op == "Transpose") {
      HXRT_ASSIGN_OR_RETURN(Dims perm, attrs.get_ints("perm", {}));
      return transpose(*x, std::move(perm));
    }
    if (op == "Concat") {
      HXRT_ASSIGN_OR_RETURN(const int64_t axis, attrs.get_int("axis"));
      std::vector<const RefTensor*> parts;
      for (size_t i = 0; i < node.inputs.size(); ++i) parts.push_back(input(node, i));
      return concat(parts, axis);
    }
    if (op == "Slice") {
      HXRT_ASSIGN_OR_RETURN(const RefTensor* starts, required(node, 1));
      HXRT_ASSIGN_OR_RETURN(const RefTensor* ends, required(node, 2));
      return slice(*x, *starts, *ends, input(node, 3), input(node, 4));
    }
    if (op == "MatMul") {
      HXRT_ASSIGN_OR_RETURN(const RefTensor* b, required(node, 1));
      return matmul(*x, *b);
    }
    if (op == "Gemm") {
      HXRT_ASSIGN_OR_RETURN(const RefTensor* b, required(node, 1));
      HXRT_ASSIGN_OR_RETURN(const double alpha, attrs.get_float("alpha", 1.0));
      HXRT_ASSIGN_OR_RETURN(const double beta, attrs.get_float("beta", 1.0));
      HXRT_ASSIGN_OR_RETURN(const int64_t trans_a, attrs.get_int("transA", 0));
      HXRT_ASSIGN_OR_RETURN(const int64_t trans_b, attrs.get_int("transB", 0));
      return gemm(*x, *b, input(node, 2), alpha, beta, trans_a != 0, trans_b != 0);
    }
    if (op == "MatMulQ") {
      HXRT_ASSIGN_OR_RETURN(const RefTensor* w, required(node, 1));
      return matmul_q(*x, *w, input(node, 2));
    }
    if (op == "Conv") {
      HXRT_ASSIGN_OR_RETURN(const RefTensor* w, required(node, 1));
      return conv(*x, *w, input(node, 2), attrs);
    }
    if (op == "BatchNormalization") {
      HXRT_ASSIGN_OR_RETURN(const double epsilon, attrs.get_float("epsilon", 1e-5));
      for (size_t i = 1; i < 5; ++i) HXRT_RETURN_IF_ERROR(required(node, i).status());
      return batch_norm(*x, *input(node, 1), *input(node, 2), *input(node, 3), *input(node, 4), epsilon);
    }

    // Fused ops: the composition of the ops they replace.
    if (op == "ConvBnRelu") {
      HXRT_ASSIGN_OR_RETURN(const double epsilon, attrs.get_float("epsilon", 1e-5));
      HXRT_ASSIGN_OR_RETURN(const int64_t relu, attrs.get_int("relu", 0));
      for (size_t i : {1, 3, 4, 5, 6}) HXRT_RETURN_IF_ERROR(required(node, i).status());
      HXRT_ASSIGN_OR_RETURN(RefTensor y, conv(*x, *input(node, 1), input(node, 2), attrs));
      HXRT_ASSIGN_OR_RETURN(y,
                            batch_norm(y, *input(node, 3), *input(node, 4), *input(node, 5), *input(node, 6), epsilon));
      if (relu != 0) return unary(y, [](double v) { return std::max(v, 0.0); });
      return y;
    }
    if (op == "MatMulBias") {
      HXRT_ASSIGN_OR_RETURN(const RefTensor* b, required(node, 1));
      HXRT_ASSIGN_OR_RETURN(const RefTensor* bias, required(node, 2));
      HXRT_ASSIGN_OR_RETURN(const std::string activation, attrs.get_string("activation", "none"));
      HXRT_ASSIGN_OR_RETURN(RefTensor y, matmul(*x, *b));
      HXRT_ASSIGN_OR_RETURN(y, binary(y, *bias, std::plus<>()));
      if (activation == "gelu") return unary(y, gelu_erf);
      if (activation == "gelu_tanh") return unary(y, gelu_tanh);
      if (activation == "none") return y;
      return invalid_argument("MatMulBias activation '{}'", activation);
    }
    if (op == "RMSNormMul") {
      HXRT_ASSIGN_OR_RETURN(const RefTensor* weight, required(node, 1));
      HXRT_ASSIGN_OR_RETURN(const double epsilon, attrs.get_float("epsilon", 1e-5));
      return binary(rms_norm(*x, epsilon), *weight, std::multiplies<>());
    }
    if (op == "SwiGLU") {
      HXRT_ASSIGN_OR_RETURN(const RefTensor* up, required(node, 1));
      return binary(unary(*x, [](double v) { return v * sigmoid(v); }), *up, std::multiplies<>());
    }
    return unimplemented("the reference has no op '{}' (domain '{}')", op, node.domain);
  }

  const graph::Graph& graph_;
  RefValues values_;
};

}  // namespace

int64_t RefTensor::num_elements() const {
  return product(dims);
}
std::string RefTensor::shape_string() const {
  return dims_string(dims);
}

RefTensor ref_from_host(const HostTensor& tensor) {
  RefTensor t;
  t.dtype = tensor.dtype;
  t.dims.assign(tensor.shape.dims().begin(), tensor.shape.dims().end());
  const bool is_int = !dtype_info(tensor.dtype).is_float && !dtype_info(tensor.dtype).is_quantized;
  if (dtype_info(tensor.dtype).is_quantized) {
    Result<std::vector<double>> values =
        decode(tensor.dtype, tensor.bytes.data(), tensor.bytes.size(), tensor.shape.num_elements());
    HXRT_CHECK(values.ok(), "{}", values.status().to_string());
    t.data = std::move(values).value();
  } else if (is_int) {
    for (int64_t v : tensor.to_i64()) t.data.push_back(static_cast<double>(v));
  } else {
    for (float v : tensor.to_f32()) t.data.push_back(v);
  }
  return t;
}

Result<RefValues> evaluate_reference(const graph::Graph& graph, const HostTensors& inputs) {
  Interpreter interpreter(graph);
  HXRT_RETURN_IF_ERROR(interpreter.load(inputs));
  HXRT_RETURN_IF_ERROR(interpreter.run());
  return interpreter.take();
}

}  // namespace hxrt::differential
