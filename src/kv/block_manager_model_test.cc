// Randomized test of BlockManager against a reference model.
//
// The model keeps, per sequence, its token list and how many tokens are committed, and simulates the device: one
// "K/V" value per slot. Computing a sequence writes, into the slot of each uncommitted token, a fingerprint of the
// sequence's whole prefix up to that token (what real K/V depends on); copy-on-write copies a block's values. After
// every operation the test checks that each sequence's committed tokens read their own fingerprints back through the
// block table — so prefix hits, sharing and copies are sound — plus table sizes, recorded token ids, reference
// counts, stats and the manager's own invariants.
//
// The engine's contract is followed: a sequence is computed (its K/V written) before it is forked or reserved
// again.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "hxrt/kv/block_manager.h"

namespace hxrt::kv {
namespace {

struct ModelSeq {
  std::vector<int32_t> tokens;
  std::vector<uint64_t> fingerprints;  // fingerprints[i]: of tokens[0..i]
  int32_t committed = 0;
};

uint64_t next_fingerprint(uint64_t previous, int32_t token) {
  uint64_t z = previous ^ (static_cast<uint64_t>(static_cast<uint32_t>(token)) * 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 29)) * 0xbf58476d1ce4e5b9ULL;
  return z ^ (z >> 32);
}

struct ModelParams {
  uint32_t seed;
  int32_t num_blocks;
  int32_t block_size;
  int ops;
};

class BlockManagerModelTest : public testing::TestWithParam<ModelParams> {
 protected:
  void SetUp() override {
    const ModelParams& p = GetParam();
    rng_.seed(p.seed);
    manager_ = std::make_unique<BlockManager>(p.num_blocks, p.block_size, 64);
    bs_ = p.block_size;
    device_.resize(static_cast<size_t>(p.num_blocks) * bs_);
    for (auto& v : device_) v = rng_();  // stale garbage, never a valid fingerprint
    // A few shared prefixes, of lengths around whole blocks, drawn from a small vocabulary.
    for (int i = 0; i < 4; ++i) {
      std::vector<int32_t> prefix(static_cast<size_t>(uniform(1, 5 * bs_)));
      for (auto& t : prefix) t = uniform(0, 7);
      prefixes_.push_back(prefix);
    }
  }

  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }

  std::vector<int32_t> random_prompt() {
    std::vector<int32_t> prompt = prefixes_[static_cast<size_t>(uniform(0, 3))];
    if (chance(0.2)) prompt.resize(static_cast<size_t>(uniform(0, static_cast<int>(prompt.size()))));
    const int extra = chance(0.3) ? 0 : uniform(1, 2 * bs_);
    for (int i = 0; i < extra; ++i) prompt.push_back(uniform(0, 7));
    return prompt;
  }

  SeqId random_live() {
    auto it = model_.begin();
    std::advance(it, uniform(0, static_cast<int>(model_.size()) - 1));
    return it->first;
  }

  int32_t slot_of(SeqId seq, int32_t pos) {
    const std::span<const int32_t> table = *manager_->block_table(seq);
    return table[static_cast<size_t>(pos / bs_)] * bs_ + pos % bs_;
  }

  // Appends tokens to the model and reserves them; returns the outcome (the model changes only on kOk).
  ReserveOutcome reserve(SeqId seq, const std::vector<int32_t>& tokens) {
    const bool predicted = *manager_->can_reserve(seq, static_cast<int32_t>(tokens.size()));
    const int32_t needed = *manager_->blocks_needed(seq, static_cast<int32_t>(tokens.size()));
    std::vector<int32_t> slots(tokens.size(), -1);
    Result<Reservation> r = manager_->reserve(seq, tokens, slots);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    if (!r.ok()) return ReserveOutcome::kExhausted;
    EXPECT_EQ(r->ok(), predicted);
    EXPECT_EQ(r->blocks_needed, needed);
    if (!r->ok()) return r->outcome;
    if (r->copy) {
      copies_++;
      std::copy_n(device_.begin() + static_cast<ptrdiff_t>(r->copy->src) * bs_, bs_,
                  device_.begin() + static_cast<ptrdiff_t>(r->copy->dst) * bs_);
    }
    ModelSeq& m = model_[seq];
    for (size_t i = 0; i < tokens.size(); ++i) {
      EXPECT_EQ(slots[i], slot_of(seq, static_cast<int32_t>(m.tokens.size())));
      const uint64_t prev = m.fingerprints.empty() ? 0 : m.fingerprints.back();
      m.tokens.push_back(tokens[i]);
      m.fingerprints.push_back(next_fingerprint(prev, tokens[i]));
    }
    return ReserveOutcome::kOk;
  }

  // The engine runs the step: K/V for every uncommitted token is written, then committed.
  void compute(SeqId seq) {
    ModelSeq& m = model_[seq];
    for (auto i = static_cast<size_t>(m.committed); i < m.tokens.size(); ++i) {
      device_[static_cast<size_t>(slot_of(seq, static_cast<int32_t>(i)))] = m.fingerprints[i];
    }
    m.committed = static_cast<int32_t>(m.tokens.size());
    ASSERT_TRUE(manager_->commit(seq).ok());
  }

  // Admits a new sequence with `prompt`: prefix hit, then the rest, then compute. False when refused (released).
  bool join(SeqId seq, const std::vector<int32_t>& prompt) {
    const bool predicted = manager_->can_add(prompt);
    const int32_t expected_hit = manager_->match_prefix(prompt);
    const int32_t available = manager_->available_blocks();
    const int32_t needed = manager_->blocks_needed_for_prompt(prompt);
    Result<int32_t> hit = manager_->add_sequence(seq, prompt);
    EXPECT_TRUE(hit.ok()) << hit.status().to_string();
    if (!hit.ok()) return false;
    EXPECT_EQ(*hit, expected_hit);
    EXPECT_EQ(*hit % bs_, 0);
    EXPECT_LE(*hit, prompt.empty() ? 0 : static_cast<int32_t>(prompt.size() - 1));
    ModelSeq& m = model_[seq];
    uint64_t prev = 0;
    for (int32_t i = 0; i < *hit; ++i) {
      m.tokens.push_back(prompt[static_cast<size_t>(i)]);
      prev = next_fingerprint(prev, m.tokens.back());
      m.fingerprints.push_back(prev);
    }
    m.committed = *hit;
    // The hit blocks were taken out of the available pool iff they were reclaimable.
    check();
    EXPECT_EQ(
        available - manager_->available_blocks(),
        needed - (*manager_->blocks_needed(seq, static_cast<int32_t>(prompt.size() - static_cast<size_t>(*hit)))));

    const std::vector<int32_t> rest(prompt.begin() + *hit, prompt.end());
    const auto before = manager_->stats();
    const ReserveOutcome outcome = reserve(seq, rest);
    EXPECT_EQ(outcome == ReserveOutcome::kOk, predicted);
    if (outcome != ReserveOutcome::kOk) {
      const auto after = manager_->stats();
      EXPECT_EQ(after.free_blocks, before.free_blocks);
      EXPECT_EQ(after.reclaimable_blocks, before.reclaimable_blocks);
      EXPECT_EQ(after.valid_tokens, before.valid_tokens);
      check();
      release(seq);
      return false;
    }
    if (chance(0.9)) compute(seq);
    return true;
  }

  void release(SeqId seq) {
    ASSERT_TRUE(manager_->release(seq).ok());
    model_.erase(seq);
  }

  // Compares the manager with the model; called after every operation.
  void check() {
    Status s = manager_->check_invariants();
    ASSERT_TRUE(s.ok()) << s.to_string();
    std::vector<int32_t> refs(static_cast<size_t>(manager_->num_blocks()), 0);
    std::vector<int32_t> extent(refs.size(), 0);
    int64_t total_tokens = 0;
    ASSERT_EQ(manager_->num_sequences(), static_cast<int64_t>(model_.size()));
    for (const auto& [seq, m] : model_) {
      const auto len = static_cast<int32_t>(m.tokens.size());
      ASSERT_EQ(*manager_->length(seq), len) << "seq " << seq;
      ASSERT_EQ(*manager_->committed_length(seq), m.committed) << "seq " << seq;
      const std::span<const int32_t> table = *manager_->block_table(seq);
      ASSERT_EQ(static_cast<int32_t>(table.size()), (len + bs_ - 1) / bs_) << "seq " << seq;
      total_tokens += len;
      for (size_t i = 0; i < table.size(); ++i) {
        refs[static_cast<size_t>(table[i])]++;
        const int32_t in_block = std::min(bs_, len - static_cast<int32_t>(i) * bs_);
        extent[static_cast<size_t>(table[i])] = std::max(extent[static_cast<size_t>(table[i])], in_block);
      }
      for (int32_t i = 0; i < len; ++i) {
        const int32_t block = table[static_cast<size_t>(i / bs_)];
        const std::span<const int32_t> recorded = manager_->block_tokens(block);
        ASSERT_LT(i % bs_, static_cast<int32_t>(recorded.size())) << "seq " << seq << " token " << i;
        ASSERT_EQ(recorded[static_cast<size_t>(i % bs_)], m.tokens[static_cast<size_t>(i)])
            << "seq " << seq << " token " << i;
        if (i < m.committed) {
          ASSERT_EQ(device_[static_cast<size_t>(block * bs_ + i % bs_)], m.fingerprints[static_cast<size_t>(i)])
              << "seq " << seq << " token " << i << " reads K/V of another prefix";
        }
      }
    }
    int32_t used = 0;
    int64_t valid = 0;
    for (int32_t b = 0; b < manager_->num_blocks(); ++b) {
      ASSERT_EQ(manager_->ref_count(b), refs[static_cast<size_t>(b)]) << "block " << b;
      if (refs[static_cast<size_t>(b)] > 0) {
        used++;
        ASSERT_EQ(manager_->block_state(b), BlockState::kUsed);
      } else {
        ASSERT_EQ(manager_->block_state(b), manager_->is_cached(b) ? BlockState::kReclaimable : BlockState::kFree);
      }
      valid += extent[static_cast<size_t>(b)];
    }
    const KvCacheStats st = manager_->stats();
    ASSERT_EQ(st.free_blocks + st.used_blocks + st.reclaimable_blocks, st.total_blocks);
    ASSERT_EQ(st.used_blocks, used);
    ASSERT_EQ(st.sequences, static_cast<int64_t>(model_.size()));
    ASSERT_EQ(st.sequence_tokens, total_tokens);
    ASSERT_EQ(st.valid_tokens, valid);
    ASSERT_EQ(st.waste_tokens, static_cast<int64_t>(used) * bs_ - valid);
    ASSERT_EQ(st.cow_copies, copies_);
    ASSERT_EQ(st.used_bytes + st.free_bytes + st.reclaimable_bytes, st.total_bytes);
  }

  std::mt19937 rng_;
  std::unique_ptr<BlockManager> manager_;
  int32_t bs_ = 0;
  std::vector<uint64_t> device_;  // one simulated K/V value per slot
  std::vector<std::vector<int32_t>> prefixes_;
  std::map<SeqId, ModelSeq> model_;
  SeqId next_id_ = -1000;  // ids are the caller's: negative ones too
  uint64_t copies_ = 0;
};

TEST_P(BlockManagerModelTest, MatchesTheReferenceModel) {
  int joins = 0, refused = 0, exhausted = 0, forks = 0, truncates = 0, preempts = 0;
  for (int op = 0; op < GetParam().ops; ++op) {
    SCOPED_TRACE(testing::Message() << "op " << op);
    // Under pressure, the scheduler finishes requests now and then, so the walk sees every level of occupancy.
    if (!model_.empty() && manager_->available_blocks() < manager_->num_blocks() / 8 && chance(0.3)) {
      release(random_live());
      check();
    }
    const int kind = uniform(0, 99);
    if (model_.empty() || kind < 20) {
      joins++;
      if (!join(next_id_++, random_prompt())) refused++;
    } else if (kind < 55) {  // a decode step of one sequence (1..3 tokens: speculative drafts too)
      const SeqId seq = random_live();
      if (model_[seq].committed < static_cast<int32_t>(model_[seq].tokens.size())) compute(seq);
      std::vector<int32_t> tokens(static_cast<size_t>(uniform(1, 3)));
      for (auto& t : tokens) t = uniform(0, 7);
      if (reserve(seq, tokens) == ReserveOutcome::kOk) {
        if (chance(0.8)) compute(seq);
      } else {
        exhausted++;
      }
    } else if (kind < 63) {
      const SeqId seq = random_live();
      compute(seq);
    } else if (kind < 73) {
      forks++;
      const SeqId src = random_live();
      compute(src);
      const SeqId dst = next_id_++;
      ASSERT_TRUE(manager_->fork(src, dst).ok());
      model_[dst] = model_[src];
    } else if (kind < 83) {  // rollback
      truncates++;
      const SeqId seq = random_live();
      ModelSeq& m = model_[seq];
      const int len = static_cast<int>(m.tokens.size());
      const int n = chance(0.5) ? uniform(std::max(0, len - 4), len) : uniform(0, len);
      ASSERT_TRUE(manager_->truncate(seq, n).ok());
      m.tokens.resize(static_cast<size_t>(n));
      m.fingerprints.resize(static_cast<size_t>(n));
      m.committed = std::min(m.committed, n);
    } else if (kind < 93) {
      release(random_live());
    } else {  // preemption: drop the sequence's blocks, re-admit it with everything it had as the prompt
      preempts++;
      const SeqId seq = random_live();
      const std::vector<int32_t> tokens = model_[seq].tokens;
      release(seq);
      check();
      join(seq, tokens);
    }
    check();
    if (testing::Test::HasFatalFailure()) return;
  }
  const KvCacheStats st = manager_->stats();
  // The walk must have exercised every path, or it proves little.
  EXPECT_GT(st.prefix_hits, 0u);
  if (bs_ > 1) {  // blocks of one token are never partial, so never copied
    EXPECT_GT(st.cow_copies, 0u);
  }
  EXPECT_GT(st.evictions, 0u);
  EXPECT_GT(exhausted + refused, 0);
  RecordProperty("summary", fmt::format("joins {} (refused {}), exhausted reserves {}, forks {}, truncates {}, "
                                        "preemptions {}; prefix hits {} ({} tokens), copies {}, evictions {}",
                                        joins, refused, exhausted, forks, truncates, preempts, st.prefix_hits,
                                        st.prefix_hit_tokens, st.cow_copies, st.evictions));
}

INSTANTIATE_TEST_SUITE_P(Seeds, BlockManagerModelTest,
                         testing::Values(ModelParams{.seed = 1, .num_blocks = 64, .block_size = 4, .ops = 5000},
                                         ModelParams{.seed = 2, .num_blocks = 24, .block_size = 4, .ops = 5000},
                                         ModelParams{.seed = 3, .num_blocks = 96, .block_size = 1, .ops = 3000},
                                         ModelParams{.seed = 4, .num_blocks = 40, .block_size = 16, .ops = 3000},
                                         ModelParams{.seed = 5, .num_blocks = 12, .block_size = 2, .ops = 5000}),
                         [](const testing::TestParamInfo<ModelParams>& p) {
                           return "seed" + std::to_string(p.param.seed) + "_blocks" +
                                  std::to_string(p.param.num_blocks) + "_bs" + std::to_string(p.param.block_size);
                         });

}  // namespace
}  // namespace hxrt::kv
