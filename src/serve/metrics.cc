#include "serve/metrics.h"

#include <fmt/format.h>

namespace hxrt::serve {

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double seconds) {
  size_t bucket = 0;
  while (bucket < bounds_.size() && seconds > bounds_[bucket]) ++bucket;
  ++counts_[bucket];
  sum_ += seconds;
  ++count_;
}

void Histogram::render(const std::string& name, std::string* out) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    *out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cumulative);
  }
  cumulative += counts_.back();
  *out +=
      fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, cumulative, name, sum_, name, count_);
}

Metrics::Metrics()
    : ttft_({0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
      itl_({0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56}) {}

void Metrics::request(const std::string& endpoint, int http_status) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++requests_[{endpoint, http_status}];
}

void Metrics::tokens(int prompt_tokens, int completion_tokens, int cached_prompt_tokens) {
  std::lock_guard<std::mutex> lock(mutex_);
  prompt_tokens_ += static_cast<uint64_t>(prompt_tokens);
  cached_prompt_tokens_ += static_cast<uint64_t>(cached_prompt_tokens);
  completion_tokens_ += static_cast<uint64_t>(completion_tokens);
}

void Metrics::time_to_first_token(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  ttft_.observe(seconds);
}

void Metrics::inter_token_latency(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  itl_.observe(seconds);
}

void Metrics::set_gauges(const Gauges& gauges) {
  std::lock_guard<std::mutex> lock(mutex_);
  gauges_ = gauges;
}

std::string Metrics::render() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out;
  out += "# HELP hxrt_requests_total HTTP requests answered, by endpoint and status code.\n";
  out += "# TYPE hxrt_requests_total counter\n";
  for (const auto& [key, count] : requests_) {
    out += fmt::format("hxrt_requests_total{{endpoint=\"{}\",code=\"{}\"}} {}\n", key.first, key.second, count);
  }
  out +=
      "# HELP hxrt_prompt_tokens_total Prompt tokens of finished requests.\n# TYPE hxrt_prompt_tokens_total counter\n";
  out += fmt::format("hxrt_prompt_tokens_total {}\n", prompt_tokens_);
  out += "# HELP hxrt_prompt_tokens_cached_total Prompt tokens of finished requests taken from the prefix cache.\n";
  out += "# TYPE hxrt_prompt_tokens_cached_total counter\n";
  out += fmt::format("hxrt_prompt_tokens_cached_total {}\n", cached_prompt_tokens_);
  out += "# HELP hxrt_generation_tokens_total Generated tokens of finished requests.\n";
  out += "# TYPE hxrt_generation_tokens_total counter\n";
  out += fmt::format("hxrt_generation_tokens_total {}\n", completion_tokens_);
  out += "# HELP hxrt_sequences_running Sequences in the engine's batch.\n# TYPE hxrt_sequences_running gauge\n";
  out += fmt::format("hxrt_sequences_running {}\n", gauges_.running);
  out += "# HELP hxrt_sequences_waiting Requests queued for admission.\n# TYPE hxrt_sequences_waiting gauge\n";
  out += fmt::format("hxrt_sequences_waiting {}\n", gauges_.waiting);
  out += "# HELP hxrt_kv_blocks KV cache blocks by state.\n# TYPE hxrt_kv_blocks gauge\n";
  out += fmt::format(
      "hxrt_kv_blocks{{state=\"used\"}} {}\nhxrt_kv_blocks{{state=\"free\"}} {}\n"
      "hxrt_kv_blocks{{state=\"reclaimable\"}} {}\n",
      gauges_.kv_blocks_used, gauges_.kv_blocks_free, gauges_.kv_blocks_reclaimable);
  out += "# HELP hxrt_preemptions_total Sequences preempted (KV budget) and later recomputed.\n";
  out += "# TYPE hxrt_preemptions_total counter\n";
  out += fmt::format("hxrt_preemptions_total {}\n", gauges_.preemptions);
  out += "# HELP hxrt_time_to_first_token_seconds From a request's arrival to its first generated token.\n";
  out += "# TYPE hxrt_time_to_first_token_seconds histogram\n";
  ttft_.render("hxrt_time_to_first_token_seconds", &out);
  out += "# HELP hxrt_inter_token_latency_seconds Between consecutive tokens of a request.\n";
  out += "# TYPE hxrt_inter_token_latency_seconds histogram\n";
  itl_.render("hxrt_inter_token_latency_seconds", &out);
  return out;
}

}  // namespace hxrt::serve
