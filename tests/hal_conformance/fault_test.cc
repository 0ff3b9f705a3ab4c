// Conformance: every HAL resource site fails cleanly under fault injection (hxrt/base/fault_injection.h) — a
// Status naming the site, nothing leaked, and the device fully usable afterwards.
#include "hal_conformance/fixture.h"
#include "hxrt/base/fault_injection.h"

namespace hxrt::hal::cts {
namespace {

class FaultConformance : public HalConformance {
 protected:
  void TearDown() override { fault::disarm(); }

  void expect_injected(const Status& status, fault::Site site) {
    ASSERT_FALSE(status.ok()) << fault::site_name(site) << " was not failed";
    EXPECT_NE(status.message().find(fmt::format("injected fault at {}", fault::site_name(site))), std::string::npos)
        << status.to_string();
  }
};

TEST_P(FaultConformance, EveryResourceSiteFailsCleanlyAndTheDeviceRecovers) {
  const DeviceMemoryStats before = device_->memory_stats();
  for (const MemoryKind kind : {MemoryKind::kDevice, MemoryKind::kHostPinned, MemoryKind::kHostMapped}) {
    fault::arm(fault::Plan{.fail_at = 1});
    Result<std::unique_ptr<Buffer>> buffer = device_->allocate(4096, kind);
    const fault::Site site = kind == MemoryKind::kDevice       ? fault::Site::kDeviceAlloc
                             : kind == MemoryKind::kHostPinned ? fault::Site::kHostPinnedAlloc
                                                               : fault::Site::kHostMappedAlloc;
    expect_injected(buffer.status(), site);
    EXPECT_EQ(buffer.status().code(), StatusCode::kOutOfMemory);
  }
  fault::arm(fault::Plan{.fail_at = 1});
  expect_injected(device_->create_stream(StreamOptions{.name = "faulty"}).status(), fault::Site::kStreamCreate);
  fault::arm(fault::Plan{.fail_at = 1});
  expect_injected(device_->create_event().status(), fault::Site::kEventCreate);
  if (device_->info().host_addressable) {
    std::vector<float> host(256, 1.0f);
    fault::arm(fault::Plan{.fail_at = 1});
    expect_injected(device_->register_host(host.data(), host.size() * sizeof(float)).status(),
                    fault::Site::kHostRegister);
  }
  fault::disarm();
  EXPECT_EQ(device_->memory_stats().live_buffers, before.live_buffers);
  EXPECT_EQ(device_->memory_stats().allocated_bytes, before.allocated_bytes);

  // The same device still does everything.
  auto stream = make_stream("after");
  ASSERT_TRUE(stream);
  auto event = make_event();
  const std::vector<float> values = random_floats(64, 3);
  auto buffer = upload(*stream, values);
  ASSERT_TRUE(increment(*stream, *buffer, 64).ok());
  ASSERT_TRUE(stream->record(*event).ok());
  ASSERT_TRUE(event->synchronize().ok());
  const std::vector<float> out = download(*stream, *buffer);
  for (size_t i = 0; i < values.size(); ++i) ASSERT_EQ(out[i], values[i] + 1.0f) << i;
}

TEST_P(FaultConformance, FailingTheKthSiteOfAWorkloadNeverCrashesAndLeavesNothingBehind) {
  // A small workload that touches several sites: stream, event, buffers of each kind. Fail its k-th site for every
  // k until a run completes without a fault.
  const DeviceMemoryStats before = device_->memory_stats();
  auto workload = [&]() -> Status {
    HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Stream> stream, device_->create_stream(StreamOptions{.name = "work"}));
    HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Event> event, device_->create_event());
    HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Buffer> data, device_->allocate(64 * sizeof(float), MemoryKind::kDevice));
    HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Buffer> staging,
                          device_->allocate(64 * sizeof(float), MemoryKind::kHostPinned));
    HXRT_RETURN_IF_ERROR(stream->fill(BufferView(*data), 0, 4));
    HXRT_RETURN_IF_ERROR(increment(*stream, *data, 64));
    HXRT_RETURN_IF_ERROR(stream->copy(BufferView(*staging), BufferView(*data)));
    HXRT_RETURN_IF_ERROR(stream->record(*event));
    HXRT_RETURN_IF_ERROR(event->synchronize());
    return stream->synchronize();
  };
  int faults = 0;
  for (uint64_t k = 1; k < 64; ++k) {
    fault::arm(fault::Plan{.fail_at = k});
    const Status status = workload();
    const bool fired = fault::injected() > 0;
    fault::disarm();
    if (!fired) {
      EXPECT_TRUE(status.ok()) << status.to_string();
      break;
    }
    ++faults;
    ASSERT_FALSE(status.ok()) << "fault " << k << " was swallowed";
    EXPECT_NE(status.message().find("injected fault"), std::string::npos) << status.to_string();
    EXPECT_EQ(device_->memory_stats().live_buffers, before.live_buffers) << "after fault " << k;
  }
  EXPECT_GE(faults, 4);  // stream, event and two buffers at least
}

INSTANTIATE_TEST_SUITE_P(Backends, FaultConformance, testing::ValuesIn(conformance_backends()), backend_name);

}  // namespace
}  // namespace hxrt::hal::cts
