// BlockManager: the bookkeeping of the paged KV cache — block pool, per-sequence block tables, prefix sharing by
// hash chain, reference counts for sharing and copy-on-write, and LRU reuse of cached blocks.
//
// It knows nothing of devices or bytes (docs/design/architecture.md, "Bookkeeping apart from memory"): a block is an
// integer id in [0, num_blocks), a slot is `block * block_size + offset`, and all metadata lives in arrays indexed by
// block id. KvCache (kv_cache.h) owns one BlockManager next to the K and V buffers and performs the copies it asks for.
//
// Sequences are integer ids chosen by the caller. A sequence holds `length` tokens; its block table has
// ceil(length / block_size) entries, and token i lives in slot table[i / block_size] * block_size + i % block_size.
// Tokens are appended by reserve(); `committed_length` (<= length) counts the tokens whose K/V the engine has
// computed and declared with commit().
//
// Block states (Note [Block states] in block_manager.cc):
//  - used:        referenced by at least one sequence (ref_count >= 1);
//  - reclaimable: unreferenced, but full, committed and registered in the prefix table — kept for prefix hits and
//                 reused in least-recently-released order when no free block is left;
//  - free:        unreferenced and holding nothing worth keeping.
// free + used + reclaimable == num_blocks at all times.
//
// Prefix sharing: the hash of a full block is kv_block_hash(hash of the previous block, its block_size token ids),
// starting from kRootBlockHash, so a hash names a whole prefix. commit() registers newly full, committed blocks;
// add_sequence() walks a prompt's chain and takes matching blocks (refcount + 1) instead of allocating. A block's
// data is valid only after commit, so uncommitted blocks are never hit.
//
// Copy-on-write: fork() shares every block of the source. A shared block is never written: when reserve() must
// append into a partially filled last block whose ref_count > 1, it first takes a new block and reports the copy
// (src -> dst) in Reservation::copy; the owner of the memory (KvCache) copies the bytes before the kernel writes.
//
// Errors: NotFound for an unknown sequence, AlreadyExists for a sequence id in use, OutOfRange for truncating past
// the length, InvalidArgument for malformed arguments. Running out of blocks is an expected outcome, not an error:
// reserve() returns ReserveOutcome::kExhausted with what was asked and what was available, and changes nothing.
// Every failing call leaves the state unchanged.
//
// Thread-safety: thread-compatible. The engine's scheduler drives the cache from one thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "hxrt/base/status.h"

namespace hxrt::kv {

// Caller-chosen sequence (request, beam, sample) id.
using SeqId = int64_t;

inline constexpr int32_t kNoBlock = -1;
inline constexpr uint64_t kRootBlockHash = 0x6b765f726f6f7431ULL;  // the "previous hash" of a sequence's block 0

// Hash of one full block given the hash of the block before it (kRootBlockHash for the first): a chain, so equal
// hashes mean equal prefixes up to and including this block (with 64-bit collision odds; hits also compare the
// block's token ids).
uint64_t kv_block_hash(uint64_t previous_hash, std::span<const int32_t> block_tokens);

enum class BlockState : uint8_t { kFree, kUsed, kReclaimable };

enum class ReserveOutcome : uint8_t {
  kOk,         // tokens appended, slots written
  kExhausted,  // not enough free + reclaimable blocks; nothing changed
};

// A block to duplicate before the kernel writes: every byte of block `src` (K and V, every layer) into `dst`.
struct BlockCopy {
  int32_t src = kNoBlock;
  int32_t dst = kNoBlock;
};

struct Reservation {
  ReserveOutcome outcome = ReserveOutcome::kOk;
  int32_t blocks_needed = 0;      // blocks the call takes from free + reclaimable (new blocks + copy-on-write)
  int32_t blocks_available = 0;   // free + reclaimable blocks before the call
  std::optional<BlockCopy> copy;  // copy-on-write done (KvCache) or to do (BlockManager) before writing
  bool ok() const { return outcome == ReserveOutcome::kOk; }
};

// A snapshot of the cache's accounting. Block counts are exact and O(1) to keep; token counts scan the block
// tables (O(blocks + table entries)). Definitions: docs/design/kv_cache.md, "Stats".
struct KvCacheStats {
  int32_t block_size = 0;
  uint64_t bytes_per_block = 0;  // K and V, all layers; 0 for a BlockManager built without a size

  int32_t total_blocks = 0;
  int32_t free_blocks = 0;
  int32_t used_blocks = 0;         // referenced by >= 1 sequence
  int32_t reclaimable_blocks = 0;  // cached for prefix hits, unreferenced

  int64_t sequences = 0;
  int64_t sequence_tokens = 0;  // sum of length(seq): shared tokens counted once per sequence
  int64_t valid_tokens = 0;     // slots of used blocks holding a token of some sequence, each slot once
  int64_t waste_tokens = 0;     // slots of used blocks holding none: used_blocks * block_size - valid_tokens

  uint64_t total_bytes = 0;
  uint64_t free_bytes = 0;
  uint64_t used_bytes = 0;
  uint64_t reclaimable_bytes = 0;
  uint64_t waste_bytes = 0;  // waste_tokens' share of used_bytes

  // Counters since creation.
  uint64_t prefix_lookups = 0;       // add_sequence() calls
  uint64_t prefix_hits = 0;          // add_sequence() calls that reused at least one block
  uint64_t prefix_query_tokens = 0;  // prompt tokens passed to add_sequence()
  uint64_t prefix_hit_tokens = 0;    // of those, tokens whose K/V was reused
  uint64_t cow_copies = 0;           // blocks copied on write
  uint64_t evictions = 0;            // reclaimable blocks reused for new data (their hash dropped)
  uint64_t blocks_allocated = 0;     // blocks taken from free or reclaimable
};

class BlockManager {
 public:
  // `num_blocks` > 0 and `block_size` > 0 with num_blocks * block_size < 2^31 (slots are int32); aborts otherwise
  // (KvCache validates its config first). `bytes_per_block` only scales the byte fields of stats().
  BlockManager(int32_t num_blocks, int32_t block_size, uint64_t bytes_per_block = 0);
  BlockManager(const BlockManager&) = delete;
  BlockManager& operator=(const BlockManager&) = delete;

  int32_t num_blocks() const { return num_blocks_; }
  int32_t block_size() const { return block_size_; }

  // --- Sequences --------------------------------------------------------------------------------------------------

  // Starts sequence `seq` with the longest cached prefix of `prompt_tokens` and returns its length in tokens: a
  // multiple of block_size, at most prompt_tokens.size() - 1 (the last prompt token is always recomputed, to
  // produce logits). The sequence then has that length, fully committed; append the rest with reserve().
  // Never allocates, so never exhausts. AlreadyExists when `seq` is live.
  Result<int32_t> add_sequence(SeqId seq, std::span<const int32_t> prompt_tokens);

  // Appends `new_tokens` to `seq`, taking blocks as needed, and writes each token's slot into `slots` (same size).
  // When the last block is partial and shared, copy-on-write first moves the sequence to a new block (reported in
  // Reservation::copy). All or nothing: kExhausted when blocks_needed > blocks_available, with nothing changed.
  // The slots stay valid until the sequence is next truncated or released; a later reserve() or fork() may copy
  // its last block, so the K/V for these slots must be written (enqueued) before then.
  Result<Reservation> reserve(SeqId seq, std::span<const int32_t> new_tokens, std::span<int32_t> slots);

  // Declares every reserved token of `seq` computed (its K/V written): committed_length = length, and blocks that
  // became full enter the prefix table (unless an equal block is registered already).
  Status commit(SeqId seq);

  // Starts `dst` as a copy of `src` sharing all of its blocks (ref_count + 1 each); nothing is copied until one of
  // them appends into a shared partial block.
  Status fork(SeqId src, SeqId dst);

  // Rolls `seq` back to its first `n_tokens` tokens (0 <= n_tokens <= length), releasing blocks past them.
  // A full block cut into keeps its hash until it is rewritten (it still holds valid data for other sequences and
  // prefix hits); reserve() drops the hash before writing into it.
  Status truncate(SeqId seq, int32_t n_tokens);

  // Ends `seq`: its blocks lose a reference; unreferenced registered blocks become reclaimable (the sequence's
  // last block first in line for reuse), others free.
  Status release(SeqId seq);

  // Gives back the blocks of `seq` that lie wholly before token `position` (0 <= position <= committed_length):
  // their table entries become kNoBlock and they lose a reference (registered ones stay reclaimable for prefix
  // hits). For the layers that attend to a sliding window (Note [Sliding-window cache] in llm/engine.cc): the
  // tokens before the window are never read again. The length does not change; later calls may release more; a
  // truncate below the released tokens is FailedPrecondition.
  Status release_before(SeqId seq, int32_t position);

  // --- Queries ----------------------------------------------------------------------------------------------------

  bool contains(SeqId seq) const { return sequences_.contains(seq); }
  int64_t num_sequences() const { return static_cast<int64_t>(sequences_.size()); }
  std::vector<SeqId> sequence_ids() const;  // unordered
  // Block ids of `seq`, token order (kNoBlock for blocks given back by release_before). Valid until the next call
  // that changes `seq`.
  Result<std::span<const int32_t>> block_table(SeqId seq) const;
  Result<int32_t> length(SeqId seq) const;
  Result<int32_t> committed_length(SeqId seq) const;

  // Blocks reserve(seq, n_new_tokens tokens) would take from free + reclaimable (including copy-on-write).
  Result<int32_t> blocks_needed(SeqId seq, int32_t n_new_tokens) const;
  // Whether reserve(seq, n_new_tokens tokens) would succeed.
  Result<bool> can_reserve(SeqId seq, int32_t n_new_tokens) const;

  // Tokens add_sequence(prompt_tokens) would find cached (no state change, no stats).
  int32_t match_prefix(std::span<const int32_t> prompt_tokens) const;
  // Blocks that admitting `prompt_tokens` (add_sequence, then reserve of the rest) takes from free + reclaimable:
  // new blocks plus reclaimable blocks the prefix hit revives. Compare with available_blocks(), or use can_add().
  int32_t blocks_needed_for_prompt(std::span<const int32_t> prompt_tokens) const;
  bool can_add(std::span<const int32_t> prompt_tokens) const;

  int32_t free_blocks() const { return static_cast<int32_t>(free_list_.size()); }
  int32_t reclaimable_blocks() const { return reclaimable_count_; }
  int32_t used_blocks() const { return num_blocks_ - free_blocks() - reclaimable_count_; }
  // Blocks an allocation may take: free + reclaimable.
  int32_t available_blocks() const { return free_blocks() + reclaimable_count_; }

  KvCacheStats stats() const;

  // --- Introspection (tests, tools) -------------------------------------------------------------------------------

  BlockState block_state(int32_t block) const;
  int32_t ref_count(int32_t block) const;
  // Whether `block` is registered in the prefix table (findable by add_sequence).
  bool is_cached(int32_t block) const;
  // Token ids recorded in the block's leading slots (the slots some sequence has written, or will write).
  std::span<const int32_t> block_tokens(int32_t block) const;
  // Recomputes every derived fact (reference counts, state partition, free list, LRU list, prefix table, table
  // sizes) from first principles; Internal naming the first violation. O(blocks + table entries).
  Status check_invariants() const;

 private:
  struct Sequence {
    std::vector<int32_t> blocks;
    int32_t length = 0;
    int32_t committed = 0;
    int32_t hashed_blocks = 0;  // leading table blocks whose chain hash is known (full and committed)
    int32_t released_blocks = 0;       // leading table entries given back by release_before (kNoBlock)
    uint64_t released_hash = kRootBlockHash;  // chain hash of the last of them (the next block's "previous")
  };
  // The chain hash of block i - 1 of `s` (kRootBlockHash for i = 0); i <= hashed_blocks.
  uint64_t hash_before(const Sequence& s, int32_t i) const;

  Result<Sequence*> find(SeqId seq);
  Result<const Sequence*> find(SeqId seq) const;
  // Prefix walk shared by add_sequence and the queries: appends the matching blocks to `hits`.
  void match_blocks(std::span<const int32_t> prompt_tokens, std::vector<int32_t>* hits) const;
  int32_t needed_for(const Sequence& s, int64_t n_new_tokens) const;

  // Takes a block from the free list, else evicts the least recently released reclaimable block. The caller has
  // checked availability. The block comes back used, ref_count 1, empty.
  int32_t allocate_block();
  void add_ref(int32_t block);  // a hit on a used or reclaimable block
  void drop_ref(int32_t block);
  void uncache(int32_t block);  // removes the block's prefix-table entry, if any, and forgets its hash

  void lru_push_back(int32_t block);
  void lru_remove(int32_t block);

  const int32_t num_blocks_;
  const int32_t block_size_;
  const uint64_t bytes_per_block_;

  // Per-block metadata, indexed by block id.
  std::vector<int32_t> ref_count_;
  std::vector<int32_t> num_tokens_;  // leading slots with a recorded token id
  std::vector<int32_t> token_ids_;   // (num_blocks, block_size)
  std::vector<uint64_t> hash_;       // chain hash, meaningful when hashed_
  std::vector<uint8_t> hashed_;      // full and committed: hash_ known
  std::vector<uint8_t> cached_;      // registered in prefix_table_ (implies hashed_)
  std::vector<int32_t> lru_prev_;    // reclaimable blocks, least recently released first
  std::vector<int32_t> lru_next_;

  std::vector<int32_t> free_list_;  // stack; back() is taken next
  int32_t lru_head_ = kNoBlock;
  int32_t lru_tail_ = kNoBlock;
  int32_t reclaimable_count_ = 0;

  std::unordered_map<uint64_t, int32_t> prefix_table_;  // chain hash -> cached block
  std::unordered_map<SeqId, Sequence> sequences_;

  KvCacheStats counters_;  // only the counter fields are kept here
};

}  // namespace hxrt::kv
