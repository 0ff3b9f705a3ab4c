// Params and shared algorithms of the recurrent, spectral and remaining ops (docs/onnx_ops/sequence.md): RNN, GRU,
// LSTM, DFT, STFT, Det, NonMaxSuppression, NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss and Dropout, all with
// ONNX semantics at opset <= 17.
//
// Thread-safety: params are immutable after parsing; the functions are reentrant.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hxrt/base/shape.h"
#include "hxrt/base/status.h"
#include "hxrt/graph/graph.h"
#include "hxrt/ops/params/common.h"

namespace hxrt::ops {

// ---- Recurrent ops ----------------------------------------------------------------------------------------------

enum class RecurrentKind : uint8_t { kRnn, kGru, kLstm };
std::string_view recurrent_kind_name(RecurrentKind kind);  // "RNN", "GRU", "LSTM"
// Gates per direction in W, R and half of B: RNN 1, GRU 3 (z r h), LSTM 4 (i o f c).
int recurrent_gates(RecurrentKind kind);
// Activation functions per direction: RNN 1 (f), GRU 2 (f g), LSTM 3 (f g h).
int recurrent_activation_count(RecurrentKind kind);

// The activation functions ONNX's recurrent ops accept, with their alpha/beta.
enum class RecurrentActivationKind : uint8_t {
  kRelu,
  kTanh,
  kSigmoid,
  kAffine,           // alpha·x + beta
  kLeakyRelu,        // x >= 0 ? x : alpha·x
  kThresholdedRelu,  // x > alpha ? x : 0
  kScaledTanh,       // alpha·tanh(beta·x)
  kHardSigmoid,      // clamp(alpha·x + beta, 0, 1)
  kElu,              // x >= 0 ? x : alpha·(exp(x) - 1)
  kSoftsign,         // x / (1 + |x|)
  kSoftplus,         // log(1 + exp(x))
};
struct RecurrentActivation {
  RecurrentActivationKind kind = RecurrentActivationKind::kTanh;
  float alpha = 0.0f;
  float beta = 0.0f;
  float apply(float x) const;
};

// RNN / GRU / LSTM (opset 14). `activations` holds recurrent_activation_count(kind) entries per direction, forward
// first (a list given for one direction of a bidirectional op is used for both).
struct RecurrentParams final : TypedParams<RecurrentParams> {
  static constexpr std::string_view kName = "RecurrentParams";
  RecurrentKind kind = RecurrentKind::kRnn;
  int64_t hidden_size = 0;       // required, > 0
  bool reverse = false;          // direction "reverse" (one direction, walked from the last step)
  int num_directions = 1;        // 2 for "bidirectional"
  std::vector<RecurrentActivation> activations;
  std::optional<float> clip;     // gate pre-activations clipped to [-clip, clip]; > 0
  bool linear_before_reset = false;  // GRU only
  bool input_forget = false;     // LSTM only: f = 1 - i
  bool batch_major = false;      // layout 1: X [batch, seq, input], Y [batch, seq, dirs, hidden]
  std::string to_string() const override;
};
Result<RecurrentParams> parse_recurrent_params(const graph::Node& node, RecurrentKind kind);

// ---- Spectral ops -----------------------------------------------------------------------------------------------

// DFT (opset 17): complex or real signal [batch, ..., n, ..., 1|2], transform along `axis`.
struct DftParams final : TypedParams<DftParams> {
  static constexpr std::string_view kName = "DftParams";
  int64_t axis = 1;      // in [-r, -2] ∪ [0, r - 2] of the input's rank r
  bool inverse = false;  // the inverse transform, scaled by 1/n
  bool onesided = false; // only the floor(n/2) + 1 non-redundant bins (forward, real or complex input)
  std::string to_string() const override;
};
Result<DftParams> parse_dft_params(const graph::Node& node);
// `axis` of a rank-`rank` DFT input, normalised (the last, complex dim is not an axis).
Result<int> dft_axis(int64_t axis, int rank);

// STFT (opset 17): signal [batch, length, 1|2], frames of frame_length every frame_step, output
// [batch, frames, bins, 2].
struct StftParams final : TypedParams<StftParams> {
  static constexpr std::string_view kName = "StftParams";
  bool onesided = true;
  std::string to_string() const override;
};
Result<StftParams> parse_stft_params(const graph::Node& node);
// Frames of an STFT: 1 + (length - frame_length) / frame_step; InvalidArgument for bad values.
Result<int64_t> stft_frames(int64_t signal_length, int64_t frame_step, int64_t frame_length);

// ---- NonMaxSuppression ------------------------------------------------------------------------------------------

struct NmsParams final : TypedParams<NmsParams> {
  static constexpr std::string_view kName = "NmsParams";
  bool center_point_box = false;  // boxes are [x_center, y_center, width, height] instead of [y1, x1, y2, x2]
  std::string to_string() const override;
};
Result<NmsParams> parse_nms_params(const graph::Node& node);

// The thresholds of one NonMaxSuppression call (its scalar inputs).
struct NmsLimits {
  int64_t max_output_boxes_per_class = 0;  // 0 selects nothing
  float iou_threshold = 0.0f;              // a box is suppressed when its IoU with a selected one is greater
  std::optional<float> score_threshold;    // boxes scoring <= it are dropped
};
// ONNX NonMaxSuppression: boxes [B, N, 4], scores [B, C, N] → the selected (batch, class, box) triples, per batch
// and class in order of decreasing score (ties: lower box index first). The one definition shared by shape
// inference and the kernels.
Result<std::vector<std::array<int64_t, 3>>> non_max_suppression(std::span<const float> boxes, const Shape& boxes_shape,
                                                               std::span<const float> scores, const Shape& scores_shape,
                                                               const NmsLimits& limits, bool center_point_box);

// ---- Losses -----------------------------------------------------------------------------------------------------

enum class LossReduction : uint8_t { kNone, kSum, kMean };
// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (opset 13).
struct LossParams final : TypedParams<LossParams> {
  static constexpr std::string_view kName = "LossParams";
  LossReduction reduction = LossReduction::kMean;
  std::optional<int64_t> ignore_index;
  std::string to_string() const override;
};
Result<LossParams> parse_loss_params(const graph::Node& node);

// ---- Dropout ----------------------------------------------------------------------------------------------------

// Dropout (opset 13) in inference: `seed` is read and kept for to_string() only.
struct DropoutParams final : TypedParams<DropoutParams> {
  static constexpr std::string_view kName = "DropoutParams";
  std::optional<int64_t> seed;
  std::string to_string() const override;
};
Result<DropoutParams> parse_dropout_params(const graph::Node& node);

}  // namespace hxrt::ops
