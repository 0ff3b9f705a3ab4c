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

int DraftController::next_k() {
  if (draft_max_ <= 0) return 0;
  if (pause_ > 0) {
    --pause_;
    return 0;
  }
  return k_;
}

void DraftController::record(int drafted, int accepted) {
  if (drafted <= 0) return;
  if (accepted >= drafted) {
    k_ = std::min(draft_max_, std::max(k_, drafted) * 2);
    misses_ = 0;
  } else if (accepted > 0) {
    k_ = std::max(1, accepted + 1);
    misses_ = 0;
  } else {
    k_ = std::max(1, k_ / 2);
    ++misses_;
    pause_ = std::min(kMaxPause, 1 << std::min(misses_ - 1, 4));
  }
}

}  // namespace hxrt::llm
