#include "hxrt/llm/speculative.h"

#include <algorithm>

namespace hxrt::llm {

Status SpeculativeOptions::validate() const {
  if (draft_max < 0 || draft_max > 64) return invalid_argument("speculative: draft_max {} must be in [0, 64]", draft_max);
  if (ngram_min < 1 || ngram_max < ngram_min || ngram_max > 16) {
    return invalid_argument("speculative: ngram_min {} and ngram_max {} must satisfy 1 <= ngram_min <= ngram_max <= 16",
                            ngram_min, ngram_max);
  }
  return ok_status();
}

std::vector<int32_t> prompt_lookup_draft(std::span<const int32_t> context, int ngram_min, int ngram_max,
                                         int max_tokens) {
  const auto length = static_cast<int64_t>(context.size());
  if (max_tokens <= 0) return {};
  for (int n = std::min<int64_t>(ngram_max, length - 1); n >= ngram_min; --n) {
    const std::span<const int32_t> suffix = context.subspan(static_cast<size_t>(length - n));
    // The latest occurrence that has a token after it: starts from length - n - 1 down.
    for (int64_t start = length - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), context.begin() + start)) continue;
      // What followed; past the context's end the draft continues from its own tokens (a period repeats).
      std::vector<int32_t> draft;
      for (int64_t i = start + n; static_cast<int>(draft.size()) < max_tokens; ++i) {
        draft.push_back(i < length ? context[static_cast<size_t>(i)] : draft[static_cast<size_t>(i - length)]);
      }
      return draft;
    }
  }
  return {};
}

StepCostModel::StepCostModel(int max_tokens) : mean_(static_cast<size_t>(std::max(1, max_tokens)) + 1, 0.0) {}

void StepCostModel::record(int n_tokens, double seconds) {
  if (n_tokens < 1 || n_tokens >= static_cast<int>(mean_.size()) || !(seconds > 0.0)) return;
  double& mean = mean_[static_cast<size_t>(n_tokens)];
  mean = mean == 0.0 ? seconds : 0.75 * mean + 0.25 * seconds;
}

double StepCostModel::seconds(int n_tokens) const {
  const int last = static_cast<int>(mean_.size()) - 1;
  const int n = std::clamp(n_tokens, 1, last);
  if (mean_[static_cast<size_t>(n)] > 0.0) return mean_[static_cast<size_t>(n)];
  // The nearest measured counts below and above n (or the two nearest on one side): their line at n.
  int below = 0, above = 0;
  for (int i = n - 1; i >= 1 && below == 0; --i) below = mean_[static_cast<size_t>(i)] > 0.0 ? i : 0;
  for (int i = n + 1; i <= last && above == 0; ++i) above = mean_[static_cast<size_t>(i)] > 0.0 ? i : 0;
  if (below == 0 && above != 0) {
    for (int i = above + 1; i <= last && below == 0; ++i) below = mean_[static_cast<size_t>(i)] > 0.0 ? i : 0;
  } else if (above == 0 && below != 0) {
    for (int i = below - 1; i >= 1 && above == 0; --i) above = mean_[static_cast<size_t>(i)] > 0.0 ? i : 0;
  }
  if (below == 0 || above == 0) {
    const int measured = below != 0 ? below : above;
    if (measured == 0) return 0.0;
    // One measured count: the prior's shape through it.
    const double t1 = mean_[static_cast<size_t>(measured)] / (1.0 + kPriorSlope * (measured - 1));
    return t1 * (1.0 + kPriorSlope * (n - 1));
  }
  const double t_below = mean_[static_cast<size_t>(below)], t_above = mean_[static_cast<size_t>(above)];
  const double t = t_below + (t_above - t_below) * (n - below) / (above - below);
  return std::max(t, std::min(t_below, t_above));
}

int DraftController::choose_k(const StepCostModel& costs, int batch_tokens, int available) const {
  const int limit = std::min(draft_max_, available);
  if (!adaptive_) return std::max(0, limit);
  const int base = std::max(1, batch_tokens);
  const double t0 = costs.seconds(base);
  if (limit <= 0 || t0 <= 0.0) return limit > 0 && t0 <= 0.0 ? 1 : 0;  // nothing measured yet: a probe of 1
  const double alpha = acceptance();
  double best_rate = base / t0 * 1.05;
  int best = 0;
  double expected = 1.0, power = 1.0;  // E(k) = 1 + α + ... + α^k
  for (int k = 1; k <= limit; ++k) {
    power *= alpha;
    expected += power;
    const double rate = (base - 1 + expected) / costs.seconds(base + k);
    if (rate > best_rate) {
      best_rate = rate;
      best = k;
    }
  }
  return best;
}

void DraftController::record(int drafted, int accepted) {
  for (int i = 0; i < std::min(accepted, drafted); ++i) observe(true);
  if (accepted < drafted) observe(false);
}

void DraftController::observe(bool matched) {
  accepted_ = accepted_ * kDecay + (matched ? 1.0 : 0.0);
  rejected_ = rejected_ * kDecay + (matched ? 0.0 : 1.0);
}

}  // namespace hxrt::llm
