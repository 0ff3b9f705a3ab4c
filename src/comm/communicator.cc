// Communicator: argument checks, the failure protocol, the stream forms, the one-rank backend, the world and the
// named groups. The MPI backend is in mpi_communicator.cc.
#include "hxrt/comm/communicator.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "comm/backends.h"
#include "hxrt/base/float16.h"

namespace hxrt::comm {

// Note [Collective failures]
// A collective involves every rank, so one rank's failure must reach the others, or they wait forever. Three
// mechanisms, all in the base class so that every backend has them:
//  - A deadline: every collective fails with DeadlineExceeded after the communicator's timeout (a peer that never
//    arrives: crashed, stuck, or issuing collectives in another order).
//  - A notice: a rank whose collective fails here (bad arguments, a transport error, a timeout) or never starts
//    (its stream failed first: the host task is skipped and its on_skip calls abort()) posts "rank R: <error>" to
//    every other rank. The backend polls for notices while it waits, so the peers' pending collective fails at once
//    with Aborted naming rank R and its error, instead of at their deadline.
//  - Stickiness: after any of these the communicator is failed for good (status() says why, every later
//    collective returns that error), as a failed stream is: which collectives the peers completed is unknown, so
//    no later result could be trusted. A new communicator (split, or a new process group) starts clean.
// Cancellation: a stream abort stops the wait of a collective running on that stream (Aborted); that too fails the
// communicator and notifies the peers.

namespace {

size_t element_bytes(DType dtype) { return dtype_info(dtype).block_bytes; }

std::string_view kind_name(int kind) {
  static constexpr std::string_view kNames[] = {"AllReduce", "AllGather", "ReduceScatter", "Broadcast",
                                                "Send",      "Recv",      "Barrier"};
  return kNames[kind];
}

// Host access to a view for the length of a host task: its host address, or a mapping undone on destruction.
class HostAccess {
 public:
  HostAccess() = default;
  HostAccess(const HostAccess&) = delete;
  HostAccess& operator=(const HostAccess&) = delete;
  ~HostAccess() {
    if (mapped_ != nullptr) buffer_->unmap(mapped_).ignore();  // a failed unmap has nothing left to undo
  }
  Status open(hal::Buffer* buffer, uint64_t offset, uint64_t size, hal::MapAccess access) {
    if (void* host = buffer->host_address(); host != nullptr) {
      data_ = static_cast<unsigned char*>(host) + offset;
      return ok_status();
    }
    HXRT_ASSIGN_OR_RETURN(void* mapped, buffer->map(offset, size, access));
    buffer_ = buffer;
    mapped_ = mapped;
    data_ = static_cast<unsigned char*>(mapped);
    return ok_status();
  }
  unsigned char* data() const { return data_; }

 private:
  hal::Buffer* buffer_ = nullptr;
  void* mapped_ = nullptr;
  unsigned char* data_ = nullptr;
};

Status check_view(std::string_view what, std::string_view role, const hal::BufferView& view, DType dtype) {
  if (view.buffer == nullptr) return invalid_argument("{}: the {} buffer is missing", what, role);
  if (view.offset > view.buffer->size() || view.size > view.buffer->size() - view.offset) {
    return out_of_range("{}: the {} view [{}, +{}) is past its buffer of {} bytes", what, role, view.offset, view.size,
                        view.buffer->size());
  }
  if (view.size % element_bytes(dtype) != 0) {
    return invalid_argument("{}: the {} view of {} bytes is not a whole number of {} elements", what, role, view.size,
                            dtype_name(dtype));
  }
  return ok_status();
}

template <typename T>
void scale_values(T* values, size_t count, double factor) {
  for (size_t i = 0; i < count; ++i) values[i] = static_cast<T>(static_cast<double>(values[i]) * factor);
}

Status divide_by_ranks(void* data, size_t count, DType dtype, int ranks) {
  const double factor = 1.0 / ranks;
  switch (dtype) {
    case DType::kF32: scale_values(static_cast<float*>(data), count, factor); return ok_status();
    case DType::kF16:
    case DType::kBF16: {
      auto* words = static_cast<uint16_t*>(data);
      for (size_t i = 0; i < count; ++i) {
        const bool half = dtype == DType::kF16;
        const float value = static_cast<float>((half ? f16_to_f32(words[i]) : bf16_to_f32(words[i])) * factor);
        words[i] = half ? f32_to_f16(value) : f32_to_bf16(value);
      }
      return ok_status();
    }
    default: return invalid_argument("avg of {} values: only floating types average", dtype_name(dtype));
  }
}

}  // namespace

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kProd: return "prod";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kAvg: return "avg";
  }
  return "?";
}

Result<ReduceOp> parse_reduce_op(std::string_view name) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kAvg}) {
    if (reduce_op_name(op) == name) return op;
  }
  return invalid_argument("unknown reduction '{}' (sum, prod, max, min, avg)", name);
}

bool is_collective_dtype(DType dtype) {
  switch (dtype) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kI8:
    case DType::kU8:
    case DType::kI32:
    case DType::kI64: return true;
    default: return false;
  }
}

Communicator::Communicator(std::string backend, std::string name, int rank, int size, hal::Duration timeout)
    : backend_(std::move(backend)), name_(std::move(name)), rank_(rank), size_(size), timeout_(timeout) {}

std::string Communicator::describe() const {
  return fmt::format("{} communicator '{}' (rank {} of {})", backend_, name_, rank_, size_);
}

Status Communicator::status() const {
  std::lock_guard<std::mutex> lock(error_mutex_);
  return error_;
}

void Communicator::fail(const Status& error) {
  std::lock_guard<std::mutex> lock(error_mutex_);
  if (error_.ok()) error_ = error;
}

void Communicator::abort(const Status& reason) {
  {
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (!error_.ok()) return;  // failed already: the peers were told then
    error_ = reason;
  }
  post_abort(fmt::format("{}", reason.to_string()));
}

Status Communicator::peer_failure(int from, std::string_view notice) {
  peer_failed_ = true;
  return aborted("rank {} failed: {}", from, notice);
}

Status Communicator::check_peer(std::string_view what, int peer) const {
  if (peer < 0 || peer >= size_) {
    return invalid_argument("{}: rank {} is not in {} ranks", what, peer, size_);
  }
  return ok_status();
}

Status Communicator::execute(std::string_view what, const Operation& operation, const std::atomic<bool>* cancel) {
  std::lock_guard<std::mutex> run_lock(run_mutex_);
  // Formatted only on failure: a decode step runs dozens of collectives.
  const auto where = [&] {
    return fmt::format("{} of {} × {} on {}", what, operation.count, dtype_name(operation.dtype), describe());
  };
  if (Status earlier = status(); !earlier.ok()) {
    return std::move(earlier).with_context(fmt::format("{}: the communicator failed earlier", where()));
  }
  Status status = [&]() -> Status {
    if (!is_collective_dtype(operation.dtype)) {
      return invalid_argument("collectives carry f32, f16, bf16, i8, u8, i32 or i64, not {}",
                              dtype_name(operation.dtype));
    }
    if (operation.count > 0 || operation.kind == Kind::kBarrier) {
      if (operation.kind != Kind::kBarrier && operation.kind != Kind::kRecv && operation.kind != Kind::kBroadcast &&
          operation.send == nullptr) {
        return invalid_argument("the send buffer is null");
      }
      if (operation.kind != Kind::kBarrier && operation.kind != Kind::kSend && operation.recv == nullptr) {
        return invalid_argument("the receive buffer is null");
      }
    }
    if (operation.kind == Kind::kBroadcast) HXRT_RETURN_IF_ERROR(check_peer("the root", operation.peer));
    if (operation.kind == Kind::kSend || operation.kind == Kind::kRecv) {
      HXRT_RETURN_IF_ERROR(check_peer("the peer", operation.peer));
      if (operation.peer == rank_) return invalid_argument("rank {} cannot send to or receive from itself", rank_);
    }
    Operation run_as = operation;
    if (operation.op == ReduceOp::kAvg) {
      if (operation.dtype != DType::kF32 && operation.dtype != DType::kF16 && operation.dtype != DType::kBF16) {
        return invalid_argument("avg of {} values: only floating types average", dtype_name(operation.dtype));
      }
      run_as.op = ReduceOp::kSum;
    }
    HXRT_RETURN_IF_ERROR(run(run_as, hal::Deadline::after(timeout()), cancel));
    if (operation.op == ReduceOp::kAvg &&
        (operation.kind == Kind::kAllReduce || operation.kind == Kind::kReduceScatter)) {
      HXRT_RETURN_IF_ERROR(divide_by_ranks(operation.recv, operation.count, operation.dtype, size_));
    }
    return ok_status();
  }();
  if (status.ok()) return status;
  status = std::move(status).with_context(where());
  // A peer's notice fails this rank without a notice back (the peer knows); anything else is news to the others.
  if (std::exchange(peer_failed_, false)) {
    fail(status);
  } else {
    abort(status);  // the peers' message names this rank
  }
  return status;
}

Status Communicator::all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                                const std::atomic<bool>* cancel) {
  return execute("AllReduce", Operation{Kind::kAllReduce, send, recv, count, dtype, op, 0}, cancel);
}

Status Communicator::all_gather(const void* send, void* recv, size_t count, DType dtype,
                                const std::atomic<bool>* cancel) {
  return execute("AllGather", Operation{Kind::kAllGather, send, recv, count, dtype, ReduceOp::kSum, 0}, cancel);
}

Status Communicator::reduce_scatter(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                                    const std::atomic<bool>* cancel) {
  return execute("ReduceScatter", Operation{Kind::kReduceScatter, send, recv, count, dtype, op, 0}, cancel);
}

Status Communicator::broadcast(void* buffer, size_t count, DType dtype, int root, const std::atomic<bool>* cancel) {
  return execute("Broadcast", Operation{Kind::kBroadcast, buffer, buffer, count, dtype, ReduceOp::kSum, root}, cancel);
}

Status Communicator::send(const void* buffer, size_t count, DType dtype, int peer, const std::atomic<bool>* cancel) {
  return execute("Send", Operation{Kind::kSend, buffer, nullptr, count, dtype, ReduceOp::kSum, peer}, cancel);
}

Status Communicator::recv(void* buffer, size_t count, DType dtype, int peer, const std::atomic<bool>* cancel) {
  return execute("Recv", Operation{Kind::kRecv, nullptr, buffer, count, dtype, ReduceOp::kSum, peer}, cancel);
}

Status Communicator::barrier(const std::atomic<bool>* cancel) {
  return execute("Barrier", Operation{Kind::kBarrier, nullptr, nullptr, 0, DType::kF32, ReduceOp::kSum, 0}, cancel);
}

Status Communicator::enqueue(hal::Stream& stream, std::string what, Operation operation, hal::BufferView send_view,
                             hal::BufferView recv_view) {
  auto task = [this, what, operation, send_view, recv_view](const hal::HostTaskContext& context) -> Status {
    Operation op = operation;
    HostAccess send_access;
    HostAccess recv_access;
    const bool has_send = send_view.buffer != nullptr;
    const bool has_recv = recv_view.buffer != nullptr;
    if (has_send && has_recv && send_view.buffer == recv_view.buffer) {
      // One mapping of the union when both sides are in one buffer (in place, or one inside the other).
      const uint64_t begin = std::min(send_view.offset, recv_view.offset);
      const uint64_t end = std::max(send_view.offset + send_view.size, recv_view.offset + recv_view.size);
      HXRT_RETURN_IF_ERROR(recv_access.open(recv_view.buffer, begin, end - begin, hal::MapAccess::kReadWrite));
      op.send = recv_access.data() + (send_view.offset - begin);
      op.recv = recv_access.data() + (recv_view.offset - begin);
    } else {
      if (has_send) {
        HXRT_RETURN_IF_ERROR(send_access.open(send_view.buffer, send_view.offset, send_view.size, hal::MapAccess::kRead));
        op.send = send_access.data();
      }
      if (has_recv) {
        HXRT_RETURN_IF_ERROR(
            recv_access.open(recv_view.buffer, recv_view.offset, recv_view.size, hal::MapAccess::kReadWrite));
        op.recv = recv_access.data();
      }
    }
    if (op.kind == Kind::kBroadcast) op.send = op.recv;
    return execute(what, op, context.cancel);
  };
  auto on_skip = [this, what](const Status& error) {
    abort(Status(error).with_context(fmt::format("rank {} skipped {}: its stream failed first", rank_, what)));
  };
  Status enqueued = stream.host_task(std::move(task), std::move(on_skip));
  if (!enqueued.ok()) {
    // The stream failed before the collective could even be queued: this rank will not come either.
    abort(Status(enqueued).with_context(fmt::format("rank {} could not enqueue {}", rank_, what)));
  }
  return enqueued;
}

Status Communicator::all_reduce(hal::Stream& stream, hal::BufferView send, hal::BufferView recv, DType dtype,
                                ReduceOp op) {
  HXRT_RETURN_IF_ERROR(check_view("AllReduce", "send", send, dtype));
  HXRT_RETURN_IF_ERROR(check_view("AllReduce", "receive", recv, dtype));
  if (send.size != recv.size) {
    return invalid_argument("AllReduce: send ({} bytes) and receive ({} bytes) differ", send.size, recv.size);
  }
  const size_t count = send.size / element_bytes(dtype);
  return enqueue(stream, "AllReduce", Operation{Kind::kAllReduce, nullptr, nullptr, count, dtype, op, 0}, send, recv);
}

Status Communicator::all_gather(hal::Stream& stream, hal::BufferView send, hal::BufferView recv, DType dtype) {
  HXRT_RETURN_IF_ERROR(check_view("AllGather", "send", send, dtype));
  HXRT_RETURN_IF_ERROR(check_view("AllGather", "receive", recv, dtype));
  if (recv.size != send.size * static_cast<uint64_t>(size_)) {
    return invalid_argument("AllGather: the receive view holds {} bytes, not {} ranks × {} bytes", recv.size, size_,
                            send.size);
  }
  const size_t count = send.size / element_bytes(dtype);
  return enqueue(stream, "AllGather", Operation{Kind::kAllGather, nullptr, nullptr, count, dtype, ReduceOp::kSum, 0},
                 send, recv);
}

Status Communicator::reduce_scatter(hal::Stream& stream, hal::BufferView send, hal::BufferView recv, DType dtype,
                                    ReduceOp op) {
  HXRT_RETURN_IF_ERROR(check_view("ReduceScatter", "send", send, dtype));
  HXRT_RETURN_IF_ERROR(check_view("ReduceScatter", "receive", recv, dtype));
  if (send.size != recv.size * static_cast<uint64_t>(size_)) {
    return invalid_argument("ReduceScatter: the send view holds {} bytes, not {} ranks × {} bytes", send.size, size_,
                            recv.size);
  }
  const size_t count = recv.size / element_bytes(dtype);
  return enqueue(stream, "ReduceScatter", Operation{Kind::kReduceScatter, nullptr, nullptr, count, dtype, op, 0}, send,
                 recv);
}

Status Communicator::broadcast(hal::Stream& stream, hal::BufferView buffer, DType dtype, int root) {
  HXRT_RETURN_IF_ERROR(check_view("Broadcast", "", buffer, dtype));
  HXRT_RETURN_IF_ERROR(check_peer("Broadcast: the root", root));
  const size_t count = buffer.size / element_bytes(dtype);
  return enqueue(stream, "Broadcast",
                 Operation{Kind::kBroadcast, nullptr, nullptr, count, dtype, ReduceOp::kSum, root}, {}, buffer);
}

Status Communicator::send(hal::Stream& stream, hal::BufferView buffer, DType dtype, int peer) {
  HXRT_RETURN_IF_ERROR(check_view("Send", "send", buffer, dtype));
  HXRT_RETURN_IF_ERROR(check_peer("Send: the peer", peer));
  const size_t count = buffer.size / element_bytes(dtype);
  return enqueue(stream, "Send", Operation{Kind::kSend, nullptr, nullptr, count, dtype, ReduceOp::kSum, peer}, buffer,
                 {});
}

Status Communicator::recv(hal::Stream& stream, hal::BufferView buffer, DType dtype, int peer) {
  HXRT_RETURN_IF_ERROR(check_view("Recv", "receive", buffer, dtype));
  HXRT_RETURN_IF_ERROR(check_peer("Recv: the peer", peer));
  const size_t count = buffer.size / element_bytes(dtype);
  return enqueue(stream, "Recv", Operation{Kind::kRecv, nullptr, nullptr, count, dtype, ReduceOp::kSum, peer}, {},
                 buffer);
}

Status Communicator::barrier(hal::Stream& stream) {
  return enqueue(stream, "Barrier", Operation{Kind::kBarrier, nullptr, nullptr, 0, DType::kF32, ReduceOp::kSum, 0}, {},
                 {});
}

Result<std::shared_ptr<Communicator>> Communicator::split(int color, int key, std::string name) {
  if (Status earlier = status(); !earlier.ok()) {
    return std::move(earlier).with_context(fmt::format("split of {}: the communicator failed earlier", describe()));
  }
  std::lock_guard<std::mutex> run_lock(run_mutex_);
  Result<std::shared_ptr<Communicator>> result = do_split(color, key, std::move(name));
  if (!result.ok()) return std::move(result).status().with_context(fmt::format("split of {}", describe()));
  return result;
}

// ---- one rank ----

namespace {

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(std::string name, hal::Duration timeout) : Communicator("local", std::move(name), 0, 1, timeout) {}

 protected:
  Status run(const Operation& operation, hal::Deadline /*deadline*/, const std::atomic<bool>* /*cancel*/) override {
    const size_t bytes = operation.count * element_bytes(operation.dtype);
    switch (operation.kind) {
      case Kind::kAllReduce:
      case Kind::kAllGather:
      case Kind::kReduceScatter:
        if (operation.send != operation.recv && bytes > 0) std::memmove(operation.recv, operation.send, bytes);
        return ok_status();
      case Kind::kBroadcast:
      case Kind::kBarrier: return ok_status();
      case Kind::kSend:
      case Kind::kRecv: break;
    }
    return internal_error("{} reached a one-rank communicator", kind_name(static_cast<int>(operation.kind)));
  }
  Result<std::shared_ptr<Communicator>> do_split(int color, int /*key*/, std::string name) override {
    if (color < 0) return std::shared_ptr<Communicator>();
    return std::shared_ptr<Communicator>(std::make_shared<LocalCommunicator>(std::move(name), timeout()));
  }
  void post_abort(const std::string& /*message*/) override {}
};

std::mutex g_registry_mutex;
std::map<std::string, std::shared_ptr<Communicator>, std::less<>>& groups() {
  static auto* map = new std::map<std::string, std::shared_ptr<Communicator>, std::less<>>();
  return *map;
}

}  // namespace

bool launched_by_mpi() {
  for (const char* variable : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(variable) != nullptr) return true;
  }
  return false;
}

Result<std::shared_ptr<Communicator>> world(const CommOptions& options) {
  static std::mutex mutex;
  static auto* worlds = new std::map<std::string, std::shared_ptr<Communicator>>();
  std::string backend = options.backend;
  if (backend == "auto") backend = launched_by_mpi() ? "mpi" : "local";
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = worlds->find(backend); it != worlds->end()) return it->second;
  std::shared_ptr<Communicator> communicator;
  if (backend == "local") {
    communicator = std::make_shared<LocalCommunicator>("world", options.timeout);
  } else if (backend == "mpi") {
    HXRT_ASSIGN_OR_RETURN(communicator, open_mpi_world(options.timeout));
  } else {
    return invalid_argument("unknown communication backend '{}' (auto, mpi, local)", options.backend);
  }
  (*worlds)[backend] = communicator;
  {
    std::lock_guard<std::mutex> registry_lock(g_registry_mutex);
    groups().try_emplace("world", communicator);
  }
  return communicator;
}

Status register_group(std::string name, std::shared_ptr<Communicator> communicator) {
  if (name.empty()) return invalid_argument("register_group: empty group name");
  if (communicator == nullptr) return invalid_argument("register_group '{}': no communicator", name);
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  if (groups().count(name) != 0) return already_exists("communicator group '{}' is registered already", name);
  groups().emplace(std::move(name), std::move(communicator));
  return ok_status();
}

Result<std::shared_ptr<Communicator>> find_group(std::string_view name) {
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  if (auto it = groups().find(name); it != groups().end()) return it->second;
  std::string known;
  for (const auto& [group, communicator] : groups()) known += fmt::format("{}'{}'", known.empty() ? "" : ", ", group);
  return not_found("communicator group '{}' is not registered (registered: {}); comm::world() registers 'world'",
                   name, known.empty() ? "none" : known);
}

void unregister_group(std::string_view name) {
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  if (auto it = groups().find(name); it != groups().end()) groups().erase(it);
}

}  // namespace hxrt::comm
