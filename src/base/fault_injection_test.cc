#include "hxrt/base/fault_injection.h"

#include <gtest/gtest.h>

namespace hxrt::fault {
namespace {

Status reach(Site site) {
  return check(site, [] { return std::string("a test resource"); });
}

class FaultInjectionTest : public ::testing::Test {
 protected:
  void TearDown() override { disarm(); }
};

TEST_F(FaultInjectionTest, DisarmedSitesPassAndAreNotCounted) {
  EXPECT_TRUE(reach(Site::kDeviceAlloc).ok());
  arm(Plan{.fail_at = 1});
  disarm();
  EXPECT_TRUE(reach(Site::kDeviceAlloc).ok());
  EXPECT_EQ(reached(), 0u);
}

TEST_F(FaultInjectionTest, FailsExactlyTheKthSelectedSite) {
  arm(Plan{.fail_at = 3});
  EXPECT_TRUE(reach(Site::kStreamCreate).ok());
  EXPECT_TRUE(reach(Site::kFileOpen).ok());
  const Status third = reach(Site::kDeviceAlloc);
  EXPECT_EQ(third.code(), StatusCode::kOutOfMemory);
  EXPECT_NE(third.message().find("injected fault at device allocation #3 (a test resource)"), std::string::npos)
      << third.to_string();
  EXPECT_TRUE(reach(Site::kDeviceAlloc).ok());
  EXPECT_EQ(reached(), 4u);
  EXPECT_EQ(injected(), 1u);
}

TEST_F(FaultInjectionTest, KeepFailingFailsEverySiteFromTheKth) {
  arm(Plan{.fail_at = 2, .keep_failing = true});
  EXPECT_TRUE(reach(Site::kEventCreate).ok());
  EXPECT_EQ(reach(Site::kEventCreate).code(), StatusCode::kUnavailable);
  EXPECT_EQ(reach(Site::kFileMap).code(), StatusCode::kUnavailable);
  EXPECT_EQ(injected(), 2u);
}

TEST_F(FaultInjectionTest, OnlySelectedKindsCountAndFail) {
  arm(Plan{.fail_at = 1, .sites = site_bit(Site::kFileRead)});
  EXPECT_TRUE(reach(Site::kDeviceAlloc).ok());
  EXPECT_EQ(reached(), 0u);
  EXPECT_FALSE(reach(Site::kFileRead).ok());
  EXPECT_EQ(reached(), 1u);
}

TEST_F(FaultInjectionTest, ReachedLocationsNameTheSiteAndTheLine) {
  arm(Plan{.fail_at = 100});
  reach(Site::kHostRegister).ignore();
  bool found = false;
  for (const ReachedLocation& location : reached_locations()) {
    if (location.site == Site::kHostRegister && location.location.rfind("fault_injection_test.cc:", 0) == 0) {
      found = true;
    }
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace hxrt::fault
