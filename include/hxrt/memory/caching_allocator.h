// CachingAllocator: a caching, stream-ordered allocator of device memory (in the style of PyTorch's CUDA caching
// allocator), over one hal::Device.
//
// It reserves large segments with Device::allocate (one hal::Buffer each) and sub-allocates them with a best-fit,
// splitting, coalescing BlockAllocator per size class. Requests of at most kSmallSize bytes come from small
// segments of kSmallSegmentSize; larger ones from large segments (at least kMinLargeSegmentSize for requests below
// kLargeSegmentThreshold, else the request rounded up to kSegmentGranularity). Freed blocks stay cached for reuse;
// memory goes back to the device only through release_cached(), the release threshold, or release_all().
//
// Stream-ordered reuse (Note [Stream-ordered reuse] in caching_allocator.cc): an allocation belongs to the stream
// it was allocated on, and free() is ordered on that stream — the caller may free as soon as the work using the
// block is *enqueued*, without waiting for it. A freed block is reusable at once by later allocations on the same
// stream, and by other streams only once an event recorded on that stream after the free has completed. A block
// also used on other streams must be declared with record_use(); it is then reusable only when all of those
// streams have passed the free.
//
// Ownership and lifetime:
//  - The Device must outlive the allocator. Every stream passed to allocate()/record_use() must stay alive until
//    release_all() succeeds, forget_stream() names it, or the allocator is destroyed (each stops referring to the
//    streams concerned). An owner that destroys streams after release_all() failed must forget_stream() them first.
//  - An Allocation is a value handle (an id plus the view it names); it does not own memory. The view is valid from
//    allocate() until free() (for host access) and for work enqueued on the allocation's stream before free().
//  - Destroying the allocator waits (bounded) for pending frees to settle, releases every segment and logs any
//    allocation still live as a leak. Call release_all() first to get the leak report as a value.
//
// Errors: allocate() returns InvalidArgument for 0 bytes or a stream of another device, OutOfMemory (with a report:
// requested size, reserved, allocated, largest free block, fragmentation, top holders by tag) when the request
// cannot be served within the device and the budget. free()/record_use() return FailedPrecondition for a handle
// that is no longer live (double free), InvalidArgument for a handle of another allocator or one this allocator
// never issued (forged, or a view that does not match the id). No misuse through handles is undefined behaviour.
//
// Thread-safety: thread-safe; one internal mutex guards all state. Enqueueing an event record on a stream (cheap)
// is done under the mutex; waiting for an event, Device::allocate and destroying buffers are done with the mutex
// released, because a host callback of a stream may call free() and need the mutex for that stream to progress.
// free() may therefore be called from host callbacks.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hxrt/base/status.h"
#include "hxrt/hal/buffer.h"
#include "hxrt/hal/device.h"
#include "hxrt/hal/event.h"
#include "hxrt/hal/stream.h"
#include "hxrt/hal/types.h"

namespace hxrt::memory {

// The offset bookkeeping behind the pools (src/memory/block_allocator.h, private to this layer). The aliases
// repeat that header's; the compiler rejects them if the two ever differ.
class BlockAllocator;
struct Block;
using SegmentId = uint64_t;
using BlockId = uint32_t;

inline constexpr uint64_t kKiB = 1024;
inline constexpr uint64_t kMiB = 1024 * kKiB;

// Size classes (PyTorch's defaults).
inline constexpr uint64_t kSmallSize = 1 * kMiB;                 // requests up to this use the small pool
inline constexpr uint64_t kSmallSegmentSize = 2 * kMiB;          // segment size of the small pool
inline constexpr uint64_t kLargeSegmentThreshold = 10 * kMiB;    // large requests below this share big segments
inline constexpr uint64_t kMinLargeSegmentSize = 20 * kMiB;      // segment size for those
inline constexpr uint64_t kSegmentGranularity = 2 * kMiB;        // larger requests: segment = request rounded to this
inline constexpr uint64_t kSmallMinSplitRemainder = 512;         // small pool: never leave a free sliver below this
inline constexpr uint64_t kLargeMinSplitRemainder = kSmallSize;  // large pool: remainders below this serve nobody
inline constexpr uint64_t kDefaultAllocationAlignment = 256;
inline constexpr hal::Duration kDefaultSettleTimeout = std::chrono::seconds(10);
inline constexpr uint64_t kNoReleaseThreshold = UINT64_MAX;

struct CachingAllocatorOptions {
  uint64_t small_size = kSmallSize;
  uint64_t small_segment_size = kSmallSegmentSize;
  uint64_t large_segment_threshold = kLargeSegmentThreshold;
  uint64_t min_large_segment_size = kMinLargeSegmentSize;
  uint64_t segment_granularity = kSegmentGranularity;
  uint64_t small_min_split_remainder = kSmallMinSplitRemainder;
  uint64_t large_min_split_remainder = kLargeMinSplitRemainder;
  // Alignment of every offset and size: a power of two, raised to the device's info().min_alignment.
  uint64_t alignment = kDefaultAllocationAlignment;
  hal::MemoryKind memory_kind = hal::MemoryKind::kDevice;
  // Budget for reserved bytes (all segments); 0 = no limit beyond the device.
  uint64_t max_reserved_bytes = 0;
  // After a free, fully free settled segments are released while more than this many bytes are reserved.
  uint64_t release_threshold = kNoReleaseThreshold;
  // Longest wait for pending frees to settle before declaring out-of-memory, and in release_cached/release_all.
  hal::Duration settle_timeout = kDefaultSettleTimeout;
};

// A live allocation: a value handle naming one block. Copies name the same block; free() it once.
class Allocation {
 public:
  Allocation() = default;
  // Handles are made by CachingAllocator; this constructor exists so tests and tools can build (invalid) ones.
  Allocation(uint64_t id, hal::BufferView view) : id_(id), view_(view) {}

  // Unique per allocator and never reused: allocator id in the top 16 bits, sequence number below. 0 = none.
  uint64_t id() const { return id_; }
  // The requested bytes within the allocator's segment buffer.
  const hal::BufferView& view() const { return view_; }
  uint64_t size() const { return view_.size; }
  void* host_address() const { return view_.host_address(); }
  explicit operator bool() const { return id_ != 0; }

 private:
  uint64_t id_ = 0;
  hal::BufferView view_;
};

// PyTorch-style counter: current value, its peak, and the totals added and removed.
struct Stat {
  int64_t current = 0;
  int64_t peak = 0;
  int64_t allocated = 0;
  int64_t freed = 0;

  void increase(int64_t amount);
  void decrease(int64_t amount);
  void reset_peak() { peak = current; }
};

struct AllocatorStats {
  Stat reserved_bytes;   // bytes in segments obtained from the device
  Stat allocated_bytes;  // bytes in live allocations (block sizes, after rounding)
  Stat requested_bytes;  // bytes requested by live allocations (before rounding)
  Stat segments;
  Stat active_blocks;               // live allocations
  uint64_t pending_free_bytes = 0;  // freed blocks still waiting on record_use() streams
  uint64_t num_allocs = 0;
  uint64_t num_frees = 0;
  uint64_t cache_hits = 0;     // allocations served from cached blocks without growing
  uint64_t device_allocs = 0;  // segments obtained from the device
  uint64_t device_frees = 0;   // segments returned to the device
  uint64_t retries = 0;        // allocations that had to wait for pending frees or release cached segments
  uint64_t ooms = 0;
  uint64_t free_bytes = 0;  // cached (free) bytes in all segments
  uint64_t largest_free_block = 0;
  double fragmentation = 0.0;  // 1 - largest_free_block / free_bytes; 0 when nothing is free
};

// Bytes held per tag (top holders, leak reports).
struct TagUsage {
  std::string tag;
  uint64_t blocks = 0;
  uint64_t bytes = 0;
};

struct LeakReport {
  uint64_t count = 0;
  uint64_t bytes = 0;
  std::vector<TagUsage> by_tag;  // largest first
  bool empty() const { return count == 0; }
  std::string to_string() const;
};

struct BlockSnapshot {
  uint64_t offset = 0;
  uint64_t size = 0;
  bool allocated = false;
  bool pending_free = false;  // freed, waiting on record_use() streams
  uint64_t requested = 0;     // allocated blocks: bytes requested
  std::string tag;            // allocated blocks: the holder
  std::string stream;         // allocated: its stream; free: the stream that may still use it; "" when settled
};

struct SegmentSnapshot {
  uint64_t size = 0;
  bool small = false;  // small pool
  uint64_t allocated_bytes = 0;
  uint64_t native_handle = 0;         // the Buffer's backend handle (for tools)
  std::vector<BlockSnapshot> blocks;  // address order, tiling the segment
};

class CachingAllocator {
 public:
  explicit CachingAllocator(hal::Device& device, const CachingAllocatorOptions& options = {});
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  hal::Device& device() const { return device_; }
  const CachingAllocatorOptions& options() const { return options_; }
  // The effective alignment of offsets and sizes within a segment (options.alignment raised to the device's
  // minimum). Host/device addresses are aligned to the device's info().min_alignment (that of segment bases).
  uint64_t alignment() const { return alignment_; }

  // Allocates `bytes` for use on `stream`, held by `tag` (a node or owner name, kept for stats and reports).
  Result<Allocation> allocate(uint64_t bytes, hal::Stream& stream, std::string_view tag);
  // Frees in the order of the allocation's stream (see the header comment).
  Status free(const Allocation& allocation);
  // Declares that `stream` (other than the allocation's own) uses the allocation; free() then defers reuse until
  // that stream has passed the free too.
  Status record_use(const Allocation& allocation, hal::Stream& stream);

  // Returns fully free segments to the device — after waiting (up to settle_timeout) for pending frees — until at
  // most `keep_bytes` remain reserved. Returns the bytes released. release_cached(UINT64_MAX) only settles pending
  // frees (merging the blocks they free), which also makes stats() and snapshot() exact.
  uint64_t release_cached(uint64_t keep_bytes = 0);
  // Teardown: frees every live allocation (reporting it as a leak), waits for pending frees, releases every
  // segment and forgets every stream. Afterwards the allocator is empty and reusable. DeadlineExceeded when
  // queued work still used the memory after settle_timeout (those segments stay reserved; call again).
  Result<LeakReport> release_all();
  // For an owner about to destroy `stream`: the allocator never touches it again (not even in its destructor).
  // Frees it still guards settle only through fences already recorded on it that complete; memory behind a fence
  // that failed stays reserved and unusable, and is leaked at destruction (Note [Stream-ordered reuse]). A later
  // allocate() on a new stream at the same address starts afresh. No effect for a stream the allocator never saw.
  void forget_stream(const hal::Stream& stream);

  AllocatorStats stats() const;
  void reset_peak();
  // The `n` tags holding the most bytes in live allocations, largest first.
  std::vector<TagUsage> top_holders(size_t n) const;
  std::vector<SegmentSnapshot> snapshot() const;

 private:
  struct StreamState;  // caching_allocator.cc
  enum class Pool : uint8_t { kSmall, kLarge };
  // A live allocation's record, keyed by allocation id.
  struct Live {
    Pool pool;
    BlockId block;
    uint32_t stream;  // stream id it was allocated on (frees are ordered there)
    hal::BufferView view;
    std::string tag;
    std::vector<uint32_t> used_on;  // other streams named by record_use()
  };
  // A freed block waiting on the streams that used it (record_use) before it returns to its pool.
  struct Deferred {
    Pool pool;
    BlockId block;
    uint64_t bytes;
    std::vector<std::pair<uint32_t, uint64_t>> waits;  // (stream id, epoch) that must complete
  };

  using Lock = std::unique_lock<std::mutex>;

  BlockAllocator& pool(Pool p);
  const BlockAllocator& pool(Pool p) const;
  uint64_t segment_size_for(uint64_t rounded) const;

  uint32_t stream_id(hal::Stream& stream);
  bool usable_on(const Block& block, uint32_t stream) const;
  Allocation take(Pool p, BlockId block, uint64_t bytes, uint32_t stream, std::string_view tag);
  Result<Allocation> try_grow(Lock& lock, Pool p, uint64_t rounded, uint64_t bytes, uint32_t stream,
                              std::string_view tag, Status* device_error);
  Result<Live*> find_live(const Allocation& allocation);

  void record_fences();
  // True when `s` has frees to fence, or its newest fence failed and the stream is healthy again.
  bool needs_fresh_fence(const StreamState& s) const;
  void record_fence(StreamState& s);
  bool poll_fences();
  void settle_completed();
  // Fences every stream with unfenced frees and waits (mutex released) for every pending fence, up to `timeout`;
  // then settles what completed. False when there was nothing to wait for.
  bool wait_for_fences(Lock& lock, hal::Duration timeout);
  void collect_cached_segments(uint64_t keep_bytes, std::vector<std::unique_ptr<hal::Buffer>>* out);
  std::shared_ptr<hal::Event> make_event();
  void free_block_locked(Live& live, uint64_t id);
  std::vector<TagUsage> holders_locked(size_t n) const;
  Status oom_locked(uint64_t bytes, std::string_view why);
  AllocatorStats stats_locked() const;

  hal::Device& device_;
  const CachingAllocatorOptions options_;
  const uint64_t alignment_;
  const uint64_t allocator_id_;  // pre-shifted into the top 16 bits of every allocation id

  mutable std::mutex mutex_;
  std::unique_ptr<BlockAllocator> small_;  // never null
  std::unique_ptr<BlockAllocator> large_;  // never null
  std::unordered_map<SegmentId, std::unique_ptr<hal::Buffer>> small_segments_;
  std::unordered_map<SegmentId, std::unique_ptr<hal::Buffer>> large_segments_;
  std::vector<std::unique_ptr<StreamState>> streams_;  // streams_[id - 1]; id 0 is kSettled
  std::unordered_map<const hal::Stream*, uint32_t> stream_ids_;
  std::unordered_map<uint64_t, Live> live_;
  std::vector<Deferred> deferred_;
  std::vector<std::shared_ptr<hal::Event>> spare_events_;
  uint64_t next_sequence_ = 1;
  uint64_t growing_bytes_ = 0;         // reserved by device allocations in flight (mutex released)
  std::condition_variable growth_cv_;  // signalled when growing_bytes_ drops to 0
  AllocatorStats stats_;
};

}  // namespace hxrt::memory
