#include "hxrt/kv/kv_cache.h"

#include <gtest/gtest.h>

#include <span>
#include <string>
#include <vector>

#include "hxrt/hal/cpu/cpu_driver.h"
#include "hxrt/hal/opencl/opencl_driver.h"

namespace hxrt::kv {
namespace {

KvCacheConfig small_config() {
  return KvCacheConfig{
      .n_layers = 2, .n_kv_heads = 2, .head_dim = 8, .block_size = 4, .dtype = DType::kF16, .budget_tokens = 64};
}

TEST(KvCacheLayoutTest, DerivesStridesAndBlocksFromTheBudget) {
  Result<KvCacheLayout> layout = kv_cache_layout(small_config());
  ASSERT_TRUE(layout.ok()) << layout.status().to_string();
  EXPECT_EQ(layout->num_blocks, 16);
  EXPECT_EQ(layout->element_bytes, 2u);
  EXPECT_EQ(layout->slot_stride_bytes, 2u * 8 * 2);            // heads * dim * f16
  EXPECT_EQ(layout->block_stride_bytes, 4u * 32);              // block_size slots
  EXPECT_EQ(layout->layer_stride_bytes, 16u * 128);            // num_blocks blocks
  EXPECT_EQ(layout->buffer_bytes, 2u * 2048);                  // n_layers layers
  EXPECT_EQ(layout->bytes_per_block, 2u * 2 * 4 * 2 * 8 * 2);  // K and V * layers * block * heads * dim * f16

  // A byte budget rounds down to whole blocks; f32 doubles every size.
  KvCacheConfig bytes = small_config();
  bytes.budget_tokens = 0;
  bytes.budget_bytes = 10 * 512 + 511;
  EXPECT_EQ(kv_cache_layout(bytes)->num_blocks, 10);
  bytes.dtype = DType::kF32;
  EXPECT_EQ(kv_cache_layout(bytes)->num_blocks, 5);
  EXPECT_EQ(kv_cache_layout(bytes)->bytes_per_block, 1024u);
  KvCacheConfig tokens = small_config();
  tokens.budget_tokens = 63;
  EXPECT_EQ(kv_cache_layout(tokens)->num_blocks, 15);
}

TEST(KvCacheLayoutTest, RejectsMalformedConfigs) {
  auto rejected = [](KvCacheConfig c) { return kv_cache_layout(c).status(); };
  KvCacheConfig c = small_config();
  c.budget_tokens = 3;  // under one block
  Status s = rejected(c);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.to_string().find("holds no block"), std::string::npos) << s.to_string();
  c = small_config();
  c.budget_tokens = 0;
  c.budget_bytes = 511;
  EXPECT_EQ(rejected(c).code(), StatusCode::kInvalidArgument);
  c = small_config();
  c.budget_tokens = 0;  // no budget: never "all memory"
  EXPECT_EQ(rejected(c).code(), StatusCode::kInvalidArgument);
  c = small_config();
  c.budget_bytes = 1 << 20;  // two budgets
  EXPECT_EQ(rejected(c).code(), StatusCode::kInvalidArgument);
  c = small_config();
  c.budget_tokens = -64;
  EXPECT_EQ(rejected(c).code(), StatusCode::kInvalidArgument);
  c = small_config();
  c.n_layers = 0;
  EXPECT_EQ(rejected(c).code(), StatusCode::kInvalidArgument);
  c = small_config();
  c.block_size = 0;
  EXPECT_EQ(rejected(c).code(), StatusCode::kInvalidArgument);
  c = small_config();
  c.dtype = DType::kQ4_0;
  EXPECT_EQ(rejected(c).code(), StatusCode::kInvalidArgument);
  c = small_config();
  c.budget_tokens = int64_t{1} << 32;  // slots must fit int32
  EXPECT_EQ(rejected(c).code(), StatusCode::kInvalidArgument);
  c = small_config();
  c.n_kv_heads = 1 << 30;
  c.head_dim = 1 << 30;
  c.budget_tokens = 0;
  c.budget_bytes = UINT64_MAX;
  EXPECT_EQ(rejected(c).code(), StatusCode::kInvalidArgument);
}

// The device side runs on every backend this build has: the CPU always, OpenCL (PoCL) where it is available.
class KvCacheDeviceTest : public testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    const std::string backend = GetParam();
    if (backend == "cpu") {
      driver_ = hal::make_cpu_driver(hal::CpuDriverOptions{.num_threads = 1});
    } else {
      driver_ = hal::make_opencl_driver(hal::OpenClDriverOptions{.disk_cache = false});
      if (Status s = driver_->available(); !s.ok()) {
        GTEST_SKIP() << s.to_string();
      }
    }
    Result<std::unique_ptr<hal::Device>> device = driver_->open_device(0);
    if (!device.ok() && backend != "cpu") {
      GTEST_SKIP() << device.status().to_string();
    }
    ASSERT_TRUE(device.ok()) << device.status().to_string();
    device_ = std::move(device).value();
    Result<std::unique_ptr<hal::Stream>> stream = device_->create_stream();
    ASSERT_TRUE(stream.ok()) << stream.status().to_string();
    stream_ = std::move(stream).value();
  }

  void TearDown() override {
    if (stream_) {
      EXPECT_TRUE(stream_->synchronize().ok());
    }
    cache_.reset();
    stream_.reset();
    device_.reset();
  }

  void create(KvCacheConfig config) {
    Result<std::unique_ptr<KvCache>> cache = KvCache::create(*device_, config);
    ASSERT_TRUE(cache.ok()) << cache.status().to_string();
    cache_ = std::move(cache).value();
  }

  // Word `w` of slot `slot` in `layer` of K (kv = 0) or V (kv = 1): distinct everywhere, never zero.
  static uint32_t pattern(int kv, int layer, int32_t slot, uint64_t w) {
    return (static_cast<uint32_t>(kv + 1) << 28) | (static_cast<uint32_t>(layer) << 24) |
           (static_cast<uint32_t>(slot) << 8) | static_cast<uint32_t>(w);
  }

  // Reads or writes every word of K and V through map(); `fn(kv, layer, slot, word index, word&)`.
  template <typename Fn>
  void map_all(hal::MapAccess access, Fn fn) {
    const KvCacheLayout& l = cache_->layout();
    const uint64_t words_per_slot = l.slot_stride_bytes / 4;
    int kv = 0;
    for (hal::Buffer* buffer : {&cache_->k_buffer(), &cache_->v_buffer()}) {
      if (access != hal::MapAccess::kWrite) {
        ASSERT_TRUE(buffer->invalidate(0, buffer->size()).ok());
      }
      Result<void*> mapped = buffer->map(0, buffer->size(), access);
      ASSERT_TRUE(mapped.ok()) << mapped.status().to_string();
      auto* words = static_cast<uint32_t*>(*mapped);
      for (int layer = 0; layer < cache_->config().n_layers; ++layer) {
        for (int32_t slot = 0; slot < l.num_blocks * cache_->block_size(); ++slot) {
          for (uint64_t w = 0; w < words_per_slot; ++w) {
            const uint64_t byte = layer * l.layer_stride_bytes + static_cast<uint64_t>(slot) * l.slot_stride_bytes;
            fn(kv, layer, slot, w, words[byte / 4 + w]);
          }
        }
      }
      if (access != hal::MapAccess::kRead) {
        ASSERT_TRUE(buffer->flush(0, buffer->size()).ok());
      }
      ASSERT_TRUE(buffer->unmap(*mapped).ok());
      kv++;
    }
  }

  std::unique_ptr<hal::Driver> driver_;
  std::unique_ptr<hal::Device> device_;
  std::unique_ptr<hal::Stream> stream_;
  std::unique_ptr<KvCache> cache_;
};

TEST_P(KvCacheDeviceTest, AllocatesTwoBuffersOfTheDeclaredShape) {
  create(small_config());
  const KvCacheLayout& l = cache_->layout();
  EXPECT_EQ(cache_->num_blocks(), 16);
  EXPECT_EQ(cache_->k_buffer().size(), l.buffer_bytes);
  EXPECT_EQ(cache_->v_buffer().size(), l.buffer_bytes);
  EXPECT_NE(&cache_->k_buffer(), &cache_->v_buffer());
  EXPECT_EQ(cache_->block_stride_bytes(), 128u);
  EXPECT_EQ(cache_->layer_stride_bytes(), 16u * 128);
  EXPECT_EQ(cache_->slot_stride_bytes(), 32u);
  const hal::BufferView layer1 = cache_->v_layer(1);
  EXPECT_EQ(layer1.buffer, &cache_->v_buffer());
  EXPECT_EQ(layer1.offset, cache_->layer_stride_bytes());
  EXPECT_EQ(layer1.size, cache_->layer_stride_bytes());
  EXPECT_EQ(cache_->k_layer(0).offset, 0u);
  const KvCacheStats st = cache_->stats();
  EXPECT_EQ(st.total_bytes, 16u * l.bytes_per_block);
  EXPECT_EQ(st.total_bytes, 2 * l.buffer_bytes);
  EXPECT_EQ(st.free_blocks, 16);
}

TEST_P(KvCacheDeviceTest, CopyOnWriteCopiesExactlyTheSharedBlockInEveryLayer) {
  KvCacheConfig config = small_config();
  config.dtype = DType::kF32;
  config.n_layers = 3;
  create(config);
  const int bs = cache_->block_size();

  // Sequence 1: 6 tokens (a full block and half of another), computed.
  ASSERT_EQ(*cache_->add_sequence(1, {}), 0);
  std::vector<int32_t> slots(6);
  Result<Reservation> r = cache_->reserve(1, std::vector<int32_t>{1, 2, 3, 4, 5, 6}, slots, *stream_);
  ASSERT_TRUE(r.ok() && r->ok());
  ASSERT_TRUE(cache_->commit(1).ok());
  // Every slot of every layer gets a distinct pattern: what the attention kernel would have written.
  map_all(hal::MapAccess::kWrite,
          [](int kv, int layer, int32_t slot, uint64_t w, uint32_t& word) { word = pattern(kv, layer, slot, w); });
  ASSERT_TRUE(cache_->fork(1, 2).ok());
  const std::vector<int32_t> before(cache_->block_table(1)->begin(), cache_->block_table(1)->end());

  std::vector<int32_t> slot(1);
  r = cache_->reserve(2, std::vector<int32_t>{7}, slot, *stream_);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_TRUE(r->ok());
  ASSERT_TRUE(r->copy.has_value());
  const int32_t src = r->copy->src;
  const int32_t dst = r->copy->dst;
  EXPECT_EQ(src, before[1]);
  const std::span<const int32_t> forked = *cache_->block_table(2);
  EXPECT_EQ(std::vector<int32_t>(forked.begin(), forked.end()), (std::vector<int32_t>{before[0], dst}));
  EXPECT_EQ(slot[0], dst * bs + 2);
  EXPECT_EQ(cache_->stats().cow_copies, 1u);
  ASSERT_TRUE(stream_->synchronize().ok());

  // The destination block now holds the source block's bytes (all of its slots, K and V, every layer); every
  // other slot still holds its own pattern.
  int64_t copied = 0;
  int64_t mismatches = 0;
  map_all(hal::MapAccess::kRead, [&](int kv, int layer, int32_t s, uint64_t w, uint32_t& word) {
    const int32_t block = s / bs;
    const int32_t from = block == dst ? src * bs + s % bs : s;
    if (word != pattern(kv, layer, from, w) && ++mismatches <= 5) {
      ADD_FAILURE() << "kv " << kv << " layer " << layer << " slot " << s << " word " << w << ": " << std::hex << word
                    << " != " << pattern(kv, layer, from, w);
    }
    copied += block == dst;
  });
  EXPECT_EQ(mismatches, 0);
  EXPECT_EQ(copied, 2 * 3 * bs * static_cast<int64_t>(cache_->slot_stride_bytes() / 4));
}

TEST_P(KvCacheDeviceTest, ExhaustionWithACopyDueChangesNothing) {
  KvCacheConfig config = small_config();
  config.budget_tokens = 8;  // 2 blocks
  create(config);
  ASSERT_EQ(*cache_->add_sequence(1, {}), 0);
  std::vector<int32_t> slots(6);
  ASSERT_TRUE(cache_->reserve(1, std::vector<int32_t>{1, 2, 3, 4, 5, 6}, slots, *stream_)->ok());
  ASSERT_TRUE(cache_->fork(1, 2).ok());
  const KvCacheStats before = cache_->stats();
  std::vector<int32_t> one(1);
  Result<Reservation> r = cache_->reserve(2, std::vector<int32_t>{7}, one, *stream_);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outcome, ReserveOutcome::kExhausted);
  EXPECT_EQ(r->blocks_needed, 1);
  EXPECT_EQ(r->blocks_available, 0);
  EXPECT_FALSE(r->copy.has_value());
  const KvCacheStats after = cache_->stats();
  EXPECT_EQ(after.used_blocks, before.used_blocks);
  EXPECT_EQ(after.cow_copies, 0u);
  EXPECT_EQ(*cache_->length(2), 6);
  EXPECT_TRUE(cache_->blocks().check_invariants().ok());
}

TEST_P(KvCacheDeviceTest, RefusesStreamsThatCannotTakeTheCopyBeforeChangingAnything) {
  create(small_config());
  ASSERT_EQ(*cache_->add_sequence(1, {}), 0);
  std::vector<int32_t> slots(6);
  ASSERT_TRUE(cache_->reserve(1, std::vector<int32_t>{1, 2, 3, 4, 5, 6}, slots, *stream_)->ok());
  ASSERT_TRUE(cache_->fork(1, 2).ok());
  const KvCacheStats before = cache_->stats();
  std::vector<int32_t> one(1);

  // A stream of another device.
  Result<std::unique_ptr<hal::Device>> other = driver_->open_device(0);
  ASSERT_TRUE(other.ok());
  Result<std::unique_ptr<hal::Stream>> foreign = (*other)->create_stream();
  ASSERT_TRUE(foreign.ok());
  Result<Reservation> r = cache_->reserve(2, std::vector<int32_t>{7}, one, **foreign);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);

  // A failed stream, when a copy is due.
  stream_->abort();
  r = cache_->reserve(2, std::vector<int32_t>{7}, one, *stream_);
  EXPECT_EQ(r.status().code(), StatusCode::kAborted) << r.status().to_string();
  EXPECT_NE(r.status().to_string().find("copy-on-write"), std::string::npos) << r.status().to_string();
  const KvCacheStats after = cache_->stats();
  EXPECT_EQ(after.used_blocks, before.used_blocks);
  EXPECT_EQ(after.blocks_allocated, before.blocks_allocated);
  EXPECT_EQ(*cache_->length(2), 6);
  // The source's last block is shared too.
  r = cache_->reserve(1, std::vector<int32_t>{7, 8}, std::span<int32_t>(slots).first(2), *stream_);
  EXPECT_EQ(r.status().code(), StatusCode::kAborted);
  // With no copy due, bookkeeping alone does not need the stream.
  ASSERT_TRUE(cache_->release(2).ok());
  r = cache_->reserve(1, std::vector<int32_t>{7, 8}, std::span<int32_t>(slots).first(2), *stream_);
  EXPECT_TRUE(r.ok() && r->ok()) << r.status().to_string();
  ASSERT_TRUE(stream_->reset().ok());
  EXPECT_TRUE(cache_->blocks().check_invariants().ok());
}

TEST_P(KvCacheDeviceTest, SequenceErrorsPassThrough) {
  create(small_config());
  std::vector<int32_t> one(1);
  EXPECT_EQ(cache_->reserve(5, std::vector<int32_t>{1}, one, *stream_).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(cache_->release(5).code(), StatusCode::kNotFound);
  ASSERT_EQ(*cache_->add_sequence(5, {}), 0);
  EXPECT_EQ(cache_->add_sequence(5, {}).status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(cache_->truncate(5, 1).code(), StatusCode::kOutOfRange);
}

INSTANTIATE_TEST_SUITE_P(Backends, KvCacheDeviceTest, testing::Values("cpu", "opencl"),
                         [](const testing::TestParamInfo<const char*>& p) { return std::string(p.param); });

}  // namespace
}  // namespace hxrt::kv
