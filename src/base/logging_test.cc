#include "hxrt/base/logging.h"

#include <gtest/gtest.h>

namespace hxrt {
namespace {

TEST(Logging, ParseLevels) {
  LogLevel level = LogLevel::kWarn;
  EXPECT_TRUE(parse_log_level("DEBUG", &level));
  EXPECT_EQ(level, LogLevel::kDebug);
  EXPECT_TRUE(parse_log_level("0", &level));
  EXPECT_EQ(level, LogLevel::kError);
  EXPECT_FALSE(parse_log_level("loud", &level));
  EXPECT_EQ(level, LogLevel::kError);
}

TEST(Logging, LevelGatesFormattingAndOutput) {
  const LogLevel saved = log_level();
  int formatted = 0;
  auto count = [&] { return ++formatted; };
  set_log_level(LogLevel::kError);
  testing::internal::CaptureStderr();
  HXRT_LOG(kInfo, "hidden {}", count());
  HXRT_LOG(kError, "shown {}", count());
  const std::string out = testing::internal::GetCapturedStderr();
  set_log_level(saved);
  EXPECT_EQ(formatted, 1);
  EXPECT_EQ(out.find("hidden"), std::string::npos);
  EXPECT_NE(out.find("shown 1"), std::string::npos);
  EXPECT_NE(out.find("hxrt E "), std::string::npos);
  EXPECT_NE(out.find("logging_test.cc:"), std::string::npos);
}

}  // namespace
}  // namespace hxrt
