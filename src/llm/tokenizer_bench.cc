// Tokenizer throughput on SmolLM2-135M-Instruct's vocabulary (HXRT_TEST_MODEL, or the usual cache paths):
// encoding English prose, code and mixed-script text, and decoding it back.
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "hxrt/formats/gguf.h"
#include "hxrt/llm/tokenizer.h"
#include "testing/default_model.h"

namespace hxrt::llm {
namespace {

const Tokenizer* smollm2() {
  static const std::unique_ptr<Tokenizer> tokenizer = []() -> std::unique_ptr<Tokenizer> {
    const std::string path = hxrt::testing::find_default_model();
    if (path.empty()) return nullptr;
    auto file = formats::GgufFile::open(path);
    if (!file.ok()) return nullptr;
    auto spec = tokenizer_spec_from_gguf(*file);
    if (!spec.ok()) return nullptr;
    auto created = Tokenizer::create(std::move(spec).value());
    if (created.ok()) return std::move(created).value();
    return nullptr;
  }();
  return tokenizer.get();
}

std::string sample_text() {
  const std::string paragraph =
      "The history of computing is a story of steadily shrinking machines and growing ambitions. In 1947 the "
      "transistor arrived; by the 1970s a CPU fit on one chip.\n\ndef fib(n):\n    return n if n < 2 else fib(n - 1) "
      "+ fib(n - 2)\n\nCaf\u00e9, na\u00efve, \u65e5\u672c\u8a9e, \u041f\u0440\u0438\u0432\u0435\u0442 \U0001F600 "
      "1,000,000 people; v1.2.3-rc4.\n";
  std::string text;
  while (text.size() < 64 * 1024) text += paragraph;
  return text;
}

void BM_Encode(benchmark::State& state) {
  const Tokenizer* tokenizer = smollm2();
  if (tokenizer == nullptr) {
    state.SkipWithError(hxrt::testing::kDefaultModelMissing);
    return;
  }
  const std::string text = sample_text();
  size_t tokens = 0;
  for (auto _ : state) {
    auto ids = tokenizer->encode(text);
    tokens = ids->size();
    benchmark::DoNotOptimize(ids);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(tokens * state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Encode)->Unit(benchmark::kMillisecond);

void BM_Decode(benchmark::State& state) {
  const Tokenizer* tokenizer = smollm2();
  if (tokenizer == nullptr) {
    state.SkipWithError(hxrt::testing::kDefaultModelMissing);
    return;
  }
  const std::vector<TokenId> ids = *tokenizer->encode(sample_text());
  for (auto _ : state) {
    auto text = tokenizer->decode(ids);
    benchmark::DoNotOptimize(text);
  }
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(ids.size() * state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Decode)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace hxrt::llm

BENCHMARK_MAIN();
