// Programmer-error checks. A failed check means hxrt or its caller broke a documented contract; it prints the
// condition, the place and a message, then aborts. Expected failures (bad files, exhausted pools) are Statuses.
//
// Thread-safety: the macros are safe to use from any thread.
#pragma once

#include <string>

#include <fmt/format.h>

namespace hxrt::detail {
[[noreturn]] void check_failed(const char* condition, const char* file, int line, const std::string& message);
}  // namespace hxrt::detail

#define HXRT_CHECK(cond, ...)                                                              \
  do {                                                                                     \
    if (!(cond)) [[unlikely]] {                                                            \
      ::hxrt::detail::check_failed(#cond, __FILE__, __LINE__, fmt::format("" __VA_ARGS__)); \
    }                                                                                      \
  } while (false)

#ifdef NDEBUG
#define HXRT_DCHECK(cond, ...) \
  do {                         \
  } while (false)
#else
#define HXRT_DCHECK(cond, ...) HXRT_CHECK(cond, __VA_ARGS__)
#endif
