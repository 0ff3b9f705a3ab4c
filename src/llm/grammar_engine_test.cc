// Note [Grammar-constrained sampling] (engine_outputs.cc) on small random-weight Llama models with a synthetic byte
// vocabulary: every step's token is the masked argmax (greedy) or an allowed draw (sampled) — checked against a
// brute-force mask built with GrammarMatcher::can_accept over the whole vocabulary — and finished outputs parse as
// the grammar's language (nlohmann::json for the built-in JSON grammar).
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hxrt/hal/driver.h"
#include "hxrt/llm/engine.h"
#include "hxrt/llm/grammar.h"
#include "llm/testing/tiny_llama.h"

namespace hxrt::llm {
namespace {

using testing::TinyLlama;
using testing::TinyLlamaSpec;

// Token 0 is EOS (no bytes); the others are JSON's pieces, cycled to fill the vocabulary.
std::vector<std::string> json_vocabulary(int vocab) {
  const std::vector<std::string> pieces = {
      "{", "}", "[", "]", "\"", ":", ",", " ", "\n", "a", "b", "key", "value", "0", "1", "42", "-", ".", "e", "true",
      "false", "null", "\"a\"", "{\"", "\":", "\",", "\\\"", "\\n", "\\u00e9", "é", "x y", "\"}", "]}", "}}", "{}", "[]",
      "1.5", "e+3", "  ", "\":\"", "\"k", "z"};
  std::vector<std::string> bytes(static_cast<size_t>(vocab));
  for (int t = 1; t < vocab; ++t) bytes[static_cast<size_t>(t)] = pieces[static_cast<size_t>(t - 1) % pieces.size()];
  return bytes;
}

class GrammarEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(hal::register_builtin_drivers(drivers_).ok());
    session_ = std::move(runtime::Session::create(drivers_, "cpu")).value();
  }
  hal::DriverRegistry drivers_;
  std::unique_ptr<runtime::Session> session_;
};

TEST_F(GrammarEngineTest, EveryTokenIsTheMaskedChoiceAndFinishedOutputsAreJson) {
  TinyLlamaSpec spec;
  spec.tied = false;
  auto model = TinyLlama::create(spec);
  const std::vector<std::string> bytes = json_vocabulary(spec.vocab);
  auto vocabulary = std::make_shared<const TokenTrie>(bytes);
  EngineOptions options;
  options.eos_tokens = {0};
  Result<std::unique_ptr<Engine>> created = Engine::create(*session_, model->file(), options);
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  Engine& engine = **created;
  Request request;
  request.prompt = {5, 9, 12, 3};
  request.grammar = json_grammar();
  EXPECT_EQ(engine.submit(request).status().code(), StatusCode::kInvalidArgument) << "no vocabulary set";
  engine.set_vocabulary(vocabulary);

  std::mt19937 rng(4);
  std::uniform_int_distribution<int32_t> token(1, spec.vocab - 1);
  int finished_json = 0;
  for (int r = 0; r < 12; ++r) {
    Request q;
    for (int i = 0; i < 6 + r; ++i) q.prompt.push_back(token(rng));
    q.max_new_tokens = 48;
    q.return_logits = true;
    q.grammar = r % 3 == 2 ? json_value_grammar() : json_grammar();
    if (r % 2 == 1) q.sampling = SamplingParams{.temperature = 1.0f, .seed = static_cast<uint64_t>(r)};
    q.sampling.logit_bias = {{0, 8.0f}};  // EOS when the grammar allows it, so that some outputs end
    Result<RequestResult> result = engine.generate(q);
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    // Replay: at each step the token is allowed, and greedy picks the largest allowed logit.
    GrammarMatcher matcher(q.grammar);
    std::string text;
    for (size_t s = 0; s < result->tokens.size(); ++s) {
      const int32_t t = result->tokens[s];
      std::vector<uint8_t> allowed(bytes.size(), 0);
      for (size_t v = 1; v < bytes.size(); ++v) allowed[v] = !bytes[v].empty() && matcher.can_accept(bytes[v]) ? 1 : 0;
      allowed[0] = matcher.is_complete() ? 1 : 0;
      ASSERT_EQ(allowed[static_cast<size_t>(t)], 1) << "request " << r << " step " << s << " token " << t;
      if (q.sampling.temperature == 0.0f) {
        std::vector<float> logits = result->logits[s];
        logits[0] += 8.0f;
        int32_t best = -1;
        for (size_t v = 0; v < logits.size(); ++v) {
          if (allowed[v] && (best < 0 || logits[v] > logits[static_cast<size_t>(best)])) best = static_cast<int32_t>(v);
        }
        EXPECT_EQ(t, best) << "request " << r << " step " << s;
      }
      if (t == 0) break;
      ASSERT_TRUE(matcher.accept(bytes[static_cast<size_t>(t)]));
      text += bytes[static_cast<size_t>(t)];
    }
    if (result->finish == FinishReason::kEos) {
      EXPECT_TRUE(nlohmann::json::accept(text)) << text;
      if (q.grammar == json_grammar()) {
        EXPECT_TRUE(nlohmann::json::parse(text).is_object()) << text;
      }
      ++finished_json;
    } else {
      EXPECT_EQ(result->finish, FinishReason::kLength);
    }
  }
  std::printf("%d of 12 constrained outputs ended as complete JSON within 48 tokens\n", finished_json);
  EXPECT_GT(finished_json, 0);
}

TEST_F(GrammarEngineTest, AGrammarThatAllowsNoTokenFailsTheRequestAndTheEngineGoesOn) {
  auto model = TinyLlama::create(TinyLlamaSpec{});
  EngineOptions options;
  options.eos_tokens = {0};
  Result<std::unique_ptr<Engine>> engine = Engine::create(*session_, model->file(), options);
  ASSERT_TRUE(engine.ok());
  (*engine)->set_vocabulary(std::make_shared<const TokenTrie>(json_vocabulary(160)));
  Result<std::shared_ptr<const Grammar>> grammar = parse_gbnf(R"(root ::= "#" [0-9]+)");  // no token has '#'
  ASSERT_TRUE(grammar.ok()) << grammar.status().to_string();
  Request q;
  q.prompt = {1, 2, 3};
  q.max_new_tokens = 8;
  q.grammar = *grammar;
  Result<RequestResult> failed = (*engine)->generate(q);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kFailedPrecondition) << failed.status().to_string();
  q.grammar = nullptr;
  EXPECT_TRUE((*engine)->generate(q).ok());
}

}  // namespace
}  // namespace hxrt::llm
