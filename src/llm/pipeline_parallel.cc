#include "llm/pipeline_parallel.h"

#include <algorithm>

namespace hxrt::llm::pp {

// Note [Pipeline-parallel engine]
// Each rank of a pipeline-parallel group plans the decoder's layers of its stage (pipeline_stage: contiguous, even
// ranges) and keeps the KV cache of those layers only; rank 0 also has the embedding, the last rank the output
// head. Any head count works, unlike tensor parallelism. Rank 0, the leader, schedules and samples as a one-rank
// engine does and broadcasts each forward's inputs (the step message of Note [Tensor-parallel engine]). Every rank
// then splits the step into the same micro-batches (step::split_micro_batches: runs of whole sequences) and, for each in
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

}  // namespace hxrt::llm::pp
