// CPU kernels of the pooling and resampling ops (docs/onnx_ops/pool.md): AveragePool MaxPool GlobalAveragePool
// GlobalMaxPool MaxUnpool Resize GridSample RoiAlign. ConvTranspose is in conv.cc.

#include "kernels/cpu/pool.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>

#include <fmt/ranges.h>

#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/registration.h"

namespace hxrt::kernels::cpu {

namespace {

// Elements of work per parallel chunk.
constexpr int64_t kGrainElements = 16384;

int64_t grain_for(int64_t work_per_item) {
  return std::max<int64_t>(1, kGrainElements / std::max<int64_t>(1, work_per_item));
}

// Note [Row max pool]: a 2-D max pool without indices (what CNNs use) runs output row by output row: the rows of
// the window that lie inside the input are known per output row, and the columns whose whole window lies inside it
// (all but a few at the edges) take the window's taps without bounds checks — eight outputs at a time when the
// stride is 1 and the CPU has AVX2. Each output still takes its taps in the generic order (kh, then kw), starting
// from the first one and replacing the running maximum only by a greater value, so a NaN is kept or skipped exactly
// as pool_nd's loop keeps or skips it; the edge columns run that loop's arithmetic. PP-OCRv6 det's 2x2 pool of a
// 16x48x64 map took 550 us per output element by element.
// y[ow] for ow in [ow_begin, ow_end): the window's taps at columns ow·stride + first_col + k·dilation of each row.
void max_row(const float* const* rows, int n_rows, int64_t kw, int64_t dilation, int64_t stride, int64_t ow_begin,
             int64_t ow_end, int64_t first_col, float* y) {
  for (int64_t ow = ow_begin; ow < ow_end; ++ow) {
    const int64_t c = ow * stride + first_col;
    float best = rows[0][c];
    for (int r = 0; r < n_rows; ++r) {
      for (int64_t k = r == 0 ? 1 : 0; k < kw; ++k) {
        const float v = rows[r][c + k * dilation];
        if (v > best) best = v;
      }
    }
    y[ow] = best;
  }
}

// max_row at stride 1, eight outputs at a time.
__attribute__((target("avx2"))) void max_row_avx2(const float* const* rows, int n_rows, int64_t kw, int64_t dilation,
                                                  int64_t ow_begin, int64_t ow_end, int64_t first_col, float* y) {
  int64_t ow = ow_begin;
  for (; ow + 8 <= ow_end; ow += 8) {
    const int64_t c = ow + first_col;
    __m256 best = _mm256_loadu_ps(rows[0] + c);
    for (int r = 0; r < n_rows; ++r) {
      for (int64_t k = r == 0 ? 1 : 0; k < kw; ++k) {
        const __m256 v = _mm256_loadu_ps(rows[r] + c + k * dilation);
        best = _mm256_blendv_ps(best, v, _mm256_cmp_ps(v, best, _CMP_GT_OQ));
      }
    }
    _mm256_storeu_ps(y + ow, best);
  }
  max_row(rows, n_rows, kw, dilation, 1, ow, ow_end, first_col, y);
}

bool row_max_pool_applies(const ops::PoolGeometry& g) {
  return g.in[0] == 1 && g.out[0] == 1 && g.kernel[0] == 1 && g.kernel[1] <= 64;
}

void max_pool_2d_rows(const ops::PoolGeometry& g, const float* x, float* y, ThreadPool* pool) {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  const int64_t in_h = g.in[1], in_w = g.in[2], out_h = g.out[1], out_w = g.out[2];
  const int64_t kh = g.kernel[1], kw = g.kernel[2];
  const int64_t sh = g.stride[1], sw = g.stride[2], dh = g.dilation[1], dw = g.dilation[2];
  const int64_t ph = g.pad_begin[1], pw = g.pad_begin[2];
  // Output columns whose whole window is inside the input: ow·sw - pw >= 0 and ow·sw - pw + (kw - 1)·dw < in_w.
  const int64_t lo = std::min(out_w, (pw + sw - 1) / sw);
  const int64_t last = in_w - 1 - (kw - 1) * dw + pw;  // the largest ow·sw allowed
  const int64_t hi = std::clamp<int64_t>(last < 0 ? 0 : last / sw + 1, lo, out_w);
  const auto one_output = [&](const float* xp, int64_t oh, int64_t ow) {
    float best = -std::numeric_limits<float>::infinity();
    bool found = false;
    for (int64_t a = 0; a < kh; ++a) {
      const int64_t ih = oh * sh - ph + a * dh;
      if (ih < 0 || ih >= in_h) continue;
      for (int64_t b = 0; b < kw; ++b) {
        const int64_t iw = ow * sw - pw + b * dw;
        if (iw < 0 || iw >= in_w) continue;
        const float v = xp[ih * in_w + iw];
        if (v > best || !found) {
          best = v;
          found = true;
        }
      }
    }
    return best;
  };
  run_chunks(pool, g.planes * out_h, grain_for(out_w * kh * kw), [&](int64_t begin, int64_t end) {
    const float* rows[64];
    for (int64_t task = begin; task < end; ++task) {
      const int64_t plane = task / out_h, oh = task % out_h;
      const float* xp = x + plane * in_h * in_w;
      float* yr = y + plane * out_h * out_w + oh * out_w;
      int n_rows = 0;
      for (int64_t a = 0; a < kh; ++a) {
        const int64_t ih = oh * sh - ph + a * dh;
        if (ih >= 0 && ih < in_h) rows[n_rows++] = xp + ih * in_w;
      }
      for (int64_t ow = 0; ow < lo; ++ow) yr[ow] = one_output(xp, oh, ow);
      for (int64_t ow = hi; ow < out_w; ++ow) yr[ow] = one_output(xp, oh, ow);
      if (n_rows == 0) {
        std::fill(yr + lo, yr + hi, -std::numeric_limits<float>::infinity());
      } else if (sw == 1 && avx2) {
        max_row_avx2(rows, n_rows, kw, dw, lo, hi, -pw, yr);
      } else {
        max_row(rows, n_rows, kw, dw, sw, lo, hi, -pw, yr);
      }
    }
  });
}

}  // namespace

template <typename T>
void pool_nd(const ops::PoolGeometry& g, bool max, bool count_include_pad, int64_t storage_order, const T* x, T* y,
             int64_t* indices, ThreadPool* pool) {
  constexpr T kLowest =
      std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
  const int64_t in_plane = g.in[0] * g.in[1] * g.in[2];
  const int64_t out_plane = g.out[0] * g.out[1] * g.out[2];
  const int64_t window = g.kernel[0] * g.kernel[1] * g.kernel[2];
  if constexpr (std::is_same_v<T, float>) {
    if (max && indices == nullptr && row_max_pool_applies(g)) {
      max_pool_2d_rows(g, x, y, pool);  // Note [Row max pool]
      return;
    }
  }
  auto body = [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      const T* xp = x + plane * in_plane;
      T* yp = y + plane * out_plane;
      int64_t* ip = indices != nullptr ? indices + plane * out_plane : nullptr;
      int64_t o = 0;
      for (int64_t od = 0; od < g.out[0]; ++od) {
        for (int64_t oh = 0; oh < g.out[1]; ++oh) {
          for (int64_t ow = 0; ow < g.out[2]; ++ow, ++o) {
            const std::array<int64_t, 3> start = {od * g.stride[0] - g.pad_begin[0], oh * g.stride[1] - g.pad_begin[1],
                                                  ow * g.stride[2] - g.pad_begin[2]};
            double sum = 0.0;
            int64_t count = 0;   // positions inside the input
            int64_t padded = 1;  // positions inside the input and the explicit pads (count_include_pad)
            T best = kLowest;
            int64_t best_index = -1;
            if (!max && count_include_pad) {
              for (size_t a = 0; a < 3; ++a) {
                int64_t n = 0;
                for (int64_t k = 0; k < g.kernel[a]; ++k) {
                  const int64_t pos = start[a] + k * g.dilation[a];
                  n += pos < g.in[a] + g.pad_end[a] ? 1 : 0;
                }
                padded *= n;
              }
            }
            for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
              const int64_t id = start[0] + kd * g.dilation[0];
              if (id < 0 || id >= g.in[0]) continue;
              for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
                const int64_t ih = start[1] + kh * g.dilation[1];
                if (ih < 0 || ih >= g.in[1]) continue;
                for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
                  const int64_t iw = start[2] + kw * g.dilation[2];
                  if (iw < 0 || iw >= g.in[2]) continue;
                  const T v = xp[(id * g.in[1] + ih) * g.in[2] + iw];
                  if (max) {
                    if (v > best || best_index < 0) {
                      best = v;
                      best_index = storage_order == 0 ? (id * g.in[1] + ih) * g.in[2] + iw
                                                      : id + ih * g.in[0] + iw * g.in[0] * g.in[1];
                    }
                  } else {
                    sum += static_cast<double>(v);
                    ++count;
                  }
                }
              }
            }
            if (max) {
              yp[o] = best;
              if (ip != nullptr) ip[o] = best_index < 0 ? -1 : plane * in_plane + best_index;
            } else {
              const int64_t divisor = count_include_pad ? padded : count;
              yp[o] = static_cast<T>(divisor > 0 ? sum / static_cast<double>(divisor) : 0.0);
            }
          }
        }
      }
    }
  };
  run_chunks(pool, g.planes, grain_for(out_plane * window), body);
}

template void pool_nd<float>(const ops::PoolGeometry&, bool, bool, int64_t, const float*, float*, int64_t*,
                             ThreadPool*);
template void pool_nd<int8_t>(const ops::PoolGeometry&, bool, bool, int64_t, const int8_t*, int8_t*, int64_t*,
                              ThreadPool*);
template void pool_nd<uint8_t>(const ops::PoolGeometry&, bool, bool, int64_t, const uint8_t*, uint8_t*, int64_t*,
                               ThreadPool*);

// ---------------------------------------------------------------------------------------------------------------
// Resize

namespace {

// ONNX's cubic convolution weights of the taps at offsets -1, 0, 1, 2 from floor(x), for ratio = x - floor(x).
std::array<double, 4> cubic_weights(double ratio, double a) {
  auto near = [a](double t) { return ((a + 2) * t - (a + 3)) * t * t + 1; };       // |t| <= 1
  auto far = [a](double t) { return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a; };  // 1 < |t| < 2
  return {far(ratio + 1), near(ratio), near(1 - ratio), far(2 - ratio)};
}

}  // namespace

ResizeAxis resize_axis(const ops::ResizeParams& params, int64_t in, int64_t out, double scale, size_t axis, size_t rank,
                       std::span<const double> roi) {
  using Mode = ops::ResizeParams::Mode;
  ResizeAxis r;
  r.width = params.mode == Mode::kNearest ? 1 : params.mode == Mode::kLinear ? 2 : 4;
  const size_t width = static_cast<size_t>(r.width);
  r.index.assign(static_cast<size_t>(out) * width, 0);
  r.weight.assign(static_cast<size_t>(out) * width, 0.0);
  r.outside.assign(static_cast<size_t>(out), 0);
  const std::string& transform = params.coordinate_transformation_mode;
  const double in_d = static_cast<double>(in);
  const double out_width = scale * in_d;  // as ONNX's reference: not rounded to the output extent
  for (int64_t o = 0; o < out; ++o) {
    const double x = static_cast<double>(o);
    double src = 0.0;
    if (transform == "align_corners") {
      src = out_width == 1.0 ? 0.0 : x * (in_d - 1) / (out_width - 1);
    } else if (transform == "asymmetric") {
      src = x / scale;
    } else if (transform == "tf_crop_and_resize") {
      const double start = roi.size() == 2 * rank ? roi[axis] : 0.0;
      const double end = roi.size() == 2 * rank ? roi[axis + rank] : 1.0;
      src = out_width == 1.0 ? (end - start) * (in_d - 1) / 2 : x * (end - start) * (in_d - 1) / (out_width - 1);
      src += start * (in_d - 1);
      if (src < 0 || src > in_d - 1) {
        r.outside[static_cast<size_t>(o)] = 1;
        continue;
      }
    } else if (transform == "tf_half_pixel_for_nn") {
      src = (x + 0.5) / scale;
    } else if (transform == "pytorch_half_pixel") {
      src = out_width == 1.0 ? -0.5 : (x + 0.5) / scale - 0.5;
    } else {  // half_pixel
      src = (x + 0.5) / scale - 0.5;
    }
    const double base = std::floor(src);
    const double ratio = src - base;
    const int64_t f = static_cast<int64_t>(base);
    int64_t* idx = r.index.data() + static_cast<size_t>(o) * width;
    double* w = r.weight.data() + static_cast<size_t>(o) * width;
    if (params.mode == Mode::kNearest) {
      bool up = false;
      if (ratio != 0.0) {
        const std::string& nearest = params.nearest_mode;
        up = nearest == "ceil" || (nearest == "round_prefer_floor" && ratio > 0.5) ||
             (nearest == "round_prefer_ceil" && ratio >= 0.5);
      }
      idx[0] = f + (up ? 1 : 0);
      w[0] = 1.0;
    } else if (params.mode == Mode::kLinear) {
      idx[0] = f;
      idx[1] = f + 1;
      w[0] = 1.0 - ratio;
      w[1] = ratio;
    } else {
      const std::array<double, 4> c = cubic_weights(ratio, params.cubic_coeff_a);
      for (size_t t = 0; t < 4; ++t) {
        idx[t] = f - 1 + static_cast<int64_t>(t);
        w[t] = c[t];
      }
    }
    if (params.exclude_outside && r.width > 1) {
      double total = 0.0;
      for (size_t t = 0; t < width; ++t) {
        if (idx[t] < 0 || idx[t] >= in) w[t] = 0.0;
        total += w[t];
      }
      if (total != 0.0) {
        for (size_t t = 0; t < width; ++t) w[t] /= total;
      }
    }
    for (size_t t = 0; t < width; ++t) idx[t] = std::clamp<int64_t>(idx[t], 0, std::max<int64_t>(0, in - 1));
  }
  return r;
}

void resize_nd(const Shape& in, const Shape& out, std::span<const ResizeAxis> axes, float extrapolation_value,
               const float* x, float* y, ThreadPool* pool) {
  const int rank = in.rank();
  const size_t ru = static_cast<size_t>(rank);
  const std::array<int64_t, Shape::kMaxRank> in_strides = in.strides();
  int64_t taps_per_output = 1;
  for (const ResizeAxis& a : axes) taps_per_output *= a.width;
  // Note [Nearest resize]: when every axis takes one tap of weight 1 inside the input (mode nearest, the FPN
  // upsampling of detection models) an output is a copy of one input value, so rows are gathered through the last
  // axis' indices instead of the odometer over taps per output (a 2x upsampling of 64x12x16 took 390 us).
  const bool nearest = rank > 0 && std::all_of(axes.begin(), axes.end(), [](const ResizeAxis& a) {
    return a.width == 1 && std::all_of(a.weight.begin(), a.weight.end(), [](double w) { return w == 1.0; }) &&
           std::none_of(a.outside.begin(), a.outside.end(), [](uint8_t o) { return o != 0; });
  });
  if (nearest) {
    const int64_t cols = out.dim(rank - 1);
    const int64_t rows = cols == 0 ? 0 : out.num_elements() / cols;
    const int64_t* last = axes[ru - 1].index.data();
    run_chunks(pool, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, cols)), [&](int64_t begin, int64_t end) {
      std::array<int64_t, Shape::kMaxRank> pos{};
      int64_t rest = begin;
      for (int d = rank - 2; d >= 0; --d) {
        pos[static_cast<size_t>(d)] = rest % out.dim(d);
        rest /= out.dim(d);
      }
      for (int64_t r = begin; r < end; ++r) {
        int64_t base = 0;
        for (size_t d = 0; d + 1 < ru; ++d) base += axes[d].index[static_cast<size_t>(pos[d])] * in_strides[d];
        const float* xr = x + base;
        float* yr = y + r * cols;
        for (int64_t j = 0; j < cols; ++j) yr[j] = xr[last[j] * in_strides[ru - 1]];
        for (int d = rank - 2; d >= 0; --d) {
          if (++pos[static_cast<size_t>(d)] < out.dim(d)) break;
          pos[static_cast<size_t>(d)] = 0;
        }
      }
    });
    return;
  }
  auto body = [&](int64_t begin, int64_t end) {
    std::array<int64_t, Shape::kMaxRank> pos{};
    int64_t rest = begin;
    for (int d = rank - 1; d >= 0; --d) {
      pos[static_cast<size_t>(d)] = rest % out.dim(d);
      rest /= out.dim(d);
    }
    std::array<int, Shape::kMaxRank> tap{};
    for (int64_t o = begin; o < end; ++o) {
      bool outside = false;
      for (size_t d = 0; d < ru; ++d) outside = outside || axes[d].outside[static_cast<size_t>(pos[d])] != 0;
      if (outside) {
        y[o] = extrapolation_value;
      } else {
        // Sum over every combination of the axes' taps (an odometer over tap[]), skipping zero weights.
        double sum = 0.0;
        tap.fill(0);
        while (true) {
          double weight = 1.0;
          int64_t offset = 0;
          for (size_t d = 0; d < ru; ++d) {
            const size_t k =
                static_cast<size_t>(pos[d]) * static_cast<size_t>(axes[d].width) + static_cast<size_t>(tap[d]);
            weight *= axes[d].weight[k];
            offset += axes[d].index[k] * in_strides[d];
          }
          if (weight != 0.0) sum += weight * static_cast<double>(x[offset]);
          int d = rank - 1;
          while (d >= 0 && ++tap[static_cast<size_t>(d)] == axes[static_cast<size_t>(d)].width) {
            tap[static_cast<size_t>(d)] = 0;
            --d;
          }
          if (d < 0) break;
        }
        y[o] = static_cast<float>(sum);
      }
      for (int d = rank - 1; d >= 0; --d) {
        if (++pos[static_cast<size_t>(d)] < out.dim(d)) break;
        pos[static_cast<size_t>(d)] = 0;
      }
    }
  };
  run_chunks(pool, out.num_elements(), grain_for(taps_per_output * rank), body);
}

// ---------------------------------------------------------------------------------------------------------------
// Kernels

namespace {

Status check_f32(const ops::TensorRef& t, std::string_view op, std::string_view name) {
  if (t.dtype != DType::kF32) return invalid_argument("{} input '{}' must be f32, got {}", op, name, t.dtype);
  return ok_status();
}

Status check_output(const ops::TensorRef& y, DType dtype, const Shape& expected, std::string_view op) {
  if (y.dtype != dtype || !(y.shape == expected)) {
    return invalid_argument("{} output is {} {}, expected {} {}", op, y.dtype, y.shape, dtype, expected);
  }
  return ok_status();
}

// Reads a 1-D f32/i64 input as doubles (an omitted input reads as empty).
std::vector<double> read_doubles(const ops::CpuComputeContext& ctx, size_t i) {
  std::vector<double> values;
  if (!ctx.has_input(i)) return values;
  const ops::TensorRef& t = ctx.input(i);
  const int64_t n = t.num_elements();
  values.reserve(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    values.push_back(t.dtype == DType::kI64 ? static_cast<double>(t.data<int64_t>()[k])
                                            : static_cast<double>(t.data<float>()[k]));
  }
  return values;
}

Result<ops::Tiling> pool_tiling(const ops::TilingQuery& query) {
  if (query.inputs.empty()) return invalid_argument("pool tiling needs X");
  HXRT_ASSIGN_OR_RETURN(ops::PoolGeometry g,
                        ops::pool_geometry(query.params_as<ops::PoolParams>(), query.inputs[0].shape));
  ops::Tiling tiling;
  tiling.values = {{"planes", g.planes}};
  tiling.geometry = std::make_shared<ops::PoolGeometry>(std::move(g));
  return tiling;
}

template <typename T>
void run_pool(const ops::CpuComputeContext& ctx, bool max, int64_t* indices) {
  const auto& params = ctx.params<ops::PoolParams>();
  pool_nd(ctx.tiling().geometry_as<ops::PoolGeometry>(), max, params.count_include_pad, params.storage_order,
          ctx.input(0).data<T>(), ctx.output(0).data<T>(), indices, &ctx.pool());
}

Status compute_pool(const ops::CpuComputeContext& ctx, bool max) {
  const std::string_view op = max ? "MaxPool" : "AveragePool";
  const ops::PoolGeometry& g = ctx.tiling().geometry_as<ops::PoolGeometry>();
  const DType dtype = ctx.input(0).dtype;
  if (dtype != DType::kF32 && !(max && (dtype == DType::kI8 || dtype == DType::kU8))) {
    return invalid_argument("{} input 'X' must be f32{}, got {}", op, max ? ", i8 or u8" : "", dtype);
  }
  HXRT_RETURN_IF_ERROR(check_output(ctx.output(0), dtype, g.output_shape, op));
  int64_t* indices = nullptr;
  if (max && ctx.launch().outputs.size() > 1) {
    HXRT_RETURN_IF_ERROR(check_output(ctx.output(1), DType::kI64, g.output_shape, op));
    indices = ctx.output(1).data<int64_t>();
  }
  if (dtype == DType::kI8) {
    run_pool<int8_t>(ctx, max, indices);
  } else if (dtype == DType::kU8) {
    run_pool<uint8_t>(ctx, max, indices);
  } else {
    run_pool<float>(ctx, max, indices);
  }
  return ok_status();
}

Status compute_global_pool(const ops::CpuComputeContext& ctx, bool max) {
  const std::string_view op = max ? "GlobalMaxPool" : "GlobalAveragePool";
  const ops::TensorRef& x = ctx.input(0);
  HXRT_RETURN_IF_ERROR(check_f32(x, op, "X"));
  if (x.shape.rank() < 3) return invalid_argument("{} X {} must have rank >= 3", op, x.shape);
  std::vector<int64_t> out_dims(static_cast<size_t>(x.shape.rank()), 1);
  out_dims[0] = x.shape.dim(0);
  out_dims[1] = x.shape.dim(1);
  HXRT_ASSIGN_OR_RETURN(const Shape out, Shape::make(out_dims));
  HXRT_RETURN_IF_ERROR(check_output(ctx.output(0), DType::kF32, out, op));
  const int64_t planes = x.shape.dim(0) * x.shape.dim(1);
  const int64_t inner = ops::dims_product(x.shape, 2, x.shape.rank());
  const float* xp = x.data<float>();
  float* yp = ctx.output(0).data<float>();
  run_chunks(&ctx.pool(), planes, grain_for(inner), [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      const float* row = xp + p * inner;
      if (max) {
        float best = -std::numeric_limits<float>::infinity();
        for (int64_t i = 0; i < inner; ++i) best = std::max(best, row[i]);
        yp[p] = best;
      } else {
        double sum = 0.0;
        for (int64_t i = 0; i < inner; ++i) sum += row[i];
        yp[p] = inner > 0 ? static_cast<float>(sum / static_cast<double>(inner)) : 0.0f;
      }
    }
  });
  return ok_status();
}

// The indices address the unpooled shape [N, C, (in - 1) · stride + kernel - pads ...]; an output_shape that is
// larger (ONNX's tests: 4x4 indices into a 5x5 output) keeps their multi-index, the extra positions staying zero.
Status compute_max_unpool(const ops::CpuComputeContext& ctx) {
  const auto& params = ctx.params<ops::PoolParams>();
  const ops::TensorRef& x = ctx.input(0);
  const ops::TensorRef& indices = ctx.input(1);
  const ops::TensorRef& y = ctx.output(0);
  HXRT_RETURN_IF_ERROR(check_f32(x, "MaxUnpool", "X"));
  if (indices.dtype != DType::kI64 || indices.num_elements() != x.num_elements()) {
    return invalid_argument("MaxUnpool input 'I' {} {} must be i64 with as many elements as X {}", indices.dtype,
                            indices.shape, x.shape);
  }
  const size_t k = params.kernel_shape.size();
  if (y.dtype != DType::kF32 || y.shape.rank() != x.shape.rank() || static_cast<size_t>(x.shape.rank()) != k + 2) {
    return invalid_argument("MaxUnpool output is {} {} for X {} and a {}-D kernel", y.dtype, y.shape, x.shape, k);
  }
  std::vector<int64_t> unpooled = {x.shape.dim(0), x.shape.dim(1)};
  for (size_t i = 0; i < k; ++i) {
    unpooled.push_back((x.shape.dim(static_cast<int>(i) + 2) - 1) * params.strides[i] + params.kernel_shape[i] -
                       params.pads[i] - params.pads[i + k]);
  }
  int64_t unpooled_total = 1;
  for (int64_t d : unpooled) {
    if (d < 1)
      return invalid_argument("MaxUnpool unpooled shape [{}] of X {} is empty", fmt::join(unpooled, ", "), x.shape);
    unpooled_total *= d;
  }
  const int rank = y.shape.rank();
  const std::array<int64_t, Shape::kMaxRank> y_strides = y.shape.strides();
  const int64_t total = y.num_elements();
  float* yp = y.data<float>();
  std::fill(yp, yp + total, 0.0f);
  const float* xp = x.data<float>();
  const int64_t* ip = indices.data<int64_t>();
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    if (ip[i] < 0 || ip[i] >= unpooled_total) {
      return invalid_argument("MaxUnpool index {} (element {} of 'I') is outside the unpooled shape [{}]", ip[i], i,
                              fmt::join(unpooled, ", "));
    }
    int64_t rest = ip[i];
    int64_t offset = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t extent = unpooled[static_cast<size_t>(d)];
      const int64_t coord = rest % extent;
      rest /= extent;
      if (coord >= y.shape.dim(d)) {
        return invalid_argument("MaxUnpool index {} (element {} of 'I') falls outside the output {}", ip[i], i,
                                y.shape);
      }
      offset += coord * y_strides[static_cast<size_t>(d)];
    }
    yp[offset] = xp[i];
  }
  return ok_status();
}

Status compute_resize(const ops::CpuComputeContext& ctx) {
  const auto& params = ctx.params<ops::ResizeParams>();
  const ops::TensorRef& x = ctx.input(0);
  HXRT_RETURN_IF_ERROR(check_f32(x, "Resize", "X"));
  const std::vector<double> roi = read_doubles(ctx, 1);
  const std::vector<double> scales = read_doubles(ctx, 2);
  const std::vector<double> size_values = read_doubles(ctx, 3);
  std::vector<int64_t> sizes;
  for (double v : size_values) sizes.push_back(static_cast<int64_t>(v));
  HXRT_ASSIGN_OR_RETURN(const ops::ResizeShape shape, ops::resize_shape(x.shape, scales, sizes));
  HXRT_RETURN_IF_ERROR(check_output(ctx.output(0), DType::kF32, shape.output, "Resize"));
  if (x.num_elements() == 0 && shape.output.num_elements() != 0) {
    return invalid_argument("Resize of the empty X {} to {}: nothing to sample", x.shape, shape.output);
  }
  const size_t rank = static_cast<size_t>(x.shape.rank());
  if (params.coordinate_transformation_mode == "tf_crop_and_resize" && roi.size() != 2 * rank) {
    return invalid_argument("Resize 'roi' [{}] must hold {} values (starts, ends) for tf_crop_and_resize",
                            fmt::join(roi, ", "), 2 * rank);
  }
  std::vector<ResizeAxis> axes;
  axes.reserve(rank);
  for (size_t d = 0; d < rank; ++d) {
    const int axis = static_cast<int>(d);
    axes.push_back(resize_axis(params, x.shape.dim(axis), shape.output.dim(axis), shape.scales[d], d, rank, roi));
  }
  resize_nd(x.shape, shape.output, axes, static_cast<float>(params.extrapolation_value), x.data<float>(),
            ctx.output(0).data<float>(), &ctx.pool());
  return ok_status();
}

// --- GridSample (PyTorch's grid_sampler_2d semantics) ---

// Normalised [-1, 1] coordinate to pixel units.
double grid_unnormalize(double v, int64_t size, bool align_corners) {
  const double s = static_cast<double>(size);
  return align_corners ? (v + 1) / 2 * (s - 1) : ((v + 1) * s - 1) / 2;
}

// Reflects `v` into [low, high] (given doubled, to stay in integers for half-pixel bounds).
double reflect(double v, int64_t twice_low, int64_t twice_high) {
  if (twice_low == twice_high) return 0.0;
  const double low = static_cast<double>(twice_low) / 2;
  const double span = static_cast<double>(twice_high - twice_low) / 2;
  v = std::fabs(v - low);
  const double extra = std::fmod(v, span);
  const int64_t flips = static_cast<int64_t>(std::floor(v / span));
  return flips % 2 == 0 ? extra + low : span - extra + low;
}

// Applies the padding mode to a coordinate (border: clamp; reflection: reflect, then clamp).
double grid_pad(double v, int64_t size, ops::GridSampleParams::Padding padding, bool align_corners) {
  using Padding = ops::GridSampleParams::Padding;
  const double high = static_cast<double>(size - 1);
  if (padding == Padding::kBorder) return std::clamp(v, 0.0, high);
  if (padding == Padding::kReflection) {
    v = align_corners ? reflect(v, 0, 2 * (size - 1)) : reflect(v, -1, 2 * size - 1);
    return std::clamp(v, 0.0, high);
  }
  return v;
}

// A pixel coordinate as an index; far-out or NaN coordinates (from a grid holding such values) become an index far
// outside, whose neighbours are outside too.
int64_t to_index(double v) {
  return v > -1e9 && v < 1e9 ? static_cast<int64_t>(v) : -(int64_t{1} << 40);
}

double cubic_1d(const std::array<double, 4>& v, double t) {
  const std::array<double, 4> w = cubic_weights(t, -0.75);
  return v[0] * w[0] + v[1] * w[1] + v[2] * w[2] + v[3] * w[3];
}

Status compute_grid_sample(const ops::CpuComputeContext& ctx) {
  using Mode = ops::GridSampleParams::Mode;
  using Padding = ops::GridSampleParams::Padding;
  const auto& p = ctx.params<ops::GridSampleParams>();
  const ops::TensorRef& x = ctx.input(0);
  const ops::TensorRef& grid = ctx.input(1);
  HXRT_RETURN_IF_ERROR(check_f32(x, "GridSample", "X"));
  HXRT_RETURN_IF_ERROR(check_f32(grid, "GridSample", "grid"));
  if (x.shape.rank() != 4 || grid.shape.rank() != 4 || grid.shape.dim(0) != x.shape.dim(0) || grid.shape.dim(3) != 2) {
    return invalid_argument("GridSample needs X [N, C, H, W] and grid [N, H_out, W_out, 2], got {} and {}", x.shape,
                            grid.shape);
  }
  const int64_t n = x.shape.dim(0), c = x.shape.dim(1), h = x.shape.dim(2), w = x.shape.dim(3);
  const int64_t oh = grid.shape.dim(1), ow = grid.shape.dim(2);
  const Shape out{n, c, oh, ow};
  HXRT_RETURN_IF_ERROR(check_output(ctx.output(0), DType::kF32, out, "GridSample"));
  const float* xp = x.data<float>();
  const float* gp = grid.data<float>();
  float* yp = ctx.output(0).data<float>();
  run_chunks(&ctx.pool(), n * c, grain_for(oh * ow * 16), [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      const int64_t b = plane / c;
      const float* img = xp + plane * h * w;
      auto at = [&](int64_t iy, int64_t ix) -> double {
        return iy >= 0 && iy < h && ix >= 0 && ix < w ? static_cast<double>(img[iy * w + ix]) : 0.0;
      };
      for (int64_t i = 0; i < oh * ow; ++i) {
        const float* g = gp + (b * oh * ow + i) * 2;
        double gx = grid_unnormalize(g[0], w, p.align_corners);
        double gy = grid_unnormalize(g[1], h, p.align_corners);
        double v = 0.0;
        if (p.mode == Mode::kBicubic) {
          // Taps are padded one by one (as PyTorch), the coordinate is not.
          const double fx = std::floor(gx), fy = std::floor(gy);
          std::array<double, 4> rows{};
          for (int r = 0; r < 4; ++r) {
            std::array<double, 4> cols{};
            for (int q = 0; q < 4; ++q) {
              double ty = fy - 1 + r, tx = fx - 1 + q;
              if (p.padding_mode != Padding::kZeros) {
                ty = grid_pad(ty, h, p.padding_mode, p.align_corners);
                tx = grid_pad(tx, w, p.padding_mode, p.align_corners);
              }
              cols[static_cast<size_t>(q)] = at(to_index(ty), to_index(tx));
            }
            rows[static_cast<size_t>(r)] = cubic_1d(cols, gx - fx);
          }
          v = cubic_1d(rows, gy - fy);
        } else {
          gx = grid_pad(gx, w, p.padding_mode, p.align_corners);
          gy = grid_pad(gy, h, p.padding_mode, p.align_corners);
          if (p.mode == Mode::kNearest) {
            v = at(to_index(std::nearbyint(gy)), to_index(std::nearbyint(gx)));
          } else {
            const double fx = std::floor(gx), fy = std::floor(gy);
            const double tx = gx - fx, ty = gy - fy;
            const int64_t x0 = to_index(fx), y0 = to_index(fy);
            v = at(y0, x0) * (1 - tx) * (1 - ty) + at(y0, x0 + 1) * tx * (1 - ty) + at(y0 + 1, x0) * (1 - tx) * ty +
                at(y0 + 1, x0 + 1) * tx * ty;
          }
        }
        yp[plane * oh * ow + i] = static_cast<float>(v);
      }
    }
  });
  return ok_status();
}

// --- RoiAlign (bilinear samples averaged, or their max, per bin) ---

Status compute_roi_align(const ops::CpuComputeContext& ctx) {
  const auto& p = ctx.params<ops::RoiAlignParams>();
  const ops::TensorRef& x = ctx.input(0);
  const ops::TensorRef& rois = ctx.input(1);
  const ops::TensorRef& batch = ctx.input(2);
  HXRT_RETURN_IF_ERROR(check_f32(x, "RoiAlign", "X"));
  HXRT_RETURN_IF_ERROR(check_f32(rois, "RoiAlign", "rois"));
  if (x.shape.rank() != 4 || rois.shape.rank() != 2 || rois.shape.dim(1) != 4 || batch.dtype != DType::kI64 ||
      batch.num_elements() != rois.shape.dim(0)) {
    return invalid_argument(
        "RoiAlign needs X [N, C, H, W], rois [R, 4] and i64 batch_indices [R], got {}, {} and {} {}", x.shape,
        rois.shape, batch.dtype, batch.shape);
  }
  const int64_t n = x.shape.dim(0), c = x.shape.dim(1), h = x.shape.dim(2), w = x.shape.dim(3);
  const int64_t r_count = rois.shape.dim(0);
  if (h == 0 || w == 0) return invalid_argument("RoiAlign X {} has an empty spatial dim", x.shape);
  const Shape out{r_count, c, p.output_height, p.output_width};
  HXRT_RETURN_IF_ERROR(check_output(ctx.output(0), DType::kF32, out, "RoiAlign"));
  const int64_t* bp = batch.data<int64_t>();
  for (int64_t r = 0; r < r_count; ++r) {
    if (bp[r] < 0 || bp[r] >= n) {
      return invalid_argument("RoiAlign batch index {} (roi {}) is outside [0, {})", bp[r], r, n);
    }
  }
  const float* xp = x.data<float>();
  const float* rp = rois.data<float>();
  float* yp = ctx.output(0).data<float>();
  const int64_t bins = p.output_height * p.output_width;
  run_chunks(&ctx.pool(), r_count * c, grain_for(bins * 16), [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t r = task / c;
      const int64_t ch = task % c;
      const float* img = xp + (bp[r] * c + ch) * h * w;
      const double offset = p.half_pixel ? 0.5 : 0.0;
      const double scale = p.spatial_scale;
      const double x1 = rp[r * 4 + 0] * scale - offset, y1 = rp[r * 4 + 1] * scale - offset;
      const double x2 = rp[r * 4 + 2] * scale - offset, y2 = rp[r * 4 + 3] * scale - offset;
      double roi_w = x2 - x1, roi_h = y2 - y1;
      if (!p.half_pixel) {
        roi_w = std::max(roi_w, 1.0);
        roi_h = std::max(roi_h, 1.0);
      }
      const double bin_h = roi_h / static_cast<double>(p.output_height);
      const double bin_w = roi_w / static_cast<double>(p.output_width);
      const int64_t grid_h = p.sampling_ratio > 0 ? p.sampling_ratio : static_cast<int64_t>(std::ceil(bin_h));
      const int64_t grid_w = p.sampling_ratio > 0 ? p.sampling_ratio : static_cast<int64_t>(std::ceil(bin_w));
      const double count = static_cast<double>(std::max<int64_t>(grid_h * grid_w, 1));
      float* yo = yp + task * bins;
      for (int64_t ph = 0; ph < p.output_height; ++ph) {
        for (int64_t pw = 0; pw < p.output_width; ++pw) {
          double acc = 0.0;
          bool any = false;
          for (int64_t iy = 0; iy < grid_h; ++iy) {
            double yy = y1 + static_cast<double>(ph) * bin_h +
                        (static_cast<double>(iy) + 0.5) * bin_h / static_cast<double>(grid_h);
            for (int64_t ix = 0; ix < grid_w; ++ix) {
              double xx = x1 + static_cast<double>(pw) * bin_w +
                          (static_cast<double>(ix) + 0.5) * bin_w / static_cast<double>(grid_w);
              double v = 0.0;
              if (!(yy < -1.0 || yy > static_cast<double>(h) || xx < -1.0 || xx > static_cast<double>(w))) {
                double sy = std::max(yy, 0.0), sx = std::max(xx, 0.0);
                int64_t y_low = static_cast<int64_t>(sy), x_low = static_cast<int64_t>(sx);
                int64_t y_high = y_low + 1, x_high = x_low + 1;
                if (y_low >= h - 1) {
                  y_low = y_high = h - 1;
                  sy = static_cast<double>(y_low);
                }
                if (x_low >= w - 1) {
                  x_low = x_high = w - 1;
                  sx = static_cast<double>(x_low);
                }
                const double ly = sy - static_cast<double>(y_low), lx = sx - static_cast<double>(x_low);
                const double hy = 1 - ly, hx = 1 - lx;
                const std::array<double, 4> terms = {
                    hy * hx * img[y_low * w + x_low], hy * lx * img[y_low * w + x_high],
                    ly * hx * img[y_high * w + x_low], ly * lx * img[y_high * w + x_high]};
                if (p.max_mode) {
                  v = std::max({terms[0], terms[1], terms[2], terms[3]});
                } else {
                  v = terms[0] + terms[1] + terms[2] + terms[3];
                }
              }
              if (p.max_mode) {
                acc = any ? std::max(acc, v) : v;
                any = true;
              } else {
                acc += v;
              }
            }
          }
          yo[ph * p.output_width + pw] = static_cast<float>(p.max_mode ? acc : acc / count);
        }
      }
    }
  });
  return ok_status();
}

ops::KernelDef cpu_def(std::string op, std::string description, std::vector<std::vector<DType>> dtypes) {
  ops::KernelDef def;
  def.op_type = op;
  def.device = hal::DeviceKind::kCpu;
  def.name = std::move(op);
  def.priority = 10;
  def.description = std::move(description);
  def.input_dtypes = std::move(dtypes);
  return def;
}

}  // namespace

Status register_pool(ops::KernelRegistry& registry) {
  const std::vector<DType> f32 = {DType::kF32};
  const std::vector<DType> i64 = {DType::kI64};
  for (bool max : {false, true}) {
    ops::KernelDef def =
        cpu_def(max ? "MaxPool" : "AveragePool", "1-D to 3-D window loops per (N, C) plane, parallel over planes",
                {max ? std::vector<DType>{DType::kF32, DType::kI8, DType::kU8} : f32});
    def.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
      return ops::boxed(ops::parse_pool_params(node));
    };
    def.tiling = pool_tiling;
    def.launch = ops::cpu_launch(def.name, [max](const ops::CpuComputeContext& ctx) { return compute_pool(ctx, max); });
    HXRT_RETURN_IF_ERROR(registry.add(std::move(def)));

    ops::KernelDef global = cpu_def(max ? "GlobalMaxPool" : "GlobalAveragePool",
                                    "mean or max of each (N, C) plane, parallel over planes", {f32});
    global.launch = ops::cpu_launch(global.name,
                                    [max](const ops::CpuComputeContext& ctx) { return compute_global_pool(ctx, max); });
    HXRT_RETURN_IF_ERROR(registry.add(std::move(global)));
  }

  ops::KernelDef unpool = cpu_def("MaxUnpool", "zero fill, then X scattered to the flat indices I", {f32, i64, i64});
  unpool.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_pool_params(node));
  };
  unpool.launch = ops::cpu_launch(unpool.name, compute_max_unpool);
  HXRT_RETURN_IF_ERROR(registry.add(std::move(unpool)));

  ops::KernelDef resize = cpu_def("Resize",
                                  "separable taps per axis (1 nearest, 2 linear, 4 cubic), summed over "
                                  "their combinations, parallel over output elements",
                                  {f32, f32, f32, i64});
  resize.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_resize_params(node));
  };
  resize.launch = ops::cpu_launch(resize.name, compute_resize);
  HXRT_RETURN_IF_ERROR(registry.add(std::move(resize)));

  ops::KernelDef grid =
      cpu_def("GridSample", "PyTorch grid_sampler_2d semantics, parallel over (N, C) planes", {f32, f32});
  grid.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_grid_sample_params(node));
  };
  grid.launch = ops::cpu_launch(grid.name, compute_grid_sample);
  HXRT_RETURN_IF_ERROR(registry.add(std::move(grid)));

  ops::KernelDef roi =
      cpu_def("RoiAlign", "bilinear samples per bin, averaged (or max), parallel over (roi, C)", {f32, f32, i64});
  roi.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_roi_align_params(node));
  };
  roi.launch = ops::cpu_launch(roi.name, compute_roi_align);
  return registry.add(std::move(roi));
}

}  // namespace hxrt::kernels::cpu
