// The collectives across ranks over MPI, against references every rank computes from every rank's inputs. Run by
// mpiexec with 2 and 3 ranks (src/comm/CMakeLists.txt); every rank runs every test in the same order. Each test
// works on its own communicator split from the world, so a test that fails one on purpose leaves the others clean.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "hxrt/base/float16.h"
#include "hxrt/comm/communicator.h"
#include "hxrt/hal/driver.h"
#include "testing/mpi_world.h"

namespace hxrt::comm {
namespace {

const std::shared_ptr<Communicator>& g_world = hxrt::testing::mpi_world();

std::shared_ptr<Communicator> fresh(const std::string& name, hal::Duration timeout = std::chrono::seconds(60)) {
  Result<std::shared_ptr<Communicator>> c = g_world->split(0, g_world->rank(), name);
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  (*c)->set_timeout(timeout);
  return *c;
}

// Exactly representable in f16 and bf16, so that sums, maxima and minima over 3 ranks are exact in every dtype.
double input_value(int rank, size_t i) { return static_cast<double>((i * 7 + static_cast<size_t>(rank) * 3) % 11) * 0.5 - 2.5; }
// Products stay exact too: factors 0.5, 1 and 1.5.
double product_factor(int rank, size_t i) { return static_cast<double>((i + static_cast<size_t>(rank)) % 3 + 1) * 0.5; }

// Values of `dtype` stored as bytes, from doubles and back.
std::vector<unsigned char> encode(const std::vector<double>& values, DType dtype) {
  const size_t bytes = dtype_info(dtype).block_bytes;
  std::vector<unsigned char> out(values.size() * bytes);
  for (size_t i = 0; i < values.size(); ++i) {
    unsigned char* p = out.data() + i * bytes;
    const double v = values[i];
    switch (dtype) {
      case DType::kF32: { float f = static_cast<float>(v); std::memcpy(p, &f, 4); break; }
      case DType::kF16: { uint16_t h = f32_to_f16(static_cast<float>(v)); std::memcpy(p, &h, 2); break; }
      case DType::kBF16: { uint16_t h = f32_to_bf16(static_cast<float>(v)); std::memcpy(p, &h, 2); break; }
      case DType::kI32: { auto x = static_cast<int32_t>(std::lround(v * 2)); std::memcpy(p, &x, 4); break; }
      case DType::kI64: { auto x = static_cast<int64_t>(std::lround(v * 2)); std::memcpy(p, &x, 8); break; }
      case DType::kI8: { auto x = static_cast<int8_t>(std::lround(v * 2)); std::memcpy(p, &x, 1); break; }
      default: ADD_FAILURE() << "dtype " << dtype_name(dtype);
    }
  }
  return out;
}
std::vector<double> decode(const std::vector<unsigned char>& bytes_in, DType dtype) {
  const size_t bytes = dtype_info(dtype).block_bytes;
  std::vector<double> out(bytes_in.size() / bytes);
  for (size_t i = 0; i < out.size(); ++i) {
    const unsigned char* p = bytes_in.data() + i * bytes;
    switch (dtype) {
      case DType::kF32: { float f; std::memcpy(&f, p, 4); out[i] = f; break; }
      case DType::kF16: { uint16_t h; std::memcpy(&h, p, 2); out[i] = f16_to_f32(h); break; }
      case DType::kBF16: { uint16_t h; std::memcpy(&h, p, 2); out[i] = bf16_to_f32(h); break; }
      case DType::kI32: { int32_t x; std::memcpy(&x, p, 4); out[i] = x / 2.0; break; }
      case DType::kI64: { int64_t x; std::memcpy(&x, p, 8); out[i] = static_cast<double>(x) / 2.0; break; }
      case DType::kI8: { int8_t x; std::memcpy(&x, p, 1); out[i] = x / 2.0; break; }
      default: break;
    }
  }
  return out;
}

double reduce_reference(ReduceOp op, int ranks, size_t i) {
  double r = op == ReduceOp::kProd ? product_factor(0, i) : input_value(0, i);
  for (int k = 1; k < ranks; ++k) {
    const double v = op == ReduceOp::kProd ? product_factor(k, i) : input_value(k, i);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: r += v; break;
      case ReduceOp::kProd: r *= v; break;
      case ReduceOp::kMax: r = std::max(r, v); break;
      case ReduceOp::kMin: r = std::min(r, v); break;
    }
  }
  return op == ReduceOp::kAvg ? r / ranks : r;
}

struct Case {
  DType dtype;
  ReduceOp op;
};

std::vector<Case> reduce_cases() {
  std::vector<Case> cases;
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16, DType::kI32, DType::kI64, DType::kI8}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kAvg}) {
      const bool floating = dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16;
      if (op == ReduceOp::kAvg && !floating) continue;
      if (op == ReduceOp::kProd && !floating) continue;  // halves doubled to integers would not multiply alike
      cases.push_back({dtype, op});
    }
  }
  return cases;
}

// Tolerance: exact except an average (one rounding of sum / ranks in the dtype).
double tolerance(const Case& c, double expected) {
  if (c.op != ReduceOp::kAvg) return 0.0;
  const double ulp = c.dtype == DType::kF32 ? 0x1p-23 : c.dtype == DType::kF16 ? 0x1p-10 : 0x1p-7;
  return std::abs(expected) * ulp + 1e-6;
}

TEST(Mpi, WorldKnowsItsRanks) {
  EXPECT_EQ(g_world->backend(), "mpi");
  EXPECT_GE(g_world->size(), 2);
  Result<std::string> version = mpi_library_version();
  ASSERT_TRUE(version.ok()) << version.status().to_string();
  EXPECT_FALSE(version->empty());
  // Every rank's rank, gathered: 0..size-1 in order.
  const int32_t mine = g_world->rank();
  std::vector<int32_t> all(static_cast<size_t>(g_world->size()), -1);
  ASSERT_TRUE(g_world->all_gather(&mine, all.data(), 1, DType::kI32).ok());
  for (int r = 0; r < g_world->size(); ++r) EXPECT_EQ(all[static_cast<size_t>(r)], r);
}

TEST(Mpi, AllReduceEveryDtypeAndOpInPlaceAndNot) {
  auto c = fresh("all-reduce");
  const int ranks = c->size();
  for (size_t count : {size_t{1}, size_t{13}, size_t{4099}}) {
    for (const Case& k : reduce_cases()) {
      for (bool in_place : {false, true}) {
        std::vector<double> mine(count);
        for (size_t i = 0; i < count; ++i) {
          mine[i] = k.op == ReduceOp::kProd ? product_factor(c->rank(), i) : input_value(c->rank(), i);
        }
        std::vector<unsigned char> send = encode(mine, k.dtype);
        std::vector<unsigned char> recv(send.size(), 0xCD);
        Status status = in_place ? c->all_reduce(send.data(), send.data(), count, k.dtype, k.op)
                                 : c->all_reduce(send.data(), recv.data(), count, k.dtype, k.op);
        ASSERT_TRUE(status.ok()) << status.to_string();
        const std::vector<double> got = decode(in_place ? send : recv, k.dtype);
        for (size_t i = 0; i < count; ++i) {
          const double expected = reduce_reference(k.op, ranks, i);
          ASSERT_NEAR(got[i], expected, tolerance(k, expected))
              << dtype_name(k.dtype) << " " << reduce_op_name(k.op) << " count " << count << " i " << i
              << (in_place ? " in place" : "");
        }
      }
    }
  }
}

TEST(Mpi, EveryRankGetsTheSameBitsFromAnInexactSum) {
  // Tensor-parallel ranks continue from the all-reduced activations: they must agree to the bit.
  auto c = fresh("same-bits");
  const size_t count = 100003;
  std::vector<float> values(count);
  uint32_t state = 12345u + static_cast<uint32_t>(c->rank()) * 7919u;
  for (float& v : values) {
    state = state * 1664525u + 1013904223u;
    v = static_cast<float>(state >> 8) * 0x1p-24f * 2.0f - 1.0f;
  }
  ASSERT_TRUE(c->all_reduce(values.data(), values.data(), count, DType::kF32, ReduceOp::kSum).ok());
  std::vector<float> rank0 = values;
  ASSERT_TRUE(c->broadcast(rank0.data(), count, DType::kF32, 0).ok());
  EXPECT_EQ(std::memcmp(rank0.data(), values.data(), count * sizeof(float)), 0);
}

TEST(Mpi, AllGatherAndReduceScatterInPlaceAndNot) {
  auto c = fresh("gather-scatter");
  const int ranks = c->size();
  const size_t count = 37;
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16, DType::kI64}) {
    const size_t bytes = count * dtype_info(dtype).block_bytes;
    std::vector<double> mine(count);
    for (size_t i = 0; i < count; ++i) mine[i] = input_value(c->rank(), i);
    const std::vector<unsigned char> part = encode(mine, dtype);
    for (bool in_place : {false, true}) {
      std::vector<unsigned char> all(bytes * static_cast<size_t>(ranks), 0xCD);
      const unsigned char* send = part.data();
      if (in_place) {
        std::memcpy(all.data() + static_cast<size_t>(c->rank()) * bytes, part.data(), bytes);
        send = all.data() + static_cast<size_t>(c->rank()) * bytes;
      }
      ASSERT_TRUE(c->all_gather(send, all.data(), count, dtype).ok());
      const std::vector<double> got = decode(all, dtype);
      for (int r = 0; r < ranks; ++r) {
        for (size_t i = 0; i < count; ++i) {
          ASSERT_EQ(got[static_cast<size_t>(r) * count + i], input_value(r, i)) << dtype_name(dtype) << " r" << r;
        }
      }
    }
    // ReduceScatter: rank r gets the sum over ranks of segment r of everyone's input.
    std::vector<double> whole(count * static_cast<size_t>(ranks));
    for (size_t i = 0; i < whole.size(); ++i) whole[i] = input_value(c->rank(), i);
    for (bool in_place : {false, true}) {
      std::vector<unsigned char> send = encode(whole, dtype);
      std::vector<unsigned char> recv(bytes, 0xCD);
      unsigned char* out = in_place ? send.data() + static_cast<size_t>(c->rank()) * bytes : recv.data();
      ASSERT_TRUE(c->reduce_scatter(send.data(), out, count, dtype, ReduceOp::kSum).ok());
      const std::vector<double> got = decode(std::vector<unsigned char>(out, out + bytes), dtype);
      for (size_t i = 0; i < count; ++i) {
        const size_t index = static_cast<size_t>(c->rank()) * count + i;
        double expected = 0.0;
        for (int r = 0; r < ranks; ++r) expected += input_value(r, index);
        ASSERT_EQ(got[i], expected) << dtype_name(dtype) << " i " << i;
      }
    }
  }
}

TEST(Mpi, BroadcastFromEveryRootAndSendRecvAroundARing) {
  auto c = fresh("bcast-ring");
  const int ranks = c->size();
  for (int root = 0; root < ranks; ++root) {
    std::vector<float> data(64, static_cast<float>(c->rank() * 100));
    ASSERT_TRUE(c->broadcast(data.data(), data.size(), DType::kF32, root).ok());
    EXPECT_EQ(data, std::vector<float>(64, static_cast<float>(root * 100))) << "root " << root;
  }
  // Ring: even ranks send first, odd ranks receive first (blocking calls on one thread would deadlock otherwise).
  const int next = (c->rank() + 1) % ranks;
  const int previous = (c->rank() + ranks - 1) % ranks;
  std::vector<int64_t> out(5, c->rank());
  std::vector<int64_t> in(5, -1);
  if (c->rank() % 2 == 0) {
    ASSERT_TRUE(c->send(out.data(), 5, DType::kI64, next).ok());
    ASSERT_TRUE(c->recv(in.data(), 5, DType::kI64, previous).ok());
  } else {
    ASSERT_TRUE(c->recv(in.data(), 5, DType::kI64, previous).ok());
    ASSERT_TRUE(c->send(out.data(), 5, DType::kI64, next).ok());
  }
  EXPECT_EQ(in, std::vector<int64_t>(5, previous));
  ASSERT_TRUE(c->barrier().ok());
}

class MpiStreams : public ::testing::TestWithParam<const char*> {};

TEST_P(MpiStreams, CollectivesOnAStreamKeepItsOrder) {
  hal::DriverRegistry registry;
  ASSERT_TRUE(hal::register_builtin_drivers(registry).ok());
  Result<std::unique_ptr<hal::Device>> device = registry.open(GetParam());
  // Every rank sees the same devices (one machine), so all skip together.
  if (!device.ok()) GTEST_SKIP() << device.status().to_string();
  auto c = fresh(std::string("streams-") + GetParam());
  const int ranks = c->size();
  auto stream = (*device)->create_stream();
  ASSERT_TRUE(stream.ok());
  const size_t count = 1000;
  auto x = (*device)->allocate(count * 4, hal::MemoryKind::kDevice);
  auto gathered = (*device)->allocate(count * 4 * static_cast<size_t>(ranks), hal::MemoryKind::kDevice);
  ASSERT_TRUE(x.ok() && gathered.ok());
  std::vector<float> mine(count);
  for (size_t i = 0; i < count; ++i) mine[i] = static_cast<float>(input_value(c->rank(), i));
  std::vector<float> reduced(count);
  std::vector<float> all(count * static_cast<size_t>(ranks));
  ASSERT_TRUE((*stream)->copy_from_host(**x, mine.data()).ok());
  ASSERT_TRUE(c->all_gather(**stream, **x, **gathered, DType::kF32).ok());
  ASSERT_TRUE(c->all_reduce(**stream, **x, **x, DType::kF32, ReduceOp::kSum).ok());
  ASSERT_TRUE((*stream)->copy_to_host(reduced.data(), **x).ok());
  ASSERT_TRUE((*stream)->copy_to_host(all.data(), **gathered).ok());
  ASSERT_TRUE((*stream)->synchronize().ok()) << (*stream)->status().to_string();
  for (size_t i = 0; i < count; ++i) {
    ASSERT_EQ(reduced[i], reduce_reference(ReduceOp::kSum, ranks, i)) << i;
    for (int r = 0; r < ranks; ++r) ASSERT_EQ(all[static_cast<size_t>(r) * count + i], input_value(r, i));
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, MpiStreams, ::testing::Values("cpu", "opencl"));

TEST(MpiFailures, AStragglerTimesTheOthersOutAndNobodyHangs) {
  auto c = fresh("straggler", std::chrono::milliseconds(300));
  const bool straggler = c->rank() == c->size() - 1;
  if (straggler) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  std::vector<float> x(16, 1.0f);
  const auto start = std::chrono::steady_clock::now();
  Status status = c->all_reduce(x.data(), x.data(), x.size(), DType::kF32, ReduceOp::kSum);
  if (!straggler) {
    // Timed out here, or (3 ranks) told by the other waiting rank that it timed out first.
    EXPECT_TRUE(status.code() == StatusCode::kDeadlineExceeded || status.code() == StatusCode::kAborted)
        << status.to_string();
    EXPECT_NE(status.to_string().find("not complete after 300 ms"), std::string::npos) << status.to_string();
    EXPECT_NE(status.to_string().find("AllReduce of 16 × f32 on mpi communicator 'straggler'"), std::string::npos)
        << status.to_string();
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  } else {
    // The others have given up by now and said so: the straggler fails naming one of them (or, had the
    // collective completed before the notices came, succeeds).
    if (!status.ok()) {
      EXPECT_EQ(status.code(), StatusCode::kAborted) << status.to_string();
      EXPECT_NE(status.to_string().find("failed"), std::string::npos) << status.to_string();
    }
  }
  if (!straggler) {
    EXPECT_FALSE(c->status().ok());
    EXPECT_FALSE(c->barrier().ok()) << "the communicator stays failed";
  }
  ASSERT_TRUE(g_world->barrier().ok()) << "the world is unaffected";
}

TEST(MpiFailures, ARankWhoseStreamFailsIsNamedByTheOthers) {
  hal::DriverRegistry registry;
  ASSERT_TRUE(hal::register_builtin_drivers(registry).ok());
  Result<std::unique_ptr<hal::Device>> device = registry.open("cpu");
  ASSERT_TRUE(device.ok());
  auto c = fresh("failing-rank", std::chrono::seconds(60));
  const int failing = c->size() - 1;
  auto stream = (*device)->create_stream({.name = "rank-stream"});
  ASSERT_TRUE(stream.ok());
  auto buffer = (*device)->allocate(64, hal::MemoryKind::kDevice);
  ASSERT_TRUE(buffer.ok());
  ASSERT_TRUE((*stream)->fill(**buffer, 0, 4).ok());
  std::atomic<bool> open{false};
  if (c->rank() == failing) {
    // A gate first, opened once the collective is queued, so that it is queued behind the failure rather than
    // refused at enqueue.
    ASSERT_TRUE((*stream)->host_task([&open](const hal::HostTaskContext&) {
                  while (!open.load()) std::this_thread::yield();
                  return ok_status();
                }).ok());
    ASSERT_TRUE((*stream)->host_task([](const hal::HostTaskContext&) { return internal_error("kernel blew up"); }).ok());
  }
  const auto start = std::chrono::steady_clock::now();
  const Status enqueued = c->all_reduce(**stream, **buffer, **buffer, DType::kF32, ReduceOp::kSum);
  open.store(true);
  ASSERT_TRUE(enqueued.ok());
  Status status = (*stream)->synchronize();
  ASSERT_FALSE(status.ok());
  if (c->rank() == failing) {
    EXPECT_NE(status.to_string().find("kernel blew up"), std::string::npos) << status.to_string();
  } else {
    EXPECT_EQ(status.code(), StatusCode::kAborted) << status.to_string();
    const std::string text = status.to_string();
    EXPECT_NE(text.find(fmt::format("rank {} failed", failing)), std::string::npos) << text;
    EXPECT_NE(text.find("kernel blew up"), std::string::npos) << text;
    EXPECT_NE(text.find("skipped AllReduce"), std::string::npos) << text;
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20)) << "long before the timeout";
  }
  ASSERT_TRUE(g_world->barrier().ok());
}

TEST(MpiFailures, BadArgumentsOnOneRankReachTheOthers) {
  auto c = fresh("bad-arguments", std::chrono::seconds(60));
  std::vector<float> x(8, 1.0f);
  // Rank 0 names a root that does not exist; the others wait for a broadcast that cannot happen.
  Status status = c->broadcast(x.data(), x.size(), DType::kF32, c->rank() == 0 ? 99 : 0);
  ASSERT_FALSE(status.ok());
  if (c->rank() == 0) {
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.to_string();
  } else {
    EXPECT_EQ(status.code(), StatusCode::kAborted) << status.to_string();
    EXPECT_NE(status.to_string().find("rank 0 failed"), std::string::npos) << status.to_string();
  }
  ASSERT_TRUE(g_world->barrier().ok());
}

}  // namespace
}  // namespace hxrt::comm
