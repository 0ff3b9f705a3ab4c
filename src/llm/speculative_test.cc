// Speculative decoding (Note [Speculative decoding] in engine.cc): the prompt-lookup drafter, the draft-length
// controller, and the engine's verification on small random-weight Llama models — the same tokens, logits and
// seeded samples as plain decoding, bit for bit, alone and batched, under a tight step or KV budget, ending on EOS
// or max_new_tokens inside a draft.
#include "hxrt/llm/speculative.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <vector>

#include "hxrt/hal/driver.h"
#include "hxrt/llm/engine.h"
#include "llm/testing/tiny_llama.h"

namespace hxrt::llm {
namespace {

using testing::TinyLlama;
using testing::TinyLlamaSpec;

TEST(PromptLookupDraftTest, TakesWhatFollowedTheLatestEarlierOccurrenceOfTheLongestSuffix) {
  // Suffix {1, 2, 3} occurs at 0 and 5: the later one wins, and what followed it is the draft.
  const std::vector<int32_t> context = {1, 2, 3, 4, 9, 1, 2, 3, 7, 8, 6, 1, 2, 3};
  EXPECT_EQ(prompt_lookup_draft(context, 1, 3, 2), (std::vector<int32_t>{7, 8}));
  // Past the context's end the draft repeats itself: the occurrence was one period back.
  EXPECT_EQ(prompt_lookup_draft(context, 1, 3, 10), (std::vector<int32_t>{7, 8, 6, 1, 2, 3, 7, 8, 6, 1}));
  // The longest matching suffix first: {5, 3} occurs once (followed by 4), while {3} alone last occurred before 9.
  const std::vector<int32_t> longer = {5, 3, 4, 4, 3, 9, 5, 3};
  EXPECT_EQ(prompt_lookup_draft(longer, 1, 2, 1), (std::vector<int32_t>{4}));
  EXPECT_EQ(prompt_lookup_draft(longer, 1, 1, 1), (std::vector<int32_t>{9}));
  // No earlier occurrence of any suffix of the allowed lengths, no room, too short a context.
  EXPECT_TRUE(prompt_lookup_draft(std::vector<int32_t>{1, 2, 3, 4}, 1, 3, 4).empty());
  EXPECT_TRUE(prompt_lookup_draft(std::vector<int32_t>{5, 3, 4, 5, 3}, 3, 3, 4).empty());
  EXPECT_EQ(prompt_lookup_draft(std::vector<int32_t>{5, 3, 4, 5, 3}, 2, 3, 4), (std::vector<int32_t>{4, 5, 3, 4}));
  EXPECT_TRUE(prompt_lookup_draft(context, 1, 3, 0).empty());
  EXPECT_TRUE(prompt_lookup_draft(std::vector<int32_t>{7}, 1, 3, 4).empty());
  EXPECT_TRUE(prompt_lookup_draft(std::vector<int32_t>{}, 1, 3, 4).empty());
  // A run of one token: the suffix {7, 7, 7} last occurred one position earlier, and the run goes on.
  EXPECT_EQ(prompt_lookup_draft(std::vector<int32_t>{7, 7, 7, 7}, 1, 3, 3), (std::vector<int32_t>{7, 7, 7}));
}

TEST(StepCostModelTest, AveragesMeasuredCountsAndInterpolatesTheOthers) {
  StepCostModel costs(64);
  EXPECT_EQ(costs.seconds(1), 0.0);
  costs.record(1, 0.010);
  // One measured count: the prior's slope through it.
  EXPECT_DOUBLE_EQ(costs.seconds(5), 0.010 * (1.0 + 4 * StepCostModel::kPriorSlope));
  costs.record(33, 0.170);  // 5 ms a token: the line between the two
  EXPECT_NEAR(costs.seconds(5), 0.030, 1e-12);
  EXPECT_NEAR(costs.seconds(64), 0.010 + 0.005 * 63, 1e-12);  // past the last measured: the last two's line
  costs.record(1, 0.014);  // a new measurement weighs 1/4
  EXPECT_NEAR(costs.seconds(1), 0.011, 1e-12);
  costs.record(0, 1.0);    // out of range and non-positive times are ignored
  costs.record(65, 1.0);
  costs.record(2, -1.0);
  EXPECT_NEAR(costs.seconds(1), 0.011, 1e-12);
  EXPECT_NEAR(costs.seconds(1000), costs.seconds(64), 1e-12);
}

TEST(DraftControllerTest, DraftsWhatMaximizesExpectedTokensPerSecond) {
  StepCostModel memory_bound(64), between(64), compute_bound(64);
  for (int n = 1; n <= 17; ++n) {
    memory_bound.record(n, 0.010 * (1.0 + 0.05 * (n - 1)));  // weights read once whatever the rows
    between.record(n, 0.010 * (1.0 + 0.5 * (n - 1)));
    compute_bound.record(n, 0.010 * n);                      // every row costs a decode step
  }
  DraftController off(0);
  EXPECT_EQ(off.choose_k(memory_bound, 1, 16), 0);
  DraftController c(16);
  EXPECT_DOUBLE_EQ(c.acceptance(), 0.5);
  for (int i = 0; i < 40; ++i) c.observe(true);
  EXPECT_GT(c.acceptance(), 0.85);
  // Text that copies, memory-bound: long drafts; bounded by what the lookup found and draft_max.
  EXPECT_GE(c.choose_k(memory_bound, 1, 16), 8);
  EXPECT_EQ(c.choose_k(memory_bound, 1, 3), 3);
  EXPECT_GE(c.choose_k(between, 1, 16), 2);
  // Compute-bound: a token costs a step whether drafted or decoded, so no draft pays.
  EXPECT_EQ(c.choose_k(compute_bound, 1, 16), 0);
  // Rejections bring the rate down: where a verified token costs half a step, nothing is drafted; where it costs
  // 5% of one, a short draft still pays.
  for (int i = 0; i < 60; ++i) c.observe(i % 4 == 0);
  EXPECT_LT(c.acceptance(), 0.35);
  EXPECT_EQ(c.choose_k(between, 1, 16), 0);
  EXPECT_GE(c.choose_k(memory_bound, 1, 16), 1);
  EXPECT_LE(c.choose_k(memory_bound, 1, 16), 3);
  // In a batch of 8 decoding sequences a draft's tokens are weighed against the 8 tokens of the step.
  for (int i = 0; i < 40; ++i) c.observe(true);
  EXPECT_EQ(c.choose_k(between, 8, 16), 0);
  EXPECT_GE(c.choose_k(memory_bound, 8, 16), 8);
  // Verified drafts count their accepted tokens and the rejection that ended them.
  for (int i = 0; i < 10; ++i) c.record(8, 8);
  EXPECT_GT(c.acceptance(), 0.9);
  // Nothing measured yet: a probe of one token, so that the cost gets measured.
  EXPECT_EQ(c.choose_k(StepCostModel(64), 1, 16), 1);
  // Not adaptive: whatever the costs and the acceptance, as many as allowed.
  DraftController fixed(8, /*adaptive=*/false);
  for (int i = 0; i < 40; ++i) fixed.observe(false);
  EXPECT_EQ(fixed.choose_k(compute_bound, 1, 16), 8);
  EXPECT_EQ(fixed.choose_k(compute_bound, 1, 5), 5);
}

TEST(SpeculativeOptionsTest, OutOfRangeValuesAreInvalidArguments) {
  EXPECT_TRUE((SpeculativeOptions{}).validate().ok());
  EXPECT_TRUE((SpeculativeOptions{.draft_max = 16, .ngram_min = 2, .ngram_max = 4}).validate().ok());
  for (const SpeculativeOptions& bad : {SpeculativeOptions{.draft_max = -1}, SpeculativeOptions{.draft_max = 65},
                                        SpeculativeOptions{.draft_max = 4, .ngram_min = 0},
                                        SpeculativeOptions{.draft_max = 4, .ngram_min = 3, .ngram_max = 2},
                                        SpeculativeOptions{.draft_max = 4, .ngram_max = 17}}) {
    const Status status = bad.validate();
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.to_string();
  }
}

class SpeculativeEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(hal::register_builtin_drivers(drivers_).ok());
    session_ = std::move(runtime::Session::create(drivers_, "cpu")).value();
  }

  // Runs `requests` all at once (submitted in order) and returns their results in submission order.
  std::vector<RequestResult> run(const TinyLlama& model, EngineOptions options, const std::vector<Request>& requests,
                                 EngineStats* stats = nullptr) {
    Result<std::unique_ptr<Engine>> engine = Engine::create(*session_, model.file(), options);
    EXPECT_TRUE(engine.ok()) << engine.status().to_string();
    if (!engine.ok()) return {};
    for (const Request& r : requests) EXPECT_TRUE((*engine)->submit(r).ok());
    const Status status = (*engine)->run_until_idle();
    EXPECT_TRUE(status.ok()) << status.to_string();
    std::vector<RequestResult> done = (*engine)->take_finished();
    std::sort(done.begin(), done.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
    if (stats != nullptr) *stats = (*engine)->stats();
    return done;
  }

  hal::DriverRegistry drivers_;
  std::unique_ptr<runtime::Session> session_;
};

// Prompts that repeat themselves (a block of random tokens said twice or three times) and random ones.
std::vector<Request> copying_requests(int vocab, int max_new_tokens, const SamplingParams& sampling) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int32_t> token(0, vocab - 1);
  std::vector<Request> requests;
  for (int block : {6, 11, 23, 0, 40}) {
    Request r;
    const int repeats = block == 0 ? 1 : 1 + block % 3;
    std::vector<int32_t> unit(static_cast<size_t>(block == 0 ? 29 : block));
    for (int32_t& t : unit) t = token(rng);
    for (int k = 0; k < repeats; ++k) r.prompt.insert(r.prompt.end(), unit.begin(), unit.end());
    r.prompt.insert(r.prompt.end(), unit.begin(), unit.begin() + static_cast<std::ptrdiff_t>(unit.size() / 2));
    r.max_new_tokens = max_new_tokens;
    r.return_logits = true;
    r.logprobs = 2;
    r.sampling = sampling;
    requests.push_back(std::move(r));
  }
  return requests;
}

void expect_same_bits(const std::vector<RequestResult>& plain, const std::vector<RequestResult>& spec) {
  ASSERT_EQ(plain.size(), spec.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "request " << i);
    EXPECT_EQ(spec[i].tokens, plain[i].tokens);
    EXPECT_EQ(spec[i].finish, plain[i].finish);
    ASSERT_EQ(spec[i].logits.size(), plain[i].logits.size());
    for (size_t s = 0; s < plain[i].logits.size(); ++s) {
      ASSERT_EQ(spec[i].logits[s], plain[i].logits[s]) << "step " << s;
    }
    ASSERT_EQ(spec[i].logprobs.size(), plain[i].logprobs.size());
    for (size_t s = 0; s < plain[i].logprobs.size(); ++s) {
      EXPECT_EQ(spec[i].logprobs[s].sampled.logprob, plain[i].logprobs[s].sampled.logprob) << "step " << s;
    }
  }
}

TEST_F(SpeculativeEngineTest, GreedyAndSeededSamplingGiveThePlainTokensAndLogitsBitForBit) {
  for (DType weights : {DType::kF32, DType::kQ4_1}) {
    TinyLlamaSpec spec;
    spec.tied = false;  // a tied random model mostly repeats one token
    spec.weight_type = weights;
    spec.embedding_type = weights == DType::kF32 ? DType::kF32 : DType::kQ8_0;
    auto model = TinyLlama::create(spec);
    for (const SamplingParams& sampling :
         {SamplingParams{}, SamplingParams{.temperature = 0.7f, .top_k = 20, .repetition_penalty = 1.1f, .seed = 9}}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(weights) << ", " << sampling.to_string());
      const std::vector<Request> requests = copying_requests(spec.vocab, 40, sampling);
      // Alone and batched; with a step budget of 7 tokens the drafts are cut to what the budget leaves. Fixed
      // drafts (whatever the timing: drafts are made) and adaptive ones (as measured here: maybe none).
      for (int max_batch_tokens : {512, 7}) {
        for (bool adaptive : {false, true}) {
          EngineOptions plain;
          plain.kv_budget_tokens = 2048;
          plain.max_batch_tokens = max_batch_tokens;
          EngineOptions speculative = plain;
          speculative.speculative = SpeculativeOptions{.draft_max = 8, .adaptive = adaptive};
          EngineStats stats;
          expect_same_bits(run(*model, plain, requests), run(*model, speculative, requests, &stats));
          for (const Request& r : requests) {
            expect_same_bits(run(*model, plain, {r}), run(*model, speculative, {r}));
          }
          EXPECT_LE(stats.accepted_tokens, stats.drafted_tokens);
          if (adaptive) continue;
          // Random models loop and repeat their prompts: drafts are made and some accepted.
          EXPECT_GT(stats.draft_steps, 0u);
          EXPECT_GT(stats.accepted_tokens, 0u);
        }
      }
    }
  }
}

TEST_F(SpeculativeEngineTest, EndsOnEosStopTokensAndMaxNewTokensInsideADraftAsPlainDecodingDoes) {
  TinyLlamaSpec spec;
  spec.tied = false;  // a tied random model mostly repeats one token
  auto model = TinyLlama::create(spec);
  std::vector<Request> requests = copying_requests(spec.vocab, 33, SamplingParams{});
  EngineOptions plain;
  plain.kv_budget_tokens = 2048;
  const std::vector<RequestResult> free_running = run(*model, plain, requests);
  // Tokens that the plain run first generates after a few steps become EOS (engine) and stop tokens (request).
  const auto first_new_after = [](const std::vector<int32_t>& tokens, size_t step) -> std::vector<int32_t> {
    for (size_t i = step; i < tokens.size(); ++i) {
      if (std::find(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(i), tokens[i]) ==
          tokens.begin() + static_cast<std::ptrdiff_t>(i)) {
        return {tokens[i]};
      }
    }
    return {};
  };
  plain.eos_tokens = first_new_after(free_running[1].tokens, 6);
  ASSERT_FALSE(plain.eos_tokens.empty());
  for (size_t i = 0; i < requests.size(); ++i) requests[i].stop_tokens = first_new_after(free_running[i].tokens, 10);
  EngineOptions speculative = plain;
  speculative.speculative = SpeculativeOptions{.draft_max = 16, .ngram_min = 1, .ngram_max = 4, .adaptive = false};
  EngineStats stats;
  const std::vector<RequestResult> drafted = run(*model, speculative, requests, &stats);
  expect_same_bits(run(*model, plain, requests), drafted);
  EXPECT_GT(stats.accepted_tokens, 0u);
  int accepted = 0, stopped = 0;
  for (const RequestResult& r : drafted) {
    stopped += r.finish == FinishReason::kEos || r.finish == FinishReason::kStopToken ? 1 : 0;
    EXPECT_LE(r.tokens.size(), 33u);
    EXPECT_LE(r.accepted_tokens, r.drafted_tokens);
    accepted += r.accepted_tokens;
  }
  EXPECT_EQ(static_cast<uint64_t>(accepted), stats.accepted_tokens);
  EXPECT_GT(stopped, 0);
}

TEST_F(SpeculativeEngineTest, ATightKvBudgetGetsNoDraftsItCannotHoldAndThePlainTokens) {
  TinyLlamaSpec spec;
  spec.tied = false;
  spec.weight_type = DType::kQ8_0;
  spec.embedding_type = DType::kQ8_0;
  auto model = TinyLlama::create(spec);
  const std::vector<Request> requests = copying_requests(spec.vocab, 48, SamplingParams{});
  EngineOptions plain;
  plain.kv_budget_tokens = 160;  // 10 blocks of 16 for five sequences of up to 138 tokens: preemptions
  EngineOptions speculative = plain;
  speculative.speculative = SpeculativeOptions{.draft_max = 12, .adaptive = false};
  EngineStats plain_stats, spec_stats;
  const std::vector<RequestResult> a = run(*model, plain, requests, &plain_stats);
  const std::vector<RequestResult> b = run(*model, speculative, requests, &spec_stats);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].tokens, b[i].tokens) << "request " << i;
    EXPECT_EQ(a[i].finish, b[i].finish) << "request " << i;
  }
  EXPECT_GT(plain_stats.preemptions, 0u);
  EXPECT_GT(spec_stats.accepted_tokens, 0u);
}

TEST_F(SpeculativeEngineTest, BadOptionsAreInvalidArgumentsAtCreateAndSubmit) {
  auto model = TinyLlama::create(TinyLlamaSpec{});
  EngineOptions options;
  options.speculative.draft_max = 100;
  Result<std::unique_ptr<Engine>> bad = Engine::create(*session_, model->file(), options);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().to_string().find("draft_max"), std::string::npos) << bad.status().to_string();
  Result<std::unique_ptr<Engine>> engine = Engine::create(*session_, model->file(), {});
  ASSERT_TRUE(engine.ok());
  Request r;
  r.prompt = {1, 2, 3};
  r.speculative = SpeculativeOptions{.draft_max = 4, .ngram_min = 5, .ngram_max = 2};
  Result<RequestId> id = (*engine)->submit(r);
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hxrt::llm
