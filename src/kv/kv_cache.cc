#include "hxrt/kv/kv_cache.h"

#include <limits>
#include <utility>

#include "hxrt/base/check.h"

namespace hxrt::kv {

namespace {

// Stores a * b in *out; false when it overflows.
bool checked_mul(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}

}  // namespace

Result<KvCacheLayout> kv_cache_layout(const KvCacheConfig& config) {
  if (config.n_layers <= 0 || config.n_kv_heads <= 0 || config.head_dim <= 0 || config.block_size <= 0) {
    return invalid_argument("kv cache: n_layers ({}), n_kv_heads ({}), head_dim ({}) and block_size ({}) must be > 0",
                            config.n_layers, config.n_kv_heads, config.head_dim, config.block_size);
  }
  if (config.dtype != DType::kF16 && config.dtype != DType::kBF16 && config.dtype != DType::kF32) {
    return invalid_argument("kv cache: dtype {} is not supported (f16, bf16 or f32)", config.dtype);
  }
  if ((config.budget_bytes > 0) == (config.budget_tokens > 0) || config.budget_tokens < 0) {
    return invalid_argument(
        "kv cache: give exactly one positive budget, budget_bytes or budget_tokens (got {} bytes, {} tokens)",
        config.budget_bytes, config.budget_tokens);
  }

  KvCacheLayout layout;
  layout.element_bytes = dtype_info(config.dtype).block_bytes;
  uint64_t bytes_per_block = 0;
  if (!checked_mul(static_cast<uint64_t>(config.n_kv_heads) * static_cast<uint64_t>(config.head_dim),
                   layout.element_bytes, &layout.slot_stride_bytes) ||
      !checked_mul(layout.slot_stride_bytes, static_cast<uint64_t>(config.block_size), &layout.block_stride_bytes) ||
      !checked_mul(layout.block_stride_bytes, 2 * static_cast<uint64_t>(config.n_layers), &bytes_per_block)) {
    return invalid_argument("kv cache: one block of {} layers x {} tokens x {} heads x {} dims overflows 64 bits",
                            config.n_layers, config.block_size, config.n_kv_heads, config.head_dim);
  }
  layout.bytes_per_block = bytes_per_block;

  const uint64_t num_blocks =
      config.budget_bytes > 0 ? config.budget_bytes / bytes_per_block
                              : static_cast<uint64_t>(config.budget_tokens) / static_cast<uint64_t>(config.block_size);
  if (num_blocks == 0) {
    return config.budget_bytes > 0
               ? invalid_argument("kv cache: a budget of {} bytes holds no block ({} bytes per block)",
                                  config.budget_bytes, bytes_per_block)
               : invalid_argument("kv cache: a budget of {} tokens holds no block of {} tokens", config.budget_tokens,
                                  config.block_size);
  }
  constexpr auto kMaxSlots = static_cast<uint64_t>(std::numeric_limits<int32_t>::max());
  if (num_blocks > kMaxSlots / static_cast<uint64_t>(config.block_size)) {
    return invalid_argument("kv cache: {} blocks of {} tokens exceed the int32 slot ids kernels use", num_blocks,
                            config.block_size);
  }
  layout.num_blocks = static_cast<int32_t>(num_blocks);
  if (!checked_mul(layout.block_stride_bytes, num_blocks, &layout.layer_stride_bytes) ||
      !checked_mul(layout.layer_stride_bytes, static_cast<uint64_t>(config.n_layers), &layout.buffer_bytes)) {
    return invalid_argument("kv cache: {} blocks of {} bytes overflow 64 bits", num_blocks, bytes_per_block);
  }
  return layout;
}

Result<std::unique_ptr<KvCache>> KvCache::create(hal::Device& device, const KvCacheConfig& config) {
  HXRT_ASSIGN_OR_RETURN(const KvCacheLayout layout, kv_cache_layout(config));
  HXRT_ASSIGN_OR_RETURN(std::unique_ptr<hal::Buffer> k, device.allocate(layout.buffer_bytes, config.memory_kind));
  HXRT_ASSIGN_OR_RETURN(std::unique_ptr<hal::Buffer> v, device.allocate(layout.buffer_bytes, config.memory_kind));
  return std::unique_ptr<KvCache>(new KvCache(device, config, layout, std::move(k), std::move(v)));
}

KvCache::KvCache(hal::Device& device, const KvCacheConfig& config, const KvCacheLayout& layout,
                 std::unique_ptr<hal::Buffer> k, std::unique_ptr<hal::Buffer> v)
    : device_(device),
      config_(config),
      layout_(layout),
      k_(std::move(k)),
      v_(std::move(v)),
      blocks_(layout.num_blocks, config.block_size, layout.bytes_per_block) {}

hal::BufferView KvCache::k_layer(int layer) const {
  HXRT_CHECK(layer >= 0 && layer < config_.n_layers, "kv cache: layer {} out of [0, {})", layer, config_.n_layers);
  return {k_.get(), static_cast<uint64_t>(layer) * layout_.layer_stride_bytes, layout_.layer_stride_bytes};
}

hal::BufferView KvCache::v_layer(int layer) const {
  HXRT_CHECK(layer >= 0 && layer < config_.n_layers, "kv cache: layer {} out of [0, {})", layer, config_.n_layers);
  return {v_.get(), static_cast<uint64_t>(layer) * layout_.layer_stride_bytes, layout_.layer_stride_bytes};
}

Result<Reservation> KvCache::reserve(SeqId seq, std::span<const int32_t> new_tokens, std::span<int32_t> slots,
                                     hal::Stream& stream) {
  if (&stream.device() != &device_) {
    return invalid_argument("kv cache: reserve for sequence {} on stream '{}' of another device", seq, stream.name());
  }
  // Refuse before changing anything when a copy-on-write is due and the stream cannot take it.
  HXRT_ASSIGN_OR_RETURN(const int32_t length, blocks_.length(seq));
  if (!new_tokens.empty() && length % config_.block_size != 0) {
    HXRT_ASSIGN_OR_RETURN(const std::span<const int32_t> table, blocks_.block_table(seq));
    if (blocks_.ref_count(table.back()) > 1) {
      HXRT_RETURN_IF_ERROR_CTX(stream.status(), "kv cache: copy-on-write for sequence {} needs stream '{}'", seq,
                               stream.name());
    }
  }
  HXRT_ASSIGN_OR_RETURN(Reservation r, blocks_.reserve(seq, new_tokens, slots));
  if (r.copy) {
    HXRT_RETURN_IF_ERROR_CTX(copy_block(*r.copy, stream),
                             "kv cache: copy-on-write of block {} into {} for sequence {} (the sequence now holds "
                             "block {} with undefined contents; release it)",
                             r.copy->src, r.copy->dst, seq, r.copy->dst);
  }
  return r;
}

Status KvCache::copy_block(const BlockCopy& copy, hal::Stream& stream) {
  const uint64_t block_bytes = layout_.block_stride_bytes;
  for (int layer = 0; layer < config_.n_layers; ++layer) {
    const uint64_t base = static_cast<uint64_t>(layer) * layout_.layer_stride_bytes;
    const uint64_t src = base + static_cast<uint64_t>(copy.src) * block_bytes;
    const uint64_t dst = base + static_cast<uint64_t>(copy.dst) * block_bytes;
    for (hal::Buffer* buffer : {k_.get(), v_.get()}) {
      HXRT_RETURN_IF_ERROR(
          stream.copy(hal::BufferView(buffer, dst, block_bytes), hal::BufferView(buffer, src, block_bytes)));
    }
  }
  return ok_status();
}

}  // namespace hxrt::kv
