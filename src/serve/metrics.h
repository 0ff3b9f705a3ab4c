// Metrics: the server's counters, gauges and latency histograms, rendered in Prometheus' text exposition format
// (GET /metrics).
//
// Thread-safety: thread-safe (one mutex; every update is a few additions).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace hxrt::serve {

// A cumulative histogram with fixed upper bounds in seconds (Prometheus' le buckets plus +Inf).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double seconds);
  // Appends the _bucket, _sum and _count lines of `name`.
  void render(const std::string& name, std::string* out) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; one more for +Inf
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

struct Gauges {
  int running = 0;
  int waiting = 0;
  int64_t kv_blocks_used = 0;
  int64_t kv_blocks_free = 0;
  int64_t kv_blocks_reclaimable = 0;
  uint64_t preemptions = 0;  // the engine's, since start (a counter)
};

class Metrics {
 public:
  Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  void request(const std::string& endpoint, int http_status);
  // `cached_prompt_tokens` of the prompt tokens came from the prefix cache (not recomputed).
  void tokens(int prompt_tokens, int completion_tokens, int cached_prompt_tokens = 0);
  void time_to_first_token(double seconds);
  void inter_token_latency(double seconds);
  void set_gauges(const Gauges& gauges);

  std::string render() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;  // (endpoint, status) → count
  uint64_t prompt_tokens_ = 0;
  uint64_t cached_prompt_tokens_ = 0;
  uint64_t completion_tokens_ = 0;
  Histogram ttft_;
  Histogram itl_;
  Gauges gauges_;
};

}  // namespace hxrt::serve
