// The step messages of tensor- and pipeline-parallel engines (Note [Tensor-parallel engine] in tensor_parallel.cc):
// a forward's inputs as the leader broadcasts them and the followers read them, and the split of a step into
// pipeline micro-batches (Note [Pipeline-parallel engine] in pipeline_parallel.cc). Pure functions over host
// tensors, so that the decoding of what comes over the wire is fuzzed (tests/fuzz/fuzz_step_message.cc).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hxrt/base/host_tensor.h"
#include "hxrt/base/status.h"

namespace hxrt::llm::step {

using Inputs = std::map<std::string, HostTensor, std::less<>>;  // runtime::TensorMap

// kind, decode_only, then (present, dim0, dim1) for each of the decoder's step inputs.
inline constexpr size_t kHeaderWords = 2 + 3 * 7;
using Header = std::array<int64_t, kHeaderWords>;

struct Step {
  Inputs inputs;
  bool decode_only = false;
};

// The header and the int32 payload of a step; Internal for inputs a step does not carry.
Status encode_step(const Inputs& inputs, bool decode_only, Header* header, std::vector<int32_t>* payload);
// The header of "no more steps".
Header stop_header();
// How many int32 words the payload of `header` has, or nullopt for the stop header; DataLoss for a header that is
// neither.
Result<std::optional<size_t>> payload_words(const Header& header);
// The step of `header` and `payload`, checked: consistent token counts, token_seq a non-decreasing map onto the
// block-table rows, logit rows among the tokens. DataLoss naming what is wrong.
Result<Step> decode_step(const Header& header, std::span<const int32_t> payload);

// One micro-batch of a step: the step's inputs restricted to a contiguous run of its sequences, their token and
// logit rows renumbered from 0.
struct MicroBatch {
  Inputs inputs;
  int64_t n_tokens = 0;
  int64_t n_outputs = 0;  // logit rows
};
// The step's sequences split into at most `parts` contiguous runs of about equal token counts (fewer when it has
// fewer sequences). The micro-batches' logit rows, concatenated, are the step's.
Result<std::vector<MicroBatch>> split_micro_batches(const Inputs& inputs, int parts);

}  // namespace hxrt::llm::step
