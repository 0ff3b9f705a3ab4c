#include "llm/tensor_parallel.h"

#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "hxrt/llm/decoder.h"

namespace hxrt::llm::tp {

// Note [Tensor-parallel engine]
// Every rank of a tensor-parallel group builds an Engine over the same file with the same options; each plans its
// share of the decoder (Note [Tensor-parallel decoder] in hxrt/llm/decoder.h) and keeps a KV cache of its KV
// heads with the same number of blocks as the others. Rank 0, the leader, is an ordinary engine: it admits
// requests, schedules, keeps the block tables, samples and answers. Before each forward it broadcasts that
// forward's inputs (tokens, positions, the token→sequence map, block tables, logit rows: a fixed header, then
// the int32 payload) over the group; the followers (Engine::follow) run the same forward with them — same shape
// bucket, same capture — so every rank issues the graph's collectives in the same order, and their caches hold
// the same positions in the same blocks. Only the leader reads the logits (after the head's AllGather every rank
// has them whole). The leader's engine sends a stop message when it is destroyed; a failure on any rank fails the
// group (Note [Collective failures] in comm/communicator.cc), so no rank waits for a step that will not come.

namespace {

constexpr int64_t kStop = 0;
constexpr int64_t kStepMessage = 0x5458535445500001;  // "TXSTEP", version 1
// The inputs a step carries, in message order; absent ones (the embedding rows, the window cache's tables) are
// marked so.
constexpr std::array<const char*, 7> kInputs = {decoder::kTokens,    decoder::kPositions, decoder::kTokenSeq,
                                                decoder::kBlockTables, decoder::kLogitRows, decoder::kEmbedRows,
                                                decoder::kBlockTablesLocal};
constexpr size_t kHeaderWords = 2 + 3 * kInputs.size();  // kind, decode_only, then (present, dim0, dim1) per input

}  // namespace

Status send_step(comm::Communicator& group, const runtime::TensorMap& inputs, bool decode_only) {
  std::array<int64_t, kHeaderWords> header{};
  header[0] = kStepMessage;
  header[1] = decode_only ? 1 : 0;
  std::vector<int32_t> payload;
  for (size_t i = 0; i < kInputs.size(); ++i) {
    auto it = inputs.find(kInputs[i]);
    int64_t* entry = &header[2 + 3 * i];
    if (it == inputs.end()) continue;
    const HostTensor& t = it->second;
    if (t.dtype != DType::kI32 || t.shape.rank() < 1 || t.shape.rank() > 2) {
      return internal_error("tensor-parallel step: input '{}' is {} {}, not i32 of rank 1 or 2", kInputs[i],
                            dtype_name(t.dtype), t.shape);
    }
    entry[0] = 1;
    entry[1] = t.shape.dim(0);
    entry[2] = t.shape.rank() == 2 ? t.shape.dim(1) : -1;
    const size_t old = payload.size();
    payload.resize(old + t.bytes.size() / sizeof(int32_t));
    std::memcpy(payload.data() + old, t.bytes.data(), t.bytes.size());
  }
  for (const auto& [name, tensor] : inputs) {
    bool known = false;
    for (const char* input : kInputs) known = known || name == input;
    if (!known) return internal_error("tensor-parallel step: input '{}' has no place in the step message", name);
  }
  HXRT_RETURN_IF_ERROR(group.broadcast(header.data(), header.size(), DType::kI64, 0));
  return group.broadcast(payload.data(), payload.size(), DType::kI32, 0);
}

Status send_stop(comm::Communicator& group) {
  std::array<int64_t, kHeaderWords> header{};
  header[0] = kStop;
  return group.broadcast(header.data(), header.size(), DType::kI64, 0);
}

Result<std::optional<Step>> receive_step(comm::Communicator& group) {
  std::array<int64_t, kHeaderWords> header{};
  HXRT_RETURN_IF_ERROR(group.broadcast(header.data(), header.size(), DType::kI64, 0));
  if (header[0] == kStop) return std::optional<Step>();
  if (header[0] != kStepMessage) {
    return data_loss("tensor-parallel step: the leader's message starts with {:#x}, not a step", header[0]);
  }
  Step step;
  step.decode_only = header[1] != 0;
  size_t total = 0;
  for (size_t i = 0; i < kInputs.size(); ++i) {
    const int64_t* entry = &header[2 + 3 * i];
    if (entry[0] == 0) continue;
    if (entry[1] < 0 || entry[2] < -1 || entry[1] > (1 << 24) || entry[2] > (1 << 24)) {
      return data_loss("tensor-parallel step: input '{}' has dims {} × {}", kInputs[i], entry[1], entry[2]);
    }
    total += static_cast<size_t>(entry[1] * (entry[2] < 0 ? 1 : entry[2]));
  }
  std::vector<int32_t> payload(total);
  HXRT_RETURN_IF_ERROR(group.broadcast(payload.data(), payload.size(), DType::kI32, 0));
  size_t offset = 0;
  for (size_t i = 0; i < kInputs.size(); ++i) {
    const int64_t* entry = &header[2 + 3 * i];
    if (entry[0] == 0) continue;
    const Shape shape = entry[2] < 0 ? Shape{entry[1]} : Shape{entry[1], entry[2]};
    const size_t count = static_cast<size_t>(shape.num_elements());
    step.inputs.emplace(kInputs[i], HostTensor::i32(shape, std::vector<int32_t>(payload.begin() + static_cast<std::ptrdiff_t>(offset),
                                                                                payload.begin() + static_cast<std::ptrdiff_t>(offset + count))));
    offset += count;
  }
  return std::optional<Step>(std::move(step));
}

}  // namespace hxrt::llm::tp
