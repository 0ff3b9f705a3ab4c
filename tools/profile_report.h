// The profile report `hxrt profile` and `hxrt generate --profile` share: the summary table, the Chrome trace and
// the HTML timeline written to files; and the .npy writer of failure snapshots `hxrt run` and `hxrt profile` pass.
//
// Thread-safety: thread-compatible (reads the profiler's records once).
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>

#include "hxrt/base/host_tensor.h"
#include "hxrt/base/status.h"
#include "hxrt/runtime/profiler.h"

namespace hxrt::tools {

// Prints the summary (at most `rows` rows per table) to `out` and, when `trace_path` is not empty, writes the trace
// there and says how to open it; likewise the self-contained HTML timeline at `html_path`.
Status report_profile(const runtime::Profiler& profiler, const std::string& trace_path, size_t rows, std::FILE* out,
                      const std::string& html_path = "");

// A runtime::SnapshotTensorWriter that writes <stem>.npy (the runtime itself knows no file formats).
Result<std::string> write_npy_snapshot(const std::string& path_stem, const HostTensor& tensor);

}  // namespace hxrt::tools
