// BlockAllocator: offset bookkeeping for sub-allocating segments (best fit, splitting, coalescing).
//
// It knows nothing of devices, buffers or streams (docs/design/architecture.md, "Bookkeeping apart from memory"): a
// segment is an integer id with a size, a block is (segment, offset, size). The caching allocator (caching_allocator.h)
// keeps one BlockAllocator per size class and maps segments to hal::Buffers.
//
// Every block carries:
//  - a stream tag: an opaque uint64 stream id. For an allocated block it is the stream it was allocated on; for a
//    free block it is the stream whose queued work may still touch the bytes, or kSettled (0) when no work can.
//  - a free epoch: the owning stream's epoch when the block was freed (meaningful only when the tag is not
//    kSettled). The layer above decides from (stream, epoch) whether a block may be reused by another stream.
//  - a payload: an opaque uint64 set by the user on allocate (the caching allocator stores the allocation id).
//
// Coalescing: free neighbours merge only when their tags are compatible — both settled, or both of the same stream
// (the merged block keeps the larger epoch, the conservative choice). A settled block never merges into a block
// that is still waiting on a stream; settle_if() retags blocks once their stream's work is known to be done and
// merges them then. With every block freed and settled, each segment is one free block again.
//
// Alignment: every offset and size is a multiple of Options::alignment (a power of two); requests are rounded up.
// A free block larger than the request is split only when the remainder is at least Options::min_split_remainder,
// so tiny unusable slivers are never created (the whole block is handed out instead, and its size says so).
//
// Block ids are indices into an internal table; an id stays valid while the block exists and may be reused for a
// new block after a split or merge destroyed it. Misuse (freeing a free block, unknown ids, removing a segment
// with allocated blocks) is a programmer error and aborts (HXRT_CHECK): the caching allocator validates its handles
// before calling in.
//
// Thread-safety: thread-compatible (the caching allocator serialises access with its mutex).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "hxrt/base/check.h"

namespace hxrt::memory {

using SegmentId = uint64_t;
using BlockId = uint32_t;

inline constexpr BlockId kNoBlock = ~BlockId{0};
// Stream tag of a free block that no queued work can touch.
inline constexpr uint64_t kSettled = 0;

inline constexpr uint64_t kDefaultBlockAlignment = 256;
// PyTorch's kMinBlockSize: a split never leaves a free remainder smaller than this.
inline constexpr uint64_t kDefaultMinSplitRemainder = 512;

// Rounds `value` up to a multiple of `alignment` (a power of two). The caller guarantees no overflow.
constexpr uint64_t align_up(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) & ~(alignment - 1);
}
constexpr bool is_power_of_two(uint64_t value) {
  return value != 0 && (value & (value - 1)) == 0;
}

struct BlockAllocatorOptions {
  uint64_t alignment = kDefaultBlockAlignment;               // power of two
  uint64_t min_split_remainder = kDefaultMinSplitRemainder;  // rounded up to alignment
};

struct Block {
  SegmentId segment = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  bool allocated = false;
  uint64_t stream = kSettled;  // see the header comment
  uint64_t epoch = 0;
  uint64_t payload = 0;
  BlockId prev = kNoBlock;  // neighbours in address order within the segment
  BlockId next = kNoBlock;
};

struct SegmentInfo {
  uint64_t size = 0;
  uint64_t allocated_bytes = 0;
  uint32_t num_blocks = 0;
  uint32_t allocated_blocks = 0;
  BlockId first_block = kNoBlock;
};

class BlockAllocator {
 public:
  explicit BlockAllocator(const BlockAllocatorOptions& options = {});
  BlockAllocator(const BlockAllocator&) = delete;
  BlockAllocator& operator=(const BlockAllocator&) = delete;

  uint64_t alignment() const { return alignment_; }
  uint64_t min_split_remainder() const { return min_split_remainder_; }
  // `bytes` rounded up to the alignment; 0 stays 0.
  uint64_t round_size(uint64_t bytes) const { return align_up(bytes, alignment_); }

  // --- segments ---
  // Adds a segment of `size` bytes (> 0, a multiple of the alignment) as one settled free block.
  SegmentId add_segment(uint64_t size);
  // Removes a segment that has no allocated block (its free blocks may carry any tags; the caller decides whether
  // that is safe). Aborts otherwise.
  void remove_segment(SegmentId segment);
  bool has_segment(SegmentId segment) const { return segments_.count(segment) != 0; }
  const SegmentInfo& segment(SegmentId segment) const;
  // True when no block of the segment is allocated.
  bool segment_is_free(SegmentId segment) const { return this->segment(segment).allocated_blocks == 0; }
  // True when the segment is one free, settled block (nothing allocated, no queued work can touch it).
  bool segment_is_settled_free(SegmentId segment) const;
  std::vector<SegmentId> segment_ids() const;  // ascending
  size_t num_segments() const { return segments_.size(); }

  // --- blocks ---
  const Block& block(BlockId id) const;

  // The smallest free block of at least round_size(bytes) for which usable(const Block&) is true; ties by
  // (segment, offset). Blocks are visited in best-fit order, so the first usable one is the best usable fit.
  template <typename Usable>
  std::optional<BlockId> find_fit_if(uint64_t bytes, Usable&& usable) const {
    const uint64_t size = round_size(bytes);
    for (auto it = free_.lower_bound(FreeKey{size, 0, 0, 0}); it != free_.end(); ++it) {
      if (usable(blocks_[it->block])) return it->block;
    }
    return std::nullopt;
  }
  // Best fit among blocks that are settled or tagged with `stream`.
  std::optional<BlockId> find_fit(uint64_t bytes, uint64_t stream) const {
    return find_fit_if(bytes, [stream](const Block& b) { return b.stream == kSettled || b.stream == stream; });
  }
  // The first free block of `segment` (in address order) of at least round_size(bytes), if any.
  std::optional<BlockId> find_fit_in_segment(SegmentId segment, uint64_t bytes) const;

  // Allocates round_size(bytes) from the free block `free_block` (which must be at least that large), splitting
  // off the tail as a free block (keeping the original tag and epoch) when it is at least min_split_remainder.
  // The allocated block gets tag `stream` and `payload`. Returns its id (the same id as `free_block`).
  BlockId allocate(BlockId free_block, uint64_t bytes, uint64_t stream, uint64_t payload);

  // Frees an allocated block, tagging it (stream, epoch) — kSettled for memory no queued work can touch — and
  // merges it with compatible free neighbours. Returns the id of the resulting free block.
  BlockId free(BlockId block, uint64_t stream, uint64_t epoch);

  // Retags as settled every unsettled free block for which pred(const Block&) is true, then merges settled
  // neighbours in the segments touched. Returns how many blocks were retagged.
  template <typename Pred>
  size_t settle_if(Pred&& pred) {
    std::vector<SegmentId> touched;
    size_t count = 0;
    for (const FreeKey& key : free_) {
      Block& b = blocks_[key.block];
      if (b.stream != kSettled && pred(static_cast<const Block&>(b))) {
        b.stream = kSettled;
        b.epoch = 0;
        ++count;
        touched.push_back(b.segment);
      }
    }
    coalesce_segments(touched);
    return count;
  }

  // Calls fn(const Block&) for each block of `segment` in address order.
  template <typename Fn>
  void for_each_block(SegmentId segment, Fn&& fn) const {
    for (BlockId id = this->segment(segment).first_block; id != kNoBlock; id = blocks_[id].next) fn(blocks_[id]);
  }

  // --- totals ---
  uint64_t reserved_bytes() const { return reserved_bytes_; }
  uint64_t allocated_bytes() const { return allocated_bytes_; }
  uint64_t free_bytes() const { return reserved_bytes_ - allocated_bytes_; }
  uint64_t allocated_blocks() const { return allocated_blocks_; }
  uint64_t free_blocks() const { return free_.size(); }
  uint64_t largest_free_block() const { return free_.empty() ? 0 : free_.rbegin()->size; }

 private:
  // Free blocks ordered for best fit.
  struct FreeKey {
    uint64_t size;
    SegmentId segment;
    uint64_t offset;
    BlockId block;
    bool operator<(const FreeKey& o) const {
      if (size != o.size) return size < o.size;
      if (segment != o.segment) return segment < o.segment;
      return offset < o.offset;
    }
  };
  static FreeKey key_of(const Block& b, BlockId id) { return FreeKey{b.size, b.segment, b.offset, id}; }

  BlockId new_block();
  void release_block(BlockId id);
  SegmentInfo& mutable_segment(SegmentId segment);
  // Merges `id` (free, in free_) with `neighbour` (free, in free_, compatible); the lower one survives and its id
  // is returned.
  BlockId merge(BlockId id, BlockId neighbour);
  static bool compatible(const Block& a, const Block& b) {
    return a.stream == b.stream;  // both kSettled, or both the same stream
  }
  void coalesce_segments(std::vector<SegmentId>& segments);

  uint64_t alignment_;
  uint64_t min_split_remainder_;
  std::vector<Block> blocks_;
  std::vector<BlockId> unused_ids_;
  std::vector<bool> live_;  // live_[id]: blocks_[id] is a block of some segment
  std::set<FreeKey> free_;
  std::map<SegmentId, SegmentInfo> segments_;
  SegmentId next_segment_ = 1;
  uint64_t reserved_bytes_ = 0;
  uint64_t allocated_bytes_ = 0;
  uint64_t allocated_blocks_ = 0;
};

}  // namespace hxrt::memory
