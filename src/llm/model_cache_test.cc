// The model cache: the catalog compiled in from src/llm/model_catalog.json, name resolution, and fetching's error
// paths (a fake python3 on PATH stands for pip, so no network is touched).
#include "hxrt/llm/model_cache.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace hxrt::llm {
namespace {

// Sets an environment variable for the test's lifetime.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_) {
      ::setenv(name_, old_.c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

std::filesystem::path temp_dir(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("hxrt_model_cache_test_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(ModelCache, TheCatalogNamesTheDefaultModelFirstAndGemma) {
  ASSERT_GE(named_models().size(), 2u);
  EXPECT_EQ(default_model().name, "smollm2-135m");
  EXPECT_EQ(default_model().file, "SmolLM2-135M-Instruct.Q4_1.gguf");
  const NamedModel* gemma = find_named_model("gemma3-270m");
  ASSERT_NE(gemma, nullptr);
  EXPECT_EQ(gemma->file, "gemma-3-270m-q4_k_m.gguf");
  EXPECT_EQ(gemma->packages.size(), 4u);
  EXPECT_EQ(gemma->members.size(), gemma->packages.size());
  for (const NamedModel& model : named_models()) {
    EXPECT_EQ(model.sha256.size(), 64u) << model.name;
    EXPECT_FALSE(model.packages.empty()) << model.name;
  }
  EXPECT_EQ(find_named_model("gemma3"), nullptr);
  EXPECT_EQ(named_model_list(), "smollm2-135m (default), gemma3-270m");
}

TEST(ModelCache, NamesResolveToTheCacheAndPathsStayAsTheyAre) {
  const std::filesystem::path dir = temp_dir("resolve");
  ScopedEnv cache("HXRT_MODEL_DIR", dir.string());
  EXPECT_EQ(model_cache_dir(), dir);
  // Absent and not fetched: NotFound saying how to fetch it.
  Result<std::string> absent = resolve_model("gemma3-270m", /*fetch=*/false);
  ASSERT_FALSE(absent.ok());
  EXPECT_EQ(absent.status().code(), StatusCode::kNotFound);
  EXPECT_NE(absent.status().message().find("scripts/fetch_model.sh gemma3-270m"), std::string::npos);
  // Present: its path, for the name and for "" (the default model).
  std::ofstream(dir / "gemma-3-270m-q4_k_m.gguf") << "x";
  std::ofstream(dir / "SmolLM2-135M-Instruct.Q4_1.gguf") << "x";
  EXPECT_EQ(resolve_model("gemma3-270m", false).value(), (dir / "gemma-3-270m-q4_k_m.gguf").string());
  EXPECT_EQ(resolve_model("", false).value(), (dir / "SmolLM2-135M-Instruct.Q4_1.gguf").string());
  // A path is a path, existing or not; a file named like a catalog entry wins over the entry.
  EXPECT_EQ(resolve_model("/no/such/model.gguf", false).value(), "/no/such/model.gguf");
  EXPECT_EQ(resolve_model("unknown-name", false).value(), "unknown-name");
  std::filesystem::remove_all(dir);
}

// A python3 that exits with `code` stands for the fetcher: 3 is its SHA256 mismatch, 4 a failed download.
void expect_fetch_fails_with(int code, StatusCode expected, const std::string& needle) {
  const std::filesystem::path dir = temp_dir("fetch" + std::to_string(code));
  const std::filesystem::path bin = dir / "bin";
  std::filesystem::create_directories(bin);
  {
    std::ofstream script(bin / "python3");
    script << "#!/bin/sh\nexit " << code << "\n";
  }
  std::filesystem::permissions(bin / "python3", std::filesystem::perms::owner_all);
  ScopedEnv cache("HXRT_MODEL_DIR", (dir / "cache").string());
  ScopedEnv path("PATH", bin.string() + ":/usr/bin:/bin");
  Result<std::string> fetched = cached_model_path(*find_named_model("gemma3-270m"), /*fetch=*/true);
  ASSERT_FALSE(fetched.ok());
  EXPECT_EQ(fetched.status().code(), expected) << fetched.status().to_string();
  EXPECT_NE(fetched.status().message().find(needle), std::string::npos) << fetched.status().to_string();
  // Nothing half-done is left in the cache: no model file, no staging folder.
  EXPECT_TRUE(std::filesystem::is_empty(dir / "cache"));
  std::filesystem::remove_all(dir);
}

TEST(ModelCache, AChecksumMismatchIsDataLossAndLeavesNothingBehind) {
  expect_fetch_fails_with(3, StatusCode::kDataLoss, "SHA256");
}

TEST(ModelCache, AFailedDownloadIsUnavailableAndSaysWhatToDo) {
  expect_fetch_fails_with(4, StatusCode::kUnavailable, "pass a GGUF model file instead");
}

}  // namespace
}  // namespace hxrt::llm
