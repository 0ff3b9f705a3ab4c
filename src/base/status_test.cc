#include "hxrt/base/status.h"

#include <gtest/gtest.h>

namespace hxrt {
namespace {

Status fails_with_context() {
  HXRT_RETURN_IF_ERROR_CTX(invalid_argument("bad dim {}", 3), "parsing node '{}'", "conv1");
  return ok_status();
}

Result<int> half(int x) {
  if (x % 2 != 0) return invalid_argument("{} is odd", x);
  return x / 2;
}

Result<int> quarter(int x) {
  HXRT_ASSIGN_OR_RETURN(int h, half(x));
  HXRT_ASSIGN_OR_RETURN(int q, half(h));
  return q;
}

TEST(Status, OkIsCheapAndEmpty) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.to_string(), "OK");
  EXPECT_TRUE(s.context().empty());
  EXPECT_TRUE(s.with_context("ignored").context().empty());
}

TEST(Status, CodeMessageAndContextChain) {
  Status s = fails_with_context();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "bad dim 3");
  ASSERT_EQ(s.context().size(), 1u);
  s.with_context("loading model");
  EXPECT_EQ(s.to_string(), "INVALID_ARGUMENT: bad dim 3\n  while parsing node 'conv1'\n  while loading model");
}

TEST(Status, CopyIsDeep) {
  Status a = out_of_memory("pool empty");
  Status b = a;
  b.with_context("extra");
  EXPECT_TRUE(a.context().empty());
  EXPECT_EQ(b.context().size(), 1u);
  Status c;
  c = b;
  EXPECT_EQ(c.to_string(), b.to_string());
}

TEST(Status, EveryCodeHasAName) {
  for (int code = 0; code <= static_cast<int>(StatusCode::kInternal); ++code) {
    EXPECT_NE(status_code_name(static_cast<StatusCode>(code)), "UNKNOWN") << code;
  }
  EXPECT_EQ(status_code_name(StatusCode::kDeadlineExceeded), "DEADLINE_EXCEEDED");
}

TEST(Result, ValueOrStatusAndAssignOrReturn) {
  Result<int> q = quarter(12);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(*q, 3);
  Result<int> bad = quarter(6);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "3 is odd");
}

TEST(Result, OkStatusWithoutValueBecomesInternal) {
  Result<int> r{Status()};
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}

TEST(ResultDeathTest, ValueOfFailedResultAborts) {
  Result<int> r = invalid_argument("nope");
  EXPECT_DEATH((void)r.value(), "value\\(\\) of a failed Result: INVALID_ARGUMENT: nope");
}

}  // namespace
}  // namespace hxrt
