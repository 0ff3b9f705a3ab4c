// hxrt on the real Gemma 3 270M Q4_K_M (the model cache's `gemma3-270m`: gemma3 family, Q4_K/Q5_0/Q6_K/Q8_0
// tensors, a 262,144-token SentencePiece vocabulary, 512-position sliding windows) against llama.cpp's goldens
// (tests/llm/goldens/gemma3-270m-q4_k_m.json, scripts/make_gemma_goldens.py on the same file).
//
// - Tokens: every text of the corpus, with and without special-token parsing, gives llama.cpp's ids.
// - Generation: the prompts (one of them 777 tokens, past the window) run together in one engine; the first-step
//   logits at llama.cpp's 64 best ids agree within the SmolLM2 goldens' tolerances (golden_test.cc), and the greedy
//   continuations are llama.cpp's until a near-tie on both sides.
// The model is $HXRT_TEST_GEMMA_MODEL, else the model cache's file; absent, the tests skip
// (scripts/test.sh fetches it: scripts/fetch_model.sh gemma3-270m).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "hxrt/hal/driver.h"
#include "hxrt/llm/engine.h"
#include "hxrt/llm/model_cache.h"
#include "hxrt/llm/tokenizer.h"
#include "llm/golden_requests.h"

namespace hxrt::llm {
namespace {

constexpr double kLogitTolerance = 2.0;
constexpr double kMeanLogitTolerance = 0.3;
constexpr double kNearTie = 0.25;
// A continuation may leave llama.cpp's at an exchange of its top two: llama.cpp's gap under kExchangeTie (a
// probability ratio under 1.35) and hxrt ranking llama.cpp's pick second within kExchangeSpread. Measured: quantizing
// the K-quant tensors' activations per 32 or per 256 values (both within Note [Error bounds]) moves the top-two gap of
// plain_code's step 23 by 0.85, so a gap of that size on hxrt's side is rounding, not a different model.
constexpr double kExchangeTie = 0.3;
constexpr double kExchangeSpread = 1.0;
const std::filesystem::path kGolden =
    std::filesystem::path(HXRT_SOURCE_DIR) / "tests" / "llm" / "goldens" / "gemma3-270m-q4_k_m.json";

std::string gemma_path() {
  if (const char* env = std::getenv("HXRT_TEST_GEMMA_MODEL"); env != nullptr && *env != '\0') return env;
  const NamedModel* gemma = find_named_model("gemma3-270m");
  if (gemma == nullptr) return "";
  Result<std::string> path = cached_model_path(*gemma, /*fetch=*/false);
  return path.ok() ? *path : "";
}

class GemmaGoldenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = gemma_path();
    if (path.empty()) GTEST_SKIP() << "gemma-3-270m-q4_k_m.gguf not found (scripts/fetch_model.sh gemma3-270m)";
    std::ifstream in(kGolden);
    ASSERT_TRUE(in) << "goldens missing: " << kGolden;
    golden_ = nlohmann::json::parse(in);
    Result<formats::GgufFile> file = formats::GgufFile::open(path);
    ASSERT_TRUE(file.ok()) << file.status().to_string();
    file_ = std::make_unique<formats::GgufFile>(std::move(file).value());
    Result<TokenizerSpec> spec = tokenizer_spec_from_gguf(*file_);
    ASSERT_TRUE(spec.ok()) << spec.status().to_string();
    Result<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::create(std::move(spec).value());
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
    tokenizer_ = std::move(tokenizer).value();
  }

  nlohmann::json golden_;
  std::unique_ptr<formats::GgufFile> file_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(GemmaGoldenTest, TheCorpusTokenizesAsInLlamaCpp) {
  int checked = 0;
  for (const auto& c : golden_["tokenizer"]) {
    const std::string text = c["text"].get<std::string>();
    for (const bool special : {true, false}) {
      Result<std::vector<TokenId>> ids = tokenizer_->encode(text, EncodeOptions{.add_special = false, .parse_special = special});
      ASSERT_TRUE(ids.ok()) << ids.status().to_string();
      EXPECT_EQ(*ids, c[special ? "ids_special" : "ids_plain"].get<std::vector<int32_t>>())
          << c["name"] << (special ? " (special tokens parsed)" : " (plain)");
      ++checked;
    }
  }
  EXPECT_GE(checked, 90);
}

TEST_F(GemmaGoldenTest, PromptsWithBosTokenizeAsInLlamaCpp) {
  // The generation prompts as llama.cpp tokenized them: BOS added (the file says add_bos), specials parsed.
  for (const auto& c : golden_["generation"]) {
    Result<std::vector<TokenId>> ids =
        tokenizer_->encode(c["prompt"].get<std::string>(), EncodeOptions{.add_special = true, .parse_special = true});
    ASSERT_TRUE(ids.ok()) << ids.status().to_string();
    EXPECT_EQ(*ids, c["prompt_ids"].get<std::vector<int32_t>>()) << c["name"];
  }
}

TEST_F(GemmaGoldenTest, FirstStepLogitsAndGreedyContinuationsMatchLlamaCpp) {
  hal::DriverRegistry drivers;
  ASSERT_TRUE(hal::register_builtin_drivers(drivers).ok());
  Result<std::unique_ptr<runtime::Session>> session = runtime::Session::create(drivers, "cpu");
  ASSERT_TRUE(session.ok()) << session.status().to_string();
  EngineOptions options;
  options.kv_budget_tokens = 2048;
  Result<std::unique_ptr<Engine>> engine = Engine::create(**session, *file_, options);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  const nlohmann::json& cases = golden_["generation"];
  Result<std::vector<RequestResult>> ran = testing::run_golden_cases(**engine, cases);
  ASSERT_TRUE(ran.ok()) << ran.status().to_string();
  const std::vector<RequestResult>& results = *ran;
  for (size_t i = 0; i < cases.size(); ++i) {
    const nlohmann::json& c = cases[i];
    const RequestResult& r = results[i];
    SCOPED_TRACE(c["name"].get<std::string>());
    ASSERT_EQ(r.finish, FinishReason::kLength) << r.status.to_string();
    // First step: hxrt's logits at llama.cpp's best ids, less their mean offset.
    const std::vector<int32_t> top_ids = c["first_top_ids"].get<std::vector<int32_t>>();
    const std::vector<float> top = c["first_top_logits"].get<std::vector<float>>();
    double offset = 0, max_diff = 0, centered = 0;
    for (size_t k = 0; k < top.size(); ++k) offset += r.logits[0][static_cast<size_t>(top_ids[k])] - double{top[k]};
    offset /= static_cast<double>(top.size());
    for (size_t k = 0; k < top.size(); ++k) {
      const double d = r.logits[0][static_cast<size_t>(top_ids[k])] - double{top[k]};
      max_diff = std::max(max_diff, std::fabs(d));
      centered += std::fabs(d - offset);
    }
    centered /= static_cast<double>(top.size());
    EXPECT_LT(max_diff, kLogitTolerance);
    EXPECT_LT(centered, kMeanLogitTolerance);
    const std::vector<int32_t> expected = c["generated_ids"].get<std::vector<int32_t>>();
    size_t step = 0;
    while (step < expected.size() && step < r.tokens.size() && r.tokens[step] == expected[step]) ++step;
    std::printf("gemma3-270m %s (%zu prompt tokens): first-step |Δlogit| max %.3f, mean around the offset %.4f over "
                "llama.cpp's top %zu; %zu/%zu greedy tokens equal\n",
                c["name"].get<std::string>().c_str(), c["prompt_ids"].size(), max_diff, centered, top.size(), step,
                expected.size());
    if (step == expected.size()) continue;
    const nlohmann::json& s = c["steps"][step];
    const double llama_gap = s["top2_logits"][0].get<double>() - s["top2_logits"][1].get<double>();
    std::vector<float> row = r.logits[step];
    const float llama_pick = row[static_cast<size_t>(expected[step])];
    std::partial_sort(row.begin(), row.begin() + 2, row.end(), std::greater<float>());
    const double our_gap = row[0] - row[1];
    if (llama_gap < kNearTie && our_gap < kNearTie) continue;  // a near-tie on both sides
    // Otherwise only an exchange of the top two at a near-tie of llama.cpp's.
    EXPECT_LT(llama_gap, kExchangeTie) << "diverges at step " << step << " without a near-tie (llama.cpp)";
    EXPECT_EQ(llama_pick, row[1]) << "diverges at step " << step << ": hxrt does not rank llama.cpp's pick second";
    EXPECT_LT(our_gap, kExchangeSpread) << "diverges at step " << step << " by more than rounding (hxrt)";
  }
}

}  // namespace
}  // namespace hxrt::llm
