#include "llm/pipeline_parallel.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "hxrt/llm/decoder.h"

namespace hxrt::llm::pp {

// Note [Pipeline-parallel engine]
// Each rank of a pipeline-parallel group plans the decoder's layers of its stage (pipeline_stage: contiguous, even
// ranges) and keeps the KV cache of those layers only; rank 0 also has the embedding, the last rank the output
// head. Any head count works, unlike tensor parallelism. Rank 0, the leader, schedules and samples as a one-rank
// engine does and broadcasts each forward's inputs (the step message of Note [Tensor-parallel engine]). Every rank
// then splits the step into the same micro-batches (split_micro_batches: runs of whole sequences) and, for each in
// order, receives its hidden states from the previous rank (kHiddenIn; rank 0 embeds its tokens instead), runs its
// stage, and sends kHiddenOut to the next rank, or, on the last rank, the micro-batch's logits back to rank 0.
// So while rank 1 runs micro-batch 0, rank 0 already runs micro-batch 1: with M micro-batches and N stages a step
// keeps the ranks busy (M + N - 1) / (M · N) of the time instead of 1 / N. Rank 0 receives the logits on a thread of
// its own and a communicator of its own: a blocking receive on its main thread would wait for the last rank while
// the last rank waits for rank 0 to take the next micro-batch's hidden states. The hidden states travel in f32 and
// each layer computes exactly what it computes in one process (Note [Batch invariance] holds per row), so the
// logits are bit-identical to a one-rank run's.

Result<Stage> pipeline_stage(const ModelConfig& config, int rank, int size) {
  if (size < 1 || rank < 0 || rank >= size) return invalid_argument("rank {} of {} ranks", rank, size);
  if (size > config.n_layers) {
    return invalid_argument("{} pipeline stages for {}'s {} layers: at most one stage per layer", size,
                            config.architecture, config.n_layers);
  }
  const int base = config.n_layers / size;
  const int extra = config.n_layers % size;
  Stage stage;
  stage.first_layer = rank * base + std::min(rank, extra);
  stage.end_layer = stage.first_layer + base + (rank < extra ? 1 : 0);
  return stage;
}

namespace {

const HostTensor* find(const runtime::TensorMap& inputs, const char* name) {
  auto it = inputs.find(name);
  return it == inputs.end() ? nullptr : &it->second;
}

std::vector<int32_t> values(const HostTensor& t) {
  std::vector<int32_t> out(t.bytes.size() / sizeof(int32_t));
  std::memcpy(out.data(), t.bytes.data(), t.bytes.size());
  return out;
}

}  // namespace

Result<std::vector<MicroBatch>> split_micro_batches(const runtime::TensorMap& inputs, int parts) {
  const HostTensor* tokens = find(inputs, decoder::kTokens);
  const HostTensor* positions = find(inputs, decoder::kPositions);
  const HostTensor* token_seq = find(inputs, decoder::kTokenSeq);
  const HostTensor* tables = find(inputs, decoder::kBlockTables);
  const HostTensor* logit_rows = find(inputs, decoder::kLogitRows);
  const HostTensor* local_tables = find(inputs, decoder::kBlockTablesLocal);
  if (tokens == nullptr || positions == nullptr || token_seq == nullptr || tables == nullptr || logit_rows == nullptr) {
    return invalid_argument("a pipeline step needs tokens, positions, token_seq, block_tables and logit_rows");
  }
  if (find(inputs, decoder::kEmbedRows) != nullptr) {
    return unimplemented("pooled embeddings under pipeline parallelism (the last stage would have to send them back)");
  }
  const std::vector<int32_t> tok = values(*tokens), pos = values(*positions), seq = values(*token_seq);
  const std::vector<int32_t> table = values(*tables), rows = values(*logit_rows);
  const std::vector<int32_t> local = local_tables != nullptr ? values(*local_tables) : std::vector<int32_t>();
  const int64_t n_tokens = static_cast<int64_t>(tok.size());
  const int64_t n_seqs = tables->shape.dim(0);
  const int64_t width = tables->shape.dim(1);
  // Sequence s's tokens are [seq_begin[s], seq_begin[s + 1]) (the engine lays a step's entries out in order).
  std::vector<int64_t> seq_begin(static_cast<size_t>(n_seqs) + 1, n_tokens);
  for (int64_t t = n_tokens - 1; t >= 0; --t) {
    const int32_t s = seq[static_cast<size_t>(t)];
    if (s < 0 || s >= n_seqs || (t + 1 < n_tokens && seq[static_cast<size_t>(t + 1)] < s)) {
      return invalid_argument("token_seq is not a non-decreasing map onto the {} block-table rows", n_seqs);
    }
    seq_begin[static_cast<size_t>(s)] = t;
  }
  for (int64_t s = n_seqs - 1; s >= 0; --s) {
    seq_begin[static_cast<size_t>(s)] = std::min(seq_begin[static_cast<size_t>(s)], seq_begin[static_cast<size_t>(s) + 1]);
  }
  const int64_t m = std::max<int64_t>(1, std::min<int64_t>(parts, n_seqs));
  std::vector<MicroBatch> out;
  int64_t s0 = 0;
  for (int64_t part = 0; part < m; ++part) {
    // The next run ends where its tokens reach this part's share of what is left.
    const int64_t left_parts = m - part;
    int64_t s1 = s0 + 1;
    const int64_t target = seq_begin[static_cast<size_t>(s0)] +
                           (n_tokens - seq_begin[static_cast<size_t>(s0)] + left_parts - 1) / left_parts;
    while (s1 < n_seqs - (left_parts - 1) && seq_begin[static_cast<size_t>(s1)] < target) ++s1;
    if (part == m - 1) s1 = n_seqs;
    const int64_t t0 = seq_begin[static_cast<size_t>(s0)], t1 = seq_begin[static_cast<size_t>(s1)];
    MicroBatch mb;
    mb.n_tokens = t1 - t0;
    auto slice = [&](const std::vector<int32_t>& v, int64_t begin, int64_t end, int32_t minus) {
      std::vector<int32_t> r(v.begin() + begin, v.begin() + end);
      for (int32_t& x : r) x -= minus;
      return r;
    };
    mb.inputs.emplace(decoder::kTokens, HostTensor::i32(Shape{mb.n_tokens}, slice(tok, t0, t1, 0)));
    mb.inputs.emplace(decoder::kPositions, HostTensor::i32(Shape{mb.n_tokens}, slice(pos, t0, t1, 0)));
    mb.inputs.emplace(decoder::kTokenSeq,
                      HostTensor::i32(Shape{mb.n_tokens}, slice(seq, t0, t1, static_cast<int32_t>(s0))));
    const Shape table_shape{s1 - s0, width};
    mb.inputs.emplace(decoder::kBlockTables, HostTensor::i32(table_shape, slice(table, s0 * width, s1 * width, 0)));
    if (local_tables != nullptr) {
      mb.inputs.emplace(decoder::kBlockTablesLocal,
                        HostTensor::i32(table_shape, slice(local, s0 * width, s1 * width, 0)));
    }
    std::vector<int32_t> mb_rows;
    for (int32_t r : rows) {
      if (r >= t0 && r < t1) mb_rows.push_back(r - static_cast<int32_t>(t0));
    }
    mb.n_outputs = static_cast<int64_t>(mb_rows.size());
    mb.inputs.emplace(decoder::kLogitRows, HostTensor::i32(Shape{mb.n_outputs}, mb_rows));
    out.push_back(std::move(mb));
    s0 = s1;
  }
  return out;
}

}  // namespace hxrt::llm::pp
