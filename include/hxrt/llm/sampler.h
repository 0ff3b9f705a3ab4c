// Token sampling from one row of logits: greedy, or temperature with top-k, top-p (nucleus) and min-p filters and
// a repetition penalty, from a per-request seeded generator.
//
// Order (llama.cpp's default chain, minus the rarely used samplers): logit bias → repetition, frequency and
// presence penalties over the last `repeat_last_n` tokens → greedy when temperature <= 0 → top-k → softmax at
// temperature → top-p → min-p → draw. A request's draws depend only on its seed and its own logits, never on what
// else runs in the batch.
//
// Thread-safety: a Sampler is thread-compatible (it owns its generator); use one per request.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "hxrt/base/status.h"

namespace hxrt::llm {

struct SamplingParams {
  float temperature = 0.0f;        // <= 0: greedy (argmax; the lowest id wins a tie)
  int top_k = 0;                   // 0: off
  float top_p = 1.0f;              // 1: off
  float min_p = 0.0f;              // 0: off; keeps tokens with p >= min_p * p_max
  float repetition_penalty = 1.0f; // 1: off; > 1 discourages tokens seen in the last repeat_last_n
  int repeat_last_n = 64;          // the window of every penalty
  // OpenAI's penalties over the same window, in [-2, 2]: a token's logit less frequency_penalty × its count and
  // presence_penalty once if it occurs (0: off).
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint64_t seed = 0;
  // Added to the logits of these tokens before everything else (OpenAI's logit_bias): finite, in [-100, 100];
  // -100 all but bans a token, +100 all but forces it. Ids outside the vocabulary are ignored by the sampler (the
  // engine refuses them at submit).
  std::vector<std::pair<int32_t, float>> logit_bias;

  // InvalidArgument naming the field for values outside their range.
  Status validate() const;
  std::string to_string() const;
};

class Sampler {
 public:
  explicit Sampler(SamplingParams params) : params_(params), rng_(params.seed) {}
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;
  Sampler(Sampler&&) = default;
  Sampler& operator=(Sampler&&) = default;

  // Picks the next token from `logits` (vocab entries; modified in place by the penalty) given the tokens so far.
  int32_t sample(std::span<float> logits, std::span<const int32_t> history);

  const SamplingParams& params() const { return params_; }

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
};

// The index of the largest value; the lowest index wins a tie.
int32_t argmax(std::span<const float> logits);

inline constexpr int kMaxTopLogprobs = 20;  // OpenAI's bound on top_logprobs

struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0.0f;  // natural log
};
// A sampled token's log-probability and the most likely tokens at that step, under the model's distribution:
// log_softmax of the raw logits (before the repetition penalty, temperature and filters; vLLM's and OpenAI's
// convention).
struct TokenLogprobs {
  TokenLogprob sampled;
  std::vector<TokenLogprob> top;  // the `top` most likely, most likely first (the lower id first on a tie)
};

// TokenLogprobs of `token` over `logits` with `top` (0..kMaxTopLogprobs) alternatives; the sum of exponentials in
// double. One pass over the logits for the log-sum-exp and one for the top set.
TokenLogprobs token_logprobs(std::span<const float> logits, int32_t token, int top);

}  // namespace hxrt::llm
