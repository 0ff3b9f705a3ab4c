#include "hxrt/hal/driver.h"

#include <gtest/gtest.h>

#include "hxrt/hal/cpu/cpu_driver.h"

namespace hxrt::hal {
namespace {

TEST(DriverRegistry, BuiltinsAndLookup) {
  DriverRegistry registry;
  ASSERT_TRUE(register_builtin_drivers(registry).ok());
  Result<Driver*> cpu = registry.find("cpu");
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ((*cpu)->kind(), DeviceKind::kCpu);
  EXPECT_TRUE((*cpu)->available().ok());

  Result<Driver*> missing = registry.find("tpu");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("cpu"), std::string_view::npos) << "lists registered drivers";

  EXPECT_EQ(registry.add(make_cpu_driver()).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(registry.add(nullptr).code(), StatusCode::kInvalidArgument);
}

TEST(DriverRegistry, OpenSpecs) {
  DriverRegistry registry;
  ASSERT_TRUE(register_builtin_drivers(registry).ok());
  EXPECT_TRUE(registry.open("cpu").ok());
  EXPECT_TRUE(registry.open("cpu:0").ok());
  EXPECT_EQ(registry.open("cpu:1").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(registry.open("cpu:x").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.open("cpu:-1").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.open("gpu:0").status().code(), StatusCode::kNotFound);
}

TEST(CpuDriver, DeviceInfo) {
  auto driver = make_cpu_driver(CpuDriverOptions{.num_threads = 3});
  Result<std::vector<DeviceInfo>> infos = driver->enumerate();
  ASSERT_TRUE(infos.ok());
  ASSERT_EQ(infos->size(), 1u);
  const DeviceInfo& info = (*infos)[0];
  EXPECT_EQ(info.kind, DeviceKind::kCpu);
  EXPECT_TRUE(info.host_addressable);
  EXPECT_TRUE(info.unified_memory);
  EXPECT_EQ(info.compute_units, 3);
  EXPECT_GT(info.memory_bytes, uint64_t{1} << 28);
  EXPECT_FALSE(info.name.empty());
}

}  // namespace
}  // namespace hxrt::hal
