#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <span>

#include <fmt/format.h>

#include "llm/engine_internal.h"

namespace hxrt::llm {

using engine_detail::log_softmax_at;

// Note [Grammar-constrained sampling]
// A request with a grammar (Request::grammar: GBNF, or the built-in JSON one) keeps a GrammarMatcher fed with the
// bytes of every token it generates. Sampling first draws as usual, then checks the token alone: its piece must
// keep the text a prefix of the grammar's language (TokenTrie::accepts), and an end-of-generation token is allowed
// only where the grammar may end (is_complete). Only when that token is refused is the mask of every allowed token
// built (one pruned walk of the vocabulary trie) and the draw repeated over the logits with the others at -inf.
// Both are exact: greedy gives the masked argmax, and a draw from p that is kept when allowed and else redrawn from
// p restricted to the allowed set yields each allowed x with probability p(x) + (1 - Z) · p(x) / Z = p(x) / Z, the
// masked distribution. So most steps pay one token's check, not the 30 ms a full mask costs inside a JSON string
// with a 50k vocabulary. Logprobs stay the raw model's (as for logit_bias). A grammar that allows no token here
// fails the request with FailedPrecondition.
bool Engine::grammar_allows(const Sequence& seq, int32_t token) const {
  if (std::find(options_.eos_tokens.begin(), options_.eos_tokens.end(), token) != options_.eos_tokens.end()) {
    return seq.grammar->is_complete();
  }
  return vocabulary_->accepts(*seq.grammar, token);
}

// Samples the next token of `seq` from `logits` (a decode step's row), appends it, and marks the sequence ending
// when the token ends it.
Result<int32_t> Engine::sample_next(Sequence& seq, std::span<const float> logits) {
  std::vector<float> row(logits.begin(), logits.end());
  if (seq.request.return_logits) seq.result.logits.push_back(row);
  int32_t token = seq.sampler.sample(row, seq.tokens);
  if (seq.grammar && !grammar_allows(seq, token)) {
    std::vector<uint8_t> allowed;
    vocabulary_->allowed_tokens(*seq.grammar, allowed);
    allowed.resize(logits.size(), 0);
    if (seq.grammar->is_complete()) {
      for (int32_t eos : options_.eos_tokens) allowed[static_cast<size_t>(eos)] = 1;
    }
    if (std::find(allowed.begin(), allowed.end(), uint8_t{1}) == allowed.end()) {
      return failed_precondition("request {}: its grammar allows no token after {} generated tokens", seq.id,
                                 seq.result.tokens.size());
    }
    row.assign(logits.begin(), logits.end());
    for (size_t t = 0; t < row.size(); ++t) {
      if (allowed[t] == 0) row[t] = -std::numeric_limits<float>::infinity();
    }
    token = seq.sampler.sample(row, seq.tokens);
    if (allowed[static_cast<size_t>(token)] == 0) {  // only -inf logits were left to draw from
      return internal_error("request {}: a masked draw gave token {}, which the grammar refuses", seq.id, token);
    }
  }
  // The token is allowed (checked once above): its bytes advance the matcher (an EOS token has none).
  if (seq.grammar) seq.grammar->accept(vocabulary_->token_bytes(token));
  if (seq.request.logprobs >= 0) seq.result.logprobs.push_back(token_logprobs(logits, token, seq.request.logprobs));
  seq.tokens.push_back(token);
  seq.result.tokens.push_back(token);
  if (seq.shadow_next < seq.shadow.size()) {  // Note [Speculative decoding]: a shadow draft's next token
    const bool matched = seq.shadow[seq.shadow_next] == token;
    seq.drafter.observe(matched);
    seq.shadow_next = matched ? seq.shadow_next + 1 : seq.shadow.size();
  }
  const bool eos = !seq.request.ignore_eos &&
                   std::find(options_.eos_tokens.begin(), options_.eos_tokens.end(), token) != options_.eos_tokens.end();
  const bool stop =
      std::find(seq.request.stop_tokens.begin(), seq.request.stop_tokens.end(), token) != seq.request.stop_tokens.end();
  // The callback sees the token at the next step (Note [Pipelined decode steps]).
  if (eos) {
    seq.ending = FinishReason::kEos;
  } else if (stop) {
    seq.ending = FinishReason::kStopToken;
  } else if (static_cast<int>(seq.result.tokens.size()) >= seq.request.max_new_tokens) {
    seq.ending = FinishReason::kLength;
  }
  return token;
}

// Note [Speculative decoding]: verifies the entry's draft row by row and returns how many tokens of the chunk keep
// their K/V (the pending token and the accepted draft tokens); the draft leaves `tokens`.
Result<int32_t> Engine::verify_draft(const BatchEntry& e, const StepOutputs& out) {
  Sequence& seq = *e.seq;
  const std::vector<int32_t> draft(seq.tokens.end() - e.drafted, seq.tokens.end());
  drop_draft(seq);
  const int64_t first_row = e.last_logit_row - e.drafted;
  int32_t emitted = 0;
  while (true) {
    HXRT_ASSIGN_OR_RETURN(const int32_t token,
                          sample_next(seq, out.logits_row(first_row + emitted, config_.vocab_size)));
    ++emitted;
    if (seq.ending || emitted > e.drafted || token != draft[static_cast<size_t>(emitted - 1)]) break;
  }
  const int32_t accepted = emitted - 1;
  seq.drafter.record(e.drafted, accepted);
  seq.result.drafted_tokens += e.drafted;
  seq.result.accepted_tokens += accepted;
  ++stats_.draft_steps;
  stats_.drafted_tokens += static_cast<uint64_t>(e.drafted);
  stats_.accepted_tokens += static_cast<uint64_t>(accepted);
  return emitted;
}

// Request::pooling: adds this chunk's rows (mean) or the prompt's last row (last) to the sequence's sum; once the
// prompt is done, the pooled embedding, L2-normalized.
void Engine::pool_embedding(const BatchEntry& e, const StepOutputs& out) {
  Sequence& seq = *e.seq;
  const size_t width = static_cast<size_t>(config_.n_embd);
  if (e.first_embed_row >= 0) {
    const int64_t rows = seq.request.pooling == Pooling::kMean ? e.count : 1;
    seq.embedding.resize(width, 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = out.embeddings.data() + static_cast<size_t>(e.first_embed_row + r) * width;
      for (size_t d = 0; d < width; ++d) seq.embedding[d] += row[d];
    }
    seq.embedded_rows += rows;
  }
  if (e.start + e.count < seq.result.prompt_tokens) return;
  double norm = 0.0;
  for (double& v : seq.embedding) {
    v /= static_cast<double>(std::max<int64_t>(1, seq.embedded_rows));
    norm += v * v;
  }
  norm = std::sqrt(norm);
  seq.result.embedding.resize(seq.embedding.size());
  for (size_t d = 0; d < seq.embedding.size(); ++d) {
    seq.result.embedding[d] = static_cast<float>(norm > 0.0 ? seq.embedding[d] / norm : 0.0);
  }
}

// One entry's share of a step's outputs: a draft verified, the K/V committed, prompt logprobs and embeddings taken,
// and the next token sampled once the prompt is done (forking the other choices of an n > 1 request first).
Status Engine::advance(const BatchEntry& e, StepOutputs& out) {
  Sequence& seq = *e.seq;
  if (seq.ending) {  // asked to stop while its forward ran (Note [Pipelined decode steps]): that work is dropped
    finish(seq, *seq.ending);
    return ok_status();
  }
  int32_t valid = e.count;  // tokens whose K/V is kept
  if (e.drafted > 0) {
    HXRT_ASSIGN_OR_RETURN(valid, verify_draft(e, out));
  }
  if (valid < e.count) {
    HXRT_RETURN_IF_ERROR(cache_->truncate(seq.id, e.start + valid));
    if (window_cache_) HXRT_RETURN_IF_ERROR(window_cache_->truncate(seq.id, e.start + valid));
  }
  HXRT_RETURN_IF_ERROR(cache_->commit(seq.id));
  if (window_cache_) {
    // The next tokens, from position `start + valid` on, see nothing before its window's start.
    HXRT_RETURN_IF_ERROR(window_cache_->commit(seq.id));
    HXRT_RETURN_IF_ERROR(window_cache_->release_before(seq.id, std::max(0, e.start + valid - max_window_ + 1)));
  }
  if (e.drafted > 0) {
    seq.computed += valid;
    out.decode += static_cast<uint64_t>(valid);
    return ok_status();
  }
  if (seq.request.prompt_logprobs) {
    // Rows last_logit_row - count + 1 .. last_logit_row are the chunk's positions start .. start + count - 1.
    const int64_t first_row = e.last_logit_row - (e.count - 1);
    for (int32_t j = 0; j < e.count; ++j) {
      const int32_t p = e.start + j;
      if (p + 1 >= seq.result.prompt_tokens) break;
      const std::span<const float> row = out.logits_row(first_row + j, config_.vocab_size);
      const int32_t next = seq.tokens[static_cast<size_t>(p + 1)];
      seq.result.prompt_logprobs[static_cast<size_t>(p)] = log_softmax_at(row, next);
      if (seq.request.logprobs >= 0) {
        seq.result.prompt_top_logprobs[static_cast<size_t>(p)] = token_logprobs(row, next, seq.request.logprobs);
      }
    }
  }
  if (seq.request.pooling != Pooling::kNone) pool_embedding(e, out);
  seq.computed += e.count;
  const bool decoding = seq.computed > seq.result.prompt_tokens && e.count == 1 && !seq.result.tokens.empty();
  (decoding ? out.decode : out.prefill) += static_cast<uint64_t>(e.count);
  if (seq.pending() > 0) return ok_status();  // prompt chunk: no token yet
  if (seq.request.max_new_tokens == 0) {      // a scored prompt or an embedding, and nothing to generate
    finish(seq, FinishReason::kLength);
    return ok_status();
  }
  const std::span<const float> row = out.logits_row(e.last_logit_row, config_.vocab_size);
  if (seq.forks > 0) {  // Note [Forked choices]: the other choices sample their first token from this row too
    HXRT_ASSIGN_OR_RETURN(const std::vector<Sequence*> choices, fork_choices(seq));
    for (Sequence* choice : choices) HXRT_RETURN_IF_ERROR(sample_next(*choice, row).status());
  }
  return sample_next(seq, row).status();
}

// Note [Forked choices]
// A request for n completions of one prompt (OpenAI's n) is one sequence until its prompt is computed: the prompt
// is prefilled once. At the step that computes its last prompt token, n - 1 more sequences start from it: each a
// fork in both caches (BlockManager::fork: every block shared, reference counted; the first append into the
// shared partial last block copies it first), with the prompt's state (computed, prompt logprobs, admission now),
// the seed + c, and its first token sampled from the same logits row as the first choice's. From then on they are
// ordinary sequences with ids id + 1 .. id + n - 1: scheduled, preempted and finished on their own. A choice's
// tokens and logits are those of a request submitted alone with its seed (the shared K/V is the same bits), so
// n = 4 greedy choices are four equal answers, as OpenAI's are. Until the fork the choices not started have no
// sequence: cancelling any of them cancels the request, and a request that ends before its prompt is computed
// (cancelled, past its deadline, failed) ends them all with it.
Result<std::vector<Engine::Sequence*>> Engine::fork_choices(Sequence& seq) {
  std::vector<Sequence*> choices;
  for (int c = 1; c <= seq.forks; ++c) {
    Request request = seq.request;
    request.n = 1;
    request.sampling.seed += static_cast<uint64_t>(c);
    auto choice = std::make_unique<Sequence>(std::move(request));
    choice->id = seq.id + c;
    choice->result = seq.result;
    choice->result.id = choice->id;
    choice->tokens = seq.tokens;
    choice->computed = seq.computed;
    choice->admission = ++admissions_;
    choice->speculative = seq.speculative;
    choice->drafter = DraftController(seq.speculative.draft_max, seq.speculative.adaptive);
    HXRT_RETURN_IF_ERROR(cache_->fork(seq.id, choice->id));
    if (window_cache_) HXRT_RETURN_IF_ERROR(window_cache_->fork(seq.id, choice->id));
    choices.push_back(choice.get());
    running_.push_back(std::move(choice));
  }
  seq.forks = 0;
  return choices;
}

}  // namespace hxrt::llm
