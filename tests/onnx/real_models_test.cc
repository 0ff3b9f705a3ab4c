// Real ONNX models through runtime::Model against ONNX Runtime's outputs (tests/onnx/goldens, written by
// tests/onnx/make_goldens.py from the same files): paraphrase-MiniLM-L3-v2 (opset 17) and PP-OCRv6 det tiny
// (opset 11), two input shapes each, on the CPU and, when an OpenCL device exists, on OpenCL with the CPU as the
// fallback device.
//
// The models come from scripts/fetch_onnx_models.sh; the test finds them in $HXRT_ONNX_MODELS (scripts/test.sh sets
// it) and skips, saying why, when the variable is unset or a model file is absent.
//
// Tolerance (the norm): element-wise, |hxrt - ort| <= kRelTolerance * |ort| + kRelTolerance * max|ort|, the second
// term being the absolute tolerance for elements near zero, scaled by the output's largest magnitude (a relative
// tolerance alone is meaningless where a sum of products cancels to ~0). Integer outputs must be equal.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "hxrt/base/dtype.h"
#include "hxrt/formats/npy.h"
#include "hxrt/hal/driver.h"
#include "hxrt/runtime/model.h"
#include "hxrt/runtime/session.h"

namespace hxrt::runtime {
namespace {

constexpr double kRelTolerance = 1e-4;
const std::filesystem::path kGoldenDir = std::filesystem::path(HXRT_SOURCE_DIR) / "tests" / "onnx" / "goldens";

nlohmann::json read_manifest() {
  std::ifstream in(kGoldenDir / "manifest.json");
  if (!in) return nlohmann::json::object();
  return nlohmann::json::parse(in);
}

// The model file's path, or "" with `why` set when it cannot be found.
std::string find_model(const std::string& file, std::string& why) {
  const char* dir = std::getenv("HXRT_ONNX_MODELS");
  if (dir == nullptr || *dir == '\0') {
    why = "HXRT_ONNX_MODELS is not set (scripts/fetch_onnx_models.sh fetches the models; scripts/test.sh sets it)";
    return "";
  }
  const std::filesystem::path path = std::filesystem::path(dir) / file;
  if (!std::filesystem::exists(path)) {
    why = path.string() + " is absent (scripts/fetch_onnx_models.sh fetches it)";
    return "";
  }
  return path.string();
}

struct Mismatch {
  size_t count = 0;
  size_t first = 0;
  double worst_excess = 0;  // largest |Δ| / allowed
  size_t worst = 0;
};

// Compares `got` with ONNX Runtime's `want` under the norm of the file comment; reports through gtest.
void expect_close(const HostTensor& got, const HostTensor& want, const std::string& what) {
  ASSERT_EQ(got.shape, want.shape) << what;
  if (!dtype_info(want.dtype).is_float) {
    ASSERT_EQ(got.dtype, want.dtype) << what;
    EXPECT_EQ(got.to_i64(), want.to_i64()) << what;
    if (got.to_i64() == want.to_i64()) std::printf("  %s: equal\n", what.c_str());
    return;
  }
  const std::vector<float> a = got.to_f32();
  const std::vector<float> b = want.to_f32();
  ASSERT_EQ(a.size(), b.size()) << what;
  double scale = 0;
  for (float v : b) scale = std::max(scale, std::fabs(static_cast<double>(v)));
  Mismatch m;
  double max_abs = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double diff = std::fabs(static_cast<double>(a[i]) - b[i]);
    const double allowed = kRelTolerance * std::fabs(static_cast<double>(b[i])) + kRelTolerance * scale;
    max_abs = std::max(max_abs, diff);
    if (!(diff <= allowed)) {  // NaN fails too
      if (m.count++ == 0) m.first = i;
      const double excess = std::isfinite(diff) ? diff / allowed : INFINITY;
      if (excess > m.worst_excess) m.worst_excess = excess, m.worst = i;
    }
  }
  EXPECT_EQ(m.count, 0u) << what << ": " << m.count << " of " << a.size() << " elements beyond " << kRelTolerance
                         << " relative (max |ort| " << scale << ", max |Δ| " << max_abs << "); first at " << m.first
                         << " (" << a[m.first] << " vs " << b[m.first] << "), worst at " << m.worst << " ("
                         << a[m.worst] << " vs " << b[m.worst] << ", " << m.worst_excess << "x the tolerance)";
  if (m.count == 0) std::printf("  %s: max |Δ| %.3g (max |ort| %.3g)\n", what.c_str(), max_abs, scale);
}

struct Case {
  std::string model;  // "minilm"
  std::string file;   // "paraphrase-MiniLM-L3-v2.onnx"
  std::vector<nlohmann::json> cases;
};

// The manifest's cases grouped by model, in manifest order.
std::vector<Case> model_cases() {
  std::vector<Case> models;
  const nlohmann::json manifest = read_manifest();
  if (!manifest.contains("cases")) return models;
  for (const nlohmann::json& c : manifest["cases"]) {
    const std::string model = c["model"].get<std::string>();
    auto it = std::find_if(models.begin(), models.end(), [&](const Case& m) { return m.model == model; });
    if (it == models.end()) it = models.insert(models.end(), Case{model, c["file"].get<std::string>(), {}});
    it->cases.push_back(c);
  }
  return models;
}

void run_cases(const Case& model_case, const ModelOptions& options) {
  std::string why;
  const std::string path = find_model(model_case.file, why);
  if (path.empty()) GTEST_SKIP() << why;
  Result<std::unique_ptr<Model>> model = Model::load(path, options);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  for (const nlohmann::json& c : model_case.cases) {
    const std::string name = model_case.model + "/" + c["case"].get<std::string>() + " on " + options.device;
    SCOPED_TRACE(name);
    TensorMap inputs;
    for (const nlohmann::json& input : c["inputs"]) {
      Result<HostTensor> value = formats::read_npy((kGoldenDir / input["file"].get<std::string>()).string());
      ASSERT_TRUE(value.ok()) << value.status().to_string();
      inputs.emplace(input["name"].get<std::string>(), std::move(value).value());
    }
    // Twice: the second run reuses the executor (and, for a model planned at bind time, the cached plan).
    for (int run = 0; run < 2; ++run) {
      Result<TensorMap> outputs = (*model)->run(inputs);
      ASSERT_TRUE(outputs.ok()) << name << ": " << outputs.status().to_string();
      for (const nlohmann::json& output : c["outputs"]) {
        const std::string output_name = output["name"].get<std::string>();
        auto got = outputs->find(output_name);
        ASSERT_NE(got, outputs->end()) << name << ": no output '" << output_name << "'";
        Result<HostTensor> want = formats::read_npy((kGoldenDir / output["file"].get<std::string>()).string());
        ASSERT_TRUE(want.ok()) << want.status().to_string();
        expect_close(got->second, *want, name + " run " + std::to_string(run) + " output '" + output_name + "'");
      }
    }
    if ((*model)->has_plan()) {
      const ExecutionPlan& plan = (*model)->plan();
      std::printf("  %s: %zu kernels, %d on the fallback device (%s), %d copies\n", name.c_str(), plan.objects().size(),
                  plan.split().fallback_nodes, fmt::format("{}", fmt::join(plan.split().fallback_ops, " ")).c_str(),
                  plan.split().copies);
    }
  }
}

class RealModelTest : public ::testing::TestWithParam<std::string> {
 protected:
  Case model_case() const {
    for (Case& c : model_cases()) {
      if (c.model == GetParam()) return c;
    }
    ADD_FAILURE() << "no goldens for " << GetParam() << " in " << kGoldenDir << "/manifest.json";
    return {};
  }
};

TEST_P(RealModelTest, CpuMatchesOnnxRuntime) {
  const Case c = model_case();
  if (c.cases.empty()) return;
  run_cases(c, ModelOptions{.device = "cpu"});
}

TEST_P(RealModelTest, OpenClWithCpuFallbackMatchesOnnxRuntime) {
  const Case c = model_case();
  if (c.cases.empty()) return;
  hal::DriverRegistry drivers;
  ASSERT_TRUE(hal::register_builtin_drivers(drivers).ok());
  if (Result<std::unique_ptr<Session>> opencl = Session::create(drivers, "opencl"); !opencl.ok()) {
    GTEST_SKIP() << "no OpenCL device: " << opencl.status().to_string();
  }
  run_cases(c, ModelOptions{.device = "opencl", .fallback_device = "cpu", .drivers = &drivers});
}

INSTANTIATE_TEST_SUITE_P(Goldens, RealModelTest, ::testing::Values("minilm", "ocr_det"),
                         [](const ::testing::TestParamInfo<std::string>& param) { return param.param; });

}  // namespace
}  // namespace hxrt::runtime
