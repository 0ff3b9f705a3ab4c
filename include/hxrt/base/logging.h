// A small leveled logger. The level comes from the environment variable HXRT_LOG_LEVEL (error, warn, info,
// debug, trace; default warn) and can be changed at run time. Messages go to stderr as one line each:
//   hxrt W 12:00:01.123456 [tid] file.cc:42] message
// A disabled level costs one relaxed atomic load; arguments are not formatted.
//
// Thread-safety: thread-safe; lines from different threads never interleave.
#pragma once

#include <string_view>

#include <fmt/format.h>

namespace hxrt {

enum class LogLevel : int { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3, kTrace = 4 };

LogLevel log_level();
void set_log_level(LogLevel level);
// Parses a level name ("warn", "DEBUG", "2"); returns false and leaves `out` unchanged when it is not one.
bool parse_log_level(std::string_view text, LogLevel* out);

namespace detail {
void log_line(LogLevel level, const char* file, int line, std::string_view message);
}  // namespace detail

}  // namespace hxrt

#define HXRT_LOG(level, ...)                                                                    \
  do {                                                                                          \
    if (static_cast<int>(::hxrt::LogLevel::level) <= static_cast<int>(::hxrt::log_level())) {   \
      ::hxrt::detail::log_line(::hxrt::LogLevel::level, __FILE__, __LINE__, fmt::format(__VA_ARGS__)); \
    }                                                                                           \
  } while (false)
