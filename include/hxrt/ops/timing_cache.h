// TimingCache: measured kernel times per (kernel, shape bucket), as TensorRT's timing cache. Arbitration under
// the measured policy picks the fastest compatible kernel; the cache is saved to and loaded from JSON so the
// measurement runs once per machine.
//
// Thread-safety: thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "hxrt/base/status.h"

namespace hxrt::ops {

class TimingCache {
 public:
  // Recorded for a kernel that failed on the bucket's shapes when measured: it never wins there.
  static constexpr int64_t kFailed = -1;

  // Median nanoseconds of `kernel` on `bucket` ("cpu f32[64,576] f32[576,1536]", ops::shape_bucket), or kFailed,
  // when measured.
  std::optional<int64_t> find(std::string_view kernel, std::string_view bucket) const;
  void record(std::string_view kernel, std::string_view bucket, int64_t nanoseconds);
  size_t size() const;

  // Writes JSON to `path`, creating its folder when missing.
  Status save(const std::string& path) const;
  // Replaces the contents; DataLoss names the file and the problem for a malformed file.
  Status load(const std::string& path);

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, std::string>, int64_t, std::less<>> times_;
};

}  // namespace hxrt::ops
