// hxrt_soak: the LLM engine under sustained, irregular load, checked against solo runs.
//
//   hxrt_soak --model FILE [--seconds 600] [--concurrency 8] [--kv-tokens 1024] [--cancel-rate 0.02] [--seed 1]
//             [--device cpu] [--stall-seconds 120] [--max-new 48] [--prompts 12]
//
// 1. Solo references: each of the prompt pool's prompts is generated alone (greedy, up to --max-new tokens) in an
//    engine with room for everything.
// 2. Soak: a second engine with a small KV budget (so sequences are preempted and recomputed) is kept at
//    `concurrency` requests in flight for `seconds`: random prompts from the pool, random max_new_tokens, and
//    cancellations (the token callback asks to stop with probability `cancel-rate` per token). Every finished
//    request must be a prefix of its solo reference, of exactly the expected length unless it was cancelled.
// 3. Memory: resident set size is sampled every second; after the first fifth of the run (warm-up) its least-squares
//    slope is reported in KiB per minute.
// 4. Deadlock watchdog: if the engine makes no step for `stall-seconds`, the program prints what is in flight and
//    exits with status 3.
// Exit status: 0 all checks passed; 1 a mismatch or an engine error; 2 bad arguments or set-up; 3 a stall.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "hxrt/formats/gguf.h"
#include "hxrt/hal/cpu/cpu_driver.h"
#include "hxrt/hal/driver.h"
#include "hxrt/hal/opencl/opencl_driver.h"
#include "hxrt/llm/engine.h"
#include "hxrt/llm/tokenizer.h"
#include "hxrt/runtime/session.h"
#include "testing/default_model.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace hxrt;

struct Options {
  std::string model;
  std::string device = "cpu";
  double seconds = 600;
  int concurrency = 8;
  int64_t kv_tokens = 1024;
  double cancel_rate = 0.02;
  uint32_t seed = 1;
  double stall_seconds = 120;
  int max_new_tokens = 48;  // the most a request generates (solo references generate this many)
  int prompts = 12;         // the size of the prompt pool (at most the built-in texts)
};

bool parse(int argc, char** argv, Options* options) {
  options->model = hxrt::testing::find_default_model();
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s needs a value\n", flag.c_str());
      return false;
    }
    const std::string value = argv[++i];
    if (flag == "--model") {
      options->model = value;
    } else if (flag == "--device") {
      options->device = value;
    } else if (flag == "--seconds") {
      options->seconds = std::stod(value);
    } else if (flag == "--concurrency") {
      options->concurrency = std::stoi(value);
    } else if (flag == "--kv-tokens") {
      options->kv_tokens = std::stoll(value);
    } else if (flag == "--cancel-rate") {
      options->cancel_rate = std::stod(value);
    } else if (flag == "--seed") {
      options->seed = static_cast<uint32_t>(std::stoul(value));
    } else if (flag == "--stall-seconds") {
      options->stall_seconds = std::stod(value);
    } else if (flag == "--max-new") {
      options->max_new_tokens = std::stoi(value);
    } else if (flag == "--prompts") {
      options->prompts = std::stoi(value);
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return false;
    }
  }
  if (options->model.empty()) {
    std::fprintf(stderr, "no model: pass --model FILE (%s)\n", hxrt::testing::kDefaultModelMissing);
    return false;
  }
  return options->concurrency > 0 && options->seconds > 0 && options->kv_tokens > 0 && options->max_new_tokens > 0 &&
         options->prompts > 0;
}

double rss_kib() {
  std::ifstream statm("/proc/self/statm");
  long pages_total = 0;
  long pages_resident = 0;
  statm >> pages_total >> pages_resident;
  return static_cast<double>(pages_resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / 1024.0;
}

// Least-squares slope of (t, y), per unit of t.
double slope(const std::vector<std::pair<double, double>>& points) {
  if (points.size() < 2) return 0.0;
  double mt = 0, my = 0;
  for (const auto& [t, y] : points) {
    mt += t;
    my += y;
  }
  mt /= static_cast<double>(points.size());
  my /= static_cast<double>(points.size());
  double num = 0, den = 0;
  for (const auto& [t, y] : points) {
    num += (t - mt) * (y - my);
    den += (t - mt) * (t - mt);
  }
  return den > 0 ? num / den : 0.0;
}

std::vector<std::vector<int32_t>> make_prompts(const llm::Tokenizer& tokenizer, int count) {
  const char* texts[] = {
      "The history of the printing press begins in",
      "Write a short poem about the sea.",
      "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
      "Q: What is the capital of France?\nA:",
      "Once upon a time, in a small village at the foot of the mountains, there lived",
      "List three benefits of regular exercise:\n1.",
      "Translate to French: The weather is nice today.",
      "In computer science, a hash table is",
      "<|im_start|>user\nHow do plants make food?<|im_end|>\n<|im_start|>assistant\n",
      "The quick brown fox",
      "Explain recursion to a child.",
      "1, 2, 3, 5, 8, 13,",
  };
  std::vector<std::vector<int32_t>> prompts;
  for (const char* text : texts) {
    if (static_cast<int>(prompts.size()) == count) break;
    auto ids = tokenizer.encode(text, {.add_special = true, .parse_special = true});
    if (ids.ok() && !ids->empty()) prompts.push_back(*ids);
  }
  return prompts;
}

struct InFlight {
  size_t prompt = 0;
  int max_new_tokens = 0;
  bool cancelled = false;
};

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!parse(argc, argv, &options)) {
    std::fprintf(stderr,
                 "usage: hxrt_soak --model FILE [--seconds S] [--concurrency N] [--kv-tokens T] "
                 "[--cancel-rate P] [--seed S] [--device cpu|opencl] [--stall-seconds S] [--max-new N] [--prompts N]\n");
    return 2;
  }
  auto fail_setup = [](const Status& status) {
    std::fprintf(stderr, "set-up failed: %s\n", status.to_string().c_str());
    return 2;
  };

  Result<formats::GgufFile> file = formats::GgufFile::open(options.model);
  if (!file.ok()) return fail_setup(file.status());
  Result<llm::TokenizerSpec> spec = llm::tokenizer_spec_from_gguf(*file);
  if (!spec.ok()) return fail_setup(spec.status());
  Result<std::unique_ptr<llm::Tokenizer>> tokenizer = llm::Tokenizer::create(std::move(spec).value());
  if (!tokenizer.ok()) return fail_setup(tokenizer.status());
  hal::DriverRegistry drivers;
  if (Status added = drivers.add(hal::make_cpu_driver()); !added.ok()) return fail_setup(added);
  if (Status added = drivers.add(hal::make_opencl_driver()); !added.ok()) return fail_setup(added);
  Result<std::unique_ptr<runtime::Session>> session =
      runtime::Session::create(drivers, options.device, runtime::SessionOptions{.name = "soak"});
  if (!session.ok()) return fail_setup(session.status());

  llm::EngineOptions engine_options;
  for (int32_t id = 0; id < (*tokenizer)->vocab_size(); ++id) {
    if ((*tokenizer)->is_eog(id)) engine_options.eos_tokens.push_back(id);
  }
  const std::vector<std::vector<int32_t>> prompts = make_prompts(**tokenizer, options.prompts);

  // 1. Solo references.
  std::vector<llm::RequestResult> solo(prompts.size());
  {
    Result<std::unique_ptr<llm::Engine>> reference = llm::Engine::create(**session, *file, engine_options);
    if (!reference.ok()) return fail_setup(reference.status());
    for (size_t p = 0; p < prompts.size(); ++p) {
      Result<llm::RequestResult> result =
          (*reference)->generate(llm::Request{.prompt = prompts[p], .max_new_tokens = options.max_new_tokens});
      if (!result.ok()) return fail_setup(result.status());
      solo[p] = std::move(result).value();
    }
  }
  std::printf("solo references: %zu prompts, %d new tokens at most\n", prompts.size(), options.max_new_tokens);

  // 2. Soak.
  engine_options.kv_budget_tokens = options.kv_tokens;
  engine_options.max_sequences = options.concurrency;
  Result<std::unique_ptr<llm::Engine>> engine = llm::Engine::create(**session, *file, engine_options);
  if (!engine.ok()) return fail_setup(engine.status());

  std::atomic<uint64_t> steps{0};
  std::atomic<bool> done{false};
  std::thread watchdog([&] {
    uint64_t last = steps.load();
    auto last_progress = Clock::now();
    while (!done.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      const uint64_t now_steps = steps.load();
      if (now_steps != last) {
        last = now_steps;
        last_progress = Clock::now();
      } else if (std::chrono::duration<double>(Clock::now() - last_progress).count() > options.stall_seconds) {
        std::fprintf(stderr, "STALL: no engine step for %.0f s (after %llu steps)\n", options.stall_seconds,
                     static_cast<unsigned long long>(now_steps));
        std::_Exit(3);
      }
    }
  });

  std::mt19937 rng(options.seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::map<llm::RequestId, InFlight> in_flight;
  uint64_t completed = 0, cancelled = 0, mismatches = 0, errors = 0, generated = 0;
  std::vector<std::pair<double, double>> rss;  // (minutes since start, KiB)
  const auto start = Clock::now();
  auto next_sample = start;
  const auto elapsed_s = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };

  while (elapsed_s() < options.seconds || !in_flight.empty()) {
    while (elapsed_s() < options.seconds && static_cast<int>(in_flight.size()) < options.concurrency) {
      const size_t p = std::uniform_int_distribution<size_t>(0, prompts.size() - 1)(rng);
      const int max_new = std::uniform_int_distribution<int>(1, options.max_new_tokens)(rng);
      const double cancel_rate = options.cancel_rate;
      auto cancel_draw = std::make_shared<std::mt19937>(rng());
      llm::Request request{.prompt = prompts[p], .max_new_tokens = max_new};
      request.on_token = [cancel_draw, cancel_rate](llm::RequestId, int32_t) {
        return std::uniform_real_distribution<double>(0.0, 1.0)(*cancel_draw) >= cancel_rate;
      };
      Result<llm::RequestId> id = (*engine)->submit(std::move(request));
      if (!id.ok()) return fail_setup(id.status());
      in_flight[*id] = InFlight{.prompt = p, .max_new_tokens = max_new};
    }
    if (Status stepped = (*engine)->step(); !stepped.ok()) {
      std::fprintf(stderr, "engine step failed: %s\n", stepped.to_string().c_str());
      ++errors;
    }
    steps.fetch_add(1);
    for (llm::RequestResult& result : (*engine)->take_finished()) {
      const InFlight request = in_flight.at(result.id);
      in_flight.erase(result.id);
      ++completed;
      generated += result.tokens.size();
      if (result.finish == llm::FinishReason::kError) {
        std::fprintf(stderr, "request %lld failed: %s\n", static_cast<long long>(result.id),
                     result.status.to_string().c_str());
        ++errors;
        continue;
      }
      const std::vector<int32_t>& reference = solo[request.prompt].tokens;
      const size_t expected = std::min<size_t>(reference.size(), static_cast<size_t>(request.max_new_tokens));
      const bool was_cancelled = result.finish == llm::FinishReason::kCallback;
      cancelled += was_cancelled ? 1 : 0;
      const bool prefix = result.tokens.size() <= reference.size() &&
                          std::equal(result.tokens.begin(), result.tokens.end(), reference.begin());
      if (!prefix || (!was_cancelled && result.tokens.size() != expected)) {
        ++mismatches;
        std::fprintf(stderr, "MISMATCH: request %lld (prompt %zu, max_new %d, finish %s): %zu tokens, solo %zu\n",
                     static_cast<long long>(result.id), request.prompt, request.max_new_tokens,
                     std::string(llm::finish_reason_name(result.finish)).c_str(), result.tokens.size(),
                     reference.size());
      }
    }
    if (Clock::now() >= next_sample) {
      rss.emplace_back(elapsed_s() / 60.0, rss_kib());
      next_sample += std::chrono::seconds(1);
    }
  }
  done.store(true);
  watchdog.join();

  const double total_s = elapsed_s();
  std::vector<std::pair<double, double>> after_warmup;
  for (const auto& point : rss) {
    if (point.first * 60.0 >= total_s / 5.0) after_warmup.push_back(point);
  }
  const llm::EngineStats& stats = (*engine)->stats();
  std::printf("soak: %.0f s, %llu requests (%llu cancelled), %llu tokens generated (%.1f tok/s), %llu steps, "
              "%llu preemptions\n",
              total_s, static_cast<unsigned long long>(completed), static_cast<unsigned long long>(cancelled),
              static_cast<unsigned long long>(generated), static_cast<double>(generated) / total_s,
              static_cast<unsigned long long>(steps.load()), static_cast<unsigned long long>(stats.preemptions));
  std::printf("rss: %.0f KiB at start, %.0f KiB at the end, slope after warm-up %.1f KiB/min (%zu samples)\n",
              rss.empty() ? 0.0 : rss.front().second, rss.empty() ? 0.0 : rss.back().second, slope(after_warmup),
              after_warmup.size());
  std::printf("checks: %llu mismatches against solo runs, %llu errors\n", static_cast<unsigned long long>(mismatches),
              static_cast<unsigned long long>(errors));
  return mismatches == 0 && errors == 0 ? 0 : 1;
}
