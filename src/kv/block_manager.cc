#include "hxrt/kv/block_manager.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "hxrt/base/check.h"

namespace hxrt::kv {

// Note [Block states]
// A block's state is derived from two facts kept per block: its reference count and whether it is registered in
// the prefix table (cached_). ref_count > 0 is used; ref_count == 0 and cached is reclaimable (linked into the LRU
// list); ref_count == 0 and not cached is free (on the free list). Only full, committed blocks are ever cached, so a
// reclaimable block always holds block_size valid tokens.
//
// hashed_ says the block's chain hash is known (it is full and its data was committed). A hashed block may be
// uncached when an equal block was registered first; it is then freed, not kept, when its last reference goes.
//
// Writes go only to a sequence's last block and only when that block is referenced once; a shared last block is
// copied first. Before writing into a block it owns, reserve() drops the block's hash: its old contents (kept
// through a truncate, still useful for prefix hits until then) are about to change.

namespace {

uint64_t mix64(uint64_t z) {
  // splitmix64's finalizer: a bijection with full avalanche.
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

}  // namespace

uint64_t kv_block_hash(uint64_t previous_hash, std::span<const int32_t> block_tokens) {
  uint64_t h = mix64(previous_hash);
  for (int32_t token : block_tokens) h = mix64(h ^ static_cast<uint32_t>(token));
  return mix64(h ^ block_tokens.size());
}

BlockManager::BlockManager(int32_t num_blocks, int32_t block_size, uint64_t bytes_per_block)
    : num_blocks_(num_blocks), block_size_(block_size), bytes_per_block_(bytes_per_block) {
  HXRT_CHECK(num_blocks > 0 && block_size > 0, "BlockManager needs blocks ({}) and a block size ({})", num_blocks,
             block_size);
  HXRT_CHECK(static_cast<int64_t>(num_blocks) * block_size <= std::numeric_limits<int32_t>::max(),
             "{} blocks of {} slots do not fit int32 slot ids", num_blocks, block_size);
  const auto n = static_cast<size_t>(num_blocks);
  ref_count_.assign(n, 0);
  num_tokens_.assign(n, 0);
  token_ids_.assign(n * static_cast<size_t>(block_size), 0);
  hash_.assign(n, 0);
  hashed_.assign(n, 0);
  cached_.assign(n, 0);
  lru_prev_.assign(n, kNoBlock);
  lru_next_.assign(n, kNoBlock);
  free_list_.reserve(n);
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_list_.push_back(b);  // block 0 is taken first
  counters_.block_size = block_size;
  counters_.bytes_per_block = bytes_per_block;
}

// --- Sequences ----------------------------------------------------------------------------------------------------

Result<int32_t> BlockManager::add_sequence(SeqId seq, std::span<const int32_t> prompt_tokens) {
  if (contains(seq)) return already_exists("kv: sequence {} already exists", seq);
  std::vector<int32_t> hits;
  match_blocks(prompt_tokens, &hits);
  for (int32_t b : hits) add_ref(b);

  Sequence s;
  s.length = static_cast<int32_t>(hits.size()) * block_size_;
  s.committed = s.length;
  s.hashed_blocks = static_cast<int32_t>(hits.size());
  s.blocks = std::move(hits);
  const int32_t cached_tokens = s.length;
  sequences_.emplace(seq, std::move(s));

  counters_.prefix_lookups++;
  counters_.prefix_query_tokens += prompt_tokens.size();
  if (cached_tokens > 0) {
    counters_.prefix_hits++;
    counters_.prefix_hit_tokens += static_cast<uint64_t>(cached_tokens);
  }
  return cached_tokens;
}

Result<Reservation> BlockManager::reserve(SeqId seq, std::span<const int32_t> new_tokens, std::span<int32_t> slots) {
  HXRT_ASSIGN_OR_RETURN(Sequence * s, find(seq));
  if (slots.size() != new_tokens.size()) {
    return invalid_argument("kv: reserve for sequence {} got {} tokens but {} slots", seq, new_tokens.size(),
                            slots.size());
  }
  Reservation r;
  r.blocks_available = available_blocks();
  if (new_tokens.empty()) return r;
  // needed_for counts in int64 and saturates, so a request beyond the whole cache is plain exhaustion; one that fits
  // keeps every position below num_blocks * block_size < 2^31.
  r.blocks_needed = needed_for(*s, static_cast<int64_t>(new_tokens.size()));
  if (r.blocks_needed > r.blocks_available) {
    r.outcome = ReserveOutcome::kExhausted;
    return r;
  }

  // Nothing below can fail.
  const int32_t offset = s->length % block_size_;
  if (offset != 0) {
    const int32_t last = s->blocks.back();
    if (ref_count_[last] > 1) {
      const int32_t copy = allocate_block();
      std::copy_n(token_ids_.begin() + static_cast<ptrdiff_t>(last) * block_size_, offset,
                  token_ids_.begin() + static_cast<ptrdiff_t>(copy) * block_size_);
      num_tokens_[copy] = offset;
      drop_ref(last);
      s->blocks.back() = copy;
      r.copy = BlockCopy{.src = last, .dst = copy};
      counters_.cow_copies++;
    } else if (hashed_[last]) {
      uncache(last);  // Note [Block states]: about to be rewritten
    }
  }
  for (size_t i = 0; i < new_tokens.size(); ++i) {
    const int32_t pos = s->length + static_cast<int32_t>(i);
    const int32_t off = pos % block_size_;
    if (off == 0) s->blocks.push_back(allocate_block());
    const int32_t b = s->blocks.back();
    const int32_t slot = b * block_size_ + off;
    token_ids_[static_cast<size_t>(slot)] = new_tokens[i];
    num_tokens_[b] = off + 1;
    slots[i] = slot;
  }
  s->length += static_cast<int32_t>(new_tokens.size());
  return r;
}

Status BlockManager::commit(SeqId seq) {
  HXRT_ASSIGN_OR_RETURN(Sequence * s, find(seq));
  s->committed = s->length;
  const int32_t full = s->committed / block_size_;
  uint64_t h = hash_before(*s, s->hashed_blocks);
  for (int32_t i = s->hashed_blocks; i < full; ++i) {
    const int32_t b = s->blocks[i];
    h = kv_block_hash(h, block_tokens(b));
    if (hashed_[b]) {
      // Shared with a sequence that committed it first (fork), or kept through a truncate.
      HXRT_DCHECK(hash_[b] == h, "kv: block {} has two chain hashes", b);
      continue;
    }
    hash_[b] = h;
    hashed_[b] = 1;
    if (prefix_table_.try_emplace(h, b).second) cached_[b] = 1;
  }
  s->hashed_blocks = full;
  return ok_status();
}

Status BlockManager::fork(SeqId src, SeqId dst) {
  HXRT_ASSIGN_OR_RETURN(const Sequence* s, std::as_const(*this).find(src));
  if (contains(dst)) return already_exists("kv: cannot fork sequence {} into {}: {} already exists", src, dst, dst);
  Sequence copy = *s;
  for (int32_t b : copy.blocks) {
    if (b != kNoBlock) add_ref(b);
  }
  sequences_.emplace(dst, std::move(copy));
  return ok_status();
}

Status BlockManager::truncate(SeqId seq, int32_t n_tokens) {
  HXRT_ASSIGN_OR_RETURN(Sequence * s, find(seq));
  if (n_tokens < 0) return invalid_argument("kv: cannot truncate sequence {} to {} tokens", seq, n_tokens);
  if (n_tokens > s->length) {
    return out_of_range("kv: cannot truncate sequence {} to {} tokens: it has {}", seq, n_tokens, s->length);
  }
  if (n_tokens < s->released_blocks * block_size_) {
    return failed_precondition("kv: cannot truncate sequence {} to {} tokens: its first {} were released", seq,
                               n_tokens, s->released_blocks * block_size_);
  }
  const auto keep = static_cast<size_t>(ceil_div(n_tokens, block_size_));
  while (s->blocks.size() > keep) {  // last block first: it is the first to be evicted (Note [Block states])
    drop_ref(s->blocks.back());
    s->blocks.pop_back();
  }
  s->length = n_tokens;
  s->committed = std::min(s->committed, n_tokens);
  s->hashed_blocks = std::min(s->hashed_blocks, n_tokens / block_size_);
  const int32_t offset = n_tokens % block_size_;
  if (offset != 0) {
    const int32_t last = s->blocks.back();
    // A block only this sequence uses, holding nothing cached, now holds just the kept tokens.
    if (ref_count_[last] == 1 && !hashed_[last]) num_tokens_[last] = offset;
  }
  return ok_status();
}

Status BlockManager::release(SeqId seq) {
  auto it = sequences_.find(seq);
  if (it == sequences_.end()) return not_found("kv: no sequence {}", seq);
  const std::vector<int32_t>& blocks = it->second.blocks;
  for (size_t i = blocks.size(); i-- > 0;) {  // last block first, as in truncate
    if (blocks[i] != kNoBlock) drop_ref(blocks[i]);
  }
  sequences_.erase(it);
  return ok_status();
}

Status BlockManager::release_before(SeqId seq, int32_t position) {
  HXRT_ASSIGN_OR_RETURN(Sequence * s, find(seq));
  if (position < 0 || position > s->committed) {
    return invalid_argument("kv: release_before({}) of sequence {} outside its {} committed tokens", position, seq,
                            s->committed);
  }
  // Every block below position is full and committed, so hashed (commit hashes all full committed blocks).
  const int32_t end = position / block_size_;
  for (int32_t i = s->released_blocks; i < end; ++i) {
    const int32_t b = s->blocks[static_cast<size_t>(i)];
    s->released_hash = hash_[b];
    drop_ref(b);
    s->blocks[static_cast<size_t>(i)] = kNoBlock;
  }
  s->released_blocks = std::max(s->released_blocks, end);
  return ok_status();
}

uint64_t BlockManager::hash_before(const Sequence& s, int32_t i) const {
  if (i == 0) return kRootBlockHash;
  const int32_t b = s.blocks[static_cast<size_t>(i - 1)];
  return b == kNoBlock ? s.released_hash : hash_[b];
}

// --- Queries ------------------------------------------------------------------------------------------------------

std::vector<SeqId> BlockManager::sequence_ids() const {
  std::vector<SeqId> ids;
  ids.reserve(sequences_.size());
  for (const auto& [id, s] : sequences_) ids.push_back(id);
  return ids;
}

Result<std::span<const int32_t>> BlockManager::block_table(SeqId seq) const {
  HXRT_ASSIGN_OR_RETURN(const Sequence* s, find(seq));
  return std::span<const int32_t>(s->blocks);
}

Result<int32_t> BlockManager::length(SeqId seq) const {
  HXRT_ASSIGN_OR_RETURN(const Sequence* s, find(seq));
  return s->length;
}

Result<int32_t> BlockManager::committed_length(SeqId seq) const {
  HXRT_ASSIGN_OR_RETURN(const Sequence* s, find(seq));
  return s->committed;
}

Result<int32_t> BlockManager::blocks_needed(SeqId seq, int32_t n_new_tokens) const {
  HXRT_ASSIGN_OR_RETURN(const Sequence* s, find(seq));
  if (n_new_tokens < 0) return invalid_argument("kv: blocks_needed for {} new tokens", n_new_tokens);
  return needed_for(*s, n_new_tokens);
}

Result<bool> BlockManager::can_reserve(SeqId seq, int32_t n_new_tokens) const {
  HXRT_ASSIGN_OR_RETURN(const Sequence* s, find(seq));
  if (n_new_tokens < 0) return invalid_argument("kv: can_reserve for {} new tokens", n_new_tokens);
  return needed_for(*s, n_new_tokens) <= available_blocks();
}

int32_t BlockManager::match_prefix(std::span<const int32_t> prompt_tokens) const {
  std::vector<int32_t> hits;
  match_blocks(prompt_tokens, &hits);
  return static_cast<int32_t>(hits.size()) * block_size_;
}

int32_t BlockManager::blocks_needed_for_prompt(std::span<const int32_t> prompt_tokens) const {
  std::vector<int32_t> hits;
  match_blocks(prompt_tokens, &hits);
  const int64_t revived = std::count_if(hits.begin(), hits.end(), [&](int32_t b) { return ref_count_[b] == 0; });
  const int64_t total = ceil_div(static_cast<int64_t>(prompt_tokens.size()), block_size_);
  const int64_t needed = total - static_cast<int64_t>(hits.size()) + revived;
  return static_cast<int32_t>(std::min<int64_t>(needed, std::numeric_limits<int32_t>::max()));
}

bool BlockManager::can_add(std::span<const int32_t> prompt_tokens) const {
  return blocks_needed_for_prompt(prompt_tokens) <= available_blocks();
}

KvCacheStats BlockManager::stats() const {
  KvCacheStats st = counters_;
  st.total_blocks = num_blocks_;
  st.free_blocks = free_blocks();
  st.used_blocks = used_blocks();
  st.reclaimable_blocks = reclaimable_count_;
  st.sequences = num_sequences();

  // A used block holds, for each sequence referencing it, a prefix of its slots; the block's valid slots are the
  // longest of those prefixes.
  std::vector<int32_t> extent(static_cast<size_t>(num_blocks_), 0);
  for (const auto& [id, s] : sequences_) {
    st.sequence_tokens += s.length;
    for (size_t i = 0; i < s.blocks.size(); ++i) {
      if (s.blocks[i] == kNoBlock) continue;
      const int32_t in_block = std::min(block_size_, s.length - static_cast<int32_t>(i) * block_size_);
      int32_t& e = extent[static_cast<size_t>(s.blocks[i])];
      e = std::max(e, in_block);
    }
  }
  for (int32_t e : extent) st.valid_tokens += e;
  st.waste_tokens = static_cast<int64_t>(st.used_blocks) * block_size_ - st.valid_tokens;

  const uint64_t bpb = bytes_per_block_;
  st.total_bytes = bpb * static_cast<uint64_t>(st.total_blocks);
  st.free_bytes = bpb * static_cast<uint64_t>(st.free_blocks);
  st.used_bytes = bpb * static_cast<uint64_t>(st.used_blocks);
  st.reclaimable_bytes = bpb * static_cast<uint64_t>(st.reclaimable_blocks);
  st.waste_bytes = bpb / static_cast<uint64_t>(block_size_) * static_cast<uint64_t>(st.waste_tokens);
  return st;
}

// --- Introspection ------------------------------------------------------------------------------------------------

BlockState BlockManager::block_state(int32_t block) const {
  HXRT_CHECK(block >= 0 && block < num_blocks_, "kv: block {} out of [0, {})", block, num_blocks_);
  if (ref_count_[block] > 0) return BlockState::kUsed;
  return cached_[block] ? BlockState::kReclaimable : BlockState::kFree;
}

int32_t BlockManager::ref_count(int32_t block) const {
  HXRT_CHECK(block >= 0 && block < num_blocks_, "kv: block {} out of [0, {})", block, num_blocks_);
  return ref_count_[block];
}

bool BlockManager::is_cached(int32_t block) const {
  HXRT_CHECK(block >= 0 && block < num_blocks_, "kv: block {} out of [0, {})", block, num_blocks_);
  return cached_[block] != 0;
}

std::span<const int32_t> BlockManager::block_tokens(int32_t block) const {
  HXRT_CHECK(block >= 0 && block < num_blocks_, "kv: block {} out of [0, {})", block, num_blocks_);
  return std::span<const int32_t>(token_ids_)
      .subspan(static_cast<size_t>(block) * block_size_, static_cast<size_t>(num_tokens_[block]));
}

Status BlockManager::check_invariants() const {
  const auto n = static_cast<size_t>(num_blocks_);
  std::vector<int32_t> refs(n, 0);
  for (const auto& [id, s] : sequences_) {
    if (s.length < 0 || s.committed < 0 || s.committed > s.length) {
      return internal_error("kv: sequence {} has length {} and committed {}", id, s.length, s.committed);
    }
    if (static_cast<int64_t>(s.blocks.size()) != ceil_div(s.length, block_size_)) {
      return internal_error("kv: sequence {} of {} tokens has {} blocks", id, s.length, s.blocks.size());
    }
    if (s.hashed_blocks < 0 || s.hashed_blocks > s.committed / block_size_) {
      return internal_error("kv: sequence {} claims {} hashed blocks with {} committed tokens", id, s.hashed_blocks,
                            s.committed);
    }
    if (s.released_blocks < 0 || s.released_blocks > s.hashed_blocks) {
      return internal_error("kv: sequence {} released {} blocks with {} hashed", id, s.released_blocks,
                            s.hashed_blocks);
    }
    for (size_t i = 0; i < s.blocks.size(); ++i) {
      const int32_t b = s.blocks[i];
      if (static_cast<int32_t>(i) < s.released_blocks) {
        if (b != kNoBlock) return internal_error("kv: sequence {} kept block {} of its released ones", id, i);
        continue;
      }
      if (b < 0 || b >= num_blocks_) return internal_error("kv: sequence {} holds block id {}", id, b);
      refs[static_cast<size_t>(b)]++;
      if (static_cast<int32_t>(i) < s.hashed_blocks && !hashed_[b]) {
        return internal_error("kv: sequence {} block {} (#{}) should be hashed", id, b, i);
      }
      const int32_t in_block = std::min(block_size_, s.length - static_cast<int32_t>(i) * block_size_);
      if (num_tokens_[b] < in_block) {
        return internal_error("kv: block {} records {} tokens, sequence {} holds {} in it", b, num_tokens_[b], id,
                              in_block);
      }
    }
  }
  int32_t used = 0;
  int32_t cached_unreferenced = 0;
  for (size_t b = 0; b < n; ++b) {
    if (refs[b] != ref_count_[b]) {
      return internal_error("kv: block {} has ref_count {} but {} references", b, ref_count_[b], refs[b]);
    }
    if (refs[b] > 0) used++;
    if (cached_[b]) {
      if (!hashed_[b] || num_tokens_[b] != block_size_) return internal_error("kv: cached block {} is not full", b);
      auto it = prefix_table_.find(hash_[b]);
      if (it == prefix_table_.end() || it->second != static_cast<int32_t>(b)) {
        return internal_error("kv: cached block {} is not in the prefix table", b);
      }
      if (refs[b] == 0) cached_unreferenced++;
    }
    if (hashed_[b] && refs[b] == 0 && !cached_[b]) return internal_error("kv: free block {} kept its hash", b);
  }
  for (const auto& [h, b] : prefix_table_) {
    if (!cached_[b] || hash_[b] != h) return internal_error("kv: prefix table entry for block {} is stale", b);
  }
  // Free list: exactly the unreferenced, uncached blocks, once each.
  std::vector<uint8_t> seen(n, 0);
  for (int32_t b : free_list_) {
    if (b < 0 || b >= num_blocks_ || seen[b]++ || refs[b] != 0 || cached_[b]) {
      return internal_error("kv: free list holds block {} wrongly", b);
    }
  }
  // LRU list: exactly the reclaimable blocks, linked both ways.
  if ((lru_head_ == kNoBlock) != (lru_tail_ == kNoBlock)) return internal_error("kv: LRU list has one end");
  int32_t count = 0;
  for (int32_t b = lru_head_, prev = kNoBlock; b != kNoBlock; prev = b, b = lru_next_[b]) {
    if (++count > num_blocks_ || lru_prev_[b] != prev || refs[b] != 0 || !cached_[b]) {
      return internal_error("kv: LRU list is broken at block {}", b);
    }
    if (lru_next_[b] == kNoBlock && lru_tail_ != b) return internal_error("kv: LRU tail is not block {}", b);
  }
  if (count != reclaimable_count_ || count != cached_unreferenced) {
    return internal_error("kv: {} reclaimable blocks counted, {} linked, {} cached and unreferenced",
                          reclaimable_count_, count, cached_unreferenced);
  }
  if (used != used_blocks() || free_blocks() + used + reclaimable_count_ != num_blocks_) {
    return internal_error("kv: free {} + used {} + reclaimable {} != total {}", free_blocks(), used, reclaimable_count_,
                          num_blocks_);
  }
  return ok_status();
}

// --- Internals ----------------------------------------------------------------------------------------------------

Result<BlockManager::Sequence*> BlockManager::find(SeqId seq) {
  auto it = sequences_.find(seq);
  if (it == sequences_.end()) return not_found("kv: no sequence {}", seq);
  return &it->second;
}

Result<const BlockManager::Sequence*> BlockManager::find(SeqId seq) const {
  auto it = sequences_.find(seq);
  if (it == sequences_.end()) return not_found("kv: no sequence {}", seq);
  return &it->second;
}

void BlockManager::match_blocks(std::span<const int32_t> prompt_tokens, std::vector<int32_t>* hits) const {
  // The last prompt token is always recomputed, so at most (size - 1) tokens, in whole blocks, can hit.
  const size_t max_blocks = prompt_tokens.empty() ? 0 : (prompt_tokens.size() - 1) / block_size_;
  uint64_t h = kRootBlockHash;
  for (size_t i = 0; i < max_blocks; ++i) {
    const auto tokens = prompt_tokens.subspan(i * block_size_, static_cast<size_t>(block_size_));
    h = kv_block_hash(h, tokens);
    auto it = prefix_table_.find(h);
    if (it == prefix_table_.end()) break;
    const std::span<const int32_t> cached = block_tokens(it->second);
    if (!std::equal(cached.begin(), cached.end(), tokens.begin(), tokens.end())) break;  // a hash collision
    hits->push_back(it->second);
  }
}

int32_t BlockManager::needed_for(const Sequence& s, int64_t n_new_tokens) const {
  if (n_new_tokens == 0) return 0;
  const int64_t new_blocks = ceil_div(s.length + n_new_tokens, block_size_) - static_cast<int64_t>(s.blocks.size());
  const bool cow = s.length % block_size_ != 0 && ref_count_[s.blocks.back()] > 1;
  return static_cast<int32_t>(std::min<int64_t>(new_blocks + (cow ? 1 : 0), std::numeric_limits<int32_t>::max()));
}

int32_t BlockManager::allocate_block() {
  int32_t b;
  if (!free_list_.empty()) {
    b = free_list_.back();
    free_list_.pop_back();
  } else {
    HXRT_CHECK(lru_head_ != kNoBlock, "kv: allocate_block with no free or reclaimable block");
    b = lru_head_;
    lru_remove(b);
    uncache(b);
    counters_.evictions++;
  }
  ref_count_[b] = 1;
  num_tokens_[b] = 0;
  counters_.blocks_allocated++;
  return b;
}

void BlockManager::add_ref(int32_t block) {
  if (ref_count_[block] == 0) {
    HXRT_DCHECK(cached_[block], "kv: reviving block {} that is not cached", block);
    lru_remove(block);
  }
  ref_count_[block]++;
}

void BlockManager::drop_ref(int32_t block) {
  HXRT_DCHECK(ref_count_[block] > 0, "kv: block {} released too often", block);
  if (--ref_count_[block] > 0) return;
  if (cached_[block]) {
    lru_push_back(block);
  } else {
    hashed_[block] = 0;
    free_list_.push_back(block);
  }
}

void BlockManager::uncache(int32_t block) {
  if (cached_[block]) {
    prefix_table_.erase(hash_[block]);
    cached_[block] = 0;
  }
  hashed_[block] = 0;
}

void BlockManager::lru_push_back(int32_t block) {
  lru_prev_[block] = lru_tail_;
  lru_next_[block] = kNoBlock;
  if (lru_tail_ != kNoBlock) {
    lru_next_[lru_tail_] = block;
  } else {
    lru_head_ = block;
  }
  lru_tail_ = block;
  reclaimable_count_++;
}

void BlockManager::lru_remove(int32_t block) {
  const int32_t prev = lru_prev_[block];
  const int32_t next = lru_next_[block];
  if (prev != kNoBlock) {
    lru_next_[prev] = next;
  } else {
    lru_head_ = next;
  }
  if (next != kNoBlock) {
    lru_prev_[next] = prev;
  } else {
    lru_tail_ = prev;
  }
  lru_prev_[block] = lru_next_[block] = kNoBlock;
  reclaimable_count_--;
}

}  // namespace hxrt::kv
