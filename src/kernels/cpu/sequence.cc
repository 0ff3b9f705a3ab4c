// CPU kernels of the recurrent, spectral and remaining ops (docs/onnx_ops/sequence.md): RNN GRU LSTM DFT STFT Det
// NonMaxSuppression NegativeLogLikelihoodLoss SoftmaxCrossEntropyLoss Dropout.

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "hxrt/ops/params/sequence.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/registration.h"

namespace hxrt::kernels::cpu {

namespace {

// Element `k` of an i32 or i64 tensor.
int64_t index_at(const ops::TensorRef& ref, int64_t k) {
  if (ref.dtype == DType::kI32) return ref.data<const int32_t>()[k];
  return ref.data<const int64_t>()[k];
}

// The single value of an integer scalar input; InvalidArgument naming it otherwise.
Result<int64_t> index_scalar(const ops::TensorRef& ref, std::string_view op, std::string_view name) {
  if (ref.num_elements() != 1) return invalid_argument("{}: input '{}' {} must hold one value", op, name, ref.shape);
  return index_at(ref, 0);
}

// The single value of a scalar input of element type T; InvalidArgument naming it otherwise.
template <typename T>
Result<T> scalar_value(const ops::TensorRef& ref, std::string_view op, std::string_view name) {
  const T* value = ref.data<const T>();
  if (value == nullptr || ref.num_elements() != 1) {
    return invalid_argument("{}: input '{}' {} must hold one value", op, name, ref.shape);
  }
  return *value;
}

bool has_output(const ops::CpuComputeContext& ctx, size_t i) { return i < ctx.launch().outputs.size(); }

// ---- RNN / GRU / LSTM -------------------------------------------------------------------------------------------
//
// Note [Recurrent kernels]
// The input projections X_t·Wᵀ of every step do not depend on the recurrence: one sgemm per direction computes
// them all, over row blocks of X in parallel. The recurrence then runs one task per (direction, batch row), each
// step an sgemv H_{t-1}·Rᵀ; the tasks are independent. A task's buffers: h, c [hidden]; rh [gates · hidden].

// Where the tensors of one run live (element offsets follow the layout attribute).
struct RecurrentTensors {
  const float* x = nullptr;     // (seq, batch, input) or (batch, seq, input)
  const float* w = nullptr;     // (dirs, gates·hidden, input)
  const float* r = nullptr;     // (dirs, gates·hidden, hidden)
  const float* b = nullptr;     // (dirs, 2·gates·hidden) or null
  const float* h0 = nullptr;    // (dirs, batch, hidden) or (batch, dirs, hidden), or null
  const float* c0 = nullptr;    // as h0 (LSTM)
  const float* p = nullptr;     // (dirs, 3·hidden) (LSTM) or null
  const float* xw = nullptr;    // (dirs, rows of X, gates·hidden): X·Wᵀ, rows in X's order
  float* y = nullptr;           // (seq, dirs, batch, hidden) or (batch, seq, dirs, hidden), or null
  float* y_h = nullptr;         // as h0, or null
  float* y_c = nullptr;         // as h0, or null
  int64_t seq = 0;
  int64_t batch = 0;
  int64_t input = 0;
};

// y[rows] = m[rows, cols] · v[cols] (row-major m).
void matvec(const float* m, int64_t rows, int64_t cols, const float* v, float* y) {
  cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<blasint>(rows), static_cast<blasint>(cols), 1.0f, m,
              static_cast<blasint>(cols), v, 1, 0.0f, y, 1);
}

void run_recurrent_row(const ops::RecurrentParams& params, const RecurrentTensors& t, int d, int64_t b,
                       int64_t length) {
  const int64_t hidden = params.hidden_size;
  const int64_t gates = ops::recurrent_gates(params.kind);
  const int64_t rows = gates * hidden;
  const int dirs = params.num_directions;
  const bool backwards = params.reverse || d == 1;
  const int per_direction = ops::recurrent_activation_count(params.kind);
  const ops::RecurrentActivation* act = params.activations.data() + d * per_direction;
  const float* r = t.r + d * rows * hidden;
  const float* xw_dir = t.xw + d * t.seq * t.batch * rows;
  const float* wb = t.b != nullptr ? t.b + d * 2 * rows : nullptr;
  const float* rb = wb != nullptr ? wb + rows : nullptr;
  const float* p = t.p != nullptr ? t.p + d * 3 * hidden : nullptr;
  const auto state_offset = [&](int64_t dir) {
    return (params.batch_major ? (b * dirs + dir) : (dir * t.batch + b)) * hidden;
  };
  const auto y_offset = [&](int64_t step) {
    return (params.batch_major ? ((b * t.seq + step) * dirs + d) : ((step * dirs + d) * t.batch + b)) * hidden;
  };
  const auto clip = [&](float v) { return params.clip.has_value() ? std::clamp(v, -*params.clip, *params.clip) : v; };
  // Pre-activation of gate row g: X_t·W_gᵀ + Wb_g + (recurrent part).
  const auto input_part = [&](const float* xw, int64_t g) { return xw[g] + (wb != nullptr ? wb[g] : 0.0f); };
  const auto bias_r = [&](int64_t g) { return rb != nullptr ? rb[g] : 0.0f; };

  std::vector<float> h(static_cast<size_t>(hidden), 0.0f);
  std::vector<float> c(static_cast<size_t>(hidden), 0.0f);
  std::vector<float> rh(static_cast<size_t>(rows));
  std::vector<float> gate(static_cast<size_t>(2 * hidden));    // GRU: z, r
  std::vector<float> reset_h(static_cast<size_t>(hidden));     // GRU: r ⊙ H_{t-1}
  std::vector<float> reset_rh(static_cast<size_t>(hidden));    // GRU: (r ⊙ H_{t-1})·Rhᵀ
  if (t.h0 != nullptr) std::copy_n(t.h0 + state_offset(d), hidden, h.begin());
  if (t.c0 != nullptr) std::copy_n(t.c0 + state_offset(d), hidden, c.begin());

  for (int64_t step = 0; step < length; ++step) {
    const int64_t time = backwards ? length - 1 - step : step;
    const float* xw = xw_dir + (params.batch_major ? (b * t.seq + time) : (time * t.batch + b)) * rows;
    switch (params.kind) {
      case ops::RecurrentKind::kRnn:
        matvec(r, rows, hidden, h.data(), rh.data());
        for (int64_t j = 0; j < hidden; ++j) h[j] = act[0].apply(clip(input_part(xw, j) + rh[j] + bias_r(j)));
        break;
      case ops::RecurrentKind::kGru: {
        // Rows: z [0, H), r [H, 2H), h [2H, 3H).
        const int64_t z_r_rows = 2 * hidden;
        matvec(r, params.linear_before_reset ? rows : z_r_rows, hidden, h.data(), rh.data());
        for (int64_t g = 0; g < z_r_rows; ++g) gate[g] = act[0].apply(clip(input_part(xw, g) + rh[g] + bias_r(g)));
        if (!params.linear_before_reset) {
          for (int64_t j = 0; j < hidden; ++j) reset_h[j] = gate[hidden + j] * h[j];
          matvec(r + z_r_rows * hidden, hidden, hidden, reset_h.data(), reset_rh.data());
        }
        for (int64_t j = 0; j < hidden; ++j) {
          const int64_t g = z_r_rows + j;
          const float recurrent = params.linear_before_reset ? gate[hidden + j] * (rh[g] + bias_r(g))
                                                             : reset_rh[j] + bias_r(g);
          const float candidate = act[1].apply(clip(input_part(xw, g) + recurrent));
          h[j] = (1.0f - gate[j]) * candidate + gate[j] * h[j];
        }
        break;
      }
      case ops::RecurrentKind::kLstm:
        // Rows: i [0, H), o [H, 2H), f [2H, 3H), c [3H, 4H); peepholes P: i, o, f.
        matvec(r, rows, hidden, h.data(), rh.data());
        for (int64_t j = 0; j < hidden; ++j) {
          const auto pre = [&](int64_t g) { return input_part(xw, g) + rh[g] + bias_r(g); };
          const float c_prev = c[j];
          const float i_gate = act[0].apply(clip(pre(j) + (p != nullptr ? p[j] * c_prev : 0.0f)));
          const float f_gate =
              params.input_forget
                  ? 1.0f - i_gate
                  : act[0].apply(clip(pre(2 * hidden + j) + (p != nullptr ? p[2 * hidden + j] * c_prev : 0.0f)));
          const float candidate = act[1].apply(clip(pre(3 * hidden + j)));
          c[j] = f_gate * c_prev + i_gate * candidate;
          const float o_gate = act[0].apply(clip(pre(hidden + j) + (p != nullptr ? p[hidden + j] * c[j] : 0.0f)));
          h[j] = o_gate * act[2].apply(c[j]);
        }
        break;
    }
    if (t.y != nullptr) std::copy(h.begin(), h.end(), t.y + y_offset(time));
  }
  if (t.y != nullptr) {
    for (int64_t time = length; time < t.seq; ++time) std::fill_n(t.y + y_offset(time), hidden, 0.0f);
  }
  if (t.y_h != nullptr) std::copy(h.begin(), h.end(), t.y_h + state_offset(d));
  if (t.y_c != nullptr) std::copy(c.begin(), c.end(), t.y_c + state_offset(d));
}

// Rows of X per input-projection task.
constexpr int64_t kProjectionRows = 64;

Status compute_recurrent(const ops::CpuComputeContext& ctx) {
  const auto& params = ctx.params<ops::RecurrentParams>();
  const std::string_view op = ops::recurrent_kind_name(params.kind);
  const bool lstm = params.kind == ops::RecurrentKind::kLstm;
  const ops::TensorRef& x = ctx.input(0);
  if (x.shape.rank() != 3) return invalid_argument("{}: X {} must have rank 3", op, x.shape);
  RecurrentTensors t;
  t.seq = params.batch_major ? x.shape.dim(1) : x.shape.dim(0);
  t.batch = params.batch_major ? x.shape.dim(0) : x.shape.dim(1);
  t.input = x.shape.dim(2);
  const int64_t rows = ops::recurrent_gates(params.kind) * params.hidden_size;
  const int64_t dirs = params.num_directions;
  if (!(ctx.input(1).shape == Shape{dirs, rows, t.input}) ||
      !(ctx.input(2).shape == Shape{dirs, rows, params.hidden_size})) {
    return invalid_argument("{}: W {} or R {} does not match {} directions, {} gate rows, input {}", op,
                            ctx.input(1).shape, ctx.input(2).shape, dirs, rows, t.input);
  }
  const int64_t state = dirs * t.batch * params.hidden_size;
  const auto check_size = [&](size_t i, std::string_view name, int64_t expected) -> Status {
    if (!ctx.has_input(i) || ctx.input(i).num_elements() == expected) return ok_status();
    return invalid_argument("{}: input '{}' {} must hold {} values", op, name, ctx.input(i).shape, expected);
  };
  HXRT_RETURN_IF_ERROR(check_size(3, "B", dirs * 2 * rows));
  HXRT_RETURN_IF_ERROR(check_size(5, "initial_h", state));
  if (lstm) {
    HXRT_RETURN_IF_ERROR(check_size(6, "initial_c", state));
    HXRT_RETURN_IF_ERROR(check_size(7, "P", dirs * 3 * params.hidden_size));
  }
  t.x = x.data<const float>();
  t.w = ctx.input(1).data<const float>();
  t.r = ctx.input(2).data<const float>();
  if (ctx.has_input(3)) t.b = ctx.input(3).data<const float>();
  if (ctx.has_input(5)) t.h0 = ctx.input(5).data<const float>();
  if (lstm && ctx.has_input(6)) t.c0 = ctx.input(6).data<const float>();
  if (lstm && ctx.has_input(7)) t.p = ctx.input(7).data<const float>();
  t.y = ctx.output(0).data<float>();
  if (has_output(ctx, 1)) t.y_h = ctx.output(1).data<float>();
  if (lstm && has_output(ctx, 2)) t.y_c = ctx.output(2).data<float>();
  std::vector<int64_t> lengths(static_cast<size_t>(t.batch), t.seq);
  if (ctx.has_input(4)) {
    const ops::TensorRef& lens = ctx.input(4);
    if (lens.num_elements() != t.batch) {
      return invalid_argument("{}: sequence_lens {} must hold one length per batch row ({})", op, lens.shape, t.batch);
    }
    for (int64_t b = 0; b < t.batch; ++b) {
      const int64_t len = index_at(lens, b);
      if (len < 0 || len > t.seq) {
        return invalid_argument("{}: sequence_lens[{}] = {} is outside [0, {}]", op, b, len, t.seq);
      }
      lengths[static_cast<size_t>(b)] = len;
    }
  }
  // Note [Recurrent kernels]: X·Wᵀ for every step and direction first (zeros for an input size of 0).
  const int64_t x_rows = t.seq * t.batch;
  std::vector<float> xw(static_cast<size_t>(dirs * x_rows * rows), 0.0f);  // (dirs, x_rows, rows)
  blas_use_single_thread();
  const int64_t blocks = (x_rows + kProjectionRows - 1) / kProjectionRows;
  if (t.input > 0) {
    ctx.pool().parallel_for(dirs * blocks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t task = begin; task < end; ++task) {
        const int64_t d = task / blocks;
        const int64_t row0 = (task % blocks) * kProjectionRows;
        const int64_t count = std::min(kProjectionRows, x_rows - row0);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(count),
                    static_cast<blasint>(rows), static_cast<blasint>(t.input), 1.0f, t.x + row0 * t.input,
                    static_cast<blasint>(t.input), t.w + d * rows * t.input, static_cast<blasint>(t.input), 0.0f,
                    xw.data() + (d * x_rows + row0) * rows, static_cast<blasint>(rows));
      }
    });
  }
  t.xw = xw.data();
  ctx.pool().parallel_for(dirs * t.batch, 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task % t.batch;
      run_recurrent_row(params, t, static_cast<int>(task / t.batch), b, lengths[static_cast<size_t>(b)]);
    }
  });
  return ok_status();
}

ops::KernelDef recurrent_kernel(ops::RecurrentKind kind) {
  ops::KernelDef def;
  def.op_type = std::string(ops::recurrent_kind_name(kind));
  def.since_version = 14;
  def.input_dtypes = {{DType::kF32}, {DType::kF32}, {DType::kF32}, {DType::kF32},
                      {DType::kI32, DType::kI64}, {DType::kF32}, {DType::kF32}, {DType::kF32}};
  def.name = fmt::format("{}F32", def.op_type);
  def.description = "f32 recurrence, one task per (direction, batch row); layouts 0/1, sequence_lens, clip";
  def.parse_attrs = [kind](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_recurrent_params(node, kind));
  };
  def.launch = ops::cpu_launch(def.name, compute_recurrent);
  return def;
}

// ---- DFT / STFT -------------------------------------------------------------------------------------------------

// cos/sin of 2π·m/n for m in [0, n): the twiddles of a length-n transform.
void twiddles(int64_t n, std::vector<double>& cos_table, std::vector<double>& sin_table) {
  cos_table.resize(static_cast<size_t>(n));
  sin_table.resize(static_cast<size_t>(n));
  for (int64_t m = 0; m < n; ++m) {
    const double angle = 2.0 * std::numbers::pi * static_cast<double>(m) / static_cast<double>(n);
    cos_table[static_cast<size_t>(m)] = std::cos(angle);
    sin_table[static_cast<size_t>(m)] = std::sin(angle);
  }
}

Status compute_dft(const ops::CpuComputeContext& ctx) {
  const auto& params = ctx.params<ops::DftParams>();
  const ops::TensorRef& x = ctx.input(0);
  const ops::TensorRef& y = ctx.output(0);
  HXRT_ASSIGN_OR_RETURN(const int axis, ops::dft_axis(params.axis, x.shape.rank()));
  const int64_t components = x.shape.dim(-1);
  if (components != 1 && components != 2) {
    return invalid_argument("DFT: input {} must end in 1 (real) or 2 (complex)", x.shape);
  }
  const int64_t n = x.shape.dim(axis);
  int64_t length = n;
  if (ctx.has_input(1)) {
    HXRT_ASSIGN_OR_RETURN(length, index_scalar(ctx.input(1), "DFT", "dft_length"));
    if (length <= 0) return invalid_argument("DFT: dft_length must be > 0, got {}", length);
  }
  const int64_t bins = params.onesided ? length / 2 + 1 : length;
  const int64_t outer = ops::dims_product(x.shape, 0, axis);
  const int64_t inner = ops::dims_product(x.shape, axis + 1, x.shape.rank() - 1);
  if (y.shape.dim(axis) != bins || y.shape.dim(-1) != 2 || y.num_elements() != outer * bins * inner * 2) {
    return invalid_argument("DFT: output {} does not match input {} with {} bins", y.shape, x.shape, bins);
  }
  std::vector<double> cos_table;
  std::vector<double> sin_table;
  twiddles(length, cos_table, sin_table);
  const double sign = params.inverse ? 1.0 : -1.0;
  const double scale = params.inverse ? 1.0 / static_cast<double>(length) : 1.0;
  const int64_t used = std::min(n, length);  // samples past dft_length are dropped, missing ones are zeros
  const float* xp = x.data<const float>();
  float* yp = y.data<float>();
  ctx.pool().parallel_for(outer * inner, 1, [&](int64_t begin, int64_t end) {
    for (int64_t line = begin; line < end; ++line) {
      const int64_t o = line / inner;
      const int64_t i = line % inner;
      const float* in = xp + (o * n * inner + i) * components;
      float* out = yp + (o * bins * inner + i) * 2;
      for (int64_t k = 0; k < bins; ++k) {
        double re = 0.0;
        double im = 0.0;
        for (int64_t j = 0; j < used; ++j) {
          const size_t m = static_cast<size_t>((j * k) % length);
          const double a = in[j * inner * components];
          const double b = components == 2 ? in[j * inner * components + 1] : 0.0;
          re += a * cos_table[m] - sign * b * sin_table[m];
          im += sign * a * sin_table[m] + b * cos_table[m];
        }
        out[k * inner * 2] = static_cast<float>(re * scale);
        out[k * inner * 2 + 1] = static_cast<float>(im * scale);
      }
    }
  });
  return ok_status();
}

Status compute_stft(const ops::CpuComputeContext& ctx) {
  const auto& params = ctx.params<ops::StftParams>();
  const ops::TensorRef& signal = ctx.input(0);
  const ops::TensorRef& y = ctx.output(0);
  if (signal.shape.rank() != 3 || (signal.shape.dim(2) != 1 && signal.shape.dim(2) != 2)) {
    return invalid_argument("STFT: signal {} must be [batch, length, 1|2]", signal.shape);
  }
  HXRT_ASSIGN_OR_RETURN(const int64_t step, index_scalar(ctx.input(1), "STFT", "frame_step"));
  const float* window = ctx.has_input(2) ? ctx.input(2).data<const float>() : nullptr;
  int64_t frame_length = window != nullptr ? ctx.input(2).num_elements() : 0;
  if (ctx.has_input(3)) {
    HXRT_ASSIGN_OR_RETURN(const int64_t given, index_scalar(ctx.input(3), "STFT", "frame_length"));
    if (window != nullptr && given != frame_length) {
      return invalid_argument("STFT: frame_length {} differs from the window's length {}", given, frame_length);
    }
    frame_length = given;
  }
  const int64_t batch = signal.shape.dim(0);
  const int64_t length = signal.shape.dim(1);
  const int64_t components = signal.shape.dim(2);
  HXRT_ASSIGN_OR_RETURN(const int64_t frames, ops::stft_frames(length, step, frame_length));
  const int64_t bins = params.onesided ? frame_length / 2 + 1 : frame_length;
  if (!(y.shape == Shape{batch, frames, bins, 2})) {
    return invalid_argument("STFT: output {} is not [{}, {}, {}, 2]", y.shape, batch, frames, bins);
  }
  std::vector<double> cos_table;
  std::vector<double> sin_table;
  twiddles(frame_length, cos_table, sin_table);
  const float* xp = signal.data<const float>();
  float* yp = y.data<float>();
  ctx.pool().parallel_for(batch * frames, 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / frames;
      const int64_t f = task % frames;
      const float* in = xp + (b * length + f * step) * components;
      float* out = yp + task * bins * 2;
      for (int64_t k = 0; k < bins; ++k) {
        double re = 0.0;
        double im = 0.0;
        for (int64_t j = 0; j < frame_length; ++j) {
          const size_t m = static_cast<size_t>((j * k) % frame_length);
          const double w = window != nullptr ? window[j] : 1.0;
          const double a = in[j * components] * w;
          const double c = components == 2 ? in[j * components + 1] * w : 0.0;
          re += a * cos_table[m] + c * sin_table[m];
          im += c * cos_table[m] - a * sin_table[m];
        }
        out[k * 2] = static_cast<float>(re);
        out[k * 2 + 1] = static_cast<float>(im);
      }
    }
  });
  return ok_status();
}

// ---- Det --------------------------------------------------------------------------------------------------------

// Determinant of the m×m row-major matrix `a` by LU decomposition with partial pivoting, in double.
double determinant(const float* a, int64_t m, std::vector<double>& lu) {
  lu.assign(a, a + m * m);
  double det = 1.0;
  for (int64_t col = 0; col < m; ++col) {
    int64_t pivot = col;
    for (int64_t row = col + 1; row < m; ++row) {
      if (std::fabs(lu[row * m + col]) > std::fabs(lu[pivot * m + col])) pivot = row;
    }
    if (lu[pivot * m + col] == 0.0) return 0.0;
    if (pivot != col) {
      for (int64_t k = 0; k < m; ++k) std::swap(lu[pivot * m + k], lu[col * m + k]);
      det = -det;
    }
    const double diag = lu[col * m + col];
    det *= diag;
    for (int64_t row = col + 1; row < m; ++row) {
      const double factor = lu[row * m + col] / diag;
      for (int64_t k = col + 1; k < m; ++k) lu[row * m + k] -= factor * lu[col * m + k];
    }
  }
  return det;
}

Status compute_det(const ops::CpuComputeContext& ctx) {
  const ops::TensorRef& x = ctx.input(0);
  if (x.shape.rank() < 2 || x.shape.dim(-1) != x.shape.dim(-2)) {
    return invalid_argument("Det: X {} must be [..., M, M]", x.shape);
  }
  const int64_t m = x.shape.dim(-1);
  const int64_t count = ops::dims_product(x.shape, 0, x.shape.rank() - 2);
  const float* xp = x.data<const float>();
  float* yp = ctx.output(0).data<float>();
  ctx.pool().parallel_for(count, 16, [&](int64_t begin, int64_t end) {
    std::vector<double> lu;
    for (int64_t i = begin; i < end; ++i) yp[i] = static_cast<float>(determinant(xp + i * m * m, m, lu));
  });
  return ok_status();
}

// ---- NonMaxSuppression ------------------------------------------------------------------------------------------

Status compute_nms(const ops::CpuComputeContext& ctx) {
  const auto& params = ctx.params<ops::NmsParams>();
  const ops::TensorRef& boxes = ctx.input(0);
  const ops::TensorRef& scores = ctx.input(1);
  ops::NmsLimits limits;
  if (ctx.has_input(2)) {
    HXRT_ASSIGN_OR_RETURN(limits.max_output_boxes_per_class,
                          index_scalar(ctx.input(2), "NonMaxSuppression", "max_output_boxes_per_class"));
  }
  if (ctx.has_input(3)) {
    HXRT_ASSIGN_OR_RETURN(limits.iou_threshold, scalar_value<float>(ctx.input(3), "NonMaxSuppression", "iou_threshold"));
  }
  if (ctx.has_input(4)) {
    HXRT_ASSIGN_OR_RETURN(const float score, scalar_value<float>(ctx.input(4), "NonMaxSuppression", "score_threshold"));
    limits.score_threshold = score;
  }
  using Selected = std::vector<std::array<int64_t, 3>>;
  HXRT_ASSIGN_OR_RETURN(
      const Selected selected,
      ops::non_max_suppression({boxes.data<const float>(), static_cast<size_t>(boxes.num_elements())}, boxes.shape,
                               {scores.data<const float>(), static_cast<size_t>(scores.num_elements())},
                               scores.shape, limits, params.center_point_box));
  const ops::TensorRef& y = ctx.output(0);
  if (!(y.shape == Shape{static_cast<int64_t>(selected.size()), 3})) {
    return invalid_argument("NonMaxSuppression: output {} was planned, but {} boxes are selected", y.shape,
                            selected.size());
  }
  int64_t* out = y.data<int64_t>();
  for (size_t i = 0; i < selected.size(); ++i) std::copy(selected[i].begin(), selected[i].end(), out + i * 3);
  return ok_status();
}

// ---- Losses -----------------------------------------------------------------------------------------------------

// NegativeLogLikelihoodLoss (softmax = false) and SoftmaxCrossEntropyLoss (softmax = true) on
// input (n, classes, rest), target (n, rest), weight (classes).
Status compute_loss(const ops::CpuComputeContext& ctx, bool softmax) {
  const auto& params = ctx.params<ops::LossParams>();
  const std::string_view op = softmax ? "SoftmaxCrossEntropyLoss" : "NegativeLogLikelihoodLoss";
  const ops::TensorRef& x = ctx.input(0);
  const ops::TensorRef& target = ctx.input(1);
  if (x.shape.rank() < 2) return invalid_argument("{}: input {} must be [N, C, ...]", op, x.shape);
  const int64_t n = x.shape.dim(0);
  const int64_t classes = x.shape.dim(1);
  const int64_t rest = ops::dims_product(x.shape, 2, x.shape.rank());
  if (target.num_elements() != n * rest) {
    return invalid_argument("{}: target {} does not match input {}", op, target.shape, x.shape);
  }
  const float* weight = ctx.has_input(2) ? ctx.input(2).data<const float>() : nullptr;
  if (weight != nullptr && ctx.input(2).num_elements() != classes) {
    return invalid_argument("{}: weight {} must hold {} values", op, ctx.input(2).shape, classes);
  }
  // Targets first, so that a bad one fails before anything is written.
  for (int64_t i = 0; i < n * rest; ++i) {
    const int64_t t = index_at(target, i);
    if (params.ignore_index.has_value() && t == *params.ignore_index) continue;
    if (t < 0 || t >= classes) {
      return invalid_argument("{}: target[{}] = {} is outside [0, {}) and not ignore_index", op, i, t, classes);
    }
  }
  // Log-probabilities (n, classes, rest): the input itself, or its log_softmax over the classes.
  const float* xp = x.data<const float>();
  const float* log_prob = xp;
  std::vector<float> scratch;
  if (softmax) {
    float* lp = nullptr;
    if (has_output(ctx, 1)) {
      lp = ctx.output(1).data<float>();
    } else {
      scratch.resize(static_cast<size_t>(x.num_elements()));
      lp = scratch.data();
    }
    ctx.pool().parallel_for(n * rest, 64, [&](int64_t begin, int64_t end) {
      for (int64_t line = begin; line < end; ++line) {
        const int64_t base = (line / rest) * classes * rest + line % rest;
        double max = xp[base];
        for (int64_t c = 1; c < classes; ++c) max = std::max(max, static_cast<double>(xp[base + c * rest]));
        double sum = 0.0;
        for (int64_t c = 0; c < classes; ++c) sum += std::exp(xp[base + c * rest] - max);
        const double log_sum = max + std::log(sum);
        for (int64_t c = 0; c < classes; ++c) lp[base + c * rest] = static_cast<float>(xp[base + c * rest] - log_sum);
      }
    });
    log_prob = lp;
  }
  float* out = ctx.output(0).data<float>();
  double total = 0.0;
  double total_weight = 0.0;
  for (int64_t i = 0; i < n * rest; ++i) {
    const int64_t t = index_at(target, i);
    double loss = 0.0;
    if (!(params.ignore_index.has_value() && t == *params.ignore_index)) {
      const double w = weight != nullptr ? weight[t] : 1.0;
      loss = -static_cast<double>(log_prob[(i / rest) * classes * rest + t * rest + i % rest]) * w;
      total_weight += w;
    }
    if (params.reduction == ops::LossReduction::kNone) out[i] = static_cast<float>(loss);
    total += loss;
  }
  if (params.reduction == ops::LossReduction::kSum) out[0] = static_cast<float>(total);
  if (params.reduction == ops::LossReduction::kMean) {
    // Every target ignored: the mean of nothing, 0 as ONNX Runtime gives.
    out[0] = total_weight == 0.0 ? 0.0f : static_cast<float>(total / total_weight);
  }
  return ok_status();
}

ops::KernelDef loss_kernel(std::string op_type, bool softmax) {
  ops::KernelDef def;
  def.op_type = std::move(op_type);
  def.since_version = 13;
  def.input_dtypes = {{DType::kF32}, {DType::kI32, DType::kI64}, {DType::kF32}};
  def.name = fmt::format("{}F32", def.op_type);
  def.description = softmax ? "f32 log_softmax over axis 1, then the weighted NLL in double"
                            : "f32 weighted negative log-likelihood, sums in double";
  def.parse_attrs = [](const graph::Graph&, const graph::Node& node) {
    return ops::boxed(ops::parse_loss_params(node));
  };
  def.launch = ops::cpu_launch(def.name, [softmax](const ops::CpuComputeContext& ctx) {
    return compute_loss(ctx, softmax);
  });
  return def;
}

// ---- Dropout ----------------------------------------------------------------------------------------------------

Status compute_dropout(const ops::CpuComputeContext& ctx) {
  const ops::TensorRef& x = ctx.input(0);
  bool training = false;
  if (ctx.has_input(2)) {
    HXRT_ASSIGN_OR_RETURN(training, scalar_value<bool>(ctx.input(2), "Dropout", "training_mode"));
  }
  if (training) {
    float ratio = 0.5f;
    if (ctx.has_input(1)) {
      HXRT_ASSIGN_OR_RETURN(ratio, scalar_value<float>(ctx.input(1), "Dropout", "ratio"));
    }
    if (ratio != 0.0f) {
      return unimplemented("Dropout: training_mode = true with ratio {} (only inference is supported)", ratio);
    }
  }
  const int64_t n = x.num_elements();
  if (n == 0) return ok_status();
  std::memcpy(ctx.output(0).data<float>(), x.data<const float>(), static_cast<size_t>(n) * sizeof(float));
  if (has_output(ctx, 1)) std::fill_n(ctx.output(1).data<bool>(), n, true);
  return ok_status();
}

ops::KernelDef simple_kernel(std::string op_type, int since_version, std::vector<std::vector<DType>> dtypes,
                             std::string description, ops::ParseAttrsFn parse, ops::CpuComputeFn compute) {
  ops::KernelDef def;
  def.op_type = std::move(op_type);
  def.since_version = since_version;
  def.input_dtypes = std::move(dtypes);
  def.name = fmt::format("{}F32", def.op_type);
  def.description = std::move(description);
  def.parse_attrs = std::move(parse);
  def.launch = ops::cpu_launch(def.name, std::move(compute));
  return def;
}

}  // namespace

Status register_sequence(ops::KernelRegistry& registry) {
  for (ops::RecurrentKind kind : {ops::RecurrentKind::kRnn, ops::RecurrentKind::kGru, ops::RecurrentKind::kLstm}) {
    HXRT_RETURN_IF_ERROR(registry.add(recurrent_kernel(kind)));
  }
  const std::vector<DType> indices = {DType::kI32, DType::kI64};
  HXRT_RETURN_IF_ERROR(registry.add(simple_kernel(
      "DFT", 17, {{DType::kF32}, indices}, "direct O(n²) transform per line in double, twiddles tabled once",
      [](const graph::Graph&, const graph::Node& node) { return ops::boxed(ops::parse_dft_params(node)); },
      compute_dft)));
  HXRT_RETURN_IF_ERROR(registry.add(simple_kernel(
      "STFT", 17, {{DType::kF32}, indices, {DType::kF32}, indices}, "direct DFT of each windowed frame in double",
      [](const graph::Graph&, const graph::Node& node) { return ops::boxed(ops::parse_stft_params(node)); },
      compute_stft)));
  HXRT_RETURN_IF_ERROR(registry.add(simple_kernel(
      "Det", 11, {{DType::kF32}}, "LU with partial pivoting per matrix, in double",
      [](const graph::Graph&, const graph::Node&) { return ops::boxed(ops::NoParams{}); }, compute_det)));
  HXRT_RETURN_IF_ERROR(registry.add(simple_kernel(
      "NonMaxSuppression", 11, {{DType::kF32}, {DType::kF32}, {DType::kI64}, {DType::kF32}, {DType::kF32}},
      "ops::non_max_suppression, the function shape inference runs",
      [](const graph::Graph&, const graph::Node& node) { return ops::boxed(ops::parse_nms_params(node)); },
      compute_nms)));
  HXRT_RETURN_IF_ERROR(registry.add(loss_kernel("NegativeLogLikelihoodLoss", false)));
  HXRT_RETURN_IF_ERROR(registry.add(loss_kernel("SoftmaxCrossEntropyLoss", true)));
  return registry.add(simple_kernel(
      "Dropout", 13, {{DType::kF32}, {DType::kF32}, {DType::kBool}}, "inference: copy, mask all true",
      [](const graph::Graph&, const graph::Node& node) { return ops::boxed(ops::parse_dropout_params(node)); },
      compute_dropout));
}

}  // namespace hxrt::kernels::cpu
