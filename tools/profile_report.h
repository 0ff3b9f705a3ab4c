// The profile report `hxrt profile` and `hxrt generate --profile` share: the summary table, and the Chrome trace
// written to a file.
//
// Thread-safety: thread-compatible (reads the profiler's records once).
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>

#include "hxrt/base/status.h"
#include "hxrt/runtime/profiler.h"

namespace hxrt::tools {

// Prints the summary (at most `rows` rows per table) to `out` and, when `trace_path` is not empty, writes the trace
// there and says how to open it.
Status report_profile(const runtime::Profiler& profiler, const std::string& trace_path, size_t rows, std::FILE* out);

}  // namespace hxrt::tools
