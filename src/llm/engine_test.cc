// The engine on small random-weight Llama models: logits against a double-precision reference, batch invariance,
// prefix sharing, preemption under a tight KV budget, sampling, and bad requests.
#include "hxrt/llm/engine.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <future>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <thread>

#include "hxrt/hal/driver.h"
#include "hxrt/kernels/builtin_registries.h"
#include "llm/testing/tiny_llama.h"

namespace hxrt::llm {
namespace {

using testing::TinyLlama;
using testing::TinyLlamaSpec;

double normalized_error(const std::vector<float>& actual, const std::vector<double>& expected) {
  double max_diff = 0.0, max_ref = 1.0;
  for (size_t i = 0; i < actual.size(); ++i) {
    max_diff = std::max(max_diff, std::fabs(actual[i] - expected[i]));
    max_ref = std::max(max_ref, std::fabs(expected[i]));
  }
  return max_diff / max_ref;
}

std::vector<int32_t> random_prompt(int n, int vocab, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> dist(0, vocab - 1);
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int32_t& t : p) t = dist(rng);
  return p;
}

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(hal::register_builtin_drivers(drivers_).ok());
    session_ = std::move(runtime::Session::create(drivers_, "cpu")).value();
  }
  std::unique_ptr<Engine> engine(const TinyLlama& model, EngineOptions options = {}) {
    Result<std::unique_ptr<Engine>> e = Engine::create(*session_, model.file(), options);
    EXPECT_TRUE(e.ok()) << e.status().to_string();
    return e.ok() ? std::move(e).value() : nullptr;
  }
  static Request greedy(std::vector<int32_t> prompt, int n, bool logits = false) {
    Request r;
    r.prompt = std::move(prompt);
    r.max_new_tokens = n;
    r.return_logits = logits;
    return r;
  }

  hal::DriverRegistry drivers_;
  std::unique_ptr<runtime::Session> session_;
};

TEST_F(EngineTest, LogitsOfEveryStepMatchTheDoubleReference) {
  struct Case {
    DType weights, embedding, kv;
    bool tied;
    double tolerance;
  };
  // f32 everywhere: only float rounding. Quantized weights: the activations are quantized to 8 bits per block of 32
  // before each integer dot product (as llama.cpp does), which costs about 1% of the logits' range.
  for (const Case& c : {Case{DType::kF32, DType::kF32, DType::kF32, true, 1e-4},
                        Case{DType::kF32, DType::kF32, DType::kF32, false, 1e-4},
                        Case{DType::kQ4_1, DType::kQ8_0, DType::kF16, true, 3e-2},
                        Case{DType::kQ8_0, DType::kQ8_0, DType::kF16, true, 3e-2}}) {
    TinyLlamaSpec spec;
    spec.weight_type = c.weights;
    spec.embedding_type = c.embedding;
    spec.tied = c.tied;
    auto model = TinyLlama::create(spec);
    EngineOptions options;
    options.kv_dtype = c.kv;
    options.kv_budget_tokens = 256;
    auto e = engine(*model, options);
    ASSERT_NE(e, nullptr);
    std::mt19937 rng(2);
    const std::vector<int32_t> prompt = random_prompt(37, spec.vocab, rng);
    Result<RequestResult> r = e->generate(greedy(prompt, 6, true));
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    ASSERT_EQ(r->tokens.size(), 6u);
    std::vector<int32_t> all = prompt;
    all.insert(all.end(), r->tokens.begin(), r->tokens.end() - 1);
    const std::vector<std::vector<double>> reference = model->reference_logits(all);
    for (size_t step = 0; step < r->logits.size(); ++step) {
      const size_t position = 36 + step;
      EXPECT_LT(normalized_error(r->logits[step], reference[position]), c.tolerance)
          << dtype_name(c.weights) << " step " << step;
    }
  }
}

TEST_F(EngineTest, ConcurrentRequestsAreBitIdenticalToSoloRuns) {
  TinyLlamaSpec spec;
  spec.weight_type = DType::kQ4_1;
  spec.embedding_type = DType::kQ8_0;
  auto model = TinyLlama::create(spec);
  std::mt19937 rng(5);
  std::vector<std::vector<int32_t>> prompts;
  for (int n : {1, 5, 17, 33, 48, 70}) prompts.push_back(random_prompt(n, spec.vocab, rng));
  std::vector<RequestResult> solo;
  {
    EngineOptions options;
    options.kv_budget_tokens = 512;
    auto e = engine(*model, options);
    for (const auto& p : prompts) {
      Result<RequestResult> r = e->generate(greedy(p, 12, true));
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      solo.push_back(std::move(r).value());
    }
  }
  // All at once, and again with a small step budget so prompts are prefilled in chunks next to decodes.
  for (int max_batch_tokens : {512, 7}) {
    EngineOptions options;
    options.kv_budget_tokens = 1024;
    options.max_batch_tokens = max_batch_tokens;
    auto e = engine(*model, options);
    for (const auto& p : prompts) ASSERT_TRUE(e->submit(greedy(p, 12, true)).ok());
    ASSERT_TRUE(e->run_until_idle().ok());
    std::vector<RequestResult> done = e->take_finished();
    ASSERT_EQ(done.size(), prompts.size());
    std::sort(done.begin(), done.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
    EXPECT_GT(e->stats().max_batch_sequences, 1);
    for (size_t i = 0; i < done.size(); ++i) {
      EXPECT_EQ(done[i].tokens, solo[i].tokens) << "request " << i << " with max_batch_tokens " << max_batch_tokens;
      ASSERT_EQ(done[i].logits.size(), solo[i].logits.size());
      for (size_t s = 0; s < done[i].logits.size(); ++s) {
        EXPECT_EQ(0, std::memcmp(done[i].logits[s].data(), solo[i].logits[s].data(), done[i].logits[s].size() * sizeof(float)))
            << "request " << i << " step " << s << " logits differ with max_batch_tokens " << max_batch_tokens;
      }
    }
  }
}

// Note [Forked choices]: n completions of one prompt prefill it once; choice c is bit for bit the request submitted
// alone with seed + c, greedy choices are equal, and cancelling an unforked choice cancels them all.
TEST_F(EngineTest, ForkedChoicesPrefillOnceAndEqualSoloRunsWithTheirSeeds) {
  TinyLlamaSpec spec;
  spec.tied = false;
  spec.weight_type = DType::kQ4_1;
  spec.embedding_type = DType::kQ8_0;
  auto model = TinyLlama::create(spec);
  std::mt19937 rng(3);
  const std::vector<int32_t> prompt = random_prompt(37, spec.vocab, rng);  // two full blocks and a partial one
  const SamplingParams sampled{.temperature = 0.9f, .top_k = 30, .seed = 41};
  for (const SamplingParams& sampling : {SamplingParams{}, sampled}) {
    EngineOptions options;
    options.kv_budget_tokens = 1024;
    auto e = engine(*model, options);
    Request r = greedy(prompt, 20, true);
    r.sampling = sampling;
    r.n = 4;
    r.logprobs = 1;
    Result<RequestId> id = e->submit(r);
    ASSERT_TRUE(id.ok()) << id.status().to_string();
    ASSERT_TRUE(e->run_until_idle().ok());
    EXPECT_EQ(e->stats().prefill_tokens, prompt.size()) << "the prompt is prefilled once";
    EXPECT_GE(e->cache().stats().cow_copies, 3u) << "each choice copied the shared partial block before writing";
    std::vector<RequestResult> done = e->take_finished();
    ASSERT_EQ(done.size(), 4u);
    std::sort(done.begin(), done.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
    for (int c = 0; c < 4; ++c) {
      SCOPED_TRACE(::testing::Message() << "choice " << c << ", temperature " << sampling.temperature);
      EXPECT_EQ(done[static_cast<size_t>(c)].id, *id + c);
      Request solo = greedy(prompt, 20, true);
      solo.sampling = sampling;
      solo.sampling.seed += static_cast<uint64_t>(c);
      solo.logprobs = 1;
      Result<RequestResult> alone = this->engine(*model, options)->generate(solo);
      ASSERT_TRUE(alone.ok()) << alone.status().to_string();
      EXPECT_EQ(done[static_cast<size_t>(c)].tokens, alone->tokens);
      ASSERT_EQ(done[static_cast<size_t>(c)].logits.size(), alone->logits.size());
      for (size_t s = 0; s < alone->logits.size(); ++s) {
        ASSERT_EQ(done[static_cast<size_t>(c)].logits[s], alone->logits[s]) << "step " << s;
      }
      if (sampling.temperature == 0.0f) {
        EXPECT_EQ(done[static_cast<size_t>(c)].tokens, done[0].tokens);
      }
    }
    if (sampling.temperature > 0.0f) {
      EXPECT_NE(done[1].tokens, done[2].tokens) << "seeds 42 and 43 differ";
    }
  }
  // Cancelling choice 2 before the fork (the prompt still waiting) ends all four; n is bounded.
  auto e = engine(*model, {});
  Request r = greedy(prompt, 8);
  r.n = 4;
  Result<RequestId> id = e->submit(r);
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(e->cancel(*id + 2).ok());
  EXPECT_TRUE(e->idle());
  std::vector<RequestResult> cancelled = e->take_finished();
  ASSERT_EQ(cancelled.size(), 4u);
  for (const RequestResult& c : cancelled) EXPECT_EQ(c.finish, FinishReason::kCancelled);
  EXPECT_EQ(e->cancel(*id + 4).code(), StatusCode::kNotFound);
  for (int n : {0, kMaxChoices + 1}) {
    r.n = n;
    EXPECT_EQ(e->submit(r).status().code(), StatusCode::kInvalidArgument) << n;
  }
}

// Request::pooling: the L2-normalized mean (or last) of the prompt rows' final hidden states, against the double
// reference; prompts prefilled in chunks, batched with generating requests, and after a prefix-cache hit.
TEST_F(EngineTest, PooledEmbeddingsAreTheNormalizedHiddenStatesOfThePrompt) {
  auto model = TinyLlama::create(TinyLlamaSpec{});
  std::mt19937 rng(8);
  const std::vector<int32_t> prompt = random_prompt(45, 160, rng);
  std::vector<std::vector<double>> hidden;
  model->reference_logits(prompt, &hidden);
  const auto normalized = [](std::vector<double> v) {
    double norm = 0.0;
    for (double x : v) norm += x * x;
    for (double& x : v) x /= std::sqrt(norm);
    return v;
  };
  std::vector<double> mean(hidden[0].size(), 0.0);
  for (const auto& h : hidden) {
    for (size_t d = 0; d < mean.size(); ++d) mean[d] += h[d] / static_cast<double>(hidden.size());
  }
  const std::vector<double> want_mean = normalized(mean), want_last = normalized(hidden.back());
  EngineOptions options;
  options.embeddings = true;
  options.max_batch_tokens = 16;  // the prompt in three chunks
  auto e = engine(*model, options);
  // A generating request first, so the prompt's blocks are cached and the embeddings run beside its decode.
  ASSERT_TRUE(e->submit(greedy(prompt, 20)).ok());
  for (int s = 0; s < 4; ++s) ASSERT_TRUE(e->step().ok());
  for (Pooling pooling : {Pooling::kMean, Pooling::kLast}) {
    Request r = greedy(prompt, 0);
    r.pooling = pooling;
    ASSERT_TRUE(e->submit(r).ok());
  }
  ASSERT_TRUE(e->run_until_idle().ok());
  std::vector<RequestResult> done = e->take_finished();
  std::sort(done.begin(), done.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  ASSERT_EQ(done.size(), 3u);
  for (const auto& [result, want] : {std::pair{&done[1], &want_mean}, std::pair{&done[2], &want_last}}) {
    ASSERT_EQ(result->embedding.size(), want->size());
    EXPECT_TRUE(result->tokens.empty());
    std::vector<float> got = result->embedding;
    EXPECT_LT(normalized_error(got, *want), 1e-4);
  }
  EXPECT_EQ(done[1].cached_prompt_tokens, 0) << "mean pooling recomputes every prompt row";
  // Without EngineOptions::embeddings, and with generation, pooling is refused.
  Request r = greedy(prompt, 0);
  r.pooling = Pooling::kMean;
  EXPECT_EQ(engine(*model, {})->submit(r).status().code(), StatusCode::kInvalidArgument);
  r.max_new_tokens = 3;
  EXPECT_EQ(e->submit(r).status().code(), StatusCode::kInvalidArgument);
}

// Request::prompt_logprobs (OpenAI's echo + logprobs, lm-eval's loglikelihood): every prompt token's log-probability
// and alternatives against the double reference, computed even when the prompt's blocks are in the prefix cache.
TEST_F(EngineTest, PromptLogprobsScoreEveryPromptTokenEvenAfterAPrefixHit) {
  auto model = TinyLlama::create(TinyLlamaSpec{});
  std::mt19937 rng(12);
  const std::vector<int32_t> prompt = random_prompt(40, 160, rng);
  const std::vector<std::vector<double>> reference = model->reference_logits(prompt);
  EngineOptions options;
  options.max_batch_tokens = 16;
  auto e = engine(*model, options);
  ASSERT_TRUE(e->generate(greedy(prompt, 2)).ok());  // the prompt's full blocks are cached now
  Request r = greedy(prompt, 0);
  r.prompt_logprobs = true;
  r.logprobs = 3;
  Result<RequestResult> scored = e->generate(r);
  ASSERT_TRUE(scored.ok()) << scored.status().to_string();
  EXPECT_EQ(scored->cached_prompt_tokens, 0);
  ASSERT_EQ(scored->prompt_logprobs.size(), prompt.size() - 1);
  ASSERT_EQ(scored->prompt_top_logprobs.size(), prompt.size() - 1);
  for (size_t i = 0; i + 1 < prompt.size(); ++i) {
    const std::vector<double>& row = reference[i];
    const double max = *std::max_element(row.begin(), row.end());
    double sum = 0.0;
    for (double x : row) sum += std::exp(x - max);
    const double want = row[static_cast<size_t>(prompt[i + 1])] - max - std::log(sum);
    const double tolerance = 1e-4 * std::max(1.0, std::fabs(want));  // f32 rounding of logits near -60
    EXPECT_NEAR(scored->prompt_logprobs[i], want, tolerance) << "position " << i;
    const TokenLogprobs& top = scored->prompt_top_logprobs[i];
    EXPECT_EQ(top.sampled.token, prompt[i + 1]);
    EXPECT_NEAR(top.sampled.logprob, want, tolerance);
    ASSERT_EQ(top.top.size(), 3u);
    EXPECT_EQ(top.top[0].token, static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin()));
  }
}

TEST_F(EngineTest, SharedPrefixesReuseCachedBlocks) {
  auto model = TinyLlama::create(TinyLlamaSpec{});
  EngineOptions options;
  options.kv_budget_tokens = 256;
  auto e = engine(*model, options);
  std::mt19937 rng(9);
  std::vector<int32_t> prefix = random_prompt(40, model->spec().vocab, rng);
  std::vector<int32_t> a = prefix, b = prefix;
  a.push_back(3);
  b.push_back(4);
  Result<RequestResult> first = e->generate(greedy(a, 4));
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->cached_prompt_tokens, 0);
  Result<RequestResult> second = e->generate(greedy(b, 4));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->cached_prompt_tokens, 32) << "two full blocks of 16 of the shared 40-token prefix";
  EXPECT_EQ(e->cache().stats().prefix_hits, 1u);
  // The prefix hit changes nothing in the result.
  auto fresh = engine(*model, options);
  Result<RequestResult> alone = fresh->generate(greedy(b, 4));
  ASSERT_TRUE(alone.ok());
  EXPECT_EQ(alone->tokens, second->tokens);
}

TEST_F(EngineTest, ExhaustedBudgetPreemptsAndRecomputes) {
  auto model = TinyLlama::create(TinyLlamaSpec{});
  std::mt19937 rng(4);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 4; ++i) prompts.push_back(random_prompt(20 + 3 * i, model->spec().vocab, rng));
  std::vector<std::vector<int32_t>> solo;
  {
    auto e = engine(*model, EngineOptions{.kv_budget_tokens = 512});
    for (const auto& p : prompts) solo.push_back(e->generate(greedy(p, 20)).value().tokens);
  }
  // 96 token slots for four requests of 40-49 tokens each: they cannot all stay resident.
  auto e = engine(*model, EngineOptions{.kv_budget_tokens = 96});
  for (const auto& p : prompts) ASSERT_TRUE(e->submit(greedy(p, 20)).ok());
  ASSERT_TRUE(e->run_until_idle().ok());
  std::vector<RequestResult> done = e->take_finished();
  std::sort(done.begin(), done.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  ASSERT_EQ(done.size(), prompts.size());
  EXPECT_GT(e->stats().preemptions, 0u);
  for (size_t i = 0; i < done.size(); ++i) {
    EXPECT_EQ(done[i].finish, FinishReason::kLength) << done[i].status.to_string();
    EXPECT_EQ(done[i].tokens, solo[i]) << "request " << i << " after " << done[i].preemptions << " preemptions";
  }
  const kv::KvCacheStats stats = e->cache().stats();
  EXPECT_EQ(stats.used_blocks, 0) << "every finished sequence released its blocks";
}

TEST_F(EngineTest, ARequestLargerThanTheBudgetFailsAndTheEngineGoesOn) {
  auto model = TinyLlama::create(TinyLlamaSpec{});
  auto e = engine(*model, EngineOptions{.kv_budget_tokens = 32});
  std::mt19937 rng(1);
  Result<RequestResult> big = e->generate(greedy(random_prompt(40, model->spec().vocab, rng), 4));
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kOutOfMemory);
  EXPECT_NE(big.status().message().find("budget"), std::string::npos) << big.status().to_string();
  // Generation that outgrows the budget mid-way fails the same way, and nothing is truncated silently.
  Result<RequestResult> grows = e->generate(greedy(random_prompt(20, model->spec().vocab, rng), 30));
  ASSERT_FALSE(grows.ok());
  EXPECT_EQ(grows.status().code(), StatusCode::kOutOfMemory);
  Result<RequestResult> small = e->generate(greedy(random_prompt(10, model->spec().vocab, rng), 4));
  ASSERT_TRUE(small.ok()) << small.status().to_string();
  EXPECT_EQ(small->tokens.size(), 4u);
}

TEST_F(EngineTest, SamplingIsSeededAndStopsAsAsked) {
  auto model = TinyLlama::create(TinyLlamaSpec{});
  auto e = engine(*model, EngineOptions{.kv_budget_tokens = 256});
  std::mt19937 rng(3);
  const std::vector<int32_t> prompt = random_prompt(8, model->spec().vocab, rng);
  auto sampled = [&](uint64_t seed, int top_k) {
    Request r = greedy(prompt, 16);
    r.sampling.temperature = 30.0f;  // the tiny random model's logits are very peaked
    r.sampling.top_k = top_k;
    r.sampling.seed = seed;
    return e->generate(std::move(r)).value().tokens;
  };
  EXPECT_EQ(sampled(7, 0), sampled(7, 0));
  EXPECT_NE(sampled(7, 0), sampled(8, 0));
  EXPECT_EQ(sampled(7, 1), e->generate(greedy(prompt, 16)).value().tokens) << "top_k 1 is greedy";

  const std::vector<int32_t> greedy_tokens = e->generate(greedy(prompt, 16)).value().tokens;
  Request stop = greedy(prompt, 16);
  stop.stop_tokens = {greedy_tokens[5]};
  Result<RequestResult> stopped = e->generate(std::move(stop));
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(stopped->finish, FinishReason::kStopToken);
  EXPECT_LE(stopped->tokens.size(), 6u);
  int streamed = 0;
  Request cb = greedy(prompt, 16);
  cb.on_token = [&](RequestId, int32_t) { return ++streamed < 3; };
  Result<RequestResult> cancelled = e->generate(std::move(cb));
  ASSERT_TRUE(cancelled.ok());
  EXPECT_EQ(cancelled->finish, FinishReason::kCallback);
  EXPECT_EQ(cancelled->tokens.size(), 3u);
}

// SamplingParams::logit_bias: +100 forces a token under greedy and sampling alike, -100 bans the greedy choice;
// the logprobs stay those of the raw logits; a token outside the vocabulary is refused at submit.
TEST_F(EngineTest, LogitBiasForcesAndBansTokens) {
  auto model = TinyLlama::create(TinyLlamaSpec{});
  auto e = engine(*model, EngineOptions{.kv_budget_tokens = 256});
  std::mt19937 rng(6);
  const std::vector<int32_t> prompt = random_prompt(9, model->spec().vocab, rng);
  const std::vector<int32_t> free_run = e->generate(greedy(prompt, 6)).value().tokens;
  for (float temperature : {0.0f, 1.0f}) {
    Request forced = greedy(prompt, 6);
    forced.sampling.temperature = temperature;
    forced.sampling.logit_bias = {{7, 100.0f}};
    forced.logprobs = 0;
    const RequestResult r = e->generate(std::move(forced)).value();
    EXPECT_EQ(r.tokens, std::vector<int32_t>(6, 7)) << "temperature " << temperature;
    EXPECT_LT(r.logprobs[0].sampled.logprob, 0.0f);
  }
  Request banned = greedy(prompt, 1);
  banned.sampling.logit_bias = {{free_run[0], -100.0f}};
  EXPECT_NE(e->generate(std::move(banned)).value().tokens[0], free_run[0]);
  Request outside = greedy(prompt, 1);
  outside.sampling.logit_bias = {{model->spec().vocab, 1.0f}};
  EXPECT_EQ(e->submit(std::move(outside)).status().code(), StatusCode::kInvalidArgument);
  Request too_large = greedy(prompt, 1);
  too_large.sampling.logit_bias = {{3, 101.0f}};
  EXPECT_EQ(e->submit(std::move(too_large)).status().code(), StatusCode::kInvalidArgument);
}

// Request::logprobs: each sampled token's log-probability and the top alternatives are the double log-softmax of
// that step's raw logits, delivered through on_logprobs just before on_token, and cut with the tokens when a
// callback stops the request.
TEST_F(EngineTest, LogprobsAreTheLogSoftmaxOfEachStepsLogits) {
  auto model = TinyLlama::create(TinyLlamaSpec{});
  auto e = engine(*model, EngineOptions{.kv_budget_tokens = 256});
  std::mt19937 rng(5);
  const std::vector<int32_t> prompt = random_prompt(9, model->spec().vocab, rng);
  for (float temperature : {0.0f, 20.0f}) {
    Request r = greedy(prompt, 8, true);
    r.sampling.temperature = temperature;
    r.sampling.seed = 3;
    r.logprobs = 4;
    std::vector<std::string> events;
    r.on_logprobs = [&](RequestId, const TokenLogprobs& lp) { events.push_back(fmt::format("lp {}", lp.sampled.token)); };
    r.on_token = [&](RequestId, int32_t token) {
      events.push_back(fmt::format("tok {}", token));
      return events.size() < 12;  // stops after the 6th token
    };
    Result<RequestResult> result = e->generate(std::move(r));
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    ASSERT_EQ(result->tokens.size(), 6u);
    ASSERT_EQ(result->logprobs.size(), 6u);
    for (size_t i = 0; i < result->tokens.size(); ++i) {
      SCOPED_TRACE(fmt::format("temperature {} step {}", temperature, i));
      EXPECT_EQ(events[2 * i], fmt::format("lp {}", result->tokens[i]));
      EXPECT_EQ(events[2 * i + 1], fmt::format("tok {}", result->tokens[i]));
      const std::vector<float>& row = result->logits[i];
      double max_logit = -INFINITY, sum = 0.0;
      for (float x : row) max_logit = std::max<double>(max_logit, x);
      for (float x : row) sum += std::exp(x - max_logit);
      const auto expected = [&](int32_t id) { return row[static_cast<size_t>(id)] - max_logit - std::log(sum); };
      const TokenLogprobs& lp = result->logprobs[i];
      EXPECT_EQ(lp.sampled.token, result->tokens[i]);
      EXPECT_NEAR(lp.sampled.logprob, expected(lp.sampled.token), 1e-5);
      ASSERT_EQ(lp.top.size(), 4u);
      std::vector<int32_t> order(row.size());
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
      for (size_t k = 0; k < 4; ++k) {
        EXPECT_EQ(lp.top[k].token, order[k]);
        EXPECT_NEAR(lp.top[k].logprob, expected(order[k]), 1e-5);
      }
      if (temperature == 0.0f) {
        EXPECT_EQ(lp.top[0].token, lp.sampled.token);
      }
    }
  }
  Request too_many = greedy(prompt, 2);
  too_many.logprobs = kMaxTopLogprobs + 1;
  EXPECT_EQ(e->submit(std::move(too_many)).status().code(), StatusCode::kInvalidArgument);
}

// Note [Pipelined decode steps]: callbacks run a step late, while the next forward is in flight; a callback that
// stops its request, or cancels another, mid-batch leaves every token as an undelayed run would have it.
TEST_F(EngineTest, CallbacksStoppingRequestsDuringAPipelinedStepKeepEveryOtherTokenExact) {
  auto model = TinyLlama::create(TinyLlamaSpec{});
  std::mt19937 rng(13);
  const int vocab = model->spec().vocab;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 4; ++i) prompts.push_back(random_prompt(5 + i, vocab, rng));
  auto solo_engine = engine(*model, EngineOptions{.kv_budget_tokens = 512});
  ASSERT_NE(solo_engine, nullptr);
  std::vector<std::vector<int32_t>> solo;
  for (const auto& p : prompts) solo.push_back(solo_engine->generate(greedy(p, 12)).value().tokens);

  runtime::Profiler steps("steps");
  steps.set_enabled(true);
  auto e = engine(*model, EngineOptions{.kv_budget_tokens = 512, .step_trace = &steps});
  ASSERT_NE(e, nullptr);
  std::vector<RequestId> ids(prompts.size());
  std::vector<std::vector<int32_t>> seen(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    Request r = greedy(prompts[i], 12);
    r.on_token = [&, i](RequestId, int32_t token) {
      seen[i].push_back(token);
      if (i == 1 && seen[i].size() == 4) return false;               // stops itself after 4 tokens
      if (i == 2 && seen[i].size() == 3) e->cancel(ids[3]).ignore();  // cancels request 3 mid-flight
      return true;
    };
    ids[i] = e->submit(std::move(r)).value();
  }
  ASSERT_TRUE(e->run_until_idle().ok());
  EXPECT_GT(e->stats().replayed_steps, 0u) << "decode steps ran as pipelined replays";
  std::map<RequestId, RequestResult> done;
  for (RequestResult& r : e->take_finished()) done.emplace(r.id, std::move(r));
  ASSERT_EQ(done.size(), prompts.size());
  for (size_t i : {size_t{0}, size_t{2}}) {
    EXPECT_EQ(done[ids[i]].finish, FinishReason::kLength);
    EXPECT_EQ(done[ids[i]].tokens, solo[i]);
    EXPECT_EQ(seen[i], solo[i]) << "every token reached the callback, once, in order";
  }
  EXPECT_EQ(done[ids[1]].finish, FinishReason::kCallback);
  EXPECT_EQ(done[ids[1]].tokens, std::vector<int32_t>(solo[1].begin(), solo[1].begin() + 4));
  EXPECT_EQ(seen[1], done[ids[1]].tokens);
  EXPECT_EQ(done[ids[3]].finish, FinishReason::kCancelled);
  ASSERT_LE(seen[3].size(), done[ids[3]].tokens.size());
  EXPECT_EQ(done[ids[3]].tokens, std::vector<int32_t>(solo[3].begin(), solo[3].begin() + done[ids[3]].tokens.size()));
  EXPECT_EQ(e->cache().stats().sequences, 0) << "every request gave its blocks back";

  // Note [Step traces]: every step's phases, the replays on the plan's stream with the times the stream ran them.
  std::map<std::string, uint64_t> spans;
  for (const runtime::LaunchRecord& r : steps.records()) {
    ++spans[r.op_type];
    EXPECT_TRUE(r.has_device_time() && r.device_end_ns >= r.device_begin_ns) << r.node_name;
    EXPECT_EQ(r.stream, r.op_type == "decode step (replay)" || r.op_type == "forward" ? e->plan().graph().name() + ".s0"
                                                                                       : "engine (host)")
        << r.node_name;
  }
  EXPECT_EQ(spans["decode step (replay)"], e->stats().replayed_steps);
  EXPECT_EQ(spans["sample"], e->stats().steps);
  EXPECT_GE(spans["deliver"], e->stats().steps);
}

// argmax against the plain loop it replaced: the first index of the largest logit, NaNs never winning.
TEST(SamplerTest, ArgmaxIsTheFirstIndexOfTheLargestLogit) {
  const auto reference = [](std::span<const float> x) {
    int32_t best = 0;
    for (size_t i = 1; i < x.size(); ++i) {
      if (x[i] > x[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
    }
    return best;
  };
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> level(-3, 3);  // few distinct values: many ties
  for (size_t n : {size_t{1}, size_t{2}, size_t{15}, size_t{16}, size_t{17}, size_t{33}, size_t{1000}, size_t{49152}}) {
    for (int rep = 0; rep < 20; ++rep) {
      std::vector<float> x(n);
      for (float& v : x) v = static_cast<float>(level(rng));
      if (rep % 4 == 1) x[rng() % n] = std::numeric_limits<float>::quiet_NaN();
      if (rep % 4 == 2) x[0] = std::numeric_limits<float>::quiet_NaN();
      if (rep % 4 == 3) x[rng() % n] = -std::numeric_limits<float>::infinity();
      ASSERT_EQ(argmax(x), reference(x)) << "n " << n << " rep " << rep;
    }
  }
  EXPECT_EQ(argmax({}), 0);
}

// OpenAI's frequency and presence penalties over the repeat_last_n window (llama.cpp's penalties sampler): a token's
// logit less frequency × its count, less presence once; out of [-2, 2] is invalid.
TEST(SamplerTest, FrequencyAndPresencePenaltiesSubtractPerCountAndOnce) {
  const std::vector<int32_t> history = {7, 1, 2, 1, 1, 3};
  for (int window : {6, 3}) {
    SamplingParams params;
    params.frequency_penalty = 0.5f;
    params.presence_penalty = 0.25f;
    params.repeat_last_n = window;
    // Token 1 leads by 1.0: three occurrences (two in the last three) bring it below token 0 (never seen).
    std::vector<float> logits = {2.0f, 3.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    Sampler sampler(params);
    const int32_t token = sampler.sample(logits, history);
    const float ones = window == 6 ? 3.0f : 2.0f;
    EXPECT_FLOAT_EQ(logits[1], 3.0f - 0.5f * ones - 0.25f);
    EXPECT_FLOAT_EQ(logits[0], 2.0f);
    EXPECT_FLOAT_EQ(logits[3], -0.75f);                       // once in the window
    EXPECT_FLOAT_EQ(logits[7], window == 6 ? -0.75f : 0.0f);  // only in the longer window
    EXPECT_EQ(token, 0);
  }
  SamplingParams bad;
  bad.presence_penalty = 2.5f;
  EXPECT_EQ(bad.validate().code(), StatusCode::kInvalidArgument);
  bad.presence_penalty = 0.0f;
  bad.frequency_penalty = -2.1f;
  EXPECT_EQ(bad.validate().code(), StatusCode::kInvalidArgument);
}

TEST_F(EngineTest, BadRequestsAndModelsAreClearErrors) {
  auto model = TinyLlama::create(TinyLlamaSpec{});
  auto e = engine(*model, EngineOptions{.kv_budget_tokens = 64});
  EXPECT_EQ(e->submit(greedy({}, 4)).status().code(), StatusCode::kInvalidArgument);
  Result<RequestId> bad_token = e->submit(greedy({1, 2, 999}, 4));
  EXPECT_NE(bad_token.status().message().find("prompt token 2 = 999"), std::string::npos) << bad_token.status().to_string();
  Request bad_sampling = greedy({1}, 4);
  bad_sampling.sampling.top_p = 0.0f;
  EXPECT_EQ(e->submit(std::move(bad_sampling)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e->submit(greedy({1}, 100000)).status().code(), StatusCode::kInvalidArgument) << "beyond the context";

  // A model missing a tensor names it.
  formats::GgufWriter writer;
  for (const formats::GgufKeyValue& kv : model->file().metadata()) ASSERT_TRUE(writer.add(kv.key, kv.value).ok());
  for (const formats::GgufTensor& t : model->file().tensors()) {
    if (t.name == "blk.1.ffn_up.weight") continue;
    ASSERT_TRUE(writer.add_tensor(t.name, t.ggml_type, t.dims, model->file().weight(t).value()).ok());
  }
  auto bytes = std::make_shared<std::vector<std::byte>>(writer.serialize().value());
  formats::GgufFile broken = formats::GgufFile::from_memory(*bytes, bytes).value();
  Result<std::unique_ptr<Engine>> failed = Engine::create(*session_, broken, EngineOptions{});
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().to_string().find("blk.1.ffn_up.weight"), std::string::npos) << failed.status().to_string();
}

// The kernel the plan runs for node `node_name` (null when the node is not in the plan).
const ops::KernelDef* kernel_of(const runtime::ExecutionPlan& plan, std::string_view node_name) {
  for (const runtime::ExecutionObject& object : plan.objects()) {
    if (plan.graph().node(object.node).name == node_name) return object.kernel;
  }
  return nullptr;
}

// `def` renamed, registered as a custom kernel and counting its launches (same arithmetic, so same tokens).
ops::KernelDef counting_copy(const ops::KernelDef& def, std::string name, int priority,
                             std::shared_ptr<std::atomic<int>> launches) {
  ops::KernelDef copy = def;
  copy.name = std::move(name);
  copy.kind = ops::KernelKind::kCustom;
  copy.priority = priority;
  copy.launch = [inner = def.launch, launches](hal::Stream& stream, const ops::KernelLaunch& launch) {
    launches->fetch_add(1);
    return inner(stream, launch);
  };
  return copy;
}

TEST_F(EngineTest, CustomAndForcedKernelsReachTheLlmPlan) {
  auto model = TinyLlama::create(TinyLlamaSpec{});
  const std::vector<int32_t> prompt = {3, 1, 4, 1, 5};
  auto reference_engine = engine(*model, EngineOptions{.kv_budget_tokens = 64});
  ASSERT_NE(reference_engine, nullptr);
  const ops::KernelDef* builtin = kernel_of(reference_engine->plan(), "output.rows");
  ASSERT_NE(builtin, nullptr);
  Result<RequestResult> reference = reference_engine->generate(greedy(prompt, 4));
  ASSERT_TRUE(reference.ok()) << reference.status().to_string();

  // A bundle with a custom kernel that outranks the built-in one.
  {
    auto launches = std::make_shared<std::atomic<int>>(0);
    Result<std::unique_ptr<ops::Registries>> bundle = kernels::make_builtin_registries();
    ASSERT_TRUE(bundle.ok()) << bundle.status().to_string();
    ASSERT_TRUE((*bundle)->kernels.add(counting_copy(*builtin, "GatherCounting", builtin->priority + 100, launches)).ok());
    auto e = engine(*model, EngineOptions{.kv_budget_tokens = 64, .registries = bundle->get()});
    ASSERT_NE(e, nullptr);
    ASSERT_NE(kernel_of(e->plan(), "output.rows"), nullptr);
    EXPECT_EQ(kernel_of(e->plan(), "output.rows")->name, "GatherCounting");
    Result<RequestResult> r = e->generate(greedy(prompt, 4));
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->tokens, reference->tokens);
    EXPECT_GT(launches->load(), 0);
  }
  // An extra kernel that loses on priority runs only where it is forced.
  {
    auto launches = std::make_shared<std::atomic<int>>(0);
    EngineOptions options{.kv_budget_tokens = 64};
    options.extra_kernels.push_back(counting_copy(*builtin, "GatherCounting", builtin->priority - 1, launches));
    auto unforced = engine(*model, options);
    ASSERT_NE(unforced, nullptr);
    EXPECT_EQ(kernel_of(unforced->plan(), "output.rows")->name, builtin->name);

    options.forced_kernels.emplace("output.rows", "GatherCounting");
    auto forced = engine(*model, options);
    ASSERT_NE(forced, nullptr);
    EXPECT_EQ(kernel_of(forced->plan(), "output.rows")->name, "GatherCounting");
    Result<RequestResult> r = forced->generate(greedy(prompt, 4));
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->tokens, reference->tokens);
    EXPECT_GT(launches->load(), 0);
  }
  // A forced kernel that does not exist fails the engine's creation, naming it.
  {
    EngineOptions options{.kv_budget_tokens = 64};
    options.forced_kernels.emplace("output.rows", "NoSuchKernel");
    Result<std::unique_ptr<Engine>> failed = Engine::create(*session_, model->file(), options);
    ASSERT_FALSE(failed.ok());
    EXPECT_NE(failed.status().to_string().find("NoSuchKernel"), std::string::npos) << failed.status().to_string();
  }
  // Extra kernels belong in the engine's own bundle; beside a given bundle they are refused, not dropped.
  {
    Result<std::unique_ptr<ops::Registries>> bundle = kernels::make_builtin_registries();
    ASSERT_TRUE(bundle.ok()) << bundle.status().to_string();
    EngineOptions options{.kv_budget_tokens = 64, .registries = bundle->get()};
    options.extra_kernels.push_back(counting_copy(*builtin, "GatherCounting", 0, std::make_shared<std::atomic<int>>()));
    Result<std::unique_ptr<Engine>> refused = Engine::create(*session_, model->file(), options);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << refused.status().to_string();
  }
}

TEST_F(EngineTest, CancelFinishesWaitingAndRunningRequestsAndTheOthersGoOn) {
  auto model = TinyLlama::create(TinyLlamaSpec{});
  std::mt19937 rng(11);
  const int vocab = model->spec().vocab;
  const std::vector<int32_t> a = random_prompt(9, vocab, rng), b = random_prompt(7, vocab, rng),
                             c = random_prompt(5, vocab, rng);
  auto solo_engine = engine(*model, EngineOptions{.kv_budget_tokens = 256});
  ASSERT_NE(solo_engine, nullptr);
  const std::vector<int32_t> solo_b = solo_engine->generate(greedy(b, 8)).value().tokens;

  // Two sequences may run at once: c waits behind a and b.
  auto e = engine(*model, EngineOptions{.kv_budget_tokens = 256, .max_sequences = 2});
  ASSERT_NE(e, nullptr);
  const RequestId id_a = e->submit(greedy(a, 8)).value();
  const RequestId id_b = e->submit(greedy(b, 8)).value();
  const RequestId id_c = e->submit(greedy(c, 8)).value();
  ASSERT_TRUE(e->step().ok());  // a and b prefilled, each with a first token; c waits (max_sequences)
  ASSERT_TRUE(e->cancel(id_a).ok());
  ASSERT_TRUE(e->cancel(id_c).ok());
  EXPECT_EQ(e->cancel(id_a).code(), StatusCode::kNotFound) << "already finished";
  EXPECT_EQ(e->cancel(12345).code(), StatusCode::kNotFound);
  ASSERT_TRUE(e->run_until_idle().ok());
  std::map<RequestId, RequestResult> done;
  for (RequestResult& r : e->take_finished()) done.emplace(r.id, std::move(r));
  ASSERT_EQ(done.size(), 3u);
  EXPECT_EQ(done[id_a].finish, FinishReason::kCancelled);
  EXPECT_EQ(done[id_a].tokens.size(), 1u) << "cancelled after its first step";
  EXPECT_TRUE(done[id_a].status.ok());
  EXPECT_EQ(done[id_c].finish, FinishReason::kCancelled);
  EXPECT_TRUE(done[id_c].tokens.empty()) << "cancelled while waiting";
  EXPECT_EQ(done[id_b].finish, FinishReason::kLength);
  EXPECT_EQ(done[id_b].tokens, solo_b) << "the request beside the cancelled ones is unaffected";
  EXPECT_EQ(e->cache().stats().sequences, 0) << "cancelled requests gave their blocks back";
}

TEST_F(EngineTest, DeadlinesBoundRequestsAndEveryBlockingCall) {
  auto model = TinyLlama::create(TinyLlamaSpec{});
  std::mt19937 rng(12);
  const std::vector<int32_t> prompt = random_prompt(6, model->spec().vocab, rng);
  auto e = engine(*model, EngineOptions{.kv_budget_tokens = 256});
  ASSERT_NE(e, nullptr);
  const std::vector<int32_t> solo = e->generate(greedy(prompt, 6)).value().tokens;

  // A deadline already past: the request finishes before it is scheduled.
  Request late = greedy(prompt, 6);
  late.deadline = hal::Deadline::at(std::chrono::steady_clock::now() - std::chrono::seconds(1));
  const RequestId late_id = e->submit(std::move(late)).value();
  ASSERT_TRUE(e->run_until_idle().ok());
  std::vector<RequestResult> done = e->take_finished();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].id, late_id);
  EXPECT_EQ(done[0].finish, FinishReason::kDeadline);
  EXPECT_EQ(done[0].status.code(), StatusCode::kDeadlineExceeded) << done[0].status.to_string();
  EXPECT_TRUE(done[0].tokens.empty());

  // A deadline that passes while the request runs: the tokens generated until then are kept, and they are the
  // solo run's.
  Request running = greedy(prompt, 6);
  running.deadline = hal::Deadline::after(std::chrono::seconds(2));
  const hal::Deadline deadline = running.deadline;
  e->submit(std::move(running)).value();
  ASSERT_TRUE(e->step().ok());
  std::this_thread::sleep_until(deadline.when() + std::chrono::milliseconds(1));
  ASSERT_TRUE(e->step().ok());
  done = e->take_finished();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].finish, FinishReason::kDeadline);
  ASSERT_EQ(done[0].tokens.size(), 1u);
  EXPECT_EQ(done[0].tokens[0], solo[0]);
  EXPECT_TRUE(e->idle());

  // generate's timeout is the request's deadline.
  Result<RequestResult> timed_out = e->generate(greedy(prompt, 6), std::chrono::nanoseconds(0));
  ASSERT_FALSE(timed_out.ok());
  EXPECT_EQ(timed_out.status().code(), StatusCode::kDeadlineExceeded) << timed_out.status().to_string();
  EXPECT_TRUE(e->idle());
  Result<RequestResult> in_time = e->generate(greedy(prompt, 6), std::chrono::minutes(10));
  ASSERT_TRUE(in_time.ok()) << in_time.status().to_string();
  EXPECT_EQ(in_time->tokens, solo);

  // run_until_idle's timeout bounds the call, not the requests: past it the work stays queued and a later call
  // finishes it as if nothing had happened.
  e->submit(greedy(prompt, 6)).value();
  Status status = e->run_until_idle(std::chrono::nanoseconds(0));
  EXPECT_EQ(status.code(), StatusCode::kDeadlineExceeded) << status.to_string();
  EXPECT_FALSE(e->idle());
  ASSERT_TRUE(e->run_until_idle().ok());
  done = e->take_finished();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].tokens, solo);
}

// Note [Runs past their deadline] (runtime/executor_failures.cc) seen from the engine: a host callback holds the
// engine's stream (another party's long command); generate with a 200 ms timeout returns DeadlineExceeded while the
// stall still holds, and once it ends the engine generates the solo tokens again.
TEST_F(EngineTest, AGenerateWithATimeoutReturnsAtItWhileTheStreamIsStalled) {
  auto model = TinyLlama::create(TinyLlamaSpec{});
  std::mt19937 rng(13);
  const std::vector<int32_t> prompt = random_prompt(6, model->spec().vocab, rng);
  auto e = engine(*model, EngineOptions{.kv_budget_tokens = 256});
  ASSERT_NE(e, nullptr);
  const std::vector<int32_t> solo = e->generate(greedy(prompt, 6)).value().tokens;

  std::promise<void> let_go;
  std::shared_future<void> released = let_go.get_future().share();
  auto stall_over = std::make_shared<std::atomic<bool>>(false);
  // The executor's stream 0 is the session's stream named after the graph (Executor's constructor).
  Result<hal::Stream*> stream = session_->stream(fmt::format("{}.s0", e->plan().graph().name()));
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  ASSERT_TRUE((*stream)->host_callback([released, stall_over](const Status&) {
    released.wait_for(std::chrono::seconds(30));
    stall_over->store(true);
  }).ok());
  Result<RequestResult> late = e->generate(greedy(prompt, 6), std::chrono::milliseconds(200));
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), StatusCode::kDeadlineExceeded) << late.status().to_string();
  EXPECT_FALSE(stall_over->load()) << "generate returned only when the stall ended";
  EXPECT_TRUE(e->idle());
  let_go.set_value();
  Result<RequestResult> after = e->generate(greedy(prompt, 6));
  ASSERT_TRUE(after.ok()) << after.status().to_string();
  EXPECT_EQ(after->tokens, solo);
}

}  // namespace
}  // namespace hxrt::llm
