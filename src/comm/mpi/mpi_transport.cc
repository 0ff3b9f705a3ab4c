// The MPI plugin: hxrt's MPI transport (mpi_transport.h), built as libhxrt_comm_mpi.so against the MPI found at
// configure time and loaded by hxrt_comm at run time (Note [The MPI plugin] in ../mpi_communicator.cc). It knows
// nothing of hxrt beyond mpi_transport.h and the f16/bf16 conversions of hxrt/base/float16.h (header only).
#include "comm/mpi/mpi_transport.h"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "hxrt/base/float16.h"

namespace {

constexpr int kAbortTag = 7701;

struct Communicator {
  MPI_Comm data = MPI_COMM_NULL;     // the collectives
  MPI_Comm control = MPI_COMM_NULL;  // failure notices only, so that they never match a collective's messages
  int rank = 0;
  int size = 1;
  std::mutex notice_mutex;
  std::deque<std::string> sent_notices;  // buffers of notices in flight (kept: a notice is sent once per failure)
  // Staging buffers of completed requests, kept for the next ones: a new buffer per request would cost page faults
  // and zeroing on every large message.
  std::mutex spare_mutex;
  std::vector<std::vector<unsigned char>> spare;
};

// Every request works on its own copies of the caller's memory (Note [Staged requests]).
struct Request {
  Communicator* owner = nullptr;
  MPI_Request request = MPI_REQUEST_NULL;
  std::vector<unsigned char> send;  // staged input (reduce-scatter, send)
  std::vector<unsigned char> recv;  // staged result: copied to `out` on completion
  void* out = nullptr;
  bool abandoned = false;
};

// Note [Staged requests]
// A collective can fail on one rank (its deadline passed, a peer's notice arrived) while the transport still holds
// the request: MPI cannot cancel a collective, and a late peer may complete it later. If MPI wrote into the
// caller's buffer then, it would write memory the caller has freed or unmapped since. So every request reads and
// writes staging copies it owns: the input is copied in when it starts, the result out when it completes — unless
// the caller abandoned it, and then nothing of the caller's is touched again. The cost is one copy each way (a
// decode step's all-reduce is a few KiB; docs/scale-out.md measures it).

std::mutex g_init_mutex;
// Communicators freed while notices they sent may still be in flight: kept to the end of the process (their
// buffers must outlive the sends), reachable from here.
std::mutex g_retired_mutex;
std::vector<Communicator*>* g_retired = new std::vector<Communicator*>();
bool g_initialised = false;
bool g_we_initialised = false;
MPI_Op g_half_ops[2][4];  // [f16, bf16][sum, prod, max, min]
char g_version[MPI_MAX_LIBRARY_VERSION_STRING + 1] = {};

void set_error(char* error, size_t bytes, const std::string& message) {
  if (error == nullptr || bytes == 0) return;
  const size_t n = std::min(bytes - 1, message.size());
  std::memcpy(error, message.data(), n);
  error[n] = '\0';
}

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING + 1] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(length));
}

// A staging buffer from the communicator's spares (its capacity kept), or a new one.
std::vector<unsigned char> take_spare(Communicator* comm) {
  std::lock_guard<std::mutex> lock(comm->spare_mutex);
  if (comm->spare.empty()) return {};
  std::vector<unsigned char> buffer = std::move(comm->spare.back());
  comm->spare.pop_back();
  return buffer;
}

// Deletes a request whose staging buffers the caller no longer needs, giving them back to its communicator.
void recycle(Request* request) {
  Communicator* comm = request->owner;
  {
    std::lock_guard<std::mutex> lock(comm->spare_mutex);
    for (std::vector<unsigned char>* buffer : {&request->send, &request->recv}) {
      if (buffer->capacity() == 0 || comm->spare.size() >= 4) continue;
      buffer->clear();
      comm->spare.push_back(std::move(*buffer));
    }
  }
  delete request;
}

int fail(char* error, size_t bytes, const char* what, int code) {
  set_error(error, bytes, std::string(what) + ": " + mpi_error_text(code));
  return 1;
}

template <int kType, int kOp>
void reduce_halves(void* in, void* inout, int* length, MPI_Datatype* /*type*/) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *length; ++i) {
    const float x = kType == 0 ? hxrt::f16_to_f32(a[i]) : hxrt::bf16_to_f32(a[i]);
    const float y = kType == 0 ? hxrt::f16_to_f32(b[i]) : hxrt::bf16_to_f32(b[i]);
    float r;
    if constexpr (kOp == HXRT_MPI_SUM) {
      r = x + y;
    } else if constexpr (kOp == HXRT_MPI_PROD) {
      r = x * y;
    } else if constexpr (kOp == HXRT_MPI_MAX) {
      r = x > y ? x : y;
    } else {
      r = x < y ? x : y;
    }
    b[i] = kType == 0 ? hxrt::f32_to_f16(r) : hxrt::f32_to_bf16(r);
  }
}

void finalize_at_exit() {
  std::lock_guard<std::mutex> lock(g_init_mutex);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!g_we_initialised || finalized) return;
  for (auto& ops : g_half_ops) {
    for (MPI_Op& op : ops) MPI_Op_free(&op);
  }
  MPI_Finalize();
}

int element_type(int dtype, MPI_Datatype* type, size_t* bytes) {
  switch (dtype) {
    case HXRT_MPI_F32: *type = MPI_FLOAT; *bytes = 4; return 0;
    case HXRT_MPI_F16:
    case HXRT_MPI_BF16: *type = MPI_UINT16_T; *bytes = 2; return 0;
    case HXRT_MPI_I8: *type = MPI_INT8_T; *bytes = 1; return 0;
    case HXRT_MPI_I32: *type = MPI_INT32_T; *bytes = 4; return 0;
    case HXRT_MPI_I64: *type = MPI_INT64_T; *bytes = 8; return 0;
    case HXRT_MPI_U8: *type = MPI_UINT8_T; *bytes = 1; return 0;
    case HXRT_MPI_F64: *type = MPI_DOUBLE; *bytes = 8; return 0;
    default: return 1;
  }
}

int reduction(int dtype, int op, MPI_Op* out) {
  if (op < HXRT_MPI_SUM || op > HXRT_MPI_MIN) return 1;
  if (dtype == HXRT_MPI_F16 || dtype == HXRT_MPI_BF16) {
    *out = g_half_ops[dtype == HXRT_MPI_F16 ? 0 : 1][op];
    return 0;
  }
  static const MPI_Op kBuiltIn[] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN};
  *out = kBuiltIn[op];
  return 0;
}

int init(void** world, int* rank, int* size, char* error, size_t error_bytes) {
  std::lock_guard<std::mutex> lock(g_init_mutex);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) {
    set_error(error, error_bytes, "MPI was finalised already in this process");
    return 1;
  }
  if (!g_initialised) {
    int initialised = 0;
    MPI_Initialized(&initialised);
    int provided = MPI_THREAD_SINGLE;
    if (initialised) {
      MPI_Query_thread(&provided);
    } else {
      if (int code = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided); code != MPI_SUCCESS) {
        return fail(error, error_bytes, "MPI_Init_thread", code);
      }
      g_we_initialised = true;
      std::atexit(finalize_at_exit);
    }
    if (provided < MPI_THREAD_MULTIPLE) {
      set_error(error, error_bytes,
                "the MPI library gives thread level " + std::to_string(provided) +
                    ", below MPI_THREAD_MULTIPLE (collectives run on stream threads)");
      return 1;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_User_function* functions[2][4] = {
        {reduce_halves<0, HXRT_MPI_SUM>, reduce_halves<0, HXRT_MPI_PROD>, reduce_halves<0, HXRT_MPI_MAX>,
         reduce_halves<0, HXRT_MPI_MIN>},
        {reduce_halves<1, HXRT_MPI_SUM>, reduce_halves<1, HXRT_MPI_PROD>, reduce_halves<1, HXRT_MPI_MAX>,
         reduce_halves<1, HXRT_MPI_MIN>}};
    for (int t = 0; t < 2; ++t) {
      for (int o = 0; o < 4; ++o) MPI_Op_create(functions[t][o], 1, &g_half_ops[t][o]);
    }
    int length = 0;
    MPI_Get_library_version(g_version, &length);
    g_version[std::min(length, MPI_MAX_LIBRARY_VERSION_STRING)] = '\0';
    if (char* newline = std::strchr(g_version, '\n'); newline != nullptr) *newline = '\0';
    g_initialised = true;
  }
  auto* comm = new Communicator;
  if (int code = MPI_Comm_dup(MPI_COMM_WORLD, &comm->data); code != MPI_SUCCESS) {
    delete comm;
    return fail(error, error_bytes, "MPI_Comm_dup", code);
  }
  MPI_Comm_dup(MPI_COMM_WORLD, &comm->control);
  MPI_Comm_set_errhandler(comm->data, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(comm->control, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm->data, &comm->rank);
  MPI_Comm_size(comm->data, &comm->size);
  *world = comm;
  *rank = comm->rank;
  *size = comm->size;
  return 0;
}

int split(void* handle, int color, int key, void** out, int* rank, int* size, char* error, size_t error_bytes) {
  auto* parent = static_cast<Communicator*>(handle);
  MPI_Comm data = MPI_COMM_NULL;
  if (int code = MPI_Comm_split(parent->data, color < 0 ? MPI_UNDEFINED : color, key, &data); code != MPI_SUCCESS) {
    return fail(error, error_bytes, "MPI_Comm_split", code);
  }
  if (data == MPI_COMM_NULL) {
    *out = nullptr;
    return 0;
  }
  auto* comm = new Communicator;
  comm->data = data;
  MPI_Comm_dup(data, &comm->control);
  MPI_Comm_set_errhandler(comm->data, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(comm->control, MPI_ERRORS_RETURN);
  MPI_Comm_rank(data, &comm->rank);
  MPI_Comm_size(data, &comm->size);
  *out = comm;
  *rank = comm->rank;
  *size = comm->size;
  return 0;
}

void free_comm(void* handle) {
  auto* comm = static_cast<Communicator*>(handle);
  if (comm == nullptr) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) {
    MPI_Comm_free(&comm->data);  // pending operations complete first (MPI frees it afterwards)
    MPI_Comm_free(&comm->control);
  }
  if (comm->sent_notices.empty()) {
    delete comm;
  } else {
    std::lock_guard<std::mutex> lock(g_retired_mutex);
    g_retired->push_back(comm);  // its notices may still be in flight
  }
}

int start(void* handle, int kind, const void* send, void* recv, size_t count, int dtype, int op, int peer,
          void** out, char* error, size_t error_bytes) {
  auto* comm = static_cast<Communicator*>(handle);
  MPI_Datatype type;
  size_t element_bytes = 0;
  if (element_type(dtype, &type, &element_bytes) != 0) {
    set_error(error, error_bytes, "unknown element type " + std::to_string(dtype));
    return 1;
  }
  if (count > static_cast<size_t>(INT_MAX)) {
    set_error(error, error_bytes, std::to_string(count) + " elements: past MPI's int count");
    return 1;
  }
  MPI_Op reduce = MPI_OP_NULL;
  if ((kind == HXRT_MPI_ALL_REDUCE || kind == HXRT_MPI_REDUCE_SCATTER) && reduction(dtype, op, &reduce) != 0) {
    set_error(error, error_bytes, "unknown reduction " + std::to_string(op));
    return 1;
  }
  const int n = static_cast<int>(count);
  const size_t bytes = count * element_bytes;
  const size_t ranks = static_cast<size_t>(comm->size);
  const auto* input = static_cast<const unsigned char*>(send);
  auto* request = new Request;
  request->owner = comm;
  request->send = take_spare(comm);
  request->recv = take_spare(comm);
  int code = MPI_SUCCESS;
  const char* what = "";
  switch (kind) {
    case HXRT_MPI_ALL_REDUCE:
      what = "MPI_Iallreduce";
      request->recv.assign(input, input + bytes);
      request->out = recv;
      code = MPI_Iallreduce(MPI_IN_PLACE, request->recv.data(), n, type, reduce, comm->data, &request->request);
      break;
    case HXRT_MPI_ALL_GATHER:
      what = "MPI_Iallgather";
      request->recv.resize(bytes * ranks);
      if (bytes > 0) std::memcpy(request->recv.data() + static_cast<size_t>(comm->rank) * bytes, input, bytes);
      request->out = recv;
      code = MPI_Iallgather(MPI_IN_PLACE, n, type, request->recv.data(), n, type, comm->data, &request->request);
      break;
    case HXRT_MPI_REDUCE_SCATTER:
      what = "MPI_Ireduce_scatter_block";
      request->send.assign(input, input + bytes * ranks);
      request->recv.resize(bytes);
      request->out = recv;
      code = MPI_Ireduce_scatter_block(request->send.data(), request->recv.data(), n, type, reduce, comm->data,
                                       &request->request);
      break;
    case HXRT_MPI_BROADCAST: {
      what = "MPI_Ibcast";
      const auto* own = static_cast<const unsigned char*>(recv);
      request->recv.assign(own, own + bytes);
      request->out = recv;
      code = MPI_Ibcast(request->recv.data(), n, type, peer, comm->data, &request->request);
      break;
    }
    case HXRT_MPI_SEND:
      what = "MPI_Isend";
      request->send.assign(input, input + bytes);
      code = MPI_Isend(request->send.data(), n, type, peer, 0, comm->data, &request->request);
      break;
    case HXRT_MPI_RECV:
      what = "MPI_Irecv";
      request->recv.resize(bytes);
      request->out = recv;
      code = MPI_Irecv(request->recv.data(), n, type, peer, 0, comm->data, &request->request);
      break;
    case HXRT_MPI_BARRIER:
      what = "MPI_Ibarrier";
      code = MPI_Ibarrier(comm->data, &request->request);
      break;
    default:
      recycle(request);
      set_error(error, error_bytes, "unknown operation " + std::to_string(kind));
      return 1;
  }
  if (code != MPI_SUCCESS) {
    recycle(request);
    return fail(error, error_bytes, what, code);
  }
  *out = request;
  return 0;
}

int test(void* handle, int* done, char* error, size_t error_bytes) {
  auto* request = static_cast<Request*>(handle);
  int flag = 0;
  MPI_Status status;
  if (int code = MPI_Test(&request->request, &flag, &status); code != MPI_SUCCESS) {
    if (request->abandoned) {
      delete request;
    } else {
      recycle(request);
    }
    *done = 1;
    return fail(error, error_bytes, "MPI_Test", code);
  }
  *done = flag;
  if (flag) {
    if (request->abandoned) {
      delete request;  // its communicator may be gone (Remains in ../mpi_communicator.cc keeps it, but not its spares)
    } else {
      if (request->out != nullptr && !request->recv.empty()) {
        std::memcpy(request->out, request->recv.data(), request->recv.size());
      }
      recycle(request);
    }
  }
  return 0;
}

void abandon(void* handle) { static_cast<Request*>(handle)->abandoned = true; }

void post_abort(void* handle, const char* message) {
  auto* comm = static_cast<Communicator*>(handle);
  std::lock_guard<std::mutex> lock(comm->notice_mutex);
  comm->sent_notices.emplace_back(message);
  const std::string& text = comm->sent_notices.back();
  for (int peer = 0; peer < comm->size; ++peer) {
    if (peer == comm->rank) continue;
    MPI_Request request;
    if (MPI_Isend(text.c_str(), static_cast<int>(text.size() + 1), MPI_CHAR, peer, kAbortTag, comm->control,
                  &request) == MPI_SUCCESS) {
      MPI_Request_free(&request);  // delivered in the background; the text stays in sent_notices
    }
  }
}

int poll_abort(void* handle, int* from_rank, char* message, size_t message_bytes) {
  auto* comm = static_cast<Communicator*>(handle);
  int flag = 0;
  MPI_Status status;
  if (MPI_Iprobe(MPI_ANY_SOURCE, kAbortTag, comm->control, &flag, &status) != MPI_SUCCESS || !flag) return 0;
  int length = 0;
  MPI_Get_count(&status, MPI_CHAR, &length);
  std::string text(static_cast<size_t>(std::max(length, 0)), '\0');
  MPI_Recv(text.data(), length, MPI_CHAR, status.MPI_SOURCE, kAbortTag, comm->control, MPI_STATUS_IGNORE);
  if (!text.empty() && text.back() == '\0') text.pop_back();
  *from_rank = status.MPI_SOURCE;
  set_error(message, message_bytes, text);
  return 1;
}

const char* library_version() { return g_version; }

const HxrtMpiTransport kTransport = {
    HXRT_MPI_TRANSPORT_ABI, init, split, free_comm, start, test, abandon, post_abort, poll_abort, library_version,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const HxrtMpiTransport* hxrt_mpi_transport(void) {
  return &kTransport;
}
