// Note [Stream-ordered reuse]
//
// An allocation belongs to the stream it was allocated on (its owner stream S). free() does not wait for S: the
// caller frees as soon as the last command using the block is enqueued, so at free time work on S may still read
// or write the block. Reuse is therefore ordered by streams, not by the host:
//
//  - By a later allocation on S: at once. The new owner's commands are enqueued on S after the old owner's, and S
//    runs in order, so they cannot overlap.
//  - By an allocation on another stream T: only once S has executed past the free. Each stream has a free epoch
//    counter; a freed block is tagged (S, epoch). Fences are recorded lazily: when an allocation would otherwise
//    grow the pool, every stream with frees since its last fence records an event (a cheap enqueue) covering all
//    its epochs so far, and fences are polled. A completed fence settles every block of S with an epoch it
//    covers. A block is usable on T when it is settled, tagged T, or its epoch is covered by a completed fence.
//  - A block used on other streams too (record_use) is reusable only when every one of those streams, and S, has
//    executed past the free: free() records a fence on each of them at once and parks the block ("deferred")
//    until all have completed; it then returns to its pool settled.
//  - Memory goes back to the device (release_cached, the release threshold, release_all) only as whole segments
//    that are one settled free block: no queued work of any stream can touch them.
//
// Failed fences. A fence's event fails when its stream failed or was aborted before reaching it. A failure
// alone does not prove the work before the fence is over: abort() discards queued commands but lets a running
// kernel finish (stream.h), and that kernel may be the one writing the freed block. A stream runs in order, so a
// later fence of the same stream that completed proves every earlier fence passed, failed or not; poll_fences()
// therefore settles up to the newest completed fence, not only while the oldest one completes. Short of that, a
// failed fence (or one that could not be recorded because the stream had already failed) counts as passed only
// when the stream reports query().idle — nothing enqueued is still running; skipped and discarded commands never
// touch memory. query() may lag the event by a moment (a record completes before its stream counts it done), so
// idleness is only a fallback: once a stream whose newest fence failed is healthy again (reset), the next round
// records a fresh fence on it even without new frees, and that fence's completion settles the failed ones. Until
// then the block stays unusable by other streams, which at worst costs an out-of-memory, never a corruption.
//
// Forgotten streams. forget_stream() drops the allocator's pointer to a stream its owner is about to destroy;
// the allocator never touches that stream again. Fences already recorded on it still pass when their events
// complete (the allocator owns the events), but nothing new is recorded on it and a failed fence can no longer be
// checked against the stream's idleness: memory guarded only by such fences stays reserved and unusable, and is
// leaked at destruction rather than handed out while a kernel might still write it.
//
// Waiting. Before declaring out-of-memory the allocator waits, up to options.settle_timeout, for the pending
// fences, with its mutex released: a host callback on a stream may call free(), and if the mutex were held the
// stream could never reach the fence. It then releases every cached settled segment and tries once more (PyTorch's
// free-cached-blocks-and-retry). Device::allocate and buffer destruction also run with the mutex released (a
// device may synchronise inside them); the budget counts bytes being allocated meanwhile (growing_bytes_).
//
// Host access is not stream ordered: a host write into a fresh allocation must itself be ordered after the owner
// stream's earlier work (e.g. synchronize the stream first), exactly as with device work on another stream.

#include "hxrt/memory/caching_allocator.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <map>
#include <optional>

#include "hxrt/base/check.h"
#include "hxrt/base/logging.h"
#include "memory/block_allocator.h"

namespace hxrt::memory {
namespace {

constexpr int kAllocatorIdShift = 48;
constexpr uint64_t kSequenceMask = (uint64_t{1} << kAllocatorIdShift) - 1;
// Requests above this are refused before any arithmetic on them (rounding must not overflow).
constexpr uint64_t kMaxRequestBytes = uint64_t{1} << 56;
constexpr size_t kTopHolders = 5;

uint64_t next_allocator_id() {
  static std::atomic<uint64_t> counter{0};
  // 16 bits, never 0, so that a 0 allocation id is never valid.
  return (counter.fetch_add(1, std::memory_order_relaxed) % 0xFFFF) + 1;
}

std::string format_bytes(uint64_t bytes) {
  if (bytes >= kMiB) return fmt::format("{:.2f} MiB", static_cast<double>(bytes) / static_cast<double>(kMiB));
  if (bytes >= kKiB) return fmt::format("{:.2f} KiB", static_cast<double>(bytes) / static_cast<double>(kKiB));
  return fmt::format("{} B", bytes);
}

using SteadyTime = std::chrono::steady_clock::time_point;

SteadyTime deadline_after(hal::Duration timeout) {
  const SteadyTime now = std::chrono::steady_clock::now();
  if (timeout >= SteadyTime::max() - now) return SteadyTime::max();
  return now + std::chrono::duration_cast<SteadyTime::duration>(timeout);
}

hal::Duration time_until(SteadyTime deadline) {
  if (deadline == SteadyTime::max()) return hal::kInfinite;
  return std::max(hal::Duration::zero(),
                  std::chrono::duration_cast<hal::Duration>(deadline - std::chrono::steady_clock::now()));
}

double fragmentation_of(uint64_t largest_free, uint64_t free_bytes) {
  return free_bytes == 0 ? 0.0 : 1.0 - static_cast<double>(largest_free) / static_cast<double>(free_bytes);
}

// One fence: an event recorded on a stream after every free with epoch <= `epoch`. A null event means the record
// could not be made (stream already failed); it is treated like a failed event.
struct Fence {
  uint64_t epoch;
  std::shared_ptr<hal::Event> event;
};

}  // namespace

struct CachingAllocator::StreamState {
  hal::Stream* stream;       // null once forgotten (forget_stream)
  std::string name;          // for snapshots, also after the stream is forgotten
  uint64_t epoch = 1;        // stamped on frees now; a fence covers it and moves on
  bool dirty = false;        // frees with the current epoch, not yet covered by a fence
  uint64_t completed = 0;    // every free with epoch <= completed is settled
  std::deque<Fence> fences;  // in record order; they complete in order (the stream is in order)
};

void Stat::increase(int64_t amount) {
  current += amount;
  allocated += amount;
  peak = std::max(peak, current);
}

void Stat::decrease(int64_t amount) {
  current -= amount;
  freed += amount;
}

std::string LeakReport::to_string() const {
  if (count == 0) return "no leaks";
  std::string out = fmt::format("{} allocation(s) leaked, {}:", count, format_bytes(bytes));
  for (const TagUsage& t : by_tag) {
    out += fmt::format(" '{}' {} in {} block(s);", t.tag, format_bytes(t.bytes), t.blocks);
  }
  out.pop_back();
  return out;
}

CachingAllocator::CachingAllocator(hal::Device& device, const CachingAllocatorOptions& options)
    : device_(device),
      options_(options),
      alignment_(std::max<uint64_t>(options.alignment, device.info().min_alignment)),
      allocator_id_(next_allocator_id() << kAllocatorIdShift),
      small_(std::make_unique<BlockAllocator>(
          BlockAllocatorOptions{alignment_, options.small_min_split_remainder})),
      large_(std::make_unique<BlockAllocator>(
          BlockAllocatorOptions{alignment_, options.large_min_split_remainder})) {
  HXRT_CHECK(is_power_of_two(alignment_), "allocation alignment {} is not a power of two", alignment_);
  HXRT_CHECK(options.small_size > 0 && options.small_size <= options.small_segment_size,
             "small_size {} must be in (0, small_segment_size {}]", options.small_size, options.small_segment_size);
  HXRT_CHECK(is_power_of_two(options.segment_granularity), "segment granularity {} is not a power of two",
             options.segment_granularity);
}

BlockAllocator& CachingAllocator::pool(Pool p) { return p == Pool::kSmall ? *small_ : *large_; }
const BlockAllocator& CachingAllocator::pool(Pool p) const { return p == Pool::kSmall ? *small_ : *large_; }

CachingAllocator::~CachingAllocator() {
  Result<LeakReport> report = release_all();
  if (!report.ok()) {
    // Queued work may still use the remaining segments: leaking them is the only safe choice.
    HXRT_LOG(kError, "CachingAllocator destroyed while device work still used its memory; leaking it: {}",
             report.status().to_string());
    std::lock_guard<std::mutex> guard(mutex_);
    for (auto* segments : {&small_segments_, &large_segments_}) {
      for (auto& [id, buffer] : *segments) static_cast<void>(buffer.release());
    }
    // Pending events must outlive the commands that record them.
    auto* keep = new std::vector<std::shared_ptr<hal::Event>>();  // intentionally leaked, see above
    for (auto& s : streams_) {
      for (Fence& f : s->fences) keep->push_back(std::move(f.event));
    }
    return;
  }
  if (!report->empty()) HXRT_LOG(kWarn, "CachingAllocator destroyed with live allocations: {}", report->to_string());
}

uint64_t CachingAllocator::segment_size_for(uint64_t rounded) const {
  uint64_t size;
  if (rounded <= options_.small_size) {
    size = options_.small_segment_size;
  } else if (rounded < options_.large_segment_threshold) {
    size = std::max(options_.min_large_segment_size, rounded);
  } else {
    size = align_up(rounded, options_.segment_granularity);
  }
  return align_up(size, alignment_);
}

uint32_t CachingAllocator::stream_id(hal::Stream& stream) {
  auto it = stream_ids_.find(&stream);
  if (it != stream_ids_.end()) return it->second;
  auto state = std::make_unique<StreamState>();
  state->stream = &stream;
  state->name = stream.name();
  streams_.push_back(std::move(state));
  const auto id = static_cast<uint32_t>(streams_.size());
  stream_ids_.emplace(&stream, id);
  return id;
}

bool CachingAllocator::usable_on(const Block& block, uint32_t stream) const {
  return block.stream == kSettled || block.stream == stream || block.epoch <= streams_[block.stream - 1]->completed;
}

Allocation CachingAllocator::take(Pool p, BlockId block, uint64_t bytes, uint32_t stream, std::string_view tag) {
  const uint64_t id = allocator_id_ | next_sequence_++;
  BlockAllocator& ba = pool(p);
  ba.allocate(block, bytes, stream, id);
  const Block& b = ba.block(block);
  auto& segments = p == Pool::kSmall ? small_segments_ : large_segments_;
  hal::BufferView view(segments.at(b.segment).get(), b.offset, bytes);
  live_.emplace(id, Live{p, block, stream, view, std::string(tag), {}});
  stats_.allocated_bytes.increase(static_cast<int64_t>(b.size));
  stats_.requested_bytes.increase(static_cast<int64_t>(bytes));
  stats_.active_blocks.increase(1);
  ++stats_.num_allocs;
  return Allocation(id, view);
}

Result<Allocation> CachingAllocator::try_grow(Lock& lock, Pool p, uint64_t rounded, uint64_t bytes, uint32_t stream,
                                              std::string_view tag, Status* device_error) {
  uint64_t size = segment_size_for(rounded);
  const uint64_t max_allocation = device_.info().max_allocation_bytes;
  if (max_allocation != 0 && size > max_allocation) size = rounded;
  if (options_.max_reserved_bytes != 0) {
    const uint64_t used = static_cast<uint64_t>(stats_.reserved_bytes.current) + growing_bytes_;
    const uint64_t available = used >= options_.max_reserved_bytes ? 0 : options_.max_reserved_bytes - used;
    if (size > available) size = rounded;  // a segment just big enough may still fit the budget
    if (size > available) {
      return out_of_memory("a new segment of {} would exceed the budget of {} ({} reserved)", format_bytes(size),
                           format_bytes(options_.max_reserved_bytes), format_bytes(used));
    }
  }

  const uint64_t in_flight = size;
  growing_bytes_ += in_flight;
  lock.unlock();
  Result<std::unique_ptr<hal::Buffer>> buffer = device_.allocate(size, options_.memory_kind);
  if (!buffer.ok() && size > rounded) {
    buffer = device_.allocate(rounded, options_.memory_kind);  // the device may still hold the request itself
    if (buffer.ok()) size = rounded;
  }
  lock.lock();
  growing_bytes_ -= in_flight;
  if (growing_bytes_ == 0) growth_cv_.notify_all();
  if (!buffer.ok()) {
    *device_error = buffer.status();
    return buffer.status();
  }

  BlockAllocator& ba = pool(p);
  const SegmentId segment = ba.add_segment(size);
  (p == Pool::kSmall ? small_segments_ : large_segments_).emplace(segment, std::move(buffer).value());
  stats_.reserved_bytes.increase(static_cast<int64_t>(size));
  stats_.segments.increase(1);
  ++stats_.device_allocs;
  std::optional<BlockId> block = ba.find_fit_in_segment(segment, rounded);
  HXRT_CHECK(block.has_value(), "new segment of {} bytes cannot hold {}", size, rounded);
  return take(p, *block, bytes, stream, tag);
}

Result<Allocation> CachingAllocator::allocate(uint64_t bytes, hal::Stream& stream, std::string_view tag) {
  if (bytes == 0) return invalid_argument("allocation of 0 bytes (tag '{}')", tag);
  if (&stream.device() != &device_) {
    return invalid_argument("stream '{}' belongs to another device than the allocator's", stream.name());
  }
  Lock lock(mutex_);
  const uint64_t max_allocation = device_.info().max_allocation_bytes;
  if (bytes > kMaxRequestBytes) return oom_locked(bytes, "the request is larger than any device");
  if (max_allocation != 0 && bytes > max_allocation) {
    return oom_locked(
        bytes, fmt::format("the request exceeds the device's max allocation of {}", format_bytes(max_allocation)));
  }
  if (options_.max_reserved_bytes != 0 && bytes > options_.max_reserved_bytes) {
    return oom_locked(bytes,
                      fmt::format("the request exceeds the budget of {}", format_bytes(options_.max_reserved_bytes)));
  }
  const uint64_t rounded = align_up(bytes, alignment_);
  const Pool p = rounded <= options_.small_size ? Pool::kSmall : Pool::kLarge;
  const uint32_t sid = stream_id(stream);
  auto usable = [this, sid](const Block& b) { return usable_on(b, sid); };

  // Hot path: a cached block usable on this stream.
  if (auto fit = pool(p).find_fit_if(rounded, usable)) {
    ++stats_.cache_hits;
    return take(p, *fit, bytes, sid, tag);
  }
  // Before growing: fence the other streams' frees and settle those already done.
  record_fences();
  if (poll_fences()) {
    settle_completed();
    if (auto fit = pool(p).find_fit_if(rounded, usable)) {
      ++stats_.cache_hits;
      return take(p, *fit, bytes, sid, tag);
    }
  }
  Status device_error;
  Result<Allocation> grown = try_grow(lock, p, rounded, bytes, sid, tag, &device_error);
  if (grown.ok()) return grown;

  // Retry: wait for pending frees (including frees made by other threads meanwhile), then give cached segments
  // back to the device and grow again.
  ++stats_.retries;
  const auto deadline = deadline_after(options_.settle_timeout);
  for (;;) {
    bool waited = wait_for_fences(lock, time_until(deadline));
    if (growing_bytes_ > 0) {
      // Another thread is reserving a segment (counted against the budget): wait for it to land.
      const auto landed = [this] { return growing_bytes_ == 0; };
      if (deadline == SteadyTime::max()) {
        growth_cv_.wait(lock, landed);
      } else {
        growth_cv_.wait_until(lock, deadline, landed);
      }
      waited = true;
    }
    if (auto fit = pool(p).find_fit_if(rounded, usable)) return take(p, *fit, bytes, sid, tag);
    if (!waited || std::chrono::steady_clock::now() >= deadline) break;
  }
  std::vector<std::unique_ptr<hal::Buffer>> released;
  collect_cached_segments(0, &released);
  if (!released.empty()) {
    lock.unlock();
    released.clear();
    lock.lock();
  }
  grown = try_grow(lock, p, rounded, bytes, sid, tag, &device_error);
  if (grown.ok()) return grown;
  const Status why = device_error.ok() ? grown.status() : device_error;
  return oom_locked(bytes, why.message());
}

Result<CachingAllocator::Live*> CachingAllocator::find_live(const Allocation& allocation) {
  const uint64_t id = allocation.id();
  if (id == 0) return invalid_argument("null allocation handle");
  if ((id & ~kSequenceMask) != allocator_id_) {
    return invalid_argument("allocation {:#x} belongs to another allocator", id);
  }
  auto it = live_.find(id);
  if (it == live_.end()) {
    if ((id & kSequenceMask) >= next_sequence_) return invalid_argument("allocation {:#x} was never issued", id);
    return failed_precondition("allocation {:#x} is not live: freed already (double free) or by release_all()", id);
  }
  const hal::BufferView& v = it->second.view;
  const hal::BufferView& h = allocation.view();
  if (h.buffer != v.buffer || h.offset != v.offset || h.size != v.size) {
    return invalid_argument(
        "allocation handle {:#x} does not match the allocation (offset {} size {} given, "
        "offset {} size {} allocated)",
        id, h.offset, h.size, v.offset, v.size);
  }
  return &it->second;
}

void CachingAllocator::free_block_locked(Live& live, uint64_t id) {
  BlockAllocator& ba = pool(live.pool);
  const uint64_t size = ba.block(live.block).size;
  stats_.allocated_bytes.decrease(static_cast<int64_t>(size));
  stats_.requested_bytes.decrease(static_cast<int64_t>(live.view.size));
  stats_.active_blocks.decrease(1);
  ++stats_.num_frees;
  StreamState& owner = *streams_[live.stream - 1];
  if (live.used_on.empty()) {
    ba.free(live.block, live.stream, owner.epoch);
    owner.dirty = true;
  } else {
    Deferred d{live.pool, live.block, size, {}};
    live.used_on.push_back(live.stream);
    for (uint32_t s : live.used_on) {
      StreamState& state = *streams_[s - 1];
      d.waits.emplace_back(s, state.epoch);
      state.dirty = true;
      record_fence(state);
    }
    stats_.pending_free_bytes += size;
    deferred_.push_back(std::move(d));
  }
  live_.erase(id);
}

Status CachingAllocator::free(const Allocation& allocation) {
  std::vector<std::unique_ptr<hal::Buffer>> released;
  {
    Lock lock(mutex_);
    HXRT_ASSIGN_OR_RETURN(Live * live, find_live(allocation));
    free_block_locked(*live, allocation.id());
    if (static_cast<uint64_t>(stats_.reserved_bytes.current) > options_.release_threshold) {
      record_fences();
      poll_fences();
      settle_completed();
      collect_cached_segments(options_.release_threshold, &released);
    }
  }
  return ok_status();  // `released` buffers are destroyed here, with the mutex released
}

Status CachingAllocator::record_use(const Allocation& allocation, hal::Stream& stream) {
  if (&stream.device() != &device_) {
    return invalid_argument("stream '{}' belongs to another device than the allocator's", stream.name());
  }
  Lock lock(mutex_);
  HXRT_ASSIGN_OR_RETURN(Live * live, find_live(allocation));
  const uint32_t sid = stream_id(stream);
  if (sid != live->stream && std::find(live->used_on.begin(), live->used_on.end(), sid) == live->used_on.end()) {
    live->used_on.push_back(sid);
  }
  return ok_status();
}

void CachingAllocator::forget_stream(const hal::Stream& stream) {
  std::lock_guard<std::mutex> guard(mutex_);
  auto it = stream_ids_.find(&stream);
  if (it == stream_ids_.end()) return;
  streams_[it->second - 1]->stream = nullptr;  // its state stays: blocks and fences still name its id
  stream_ids_.erase(it);
}

std::shared_ptr<hal::Event> CachingAllocator::make_event() {
  if (!spare_events_.empty()) {
    std::shared_ptr<hal::Event> event = std::move(spare_events_.back());
    spare_events_.pop_back();
    return event;
  }
  Result<std::unique_ptr<hal::Event>> event = device_.create_event();
  if (!event.ok()) {
    HXRT_LOG(kWarn, "caching allocator: cannot create a fence event: {}", event.status().to_string());
    return nullptr;
  }
  return std::shared_ptr<hal::Event>(std::move(event).value());
}

bool CachingAllocator::needs_fresh_fence(const StreamState& s) const {
  if (s.dirty) return true;
  if (s.fences.empty()) return false;
  // The newest fence failed or could not be recorded: once the stream is healthy again, a fresh fence passes
  // where the failed one cannot (Note [Stream-ordered reuse], failed fences).
  const std::shared_ptr<hal::Event>& newest = s.fences.back().event;
  const bool failed = newest == nullptr || newest->state() == hal::EventState::kFailed;
  return failed && s.stream->status().ok();
}

void CachingAllocator::record_fence(StreamState& s) {
  if (s.stream == nullptr || !needs_fresh_fence(s)) return;  // a forgotten stream is never touched
  std::shared_ptr<hal::Event> event = make_event();
  if (event != nullptr && !s.stream->record(*event).ok()) event.reset();  // a failed stream; see the Note
  if (event == nullptr && !s.dirty) return;  // a fresh fence that could not be recorded would add nothing
  s.fences.push_back(Fence{s.epoch, std::move(event)});
  ++s.epoch;
  s.dirty = false;
}

void CachingAllocator::record_fences() {
  for (auto& s : streams_) record_fence(*s);
}

bool CachingAllocator::poll_fences() {
  bool progressed = false;
  for (auto& s : streams_) {
    // The stream runs in order: the newest completed fence covers every fence before it, failed ones included.
    size_t passed = 0;
    for (size_t i = 0; i < s->fences.size(); ++i) {
      const std::shared_ptr<hal::Event>& event = s->fences[i].event;
      if (event != nullptr && event->state() == hal::EventState::kComplete) passed = i + 1;
    }
    // Failed fences after it pass once nothing enqueued on the stream still runs (Note [Stream-ordered reuse]).
    std::optional<bool> idle;
    for (; passed < s->fences.size(); ++passed) {
      const std::shared_ptr<hal::Event>& event = s->fences[passed].event;
      if (event != nullptr && event->state() != hal::EventState::kFailed) break;  // still pending
      if (s->stream == nullptr) break;  // forgotten: its idleness can no longer be asked
      if (!idle.has_value()) idle = s->stream->query().idle;
      if (!*idle) break;
    }
    if (passed == 0) continue;
    s->completed = s->fences[passed - 1].epoch;
    for (size_t i = 0; i < passed; ++i) {
      Fence& f = s->fences.front();
      // Recycle the event unless a waiter outside the mutex still holds it.
      if (f.event != nullptr && f.event.use_count() == 1) spare_events_.push_back(std::move(f.event));
      s->fences.pop_front();
    }
    progressed = true;
  }
  return progressed;
}

void CachingAllocator::settle_completed() {
  auto covered = [this](const Block& b) { return b.epoch <= streams_[b.stream - 1]->completed; };
  small_->settle_if(covered);
  large_->settle_if(covered);
  for (size_t i = 0; i < deferred_.size();) {
    Deferred& d = deferred_[i];
    const bool ready = std::all_of(d.waits.begin(), d.waits.end(),
                                   [this](const auto& w) { return w.second <= streams_[w.first - 1]->completed; });
    if (!ready) {
      ++i;
      continue;
    }
    pool(d.pool).free(d.block, kSettled, 0);
    stats_.pending_free_bytes -= d.bytes;
    deferred_[i] = std::move(deferred_.back());
    deferred_.pop_back();
  }
}

bool CachingAllocator::wait_for_fences(Lock& lock, hal::Duration timeout) {
  record_fences();
  // Streams run in order: waiting for each stream's last fence covers the earlier ones.
  std::vector<std::pair<std::shared_ptr<hal::Event>, hal::Stream*>> waits;
  for (auto& s : streams_) {
    if (s->fences.empty()) continue;
    const std::shared_ptr<hal::Event>& newest = s->fences.back().event;
    const bool failed = newest == nullptr || newest->state() == hal::EventState::kFailed;
    if (failed && s->stream == nullptr) continue;  // a forgotten stream's failed fence never passes: no waiting
    waits.emplace_back(newest, s->stream);
  }
  if (!waits.empty()) {
    lock.unlock();
    const auto deadline = deadline_after(timeout);
    for (auto& [event, stream] : waits) {
      const hal::Duration left = time_until(deadline);
      // A failed event (or none) means a failed stream: wait for its running command instead.
      if (event == nullptr || !event->synchronize(left).ok()) {
        const bool failed = event == nullptr || event->state() == hal::EventState::kFailed;
        if (failed && stream != nullptr) stream->synchronize(left).ignore();
      }
      event.reset();  // drop our reference before polling, so the event can be recycled
    }
    lock.lock();
  }
  if (poll_fences()) settle_completed();
  return !waits.empty();
}

void CachingAllocator::collect_cached_segments(uint64_t keep_bytes, std::vector<std::unique_ptr<hal::Buffer>>* out) {
  for (Pool p : {Pool::kLarge, Pool::kSmall}) {
    BlockAllocator& ba = pool(p);
    auto& segments = p == Pool::kSmall ? small_segments_ : large_segments_;
    for (SegmentId s : ba.segment_ids()) {
      if (static_cast<uint64_t>(stats_.reserved_bytes.current) <= keep_bytes) return;
      if (!ba.segment_is_settled_free(s)) continue;
      const uint64_t size = ba.segment(s).size;
      ba.remove_segment(s);
      auto it = segments.find(s);
      out->push_back(std::move(it->second));
      segments.erase(it);
      stats_.reserved_bytes.decrease(static_cast<int64_t>(size));
      stats_.segments.decrease(1);
      ++stats_.device_frees;
    }
  }
}

uint64_t CachingAllocator::release_cached(uint64_t keep_bytes) {
  std::vector<std::unique_ptr<hal::Buffer>> released;
  uint64_t bytes = 0;
  {
    Lock lock(mutex_);
    wait_for_fences(lock, options_.settle_timeout);
    collect_cached_segments(keep_bytes, &released);
    for (const auto& b : released) bytes += b->size();
  }
  return bytes;
}

Result<LeakReport> CachingAllocator::release_all() {
  std::vector<std::unique_ptr<hal::Buffer>> released;
  LeakReport report;
  Status status;
  {
    Lock lock(mutex_);
    std::vector<TagUsage> holders = holders_locked(SIZE_MAX);
    for (const TagUsage& t : holders) {
      report.count += t.blocks;
      report.bytes += t.bytes;
    }
    report.by_tag = std::move(holders);
    while (!live_.empty()) {
      auto it = live_.begin();
      free_block_locked(it->second, it->first);
    }
    // Settling may take several rounds: a round can end with a failed fence whose stream is healthy again, and
    // the next round fences that stream afresh (Note [Stream-ordered reuse]).
    const auto deadline = deadline_after(options_.settle_timeout);
    const auto settled = [this] { return small_->num_segments() + large_->num_segments() == 0 && deferred_.empty(); };
    for (;;) {
      const bool waited = wait_for_fences(lock, time_until(deadline));
      collect_cached_segments(0, &released);
      if (settled() || !waited || std::chrono::steady_clock::now() >= deadline) break;
    }
    if (settled()) {
      for (auto& s : streams_) {
        for (Fence& f : s->fences) {
          if (f.event != nullptr && f.event.use_count() == 1) spare_events_.push_back(std::move(f.event));
        }
      }
      streams_.clear();
      stream_ids_.clear();
    } else {
      status = deadline_exceeded("release_all: {} in {} segment(s) still awaited queued device work after {} ms; {}",
                                 format_bytes(static_cast<uint64_t>(stats_.reserved_bytes.current)),
                                 small_->num_segments() + large_->num_segments(),
                                 std::chrono::duration_cast<std::chrono::milliseconds>(options_.settle_timeout).count(),
                                 report.to_string());
    }
  }
  if (!status.ok()) return status;
  return report;
}

std::vector<TagUsage> CachingAllocator::holders_locked(size_t n) const {
  std::map<std::string_view, TagUsage> by_tag;
  for (const auto& [id, live] : live_) {
    TagUsage& t = by_tag[live.tag];
    ++t.blocks;
    t.bytes += pool(live.pool).block(live.block).size;
  }
  std::vector<TagUsage> out;
  out.reserve(by_tag.size());
  for (auto& [tag, usage] : by_tag) {
    usage.tag = std::string(tag);
    out.push_back(std::move(usage));
  }
  std::stable_sort(out.begin(), out.end(), [](const TagUsage& a, const TagUsage& b) { return a.bytes > b.bytes; });
  if (out.size() > n) out.resize(n);
  return out;
}

std::vector<TagUsage> CachingAllocator::top_holders(size_t n) const {
  std::lock_guard<std::mutex> guard(mutex_);
  return holders_locked(n);
}

AllocatorStats CachingAllocator::stats_locked() const {
  AllocatorStats s = stats_;
  s.free_bytes = small_->free_bytes() + large_->free_bytes();
  s.largest_free_block = std::max(small_->largest_free_block(), large_->largest_free_block());
  s.fragmentation = fragmentation_of(s.largest_free_block, s.free_bytes);
  return s;
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return stats_locked();
}

void CachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> guard(mutex_);
  for (Stat* s : {&stats_.reserved_bytes, &stats_.allocated_bytes, &stats_.requested_bytes, &stats_.segments,
                  &stats_.active_blocks}) {
    s->reset_peak();
  }
}

Status CachingAllocator::oom_locked(uint64_t bytes, std::string_view why) {
  ++stats_.ooms;
  AllocatorStats s = stats_locked();
  std::string holders;
  for (const TagUsage& t : holders_locked(kTopHolders)) {
    holders +=
        fmt::format("{}'{}' {} in {} block(s)", holders.empty() ? "" : ", ", t.tag, format_bytes(t.bytes), t.blocks);
  }
  return out_of_memory(
      "cannot allocate {} (requested {} bytes) on '{}': {}. Reserved {}, allocated {}, cached free {}, largest free "
      "block {}, fragmentation {:.1f}%, pending free {}, budget {}. Top holders: {}",
      format_bytes(bytes), bytes, device_.info().name, why,
      format_bytes(static_cast<uint64_t>(s.reserved_bytes.current)),
      format_bytes(static_cast<uint64_t>(s.allocated_bytes.current)), format_bytes(s.free_bytes),
      format_bytes(s.largest_free_block), 100.0 * s.fragmentation, format_bytes(s.pending_free_bytes),
      options_.max_reserved_bytes == 0 ? std::string("none") : format_bytes(options_.max_reserved_bytes),
      holders.empty() ? std::string("none") : holders);
}

std::vector<SegmentSnapshot> CachingAllocator::snapshot() const {
  std::lock_guard<std::mutex> guard(mutex_);
  auto stream_name = [this](uint64_t id) { return id == kSettled ? std::string() : streams_[id - 1]->name; };
  std::vector<SegmentSnapshot> out;
  for (Pool p : {Pool::kSmall, Pool::kLarge}) {
    const BlockAllocator& ba = pool(p);
    const auto& segments = p == Pool::kSmall ? small_segments_ : large_segments_;
    for (SegmentId s : ba.segment_ids()) {
      SegmentSnapshot seg;
      seg.size = ba.segment(s).size;
      seg.small = p == Pool::kSmall;
      seg.allocated_bytes = ba.segment(s).allocated_bytes;
      seg.native_handle = segments.at(s)->native_handle();
      ba.for_each_block(s, [&](const Block& b) {
        BlockSnapshot blk;
        blk.offset = b.offset;
        blk.size = b.size;
        blk.allocated = b.allocated;
        blk.stream = stream_name(b.stream);
        if (b.allocated) {
          auto it = live_.find(b.payload);
          if (it == live_.end()) {
            blk.pending_free = true;
          } else {
            blk.requested = it->second.view.size;
            blk.tag = it->second.tag;
          }
        }
        seg.blocks.push_back(std::move(blk));
      });
      out.push_back(std::move(seg));
    }
  }
  return out;
}

}  // namespace hxrt::memory
