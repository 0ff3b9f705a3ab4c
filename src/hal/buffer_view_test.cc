#include <gtest/gtest.h>

#include "hxrt/hal/cpu/cpu_driver.h"

namespace hxrt::hal {
namespace {

TEST(BufferView, ValidityAndSubviews) {
  auto driver = make_cpu_driver();
  auto device = std::move(driver->open_device(0)).value();
  auto buffer = std::move(device->allocate(256, MemoryKind::kDevice)).value();
  BufferView whole(*buffer);
  EXPECT_TRUE(whole.valid());
  EXPECT_EQ(whole.size, 256u);
  BufferView part = whole.subview(64, 32);
  EXPECT_EQ(part.offset, 64u);
  EXPECT_EQ(static_cast<char*>(part.host_address()) - static_cast<char*>(buffer->host_address()), 64);
  EXPECT_FALSE(BufferView(buffer.get(), 200, 100).valid());
  EXPECT_FALSE(BufferView().valid());
  EXPECT_EQ(BufferView().host_address(), nullptr);
}

TEST(BufferViewDeathTest, SubviewOutOfRangeAborts) {
  auto driver = make_cpu_driver();
  auto device = std::move(driver->open_device(0)).value();
  auto buffer = std::move(device->allocate(64, MemoryKind::kDevice)).value();
  BufferView whole(*buffer);
  EXPECT_DEATH((void)whole.subview(60, 8), "subview");
}

}  // namespace
}  // namespace hxrt::hal
