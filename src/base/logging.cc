#include "hxrt/base/logging.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <string>
#include <thread>

#include <fmt/chrono.h>

namespace hxrt {
namespace {

LogLevel level_from_environment() {
  LogLevel level = LogLevel::kWarn;
  if (const char* env = std::getenv("HXRT_LOG_LEVEL")) {
    if (!parse_log_level(env, &level)) {
      std::fprintf(stderr, "hxrt: ignoring HXRT_LOG_LEVEL='%s' (use error, warn, info, debug or trace)\n", env);
    }
  }
  return level;
}

std::atomic<int>& level_storage() {
  static std::atomic<int> level{static_cast<int>(level_from_environment())};
  return level;
}

char level_letter(LogLevel level) {
  switch (level) {
    case LogLevel::kError: return 'E';
    case LogLevel::kWarn: return 'W';
    case LogLevel::kInfo: return 'I';
    case LogLevel::kDebug: return 'D';
    case LogLevel::kTrace: return 'T';
  }
  return '?';
}

}  // namespace

LogLevel log_level() { return static_cast<LogLevel>(level_storage().load(std::memory_order_relaxed)); }

void set_log_level(LogLevel level) { level_storage().store(static_cast<int>(level), std::memory_order_relaxed); }

bool parse_log_level(std::string_view text, LogLevel* out) {
  std::string lower(text);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static constexpr std::pair<std::string_view, LogLevel> kNames[] = {
      {"error", LogLevel::kError}, {"warn", LogLevel::kWarn},   {"warning", LogLevel::kWarn},
      {"info", LogLevel::kInfo},   {"debug", LogLevel::kDebug}, {"trace", LogLevel::kTrace},
      {"0", LogLevel::kError},     {"1", LogLevel::kWarn},      {"2", LogLevel::kInfo},
      {"3", LogLevel::kDebug},     {"4", LogLevel::kTrace}};
  for (const auto& [name, level] : kNames) {
    if (lower == name) {
      *out = level;
      return true;
    }
  }
  return false;
}

namespace detail {

void log_line(LogLevel level, const char* file, int line, std::string_view message) {
  static std::mutex mutex;
  const auto now = std::chrono::system_clock::now();
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000;
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  std::tm local{};
  localtime_r(&seconds, &local);
  std::string_view base(file);
  if (const size_t slash = base.rfind('/'); slash != std::string_view::npos) base.remove_prefix(slash + 1);
  const std::string text =
      fmt::format("hxrt {} {:%H:%M:%S}.{:06d} [{}] {}:{}] {}\n", level_letter(level), local, micros,
                  std::hash<std::thread::id>{}(std::this_thread::get_id()) % 100000, base, line, message);
  std::lock_guard<std::mutex> lock(mutex);
  std::fwrite(text.data(), 1, text.size(), stderr);
}

}  // namespace detail
}  // namespace hxrt
