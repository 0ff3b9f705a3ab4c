// OpenCL device, buffers and streams beyond the conformance suite: device info, CL error mapping, sub-buffer
// arguments, device timestamps, kernel-reported status.
#include <thread>

#include "hal/opencl/cl_common.h"
#include "hal/opencl/opencl_device.h"
#include "hal/opencl/opencl_test_util.h"

namespace hxrt::hal::opencl {
namespace {

constexpr const char* kKernels = R"CLC(
__kernel void add(__global float* data, float value, uint count) {
  for (uint i = get_global_id(0); i < count; i += get_global_size(0)) data[i] += value;
}
__kernel void report(int code, __global volatile int* ctl) { ctl[1] = code; }
)CLC";

TEST(ClError, MapsCodesAndKeepsNames) {
  const Status oom = cl_status(CL_OUT_OF_RESOURCES, "clEnqueueNDRangeKernel");
  EXPECT_EQ(oom.code(), StatusCode::kOutOfMemory);
  EXPECT_NE(oom.message().find("CL_OUT_OF_RESOURCES"), std::string_view::npos);
  EXPECT_NE(oom.message().find("clEnqueueNDRangeKernel"), std::string_view::npos);
  EXPECT_EQ(cl_status_code(CL_MEM_OBJECT_ALLOCATION_FAILURE), StatusCode::kOutOfMemory);
  EXPECT_EQ(cl_status_code(CL_INVALID_KERNEL_ARGS), StatusCode::kInvalidArgument);
  EXPECT_EQ(cl_status_code(CL_INVALID_VALUE), StatusCode::kInvalidArgument);
  EXPECT_EQ(cl_status_code(CL_BUILD_PROGRAM_FAILURE), StatusCode::kInvalidArgument);
  EXPECT_EQ(cl_status_code(CL_DEVICE_NOT_FOUND), StatusCode::kUnavailable);
  EXPECT_EQ(cl_status_code(-1001), StatusCode::kUnavailable);
  EXPECT_EQ(cl_error_name(-1001), "CL_PLATFORM_NOT_FOUND_KHR");
  EXPECT_EQ(cl_status_code(-9999), StatusCode::kInternal);
  EXPECT_EQ(cl_error_name(-9999), "CL_ERROR(-9999)");
  EXPECT_TRUE(cl_status(CL_SUCCESS, "x").ok());
}

using OpenClDeviceTest = OpenClTest;

TEST_F(OpenClDeviceTest, InfoFromTheDevice) {
  const DeviceInfo& info = device_->info();
  EXPECT_EQ(info.kind, DeviceKind::kOpenCL);
  EXPECT_FALSE(info.vendor.empty());
  EXPECT_FALSE(info.driver_version.empty());
  EXPECT_GE(info.min_alignment, 4u);
  EXPECT_FALSE(info.features.empty()) << "extensions are reported as features";
  EXPECT_EQ(info.supports_fp16,
            std::find(info.features.begin(), info.features.end(), "cl_khr_fp16") != info.features.end());
  Result<std::vector<DeviceInfo>> all = driver_->enumerate();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ((*all)[0].name, info.name);
  EXPECT_EQ(driver_->open_device(1000).status().code(), StatusCode::kNotFound);
}

TEST_F(OpenClDeviceTest, SubBufferArgumentsHonourTheViewOffset) {
  auto module = load("k", kKernels);
  ASSERT_TRUE(module);
  const Kernel* add = *module->kernel("add");
  const uint32_t alignment = device_->info().min_alignment;
  const uint64_t floats_per_block = alignment / sizeof(float);
  auto buffer = take(device_->allocate(4 * alignment, MemoryKind::kDevice));
  auto stream = take(device_->create_stream());
  ASSERT_TRUE(stream->fill(*buffer, 0, 4).ok());
  // Views at block 1 (first half of it) and at block 2 (all of it, plus block 3), each with its own value.
  const BufferView first(buffer.get(), alignment, alignment / 2);
  const BufferView second(buffer.get(), 2 * alignment, 2 * alignment);
  const KernelArg args2[] = {KernelArg::buffer(second), KernelArg::scalar(2.0f),
                             KernelArg::scalar(static_cast<uint32_t>(2 * floats_per_block))};
  const KernelArg args1[] = {KernelArg::buffer(first), KernelArg::scalar(1.0f),
                             KernelArg::scalar(static_cast<uint32_t>(floats_per_block / 2))};
  ASSERT_TRUE(stream->launch(*add, LaunchConfig{.grid = {2, 1, 1}, .block = {8, 1, 1}}, args1).ok());
  ASSERT_TRUE(stream->launch(*add, LaunchConfig{.grid = {2, 1, 1}, .block = {8, 1, 1}}, args2).ok());
  // Launching the same view twice reuses the cached sub-buffer.
  ASSERT_TRUE(stream->launch(*add, LaunchConfig{}, args2).ok());
  std::vector<float> out(4 * floats_per_block, -1.0f);
  ASSERT_TRUE(stream->copy_to_host(out.data(), *buffer).ok());
  ASSERT_TRUE(stream->synchronize().ok());
  for (uint64_t i = 0; i < out.size(); ++i) {
    float expected = 0.0f;
    if (i >= floats_per_block && i < floats_per_block + floats_per_block / 2) expected = 1.0f;
    if (i >= 2 * floats_per_block) expected = 4.0f;
    ASSERT_EQ(out[i], expected) << "float " << i;
  }
  // An offset that is not a multiple of the base alignment cannot become a sub-buffer.
  const KernelArg misaligned[] = {KernelArg::buffer(BufferView(buffer.get(), 4, 16)), KernelArg::scalar(1.0f),
                                  KernelArg::scalar(uint32_t{4})};
  Status rejected = stream->launch(*add, LaunchConfig{}, misaligned);
  EXPECT_EQ(rejected.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(rejected.message().find("alignment"), std::string_view::npos) << rejected.to_string();
  EXPECT_TRUE(stream->status().ok());
}

TEST_F(OpenClDeviceTest, TimestampsAreMonotoneAndCloseToHostTime) {
  const auto& cl_device = dynamic_cast<const OpenClDevice&>(*device_);
  std::printf("device timestamps: %s, calibration error bound %lld ns\n",
              cl_device.device_timestamps() ? "yes" : "no (host time)",
              static_cast<long long>(cl_device.clock_error_ns()));
  // The bound depends on how busy the machine was at open (Note [Device clock]); the checks below use it.
  EXPECT_GT(cl_device.clock_error_ns(), 0);
  const int64_t slack = cl_device.clock_error_ns() + 1'000'000;
  auto stream = take(device_->create_stream());
  constexpr int kEvents = 20;
  std::vector<std::unique_ptr<Event>> events;
  std::vector<int64_t> before(kEvents);
  std::vector<int64_t> after(kEvents);
  for (int i = 0; i < kEvents; ++i) {
    events.push_back(take(device_->create_event()));
    before[static_cast<size_t>(i)] = host_now_ns();
    ASSERT_TRUE(stream->record(*events.back()).ok());
    ASSERT_TRUE(events.back()->synchronize(std::chrono::seconds(10)).ok());
    after[static_cast<size_t>(i)] = host_now_ns();
    if (i % 5 == 4) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  int64_t previous = 0;
  for (int i = 0; i < kEvents; ++i) {
    const int64_t t = *events[static_cast<size_t>(i)]->timestamp_ns();
    EXPECT_GE(t, previous) << "event " << i;
    previous = t;
    // Recorded after `before` and completed before `after`, within the calibration's error bound (+ 1 ms).
    EXPECT_GE(t, before[static_cast<size_t>(i)] - slack) << "event " << i;
    EXPECT_LE(t, after[static_cast<size_t>(i)] + slack - 1'000'000) << "event " << i;
  }
  Result<Duration> span = events.back()->elapsed_since(*events.front());
  ASSERT_TRUE(span.ok());
  EXPECT_GE(*span, std::chrono::milliseconds(6)) << "three 2 ms sleeps between the first and last record";
}

TEST_F(OpenClDeviceTest, KernelReportedStatusFailsTheStream) {
  auto module = load("k", kKernels);
  ASSERT_TRUE(module);
  const Kernel* report = *module->kernel("report");
  auto stream = take(device_->create_stream(StreamOptions{.name = "reporting"}));
  const KernelArg ok_args[] = {KernelArg::scalar(int32_t{0})};
  ASSERT_TRUE(stream->launch(*report, LaunchConfig{}, ok_args).ok());
  ASSERT_TRUE(stream->synchronize().ok());
  const KernelArg oom_args[] = {KernelArg::scalar(static_cast<int32_t>(StatusCode::kOutOfMemory))};
  ASSERT_TRUE(stream->launch(*report, LaunchConfig{}, oom_args).ok());
  Status failed = stream->synchronize();
  EXPECT_EQ(failed.code(), StatusCode::kOutOfMemory) << failed.to_string();
  EXPECT_NE(failed.to_string().find("k.report"), std::string::npos) << failed.to_string();
  ASSERT_TRUE(stream->reset().ok());
  ASSERT_TRUE(stream->launch(*report, LaunchConfig{}, ok_args).ok());
  EXPECT_TRUE(stream->synchronize().ok()) << "the status word is cleared before every launch";
}

TEST_F(OpenClDeviceTest, HostMemoryKindsAreZeroCopyOnUnifiedDevices) {
  if (!device_->info().host_addressable) GTEST_SKIP() << "device is not host-unified";
  auto pinned = take(device_->allocate(256, MemoryKind::kHostPinned));
  ASSERT_NE(pinned->host_address(), nullptr);
  auto device_only = take(device_->allocate(256, MemoryKind::kDevice));
  EXPECT_EQ(device_only->host_address(), nullptr);
  EXPECT_NE(device_only->native_handle(), 0u);
  // map() of device memory goes through clEnqueueMapBuffer and back.
  Result<void*> mapped = device_only->map(128, 64, MapAccess::kWrite);
  ASSERT_TRUE(mapped.ok()) << mapped.status().to_string();
  std::memset(*mapped, 0x5A, 64);
  ASSERT_TRUE(device_only->flush(128, 64).ok());
  ASSERT_TRUE(device_only->unmap(*mapped).ok());
  EXPECT_EQ(device_only->unmap(*mapped).code(), StatusCode::kInvalidArgument) << "already unmapped";
  auto stream = take(device_->create_stream());
  ASSERT_TRUE(stream->copy(BufferView(pinned.get(), 0, 64), BufferView(device_only.get(), 128, 64)).ok());
  ASSERT_TRUE(stream->synchronize().ok());
  ASSERT_TRUE(pinned->invalidate(0, 64).ok());
  const auto* bytes = static_cast<const unsigned char*>(pinned->host_address());
  for (int i = 0; i < 64; ++i) ASSERT_EQ(bytes[i], 0x5A);
}

}  // namespace
}  // namespace hxrt::hal::opencl
