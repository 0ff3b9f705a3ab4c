#include "memory/block_allocator.h"

#include <algorithm>
#include <map>
#include <random>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

namespace hxrt::memory {
namespace {

constexpr uint64_t kStreamA = 11;
constexpr uint64_t kStreamB = 22;

BlockAllocatorOptions small_options() {
  BlockAllocatorOptions options;
  options.alignment = 256;
  options.min_split_remainder = 512;
  return options;
}

TEST(BlockAllocatorTest, NewSegmentIsOneSettledFreeBlock) {
  BlockAllocator ba(small_options());
  const SegmentId s = ba.add_segment(4096);
  EXPECT_EQ(ba.reserved_bytes(), 4096u);
  EXPECT_EQ(ba.free_bytes(), 4096u);
  EXPECT_EQ(ba.largest_free_block(), 4096u);
  EXPECT_TRUE(ba.segment_is_free(s));
  EXPECT_TRUE(ba.segment_is_settled_free(s));
  EXPECT_EQ(ba.segment(s).num_blocks, 1u);
}

TEST(BlockAllocatorTest, AllocateRoundsSplitsAndTagsBlocks) {
  BlockAllocator ba(small_options());
  const SegmentId s = ba.add_segment(4096);
  auto fit = ba.find_fit(100, kStreamA);
  ASSERT_TRUE(fit.has_value());
  const BlockId b = ba.allocate(*fit, 100, kStreamA, /*payload=*/7);
  const Block& blk = ba.block(b);
  EXPECT_EQ(blk.offset, 0u);
  EXPECT_EQ(blk.size, 256u);
  EXPECT_TRUE(blk.allocated);
  EXPECT_EQ(blk.stream, kStreamA);
  EXPECT_EQ(blk.payload, 7u);
  EXPECT_EQ(ba.segment(s).num_blocks, 2u);
  EXPECT_EQ(ba.allocated_bytes(), 256u);
  EXPECT_EQ(ba.free_bytes(), 4096u - 256u);
  EXPECT_FALSE(ba.segment_is_free(s));
}

TEST(BlockAllocatorTest, DoesNotSplitOffRemaindersBelowMinimum) {
  BlockAllocator ba(small_options());
  ba.add_segment(1024);
  // 1024 - 768 = 256 < 512: the whole block is handed out.
  const BlockId b = ba.allocate(*ba.find_fit(768, kSettled), 768, kStreamA, 0);
  EXPECT_EQ(ba.block(b).size, 1024u);
  EXPECT_EQ(ba.free_blocks(), 0u);
  EXPECT_FALSE(ba.find_fit(1, kStreamA).has_value());
}

TEST(BlockAllocatorTest, BestFitPicksSmallestSufficientBlock) {
  BlockAllocator ba(small_options());
  ba.add_segment(8192);
  // Carve free holes of 1024 and 2048 separated by allocated blocks.
  const BlockId a = ba.allocate(*ba.find_fit(2048, 0), 2048, kStreamA, 0);
  const BlockId sep1 = ba.allocate(*ba.find_fit(256, 0), 256, kStreamA, 0);
  const BlockId c = ba.allocate(*ba.find_fit(1024, 0), 1024, kStreamA, 0);
  const BlockId sep2 = ba.allocate(*ba.find_fit(256, 0), 256, kStreamA, 0);
  const uint64_t c_offset = ba.block(c).offset;
  ba.free(a, kSettled, 0);
  ba.free(c, kSettled, 0);
  auto fit = ba.find_fit(1000, kStreamB);
  ASSERT_TRUE(fit.has_value());
  EXPECT_EQ(ba.block(*fit).offset, c_offset);
  EXPECT_EQ(ba.block(*fit).size, 1024u);
  (void)sep1;
  (void)sep2;
}

TEST(BlockAllocatorTest, FreeCoalescesWithSettledNeighbours) {
  BlockAllocator ba(small_options());
  const SegmentId s = ba.add_segment(4096);
  const BlockId a = ba.allocate(*ba.find_fit(1024, 0), 1024, kStreamA, 0);
  const BlockId b = ba.allocate(*ba.find_fit(1024, 0), 1024, kStreamA, 0);
  const BlockId c = ba.allocate(*ba.find_fit(1024, 0), 1024, kStreamA, 0);
  EXPECT_EQ(ba.segment(s).num_blocks, 4u);
  ba.free(a, kSettled, 0);
  ba.free(c, kSettled, 0);  // merges with the free tail
  EXPECT_EQ(ba.segment(s).num_blocks, 3u);
  const BlockId merged = ba.free(b, kSettled, 0);
  EXPECT_EQ(ba.segment(s).num_blocks, 1u);
  EXPECT_EQ(ba.block(merged).offset, 0u);
  EXPECT_EQ(ba.block(merged).size, 4096u);
  EXPECT_TRUE(ba.segment_is_settled_free(s));
}

TEST(BlockAllocatorTest, CoalescesOnlyCompatibleTagsKeepingMaxEpoch) {
  BlockAllocator ba(small_options());
  const SegmentId s = ba.add_segment(3072);
  const BlockId a = ba.allocate(*ba.find_fit(1024, 0), 1024, kStreamA, 0);
  const BlockId b = ba.allocate(*ba.find_fit(1024, 0), 1024, kStreamA, 0);
  const BlockId c = ba.allocate(*ba.find_fit(1024, 0), 1024, kStreamA, 0);
  ba.free(a, kStreamA, 3);
  ba.free(c, kStreamB, 4);
  // b freed on A merges with a (same stream) but not with c (other stream).
  const BlockId ab = ba.free(b, kStreamA, 5);
  EXPECT_EQ(ba.segment(s).num_blocks, 2u);
  EXPECT_EQ(ba.block(ab).size, 2048u);
  EXPECT_EQ(ba.block(ab).stream, kStreamA);
  EXPECT_EQ(ba.block(ab).epoch, 5u);
  EXPECT_TRUE(ba.segment_is_free(s));
  EXPECT_FALSE(ba.segment_is_settled_free(s));

  // Stream B cannot use A's block; a settled-only search finds nothing.
  auto fit_b = ba.find_fit(2048, kStreamB);
  EXPECT_FALSE(fit_b.has_value());
  EXPECT_TRUE(ba.find_fit(2048, kStreamA).has_value());

  // Settling A's blocks does not merge them with B's pending block...
  EXPECT_EQ(ba.settle_if([](const Block& blk) { return blk.stream == kStreamA; }), 1u);
  EXPECT_EQ(ba.segment(s).num_blocks, 2u);
  // ...settling B's does, back to one block.
  EXPECT_EQ(ba.settle_if([](const Block& blk) { return blk.stream == kStreamB && blk.epoch <= 4; }), 1u);
  EXPECT_EQ(ba.segment(s).num_blocks, 1u);
  EXPECT_TRUE(ba.segment_is_settled_free(s));
}

TEST(BlockAllocatorTest, SplitTailKeepsTagOfTheFreeBlock) {
  BlockAllocator ba(small_options());
  ba.add_segment(4096);
  const BlockId a = ba.allocate(*ba.find_fit(4096, 0), 4096, kStreamA, 0);
  ba.free(a, kStreamA, 9);
  const BlockId b = ba.allocate(*ba.find_fit(1024, kStreamA), 1024, kStreamA, 0);
  const Block& tail = ba.block(ba.block(b).next);
  EXPECT_FALSE(tail.allocated);
  EXPECT_EQ(tail.stream, kStreamA);
  EXPECT_EQ(tail.epoch, 9u);
}

TEST(BlockAllocatorTest, FindFitIfUsesPredicateInBestFitOrder) {
  BlockAllocator ba(small_options());
  const SegmentId s1 = ba.add_segment(1024);
  const SegmentId s2 = ba.add_segment(2048);
  auto fit = ba.find_fit_if(512, [s2](const Block& b) { return b.segment == s2; });
  ASSERT_TRUE(fit.has_value());
  EXPECT_EQ(ba.block(*fit).segment, s2);
  fit = ba.find_fit_if(512, [](const Block&) { return true; });
  EXPECT_EQ(ba.block(*fit).segment, s1);
  EXPECT_FALSE(ba.find_fit_if(4096, [](const Block&) { return true; }).has_value());
}

TEST(BlockAllocatorTest, RemoveSegmentUpdatesTotals) {
  BlockAllocator ba(small_options());
  const SegmentId s1 = ba.add_segment(1024);
  const SegmentId s2 = ba.add_segment(2048);
  const BlockId b = ba.allocate(*ba.find_fit_in_segment(s2, 512), 512, kStreamA, 0);
  EXPECT_EQ(ba.block(b).segment, s2);
  ba.remove_segment(s1);
  EXPECT_FALSE(ba.has_segment(s1));
  EXPECT_EQ(ba.reserved_bytes(), 2048u);
  EXPECT_EQ(ba.largest_free_block(), 1536u);
  ba.free(b, kSettled, 0);
  ba.remove_segment(s2);
  EXPECT_EQ(ba.reserved_bytes(), 0u);
  EXPECT_EQ(ba.free_blocks(), 0u);
  EXPECT_EQ(ba.num_segments(), 0u);
}

TEST(BlockAllocatorDeathTest, MisuseAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // sanitizer runtimes start threads of their own
  BlockAllocator ba(small_options());
  const SegmentId s = ba.add_segment(1024);
  const BlockId b = ba.allocate(*ba.find_fit(256, 0), 256, kStreamA, 0);
  EXPECT_DEATH(ba.remove_segment(s), "allocated");
  ba.free(b, kSettled, 0);
  EXPECT_DEATH(ba.free(b, kSettled, 0), "not allocated");
  EXPECT_DEATH(ba.add_segment(1000), "multiple");
}

// ---------------------------------------------------------------------------------------------------------------
// Randomized test against a simple model: the model keeps the live blocks; after every step the allocator's blocks
// must tile each segment exactly, be aligned, agree with the model and with every counter, and keep the coalescing
// invariant (no two adjacent free blocks with the same tag).

struct ModelBlock {
  SegmentId segment;
  uint64_t offset;
  uint64_t size;
  uint64_t requested;
  uint64_t payload;
  uint64_t stream;
};

class BlockAllocatorModelTest : public ::testing::Test {
 protected:
  void check_invariants(const BlockAllocator& ba, const std::map<BlockId, ModelBlock>& live, int step) {
    SCOPED_TRACE(::testing::Message() << "step " << step);
    uint64_t reserved = 0, allocated = 0, allocated_blocks = 0, free_blocks = 0, largest_free = 0;
    std::map<std::tuple<SegmentId, uint64_t>, uint64_t> seen_allocated;  // (segment, offset) -> payload
    for (SegmentId s : ba.segment_ids()) {
      const SegmentInfo& info = ba.segment(s);
      uint64_t expected_offset = 0, seg_allocated = 0;
      uint32_t blocks = 0, seg_allocated_blocks = 0;
      const Block* prev = nullptr;
      ba.for_each_block(s, [&](const Block& b) {
        EXPECT_EQ(b.segment, s);
        EXPECT_EQ(b.offset, expected_offset) << "blocks must tile the segment";
        EXPECT_GT(b.size, 0u);
        EXPECT_EQ(b.offset % ba.alignment(), 0u);
        EXPECT_EQ(b.size % ba.alignment(), 0u);
        expected_offset += b.size;
        ++blocks;
        if (b.allocated) {
          seg_allocated += b.size;
          ++seg_allocated_blocks;
          seen_allocated[{s, b.offset}] = b.payload;
        } else {
          ++free_blocks;
          largest_free = std::max(largest_free, b.size);
          if (prev != nullptr && !prev->allocated) {
            EXPECT_NE(prev->stream, b.stream) << "adjacent free blocks with one tag were not coalesced";
          }
        }
        prev = &b;
      });
      EXPECT_EQ(expected_offset, info.size);
      EXPECT_EQ(blocks, info.num_blocks);
      EXPECT_EQ(seg_allocated, info.allocated_bytes);
      EXPECT_EQ(seg_allocated_blocks, info.allocated_blocks);
      EXPECT_EQ(ba.segment_is_free(s), seg_allocated_blocks == 0);
      reserved += info.size;
      allocated += seg_allocated;
      allocated_blocks += seg_allocated_blocks;
    }
    EXPECT_EQ(reserved, ba.reserved_bytes());
    EXPECT_EQ(allocated, ba.allocated_bytes());
    EXPECT_EQ(reserved - allocated, ba.free_bytes());
    EXPECT_EQ(allocated_blocks, ba.allocated_blocks());
    EXPECT_EQ(free_blocks, ba.free_blocks());
    EXPECT_EQ(largest_free, ba.largest_free_block());

    // The allocator's allocated blocks are exactly the model's live blocks.
    ASSERT_EQ(seen_allocated.size(), live.size());
    for (const auto& [id, m] : live) {
      const Block& b = ba.block(id);
      EXPECT_TRUE(b.allocated);
      EXPECT_EQ(b.segment, m.segment);
      EXPECT_EQ(b.offset, m.offset);
      EXPECT_EQ(b.size, m.size);
      EXPECT_EQ(b.payload, m.payload);
      EXPECT_EQ(b.stream, m.stream);
      auto it = seen_allocated.find({m.segment, m.offset});
      ASSERT_NE(it, seen_allocated.end());
      EXPECT_EQ(it->second, m.payload);
    }
    // No two live blocks overlap (checked on the model, independently of the tiling walk above).
    std::vector<const ModelBlock*> sorted;
    for (const auto& [id, m] : live) sorted.push_back(&m);
    std::sort(sorted.begin(), sorted.end(), [](const ModelBlock* a, const ModelBlock* b) {
      return std::tie(a->segment, a->offset) < std::tie(b->segment, b->offset);
    });
    for (size_t i = 1; i < sorted.size(); ++i) {
      if (sorted[i]->segment == sorted[i - 1]->segment) {
        EXPECT_LE(sorted[i - 1]->offset + sorted[i - 1]->size, sorted[i]->offset) << "live blocks overlap";
      }
    }
  }
};

TEST_F(BlockAllocatorModelTest, RandomAllocFreeAgainstModel) {
  BlockAllocator ba(small_options());
  std::mt19937_64 rng(20240611);
  std::map<BlockId, ModelBlock> live;
  const uint64_t streams[] = {kSettled, 1, 2, 3};
  std::map<uint64_t, uint64_t> epoch_of;  // stream -> current epoch
  uint64_t next_payload = 1;
  ba.add_segment(64 * 1024);

  constexpr int kSteps = 4000;
  for (int step = 0; step < kSteps; ++step) {
    const int op = static_cast<int>(rng() % 100);
    if (op < 50) {
      // Allocate a random size (skewed small) on a random stream.
      const uint64_t requested = 1 + (rng() % 4 == 0 ? rng() % 16384 : rng() % 2048);
      const uint64_t stream = streams[1 + rng() % 3];
      const uint64_t rounded = ba.round_size(requested);
      // Reference best fit: smallest usable free block, computed by walking every block.
      uint64_t best = UINT64_MAX;
      for (SegmentId s : ba.segment_ids()) {
        ba.for_each_block(s, [&](const Block& b) {
          if (!b.allocated && b.size >= rounded && (b.stream == kSettled || b.stream == stream)) {
            best = std::min(best, b.size);
          }
        });
      }
      auto fit = ba.find_fit(requested, stream);
      if (!fit) {
        ASSERT_EQ(best, UINT64_MAX) << "find_fit missed a usable block";
        // Grow, as the caching allocator would.
        const SegmentId s = ba.add_segment(std::max<uint64_t>(64 * 1024, ba.round_size(requested)));
        fit = ba.find_fit_in_segment(s, requested);
        ASSERT_TRUE(fit.has_value());
      } else {
        ASSERT_EQ(ba.block(*fit).size, best) << "not a best fit";
      }
      const uint64_t payload = next_payload++;
      const BlockId id = ba.allocate(*fit, requested, stream, payload);
      const Block& b = ba.block(id);
      ASSERT_GE(b.size, rounded);
      ASSERT_LT(b.size, rounded + ba.min_split_remainder()) << "a large enough remainder was not split off";
      ASSERT_EQ(live.count(id), 0u);
      live[id] = ModelBlock{b.segment, b.offset, b.size, requested, payload, stream};
    } else if (op < 92) {
      if (live.empty()) continue;
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      // Free on its own stream (pending) or as settled.
      const uint64_t tag = rng() % 4 == 0 ? kSettled : it->second.stream;
      const uint64_t epoch = tag == kSettled ? 0 : ++epoch_of[tag];
      const BlockId freed = ba.free(it->first, tag, epoch);
      const Block& f = ba.block(freed);
      EXPECT_FALSE(f.allocated);
      EXPECT_LE(f.offset, it->second.offset);
      EXPECT_GE(f.offset + f.size, it->second.offset + it->second.size);
      live.erase(it);
    } else if (op < 97) {
      // A stream's fence completed: settle its blocks up to some epoch.
      const uint64_t stream = streams[1 + rng() % 3];
      const uint64_t upto = epoch_of[stream] == 0 ? 0 : rng() % (epoch_of[stream] + 1);
      ba.settle_if([&](const Block& b) { return b.stream == stream && b.epoch <= upto; });
    } else {
      // Remove a fully free segment now and then.
      for (SegmentId s : ba.segment_ids()) {
        if (ba.segment_is_free(s) && ba.num_segments() > 1) {
          ba.remove_segment(s);
          break;
        }
      }
    }
    check_invariants(ba, live, step);
    if (HasFatalFailure() || HasFailure()) return;
  }

  // Free everything; once all streams settle, each segment is exactly one free block.
  while (!live.empty()) {
    auto it = live.begin();
    ba.free(it->first, it->second.stream, ++epoch_of[it->second.stream]);
    live.erase(it);
  }
  check_invariants(ba, live, kSteps);
  ba.settle_if([](const Block&) { return true; });
  check_invariants(ba, live, kSteps + 1);
  EXPECT_EQ(ba.allocated_bytes(), 0u);
  for (SegmentId s : ba.segment_ids()) {
    EXPECT_EQ(ba.segment(s).num_blocks, 1u);
    EXPECT_TRUE(ba.segment_is_settled_free(s));
  }
  EXPECT_EQ(ba.free_blocks(), ba.num_segments());
  for (SegmentId s : ba.segment_ids()) ba.remove_segment(s);
  EXPECT_EQ(ba.reserved_bytes(), 0u);
}

}  // namespace
}  // namespace hxrt::memory
