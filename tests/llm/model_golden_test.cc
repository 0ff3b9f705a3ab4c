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

INSTANTIATE_TEST_SUITE_P(Goldens, ModelGoldenTest,
                         ::testing::Combine(::testing::Values(std::string("quant"), std::string("families")),
                                            ::testing::Values(std::string("cpu"), std::string("opencl"),
                                                              std::string("cuda"))),
                         [](const ::testing::TestParamInfo<ModelGoldenTest::ParamType>& param_info) {
                           return std::get<0>(param_info.param) + "_" + std::get<1>(param_info.param);
                         });

}  // namespace
}  // namespace hxrt::llm
