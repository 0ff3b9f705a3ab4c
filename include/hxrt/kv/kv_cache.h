// KvCache: the paged KV cache as a runtime object — two device buffers (K and V) cut into fixed-size blocks, and
// the BlockManager (block_manager.h) that hands the blocks to sequences.
//
// Layout (docs/design/kv_cache.md). K and V are each one hal::Buffer of shape
//   (n_layers, num_blocks, block_size, n_kv_heads, head_dim)   row-major, elements of config.dtype
// so the K of token slot `s` (= block * block_size + offset, as returned by reserve) for layer `l` starts at byte
//   l * layer_stride_bytes() + s * slot_stride_bytes()
// and block_stride_bytes() == block_size * slot_stride_bytes(). V is laid out identically.
//
// Memory is bounded by an explicit budget (bytes or tokens, never "all memory"):
//   bytes_per_block = 2 (K and V) * n_layers * block_size * n_kv_heads * head_dim * dtype size
//   num_blocks      = budget_bytes / bytes_per_block   (or budget_tokens / block_size)
// Both buffers are allocated once by create() and never grow.
//
// Sequence operations follow BlockManager's contract; KvCache adds the device side of copy-on-write: when reserve()
// must copy a shared block, it enqueues the copy of that block's bytes (K and V, every layer) on the given stream
// before returning, so kernels enqueued after it on that stream see the copy. Kernels on other streams must wait
// for that stream (an event) before reading or writing the new block.
//
// Ownership and lifetime: the Device must outlive the cache. Destroying the cache frees both buffers; every stream
// command that uses them must have finished first (synchronize the streams).
//
// Errors: create() returns InvalidArgument for a malformed config (non-positive sizes, a dtype other than f32, f16
// or bf16, no budget or two budgets, a budget under one block, more slots than int32 can name) and the Device's
// OutOfMemory when a buffer cannot be allocated (e.g. above info().max_allocation_bytes). Sequence operations return
// BlockManager's errors; running out of blocks is ReserveOutcome::kExhausted, not an error.
//
// Thread-safety: thread-compatible. The engine's scheduler drives the cache from one thread; the buffers may be
// used by kernels on any stream.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "hxrt/base/dtype.h"
#include "hxrt/base/status.h"
#include "hxrt/hal/buffer.h"
#include "hxrt/hal/device.h"
#include "hxrt/hal/stream.h"
#include "hxrt/hal/types.h"
#include "hxrt/kv/block_manager.h"

namespace hxrt::kv {

inline constexpr int kDefaultKvBlockSize = 16;

struct KvCacheConfig {
  int n_layers = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int block_size = kDefaultKvBlockSize;  // tokens per block
  DType dtype = DType::kF16;             // kF16, kBF16 or kF32
  // The budget: exactly one of the two is > 0. It is rounded down to whole blocks.
  uint64_t budget_bytes = 0;  // for K and V together
  int64_t budget_tokens = 0;  // token slots (each holding K and V for every layer)
  hal::MemoryKind memory_kind = hal::MemoryKind::kDevice;
};

// Sizes derived from a config; all strides in bytes and the same for K and V.
struct KvCacheLayout {
  int32_t num_blocks = 0;
  uint64_t element_bytes = 0;
  uint64_t slot_stride_bytes = 0;   // one token slot of one layer: n_kv_heads * head_dim elements
  uint64_t block_stride_bytes = 0;  // block_size slots
  uint64_t layer_stride_bytes = 0;  // num_blocks blocks
  uint64_t buffer_bytes = 0;        // one of K or V: n_layers layers
  uint64_t bytes_per_block = 0;     // one block of K and V over every layer
};

// Validates `config` and computes its layout (no device needed). InvalidArgument as described for create().
Result<KvCacheLayout> kv_cache_layout(const KvCacheConfig& config);

class KvCache {
 public:
  static Result<std::unique_ptr<KvCache>> create(hal::Device& device, const KvCacheConfig& config);
  ~KvCache() = default;
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  hal::Device& device() const { return device_; }
  const KvCacheConfig& config() const { return config_; }
  const KvCacheLayout& layout() const { return layout_; }
  int32_t num_blocks() const { return layout_.num_blocks; }
  int32_t block_size() const { return config_.block_size; }

  // --- Storage ----------------------------------------------------------------------------------------------------

  // (n_layers, num_blocks, block_size, n_kv_heads, head_dim)
  hal::Buffer& k_buffer() const { return *k_; }
  hal::Buffer& v_buffer() const { return *v_; }
  // One layer: (num_blocks, block_size, n_kv_heads, head_dim). Aborts for a layer out of range.
  hal::BufferView k_layer(int layer) const;
  hal::BufferView v_layer(int layer) const;
  uint64_t layer_stride_bytes() const { return layout_.layer_stride_bytes; }
  uint64_t block_stride_bytes() const { return layout_.block_stride_bytes; }
  uint64_t slot_stride_bytes() const { return layout_.slot_stride_bytes; }

  // --- Sequences (BlockManager's contract) ------------------------------------------------------------------------

  Result<int32_t> add_sequence(SeqId seq, std::span<const int32_t> prompt_tokens) {
    return blocks_.add_sequence(seq, prompt_tokens);
  }
  // As BlockManager::reserve; a copy-on-write is enqueued on `stream` (of this cache's device) before returning.
  // InvalidArgument for a stream of another device; the stream's error when it has failed and a copy is needed —
  // both before anything changes. Should enqueueing the copy itself fail, the sequence has already moved to the
  // new block, whose bytes are then undefined: the Status says so, and the caller must drop the sequence.
  Result<Reservation> reserve(SeqId seq, std::span<const int32_t> new_tokens, std::span<int32_t> slots,
                              hal::Stream& stream);
  Status commit(SeqId seq) { return blocks_.commit(seq); }
  Status fork(SeqId src, SeqId dst) { return blocks_.fork(src, dst); }
  Status truncate(SeqId seq, int32_t n_tokens) { return blocks_.truncate(seq, n_tokens); }
  Status release(SeqId seq) { return blocks_.release(seq); }
  Status release_before(SeqId seq, int32_t position) { return blocks_.release_before(seq, position); }

  // --- Queries ----------------------------------------------------------------------------------------------------

  bool contains(SeqId seq) const { return blocks_.contains(seq); }
  Result<std::span<const int32_t>> block_table(SeqId seq) const { return blocks_.block_table(seq); }
  Result<int32_t> length(SeqId seq) const { return blocks_.length(seq); }
  Result<int32_t> committed_length(SeqId seq) const { return blocks_.committed_length(seq); }
  Result<int32_t> blocks_needed(SeqId seq, int32_t n_new_tokens) const {
    return blocks_.blocks_needed(seq, n_new_tokens);
  }
  Result<bool> can_reserve(SeqId seq, int32_t n_new_tokens) const { return blocks_.can_reserve(seq, n_new_tokens); }
  int32_t match_prefix(std::span<const int32_t> prompt_tokens) const { return blocks_.match_prefix(prompt_tokens); }
  int32_t blocks_needed_for_prompt(std::span<const int32_t> prompt_tokens) const {
    return blocks_.blocks_needed_for_prompt(prompt_tokens);
  }
  bool can_add(std::span<const int32_t> prompt_tokens) const { return blocks_.can_add(prompt_tokens); }
  int32_t available_blocks() const { return blocks_.available_blocks(); }
  KvCacheStats stats() const { return blocks_.stats(); }

  // The bookkeeping, for introspection (block states, reference counts, invariants).
  const BlockManager& blocks() const { return blocks_; }

 private:
  KvCache(hal::Device& device, const KvCacheConfig& config, const KvCacheLayout& layout, std::unique_ptr<hal::Buffer> k,
          std::unique_ptr<hal::Buffer> v);

  // Enqueues the copy of block `copy.src` into `copy.dst`, K and V, every layer.
  Status copy_block(const BlockCopy& copy, hal::Stream& stream);

  hal::Device& device_;
  const KvCacheConfig config_;
  const KvCacheLayout layout_;
  std::unique_ptr<hal::Buffer> k_;  // (n_layers, num_blocks, block_size, n_kv_heads, head_dim)
  std::unique_ptr<hal::Buffer> v_;  // (n_layers, num_blocks, block_size, n_kv_heads, head_dim)
  BlockManager blocks_;
};

}  // namespace hxrt::kv
