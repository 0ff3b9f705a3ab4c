// Speculative decoding by prompt lookup: the drafter and the per-sequence controller the engine uses (Note
// [Speculative decoding] in llm/engine.cc says how a step verifies a draft).
//
// A draft is the continuation of the latest earlier occurrence of the sequence's last n tokens (n from ngram_max
// down to ngram_min), as prompt-lookup decoding (Saxena 2023) and llama.cpp's ngram drafting propose: when the
// output copies from the prompt (rewriting code or text with small edits, quoting, extraction), most of a draft is
// accepted, and one forward of 1 + k tokens, which reads the weights once as a decode step does, yields up to
// k + 1 tokens. Verification keeps the output exact: greedy output is token for token that of plain decoding and
// sampled output keeps the target distribution (a deterministic draft token d is accepted exactly when the token
// sampled from the model's distribution is d).
//
// How many tokens to draft is a trade the engine measures rather than guesses: a forward of 1 + k tokens costs more
// than a decode step (on a CPU whose quantized dot products are compute-bound, nearly k + 1 times as much; on one
// that is bound by memory, little more), and draft tokens are accepted at a rate that depends on the text. The
// controller picks the k that maximizes expected tokens per second from the sequence's acceptance rate and the
// engine's measured forward times (StepCostModel), so text that does not copy, or a machine where verification
// does not pay, drafts nothing and pays only the lookup.
//
// Thread-safety: plain values; a controller belongs to one sequence.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "hxrt/base/status.h"

namespace hxrt::llm {

struct SpeculativeOptions {
  int draft_max = 0;  // tokens drafted per step at most; 0: off
  int ngram_min = 1;  // the shortest suffix of the context matched
  int ngram_max = 3;  // the longest, tried first
  // true: the controller drafts the length that pays on this machine (DraftController::choose_k), possibly none;
  // false: as many tokens as the lookup finds, up to draft_max (llama.cpp's fixed --draft; benchmarks, tests that
  // must not depend on timing).
  bool adaptive = true;
  // InvalidArgument naming the field: draft_max in [0, 64], 1 <= ngram_min <= ngram_max <= 16.
  Status validate() const;
  bool enabled() const { return draft_max > 0; }
};

// `max_tokens` tokens that followed the latest earlier occurrence of the context's last n tokens, for the longest n
// in [ngram_min, ngram_max] that occurs earlier; where they reach the context's end the draft goes on copying
// itself (the occurrence was one period back, and the period repeats). Empty when no suffix occurs earlier (or
// max_tokens <= 0). O(context length × ngram_max).
std::vector<int32_t> prompt_lookup_draft(std::span<const int32_t> context, int ngram_min, int ngram_max,
                                         int max_tokens);

// The measured time of a forward by its token count: what a draft of k tokens costs a step of n tokens. Forwards
// of n tokens update an average per n (the newest weighted 1/4); a count never measured takes the nearest measured
// counts' line, or, with fewer than two, the prior T(n) = T(1) · (1 + kPriorSlope · (n - 1)) (optimistic enough
// that drafting is tried, and so measured).
class StepCostModel {
 public:
  static constexpr double kPriorSlope = 0.25;
  explicit StepCostModel(int max_tokens = 512);
  void record(int n_tokens, double seconds);
  // Seconds of a forward of n_tokens (>= 1); 0 before any forward was recorded.
  double seconds(int n_tokens) const;

 private:
  std::vector<double> mean_;  // by token count; 0: not measured
};

// Per sequence: the acceptance rate of its prompt-lookup drafts, and the draft length worth verifying.
// Acceptance is modelled as in the speculative decoding papers: each draft token is accepted with probability α
// given that those before it were, so k drafted tokens yield E(k) = 1 + α + ... + α^k tokens in a step. α is
// estimated from what the sequence did, active drafts and shadow ones alike: while it does not draft, the engine
// still looks a draft up and compares it with the tokens sampled (observe()), so a sequence whose text turns
// to copying is noticed without paying for a verification. Decayed counts (×0.95 per observation) follow changes.
class DraftController {
 public:
  explicit DraftController(int draft_max = 0, bool adaptive = true) : draft_max_(draft_max), adaptive_(adaptive) {}
  // The k in [0, min(draft_max, available)] that maximizes the batch's expected tokens per second when this
  // sequence drafts k tokens into a step of `batch_tokens` tokens otherwise (each of them one token out):
  // (batch_tokens - 1 + E(k)) / T(batch_tokens + k), drafting only when that beats k = 0 by 5%. Not adaptive: the
  // bound itself.
  int choose_k(const StepCostModel& costs, int batch_tokens, int available) const;
  // A verified draft: `accepted` of `drafted` tokens (drafted > 0).
  void record(int drafted, int accepted);
  // A shadow draft's next token against the token sampled.
  void observe(bool matched);
  double acceptance() const { return accepted_ / (accepted_ + rejected_); }
  int draft_max() const { return draft_max_; }

 private:
  static constexpr double kDecay = 0.95;
  int draft_max_ = 0;
  bool adaptive_ = true;
  double accepted_ = 1.0;  // a prior of α = 1/2
  double rejected_ = 1.0;
};

}  // namespace hxrt::llm
