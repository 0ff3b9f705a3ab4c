#include "hxrt/ops/timing_cache.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace hxrt::ops {
namespace {
constexpr int kTimingCacheFormat = 1;
}  // namespace

std::optional<int64_t> TimingCache::find(std::string_view kernel, std::string_view bucket) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = times_.find(std::pair<std::string, std::string>(kernel, bucket));
  if (it == times_.end()) return std::nullopt;
  return it->second;
}

void TimingCache::record(std::string_view kernel, std::string_view bucket, int64_t nanoseconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  times_[{std::string(kernel), std::string(bucket)}] = nanoseconds;
}

size_t TimingCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return times_.size();
}

Status TimingCache::save(const std::string& path) const {
  nlohmann::json entries = nlohmann::json::array();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [key, ns] : times_) entries.push_back({{"kernel", key.first}, {"bucket", key.second}, {"ns", ns}});
  }
  const nlohmann::json doc = {{"format", "hxrt-timing-cache"}, {"version", kTimingCacheFormat}, {"entries", entries}};
  // Like any cache file, its folder is made on first use.
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (std::error_code error; !parent.empty() && !std::filesystem::create_directories(parent, error) && error) {
    return unavailable("cannot create the folder of timing cache '{}': {}", path, error.message());
  }
  std::ofstream out(path, std::ios::trunc);
  if (!out) return unavailable("cannot write timing cache '{}'", path);
  out << doc.dump(1) << '\n';
  if (!out) return data_loss("writing timing cache '{}' failed", path);
  return ok_status();
}

Status TimingCache::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return not_found("timing cache '{}' cannot be opened", path);
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json doc = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return data_loss("timing cache '{}' is not valid JSON", path);
  if (doc.value("format", "") != "hxrt-timing-cache" || !doc.contains("version") || !doc["version"].is_number_integer() ||
      doc["version"].get<int>() != kTimingCacheFormat) {
    return data_loss("timing cache '{}': not an hxrt timing cache of format version {}", path, kTimingCacheFormat);
  }
  if (!doc.contains("entries") || !doc["entries"].is_array()) return data_loss("timing cache '{}': no entries array", path);
  std::map<std::pair<std::string, std::string>, int64_t, std::less<>> loaded;
  size_t index = 0;
  for (const nlohmann::json& entry : doc["entries"]) {
    if (!entry.is_object() || !entry.contains("kernel") || !entry["kernel"].is_string() || !entry.contains("bucket") ||
        !entry["bucket"].is_string() || !entry.contains("ns") || !entry["ns"].is_number_integer() ||
        entry["ns"].get<int64_t>() < kFailed) {
      return data_loss("timing cache '{}': entry {} is malformed", path, index);
    }
    loaded[{entry["kernel"].get<std::string>(), entry["bucket"].get<std::string>()}] = entry["ns"].get<int64_t>();
    ++index;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  times_ = std::move(loaded);
  return ok_status();
}

}  // namespace hxrt::ops
