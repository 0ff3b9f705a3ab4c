// The libFuzzer entry point every fuzz target defines (tests/fuzz/README.md). Built two ways: with clang's
// -fsanitize=fuzzer (HXRT_FUZZ=ON) it is a fuzzer; otherwise it links replay_main.cc and becomes a test that runs
// the checked-in corpus, so every build checks that the corpus and past findings still pass.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <utility>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

// A broken invariant: print it and abort, so the fuzzer records the input as a crash.
#define HXRT_FUZZ_ASSERT(condition, ...)                                   \
  do {                                                                    \
    if (!(condition)) {                                                   \
      std::fprintf(stderr, "fuzz invariant failed: %s: ", #condition);   \
      std::fprintf(stderr, __VA_ARGS__);                                  \
      std::fprintf(stderr, "\n");                                         \
      std::abort();                                                       \
    }                                                                     \
  } while (false)

// An input as text and the bytes after its first NUL (at most `max_tail` of them; none without a NUL): the split the
// grammar and JSON Schema targets use for "a grammar, then bytes to match".
inline std::pair<std::string_view, std::string_view> split_at_nul(const uint8_t* data, size_t size, size_t max_tail) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  if (nul == std::string_view::npos) return {input, {}};
  return {input.substr(0, nul), input.substr(nul + 1, max_tail)};
}
