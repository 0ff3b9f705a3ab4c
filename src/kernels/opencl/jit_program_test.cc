// The OpenCL prelude's functions against the CPU's: hx_exp must equal glibc's expf bit for bit (Note [Matching the
// CPU kernels] in jit_program.cc).
#include "kernels/opencl/jit_program.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/opencl/opencl_test_util.h"

namespace hxrt::kernels::opencl {
namespace {

constexpr std::string_view kExpSource = R"CLC(
__kernel void exp_values(__global const float* x, __global float* y, int n) {
  const int i = get_global_id(0);
  if (i < n) y[i] = hx_exp(x[i]);
}
)CLC";

// hx_exp of `x` on the first OpenCL device.
std::vector<float> device_exp(const std::vector<float>& x, const std::string& options) {
  std::unique_ptr<hal::Driver> driver = hal::make_opencl_driver({.disk_cache = false});
  std::unique_ptr<hal::Device> device = std::move(driver->open_device(0)).value();
  std::unique_ptr<hal::Stream> stream = std::move(device->create_stream()).value();
  const JitProgram program("hx_exp_test", kExpSource);
  const uint64_t bytes = x.size() * sizeof(float);
  std::unique_ptr<hal::Buffer> in = std::move(device->allocate(bytes, hal::MemoryKind::kDevice)).value();
  std::unique_ptr<hal::Buffer> out = std::move(device->allocate(bytes, hal::MemoryKind::kDevice)).value();
  std::vector<float> y(x.size());
  EXPECT_TRUE(stream->copy_from_host(*in, x.data()).ok());
  const hal::KernelArg args[] = {hal::KernelArg::buffer(*in), hal::KernelArg::buffer(*out),
                                 hal::KernelArg::scalar(static_cast<int32_t>(x.size()))};
  const Status launched =
      launch_kernel(*stream, program, "exp_values", options, launch_1d(static_cast<int64_t>(x.size()), 256), args);
  EXPECT_TRUE(launched.ok()) << launched.to_string();
  EXPECT_TRUE(stream->copy_to_host(y.data(), *out).ok());
  EXPECT_TRUE(stream->synchronize().ok());
  return y;
}

TEST(OpenClPreludeTest, ExpMatchesTheCpuLibmBitForBit) {
  HXRT_SKIP_WITHOUT_OPENCL();
  // Every 997th float of [-110, 95] (both signs, subnormal results, overflow), plus specials.
  std::vector<float> x;
  for (float v = -110.0f; v < 95.0f;) {
    x.push_back(v);
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    bits = v < 0.0f ? (bits > 997 + 0x80000000u ? bits - 997 : 0u) : bits + 997;
    std::memcpy(&v, &bits, 4);
  }
  for (float v : {0.0f, -0.0f, INFINITY, -INFINITY, 88.72283f, 88.72284f, -103.97207f, -103.97208f}) x.push_back(v);
  const std::vector<float> y = device_exp(x, "");
  size_t mismatches = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float expected = std::exp(x[i]);
    if (std::memcmp(&expected, &y[i], 4) != 0 && mismatches++ < 5) {
      ADD_FAILURE() << "hx_exp(" << x[i] << ") = " << y[i] << ", expf gives " << expected;
    }
  }
  EXPECT_EQ(mismatches, 0u) << "of " << x.size();
}

// The device keeps the modules a JitProgram builds (Device::shared_module), so a program — like the kernels of a
// registries bundle — may outlive the devices it ran on, and a device opened later (possibly at the address of a
// destroyed one) builds its own module instead of finding a stale one.
TEST(JitProgramTest, AProgramOutlivesTheDevicesItRanOn) {
  HXRT_SKIP_WITHOUT_OPENCL();
  const JitProgram program("jit_lifetime_test", R"CLC(
__kernel void fill(__global int* y, int value) { y[get_global_id(0)] = value; }
)CLC");
  std::unique_ptr<hal::Driver> driver = hal::make_opencl_driver({.disk_cache = false});
  for (int32_t round = 1; round <= 3; ++round) {
    std::unique_ptr<hal::Device> device = std::move(driver->open_device(0)).value();
    std::unique_ptr<hal::Stream> stream = std::move(device->create_stream()).value();
    std::unique_ptr<hal::Buffer> out = std::move(device->allocate(16 * sizeof(int32_t), hal::MemoryKind::kDevice)).value();
    Result<const hal::Kernel*> first = program.kernel(*device, "", "fill");
    ASSERT_TRUE(first.ok()) << first.status().to_string();
    Result<const hal::Kernel*> again = program.kernel(*device, "", "fill");
    ASSERT_TRUE(again.ok()) << again.status().to_string();
    EXPECT_EQ(*first, *again) << "one module per device and options";
    const hal::KernelArg args[] = {hal::KernelArg::buffer(*out), hal::KernelArg::scalar(round)};
    const Status launched = launch_kernel(*stream, program, "fill", "", launch_1d(16, 16), args);
    ASSERT_TRUE(launched.ok()) << launched.to_string();
    std::vector<int32_t> y(16);
    ASSERT_TRUE(stream->copy_to_host(y.data(), *out).ok());
    ASSERT_TRUE(stream->synchronize().ok());
    EXPECT_EQ(y, std::vector<int32_t>(16, round));
  }  // the device goes first; the program stays
}

}  // namespace
}  // namespace hxrt::kernels::opencl
