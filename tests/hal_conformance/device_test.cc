// Conformance: devices, buffers, zero-copy host memory.
#include <cstring>

#include "hal_conformance/fixture.h"

namespace hxrt::hal::cts {

std::string backend_name(const testing::TestParamInfo<Backend>& info) { return info.param.name; }

namespace {

using DeviceConformance = HalConformance;

TEST_P(DeviceConformance, InfoIsConsistent) {
  const DeviceInfo& info = device_->info();
  EXPECT_FALSE(info.name.empty());
  EXPECT_GT(info.memory_bytes, 0u);
  EXPECT_GT(info.max_allocation_bytes, 0u);
  EXPECT_LE(info.max_allocation_bytes, info.memory_bytes);
  EXPECT_GT(info.compute_units, 0);
  EXPECT_GT(info.min_alignment, 0u);
  EXPECT_EQ(info.min_alignment & (info.min_alignment - 1), 0u) << "alignment must be a power of two";
  EXPECT_GT(info.timestamp_resolution_ns, 0.0);
}

TEST_P(DeviceConformance, AllocateEveryKindAndTrackStats) {
  const DeviceMemoryStats before = device_->memory_stats();
  {
    auto a = make_buffer(1000, MemoryKind::kDevice);
    auto b = make_buffer(4096, MemoryKind::kHostPinned);
    auto c = make_buffer(1, MemoryKind::kHostMapped);
    ASSERT_TRUE(a && b && c);
    EXPECT_EQ(a->size(), 1000u);
    EXPECT_EQ(b->kind(), MemoryKind::kHostPinned);
    EXPECT_EQ(&a->device(), device_.get());
    const DeviceMemoryStats during = device_->memory_stats();
    EXPECT_EQ(during.live_buffers, before.live_buffers + 3);
    EXPECT_GE(during.allocated_bytes, before.allocated_bytes + 5001);
  }
  EXPECT_EQ(device_->memory_stats().live_buffers, before.live_buffers);
  EXPECT_EQ(device_->memory_stats().allocated_bytes, before.allocated_bytes);
}

TEST_P(DeviceConformance, BadAllocationsReturnStatus) {
  EXPECT_EQ(device_->allocate(0, MemoryKind::kDevice).status().code(), StatusCode::kInvalidArgument);
  Result<std::unique_ptr<Buffer>> huge = device_->allocate(device_->info().max_allocation_bytes + 1, MemoryKind::kDevice);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), StatusCode::kOutOfMemory);
  EXPECT_EQ(device_->allocate(~uint64_t{0}, MemoryKind::kDevice).status().code(), StatusCode::kOutOfMemory);
}

TEST_P(DeviceConformance, MapWriteFlushThenReadBack) {
  auto stream = make_stream();
  auto buffer = make_buffer(64 * sizeof(float), MemoryKind::kHostMapped);
  Result<void*> mapped = buffer->map(0, buffer->size(), MapAccess::kWrite);
  if (!mapped.ok() && mapped.status().code() == StatusCode::kUnimplemented) GTEST_SKIP() << "no map on this backend";
  ASSERT_TRUE(mapped.ok()) << mapped.status().to_string();
  const std::vector<float> values = random_floats(64, 7);
  std::memcpy(*mapped, values.data(), buffer->size());
  ASSERT_TRUE(buffer->flush(0, buffer->size()).ok());
  ASSERT_TRUE(buffer->unmap(*mapped).ok());
  EXPECT_EQ(download(*stream, *buffer), values);

  // Device writes become visible to a mapping after invalidate.
  ASSERT_TRUE(increment(*stream, *buffer, 64).ok());
  ASSERT_TRUE(stream->synchronize().ok());
  Result<void*> again = buffer->map(0, buffer->size(), MapAccess::kRead);
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(buffer->invalidate(0, buffer->size()).ok());
  EXPECT_FLOAT_EQ(static_cast<float*>(*again)[5], values[5] + 1.0f);
  ASSERT_TRUE(buffer->unmap(*again).ok());
}

TEST_P(DeviceConformance, MapRangeChecks) {
  auto buffer = make_buffer(128);
  EXPECT_EQ(buffer->map(100, 29, MapAccess::kRead).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(buffer->flush(129, 0).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(buffer->invalidate(0, 1000).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(buffer->unmap(nullptr).code(), StatusCode::kInvalidArgument);
}

TEST_P(DeviceConformance, RegisterHostIsZeroCopy) {
  std::vector<float> host = random_floats(256, 3);
  Result<std::unique_ptr<Buffer>> registered = device_->register_host(host.data(), host.size() * sizeof(float));
  if (!device_->info().host_addressable) {
    EXPECT_EQ(registered.status().code(), StatusCode::kUnimplemented);
    return;
  }
  ASSERT_TRUE(registered.ok()) << registered.status().to_string();
  EXPECT_TRUE((*registered)->is_registered_host());
  EXPECT_EQ(device_->memory_stats().registered_buffers, 1u) << "a registration is counted, apart from allocations";
  auto stream = make_stream();
  const std::vector<float> expected = [&] {
    std::vector<float> e = host;
    for (float& v : e) v += 1.0f;
    return e;
  }();
  ASSERT_TRUE(increment(*stream, **registered, 256).ok());
  ASSERT_TRUE(stream->synchronize().ok());
  ASSERT_TRUE((*registered)->invalidate(0, (*registered)->size()).ok());
  EXPECT_EQ(host, expected) << "kernel wrote through to the caller's memory without a copy";
  registered->reset();
  EXPECT_EQ(device_->memory_stats().registered_buffers, 0u);
  EXPECT_EQ(device_->register_host(nullptr, 16).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(device_->register_host(host.data(), 0).status().code(), StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Backends, DeviceConformance, testing::ValuesIn(conformance_backends()), backend_name);

}  // namespace
}  // namespace hxrt::hal::cts
