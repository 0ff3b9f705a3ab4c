// JSON text helpers for the profiler's trace and the diagnostics snapshot manifest: both are written as a stream
// of text (a trace of a long generation holds millions of events, too many for a DOM).
//
// Thread-safety: reentrant functions.
#pragma once

#include <string>
#include <string_view>

namespace hxrt::runtime::json {

// Appends `text` as a JSON string literal (quoted, escaped).
void append_string(std::string& out, std::string_view text);

inline std::string quoted(std::string_view text) {
  std::string out;
  append_string(out, text);
  return out;
}

}  // namespace hxrt::runtime::json
