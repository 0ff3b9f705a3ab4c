// All-reduce latency against message size on this machine (docs/scale-out.md): hxrt's communicator, blocking on
// host memory and as a host task on a CPU stream, against the MPI library called directly (the same
// MPI_Iallreduce + MPI_Test loop, without hxrt's staging, notices and deadline, and a plain blocking MPI_Allreduce).
// Run with mpirun; rank 0 prints one JSON line per (size, path): the median of `--reps` timings, each the slowest
// rank's time for one collective started after a barrier.
//
//   mpirun -np 2 --oversubscribe build/bench/comm_allreduce [--reps 200] [--max-bytes 16777216]
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "hxrt/comm/communicator.h"
#include "hxrt/hal/driver.h"

namespace {

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The slowest rank's time of `one()`, after a barrier, for each of `reps` runs; the median.
template <typename One>
double median_us(int reps, One one) {
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = now_us();
    one();
    double elapsed = now_us() - start;
    double slowest = 0.0;
    MPI_Allreduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    times.push_back(slowest);
  }
  std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 200;
  size_t max_bytes = size_t{16} << 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--max-bytes") == 0) max_bytes = std::strtoull(argv[i + 1], nullptr, 10);
  }
  // hxrt initialises MPI (through its plugin) with MPI_THREAD_MULTIPLE; this program then calls MPI directly too.
  auto world = hxrt::comm::world({.backend = "mpi"});
  if (!world.ok()) {
    std::fprintf(stderr, "%s\n", world.status().to_string().c_str());
    return 1;
  }
  auto comm = *world;
  hxrt::hal::DriverRegistry drivers;
  if (!hxrt::hal::register_builtin_drivers(drivers, 1).ok()) return 1;
  auto device = drivers.open("cpu");
  if (!device.ok()) return 1;
  auto stream = (*device)->create_stream();
  if (!stream.ok()) return 1;
  const int rank = comm->rank();
  const hxrt::Result<std::string> version = hxrt::comm::mpi_library_version();
  const std::string library = version.ok() ? *version : std::string("?");
  for (size_t bytes = 4; bytes <= max_bytes; bytes *= 4) {
    const size_t count = bytes / 4;
    std::vector<float> send(count, 1.0f), recv(count);
    auto buffer = (*device)->allocate(bytes, hxrt::hal::MemoryKind::kDevice);
    if (!buffer.ok()) return 1;
    const int n = bytes >= (size_t{1} << 20) ? std::max(reps / 10, 10) : reps;
    const double raw = median_us(n, [&] {
      MPI_Allreduce(send.data(), recv.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    });
    const double raw_nonblocking = median_us(n, [&] {
      MPI_Request request;
      MPI_Iallreduce(send.data(), recv.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &request);
      int done = 0;
      while (!done) MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    });
    const double host = median_us(n, [&] {
      comm->all_reduce(send.data(), recv.data(), count, hxrt::DType::kF32, hxrt::comm::ReduceOp::kSum).ignore();
    });
    const double on_stream = median_us(n, [&] {
      comm->all_reduce(**stream, **buffer, **buffer, hxrt::DType::kF32, hxrt::comm::ReduceOp::kSum).ignore();
      (*stream)->synchronize().ignore();
    });
    if (!comm->status().ok()) {
      std::fprintf(stderr, "%s\n", comm->status().to_string().c_str());
      return 1;
    }
    if (rank == 0) {
      std::printf(
          "{\"ranks\": %d, \"bytes\": %zu, \"mpi_allreduce_us\": %.2f, \"mpi_iallreduce_test_us\": %.2f, "
          "\"hxrt_host_us\": %.2f, \"hxrt_stream_us\": %.2f, \"mpi\": \"%s\"}\n",
          comm->size(), bytes, raw, raw_nonblocking, host, on_stream, library.c_str());
      std::fflush(stdout);
    }
  }
  return 0;
}
