#include "hxrt/base/shape.h"

#include <gtest/gtest.h>

#include <vector>

namespace hxrt {
namespace {

TEST(Shape, BasicsAndStrides) {
  Shape s{2, 3, 4};
  EXPECT_EQ(s.rank(), 3);
  EXPECT_EQ(s.num_elements(), 24);
  EXPECT_EQ(s.dim(-1), 4);
  EXPECT_EQ(s.strides()[0], 12);
  EXPECT_EQ(s.strides()[1], 4);
  EXPECT_EQ(s.strides()[2], 1);
  EXPECT_EQ(s.to_string(), "[2, 3, 4]");
  EXPECT_EQ(fmt::format("{}", s), "[2, 3, 4]");
  EXPECT_EQ(Shape().num_elements(), 1);
  EXPECT_EQ((Shape{2, 0}).num_elements(), 0);
  EXPECT_EQ(s, (Shape{2, 3, 4}));
  EXPECT_FALSE(s == (Shape{2, 3}));
}

TEST(Shape, MakeRejectsBadInput) {
  std::vector<int64_t> negative{2, -1};
  EXPECT_EQ(Shape::make(negative).status().code(), StatusCode::kInvalidArgument);
  std::vector<int64_t> deep(9, 1);
  EXPECT_EQ(Shape::make(deep).status().code(), StatusCode::kInvalidArgument);
  std::vector<int64_t> huge{int64_t{1} << 40, int64_t{1} << 40};
  EXPECT_EQ(Shape::make(huge).status().code(), StatusCode::kOutOfRange);
}

TEST(ShapeDeathTest, AxisOutOfRangeAborts) {
  Shape s{2, 3};
  EXPECT_DEATH((void)s.dim(2), "axis 2 out of range");
}

}  // namespace
}  // namespace hxrt
