// hxrt against llama.cpp's greedy tokens and logits on tiny random-weight models, on every device that is present
// (cpu, opencl; cuda on a GPU or the emulator):
//   quant/     a Llama model quantized by llama.cpp into each common file type (Q2_K .. Q6_K, IQ4_XS, Q5_0, ...),
//              written by scripts/make_quant_model_goldens.py;
//   families/  one Q8_0 model per decoder family (llama, qwen2, qwen3, gemma2, gemma3, phi3) with its variants
//              (biases, q/k norm, fused projections, post norms, sliding windows, softcaps), written by
//              scripts/make_family_goldens.py.
//
// hxrt quantizes activations per 32 values (Note [Error bounds], base/quant_types.cc) where llama.cpp's K-quant dots
// use one q8_K scale per 256, so their logits differ by llama.cpp's own activation rounding; the tolerances are the
// real model's (tests/llm/golden_test.cc): first-step logits within kLogitTolerance (max) and kMeanLogitTolerance
// (mean around the constant offset); greedy continuations identical, or diverging only where both sides' two best
// logits are within kNearTie.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "hxrt/formats/gguf.h"
#include "hxrt/hal/driver.h"
#include "hxrt/llm/engine.h"
#include "hxrt/runtime/session.h"
#include "llm/golden_requests.h"

namespace hxrt::llm {
namespace {

constexpr double kLogitTolerance = 2.0;
constexpr double kMeanLogitTolerance = 0.3;
constexpr double kNearTie = 0.25;
const std::filesystem::path kGoldens = std::filesystem::path(HXRT_SOURCE_DIR) / "tests" / "llm" / "goldens";

std::vector<std::string> golden_models(const std::filesystem::path& dir) {
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".json") out.push_back(entry.path().stem().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

double top2_gap(const std::vector<float>& logits) {
  std::vector<float> sorted = logits;
  std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
  return double{sorted[0]} - sorted[1];
}

// (goldens folder, device)
class ModelGoldenTest : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(ModelGoldenTest, EveryModelMatchesLlamaCpp) {
  const auto& [folder, device] = GetParam();
  const std::filesystem::path kDir = kGoldens / folder;
  hal::DriverRegistry drivers;
  ASSERT_TRUE(hal::register_builtin_drivers(drivers).ok());
  Result<std::unique_ptr<runtime::Session>> session = runtime::Session::create(drivers, device);
  if (!session.ok()) GTEST_SKIP() << "no " << device << " device: " << session.status().to_string();
  const std::vector<std::string> types = golden_models(kDir);
  ASSERT_GE(types.size(), 6u) << "goldens missing in " << kDir;
  for (const std::string& type : types) {
    SCOPED_TRACE(type);
    std::ifstream in(kDir / (type + ".json"));
    const nlohmann::json golden = nlohmann::json::parse(in);
    Result<formats::GgufFile> file = formats::GgufFile::open((kDir / (type + ".gguf")).string());
    ASSERT_TRUE(file.ok()) << file.status().to_string();
    EngineOptions options;
    options.kv_budget_tokens = 512;
    Result<std::unique_ptr<Engine>> engine = Engine::create(**session, *file, options);
    ASSERT_TRUE(engine.ok()) << engine.status().to_string();
    const nlohmann::json& cases = golden["cases"];
    Result<std::vector<RequestResult>> ran = testing::run_golden_cases(**engine, cases);
    ASSERT_TRUE(ran.ok()) << ran.status().to_string();
    const std::vector<RequestResult>& results = *ran;
    for (size_t i = 0; i < cases.size(); ++i) {
      const nlohmann::json& c = cases[i];
      const RequestResult& r = results[i];
      ASSERT_EQ(r.finish, FinishReason::kLength) << r.status.to_string();
      const std::vector<float> want = c["first_logits"].get<std::vector<float>>();
      ASSERT_EQ(r.logits[0].size(), want.size());
      double offset = 0.0;
      double max_diff = 0.0;
      for (size_t v = 0; v < want.size(); ++v) {
        const double d = double{r.logits[0][v]} - want[v];
        offset += d;
        max_diff = std::max(max_diff, std::fabs(d));
      }
      offset /= static_cast<double>(want.size());
      double centered = 0.0;
      for (size_t v = 0; v < want.size(); ++v) centered += std::fabs(double{r.logits[0][v]} - want[v] - offset);
      centered /= static_cast<double>(want.size());
      EXPECT_LT(max_diff, kLogitTolerance) << "case " << i << ": first-step logits, max abs difference";
      EXPECT_LT(centered, kMeanLogitTolerance) << "case " << i << ": first-step logits around the offset";
      const std::vector<int32_t> expected = c["generated_ids"].get<std::vector<int32_t>>();
      size_t step = 0;
      while (step < expected.size() && step < r.tokens.size() && r.tokens[step] == expected[step]) ++step;
      std::printf("%s %s case %zu: first-step |Δlogit| max %.3f, mean around the offset %.4f; %zu/%zu greedy tokens "
                  "equal\n",
                  device.c_str(), type.c_str(), i, max_diff, centered, step, expected.size());
      if (step == expected.size()) continue;
      const nlohmann::json& s = c["steps"][step];
      const double llama_gap = s["top2_logits"][0].get<double>() - s["top2_logits"][1].get<double>();
      EXPECT_LT(llama_gap, kNearTie) << "case " << i << " diverges at step " << step << " without a near-tie (llama.cpp)";
      EXPECT_LT(top2_gap(r.logits[step]), kNearTie)
          << "case " << i << " diverges at step " << step << " without a near-tie (hxrt)";
    }
  }
}

// Note [Sliding-window cache] (llm/engine.cc): on the Gemma 2 and 3 models (window 5) the window layers' cache
// gives back what falls out of the window, so across 16 concurrent sequences of 160 tokens it holds at most a few
// blocks per sequence, the full-attention cache holds only those layers, and every token and logit equals the
// single-cache engine's bit for bit — on every device (the window tables' holes reach each backend's
// PagedAttention).
class SlidingWindowCacheTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SlidingWindowCacheTest, WindowLayersKeepOnlyTheirWindowAndChangeNoBit) {
  const std::string& device = GetParam();
  hal::DriverRegistry drivers;
  ASSERT_TRUE(hal::register_builtin_drivers(drivers).ok());
  Result<std::unique_ptr<runtime::Session>> session = runtime::Session::create(drivers, device);
  if (!session.ok()) GTEST_SKIP() << "no " << device << " device: " << session.status().to_string();
  // The devices (PoCL, the CUDA emulator) run four of the CPU's sixteen sequences: the same tables with holes.
  const int sequences = device == "cpu" ? 16 : 4;
  for (const std::string family : {"gemma2", "gemma3"}) {
    SCOPED_TRACE(family);
    Result<formats::GgufFile> file = formats::GgufFile::open((kGoldens / "families" / (family + ".gguf")).string());
    ASSERT_TRUE(file.ok()) << file.status().to_string();
    std::vector<std::vector<RequestResult>> runs;
    for (bool window_cache : {true, false}) {
      EngineOptions options;
      options.kv_budget_tokens = 4096;
      options.max_batch_tokens = 48;  // prompts prefilled in chunks, the window released between them
      options.window_cache = window_cache;
      Result<std::unique_ptr<Engine>> engine = Engine::create(**session, *file, options);
      ASSERT_TRUE(engine.ok()) << engine.status().to_string();
      ASSERT_EQ((*engine)->window_cache() != nullptr, window_cache);
      const int vocab = (*engine)->config().vocab_size;
      std::vector<RequestId> ids;
      int most_window_blocks = 0;
      for (int s = 0; s < sequences; ++s) {
        Request r;
        for (int t = 0; t < 20 + 7 * s; ++t) r.prompt.push_back((31 * t + 17 * s + 1) % vocab);
        r.max_new_tokens = 160 - static_cast<int>(r.prompt.size()) + 40;
        r.return_logits = true;
        r.ignore_eos = true;
        Result<RequestId> id = (*engine)->submit(std::move(r));
        ASSERT_TRUE(id.ok()) << id.status().to_string();
        ids.push_back(*id);
      }
      while (!(*engine)->idle()) {
        ASSERT_TRUE((*engine)->step().ok());
        if (window_cache) most_window_blocks = std::max(most_window_blocks, (*engine)->window_cache()->stats().used_blocks);
      }
      std::vector<RequestResult> results = (*engine)->take_finished();
      std::sort(results.begin(), results.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
      ASSERT_EQ(results.size(), static_cast<size_t>(sequences));
      if (window_cache) {
        // Per sequence: the window (5) and a prefill chunk (48) span at most 5 blocks of 16.
        EXPECT_LE(most_window_blocks, sequences * 5);
        EXPECT_LT((*engine)->cache().config().n_layers, (*engine)->config().n_layers);
        EXPECT_EQ((*engine)->window_cache()->stats().used_blocks, 0) << "all given back at the end";
      }
      runs.push_back(std::move(results));
    }
    for (size_t i = 0; i < static_cast<size_t>(sequences); ++i) {
      EXPECT_EQ(runs[0][i].tokens, runs[1][i].tokens) << "sequence " << i;
      ASSERT_EQ(runs[0][i].logits.size(), runs[1][i].logits.size());
      for (size_t step = 0; step < runs[0][i].logits.size(); ++step) {
        ASSERT_EQ(runs[0][i].logits[step], runs[1][i].logits[step]) << "sequence " << i << " step " << step;
      }
    }
  }
}

// Note [Speculative decoding] (llm/engine.cc) on every family (windows with their own cache, MoE, biases, softcaps):
// prompts that repeat themselves, drafts verified in batched forwards, and the plain engine's tokens and logits bit
// for bit.
class SpeculativeFamiliesTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SpeculativeFamiliesTest, DraftsChangeNoBitOnEveryFamily) {
  const std::string& device = GetParam();
  hal::DriverRegistry drivers;
  ASSERT_TRUE(hal::register_builtin_drivers(drivers).ok());
  Result<std::unique_ptr<runtime::Session>> session = runtime::Session::create(drivers, device);
  if (!session.ok()) GTEST_SKIP() << "no " << device << " device: " << session.status().to_string();
  uint64_t accepted = 0;
  for (const std::string& family : golden_models(kGoldens / "families")) {
    SCOPED_TRACE(family);
    Result<formats::GgufFile> file = formats::GgufFile::open((kGoldens / "families" / (family + ".gguf")).string());
    ASSERT_TRUE(file.ok()) << file.status().to_string();
    std::vector<std::vector<RequestResult>> runs;
    for (int draft_max : {0, 6}) {
      EngineOptions options;
      options.kv_budget_tokens = 2048;
      options.speculative.draft_max = draft_max;
      options.speculative.adaptive = false;  // drafts whatever the timing (sanitizer builds included)
      Result<std::unique_ptr<Engine>> engine = Engine::create(**session, *file, options);
      ASSERT_TRUE(engine.ok()) << engine.status().to_string();
      const int vocab = (*engine)->config().vocab_size;
      for (int s = 0; s < 3; ++s) {
        Request r;
        for (int t = 0; t < 9 + 4 * s; ++t) r.prompt.push_back((37 * t + 11 * s + 3) % vocab);
        const std::vector<int32_t> unit = r.prompt;
        for (int k = 0; k < 2; ++k) r.prompt.insert(r.prompt.end(), unit.begin(), unit.end());
        r.max_new_tokens = 40;
        r.return_logits = true;
        r.ignore_eos = true;
        ASSERT_TRUE((*engine)->submit(std::move(r)).ok());
      }
      ASSERT_TRUE((*engine)->run_until_idle().ok());
      std::vector<RequestResult> results = (*engine)->take_finished();
      std::sort(results.begin(), results.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
      accepted += (*engine)->stats().accepted_tokens;
      runs.push_back(std::move(results));
    }
    ASSERT_EQ(runs[0].size(), runs[1].size());
    for (size_t i = 0; i < runs[0].size(); ++i) {
      EXPECT_EQ(runs[1][i].tokens, runs[0][i].tokens) << "sequence " << i;
      ASSERT_EQ(runs[1][i].logits.size(), runs[0][i].logits.size());
      for (size_t step = 0; step < runs[0][i].logits.size(); ++step) {
        ASSERT_EQ(runs[1][i].logits[step], runs[0][i].logits[step]) << "sequence " << i << " step " << step;
      }
    }
  }
  EXPECT_GT(accepted, 0u);
}

// Prompt logprobs and mean-pooled embeddings recompute every prompt row, also on the sliding-window families after
// a prefix hit longer than the window (the window cache has given those blocks back): the values equal a fresh
// engine's.
TEST(WindowFamiliesTest, ScoredPromptsAndEmbeddingsAfterAPrefixHitLongerThanTheWindow) {
  hal::DriverRegistry drivers;
  ASSERT_TRUE(hal::register_builtin_drivers(drivers).ok());
  Result<std::unique_ptr<runtime::Session>> session = runtime::Session::create(drivers, "cpu");
  ASSERT_TRUE(session.ok());
  for (const std::string family : {"gemma2", "gemma3"}) {
    SCOPED_TRACE(family);
    Result<formats::GgufFile> file = formats::GgufFile::open((kGoldens / "families" / (family + ".gguf")).string());
    ASSERT_TRUE(file.ok()) << file.status().to_string();
    std::vector<RequestResult> runs;
    for (bool warm : {false, true}) {
      EngineOptions options;
      options.embeddings = true;
      Result<std::unique_ptr<Engine>> engine = Engine::create(**session, *file, options);
      ASSERT_TRUE(engine.ok()) << engine.status().to_string();
      const int vocab = (*engine)->config().vocab_size;
      Request r;
      for (int t = 0; t < 40; ++t) r.prompt.push_back((13 * t + 5) % vocab);
      r.max_new_tokens = 2;
      if (warm) {  // 32 tokens of blocks cached, beyond the window of 5
        ASSERT_TRUE((*engine)->generate(r).ok());
      }
      r.max_new_tokens = 0;
      r.prompt_logprobs = true;
      r.logprobs = 1;
      Result<RequestResult> scored = (*engine)->generate(r);
      ASSERT_TRUE(scored.ok()) << scored.status().to_string();
      r.prompt_logprobs = false;
      r.logprobs = -1;
      r.pooling = Pooling::kMean;
      Result<RequestResult> embedded = (*engine)->generate(r);
      ASSERT_TRUE(embedded.ok()) << embedded.status().to_string();
      scored->embedding = embedded->embedding;
      runs.push_back(std::move(scored).value());
    }
    EXPECT_EQ(runs[1].prompt_logprobs, runs[0].prompt_logprobs);
    EXPECT_EQ(runs[1].embedding, runs[0].embedding);
    EXPECT_FALSE(runs[0].embedding.empty());
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, SpeculativeFamiliesTest, ::testing::Values(std::string("cpu"), std::string("opencl")),
                         [](const ::testing::TestParamInfo<std::string>& param_info) { return param_info.param; });

INSTANTIATE_TEST_SUITE_P(Devices, SlidingWindowCacheTest,
                         ::testing::Values(std::string("cpu"), std::string("opencl"), std::string("cuda")),
                         [](const ::testing::TestParamInfo<std::string>& param_info) { return param_info.param; });

INSTANTIATE_TEST_SUITE_P(Goldens, ModelGoldenTest,
                         ::testing::Combine(::testing::Values(std::string("quant"), std::string("families")),
                                            ::testing::Values(std::string("cpu"), std::string("opencl"),
                                                              std::string("cuda"))),
                         [](const ::testing::TestParamInfo<ModelGoldenTest::ParamType>& param_info) {
                           return std::get<0>(param_info.param) + "_" + std::get<1>(param_info.param);
                         });

}  // namespace
}  // namespace hxrt::llm
