#include "kernels/cpu/conv.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

#include <fmt/ranges.h>

#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/registration.h"

namespace hxrt::kernels::cpu {

namespace {

// Unfolds the patches of output positions [p0, p0 + cols) of one group's input xg [cg, h, w] into
// col [(cg·kh·kw), cols].
void im2col(const Conv2dGeometry& g, const float* xg, int64_t cg, int64_t p0, int64_t cols, float* col) {
  for (int64_t ci = 0; ci < cg; ++ci) {
    const float* plane = xg + ci * g.h * g.w;
    for (int64_t ki = 0; ki < g.kh; ++ki) {
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        float* dst = col + ((ci * g.kh + ki) * g.kw + kj) * cols;
        int64_t oy = p0 / g.ow;
        int64_t ox = p0 % g.ow;
        for (int64_t idx = 0; idx < cols; ++idx) {
          const int64_t iy = oy * g.stride_h - g.pad_top + ki * g.dilation_h;
          const int64_t ix = ox * g.stride_w - g.pad_left + kj * g.dilation_w;
          dst[idx] = (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w) ? plane[iy * g.w + ix] : 0.0f;
          if (++ox == g.ow) {
            ox = 0;
            ++oy;
          }
        }
      }
    }
  }
}

int64_t ceil_div(int64_t a, int64_t b) {  // b > 0
  return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}

// Note [Depthwise convolution]: with one input and one output channel per group (MobileNet-style blocks, most of
// PP-OCR det's convolutions) im2col + sgemm is a 1-row GEMM per group, all unfolding and call overhead. Instead the
// block of output positions [p0, p0 + cols) of one plane is computed directly: for each output row of the block
// and each filter tap, the taps' row of X times the weight is added to the output row over the range of columns
// whose input lies inside the image (padding contributes nothing). Each output sums its taps in (ki, kj) order.
// At unit stride an input row's taps are explicit AVX2 (eight fused multiply-adds at a time; the build's baseline is
// SSE2, where GCC -O2 left the loop scalar behind its aliasing check), one call per input row: PP-OCRv6 det's 5x5
// depthwise convolution of 64x24x32 went from 250 to 130 us with a call per tap, and to 90 us with one per row.
// One input row's taps at unit stride: y[ox - ox0] += w[kj] · x[ox + kj·dilation - pad_left] for kj < kw, each tap
// over its in-image columns of [ox0, ox1), eight fused multiply-adds at a time (one call per input row, not per tap).
__attribute__((target("avx2,fma"))) void depthwise_row_avx2(const float* xrow, const float* wrow, int64_t kw,
                                                            int64_t dilation, int64_t pad_left, int64_t in_w,
                                                            int64_t ox0, int64_t ox1, float* yrow) {
  for (int64_t kj = 0; kj < kw; ++kj) {
    const int64_t off = kj * dilation - pad_left;
    const int64_t lo = std::max(ox0, -off);
    const int64_t hi = std::min(ox1, in_w - off);
    const float a = wrow[kj];
    const __m256 av = _mm256_set1_ps(a);
    const float* x = xrow + off;
    float* y = yrow - ox0;
    int64_t ox = lo;
    for (; ox + 8 <= hi; ox += 8) _mm256_storeu_ps(y + ox, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + ox), _mm256_loadu_ps(y + ox)));
    for (; ox < hi; ++ox) y[ox] = std::fma(a, x[ox], y[ox]);
  }
}

bool depthwise_fma() {
  static const bool fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return fma;
}

void depthwise_block(const Conv2dGeometry& g, const float* xg, const float* wg, int64_t p0, int64_t cols, float* yg) {
  std::fill(yg, yg + cols, 0.0f);
  for (int64_t p = p0; p < p0 + cols;) {
    const int64_t oy = p / g.ow;
    const int64_t ox0 = p % g.ow;
    const int64_t ox1 = std::min(g.ow, ox0 + (p0 + cols - p));
    float* yrow = yg + (p - p0);  // yrow[ox - ox0]
    for (int64_t ki = 0; ki < g.kh; ++ki) {
      const int64_t iy = oy * g.stride_h - g.pad_top + ki * g.dilation_h;
      if (iy < 0 || iy >= g.h) continue;
      const float* xrow = xg + iy * g.w;
      if (g.stride_w == 1 && depthwise_fma()) {
        depthwise_row_avx2(xrow, wg + ki * g.kw, g.kw, g.dilation_w, g.pad_left, g.w, ox0, ox1, yrow);
        continue;
      }
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        const float wv = wg[ki * g.kw + kj];
        const int64_t off = kj * g.dilation_w - g.pad_left;  // ix = ox · stride + off
        const int64_t lo = std::max(ox0, ceil_div(-off, g.stride_w));
        const int64_t hi = std::min(ox1, ceil_div(g.w - off, g.stride_w));
        for (int64_t ox = lo; ox < hi; ++ox) yrow[ox - ox0] += wv * xrow[ox * g.stride_w + off];
      }
    }
    p += ox1 - ox0;
  }
}

// Note [Shifted convolution]: at stride 1 without dilation, output row oy's tap (ki, kj) reads input row
// oy + ki - pad_top shifted by kj - pad_left columns: for every output channel at once that is a GEMM, W's (ki, kj)
// slice (mg × cg) times the input rows (cg × the row's in-image columns, channels h·w apart), added into the
// output row. So the block's outputs come from kh·kw small GEMMs per output row, straight from X, instead of
// unfolding kh·kw·cg values per output column first (im2col), which for the few output channels of a detection
// model's neck (16 of them) cost more than the GEMM itself. Applies for output rows of 16 columns or more (shorter
// ones would make each GEMM a partial register tile). Each output sums its taps in (ki, kj) order, its channels
// within a tap in the kernel's order. W is regrouped by tap on every call (m·c·kh·kw floats; packing it once at
// load is the plan's job, not done yet).
void shifted_block(const Conv2dGeometry& g, const float* xg, const float* taps_w, int64_t mg, int64_t cg, int64_t p0,
                   int64_t cols, float* yg, int64_t ohw) {
  for (int64_t oc = 0; oc < mg; ++oc) std::fill(yg + oc * ohw, yg + oc * ohw + cols, 0.0f);
  const int64_t plane = g.h * g.w;
  for (int64_t p = p0; p < p0 + cols;) {
    const int64_t oy = p / g.ow;
    const int64_t ox0 = p % g.ow;
    const int64_t ox1 = std::min(g.ow, ox0 + (p0 + cols - p));
    float* yrow = yg + (p - p0);  // column ox - ox0 of the row, channels ohw apart
    for (int64_t ki = 0; ki < g.kh; ++ki) {
      const int64_t iy = oy - g.pad_top + ki;
      if (iy < 0 || iy >= g.h) continue;
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        const int64_t off = kj - g.pad_left;  // ix = ox + off
        const int64_t lo = std::max(ox0, -off);
        const int64_t hi = std::min(ox1, g.w - off);
        if (lo >= hi) continue;
        sgemm_accumulate(mg, hi - lo, cg, taps_w + (ki * g.kw + kj) * mg * cg, cg, xg + iy * g.w + lo + off, plane,
                         yrow + (lo - ox0), ohw);
      }
    }
    p += ox1 - ox0;
  }
}

void apply_epilogue(const ChannelEpilogue& e, int64_t channel, float* row, int64_t cols) {
  const float bias = e.bias != nullptr ? e.bias[channel] : 0.0f;
  const float scale = e.scale != nullptr ? e.scale[channel] : 1.0f;
  const float shift = e.shift != nullptr ? e.shift[channel] : 0.0f;
  if (e.bias == nullptr && e.scale == nullptr && e.shift == nullptr && !e.relu) return;
  for (int64_t i = 0; i < cols; ++i) {
    float v = (row[i] + bias) * scale + shift;
    if (e.relu) v = std::max(v, 0.0f);
    row[i] = v;
  }
}

}  // namespace

void conv2d_nchw(const Conv2dGeometry& g, const float* x, const float* w, const ChannelEpilogue& epilogue, float* y,
                 int64_t tile_cols, ThreadPool* pool) {
  const int64_t cg = g.c / g.group;
  const int64_t mg = g.m / g.group;
  const int64_t ckk = cg * g.kh * g.kw;
  const int64_t ohw = g.oh * g.ow;
  if (g.n == 0 || g.m == 0 || ohw == 0) return;
  tile_cols = std::clamp<int64_t>(tile_cols, 1, ohw);
  const int64_t col_blocks = (ohw + tile_cols - 1) / tile_cols;
  const bool direct = g.kh == 1 && g.kw == 1 && g.stride_h == 1 && g.stride_w == 1 && g.pad_top == 0 &&
                      g.pad_left == 0 && g.oh == g.h && g.ow == g.w;
  const bool depthwise = cg == 1 && mg == 1 && !direct;  // Note [Depthwise convolution]
  const bool shifted = !direct && !depthwise && g.stride_h == 1 && g.stride_w == 1 && g.dilation_h == 1 &&
                       g.dilation_w == 1 && g.ow >= 16;  // Note [Shifted convolution]
  const int64_t kk = g.kh * g.kw;
  std::vector<float> taps_w;  // (group, kh·kw, mg, cg): W's slice of each tap, (oc, ci) row-major
  if (shifted) {
    taps_w.resize(static_cast<size_t>(g.group * kk * mg * cg));
    for (int64_t m = 0; m < g.m; ++m) {
      const int64_t gi = m / mg, oc = m % mg;
      for (int64_t ci = 0; ci < cg; ++ci) {
        for (int64_t t = 0; t < kk; ++t) {
          taps_w[static_cast<size_t>(((gi * kk + t) * mg + oc) * cg + ci)] = w[(m * cg + ci) * kk + t];
        }
      }
    }
  }
  auto body = [&](int64_t begin, int64_t end) {
    std::vector<float> col(direct || depthwise || shifted ? 0 : static_cast<size_t>(ckk * tile_cols));
    for (int64_t task = begin; task < end; ++task) {
      const int64_t image = task / (g.group * col_blocks);
      const int64_t gi = (task / col_blocks) % g.group;
      const int64_t p0 = (task % col_blocks) * tile_cols;
      const int64_t cols = std::min(tile_cols, ohw - p0);
      const float* xg = x + (image * g.c + gi * cg) * g.h * g.w;
      const float* wg = w + gi * mg * ckk;
      float* yg = y + (image * g.m + gi * mg) * ohw + p0;
      if (depthwise) {
        depthwise_block(g, xg, wg, p0, cols, yg);
      } else if (direct) {
        sgemm(mg, cols, ckk, wg, ckk, xg + p0, g.h * g.w, yg, ohw);
      } else if (shifted) {
        shifted_block(g, xg, taps_w.data() + gi * kk * mg * cg, mg, cg, p0, cols, yg, ohw);
      } else {
        im2col(g, xg, cg, p0, cols, col.data());
        sgemm(mg, cols, ckk, wg, ckk, col.data(), cols, yg, ohw);
      }
      for (int64_t oc = 0; oc < mg; ++oc) apply_epilogue(epilogue, gi * mg + oc, yg + oc * ohw, cols);
    }
  };
  const int64_t tasks = g.n * g.group * col_blocks;
  run_chunks(pool, tasks, 1, body);
}

void batchnorm_fold(int64_t channels, const float* scale, const float* b, const float* mean, const float* var,
                    float epsilon, float* folded_scale, float* folded_shift) {
  for (int64_t c = 0; c < channels; ++c) {
    const float s = scale[c] / std::sqrt(var[c] + epsilon);
    folded_scale[c] = s;
    folded_shift[c] = b[c] - mean[c] * s;
  }
}

void batchnorm_apply(int64_t n, int64_t channels, int64_t inner, const float* x, const float* folded_scale,
                     const float* folded_shift, float* y, ThreadPool* pool) {
  auto body = [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      const int64_t c = plane % channels;
      const float s = folded_scale[c];
      const float t = folded_shift[c];
      const float* xp = x + plane * inner;
      float* yp = y + plane * inner;
      for (int64_t i = 0; i < inner; ++i) yp[i] = xp[i] * s + t;
    }
  };
  const int64_t planes = n * channels;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, inner));
  run_chunks(pool, planes, grain, body);
}

Result<ops::Tiling> conv_tiling(const ops::ConvParams& params, const ops::TilingQuery& query) {
  if (query.inputs.size() < 2) return invalid_argument("Conv tiling needs X and W");
  HXRT_ASSIGN_OR_RETURN(const Conv2dGeometry g,
                        ops::conv2d_geometry(params, query.inputs[0].shape, query.inputs[1].shape));
  const int64_t units = query.device != nullptr && query.device->compute_units > 0 ? query.device->compute_units : 1;
  const int64_t ohw = std::max<int64_t>(1, g.oh * g.ow);
  const int64_t ckk = std::max<int64_t>(1, g.c / g.group * g.kh * g.kw);
  // A few tasks per thread, and an unfolded block of at most ~512 KiB so it stays in L2.
  const int64_t images = std::max<int64_t>(1, g.n * g.group);
  const int64_t wanted_blocks = std::max<int64_t>(1, (4 * units + images - 1) / images);
  int64_t tile_cols = (ohw + wanted_blocks - 1) / wanted_blocks;
  tile_cols = std::min(tile_cols, std::max<int64_t>(16, (512 * 1024 / 4) / ckk));
  // Whole 32-column tiles of the GEMM kernel, and at least 64 columns: the 1x1 convolutions of a 6x8 map were cut
  // into 6-column tasks, each a masked partial tile, and ran at 2 GFLOP/s; one task of 48 columns does them at once.
  tile_cols = std::max(tile_cols, std::min<int64_t>(ohw, 64));
  tile_cols = (tile_cols + 31) / 32 * 32;
  tile_cols = std::clamp<int64_t>(tile_cols, 1, ohw);
  ops::Tiling tiling;
  tiling.values = {{"tile_cols", tile_cols}};
  tiling.launch.grid = {static_cast<uint32_t>((ohw + tile_cols - 1) / tile_cols),
                        static_cast<uint32_t>(std::min<int64_t>(images, UINT32_MAX)), 1};
  return tiling;
}

// ---------------------------------------------------------------------------------------------------------------
// Kernels
namespace {

Status check_f32_input(const ops::CpuComputeContext& ctx, size_t i, std::string_view name) {
  const ops::TensorRef& t = ctx.input(i);
  if (t.dtype != DType::kF32) return invalid_argument("input '{}' must be f32, got {}", name, t.dtype);
  return ok_status();
}

Status conv_compute(const ops::CpuComputeContext& ctx) {
  const auto& params = ctx.params<ops::ConvParams>();
  HXRT_RETURN_IF_ERROR(check_f32_input(ctx, 0, "X"));
  HXRT_RETURN_IF_ERROR(check_f32_input(ctx, 1, "W"));
  HXRT_ASSIGN_OR_RETURN(const Conv2dGeometry g, ops::conv2d_geometry(params, ctx.input(0).shape, ctx.input(1).shape));
  const ops::TensorRef& y = ctx.output(0);
  if (y.dtype != DType::kF32 || !(y.shape == g.output_shape())) {
    return invalid_argument("Conv output is {} {}, expected f32 {}", y.dtype, y.shape, g.output_shape());
  }
  ChannelEpilogue epilogue;
  if (ctx.has_input(2)) {
    HXRT_RETURN_IF_ERROR(check_f32_input(ctx, 2, "B"));
    if (ctx.input(2).num_elements() != g.m) {
      return invalid_argument("Conv bias B {} must have M={} values", ctx.input(2).shape, g.m);
    }
    epilogue.bias = ctx.input(2).data<float>();
  }
  conv2d_nchw(g, ctx.input(0).data<float>(), ctx.input(1).data<float>(), epilogue, y.data<float>(),
              ctx.tiling().get("tile_cols", 256), &ctx.pool());
  return ok_status();
}

// ConvTranspose: each task owns one output plane (n, m) and scatters its group's input planes into it.
// Note [Unfolding ConvTranspose]: a 2-D ConvTranspose whose stride equals its kernel, without dilation or leading
// pads (the learned 2x upsampling of segmentation and text-detection heads), sends every input pixel to its own
// kh x kw block of outputs: Y[oc, ih·kh + a, iw·kw + b] = B[oc] + Σ_ci X[ci, ih, iw] · W[ci, oc, a, b]. So for each
// image and group, T = Xᵀ · W (pixels × (oc, a, b), sgemm over ci) and a scatter of T's rows into their blocks,
// split by pixel rows over the pool, instead of one scalar multiply-add per (ci, pixel, tap): PP-OCRv6 det's
// 16 -> 16 channel 2x2 upsampling of 24x32 took 660 us. Outputs that no block covers (output_padding) keep B.
bool conv_transpose_unfolds(const ops::ConvTransposeGeometry& g) {
  return g.in[0] == 1 && g.kernel[0] == 1 && g.out[0] == 1 && g.stride[1] == g.kernel[1] &&
         g.stride[2] == g.kernel[2] && g.dilation[1] == 1 && g.dilation[2] == 1 && g.pad_begin[1] == 0 &&
         g.pad_begin[2] == 0;
}

void conv_transpose_unfolded(const ops::ConvTransposeGeometry& g, const float* x, const float* w, const float* bias,
                             float* y, ThreadPool* pool) {
  const int64_t cg = g.c / g.group, mg = g.m / g.group;
  const int64_t kh = g.kernel[1], kw = g.kernel[2], taps = kh * kw;
  const int64_t in_h = g.in[1], in_w = g.in[2], out_h = g.out[1], out_w = g.out[2];
  const int64_t in_plane = in_h * in_w, out_plane = out_h * out_w;
  const int64_t cols = mg * taps;  // T's columns: (oc, a, b)
  // Tasks: (image, group, block of input rows); each writes its own output rows.
  const int64_t rows_per_task = std::max<int64_t>(1, 4096 / std::max<int64_t>(1, in_w * cols / 16));
  const int64_t row_blocks = (in_h + rows_per_task - 1) / rows_per_task;
  run_chunks(pool, g.n * g.group * row_blocks, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> xt, t;
    for (int64_t task = begin; task < end; ++task) {
      const int64_t image = task / (g.group * row_blocks);
      const int64_t gi = task / row_blocks % g.group;
      const int64_t ih0 = task % row_blocks * rows_per_task;
      const int64_t ih1 = std::min(in_h, ih0 + rows_per_task);
      const int64_t pixels = (ih1 - ih0) * in_w;
      // Xᵀ of the block's pixels: (pixels, cg).
      xt.resize(static_cast<size_t>(pixels * cg));
      const float* xg = x + (image * g.c + gi * cg) * in_plane + ih0 * in_w;
      for (int64_t ci = 0; ci < cg; ++ci) {
        for (int64_t p = 0; p < pixels; ++p) xt[static_cast<size_t>(p * cg + ci)] = xg[ci * in_plane + p];
      }
      t.resize(static_cast<size_t>(pixels * cols));
      sgemm(pixels, cols, cg, xt.data(), cg, w + gi * cg * cols, cols, t.data(), cols);
      float* yg = y + (image * g.m + gi * mg) * out_plane;
      // The block's output rows start at the bias (rows below in_h·kh, past every block, too).
      const int64_t oh0 = ih0 * kh;
      const int64_t oh1 = ih1 == in_h ? out_h : std::min(out_h, ih1 * kh);
      for (int64_t oc = 0; oc < mg; ++oc) {
        const float b = bias != nullptr ? bias[gi * mg + oc] : 0.0f;
        if (oh0 < oh1) std::fill(yg + oc * out_plane + oh0 * out_w, yg + oc * out_plane + oh1 * out_w, b);
      }
      for (int64_t ih = ih0; ih < ih1; ++ih) {
        for (int64_t a = 0; a < kh; ++a) {
          const int64_t oh = ih * kh + a;
          if (oh >= out_h) break;
          for (int64_t oc = 0; oc < mg; ++oc) {
            float* yrow = yg + oc * out_plane + oh * out_w;
            const float* trow = t.data() + ((ih - ih0) * in_w) * cols + (oc * kh + a) * kw;
            for (int64_t iw = 0; iw < in_w; ++iw) {
              for (int64_t b = 0; b < kw; ++b) {
                const int64_t ow = iw * kw + b;
                if (ow < out_w) yrow[ow] += trow[iw * cols + b];
              }
            }
          }
        }
      }
    }
  });
}

void conv_transpose_nd(const ops::ConvTransposeGeometry& g, const float* x, const float* w, const float* bias, float* y,
                       ThreadPool* pool) {
  if (conv_transpose_unfolds(g)) {
    conv_transpose_unfolded(g, x, w, bias, y, pool);  // Note [Unfolding ConvTranspose]
    return;
  }
  const int64_t cg = g.c / g.group;
  const int64_t mg = g.m / g.group;
  const int64_t in_plane = g.in[0] * g.in[1] * g.in[2];
  const int64_t out_plane = g.out[0] * g.out[1] * g.out[2];
  const int64_t taps = g.kernel[0] * g.kernel[1] * g.kernel[2];
  auto body = [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t image = task / g.m;
      const int64_t oc = task % g.m;
      const int64_t gi = oc / mg;
      float* yp = y + task * out_plane;
      std::fill(yp, yp + out_plane, bias != nullptr ? bias[oc] : 0.0f);
      for (int64_t ci = gi * cg; ci < (gi + 1) * cg; ++ci) {
        const float* xp = x + (image * g.c + ci) * in_plane;
        const float* wp = w + (ci * mg + oc % mg) * taps;  // W [C, M/group, k...]
        for (int64_t id = 0; id < g.in[0]; ++id) {
          for (int64_t ih = 0; ih < g.in[1]; ++ih) {
            for (int64_t iw = 0; iw < g.in[2]; ++iw) {
              const float xv = xp[(id * g.in[1] + ih) * g.in[2] + iw];
              for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
                const int64_t od = id * g.stride[0] + kd * g.dilation[0] - g.pad_begin[0];
                if (od < 0 || od >= g.out[0]) continue;
                for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
                  const int64_t oh = ih * g.stride[1] + kh * g.dilation[1] - g.pad_begin[1];
                  if (oh < 0 || oh >= g.out[1]) continue;
                  const float* wrow = wp + (kd * g.kernel[1] + kh) * g.kernel[2];
                  float* yrow = yp + (od * g.out[1] + oh) * g.out[2];
                  for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
                    const int64_t ow = iw * g.stride[2] + kw * g.dilation[2] - g.pad_begin[2];
                    if (ow >= 0 && ow < g.out[2]) yrow[ow] += xv * wrow[kw];
                  }
                }
              }
            }
          }
        }
      }
    }
  };
  const int64_t tasks = g.n * g.m;
  const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, cg * in_plane * taps));
  run_chunks(pool, tasks, grain, body);
}

Status conv_transpose_compute(const ops::CpuComputeContext& ctx) {
  const ops::ConvTransposeGeometry& g = ctx.tiling().geometry_as<ops::ConvTransposeGeometry>();
  HXRT_RETURN_IF_ERROR(check_f32_input(ctx, 0, "X"));
  HXRT_RETURN_IF_ERROR(check_f32_input(ctx, 1, "W"));
  const ops::TensorRef& y = ctx.output(0);
  if (y.dtype != DType::kF32 || !(y.shape == g.output_shape)) {
    return invalid_argument("ConvTranspose output is {} {}, expected f32 {}", y.dtype, y.shape, g.output_shape);
  }
  const float* bias = nullptr;
  if (ctx.has_input(2)) {
    HXRT_RETURN_IF_ERROR(check_f32_input(ctx, 2, "B"));
    if (ctx.input(2).num_elements() != g.m) {
      return invalid_argument("ConvTranspose bias B {} must have M={} values", ctx.input(2).shape, g.m);
    }
    bias = ctx.input(2).data<float>();
  }
  conv_transpose_nd(g, ctx.input(0).data<float>(), ctx.input(1).data<float>(), bias, y.data<float>(), &ctx.pool());
  return ok_status();
}

Status batchnorm_compute(const ops::CpuComputeContext& ctx) {
  const auto& params = ctx.params<ops::EpsilonParams>();
  const ops::TensorRef& x = ctx.input(0);
  const ops::TensorRef& y = ctx.output(0);
  static constexpr std::string_view kNames[] = {"X", "scale", "B", "input_mean", "input_var"};
  for (size_t i = 0; i < 5; ++i) HXRT_RETURN_IF_ERROR(check_f32_input(ctx, i, kNames[i]));
  if (x.shape.rank() < 2) return invalid_argument("BatchNormalization X must have rank >= 2, got {}", x.shape);
  const int64_t channels = x.shape.dim(1);
  for (size_t i = 1; i < 5; ++i) {
    if (ctx.input(i).num_elements() != channels) {
      return invalid_argument("BatchNormalization input '{}' {} must have C={} values", kNames[i], ctx.input(i).shape,
                              channels);
    }
  }
  if (!(y.shape == x.shape) || y.dtype != DType::kF32) {
    return invalid_argument("BatchNormalization output {} {} differs from X {}", y.dtype, y.shape, x.shape);
  }
  std::vector<float> scale(static_cast<size_t>(channels));
  std::vector<float> shift(static_cast<size_t>(channels));
  batchnorm_fold(channels, ctx.input(1).data<float>(), ctx.input(2).data<float>(), ctx.input(3).data<float>(),
                 ctx.input(4).data<float>(), params.epsilon, scale.data(), shift.data());
  const int64_t n = x.shape.dim(0);
  const int64_t inner = channels == 0 || n == 0 ? 0 : x.num_elements() / (n * channels);
  batchnorm_apply(n, channels, inner, x.data<float>(), scale.data(), shift.data(), y.data<float>(), &ctx.pool());
  return ok_status();
}

}  // namespace

Status register_conv(ops::KernelRegistry& registry) {
  ops::KernelDef conv;
  conv.op_type = "Conv";
  conv.device = hal::DeviceKind::kCpu;
  conv.input_dtypes = {{DType::kF32}, {DType::kF32}, {DType::kF32}};
  conv.name = "Conv";
  conv.priority = 10;
  conv.description = "2-D NCHW convolution: im2col per output-column block + OpenBLAS sgemm, bias in the epilogue";
  conv.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_conv_params(node));
  };
  conv.tiling = [](const ops::TilingQuery& query) { return conv_tiling(query.params_as<ops::ConvParams>(), query); };
  conv.launch = ops::cpu_launch("Conv", conv_compute);
  HXRT_RETURN_IF_ERROR(registry.add(std::move(conv)));

  ops::KernelDef bn;
  bn.op_type = "BatchNormalization";
  bn.device = hal::DeviceKind::kCpu;
  bn.input_dtypes = {{DType::kF32}, {DType::kF32}, {DType::kF32}, {DType::kF32}, {DType::kF32}};
  bn.name = "BatchNormalization";
  bn.priority = 10;
  bn.description = "inference BatchNormalization folded to one scale and shift per channel";
  bn.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_epsilon_params(node));
  };
  bn.launch = ops::cpu_launch("BatchNormalization", batchnorm_compute);
  HXRT_RETURN_IF_ERROR(registry.add(std::move(bn)));

  ops::KernelDef transpose;
  transpose.op_type = "ConvTranspose";
  transpose.device = hal::DeviceKind::kCpu;
  transpose.input_dtypes = {{DType::kF32}, {DType::kF32}, {DType::kF32}};
  transpose.name = "ConvTranspose";
  transpose.priority = 10;
  transpose.description =
      "1-D to 3-D transposed convolution: scatter of the group's input planes into each output "
      "plane, parallel over (N, M) planes";
  transpose.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_conv_transpose_params(node));
  };
  transpose.tiling = [](const ops::TilingQuery& query) -> Result<ops::Tiling> {
    if (query.inputs.size() < 2) return invalid_argument("ConvTranspose tiling needs X and W");
    HXRT_ASSIGN_OR_RETURN(ops::ConvTransposeGeometry g,
                          ops::conv_transpose_geometry(query.params_as<ops::ConvTransposeParams>(),
                                                       query.inputs[0].shape, query.inputs[1].shape));
    ops::Tiling tiling;
    tiling.values = {{"planes", g.n * g.m}};
    tiling.geometry = std::make_shared<ops::ConvTransposeGeometry>(std::move(g));
    return tiling;
  };
  transpose.launch = ops::cpu_launch("ConvTranspose", conv_transpose_compute);
  return registry.add(std::move(transpose));
}

}  // namespace hxrt::kernels::cpu
