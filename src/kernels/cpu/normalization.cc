#include "kernels/cpu/normalization.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "hxrt/ops/params/reduce.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/registration.h"

namespace hxrt::kernels::cpu {

namespace {

// Sum of x[i] in double over kVectorBlock lanes.
double sum_double(const float* x, int64_t n) {
  double lanes[kVectorBlock] = {};
  int64_t i = 0;
  for (; i + kVectorBlock <= n; i += kVectorBlock) {
    for (int64_t k = 0; k < kVectorBlock; ++k) lanes[k] += static_cast<double>(x[i + k]);
  }
  double sum = 0.0;
  for (; i < n; ++i) sum += static_cast<double>(x[i]);
  for (int64_t k = 0; k < kVectorBlock; ++k) sum += lanes[k];
  return sum;
}

// Sum of (x[i] - center)² in double.
double sum_squares_double(const float* x, int64_t n, double center) {
  double lanes[kVectorBlock] = {};
  int64_t i = 0;
  for (; i + kVectorBlock <= n; i += kVectorBlock) {
    for (int64_t k = 0; k < kVectorBlock; ++k) {
      const double d = static_cast<double>(x[i + k]) - center;
      lanes[k] += d * d;
    }
  }
  double sum = 0.0;
  for (; i < n; ++i) {
    const double d = static_cast<double>(x[i]) - center;
    sum += d * d;
  }
  for (int64_t k = 0; k < kVectorBlock; ++k) sum += lanes[k];
  return sum;
}

float max_float(const float* x, int64_t n) {
  float lanes[kVectorBlock];
  std::fill(lanes, lanes + kVectorBlock, -std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + kVectorBlock <= n; i += kVectorBlock) {
    for (int64_t k = 0; k < kVectorBlock; ++k) lanes[k] = x[i + k] > lanes[k] ? x[i + k] : lanes[k];
  }
  float m = -std::numeric_limits<float>::infinity();
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  for (int64_t k = 0; k < kVectorBlock; ++k) m = lanes[k] > m ? lanes[k] : m;
  return m;
}

// y[i] = x[i] * s.
void scale_row(const float* x, float s, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + kVectorBlock <= n; i += kVectorBlock) {
    float out[kVectorBlock];
    for (int64_t k = 0; k < kVectorBlock; ++k) out[k] = x[i + k] * s;
    std::memcpy(y + i, out, sizeof out);
  }
  for (; i < n; ++i) y[i] = x[i] * s;
}

}  // namespace

void softmax_row(const float* x, float* y, int64_t n) {
  if (n <= 0) return;
  const float m = max_float(x, n);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const float e = std::exp(x[i] - m);
    y[i] = e;
    sum += static_cast<double>(e);
  }
  scale_row(y, static_cast<float>(1.0 / sum), y, n);
}

void softmax_columns(const float* x, float* y, int64_t axis_len, int64_t stride, int64_t cols) {
  if (axis_len <= 0 || cols <= 0) return;
  std::vector<float> col_max(x, x + cols);  // (cols)
  for (int64_t a = 1; a < axis_len; ++a) {
    const float* xa = x + a * stride;
    for (int64_t j = 0; j < cols; ++j) col_max[j] = xa[j] > col_max[j] ? xa[j] : col_max[j];
  }
  std::vector<double> col_sum(static_cast<size_t>(cols), 0.0);  // (cols)
  for (int64_t a = 0; a < axis_len; ++a) {
    const float* xa = x + a * stride;
    float* ya = y + a * stride;
    for (int64_t j = 0; j < cols; ++j) {
      const float e = std::exp(xa[j] - col_max[j]);
      ya[j] = e;
      col_sum[j] += static_cast<double>(e);
    }
  }
  std::vector<float> col_inv(static_cast<size_t>(cols));  // (cols)
  for (int64_t j = 0; j < cols; ++j) col_inv[j] = static_cast<float>(1.0 / col_sum[j]);
  for (int64_t a = 0; a < axis_len; ++a) {
    float* ya = y + a * stride;
    for (int64_t j = 0; j < cols; ++j) ya[j] *= col_inv[j];
  }
}

void layer_norm_row(const float* x, const float* scale, const float* bias, float* y, int64_t n, float eps) {
  if (n <= 0) return;
  const double mean = sum_double(x, n) / static_cast<double>(n);
  const double var = sum_squares_double(x, n, mean) / static_cast<double>(n);
  const float inv = static_cast<float>(1.0 / std::sqrt(var + static_cast<double>(eps)));
  const float mean_f = static_cast<float>(mean);
  int64_t i = 0;
  for (; i + kVectorBlock <= n; i += kVectorBlock) {
    float out[kVectorBlock];
    for (int64_t k = 0; k < kVectorBlock; ++k) out[k] = (x[i + k] - mean_f) * inv * scale[i + k];
    if (bias != nullptr) {
      for (int64_t k = 0; k < kVectorBlock; ++k) out[k] += bias[i + k];
    }
    std::memcpy(y + i, out, sizeof out);
  }
  for (; i < n; ++i) y[i] = (x[i] - mean_f) * inv * scale[i] + (bias != nullptr ? bias[i] : 0.0f);
}

float rms_inverse(const float* x, int64_t n, float eps) {
  const double mean_square = n > 0 ? sum_squares_double(x, n, 0.0) / static_cast<double>(n) : 0.0;
  return static_cast<float>(1.0 / std::sqrt(mean_square + static_cast<double>(eps)));
}

void rms_norm_row(const float* x, float* y, int64_t n, float eps) {
  scale_row(x, rms_inverse(x, n, eps), y, n);
}

void rms_norm_mul_row(const float* x, const float* weight, float* y, int64_t n, float eps) {
  const float inv = rms_inverse(x, n, eps);
  int64_t i = 0;
  for (; i + kVectorBlock <= n; i += kVectorBlock) {
    float out[kVectorBlock];
    for (int64_t k = 0; k < kVectorBlock; ++k) out[k] = x[i + k] * inv * weight[i + k];
    std::memcpy(y + i, out, sizeof out);
  }
  for (; i < n; ++i) y[i] = x[i] * inv * weight[i];
}

// Pair i's cos and sin at `position` (Note [RoPE scaling] in ops/params/normalization.cc), in double like the JIT
// kernels; `freq_factors` is null without the op's third input.
void rope_cos_sin(int64_t position, const ops::RopeParams& params, const ops::RopeGeometry& g,
                  const float* freq_factors, float* cos_sin) {
  RopeAngles(params, g, freq_factors).cos_sin(position, cos_sin);
}

RopeAngles::RopeAngles(const ops::RopeParams& params, const ops::RopeGeometry& g, const float* freq_factors)
    : params_(params), freq_factors_(freq_factors) {
  const int64_t rotary_dims = g.rotary_dims;
  for (int64_t i = 0; i < rotary_dims / 2; ++i) {
    freq_.push_back(
        std::pow(static_cast<double>(params.theta), -2.0 * static_cast<double>(i) / static_cast<double>(rotary_dims)));
    mix_.push_back(ops::rope_yarn_mix(params, g, i));
  }
}

void RopeAngles::cos_sin(int64_t position, float* out) const {
  const double pos = static_cast<double>(position);
  const double magnitude = static_cast<double>(params_.attn_factor);
  for (size_t i = 0; i < freq_.size(); ++i) {
    double extrap = pos * freq_[i];
    if (freq_factors_ != nullptr) extrap /= static_cast<double>(freq_factors_[i]);
    double angle = static_cast<double>(params_.freq_scale) * extrap;
    const double mix = mix_[i];
    if (mix != 0.0) angle = angle * (1.0 - mix) + extrap * mix;
    out[2 * i] = static_cast<float>(std::cos(angle) * magnitude);
    out[2 * i + 1] = static_cast<float>(std::sin(angle) * magnitude);
  }
}

std::vector<double> RopeAngles::key() const {
  std::vector<double> key = {static_cast<double>(params_.freq_scale), static_cast<double>(params_.attn_factor),
                             static_cast<double>(freq_.size()), freq_factors_ != nullptr ? 1.0 : 0.0};
  key.insert(key.end(), freq_.begin(), freq_.end());
  key.insert(key.end(), mix_.begin(), mix_.end());
  if (freq_factors_ != nullptr) key.insert(key.end(), freq_factors_, freq_factors_ + freq_.size());
  return key;
}

namespace {

// Note [RoPE tables]: the published tables, most recently used last.
struct RopeTable {
  std::vector<double> key;
  std::shared_ptr<const std::vector<float>> rows;
  int64_t positions = 0;
};
constexpr size_t kRopeTables = 8;
std::mutex rope_tables_mutex;
std::vector<RopeTable>& rope_tables() {
  static std::vector<RopeTable> tables;
  return tables;
}

}  // namespace

std::shared_ptr<const std::vector<float>> RopeAngles::table(int64_t end) const {
  const auto width = static_cast<int64_t>(2 * freq_.size());
  std::vector<double> k = key();
  std::lock_guard lock(rope_tables_mutex);
  std::vector<RopeTable>& tables = rope_tables();
  auto it = std::find_if(tables.begin(), tables.end(), [&](const RopeTable& t) { return t.key == k; });
  RopeTable entry;
  if (it != tables.end()) {
    entry = std::move(*it);
    tables.erase(it);
  }
  if (entry.positions < end) {
    const int64_t positions = std::min(kRopeTablePositions, std::max({end, 2 * entry.positions, int64_t{64}}));
    auto rows = std::make_shared<std::vector<float>>(static_cast<size_t>(positions * width));
    if (entry.rows != nullptr) std::copy(entry.rows->begin(), entry.rows->end(), rows->begin());
    for (int64_t p = entry.positions; p < positions; ++p) cos_sin(p, rows->data() + p * width);
    entry = {std::move(k), std::move(rows), positions};
  }
  tables.push_back(entry);
  if (tables.size() > kRopeTables) tables.erase(tables.begin());
  return entry.rows;
}

void rope_head(const float* x, float* y, int64_t head_dim, int64_t rotary_dims, const float* cos_sin, RopeMode mode) {
  const int64_t half = rotary_dims / 2;
  // (i0, i1) is the pair rotated by angle i.
  const int64_t pair_gap = mode == RopeMode::kNeox ? half : 1;
  for (int64_t i = 0; i < half; ++i) {
    const int64_t i0 = mode == RopeMode::kNeox ? i : 2 * i;
    const int64_t i1 = i0 + pair_gap;
    const float c = cos_sin[2 * i];
    const float s = cos_sin[2 * i + 1];
    const float x0 = x[i0];
    const float x1 = x[i1];
    y[i0] = x0 * c - x1 * s;
    y[i1] = x0 * s + x1 * c;
  }
  if (y != x && rotary_dims < head_dim) {
    std::memcpy(y + rotary_dims, x + rotary_dims, static_cast<size_t>(head_dim - rotary_dims) * sizeof(float));
  }
}

// ---- Kernels ----------------------------------------------------------------------------------------------------

namespace {

// Elements per chunk; a chunk covers whole rows, at least one.
constexpr int64_t kRowGrainElements = 16384;
// Columns per chunk of a strided (inner > 1) softmax.
constexpr int64_t kSoftmaxColumnBlock = 256;

int64_t rows_per_chunk(const ops::Tiling& tiling, int64_t row_elements) {
  return std::max<int64_t>(
      1, tiling_grain(tiling, "grain_elements", kRowGrainElements) / std::max<int64_t>(row_elements, 1));
}

Status compute_softmax(const ops::CpuComputeContext& ctx) {
  const ops::TensorRef& x = ctx.input(0);
  const ops::TensorRef& y = ctx.output(0);
  if (y.num_elements() == 0) return ok_status();
  HXRT_ASSIGN_OR_RETURN(const ops::SoftmaxGeometry g,
                        ops::softmax_geometry(x.shape, ctx.params<ops::AxisParams>().axis));
  const int64_t outer = g.outer;
  const int64_t axis_len = g.axis_len;
  const int64_t inner = g.inner;
  const float* px = x.data<const float>();
  float* py = y.data<float>();
  if (inner == 1) {
    ctx.pool().parallel_for(outer, rows_per_chunk(ctx.tiling(), axis_len), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) softmax_row(px + r * axis_len, py + r * axis_len, axis_len);
    });
    return ok_status();
  }
  // Units are (outer index, block of columns) pairs.
  const int64_t blocks = (inner + kSoftmaxColumnBlock - 1) / kSoftmaxColumnBlock;
  const int64_t unit_elements = axis_len * std::min(inner, kSoftmaxColumnBlock);
  ctx.pool().parallel_for(outer * blocks, rows_per_chunk(ctx.tiling(), unit_elements), [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      const int64_t o = u / blocks;
      const int64_t col = (u % blocks) * kSoftmaxColumnBlock;
      const int64_t offset = o * axis_len * inner + col;
      softmax_columns(px + offset, py + offset, axis_len, inner, std::min(kSoftmaxColumnBlock, inner - col));
    }
  });
  return ok_status();
}

Status compute_layer_norm(const ops::CpuComputeContext& ctx) {
  const auto& params = ctx.params<ops::LayerNormParams>();
  const ops::TensorRef& x = ctx.input(0);
  const ops::TensorRef& scale = ctx.input(1);
  const ops::TensorRef& y = ctx.output(0);
  if (y.num_elements() == 0) return ok_status();
  HXRT_ASSIGN_OR_RETURN(const ops::LayerNormGeometry g, ops::layer_norm_geometry(x.shape, params.axis));
  const int64_t n = g.d;
  const int64_t rows = g.rows;
  if (scale.num_elements() != n) {
    return invalid_argument("LayerNormalization: Scale {} has {} elements, the normalised dims of X {} have {}",
                            scale.shape, scale.num_elements(), x.shape, n);
  }
  const float* bias = nullptr;
  if (ctx.has_input(2)) {
    if (ctx.input(2).num_elements() != n) {
      return invalid_argument("LayerNormalization: B {} has {} elements, the normalised dims of X {} have {}",
                              ctx.input(2).shape, ctx.input(2).num_elements(), x.shape, n);
    }
    bias = ctx.input(2).data<const float>();
  }
  const float* px = x.data<const float>();
  const float* ps = scale.data<const float>();
  float* py = y.data<float>();
  ctx.pool().parallel_for(rows, rows_per_chunk(ctx.tiling(), n), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) layer_norm_row(px + r * n, ps, bias, py + r * n, n, params.epsilon);
  });
  // The optional outputs Mean and InvStdDev [rows] (X's shape with the normalised dims set to 1).
  const auto& outputs = ctx.launch().outputs;
  float* mean_out = outputs.size() > 1 && outputs[1].view.buffer != nullptr ? outputs[1].data<float>() : nullptr;
  float* inv_out = outputs.size() > 2 && outputs[2].view.buffer != nullptr ? outputs[2].data<float>() : nullptr;
  if (mean_out == nullptr && inv_out == nullptr) return ok_status();
  for (size_t i = 1; i < outputs.size(); ++i) {
    if (outputs[i].view.buffer != nullptr && outputs[i].num_elements() != rows) {
      return internal_error("LayerNormalization: output {} {} does not hold {} rows", i, outputs[i].shape, rows);
    }
  }
  ctx.pool().parallel_for(rows, rows_per_chunk(ctx.tiling(), n), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const double mean = sum_double(px + r * n, n) / static_cast<double>(n);
      const double var = sum_squares_double(px + r * n, n, mean) / static_cast<double>(n);
      if (mean_out != nullptr) mean_out[r] = static_cast<float>(mean);
      if (inv_out != nullptr) {
        inv_out[r] = static_cast<float>(1.0 / std::sqrt(var + static_cast<double>(params.epsilon)));
      }
    }
  });
  return ok_status();
}

// ---- LogSoftmax and Hardmax: one column [outer, axis_len, inner] at a time ----

// y = x - max - log(sum(exp(x - max))) along the column x[a * stride], a < len.
void log_softmax_column(const float* x, float* y, int64_t len, int64_t stride) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t a = 0; a < len; ++a) m = std::max(m, static_cast<double>(x[a * stride]));
  double sum = 0.0;
  for (int64_t a = 0; a < len; ++a) sum += std::exp(static_cast<double>(x[a * stride]) - m);
  const double shift = m + std::log(sum);
  for (int64_t a = 0; a < len; ++a) y[a * stride] = static_cast<float>(static_cast<double>(x[a * stride]) - shift);
}

// y = 1 at the first maximum of the column, 0 elsewhere.
void hardmax_column(const float* x, float* y, int64_t len, int64_t stride) {
  int64_t best = 0;
  for (int64_t a = 1; a < len; ++a) {
    if (x[a * stride] > x[best * stride]) best = a;
  }
  for (int64_t a = 0; a < len; ++a) y[a * stride] = a == best ? 1.0f : 0.0f;
}

using ColumnFn = void (*)(const float* x, float* y, int64_t len, int64_t stride);

Status compute_columns(const ops::CpuComputeContext& ctx, ColumnFn column) {
  const ops::TensorRef& x = ctx.input(0);
  const ops::TensorRef& y = ctx.output(0);
  if (y.num_elements() == 0) return ok_status();
  HXRT_ASSIGN_OR_RETURN(const ops::SoftmaxGeometry g,
                        ops::softmax_geometry(x.shape, ctx.params<ops::AxisParams>().axis));
  const float* px = x.data<const float>();
  float* py = y.data<float>();
  ctx.pool().parallel_for(g.outer * g.inner, rows_per_chunk(ctx.tiling(), g.axis_len), [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      const int64_t offset = (u / g.inner) * g.axis_len * g.inner + u % g.inner;
      column(px + offset, py + offset, g.axis_len, g.inner);
    }
  });
  return ok_status();
}

// ---- LRN ----

Status compute_lrn(const ops::CpuComputeContext& ctx) {
  const auto& params = ctx.params<ops::LrnParams>();
  const ops::TensorRef& x = ctx.input(0);
  const ops::TensorRef& y = ctx.output(0);
  if (x.shape.rank() < 3) return invalid_argument("LRN: X {} must have rank >= 3 (N, C, ...)", x.shape);
  if (y.num_elements() == 0) return ok_status();
  const int64_t channels = x.shape.dim(1);
  const int64_t inner = ops::dims_product(x.shape, 2, x.shape.rank());
  const int64_t before = (params.size - 1) / 2;  // window [c - before, c + after]
  const int64_t after = params.size / 2;
  const double scale = static_cast<double>(params.alpha) / static_cast<double>(params.size);
  const float* px = x.data<const float>();
  float* py = y.data<float>();
  // Units are (n, c) planes of `inner` elements.
  ctx.pool().parallel_for(
      x.shape.dim(0) * channels, rows_per_chunk(ctx.tiling(), inner * params.size), [&](int64_t begin, int64_t end) {
        for (int64_t u = begin; u < end; ++u) {
          const int64_t n = u / channels;
          const int64_t c = u % channels;
          const int64_t lo = std::max<int64_t>(0, c - before);
          const int64_t hi = std::min<int64_t>(channels - 1, c + after);
          for (int64_t i = 0; i < inner; ++i) {
            double square_sum = 0.0;
            for (int64_t k = lo; k <= hi; ++k) {
              const double v = px[(n * channels + k) * inner + i];
              square_sum += v * v;
            }
            const int64_t at = u * inner + i;
            const double denominator =
                std::pow(static_cast<double>(params.bias) + scale * square_sum, static_cast<double>(params.beta));
            py[at] = static_cast<float>(static_cast<double>(px[at]) / denominator);
          }
        }
      });
  return ok_status();
}

// ---- MeanVarianceNormalization ----

Status compute_mvn(const ops::CpuComputeContext& ctx) {
  const auto& g = ctx.tiling().geometry_as<ops::ReduceGeometry>();
  const ops::TensorRef& x = ctx.input(0);
  const ops::TensorRef& y = ctx.output(0);
  if (y.num_elements() == 0 || g.reduced == 0) return ok_status();
  const float* px = x.data<const float>();
  float* py = y.data<float>();
  const auto count = static_cast<double>(g.reduced);
  ctx.pool().parallel_for(g.outputs, rows_per_chunk(ctx.tiling(), g.reduced), [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      const int64_t base = g.kept_offset(o);
      double sum = 0.0;
      g.for_each_reduced(base, [&](int64_t off) { sum += static_cast<double>(px[off]); });
      const double mean = sum / count;
      double squares = 0.0;
      g.for_each_reduced(base, [&](int64_t off) {
        const double d = static_cast<double>(px[off]) - mean;
        squares += d * d;
      });
      const double inv = 1.0 / (std::sqrt(squares / count) + ops::kMvnEpsilon);
      g.for_each_reduced(
          base, [&](int64_t off) { py[off] = static_cast<float>((static_cast<double>(px[off]) - mean) * inv); });
    }
  });
  return ok_status();
}

Result<ops::Tiling> mvn_tiling(const ops::TilingQuery& q) {
  const auto& params = q.params_as<ops::MvnParams>();
  if (q.inputs.empty()) return invalid_argument("MeanVarianceNormalization: no input");
  const Shape& x = q.inputs[0].shape;
  HXRT_ASSIGN_OR_RETURN(const std::vector<bool> reduced,
                        ops::reduced_dims(params.axes, false, x.rank(), "MeanVarianceNormalization"));
  HXRT_ASSIGN_OR_RETURN(ops::ReduceGeometry g, ops::reduce_geometry(x, reduced, true));
  ops::Tiling tiling = chunk_tiling("grain_elements", kRowGrainElements, x.num_elements());
  tiling.geometry = std::make_shared<const ops::ReduceGeometry>(std::move(g));
  return tiling;
}

// ---- InstanceNormalization ----

Status compute_instance_norm(const ops::CpuComputeContext& ctx) {
  const ops::TensorRef& x = ctx.input(0);
  const ops::TensorRef& y = ctx.output(0);
  if (x.shape.rank() < 3) return invalid_argument("InstanceNormalization: input {} must have rank >= 3", x.shape);
  const int64_t channels = x.shape.dim(1);
  const int64_t n = ops::dims_product(x.shape, 2, x.shape.rank());
  for (size_t i = 1; i < 3; ++i) {
    if (ctx.input(i).num_elements() != channels) {
      return invalid_argument("InstanceNormalization: input {} {} does not hold the {} channels of {}", i,
                              ctx.input(i).shape, channels, x.shape);
    }
  }
  if (y.num_elements() == 0 || n == 0) return ok_status();
  const float eps = ctx.params<ops::EpsilonParams>().epsilon;
  const float* px = x.data<const float>();
  const float* scale = ctx.input(1).data<const float>();
  const float* bias = ctx.input(2).data<const float>();
  float* py = y.data<float>();
  ctx.pool().parallel_for(x.shape.dim(0) * channels, rows_per_chunk(ctx.tiling(), n), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t c = r % channels;
      const float* row = px + r * n;
      const double mean = sum_double(row, n) / static_cast<double>(n);
      const double var = sum_squares_double(row, n, mean) / static_cast<double>(n);
      const double a = static_cast<double>(scale[c]) / std::sqrt(var + static_cast<double>(eps));
      const double b = static_cast<double>(bias[c]) - a * mean;
      for (int64_t i = 0; i < n; ++i) py[r * n + i] = static_cast<float>(a * static_cast<double>(row[i]) + b);
    }
  });
  return ok_status();
}

Status compute_rms_norm(const ops::CpuComputeContext& ctx) {
  const ops::TensorRef& x = ctx.input(0);
  const ops::TensorRef& y = ctx.output(0);
  if (y.num_elements() == 0) return ok_status();
  if (x.shape.rank() == 0) return invalid_argument("RMSNorm: X must have rank >= 1");
  const int64_t n = x.shape.dim(-1);
  const int64_t rows = x.num_elements() / n;
  const float eps = ctx.params<ops::EpsilonParams>().epsilon;
  const float* px = x.data<const float>();
  float* py = y.data<float>();
  ctx.pool().parallel_for(rows, rows_per_chunk(ctx.tiling(), n), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) rms_norm_row(px + r * n, py + r * n, n, eps);
  });
  return ok_status();
}

Status compute_rope(const ops::CpuComputeContext& ctx) {
  const auto& params = ctx.params<ops::RopeParams>();
  const ops::TensorRef& x = ctx.input(0);
  const ops::TensorRef& positions = ctx.input(1);
  const ops::TensorRef& y = ctx.output(0);
  HXRT_ASSIGN_OR_RETURN(const ops::RopeGeometry g, ops::rope_geometry(params, x.shape, positions.shape));
  const int64_t n_tokens = g.n_tokens;
  const int64_t n_heads = g.n_heads;
  const int64_t head_dim = g.head_dim;
  const int64_t rotary_dims = g.rotary_dims;
  if (positions.dtype != DType::kI32 && positions.dtype != DType::kI64) {
    return invalid_argument("RoPE: positions must be i32 or i64, got {}", positions.dtype);
  }
  if (y.num_elements() == 0) return ok_status();
  const int64_t token_rows = x.num_elements() / (n_heads * head_dim);  // (outer * n_tokens)
  const int64_t row_elements = n_heads * head_dim;
  const float* px = x.data<const float>();
  float* py = y.data<float>();
  const void* pos_data = positions.data<const void>();
  const bool pos_i64 = positions.dtype == DType::kI64;
  const float* freq_factors = nullptr;
  if (ctx.has_input(2)) {
    HXRT_RETURN_IF_ERROR(ops::check_rope_freq_factors(g, ctx.input(2).dtype, ctx.input(2).shape));
    freq_factors = ctx.input(2).data<const float>();
  }
  const RopeAngles angles(params, g, freq_factors);
  const auto position_of = [&](int64_t t) {
    return pos_i64 ? static_cast<const int64_t*>(pos_data)[t]
                   : static_cast<int64_t>(static_cast<const int32_t*>(pos_data)[t]);
  };
  // The rows of the launch's positions from the shared table when they all lie in it (Note [RoPE tables]).
  int64_t lowest = std::numeric_limits<int64_t>::max();
  int64_t highest = std::numeric_limits<int64_t>::min();
  for (int64_t t = 0; t < n_tokens; ++t) {
    lowest = std::min(lowest, position_of(t));
    highest = std::max(highest, position_of(t));
  }
  const std::shared_ptr<const std::vector<float>> table =
      n_tokens > 0 && lowest >= 0 && highest < kRopeTablePositions ? angles.table(highest + 1) : nullptr;
  ctx.pool().parallel_for(token_rows, rows_per_chunk(ctx.tiling(), row_elements), [&](int64_t begin, int64_t end) {
    std::vector<float> cos_sin(static_cast<size_t>(std::max<int64_t>(rotary_dims, 2)));  // (rotary_dims/2, 2)
    int64_t cached_position = std::numeric_limits<int64_t>::min();
    const float* row = cos_sin.data();
    for (int64_t r = begin; r < end; ++r) {
      const int64_t pos = position_of(r % n_tokens);
      if (table != nullptr) {
        row = table->data() + pos * rotary_dims;
      } else if (pos != cached_position) {
        angles.cos_sin(pos, cos_sin.data());
        cached_position = pos;
      }
      for (int64_t h = 0; h < n_heads; ++h) {
        const int64_t offset = r * row_elements + h * head_dim;
        rope_head(px + offset, py + offset, head_dim, rotary_dims, row, params.mode);
      }
    }
  });
  return ok_status();
}

// The grid counts chunks of about kRowGrainElements elements (whole rows).
ops::TilingFn row_tiling() {
  return [](const ops::TilingQuery& q) -> Result<ops::Tiling> {
    const int64_t elements = q.outputs.empty() ? 0 : q.outputs[0].num_elements();
    return chunk_tiling("grain_elements", kRowGrainElements, elements);
  };
}

ops::KernelDef make_def(std::string op_type, std::string domain, int since_version, size_t float_inputs,
                        std::string description) {
  ops::KernelDef def;
  def.op_type = std::move(op_type);
  def.domain = std::move(domain);
  def.since_version = since_version;
  def.input_dtypes.assign(float_inputs, std::vector<DType>{DType::kF32});
  def.name = fmt::format("{}F32", def.op_type);
  def.description = std::move(description);
  def.tiling = row_tiling();
  return def;
}

}  // namespace

Status register_normalization(ops::KernelRegistry& registry) {
  ops::KernelDef softmax = make_def("Softmax", "", 13, 1, "f32 numerically stable softmax over any axis");
  softmax.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_axis_params(node, -1));
  };
  softmax.launch = ops::cpu_launch(softmax.name, compute_softmax);
  HXRT_RETURN_IF_ERROR(registry.add(std::move(softmax)));

  ops::KernelDef layer_norm =
      make_def("LayerNormalization", "", 17, 3, "f32 layer norm over axis..end, mean/variance in double");
  layer_norm.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_layer_norm_params(node));
  };
  layer_norm.launch = ops::cpu_launch(layer_norm.name, compute_layer_norm);
  HXRT_RETURN_IF_ERROR(registry.add(std::move(layer_norm)));

  ops::KernelDef rms_norm =
      make_def("RMSNorm", "hxrt", 1, 1, "f32 RMS norm over the last axis, sum of squares in double");
  rms_norm.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_epsilon_params(node));
  };
  rms_norm.launch = ops::cpu_launch(rms_norm.name, compute_rms_norm);
  HXRT_RETURN_IF_ERROR(registry.add(std::move(rms_norm)));

  ops::KernelDef rope = make_def("RoPE", "hxrt", 1, 1,
                                 "f32 rotary embedding, normal or neox pairs, i32/i64 positions, frequency factors, "
                                 "linear and YaRN scaling");
  rope.input_dtypes.push_back({DType::kI32, DType::kI64});
  rope.input_dtypes.push_back({DType::kF32});
  rope.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_rope_params(node));
  };
  rope.launch = ops::cpu_launch(rope.name, compute_rope);
  HXRT_RETURN_IF_ERROR(registry.add(std::move(rope)));

  for (const bool log : {true, false}) {
    ops::KernelDef def = make_def(
        log ? "LogSoftmax" : "Hardmax", "", 13, 1,
        log ? "f32 log-softmax along any axis, sums in double" : "f32 one-hot of the first maximum along any axis");
    def.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
      return ops::boxed(ops::parse_axis_params(node, -1));
    };
    def.launch = ops::cpu_launch(def.name, [log](const ops::CpuComputeContext& ctx) {
      return compute_columns(ctx, log ? log_softmax_column : hardmax_column);
    });
    HXRT_RETURN_IF_ERROR(registry.add(std::move(def)));
  }

  ops::KernelDef lrn = make_def("LRN", "", 13, 1, "f32 local response normalisation across channels, in double");
  lrn.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_lrn_params(node));
  };
  lrn.launch = ops::cpu_launch(lrn.name, compute_lrn);
  HXRT_RETURN_IF_ERROR(registry.add(std::move(lrn)));

  ops::KernelDef mvn = make_def("MeanVarianceNormalization", "", 13, 1,
                                "f32 normalisation over any axes by offset lists, mean and variance in double");
  mvn.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_mvn_params(node));
  };
  mvn.tiling = mvn_tiling;
  mvn.launch = ops::cpu_launch(mvn.name, compute_mvn);
  HXRT_RETURN_IF_ERROR(registry.add(std::move(mvn)));

  ops::KernelDef instance_norm = make_def("InstanceNormalization", "", 6, 3,
                                          "f32 normalisation of each (n, c) plane, mean and variance in double");
  instance_norm.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_epsilon_params(node));
  };
  instance_norm.launch = ops::cpu_launch(instance_norm.name, compute_instance_norm);
  HXRT_RETURN_IF_ERROR(registry.add(std::move(instance_norm)));
  return ok_status();
}

}  // namespace hxrt::kernels::cpu
