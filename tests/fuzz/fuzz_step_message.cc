// The step messages of parallel engines (llm/step_message.h): what a follower reads from the wire. The first
// kHeaderWords · 8 bytes are the header, the rest the int32 payload, byte 0 also picks the micro-batch count. A
// message must decode to a checked step or a DataLoss naming what is wrong, never a crash or an out-of-range read;
// a decoded step must split into micro-batches that cover its tokens and logit rows exactly once, and re-encode to
// the same message. Seeds: real steps (tests/fuzz/make_seeds.py).
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz/fuzz_target.h"
#include "llm/step_message.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hxrt::llm;
  step::Header header{};
  if (size < sizeof(header)) return 0;
  std::memcpy(header.data(), data, sizeof(header));
  std::vector<int32_t> payload((size - sizeof(header)) / sizeof(int32_t));
  if (!payload.empty()) std::memcpy(payload.data(), data + sizeof(header), payload.size() * sizeof(int32_t));
  hxrt::Result<step::Step> decoded = step::decode_step(header, payload);
  if (!decoded.ok()) {
    HXRT_FUZZ_ASSERT(!decoded.status().message().empty(), "an error without a message");
    return 0;
  }
  step::Header again{};
  std::vector<int32_t> again_payload;
  HXRT_FUZZ_ASSERT(step::encode_step(decoded->inputs, decoded->decode_only, &again, &again_payload).ok(),
                   "a decoded step does not encode");
  HXRT_FUZZ_ASSERT(again_payload == payload, "the payload does not round-trip");
  const int parts = 1 + data[0] % 5;
  hxrt::Result<std::vector<step::MicroBatch>> split = step::split_micro_batches(decoded->inputs, parts);
  if (!split.ok()) return 0;  // pooled-embedding rows: refused by name
  const int64_t n_tokens = decoded->inputs.at("tokens").shape.dim(0);
  const int64_t n_rows = decoded->inputs.at("logit_rows").shape.dim(0);
  int64_t tokens = 0, rows = 0;
  for (const step::MicroBatch& mb : *split) {
    tokens += mb.n_tokens;
    rows += mb.n_outputs;
    HXRT_FUZZ_ASSERT(mb.inputs.at("tokens").shape.dim(0) == mb.n_tokens, "a micro-batch's tokens miscounted");
  }
  HXRT_FUZZ_ASSERT(split->size() <= static_cast<size_t>(parts), "%zu micro-batches for %d parts", split->size(), parts);
  HXRT_FUZZ_ASSERT(tokens == n_tokens, "micro-batches hold %lld of %lld tokens", static_cast<long long>(tokens),
                   static_cast<long long>(n_tokens));
  HXRT_FUZZ_ASSERT(rows == n_rows, "micro-batches hold %lld of %lld logit rows", static_cast<long long>(rows),
                   static_cast<long long>(n_rows));
  return 0;
}
