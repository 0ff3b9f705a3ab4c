// The libFuzzer entry point every fuzz target defines (tests/fuzz/README.md). Built two ways: with clang's
// -fsanitize=fuzzer (HXRT_FUZZ=ON) it is a fuzzer; otherwise it links replay_main.cc and becomes a test that runs
// the checked-in corpus, so every build checks that the corpus and past findings still pass.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

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
