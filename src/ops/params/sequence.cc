#include "hxrt/ops/params/sequence.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <numeric>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace hxrt::ops {

// ---- Recurrent ops ----------------------------------------------------------------------------------------------

std::string_view recurrent_kind_name(RecurrentKind kind) {
  switch (kind) {
    case RecurrentKind::kRnn: return "RNN";
    case RecurrentKind::kGru: return "GRU";
    case RecurrentKind::kLstm: return "LSTM";
  }
  return "";
}

int recurrent_gates(RecurrentKind kind) {
  switch (kind) {
    case RecurrentKind::kRnn: return 1;
    case RecurrentKind::kGru: return 3;
    case RecurrentKind::kLstm: return 4;
  }
  return 1;
}

int recurrent_activation_count(RecurrentKind kind) {
  switch (kind) {
    case RecurrentKind::kRnn: return 1;
    case RecurrentKind::kGru: return 2;
    case RecurrentKind::kLstm: return 3;
  }
  return 1;
}

namespace {

struct ActivationInfo {
  std::string_view name;
  RecurrentActivationKind kind;
  bool uses_alpha;
  bool uses_beta;
  float default_alpha;  // the defaults of the ONNX op of the same name
  float default_beta;
};

constexpr std::array<ActivationInfo, 11> kActivations = {{
    {"Relu", RecurrentActivationKind::kRelu, false, false, 0.0f, 0.0f},
    {"Tanh", RecurrentActivationKind::kTanh, false, false, 0.0f, 0.0f},
    {"Sigmoid", RecurrentActivationKind::kSigmoid, false, false, 0.0f, 0.0f},
    {"Affine", RecurrentActivationKind::kAffine, true, true, 1.0f, 0.0f},
    {"LeakyRelu", RecurrentActivationKind::kLeakyRelu, true, false, 0.01f, 0.0f},
    {"ThresholdedRelu", RecurrentActivationKind::kThresholdedRelu, true, false, 1.0f, 0.0f},
    {"ScaledTanh", RecurrentActivationKind::kScaledTanh, true, true, 1.0f, 1.0f},
    {"HardSigmoid", RecurrentActivationKind::kHardSigmoid, true, true, 0.2f, 0.5f},
    {"Elu", RecurrentActivationKind::kElu, true, false, 1.0f, 0.0f},
    {"Softsign", RecurrentActivationKind::kSoftsign, false, false, 0.0f, 0.0f},
    {"Softplus", RecurrentActivationKind::kSoftplus, false, false, 0.0f, 0.0f},
}};

const ActivationInfo* find_activation(std::string_view name) {
  for (const ActivationInfo& info : kActivations) {
    if (info.name.size() != name.size()) continue;
    // ONNX names are case-sensitive in the spec, but exporters write "tanh" as well as "Tanh".
    bool same = true;
    for (size_t i = 0; i < name.size(); ++i) {
      if (std::tolower(static_cast<unsigned char>(info.name[i])) != std::tolower(static_cast<unsigned char>(name[i]))) {
        same = false;
        break;
      }
    }
    if (same) return &info;
  }
  return nullptr;
}

std::string_view activation_kind_name(RecurrentActivationKind kind) {
  for (const ActivationInfo& info : kActivations) {
    if (info.kind == kind) return info.name;
  }
  return "";
}

}  // namespace

float RecurrentActivation::apply(float x) const {
  switch (kind) {
    case RecurrentActivationKind::kRelu: return x > 0.0f ? x : 0.0f;
    case RecurrentActivationKind::kTanh: return std::tanh(x);
    case RecurrentActivationKind::kSigmoid: return 1.0f / (1.0f + std::exp(-x));
    case RecurrentActivationKind::kAffine: return alpha * x + beta;
    case RecurrentActivationKind::kLeakyRelu: return x >= 0.0f ? x : alpha * x;
    case RecurrentActivationKind::kThresholdedRelu: return x > alpha ? x : 0.0f;
    case RecurrentActivationKind::kScaledTanh: return alpha * std::tanh(beta * x);
    case RecurrentActivationKind::kHardSigmoid: return std::clamp(alpha * x + beta, 0.0f, 1.0f);
    case RecurrentActivationKind::kElu: return x >= 0.0f ? x : alpha * (std::exp(x) - 1.0f);
    case RecurrentActivationKind::kSoftsign: return x / (1.0f + std::fabs(x));
    case RecurrentActivationKind::kSoftplus: return std::log1p(std::exp(x));
  }
  return x;
}

std::string RecurrentParams::to_string() const {
  std::vector<std::string> names;
  names.reserve(activations.size());
  for (const RecurrentActivation& a : activations) names.emplace_back(activation_kind_name(a.kind));
  return fmt::format("hidden_size={}, direction={}, activations=[{}], clip={}, linear_before_reset={}, "
                     "input_forget={}, layout={}",
                     hidden_size, num_directions == 2 ? "bidirectional" : reverse ? "reverse" : "forward",
                     fmt::join(names, ","), clip.has_value() ? fmt::format("{}", *clip) : "none",
                     linear_before_reset ? 1 : 0, input_forget ? 1 : 0, batch_major ? 1 : 0);
}

Result<RecurrentParams> parse_recurrent_params(const graph::Node& node, RecurrentKind kind) {
  RecurrentParams params;
  params.kind = kind;
  Result<int64_t> hidden = node.attrs.get_int("hidden_size");
  if (!hidden.ok()) return attr_read_error(node, "hidden_size", hidden.status());
  if (*hidden <= 0) return attr_error(node, "hidden_size", fmt::format("must be > 0, got {}", *hidden));
  params.hidden_size = *hidden;

  Result<std::string> direction = node.attrs.get_string("direction", "forward");
  if (!direction.ok()) return attr_read_error(node, "direction", direction.status());
  if (*direction == "reverse") {
    params.reverse = true;
  } else if (*direction == "bidirectional") {
    params.num_directions = 2;
  } else if (*direction != "forward") {
    return attr_error(node, "direction",
                      fmt::format("must be \"forward\", \"reverse\" or \"bidirectional\", got \"{}\"", *direction));
  }

  Result<int64_t> layout = node.attrs.get_int("layout", 0);
  if (!layout.ok()) return attr_read_error(node, "layout", layout.status());
  if (*layout != 0 && *layout != 1) return attr_error(node, "layout", fmt::format("must be 0 or 1, got {}", *layout));
  params.batch_major = *layout == 1;

  if (node.attrs.has("clip")) {
    Result<double> clip = node.attrs.get_float("clip");
    if (!clip.ok()) return attr_read_error(node, "clip", clip.status());
    if (!(*clip > 0.0) || !std::isfinite(*clip)) {
      return attr_error(node, "clip", fmt::format("must be a finite value > 0, got {}", *clip));
    }
    params.clip = static_cast<float>(*clip);
  }
  if (kind == RecurrentKind::kGru) {
    Result<int64_t> lbr = node.attrs.get_int("linear_before_reset", 0);
    if (!lbr.ok()) return attr_read_error(node, "linear_before_reset", lbr.status());
    params.linear_before_reset = *lbr != 0;
  }
  if (kind == RecurrentKind::kLstm) {
    Result<int64_t> input_forget = node.attrs.get_int("input_forget", 0);
    if (!input_forget.ok()) return attr_read_error(node, "input_forget", input_forget.status());
    params.input_forget = *input_forget != 0;
  }

  // Activations: names per direction; alpha/beta lists consumed in order by the functions that take them.
  const int per_direction = recurrent_activation_count(kind);
  std::vector<std::string> names;
  switch (kind) {
    case RecurrentKind::kRnn: names = {"Tanh"}; break;
    case RecurrentKind::kGru: names = {"Sigmoid", "Tanh"}; break;
    case RecurrentKind::kLstm: names = {"Sigmoid", "Tanh", "Tanh"}; break;
  }
  if (node.attrs.has("activations")) {
    Result<std::vector<std::string>> given = node.attrs.get_strings("activations");
    if (!given.ok()) return attr_read_error(node, "activations", given.status());
    names = *given;
  }
  const size_t expected = static_cast<size_t>(per_direction * params.num_directions);
  if (names.size() == static_cast<size_t>(per_direction) && params.num_directions == 2) {
    const std::vector<std::string> once = names;
    names.insert(names.end(), once.begin(), once.end());
  }
  if (names.size() != expected) {
    return attr_error(node, "activations",
                      fmt::format("must list {} functions ({} per direction), got {}", expected, per_direction,
                                  names.size()));
  }
  Result<std::vector<double>> alphas = node.attrs.get_floats("activation_alpha");
  if (!alphas.ok() && node.attrs.has("activation_alpha")) {
    return attr_read_error(node, "activation_alpha", alphas.status());
  }
  Result<std::vector<double>> betas = node.attrs.get_floats("activation_beta");
  if (!betas.ok() && node.attrs.has("activation_beta")) return attr_read_error(node, "activation_beta", betas.status());
  const std::vector<double> alpha_list = alphas.ok() ? *alphas : std::vector<double>();
  const std::vector<double> beta_list = betas.ok() ? *betas : std::vector<double>();
  size_t next_alpha = 0;
  size_t next_beta = 0;
  for (const std::string& name : names) {
    const ActivationInfo* info = find_activation(name);
    if (info == nullptr) {
      return attr_error(node, "activations", fmt::format("names an unknown function \"{}\"", name));
    }
    RecurrentActivation activation{info->kind, info->default_alpha, info->default_beta};
    if (info->uses_alpha && next_alpha < alpha_list.size()) {
      activation.alpha = static_cast<float>(alpha_list[next_alpha++]);
    }
    if (info->uses_beta && next_beta < beta_list.size()) activation.beta = static_cast<float>(beta_list[next_beta++]);
    params.activations.push_back(activation);
  }
  return params;
}

// ---- Spectral ops -----------------------------------------------------------------------------------------------

std::string DftParams::to_string() const {
  return fmt::format("axis={}, inverse={}, onesided={}", axis, inverse ? 1 : 0, onesided ? 1 : 0);
}

Result<DftParams> parse_dft_params(const graph::Node& node) {
  DftParams params;
  Result<int64_t> axis = node.attrs.get_int("axis", 1);
  if (!axis.ok()) return attr_read_error(node, "axis", axis.status());
  Result<int64_t> inverse = node.attrs.get_int("inverse", 0);
  if (!inverse.ok()) return attr_read_error(node, "inverse", inverse.status());
  Result<int64_t> onesided = node.attrs.get_int("onesided", 0);
  if (!onesided.ok()) return attr_read_error(node, "onesided", onesided.status());
  params.axis = *axis;
  params.inverse = *inverse != 0;
  params.onesided = *onesided != 0;
  if (params.inverse && params.onesided) {
    return attr_error(node, "onesided", "cannot be 1 with inverse = 1 (a onesided inverse DFT is not supported)");
  }
  return params;
}

Result<int> dft_axis(int64_t axis, int rank) {
  // Accepted: [-rank, -2] ∪ [0, rank - 2]; the last dim holds the real (and imaginary) part.
  if (rank < 2) return invalid_argument("DFT input must have rank >= 2, got {}", rank);
  const int64_t normalized = axis < 0 ? axis + rank : axis;
  if (normalized < 0 || normalized > rank - 2) {
    return invalid_argument("DFT axis {} is out of range for an input of rank {} (the last dim is not an axis)",
                            axis, rank);
  }
  return static_cast<int>(normalized);
}

std::string StftParams::to_string() const { return fmt::format("onesided={}", onesided ? 1 : 0); }

Result<StftParams> parse_stft_params(const graph::Node& node) {
  Result<int64_t> onesided = node.attrs.get_int("onesided", 1);
  if (!onesided.ok()) return attr_read_error(node, "onesided", onesided.status());
  StftParams params;
  params.onesided = *onesided != 0;
  return params;
}

Result<int64_t> stft_frames(int64_t signal_length, int64_t frame_step, int64_t frame_length) {
  if (frame_step <= 0) return invalid_argument("STFT frame_step must be > 0, got {}", frame_step);
  if (frame_length <= 0) return invalid_argument("STFT frame_length must be > 0, got {}", frame_length);
  if (frame_length > signal_length) {
    return invalid_argument("STFT frame_length {} is longer than the signal ({})", frame_length, signal_length);
  }
  return 1 + (signal_length - frame_length) / frame_step;
}

// ---- NonMaxSuppression ------------------------------------------------------------------------------------------

std::string NmsParams::to_string() const { return fmt::format("center_point_box={}", center_point_box ? 1 : 0); }

Result<NmsParams> parse_nms_params(const graph::Node& node) {
  Result<int64_t> center = node.attrs.get_int("center_point_box", 0);
  if (!center.ok()) return attr_read_error(node, "center_point_box", center.status());
  if (*center != 0 && *center != 1) {
    return attr_error(node, "center_point_box", fmt::format("must be 0 or 1, got {}", *center));
  }
  NmsParams params;
  params.center_point_box = *center == 1;
  return params;
}

namespace {

struct Corners {
  float y_min, x_min, y_max, x_max;
};

Corners box_corners(const float* box, bool center_point_box) {
  if (center_point_box) {  // [x_center, y_center, width, height]
    const float half_w = box[2] / 2.0f;
    const float half_h = box[3] / 2.0f;
    return {box[1] - half_h, box[0] - half_w, box[1] + half_h, box[0] + half_w};
  }
  // [y1, x1, y2, x2], either diagonal.
  return {std::min(box[0], box[2]), std::min(box[1], box[3]), std::max(box[0], box[2]), std::max(box[1], box[3])};
}

// True when the IoU of `a` and `b` exceeds `threshold`; empty boxes and disjoint ones never suppress.
bool suppresses(const Corners& a, const Corners& b, float threshold) {
  const float ix_min = std::max(a.x_min, b.x_min);
  const float iy_min = std::max(a.y_min, b.y_min);
  const float ix_max = std::min(a.x_max, b.x_max);
  const float iy_max = std::min(a.y_max, b.y_max);
  if (ix_max <= ix_min || iy_max <= iy_min) return false;
  const float intersection = (ix_max - ix_min) * (iy_max - iy_min);
  const float area_a = (a.x_max - a.x_min) * (a.y_max - a.y_min);
  const float area_b = (b.x_max - b.x_min) * (b.y_max - b.y_min);
  const float union_area = area_a + area_b - intersection;
  if (area_a <= 0.0f || area_b <= 0.0f || union_area <= 0.0f) return false;
  return intersection / union_area > threshold;
}

}  // namespace

Result<std::vector<std::array<int64_t, 3>>> non_max_suppression(std::span<const float> boxes, const Shape& boxes_shape,
                                                               std::span<const float> scores, const Shape& scores_shape,
                                                               const NmsLimits& limits, bool center_point_box) {
  if (boxes_shape.rank() != 3 || boxes_shape.dim(2) != 4) {
    return invalid_argument("NonMaxSuppression boxes must be [batch, boxes, 4], got {}", boxes_shape);
  }
  if (scores_shape.rank() != 3 || scores_shape.dim(0) != boxes_shape.dim(0) ||
      scores_shape.dim(2) != boxes_shape.dim(1)) {
    return invalid_argument("NonMaxSuppression scores {} must be [batch, classes, boxes] for boxes {}", scores_shape,
                            boxes_shape);
  }
  if (static_cast<int64_t>(boxes.size()) != boxes_shape.num_elements() ||
      static_cast<int64_t>(scores.size()) != scores_shape.num_elements()) {
    return invalid_argument("NonMaxSuppression: {} boxes values and {} scores for shapes {} and {}", boxes.size(),
                            scores.size(), boxes_shape, scores_shape);
  }
  const int64_t batches = boxes_shape.dim(0);
  const int64_t num_boxes = boxes_shape.dim(1);
  const int64_t classes = scores_shape.dim(1);
  const int64_t max_out = std::max<int64_t>(limits.max_output_boxes_per_class, 0);
  std::vector<std::array<int64_t, 3>> selected;
  if (max_out == 0) return selected;
  std::vector<Corners> corners(static_cast<size_t>(num_boxes));
  std::vector<int64_t> order;
  std::vector<int64_t> kept;
  for (int64_t b = 0; b < batches; ++b) {
    for (int64_t i = 0; i < num_boxes; ++i) {
      corners[static_cast<size_t>(i)] = box_corners(boxes.data() + (b * num_boxes + i) * 4, center_point_box);
    }
    for (int64_t c = 0; c < classes; ++c) {
      const float* class_scores = scores.data() + (b * classes + c) * num_boxes;
      order.clear();
      for (int64_t i = 0; i < num_boxes; ++i) {
        if (!limits.score_threshold.has_value() || class_scores[i] > *limits.score_threshold) order.push_back(i);
      }
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t x, int64_t y) { return class_scores[x] > class_scores[y]; });
      kept.clear();
      for (int64_t candidate : order) {
        if (static_cast<int64_t>(kept.size()) >= max_out) break;
        const Corners& box = corners[static_cast<size_t>(candidate)];
        const bool suppressed = std::any_of(kept.begin(), kept.end(), [&](int64_t k) {
          return suppresses(corners[static_cast<size_t>(k)], box, limits.iou_threshold);
        });
        if (!suppressed) kept.push_back(candidate);
      }
      for (int64_t k : kept) selected.push_back({b, c, k});
    }
  }
  return selected;
}

// ---- Losses -----------------------------------------------------------------------------------------------------

std::string LossParams::to_string() const {
  const std::string_view reduction_name = reduction == LossReduction::kNone  ? "none"
                                          : reduction == LossReduction::kSum ? "sum"
                                                                             : "mean";
  return fmt::format("reduction={}, ignore_index={}", reduction_name,
                     ignore_index.has_value() ? fmt::format("{}", *ignore_index) : "none");
}

Result<LossParams> parse_loss_params(const graph::Node& node) {
  LossParams params;
  Result<std::string> reduction = node.attrs.get_string("reduction", "mean");
  if (!reduction.ok()) return attr_read_error(node, "reduction", reduction.status());
  if (*reduction == "none") {
    params.reduction = LossReduction::kNone;
  } else if (*reduction == "sum") {
    params.reduction = LossReduction::kSum;
  } else if (*reduction == "mean") {
    params.reduction = LossReduction::kMean;
  } else {
    return attr_error(node, "reduction", fmt::format("must be \"none\", \"sum\" or \"mean\", got \"{}\"", *reduction));
  }
  if (node.attrs.has("ignore_index")) {
    Result<int64_t> ignore = node.attrs.get_int("ignore_index");
    if (!ignore.ok()) return attr_read_error(node, "ignore_index", ignore.status());
    params.ignore_index = *ignore;
  }
  return params;
}

// ---- Dropout ----------------------------------------------------------------------------------------------------

std::string DropoutParams::to_string() const {
  return seed.has_value() ? fmt::format("seed={}", *seed) : std::string("seed=none");
}

Result<DropoutParams> parse_dropout_params(const graph::Node& node) {
  DropoutParams params;
  if (node.attrs.has("seed")) {
    Result<int64_t> seed = node.attrs.get_int("seed");
    if (!seed.ok()) return attr_read_error(node, "seed", seed.status());
    params.seed = *seed;
  }
  return params;
}

}  // namespace hxrt::ops
