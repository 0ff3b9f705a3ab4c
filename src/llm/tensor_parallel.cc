#include "llm/tensor_parallel.h"

#include <vector>

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

Status send_step(comm::Communicator& group, const runtime::TensorMap& inputs, bool decode_only) {
  step::Header header;
  std::vector<int32_t> payload;
  HXRT_RETURN_IF_ERROR(step::encode_step(inputs, decode_only, &header, &payload));
  HXRT_RETURN_IF_ERROR(group.broadcast(header.data(), header.size(), DType::kI64, 0));
  return group.broadcast(payload.data(), payload.size(), DType::kI32, 0);
}

Status send_stop(comm::Communicator& group) {
  step::Header header = step::stop_header();
  return group.broadcast(header.data(), header.size(), DType::kI64, 0);
}

Result<std::optional<Step>> receive_step(comm::Communicator& group) {
  step::Header header{};
  HXRT_RETURN_IF_ERROR(group.broadcast(header.data(), header.size(), DType::kI64, 0));
  HXRT_ASSIGN_OR_RETURN(const std::optional<size_t> words, step::payload_words(header));
  if (!words.has_value()) return std::optional<Step>();
  std::vector<int32_t> payload(*words);
  HXRT_RETURN_IF_ERROR(group.broadcast(payload.data(), payload.size(), DType::kI32, 0));
  HXRT_ASSIGN_OR_RETURN(Step step, step::decode_step(header, payload));
  return std::optional<Step>(std::move(step));
}

}  // namespace hxrt::llm::tp
