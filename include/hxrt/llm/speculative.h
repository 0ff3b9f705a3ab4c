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
// The controller adapts k to the acceptance seen, so text that does not copy pays little: a fully accepted draft
// lets the next one grow, a partly accepted one shrinks k to what was accepted + 1, and a draft rejected outright
// halves k and pauses drafting for 1, 2, 4, ... up to 16 steps (reset by the next accepted token).
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

class DraftController {
 public:
  explicit DraftController(int draft_max = 0) : draft_max_(draft_max), k_(draft_max) {}
  // Tokens to draft at this step (0: do not draft now). Counts a paused step.
  int next_k();
  // What the step verified: `accepted` of `drafted` tokens (drafted > 0).
  void record(int drafted, int accepted);
  int k() const { return k_; }

 private:
  static constexpr int kMaxPause = 16;
  int draft_max_ = 0;
  int k_ = 0;
  int pause_ = 0;   // steps left without drafting
  int misses_ = 0;  // drafts rejected outright in a row
};

}  // namespace hxrt::llm
