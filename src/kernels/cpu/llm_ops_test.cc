// GatherRows and PagedAttention against double-precision references.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "hxrt/base/float16.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/testing/kernel_harness.h"

namespace hxrt::kernels::cpu {
namespace {

using testing::HostTensor;
using testing::normalized_max_error;
using testing::OpCall;
using testing::run_op;

TEST(GatherRowsTest, DequantizesTheChosenRowsOfEveryFormat) {
  std::mt19937 rng(7);
  const int64_t rows = 11, cols = 64;
  HostTensor f32_table = HostTensor::random_f32(Shape{rows, cols}, rng, -2.0f, 2.0f);
  const std::vector<float> values = f32_table.to_f32();
  // q8_0 rows built by hand: scale 1/64, values q/64.
  std::vector<std::byte> q8(static_cast<size_t>(rows * (cols / 32) * sizeof(BlockQ8_0)));
  auto* blocks = reinterpret_cast<BlockQ8_0*>(q8.data());
  std::vector<double> q8_values(static_cast<size_t>(rows * cols));
  for (int64_t b = 0; b < rows * cols / 32; ++b) {
    blocks[b].d = f32_to_f16(1.0f / 64.0f);
    for (int i = 0; i < 32; ++i) {
      blocks[b].qs[i] = static_cast<int8_t>(std::uniform_int_distribution<int>(-127, 127)(rng));
      q8_values[static_cast<size_t>(b * 32 + i)] = blocks[b].qs[i] / 64.0;
    }
  }
  const std::vector<int32_t> indices = {3, 0, 10, 3, 7};
  for (bool quantized : {false, true}) {
    OpCall call{.op_type = "GatherRows", .domain = "hxrt"};
    call.inputs = {quantized ? HostTensor::raw(DType::kQ8_0, Shape{rows, cols}, q8) : f32_table,
                   HostTensor::i32(Shape{5}, indices)};
    call.constant_inputs = {0};
    Result<testing::OpResult> result = run_op(call);
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    std::vector<double> expected;
    for (int32_t r : indices) {
      for (int64_t c = 0; c < cols; ++c) {
        expected.push_back(quantized ? q8_values[static_cast<size_t>(r * cols + c)] : values[static_cast<size_t>(r * cols + c)]);
      }
    }
    EXPECT_EQ(result->outputs[0].shape, (Shape{5, cols}));
    EXPECT_EQ(normalized_max_error(result->outputs[0].to_f32(), expected), 0.0);
  }
}

TEST(GatherRowsTest, IndexOutOfRangeIsAnErrorNamingIt) {
  std::mt19937 rng(1);
  OpCall call{.op_type = "GatherRows", .domain = "hxrt"};
  call.inputs = {HostTensor::random_f32(Shape{4, 8}, rng), HostTensor::i32(Shape{2}, {1, 4})};
  Result<testing::OpResult> result = run_op(call);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("indices[1] = 4"), std::string::npos) << result.status().to_string();
}

// A paged cache scenario: sequences with histories already in the cache and new tokens in this launch.
struct Scenario {
  int64_t n_heads = 6, n_kv = 2, head_dim = 40, n_layers = 2, n_blocks = 12, block_size = 4, max_blocks = 5;
  int64_t layer = 1;
  int64_t window = 0;   // attribute 'window' (0: all positions)
  double softcap = 0.0; // attribute 'softcap' (0: none)
  DType cache_type = DType::kF16;
  std::vector<int32_t> tables;     // (n_seqs, max_blocks)
  std::vector<int32_t> token_seq;  // (n_tokens)
  std::vector<int32_t> positions;  // (n_tokens)
  std::vector<float> q, k, v;      // (n_tokens, heads, head_dim)
  std::vector<float> k_cache, v_cache;  // (n_layers, n_blocks, block_size, n_kv, head_dim), as f32

  int64_t n_tokens() const { return static_cast<int64_t>(token_seq.size()); }
  int64_t n_seqs() const { return static_cast<int64_t>(tables.size()) / max_blocks; }
  int64_t slot(int64_t s, int64_t p) const { return tables[static_cast<size_t>(s * max_blocks + p / block_size)] * block_size + p % block_size; }
  size_t cache_index(int64_t layer_index, int64_t slot_index, int64_t g) const {
    return static_cast<size_t>(((layer_index * n_blocks * block_size + slot_index) * n_kv + g) * head_dim);
  }
  float round(float x) const { return cache_type == DType::kF16 ? f16_to_f32(f32_to_f16(x)) : x; }

  // Random q, k, v for the tokens and random history in the whole cache (rounded to the cache type).
  void fill_random(std::mt19937& rng) {
    std::uniform_real_distribution<float> dist(-1.5f, 1.5f);
    const auto fill = [&](std::vector<float>& x, int64_t n, bool rounded) {
      x.resize(static_cast<size_t>(n));
      for (float& e : x) e = rounded ? round(dist(rng)) : dist(rng);
    };
    fill(q, n_tokens() * n_heads * head_dim, false);
    fill(k, n_tokens() * n_kv * head_dim, false);
    fill(v, n_tokens() * n_kv * head_dim, false);
    const int64_t cache = n_layers * n_blocks * block_size * n_kv * head_dim;
    fill(k_cache, cache, true);
    fill(v_cache, cache, true);
  }

  HostTensor cache_tensor(const std::vector<float>& values) const {
    const Shape shape{n_layers, n_blocks, block_size, n_kv, head_dim};
    if (cache_type == DType::kF32) return HostTensor::f32(shape, values);
    std::vector<std::byte> bytes(values.size() * 2);
    auto* p = reinterpret_cast<uint16_t*>(bytes.data());
    for (size_t i = 0; i < values.size(); ++i) p[i] = f32_to_f16(values[i]);
    return HostTensor::raw(DType::kF16, shape, std::move(bytes));
  }

  OpCall call() const {
    OpCall c{.op_type = "PagedAttention", .domain = "hxrt"};
    c.attrs.set("layer", graph::Attribute(layer));
    if (window != 0) c.attrs.set("window", graph::Attribute(window));
    if (softcap != 0.0) c.attrs.set("softcap", graph::Attribute(softcap));
    const int64_t t = n_tokens();
    c.inputs = {HostTensor::f32(Shape{t, n_heads, head_dim}, q), HostTensor::f32(Shape{t, n_kv, head_dim}, k),
                HostTensor::f32(Shape{t, n_kv, head_dim}, v), cache_tensor(k_cache), cache_tensor(v_cache),
                HostTensor::i32(Shape{n_seqs(), max_blocks}, tables), HostTensor::i32(Shape{t}, token_seq),
                HostTensor::i32(Shape{t}, positions)};
    return c;
  }

  // Double-precision attention over the cache after this launch's writes (rounded to the cache type); with an f16
  // cache the query and the probabilities enter the products at f16 precision (Note [Half-precision products]).
  std::vector<double> reference() const {
    std::vector<double> kc(k_cache.begin(), k_cache.end()), vc(v_cache.begin(), v_cache.end());
    for (int64_t t = 0; t < n_tokens(); ++t) {
      for (int64_t g = 0; g < n_kv; ++g) {
        const size_t at = cache_index(layer, slot(token_seq[static_cast<size_t>(t)], positions[static_cast<size_t>(t)]), g);
        for (int64_t d = 0; d < head_dim; ++d) {
          kc[at + static_cast<size_t>(d)] = round(k[static_cast<size_t>((t * n_kv + g) * head_dim + d)]);
          vc[at + static_cast<size_t>(d)] = round(v[static_cast<size_t>((t * n_kv + g) * head_dim + d)]);
        }
      }
    }
    std::vector<double> out(static_cast<size_t>(n_tokens() * n_heads * head_dim));
    const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
    for (int64_t t = 0; t < n_tokens(); ++t) {
      const int64_t s = token_seq[static_cast<size_t>(t)], p = positions[static_cast<size_t>(t)];
      for (int64_t h = 0; h < n_heads; ++h) {
        const int64_t g = h / (n_heads / n_kv);
        const int64_t first = window > 0 ? std::max<int64_t>(0, p - window + 1) : 0;
        std::vector<double> scores(static_cast<size_t>(p + 1 - first));
        double max_score = -INFINITY;
        for (int64_t j = first; j <= p; ++j) {
          double acc = 0.0;
          const size_t at = cache_index(layer, slot(s, j), g);
          for (int64_t d = 0; d < head_dim; ++d) acc += round(q[static_cast<size_t>((t * n_heads + h) * head_dim + d)]) * kc[at + static_cast<size_t>(d)];
          double score = acc * scale;
          if (softcap > 0.0) score = softcap * std::tanh(score / softcap);
          scores[static_cast<size_t>(j - first)] = score;
          max_score = std::max(max_score, score);
        }
        double sum = 0.0;
        for (double& x : scores) sum += (x = std::exp(x - max_score));
        for (int64_t j = first; j <= p; ++j) {
          const size_t at = cache_index(layer, slot(s, j), g);
          for (int64_t d = 0; d < head_dim; ++d) {
            out[static_cast<size_t>((t * n_heads + h) * head_dim + d)] +=
                round(static_cast<float>(scores[static_cast<size_t>(j - first)] / sum)) * vc[at + static_cast<size_t>(d)];
          }
        }
      }
    }
    return out;
  }
};

// Three sequences: a 7-token prefill from position 0, a 1-token decode at position 9, a 2-token chunk at 4..5;
// the block tables use scattered block ids and the cache holds random history everywhere.
Scenario mixed_scenario(DType cache_type, std::mt19937& rng, int64_t head_dim = 40, int64_t n_heads = 6,
                        int64_t n_kv = 2) {
  Scenario sc;
  sc.cache_type = cache_type;
  sc.head_dim = head_dim;
  sc.n_heads = n_heads;
  sc.n_kv = n_kv;
  sc.tables = {5, 2, -1, -1, -1,   // seq 0: positions 0..6
               7, 0, 11, -1, -1,   // seq 1: positions 0..9
               3, 9, -1, -1, -1};  // seq 2: positions 0..5
  for (int32_t p = 0; p < 7; ++p) sc.token_seq.push_back(0), sc.positions.push_back(p);
  sc.token_seq.push_back(1), sc.positions.push_back(9);
  sc.token_seq.push_back(2), sc.positions.push_back(4);
  sc.token_seq.push_back(2), sc.positions.push_back(5);
  sc.fill_random(rng);
  return sc;
}

// The fast path (Note [Attention fast path]) gives the generic loops' bits, with the AVX-512 values loop where the
// CPU has it and without (Note [Wide grouped values]), and all are within `tolerance` of the double reference.
void expect_fast_path_bits(const Scenario& sc, double tolerance) {
  Result<testing::OpResult> fast = run_op(sc.call());
  ASSERT_TRUE(fast.ok()) << fast.status().to_string();
  ::setenv("HXRT_NARROW_ATTENTION", "1", 1);
  Result<testing::OpResult> narrow = run_op(sc.call());
  ::unsetenv("HXRT_NARROW_ATTENTION");
  ASSERT_TRUE(narrow.ok()) << narrow.status().to_string();
  ::setenv("HXRT_GENERIC_ATTENTION", "1", 1);
  Result<testing::OpResult> generic = run_op(sc.call());
  ::unsetenv("HXRT_GENERIC_ATTENTION");
  ASSERT_TRUE(generic.ok()) << generic.status().to_string();
  const std::vector<float> a = fast->outputs[0].to_f32(), n = narrow->outputs[0].to_f32(),
                           b = generic->outputs[0].to_f32();
  ASSERT_EQ(a.size(), b.size());
  ASSERT_EQ(n.size(), b.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(n.data(), b.data(), n.size() * sizeof(float))) << "narrow values loop";
  EXPECT_LT(normalized_max_error(a, sc.reference()), tolerance);
}

TEST(PagedAttentionTest, MixedPrefillAndDecodeMatchTheReference) {
  for (DType cache_type : {DType::kF16, DType::kF32}) {
    std::mt19937 rng(11);
    const Scenario sc = mixed_scenario(cache_type, rng);
    Result<testing::OpResult> result = run_op(sc.call());
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    EXPECT_LT(normalized_max_error(result->outputs[0].to_f32(), sc.reference()), 2e-6) << dtype_name(cache_type);
  }
}

// A sliding-window layer sees the last `window` positions; softcapped scores bend toward ±softcap (Gemma 2). Both
// on the fast path (f16, head_dim 40 and Gemma's 256) and the generic loops (f32).
TEST(PagedAttentionTest, SlidingWindowAndSoftcapMatchTheReference) {
  for (DType cache_type : {DType::kF16, DType::kF32}) {
    for (int64_t head_dim : {40, 256}) {
      for (const auto& [window, softcap] : std::vector<std::pair<int64_t, double>>{{3, 0.0}, {0, 0.5}, {4, 1.5}, {1, 0.0}}) {
        std::mt19937 rng(static_cast<unsigned>(17 + window + head_dim));
        Scenario sc = mixed_scenario(cache_type, rng, head_dim);
        sc.window = window;
        sc.softcap = softcap;
        Result<testing::OpResult> result = run_op(sc.call());
        ASSERT_TRUE(result.ok()) << result.status().to_string();
        EXPECT_LT(normalized_max_error(result->outputs[0].to_f32(), sc.reference()), 2e-6)
            << dtype_name(cache_type) << " head_dim " << head_dim << " window " << window << " softcap " << softcap;
        // The window changes the result (the test would pass vacuously otherwise).
        if (window > 0) {
          Scenario all = sc;
          all.window = 0;
          EXPECT_GT(normalized_max_error(result->outputs[0].to_f32(), all.reference()), 1e-3);
        }
      }
    }
  }
}

TEST(PagedAttentionTest, ATokensResultDoesNotDependOnTheRestOfTheBatch) {
  std::mt19937 rng(3);
  const Scenario full = mixed_scenario(DType::kF16, rng);
  Result<testing::OpResult> batched = run_op(full.call());
  ASSERT_TRUE(batched.ok()) << batched.status().to_string();
  // Sequence 1's decode token alone (token 7 of the batch).
  Scenario alone = full;
  const int64_t t = 7, q_row = full.n_heads * full.head_dim, kv_row = full.n_kv * full.head_dim;
  alone.token_seq = {1};
  alone.positions = {9};
  alone.q.assign(full.q.begin() + t * q_row, full.q.begin() + (t + 1) * q_row);
  alone.k.assign(full.k.begin() + t * kv_row, full.k.begin() + (t + 1) * kv_row);
  alone.v.assign(full.v.begin() + t * kv_row, full.v.begin() + (t + 1) * kv_row);
  Result<testing::OpResult> single = run_op(alone.call());
  ASSERT_TRUE(single.ok()) << single.status().to_string();
  const std::vector<float> b = batched->outputs[0].to_f32(), s = single->outputs[0].to_f32();
  ASSERT_EQ(s.size(), static_cast<size_t>(q_row));
  EXPECT_EQ(0, std::memcmp(s.data(), b.data() + t * q_row, s.size() * sizeof(float))) << "bit-identical";
}

// Note [Attention fast path]: the f16 fast path computes exactly what the generic loops compute.
// GQA groups of 1, 2, 3, 4, 7 (as 4 + 3) and 10 query heads per kv head: the head sizes of Note [Grouped heads]
// attend their group's heads together, the others one by one.
TEST(PagedAttentionTest, TheFastPathIsBitIdenticalToTheGenericLoops) {
  for (const auto& [head_dim, n_heads, n_kv] : std::vector<std::array<int64_t, 3>>{
           {40, 6, 2}, {64, 6, 2}, {128, 6, 2}, {64, 2, 2}, {64, 9, 3}, {32, 20, 2}, {256, 4, 1}, {192, 2, 1},
           {64, 4, 2}, {96, 8, 4}, {80, 8, 2}, {128, 14, 2}}) {
    std::mt19937 rng(static_cast<unsigned>(head_dim * 100 + n_heads));
    Scenario sc = mixed_scenario(DType::kF16, rng, head_dim, n_heads, n_kv);
    sc.softcap = head_dim == 256 ? 0.7 : 0.0;
    sc.window = head_dim == 256 ? 3 : 0;
    SCOPED_TRACE(fmt::format("head_dim {}, {} heads over {}", head_dim, n_heads, n_kv));
    expect_fast_path_bits(sc, 2e-6);
  }
}

// Note [Widened prefill rows]: prefills longer than one task's chunk of queries (a 45-token prompt from position 0,
// a 20-token chunk after 30 cached positions, and a decode), with and without a sliding window, give the generic
// loops' bits.
TEST(PagedAttentionTest, LongPrefillChunksAreBitIdenticalToTheGenericLoops) {
  for (int64_t window : {0, 7}) {
    std::mt19937 rng(static_cast<unsigned>(31 + window));
    Scenario sc{.n_heads = 6, .n_kv = 2, .head_dim = 64, .n_blocks = 40, .max_blocks = 13, .window = window};
    for (int32_t s = 0; s < 3; ++s) {
      // 39 distinct blocks of the 40, scattered (7 is coprime with 40).
      for (int32_t b = 0; b < 13; ++b) sc.tables.push_back((7 * (s * 13 + b)) % 40);
    }
    for (int32_t p = 0; p < 45; ++p) sc.token_seq.push_back(0), sc.positions.push_back(p);
    for (int32_t p = 30; p < 50; ++p) sc.token_seq.push_back(1), sc.positions.push_back(p);
    sc.token_seq.push_back(2), sc.positions.push_back(17);
    sc.fill_random(rng);
    SCOPED_TRACE(fmt::format("window {}", window));
    // Over 50 positions an f32 probability now and then rounds to the other f16 neighbour than the double one.
    expect_fast_path_bits(sc, 2e-4);
  }
}

TEST(PagedAttentionTest, BadBindingsAreErrorsNamingTheToken) {
  std::mt19937 rng(5);
  Scenario bad_seq = mixed_scenario(DType::kF32, rng);
  bad_seq.token_seq[3] = 3;
  Result<testing::OpResult> r1 = run_op(bad_seq.call());
  ASSERT_FALSE(r1.ok());
  EXPECT_NE(r1.status().message().find("token_seq[3] = 3"), std::string::npos) << r1.status().to_string();

  Scenario bad_block = mixed_scenario(DType::kF32, rng);
  bad_block.tables[1] = 12;  // seq 0, block 1: past the 12 blocks
  Result<testing::OpResult> r2 = run_op(bad_block.call());
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("block_tables[0][1] = 12"), std::string::npos) << r2.status().to_string();

  Scenario bad_position = mixed_scenario(DType::kF32, rng);
  bad_position.positions[7] = 20;  // 20 / 4 = block 5 of a 5-block table
  Result<testing::OpResult> r3 = run_op(bad_position.call());
  ASSERT_FALSE(r3.ok());
  EXPECT_NE(r3.status().message().find("positions[7] = 20"), std::string::npos) << r3.status().to_string();
}

}  // namespace
}  // namespace hxrt::kernels::cpu
