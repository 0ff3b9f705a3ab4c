// Communicator: a group of ranks (processes) and the collectives among them, shaped like HCCL's and NCCL's —
// AllReduce, AllGather, ReduceScatter, Broadcast, Send/Recv and Barrier — over an existing engine (Open MPI today;
// docs/scale-out.md).
//
// Every collective has two forms:
//  - on a stream (the form plans and the graph ops use): enqueued as a host task (Note [Host tasks] in
//    hxrt/hal/stream.h), so it runs after the stream's earlier work and before its later work, and is ordered with
//    other streams by events like any launch. Buffers of any host-addressable or mappable device (cpu, opencl).
//  - blocking, on host memory: what the stream form runs; also for callers outside a stream (rank 0 broadcasting a
//    decode step's batch).
// All ranks of a communicator must issue the same collectives in the same order, as with MPI and NCCL.
//
// Nothing waits forever (Note [Collective failures] in communicator.cc): a collective that does not complete
// within the communicator's timeout fails with DeadlineExceeded; a rank that fails (its stream failed before the
// collective, or its part of it failed) tells the others, whose pending and later collectives fail with Aborted
// naming that rank and its error. Either way the communicator is then failed for good, as a failed stream is.
//
// Backends: "local" (one rank, no transport; what a single-process run gets), "mpi" (Open MPI through hxrt's MPI
// plugin, loaded at run time: Unavailable where it is not built or MPI is absent) and "auto" (mpi when the process
// was started by mpirun, else local).
//
// Thread-safety: thread-safe; collectives of one communicator run one at a time, in the order they start.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "hxrt/base/dtype.h"
#include "hxrt/base/status.h"
#include "hxrt/hal/buffer.h"
#include "hxrt/hal/stream.h"
#include "hxrt/hal/types.h"

namespace hxrt::comm {

enum class ReduceOp : uint8_t { kSum, kProd, kMax, kMin, kAvg };
std::string_view reduce_op_name(ReduceOp op);
// "sum", "prod", "max", "min", "avg" (HCCL's and ONNX's spellings); InvalidArgument naming the others.
Result<ReduceOp> parse_reduce_op(std::string_view name);

// The element types collectives carry: f32, f16, bf16, i8, u8, i32, i64 (f16 and bf16 reduce in float).
bool is_collective_dtype(DType dtype);

struct CommOptions {
  std::string backend = "auto";  // "auto", "mpi" or "local"
  // Longest a collective waits for its peers before failing with DeadlineExceeded.
  hal::Duration timeout = std::chrono::seconds(120);
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& backend() const { return backend_; }
  // "mpi communicator 'world' (rank 1 of 3)": how errors name it.
  std::string describe() const;
  hal::Duration timeout() const { return timeout_.load(); }
  void set_timeout(hal::Duration timeout) { timeout_.store(timeout); }
  // The first failure (a timeout, a peer's notice, a transport error), or OK.
  Status status() const;

  // ---- blocking, host memory (`cancel`, when given, stops a wait with Aborted) ----
  // recv[i] = op over ranks of send[i], count elements; send == recv is in place.
  Status all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                    const std::atomic<bool>* cancel = nullptr);
  // recv (size() × count) = every rank's send (count), rank-major; send may be this rank's part of recv.
  Status all_gather(const void* send, void* recv, size_t count, DType dtype, const std::atomic<bool>* cancel = nullptr);
  // recv (count) = op over ranks of send[rank·count + i]; send holds size() × count. recv may lie inside send.
  Status reduce_scatter(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                        const std::atomic<bool>* cancel = nullptr);
  // buffer (count) = root's buffer, on every rank.
  Status broadcast(void* buffer, size_t count, DType dtype, int root, const std::atomic<bool>* cancel = nullptr);
  Status send(const void* buffer, size_t count, DType dtype, int peer, const std::atomic<bool>* cancel = nullptr);
  Status recv(void* buffer, size_t count, DType dtype, int peer, const std::atomic<bool>* cancel = nullptr);
  Status barrier(const std::atomic<bool>* cancel = nullptr);

  // ---- on a stream: the same collectives as host tasks. Counts come from the views' sizes. ----
  Status all_reduce(hal::Stream& stream, hal::BufferView send, hal::BufferView recv, DType dtype, ReduceOp op);
  Status all_gather(hal::Stream& stream, hal::BufferView send, hal::BufferView recv, DType dtype);
  Status reduce_scatter(hal::Stream& stream, hal::BufferView send, hal::BufferView recv, DType dtype, ReduceOp op);
  Status broadcast(hal::Stream& stream, hal::BufferView buffer, DType dtype, int root);
  Status send(hal::Stream& stream, hal::BufferView buffer, DType dtype, int peer);
  Status recv(hal::Stream& stream, hal::BufferView buffer, DType dtype, int peer);
  Status barrier(hal::Stream& stream);

  // A communicator per distinct `color` (MPI_Comm_split): ranks ordered by `key`, then by rank here. A negative
  // color takes no part (the result is null). Collective over this communicator. `name` names the new one.
  Result<std::shared_ptr<Communicator>> split(int color, int key, std::string name);

  // Tells every other rank that this one failed with `reason` (their collectives then fail naming this rank), and
  // fails this communicator. Called by the stream form when its stream failed before the collective's turn.
  void abort(const Status& reason);

 protected:
  Communicator(std::string backend, std::string name, int rank, int size, hal::Duration timeout);

  // One operation of the transport, started and awaited under the communicator's lock. `what` names it in errors.
  enum class Kind : uint8_t { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kSend, kRecv, kBarrier };
  struct Operation {
    Kind kind = Kind::kBarrier;
    const void* send = nullptr;
    void* recv = nullptr;
    size_t count = 0;  // elements per rank
    DType dtype = DType::kF32;
    ReduceOp op = ReduceOp::kSum;  // never kAvg here (run as kSum, then scaled)
    int peer = 0;                  // root, or the other side of a send/recv
  };
  virtual Status run(const Operation& operation, hal::Deadline deadline, const std::atomic<bool>* cancel) = 0;
  virtual Result<std::shared_ptr<Communicator>> do_split(int color, int key, std::string name) = 0;
  // Sends the failure notice to the other ranks (nothing for one rank).
  virtual void post_abort(const std::string& message) = 0;
  // What run() returns when it receives rank `from`'s notice: Aborted naming that rank and what it said. This rank
  // then fails without a notice of its own.
  Status peer_failure(int from, std::string_view notice);
  const std::string& name() const { return name_; }

 private:
  Status execute(std::string_view what, const Operation& operation, const std::atomic<bool>* cancel);
  Status enqueue(hal::Stream& stream, std::string what, Operation operation, hal::BufferView send_view,
                 hal::BufferView recv_view);
  Status check_peer(std::string_view what, int peer) const;
  void fail(const Status& error);

  const std::string backend_;
  const std::string name_;
  const int rank_;
  const int size_;
  std::atomic<hal::Duration> timeout_;
  std::mutex run_mutex_;            // one collective at a time
  mutable std::mutex error_mutex_;  // guards error_
  Status error_;
  bool peer_failed_ = false;  // guarded by run_mutex_: run() returned peer_failure()
};

// The process's world communicator of `options.backend` (opened once per backend; later calls return the same
// one and ignore the timeout). Registers it as group "world" when that name is free.
Result<std::shared_ptr<Communicator>> world(const CommOptions& options = {});
// True when the environment says mpirun (or another PMI launcher) started this process.
bool launched_by_mpi();
// The MPI library's version ("Open MPI v4.1.4, ..."), or the reason MPI is unavailable.
Result<std::string> mpi_library_version();

// Named communicators, as HCCL's groups: graph ops name theirs by the attribute `group`.
Status register_group(std::string name, std::shared_ptr<Communicator> communicator);
Result<std::shared_ptr<Communicator>> find_group(std::string_view name);
void unregister_group(std::string_view name);

}  // namespace hxrt::comm
