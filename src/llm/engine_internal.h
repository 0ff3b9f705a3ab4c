// What the engine's source files share (internal to src/llm/engine*.cc): a request's state as the engine schedules
// it (Sequence), one sequence's chunk of a step (BatchEntry), what a step's forward gave (StepOutputs), and small
// helpers. engine.cc has the engine's life, its scheduler and its steps; engine_outputs.cc what a step does with
// its outputs per sequence (sampling under a grammar, draft verification, embeddings, forked choices).
//
// Thread-safety: as Engine's (one thread at a time).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "hxrt/llm/engine.h"

namespace hxrt::llm {

namespace engine_detail {

inline constexpr std::string_view kHostLane = "engine (host)";

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// log softmax(row)[target], in double precision.
inline double log_softmax_at(std::span<const float> row, int32_t target) {
  const float max_logit = *std::max_element(row.begin(), row.end());
  double sum = 0.0;
  for (float x : row) sum += std::exp(static_cast<double>(x) - max_logit);
  return static_cast<double>(row[static_cast<size_t>(target)]) - max_logit - std::log(sum);
}

}  // namespace engine_detail

struct Engine::Sequence {
  RequestId id = -1;
  Request request;
  Sampler sampler;
  std::vector<int32_t> tokens;  // prompt + generated
  int32_t computed = 0;         // leading tokens whose K/V is in the cache
  uint64_t admission = 0;       // order of the last admission (preemption takes the newest)
  RequestResult result;
  // Note [Pipelined decode steps]: result.tokens[0 .. delivered) went through on_token; `ending` is the reason the
  // sequence finishes once they all have (EOS, stop token or length, known when the last one was sampled; a callback
  // asking to stop sets it at delivery); `in_flight` while a forward that includes it runs.
  size_t delivered = 0;
  std::optional<FinishReason> ending;
  bool in_flight = false;
  // Note [Speculative decoding]: the request's options, its draft-length controller, and how many of the last
  // `tokens` are an unverified draft (0 outside a step that verifies one).
  SpeculativeOptions speculative;
  DraftController drafter;
  int32_t drafted = 0;
  std::vector<int32_t> shadow;  // a draft not verified, compared with the tokens as they are sampled
  size_t shadow_next = 0;
  int forks = 0;  // Note [Forked choices]: choices (ids id + 1 .. id + forks) to start once the prompt is computed
  std::optional<GrammarMatcher> grammar;  // Request::grammar's state after the generated tokens
  std::vector<double> embedding;  // Request::pooling: the sum (mean) or the last of the prompt's hidden states
  int64_t embedded_rows = 0;

  explicit Sequence(Request r) : request(std::move(r)), sampler(request.sampling), tokens(request.prompt) {
    if (request.grammar) grammar.emplace(request.grammar);
  }
  int32_t pending() const { return static_cast<int32_t>(tokens.size()) - computed; }
};

struct Engine::BatchEntry {
  Sequence* seq = nullptr;
  int32_t start = 0;  // first token of the chunk (== seq->computed when scheduled)
  int32_t count = 0;
  int32_t drafted = 0;  // of `count`, the draft tokens after the pending one (Note [Speculative decoding])
  int64_t last_logit_row = 0;    // set by assemble_inputs: the logits row of the chunk's last token
  int64_t first_embed_row = -1;  // and its first embeddings row (Request::pooling), or -1
};

// What a step's forward gave, and its token counts as the entries advance.
struct Engine::StepOutputs {
  // (logit rows, vocab): the forward's f32 output read in place (16 sequences of Gemma 3's 262,144 logits are 16
  // MiB, which a copy per step costs 1-2 ms to write), or converted from another dtype.
  HostTensor logits_f32;
  std::vector<float> logits_converted;
  std::span<const float> logits;
  std::vector<float> embeddings;  // (embed rows, n_embd), with EngineOptions::embeddings
  uint64_t prefill = 0;
  uint64_t decode = 0;
  void take_logits(HostTensor tensor) {
    if (tensor.dtype == DType::kF32) {
      logits_f32 = std::move(tensor);
      logits = {reinterpret_cast<const float*>(logits_f32.bytes.data()), logits_f32.bytes.size() / sizeof(float)};
    } else {
      logits_converted = tensor.to_f32();
      logits = logits_converted;
    }
  }
  std::span<const float> logits_row(int64_t r, int vocab) const {
    return logits.subspan(static_cast<size_t>(r * vocab), static_cast<size_t>(vocab));
  }
};

}  // namespace hxrt::llm
