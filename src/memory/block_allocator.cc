#include "memory/block_allocator.h"

#include <algorithm>

namespace hxrt::memory {

BlockAllocator::BlockAllocator(const BlockAllocatorOptions& options)
    : alignment_(options.alignment), min_split_remainder_(0) {
  HXRT_CHECK(is_power_of_two(alignment_), "block alignment {} is not a power of two", alignment_);
  min_split_remainder_ = std::max(align_up(options.min_split_remainder, alignment_), alignment_);
}

BlockId BlockAllocator::new_block() {
  if (!unused_ids_.empty()) {
    const BlockId id = unused_ids_.back();
    unused_ids_.pop_back();
    blocks_[id] = Block{};
    live_[id] = true;
    return id;
  }
  HXRT_CHECK(blocks_.size() < kNoBlock, "block table full");
  blocks_.emplace_back();
  live_.push_back(true);
  return static_cast<BlockId>(blocks_.size() - 1);
}

void BlockAllocator::release_block(BlockId id) {
  live_[id] = false;
  unused_ids_.push_back(id);
}

const Block& BlockAllocator::block(BlockId id) const {
  HXRT_CHECK(id < blocks_.size() && live_[id], "unknown block id {}", id);
  return blocks_[id];
}

const SegmentInfo& BlockAllocator::segment(SegmentId segment) const {
  auto it = segments_.find(segment);
  HXRT_CHECK(it != segments_.end(), "unknown segment {}", segment);
  return it->second;
}

SegmentInfo& BlockAllocator::mutable_segment(SegmentId segment) {
  auto it = segments_.find(segment);
  HXRT_CHECK(it != segments_.end(), "unknown segment {}", segment);
  return it->second;
}

SegmentId BlockAllocator::add_segment(uint64_t size) {
  HXRT_CHECK(size > 0 && size % alignment_ == 0, "segment size {} is not a positive multiple of {}", size, alignment_);
  const SegmentId id = next_segment_++;
  const BlockId b = new_block();
  blocks_[b].segment = id;
  blocks_[b].size = size;
  free_.insert(key_of(blocks_[b], b));
  segments_.emplace(id, SegmentInfo{size, 0, 1, 0, b});
  reserved_bytes_ += size;
  return id;
}

void BlockAllocator::remove_segment(SegmentId segment) {
  const SegmentInfo& info = this->segment(segment);
  HXRT_CHECK(info.allocated_blocks == 0, "segment {} still has {} allocated blocks", segment, info.allocated_blocks);
  for (BlockId id = info.first_block; id != kNoBlock;) {
    const BlockId next = blocks_[id].next;
    free_.erase(key_of(blocks_[id], id));
    release_block(id);
    id = next;
  }
  reserved_bytes_ -= info.size;
  segments_.erase(segment);
}

bool BlockAllocator::segment_is_settled_free(SegmentId segment) const {
  const SegmentInfo& info = this->segment(segment);
  const Block& first = blocks_[info.first_block];
  return info.num_blocks == 1 && !first.allocated && first.stream == kSettled;
}

std::vector<SegmentId> BlockAllocator::segment_ids() const {
  std::vector<SegmentId> ids;
  ids.reserve(segments_.size());
  for (const auto& [id, info] : segments_) ids.push_back(id);
  return ids;
}

std::optional<BlockId> BlockAllocator::find_fit_in_segment(SegmentId segment, uint64_t bytes) const {
  const uint64_t size = round_size(bytes);
  for (BlockId id = this->segment(segment).first_block; id != kNoBlock; id = blocks_[id].next) {
    if (!blocks_[id].allocated && blocks_[id].size >= size) return id;
  }
  return std::nullopt;
}

BlockId BlockAllocator::allocate(BlockId free_block, uint64_t bytes, uint64_t stream, uint64_t payload) {
  const uint64_t size = round_size(bytes);
  HXRT_CHECK(size > 0, "allocating 0 bytes");
  HXRT_CHECK(free_block < blocks_.size() && live_[free_block] && !blocks_[free_block].allocated, "block {} is not free",
             free_block);
  Block& b = blocks_[free_block];
  HXRT_CHECK(b.size >= size, "block {} of {} bytes cannot hold {}", free_block, b.size, size);
  free_.erase(key_of(b, free_block));
  SegmentInfo& seg = mutable_segment(b.segment);

  if (b.size - size >= min_split_remainder_) {
    // Split: the tail stays free with the block's old tag (queued work of that stream may still touch it).
    const BlockId tail = new_block();  // may reallocate blocks_: re-take references below
    Block& head = blocks_[free_block];
    Block& t = blocks_[tail];
    t.segment = head.segment;
    t.offset = head.offset + size;
    t.size = head.size - size;
    t.stream = head.stream;
    t.epoch = head.epoch;
    t.prev = free_block;
    t.next = head.next;
    if (head.next != kNoBlock) blocks_[head.next].prev = tail;
    head.next = tail;
    head.size = size;
    free_.insert(key_of(t, tail));
    ++seg.num_blocks;
  }
  Block& a = blocks_[free_block];
  a.allocated = true;
  a.stream = stream;
  a.epoch = 0;
  a.payload = payload;
  ++seg.allocated_blocks;
  seg.allocated_bytes += a.size;
  allocated_bytes_ += a.size;
  ++allocated_blocks_;
  return free_block;
}

BlockId BlockAllocator::merge(BlockId id, BlockId neighbour) {
  const BlockId lo = blocks_[id].offset < blocks_[neighbour].offset ? id : neighbour;
  const BlockId hi = lo == id ? neighbour : id;
  Block& l = blocks_[lo];
  Block& h = blocks_[hi];
  HXRT_DCHECK(l.next == hi && h.prev == lo, "merging blocks that are not neighbours");
  free_.erase(key_of(l, lo));
  free_.erase(key_of(h, hi));
  l.size += h.size;
  l.epoch = std::max(l.epoch, h.epoch);
  l.next = h.next;
  if (h.next != kNoBlock) blocks_[h.next].prev = lo;
  --mutable_segment(l.segment).num_blocks;
  release_block(hi);
  free_.insert(key_of(l, lo));
  return lo;
}

BlockId BlockAllocator::free(BlockId block, uint64_t stream, uint64_t epoch) {
  HXRT_CHECK(block < blocks_.size() && live_[block] && blocks_[block].allocated, "block {} is not allocated", block);
  Block& b = blocks_[block];
  SegmentInfo& seg = mutable_segment(b.segment);
  --seg.allocated_blocks;
  seg.allocated_bytes -= b.size;
  allocated_bytes_ -= b.size;
  --allocated_blocks_;
  b.allocated = false;
  b.stream = stream;
  b.epoch = stream == kSettled ? 0 : epoch;
  b.payload = 0;
  free_.insert(key_of(b, block));

  BlockId id = block;
  const BlockId prev = blocks_[id].prev;
  if (prev != kNoBlock && !blocks_[prev].allocated && compatible(blocks_[prev], blocks_[id])) id = merge(id, prev);
  const BlockId next = blocks_[id].next;
  if (next != kNoBlock && !blocks_[next].allocated && compatible(blocks_[next], blocks_[id])) id = merge(id, next);
  return id;
}

void BlockAllocator::coalesce_segments(std::vector<SegmentId>& segments) {
  std::sort(segments.begin(), segments.end());
  segments.erase(std::unique(segments.begin(), segments.end()), segments.end());
  for (SegmentId s : segments) {
    BlockId id = segment(s).first_block;
    while (id != kNoBlock) {
      const BlockId next = blocks_[id].next;
      if (next != kNoBlock && !blocks_[id].allocated && !blocks_[next].allocated &&
          compatible(blocks_[id], blocks_[next])) {
        id = merge(id, next);  // stay on the merged block: it may merge with the following one too
      } else {
        id = next;
      }
    }
  }
}

}  // namespace hxrt::memory
