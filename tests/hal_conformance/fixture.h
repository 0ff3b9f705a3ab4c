// Shared fixture of the HAL conformance tests: a device, its test kernels, and helpers.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <random>
#include <vector>

#include "hal_conformance/conformance.h"
#include "hxrt/hal/device.h"

namespace hxrt::hal::cts {

using std::chrono::milliseconds;

class HalConformance : public testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    Result<std::unique_ptr<Device>> device = GetParam().open();
    if (!device.ok() && device.status().code() == StatusCode::kUnavailable) {
      GTEST_SKIP() << GetParam().name << " unavailable: " << device.status().to_string();
    }
    ASSERT_TRUE(device.ok()) << device.status().to_string();
    device_ = std::move(device).value();
    Result<std::unique_ptr<TestKernels>> kernels = GetParam().make_kernels(*device_);
    ASSERT_TRUE(kernels.ok()) << kernels.status().to_string();
    kernels_ = std::move(kernels).value();
  }

  std::unique_ptr<Stream> make_stream(const std::string& name = "") {
    Result<std::unique_ptr<Stream>> stream = device_->create_stream(StreamOptions{.name = name});
    EXPECT_TRUE(stream.ok()) << stream.status().to_string();
    return stream.ok() ? std::move(stream).value() : nullptr;
  }
  std::unique_ptr<Event> make_event() {
    Result<std::unique_ptr<Event>> event = device_->create_event();
    EXPECT_TRUE(event.ok()) << event.status().to_string();
    return event.ok() ? std::move(event).value() : nullptr;
  }
  std::unique_ptr<Buffer> make_buffer(uint64_t bytes, MemoryKind kind = MemoryKind::kDevice) {
    Result<std::unique_ptr<Buffer>> buffer = device_->allocate(bytes, kind);
    EXPECT_TRUE(buffer.ok()) << buffer.status().to_string();
    return buffer.ok() ? std::move(buffer).value() : nullptr;
  }

  Status increment(Stream& stream, Buffer& buffer, uint32_t count) {
    const KernelArg args[] = {KernelArg::buffer(BufferView(buffer)), KernelArg::scalar(count)};
    return stream.launch(*kernels_->increment(), LaunchConfig{}, args);
  }
  Status spin(Stream& stream, std::chrono::microseconds duration) {
    const KernelArg args[] = {KernelArg::scalar(static_cast<uint64_t>(duration.count()))};
    return stream.launch(*kernels_->spin(), LaunchConfig{}, args);
  }

  // Uploads `values` to a new buffer and waits.
  std::unique_ptr<Buffer> upload(Stream& stream, const std::vector<float>& values) {
    auto buffer = make_buffer(values.size() * sizeof(float));
    EXPECT_TRUE(stream.copy_from_host(*buffer, values.data()).ok());
    EXPECT_TRUE(stream.synchronize().ok());
    return buffer;
  }
  std::vector<float> download(Stream& stream, Buffer& buffer) {
    std::vector<float> out(buffer.size() / sizeof(float), -1.0f);
    Status copied = stream.copy_to_host(out.data(), buffer);
    EXPECT_TRUE(copied.ok()) << copied.to_string();
    Status synced = stream.synchronize();
    EXPECT_TRUE(synced.ok()) << synced.to_string();
    return out;
  }
  static std::vector<float> random_floats(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-100.0f, 100.0f);
    std::vector<float> values(n);
    for (float& v : values) v = dist(rng);
    return values;
  }

  // Member order matters: kernels and device outlive the streams tests create locally.
  std::unique_ptr<Device> device_;
  std::unique_ptr<TestKernels> kernels_;
};

std::string backend_name(const testing::TestParamInfo<Backend>& info);

}  // namespace hxrt::hal::cts
