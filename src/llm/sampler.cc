#include "hxrt/llm/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

namespace hxrt::llm {

Status SamplingParams::validate() const {
  if (!std::isfinite(temperature)) return invalid_argument("sampling: temperature {} must be finite", temperature);
  if (top_k < 0) return invalid_argument("sampling: top_k {} must be >= 0", top_k);
  if (!(top_p > 0.0f && top_p <= 1.0f)) return invalid_argument("sampling: top_p {} must be in (0, 1]", top_p);
  if (!(min_p >= 0.0f && min_p <= 1.0f)) return invalid_argument("sampling: min_p {} must be in [0, 1]", min_p);
  if (!(repetition_penalty > 0.0f)) {
    return invalid_argument("sampling: repetition_penalty {} must be > 0", repetition_penalty);
  }
  if (repeat_last_n < 0) return invalid_argument("sampling: repeat_last_n {} must be >= 0", repeat_last_n);
  for (const auto& [name, value] : {std::pair{"presence_penalty", presence_penalty},
                                    std::pair{"frequency_penalty", frequency_penalty}}) {
    if (!(value >= -2.0f && value <= 2.0f)) return invalid_argument("sampling: {} {} must be in [-2, 2]", name, value);
  }
  for (const auto& [token, bias] : logit_bias) {
    if (token < 0) return invalid_argument("sampling: logit_bias token {} must be >= 0", token);
    if (!(bias >= -100.0f && bias <= 100.0f)) {
      return invalid_argument("sampling: logit_bias {} of token {} must be in [-100, 100]", bias, token);
    }
  }
  return ok_status();
}

std::string SamplingParams::to_string() const {
  if (temperature <= 0.0f) return "greedy";
  return fmt::format("temp={} top_k={} top_p={} min_p={} repeat_penalty={} seed={}", temperature, top_k, top_p, min_p,
                     repetition_penalty, seed);
}

TokenLogprobs token_logprobs(std::span<const float> logits, int32_t token, int top) {
  float max_logit = -INFINITY;
  for (float x : logits) max_logit = std::max(max_logit, x);
  double sum = 0.0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - max_logit);
  const double log_z = static_cast<double>(max_logit) + std::log(sum);
  const auto logprob = [&](int32_t id) {
    return static_cast<float>(static_cast<double>(logits[static_cast<size_t>(id)]) - log_z);
  };
  TokenLogprobs out;
  out.sampled = {token, logprob(token)};
  top = std::clamp(top, 0, std::min(kMaxTopLogprobs, static_cast<int>(logits.size())));
  // The top set: a sorted run of at most `top` ids, more likely first, the lower id first among equals.
  const auto better = [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  std::vector<int32_t> best;
  best.reserve(static_cast<size_t>(top) + 1);
  for (int32_t id = 0; top > 0 && id < static_cast<int32_t>(logits.size()); ++id) {
    if (std::isnan(logits[static_cast<size_t>(id)])) continue;
    if (static_cast<int>(best.size()) == top && !better(id, best.back())) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), id, better), id);
    if (static_cast<int>(best.size()) > top) best.pop_back();
  }
  for (int32_t id : best) out.top.push_back({id, logprob(id)});
  return out;
}

int32_t argmax(std::span<const float> logits) {
  // The first index of the largest logit (NaNs never win; index 0 when logits[0] is NaN). Two passes that the
  // compiler vectorises — the maximum in 16 independent lanes, then the first index holding it — instead of one
  // compare-and-branch per logit: a decode step's greedy sampling over 49,152 logits was 2% of its time.
  const size_t n = logits.size();
  if (n == 0 || std::isnan(logits[0])) return 0;
  constexpr size_t kLanes = 16;
  float lane_max[kLanes];
  for (float& m : lane_max) m = logits[0];
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t l = 0; l < kLanes; ++l) lane_max[l] = logits[i + l] > lane_max[l] ? logits[i + l] : lane_max[l];
  }
  float best = logits[0];
  for (const float m : lane_max) best = m > best ? m : best;
  for (; i < n; ++i) best = logits[i] > best ? logits[i] : best;
  for (size_t j = 0; j < n; ++j) {
    if (logits[j] == best) return static_cast<int32_t>(j);
  }
  return 0;
}

int32_t Sampler::sample(std::span<float> logits, std::span<const int32_t> history) {
  for (const auto& [token, bias] : params_.logit_bias) {
    if (token >= 0 && static_cast<size_t>(token) < logits.size()) logits[static_cast<size_t>(token)] += bias;
  }
  // Penalties over the last repeat_last_n tokens, as llama.cpp's penalties sampler: the repetition penalty (CTRL's:
  // positive logits divided, negative multiplied, once per token), then OpenAI's frequency penalty (times the
  // token's count) and presence penalty (once for a token that occurs).
  const bool penalized =
      params_.repetition_penalty != 1.0f || params_.frequency_penalty != 0.0f || params_.presence_penalty != 0.0f;
  if (penalized && params_.repeat_last_n > 0) {
    const size_t n = std::min(history.size(), static_cast<size_t>(params_.repeat_last_n));
    std::unordered_map<int32_t, int> counts;
    for (auto it = history.end() - static_cast<std::ptrdiff_t>(n); it != history.end(); ++it) ++counts[*it];
    for (const auto& [token, count] : counts) {
      if (token < 0 || static_cast<size_t>(token) >= logits.size()) continue;
      float& l = logits[static_cast<size_t>(token)];
      if (params_.repetition_penalty != 1.0f) {
        l = l > 0.0f ? l / params_.repetition_penalty : l * params_.repetition_penalty;
      }
      l -= static_cast<float>(count) * params_.frequency_penalty + params_.presence_penalty;
    }
  }
  if (params_.temperature <= 0.0f) return argmax(logits);

  // Candidates sorted by logit (ties by id, so the order is deterministic), cut to top_k.
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  auto by_logit = [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  size_t keep = ids.size();
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < keep) {
    keep = static_cast<size_t>(params_.top_k);
    std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(keep), ids.end(), by_logit);
    ids.resize(keep);
  } else {
    std::sort(ids.begin(), ids.end(), by_logit);
  }
  // Softmax at temperature, in double.
  std::vector<double> p(ids.size());
  const double max_logit = logits[static_cast<size_t>(ids[0])];
  double sum = 0.0;
  for (size_t i = 0; i < ids.size(); ++i) {
    p[i] = std::exp((logits[static_cast<size_t>(ids[i])] - max_logit) / params_.temperature);
    sum += p[i];
  }
  for (double& x : p) x /= sum;
  // top-p: the smallest prefix whose mass reaches top_p.
  if (params_.top_p < 1.0f) {
    double mass = 0.0;
    size_t cut = p.size();
    for (size_t i = 0; i < p.size(); ++i) {
      mass += p[i];
      if (mass >= params_.top_p) {
        cut = i + 1;
        break;
      }
    }
    p.resize(cut);
  }
  // min-p: relative to the most likely token.
  if (params_.min_p > 0.0f) {
    const double threshold = params_.min_p * p[0];
    size_t cut = 1;
    while (cut < p.size() && p[cut] >= threshold) ++cut;
    p.resize(cut);
  }
  std::discrete_distribution<size_t> draw(p.begin(), p.end());
  return ids[draw(rng_)];
}

}  // namespace hxrt::llm
