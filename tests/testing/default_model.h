// Where tests and benchmarks find the default model (SmolLM2-135M-Instruct Q4_1 GGUF): $HXRT_TEST_MODEL, else the
// model cache that scripts/fetch_model.sh and `hxrt generate` fill ($HXRT_MODEL_DIR, else
// ${XDG_CACHE_HOME:-~/.cache}/hxrt/models). Empty when absent: callers skip with kDefaultModelMissing.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace hxrt::testing {

inline constexpr const char* kDefaultModelMissing =
    "SmolLM2-135M-Instruct.Q4_1.gguf not found (scripts/fetch_model.sh, or set HXRT_TEST_MODEL)";

inline std::string find_default_model() {
  auto env = [](const char* name) -> std::string {
    const char* value = std::getenv(name);
    return value != nullptr ? value : "";
  };
  std::filesystem::path path = env("HXRT_TEST_MODEL");
  if (path.empty()) {
    std::filesystem::path dir = env("HXRT_MODEL_DIR");
    if (dir.empty()) {
      const std::string xdg = env("XDG_CACHE_HOME");
      dir = std::filesystem::path(xdg.empty() ? env("HOME") + "/.cache" : xdg) / "hxrt" / "models";
    }
    path = dir / "SmolLM2-135M-Instruct.Q4_1.gguf";
  }
  return std::filesystem::is_regular_file(path) ? path.string() : "";
}

}  // namespace hxrt::testing
