// The C interface between hxrt_comm and its MPI plugin (libhxrt_comm_mpi.so, Note [The MPI plugin] in
// mpi_communicator.cc). The plugin is the only code compiled against mpi.h and linked to libmpi: hxrt itself
// loads it with dlopen when a program asks for an MPI communicator, so nothing of hxrt needs MPI to build or run.
//
// Every call returns 0 on success; otherwise it writes a NUL-terminated message into `error` (`error_bytes` long)
// and returns nonzero. Handles are opaque. Thread-safety: the plugin initialises MPI with MPI_THREAD_MULTIPLE and
// refuses a library that gives less; calls on one communicator are serialised by the caller.
#pragma once

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HXRT_MPI_TRANSPORT_ABI 1

// Element types. f16 and bf16 travel as 16-bit words and reduce through the plugin's own MPI_Ops (in float).
enum HxrtMpiDType {
  HXRT_MPI_F32 = 0,
  HXRT_MPI_F16 = 1,
  HXRT_MPI_BF16 = 2,
  HXRT_MPI_I8 = 3,
  HXRT_MPI_I32 = 4,
  HXRT_MPI_I64 = 5,
  HXRT_MPI_U8 = 6,
  HXRT_MPI_F64 = 7,
};
enum HxrtMpiOp { HXRT_MPI_SUM = 0, HXRT_MPI_PROD = 1, HXRT_MPI_MAX = 2, HXRT_MPI_MIN = 3 };
enum HxrtMpiKind {
  HXRT_MPI_ALL_REDUCE = 0,      // send, recv: count elements
  HXRT_MPI_ALL_GATHER = 1,      // send: count; recv: size × count, rank-major
  HXRT_MPI_REDUCE_SCATTER = 2,  // send: size × count; recv: count
  // (send and recv may overlap in any way: both are staged)
  HXRT_MPI_BROADCAST = 3,       // recv: count, from rank `peer`
  HXRT_MPI_SEND = 4,            // send: count, to rank `peer`
  HXRT_MPI_RECV = 5,            // recv: count, from rank `peer`
  HXRT_MPI_BARRIER = 6,
};

struct HxrtMpiTransport {
  int abi;  // HXRT_MPI_TRANSPORT_ABI
  // Initialises MPI once per process (and finalises it at exit); returns the world communicator.
  int (*init)(void** world, int* rank, int* size, char* error, size_t error_bytes);
  // MPI_Comm_split of `comm`; a rank whose color is negative gets no communicator (*out = NULL).
  int (*split)(void* comm, int color, int key, void** out, int* rank, int* size, char* error, size_t error_bytes);
  void (*free_comm)(void* comm);
  // Starts one operation (non-blocking); *request is polled with test().
  int (*start)(void* comm, int kind, const void* send, void* recv, size_t count, int dtype, int op, int peer,
               void** request, char* error, size_t error_bytes);
  // *done = 1 once the request completed (its result is then copied to the caller's receive buffer and the
  // request freed); 0 while it runs. The plugin stages both sides (Note [Staged requests] in mpi_transport.cc).
  int (*test)(void* request, int* done, char* error, size_t error_bytes);
  // The caller gives up on the request: its completion (test() keeps being called) touches no caller memory.
  void (*abandon)(void* request);
  // Tells every other rank of `comm`, without blocking, that this one failed: `message` says how.
  void (*post_abort)(void* comm, const char* message);
  // 1 and the notice when another rank's post_abort has arrived; 0 when none has.
  int (*poll_abort)(void* comm, int* from_rank, char* message, size_t message_bytes);
  // "Open MPI v4.1.4, ..." (MPI_Get_library_version).
  const char* (*library_version)(void);
};

// The plugin's one exported symbol.
const struct HxrtMpiTransport* hxrt_mpi_transport(void);
typedef const struct HxrtMpiTransport* (*HxrtMpiTransportEntry)(void);

#ifdef __cplusplus
}
#endif
