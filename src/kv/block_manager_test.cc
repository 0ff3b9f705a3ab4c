#include "hxrt/kv/block_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <vector>

namespace hxrt::kv {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

std::vector<int32_t> iota_tokens(int n, int32_t first = 100) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

std::vector<int32_t> table_of(const BlockManager& m, SeqId seq) {
  Result<std::span<const int32_t>> t = m.block_table(seq);
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return t.ok() ? std::vector<int32_t>(t->begin(), t->end()) : std::vector<int32_t>{};
}

// Everything observable about a manager's state, to check that a refused call changed nothing.
struct Snapshot {
  std::vector<int> states;
  std::vector<int32_t> refs;
  std::vector<bool> cached;
  std::vector<std::vector<int32_t>> block_tokens;
  std::map<SeqId, std::vector<int32_t>> tables;
  std::map<SeqId, std::pair<int32_t, int32_t>> lengths;  // (length, committed)
  std::vector<uint64_t> counters;

  static Snapshot of(const BlockManager& m) {
    Snapshot s;
    for (int32_t b = 0; b < m.num_blocks(); ++b) {
      s.states.push_back(static_cast<int>(m.block_state(b)));
      s.refs.push_back(m.ref_count(b));
      s.cached.push_back(m.is_cached(b));
      const std::span<const int32_t> t = m.block_tokens(b);
      s.block_tokens.emplace_back(t.begin(), t.end());
    }
    for (SeqId id : m.sequence_ids()) {
      s.tables[id] = table_of(m, id);
      s.lengths[id] = {*m.length(id), *m.committed_length(id)};
    }
    const KvCacheStats st = m.stats();
    s.counters = {static_cast<uint64_t>(st.free_blocks),
                  static_cast<uint64_t>(st.used_blocks),
                  static_cast<uint64_t>(st.reclaimable_blocks),
                  static_cast<uint64_t>(st.valid_tokens),
                  st.prefix_lookups,
                  st.prefix_hits,
                  st.prefix_query_tokens,
                  st.prefix_hit_tokens,
                  st.cow_copies,
                  st.evictions,
                  st.blocks_allocated};
    return s;
  }
  bool operator==(const Snapshot&) const = default;
};

class BlockManagerTest : public testing::Test {
 protected:
  // Checks the manager's own invariants and that the stats add up; call after every operation.
  static void expect_consistent(const BlockManager& m) {
    Status s = m.check_invariants();
    EXPECT_TRUE(s.ok()) << s.to_string();
    const KvCacheStats st = m.stats();
    EXPECT_EQ(st.free_blocks + st.used_blocks + st.reclaimable_blocks, st.total_blocks);
    EXPECT_EQ(st.valid_tokens + st.waste_tokens, static_cast<int64_t>(st.used_blocks) * st.block_size);
    EXPECT_GE(st.waste_tokens, 0);
  }

  // Appends `tokens` to `seq` and returns their slots; fails the test on anything but kOk.
  static std::vector<int32_t> append(BlockManager& m, SeqId seq, const std::vector<int32_t>& tokens,
                                     Reservation* out = nullptr) {
    std::vector<int32_t> slots(tokens.size(), -1);
    Result<Reservation> r = m.reserve(seq, tokens, slots);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    if (r.ok()) {
      EXPECT_EQ(r->outcome, ReserveOutcome::kOk);
      if (out) *out = *r;
    }
    expect_consistent(m);
    return slots;
  }

  // add_sequence + reserve of the rest + commit: a prefill.
  static int32_t prefill(BlockManager& m, SeqId seq, const std::vector<int32_t>& prompt) {
    Result<int32_t> hit = m.add_sequence(seq, prompt);
    EXPECT_TRUE(hit.ok()) << hit.status().to_string();
    if (!hit.ok()) return -1;
    append(m, seq, std::vector<int32_t>(prompt.begin() + *hit, prompt.end()));
    EXPECT_TRUE(m.commit(seq).ok());
    expect_consistent(m);
    return *hit;
  }
};

TEST_F(BlockManagerTest, StartsFreeAndHandsOutSlotsInOrder) {
  BlockManager m(8, 4, /*bytes_per_block=*/1024);
  expect_consistent(m);
  const KvCacheStats empty = m.stats();
  EXPECT_EQ(empty.free_blocks, 8);
  EXPECT_EQ(empty.total_bytes, 8u * 1024);
  ASSERT_EQ(*m.add_sequence(1, {}), 0);
  EXPECT_THAT(append(m, 1, iota_tokens(6)), ElementsAre(0, 1, 2, 3, 4, 5));
  EXPECT_THAT(table_of(m, 1), ElementsAre(0, 1));
  EXPECT_EQ(*m.length(1), 6);
  EXPECT_EQ(*m.committed_length(1), 0);
  EXPECT_THAT(m.block_tokens(1), ElementsAre(104, 105));

  const KvCacheStats st = m.stats();
  EXPECT_EQ(st.used_blocks, 2);
  EXPECT_EQ(st.free_blocks, 6);
  EXPECT_EQ(st.valid_tokens, 6);
  EXPECT_EQ(st.waste_tokens, 2);
  EXPECT_EQ(st.sequence_tokens, 6);
  EXPECT_EQ(st.used_bytes, 2u * 1024);
  EXPECT_EQ(st.waste_bytes, 2u * 256);
  EXPECT_EQ(st.blocks_allocated, 2u);
}

TEST_F(BlockManagerTest, PrefixHitSharesCommittedFullBlocks) {
  BlockManager m(16, 4);
  const std::vector<int32_t> prompt = iota_tokens(10);
  ASSERT_EQ(prefill(m, 1, prompt), 0);
  const std::vector<int32_t> a = table_of(m, 1);
  ASSERT_EQ(a.size(), 3u);

  // Same prompt: the two full blocks hit; the partial third never does.
  EXPECT_EQ(m.match_prefix(prompt), 8);
  ASSERT_EQ(*m.add_sequence(2, prompt), 8);
  expect_consistent(m);
  EXPECT_THAT(table_of(m, 2), ElementsAre(a[0], a[1]));
  EXPECT_EQ(m.ref_count(a[0]), 2);
  EXPECT_EQ(m.ref_count(a[1]), 2);
  EXPECT_EQ(m.ref_count(a[2]), 1);
  EXPECT_EQ(*m.length(2), 8);
  EXPECT_EQ(*m.committed_length(2), 8);
  // The rest goes into a block of its own.
  const std::vector<int32_t> slots = append(m, 2, {108, 109});
  const std::vector<int32_t> b = table_of(m, 2);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_NE(b[2], a[2]);
  EXPECT_EQ(slots[0], b[2] * 4);

  KvCacheStats st = m.stats();
  EXPECT_EQ(st.prefix_lookups, 2u);
  EXPECT_EQ(st.prefix_hits, 1u);
  EXPECT_EQ(st.prefix_query_tokens, 20u);
  EXPECT_EQ(st.prefix_hit_tokens, 8u);
  EXPECT_EQ(st.used_blocks, 4);
  EXPECT_EQ(st.sequence_tokens, 20);
  EXPECT_EQ(st.valid_tokens, 12);  // shared slots once

  // The hit never covers the whole prompt: 8 tokens leave the last one to recompute, so one block hits.
  EXPECT_EQ(m.match_prefix(iota_tokens(8)), 4);
  EXPECT_EQ(m.match_prefix(iota_tokens(9)), 8);
  EXPECT_EQ(m.match_prefix(iota_tokens(1)), 0);
  EXPECT_EQ(m.match_prefix({}), 0);
  // Diverging in the second block hits the first only.
  std::vector<int32_t> other = prompt;
  other[5] = 7;
  EXPECT_EQ(m.match_prefix(other), 4);
  // The same tokens after a different first block do not hit: hashes chain over the prefix.
  std::vector<int32_t> shifted = prompt;
  shifted[0] = 7;
  EXPECT_EQ(m.match_prefix(shifted), 0);
}

TEST_F(BlockManagerTest, OnlyCommittedBlocksAreHit) {
  BlockManager m(16, 4);
  const std::vector<int32_t> prompt = iota_tokens(9);
  ASSERT_EQ(*m.add_sequence(1, prompt), 0);
  append(m, 1, prompt);
  EXPECT_EQ(m.match_prefix(prompt), 0);  // reserved, not computed
  ASSERT_TRUE(m.commit(1).ok());
  expect_consistent(m);
  EXPECT_EQ(m.match_prefix(prompt), 8);
  const std::vector<int32_t> t = table_of(m, 1);
  EXPECT_TRUE(m.is_cached(t[0]));
  EXPECT_TRUE(m.is_cached(t[1]));
  EXPECT_FALSE(m.is_cached(t[2]));
}

TEST_F(BlockManagerTest, EqualBlocksComputedTwiceRegisterOnce) {
  BlockManager m(16, 4);
  const std::vector<int32_t> prompt = iota_tokens(5);
  // Both admitted before either computed: no sharing, two copies of the same block.
  ASSERT_EQ(*m.add_sequence(1, prompt), 0);
  ASSERT_EQ(*m.add_sequence(2, prompt), 0);
  append(m, 1, prompt);
  append(m, 2, prompt);
  ASSERT_TRUE(m.commit(1).ok());
  ASSERT_TRUE(m.commit(2).ok());
  expect_consistent(m);
  const int32_t first = table_of(m, 1)[0];
  const int32_t second = table_of(m, 2)[0];
  EXPECT_TRUE(m.is_cached(first));
  EXPECT_FALSE(m.is_cached(second));
  ASSERT_TRUE(m.release(1).ok());
  ASSERT_TRUE(m.release(2).ok());
  expect_consistent(m);
  EXPECT_EQ(m.block_state(first), BlockState::kReclaimable);
  EXPECT_EQ(m.block_state(second), BlockState::kFree);
}

TEST_F(BlockManagerTest, ForkSharesEverythingAndCopiesOnWriteOnce) {
  BlockManager m(16, 4);
  ASSERT_EQ(prefill(m, 1, iota_tokens(6)), 0);
  const std::vector<int32_t> a = table_of(m, 1);
  ASSERT_TRUE(m.fork(1, 2).ok());
  expect_consistent(m);
  EXPECT_EQ(table_of(m, 2), a);
  EXPECT_EQ(m.ref_count(a[0]), 2);
  EXPECT_EQ(m.ref_count(a[1]), 2);
  EXPECT_EQ(*m.length(2), 6);
  EXPECT_EQ(*m.committed_length(2), 6);
  EXPECT_EQ(m.stats().used_blocks, 2);

  // The fork diverges: its shared partial last block is copied, the full one stays shared.
  EXPECT_EQ(*m.blocks_needed(2, 1), 1);
  Reservation r;
  const std::vector<int32_t> slots = append(m, 2, {900}, &r);
  const std::vector<int32_t> b = table_of(m, 2);
  ASSERT_TRUE(r.copy.has_value());
  EXPECT_EQ(r.copy->src, a[1]);
  EXPECT_EQ(r.copy->dst, b[1]);
  EXPECT_EQ(r.blocks_needed, 1);
  EXPECT_EQ(b[0], a[0]);
  EXPECT_NE(b[1], a[1]);
  EXPECT_EQ(slots[0], b[1] * 4 + 2);
  EXPECT_EQ(m.ref_count(a[0]), 2);
  EXPECT_EQ(m.ref_count(a[1]), 1);
  EXPECT_EQ(m.ref_count(b[1]), 1);
  EXPECT_THAT(m.block_tokens(b[1]), ElementsAre(104, 105, 900));
  EXPECT_THAT(m.block_tokens(a[1]), ElementsAre(104, 105));
  EXPECT_EQ(table_of(m, 1), a);

  // The source now owns its block alone: no copy.
  Reservation again;
  append(m, 1, {800}, &again);
  EXPECT_FALSE(again.copy.has_value());
  EXPECT_EQ(table_of(m, 1), a);
  EXPECT_EQ(m.stats().cow_copies, 1u);
}

TEST_F(BlockManagerTest, ForkAtABlockBoundaryNeedsNoCopy) {
  BlockManager m(16, 4);
  ASSERT_EQ(prefill(m, 1, iota_tokens(8)), 0);
  ASSERT_TRUE(m.fork(1, 2).ok());
  Reservation r;
  append(m, 2, {1}, &r);
  EXPECT_FALSE(r.copy.has_value());
  EXPECT_EQ(r.blocks_needed, 1);
  EXPECT_EQ(m.stats().cow_copies, 0u);
}

TEST_F(BlockManagerTest, TruncateReleasesExactlyTheBlocksPastTheNewEnd) {
  BlockManager m(16, 4);
  ASSERT_EQ(prefill(m, 1, iota_tokens(10)), 0);
  const std::vector<int32_t> t = table_of(m, 1);  // 4 + 4 + 2 tokens; the full ones cached

  ASSERT_TRUE(m.truncate(1, 10).ok());  // no-op
  EXPECT_EQ(table_of(m, 1), t);
  ASSERT_TRUE(m.truncate(1, 5).ok());
  expect_consistent(m);
  EXPECT_THAT(table_of(m, 1), ElementsAre(t[0], t[1]));
  EXPECT_EQ(m.block_state(t[2]), BlockState::kFree);  // partial, never cached
  EXPECT_EQ(m.block_state(t[1]), BlockState::kUsed);
  EXPECT_TRUE(m.is_cached(t[1]));  // cut into but not rewritten: still valid for others
  EXPECT_EQ(*m.length(1), 5);
  EXPECT_EQ(*m.committed_length(1), 5);

  ASSERT_TRUE(m.truncate(1, 4).ok());
  expect_consistent(m);
  EXPECT_THAT(table_of(m, 1), ElementsAre(t[0]));
  EXPECT_EQ(m.block_state(t[1]), BlockState::kReclaimable);
  ASSERT_TRUE(m.truncate(1, 0).ok());
  expect_consistent(m);
  EXPECT_TRUE(table_of(m, 1).empty());
  EXPECT_EQ(m.block_state(t[0]), BlockState::kReclaimable);
  const KvCacheStats st = m.stats();
  EXPECT_EQ(st.used_blocks, 0);
  EXPECT_EQ(st.reclaimable_blocks, 2);
  EXPECT_EQ(st.free_blocks, 14);
}

TEST_F(BlockManagerTest, RewritingATruncatedBlockDropsItsHash) {
  BlockManager m(16, 4);
  const std::vector<int32_t> prompt = iota_tokens(9);
  ASSERT_EQ(prefill(m, 1, prompt), 0);
  const std::vector<int32_t> t = table_of(m, 1);
  ASSERT_TRUE(m.truncate(1, 6).ok());
  EXPECT_EQ(m.match_prefix(prompt), 8);  // the truncated block still holds the prompt's tokens
  Reservation r;
  const std::vector<int32_t> slots = append(m, 1, {7}, &r);
  EXPECT_FALSE(r.copy.has_value());  // owned alone: rewritten in place
  EXPECT_EQ(slots[0], t[1] * 4 + 2);
  EXPECT_FALSE(m.is_cached(t[1]));
  EXPECT_EQ(m.match_prefix(prompt), 4);
  EXPECT_THAT(m.block_tokens(t[1]), ElementsAre(104, 105, 7));
  // Computing it again registers the new contents.
  append(m, 1, {8});
  ASSERT_TRUE(m.commit(1).ok());
  expect_consistent(m);
  EXPECT_TRUE(m.is_cached(t[1]));
  EXPECT_EQ(m.match_prefix(std::vector<int32_t>{100, 101, 102, 103, 104, 105, 7, 8, 0}), 8);
}

TEST_F(BlockManagerTest, TruncatingIntoASharedCachedBlockCopiesOnWrite) {
  BlockManager m(16, 4);
  const std::vector<int32_t> prompt = iota_tokens(9);
  ASSERT_EQ(prefill(m, 1, prompt), 0);
  ASSERT_EQ(prefill(m, 2, prompt), 8);
  const std::vector<int32_t> t = table_of(m, 1);
  ASSERT_TRUE(m.truncate(2, 6).ok());
  Reservation r;
  append(m, 2, {7}, &r);
  ASSERT_TRUE(r.copy.has_value());
  EXPECT_EQ(r.copy->src, t[1]);
  EXPECT_TRUE(m.is_cached(t[1]));  // sequence 1 still has it whole
  EXPECT_EQ(m.match_prefix(prompt), 8);
}

TEST_F(BlockManagerTest, ExhaustionIsAnOutcomeAndChangesNothing) {
  BlockManager m(4, 4);
  ASSERT_EQ(prefill(m, 1, iota_tokens(10)), 0);  // 3 blocks
  ASSERT_EQ(*m.add_sequence(2, iota_tokens(8, 500)), 0);
  EXPECT_EQ(*m.blocks_needed(2, 8), 2);
  EXPECT_FALSE(*m.can_reserve(2, 8));
  EXPECT_TRUE(*m.can_reserve(2, 4));
  EXPECT_FALSE(m.can_add(iota_tokens(8, 500)));

  const Snapshot before = Snapshot::of(m);
  std::vector<int32_t> slots(8, -7);
  Result<Reservation> r = m.reserve(2, iota_tokens(8, 500), slots);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->outcome, ReserveOutcome::kExhausted);
  EXPECT_FALSE(r->ok());
  EXPECT_EQ(r->blocks_needed, 2);
  EXPECT_EQ(r->blocks_available, 1);
  EXPECT_EQ(Snapshot::of(m), before);
  EXPECT_THAT(slots, ElementsAreArray(std::vector<int32_t>(8, -7)));
  expect_consistent(m);

  // More than the whole cache is exhaustion too, not an error.
  std::vector<int32_t> huge(100, 1);
  std::vector<int32_t> huge_slots(100);
  r = m.reserve(2, huge, huge_slots);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outcome, ReserveOutcome::kExhausted);
  EXPECT_EQ(Snapshot::of(m), before);

  // A copy-on-write counts: with no block left, a fork cannot diverge.
  append(m, 2, {1, 2, 3, 4});  // the last block
  ASSERT_TRUE(m.fork(1, 3).ok());
  const Snapshot full = Snapshot::of(m);
  EXPECT_EQ(*m.blocks_needed(3, 1), 1);
  EXPECT_FALSE(*m.can_reserve(3, 1));
  std::vector<int32_t> one(1);
  r = m.reserve(3, std::vector<int32_t>{9}, one);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outcome, ReserveOutcome::kExhausted);
  EXPECT_EQ(r->blocks_needed, 1);
  EXPECT_EQ(r->blocks_available, 0);
  EXPECT_EQ(Snapshot::of(m), full);
  expect_consistent(m);
}

TEST_F(BlockManagerTest, EvictsTheLeastRecentlyReleasedReclaimableBlockFirst) {
  BlockManager m(6, 2);
  const std::vector<int32_t> p1 = iota_tokens(5, 10);  // two full blocks cached
  const std::vector<int32_t> p2 = iota_tokens(5, 20);
  ASSERT_EQ(prefill(m, 1, p1), 0);
  ASSERT_EQ(prefill(m, 2, p2), 0);
  const std::vector<int32_t> t1 = table_of(m, 1);
  const std::vector<int32_t> t2 = table_of(m, 2);
  ASSERT_TRUE(m.release(1).ok());
  ASSERT_TRUE(m.release(2).ok());
  expect_consistent(m);
  EXPECT_EQ(m.stats().reclaimable_blocks, 4);
  EXPECT_EQ(m.stats().free_blocks, 2);

  // Free blocks go first; then sequence 1's blocks, its tail before its head; sequence 2's stay.
  ASSERT_EQ(*m.add_sequence(3, {}), 0);
  append(m, 3, iota_tokens(4, 90));
  EXPECT_EQ(m.stats().evictions, 0u);
  append(m, 3, {1, 2});
  EXPECT_EQ(m.stats().evictions, 1u);
  EXPECT_EQ(table_of(m, 3).back(), t1[1]);
  EXPECT_EQ(m.match_prefix(p1), 2);
  EXPECT_EQ(m.match_prefix(p2), 4);
  append(m, 3, {3, 4});
  EXPECT_EQ(table_of(m, 3).back(), t1[0]);
  EXPECT_EQ(m.match_prefix(p1), 0);
  EXPECT_EQ(m.match_prefix(p2), 4);
  EXPECT_EQ(m.stats().evictions, 2u);
  EXPECT_FALSE(m.is_cached(t1[0]));
  EXPECT_TRUE(m.is_cached(t2[0]));
}

TEST_F(BlockManagerTest, AHitRevivesAReclaimableBlockAndProtectsIt) {
  BlockManager m(4, 2);
  const std::vector<int32_t> p = iota_tokens(5);
  ASSERT_EQ(prefill(m, 1, p), 0);  // 3 blocks, 2 cached
  ASSERT_TRUE(m.release(1).ok());
  EXPECT_EQ(m.stats().reclaimable_blocks, 2);
  // Admission accounts for the revived blocks: 2 hits (both reclaimable) + 1 new block of 4 available.
  EXPECT_EQ(m.blocks_needed_for_prompt(p), 3);
  EXPECT_TRUE(m.can_add(p));
  EXPECT_EQ(m.blocks_needed_for_prompt(iota_tokens(9, 50)), 5);
  EXPECT_FALSE(m.can_add(iota_tokens(9, 50)));

  ASSERT_EQ(*m.add_sequence(2, p), 4);
  expect_consistent(m);
  const std::vector<int32_t> revived = table_of(m, 2);
  const KvCacheStats st = m.stats();
  EXPECT_EQ(st.reclaimable_blocks, 0);
  EXPECT_EQ(st.used_blocks, 2);
  // Allocation cannot evict the revived blocks: only the 2 free ones remain.
  ASSERT_EQ(*m.add_sequence(3, {}), 0);
  EXPECT_FALSE(*m.can_reserve(3, 5));
  append(m, 3, iota_tokens(4, 70));
  EXPECT_EQ(m.available_blocks(), 0);
  EXPECT_EQ(m.stats().evictions, 0u);
  EXPECT_EQ(table_of(m, 2), revived);
  EXPECT_EQ(m.ref_count(revived[0]), 1);
  EXPECT_EQ(m.match_prefix(p), 4);
}

TEST_F(BlockManagerTest, PreemptionByReleaseAndReAddRecoversTheCachedPrefix) {
  BlockManager m(16, 4);
  const std::vector<int32_t> prompt = iota_tokens(11);
  ASSERT_EQ(prefill(m, 1, prompt), 0);
  append(m, 1, {1, 2, 3});  // decoding, committed
  ASSERT_TRUE(m.commit(1).ok());
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), {1, 2, 3});
  ASSERT_TRUE(m.release(1).ok());
  expect_consistent(m);
  ASSERT_EQ(prefill(m, 1, all), 12);  // 14 tokens: 3 full blocks come back
  EXPECT_EQ(*m.length(1), 14);
}

TEST_F(BlockManagerTest, ErrorsAreClearAndChangeNothing) {
  BlockManager m(8, 4);
  ASSERT_EQ(prefill(m, 1, iota_tokens(6)), 0);
  const Snapshot before = Snapshot::of(m);
  std::vector<int32_t> slots(2);

  EXPECT_EQ(m.add_sequence(1, iota_tokens(3)).status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(m.reserve(9, iota_tokens(2), slots).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(m.reserve(1, iota_tokens(3), slots).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.commit(9).code(), StatusCode::kNotFound);
  EXPECT_EQ(m.fork(9, 10).code(), StatusCode::kNotFound);
  EXPECT_EQ(m.fork(1, 1).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(m.truncate(9, 0).code(), StatusCode::kNotFound);
  EXPECT_EQ(m.truncate(1, 7).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(m.truncate(1, -1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.release(9).code(), StatusCode::kNotFound);
  EXPECT_EQ(m.block_table(9).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(m.length(9).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(m.committed_length(9).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(m.blocks_needed(9, 1).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(m.blocks_needed(1, -1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.can_reserve(9, 1).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Snapshot::of(m), before);

  const Status truncated = m.truncate(1, 7);
  EXPECT_NE(truncated.to_string().find("sequence 1"), std::string::npos) << truncated.to_string();
  EXPECT_NE(truncated.to_string().find("it has 6"), std::string::npos) << truncated.to_string();

  ASSERT_TRUE(m.release(1).ok());
  EXPECT_EQ(m.release(1).code(), StatusCode::kNotFound);
  expect_consistent(m);
}

TEST_F(BlockManagerTest, EmptyReserveIsANoOp) {
  BlockManager m(2, 4);
  ASSERT_EQ(*m.add_sequence(1, {}), 0);
  const Snapshot before = Snapshot::of(m);
  Result<Reservation> r = m.reserve(1, {}, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outcome, ReserveOutcome::kOk);
  EXPECT_EQ(r->blocks_needed, 0);
  EXPECT_EQ(Snapshot::of(m), before);
}

TEST_F(BlockManagerTest, BlockHashChainsOverThePrefix) {
  const std::vector<int32_t> a = {1, 2, 3, 4};
  const std::vector<int32_t> b = {1, 2, 3, 5};
  EXPECT_EQ(kv_block_hash(kRootBlockHash, a), kv_block_hash(kRootBlockHash, a));
  EXPECT_NE(kv_block_hash(kRootBlockHash, a), kv_block_hash(kRootBlockHash, b));
  EXPECT_NE(kv_block_hash(kRootBlockHash, a), kv_block_hash(kv_block_hash(kRootBlockHash, a), a));
  EXPECT_NE(kv_block_hash(kRootBlockHash, std::vector<int32_t>{0}), kv_block_hash(kRootBlockHash, {}));
}

// release_before gives the blocks before a position back (holes in the table), keeps them findable by prefix
// hits, and leaves appending, committing (the chain hash goes on from the released blocks), forking and
// truncating above the released tokens working.
TEST_F(BlockManagerTest, ReleaseBeforeGivesBackTheBlocksBeforeAPosition) {
  BlockManager m(8, 4);
  const std::vector<int32_t> tokens = iota_tokens(14);
  std::vector<int32_t> slots(14);
  ASSERT_TRUE(m.add_sequence(1, {}).ok());
  ASSERT_TRUE(m.reserve(1, tokens, slots).ok());
  EXPECT_EQ(m.release_before(1, 13).code(), StatusCode::kInvalidArgument) << "not committed yet";
  ASSERT_TRUE(m.commit(1).ok());
  const std::vector<int32_t> before = table_of(m, 1);
  ASSERT_TRUE(m.release_before(1, 9).ok());  // blocks 0 and 1 (tokens 0..7) lie wholly before token 9
  EXPECT_THAT(table_of(m, 1), ElementsAre(kNoBlock, kNoBlock, before[2], before[3]));
  EXPECT_EQ(m.block_state(before[0]), BlockState::kReclaimable);
  EXPECT_EQ(m.block_state(before[1]), BlockState::kReclaimable);
  EXPECT_EQ(*m.length(1), 14);
  EXPECT_EQ(m.stats().used_blocks, 2);
  EXPECT_EQ(m.stats().valid_tokens, 6);
  expect_consistent(m);
  ASSERT_TRUE(m.release_before(1, 4).ok()) << "already released: nothing to do";

  // Appending past a block boundary and committing hashes the new full block on the released chain: a second
  // sequence with the same 18 tokens finds all four full blocks.
  std::vector<int32_t> more = iota_tokens(4, 114), more_slots(4);
  ASSERT_TRUE(m.reserve(1, more, more_slots).ok());
  ASSERT_TRUE(m.commit(1).ok());
  std::vector<int32_t> all = tokens;
  all.insert(all.end(), more.begin(), more.end());
  EXPECT_EQ(m.match_prefix(all), 16);
  expect_consistent(m);

  ASSERT_TRUE(m.fork(1, 2).ok());
  EXPECT_EQ(table_of(m, 2), table_of(m, 1));
  EXPECT_EQ(m.truncate(2, 7).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(m.truncate(2, 8).ok());
  EXPECT_THAT(table_of(m, 2), ElementsAre(kNoBlock, kNoBlock));
  ASSERT_TRUE(m.release(2).ok());
  ASSERT_TRUE(m.release(1).ok());
  expect_consistent(m);
  EXPECT_EQ(m.stats().used_blocks, 0);
  EXPECT_EQ(m.release_before(1, 0).code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace hxrt::kv
