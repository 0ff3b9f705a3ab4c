#include "hxrt/graph/attribute.h"

#include <gtest/gtest.h>

namespace hxrt::graph {
namespace {

AttributeMap sample() {
  AttributeMap m;
  m.set("axis", 1);
  m.set("epsilon", 1e-5);
  m.set("mode", "tanh");
  m.set("keepdims", true);
  m.set("flag01", int64_t{0});
  m.set("pads", std::vector<int64_t>{1, 1, 2, 2});
  m.set("scales", std::vector<double>{0.5, 2.0});
  m.set("names", std::vector<std::string>{"a", "b"});
  m.set("table", TensorValue{DType::kF32, Shape{2, 3}, std::vector<std::byte>(24, std::byte{1})});
  return m;
}

TEST(Attribute, TypesAndToString) {
  EXPECT_EQ(Attribute(3).type(), AttrType::kInt);
  EXPECT_EQ(Attribute(1.5f).type(), AttrType::kFloat);
  EXPECT_EQ(Attribute("x").type(), AttrType::kString);
  EXPECT_EQ(Attribute(true).type(), AttrType::kBool);
  EXPECT_EQ(Attribute(3).to_string(), "3");
  EXPECT_EQ(Attribute(1e-5).to_string(), "1e-05");
  EXPECT_EQ(Attribute("tanh").to_string(), "\"tanh\"");
  EXPECT_EQ(Attribute(std::vector<int64_t>{1, 1, 2, 2}).to_string(), "[1, 1, 2, 2]");
  EXPECT_EQ(Attribute(std::vector<std::string>{"a", "b"}).to_string(), "[\"a\", \"b\"]");
  EXPECT_EQ(sample().find("table")->to_string(), "tensor f32[2, 3]");
  EXPECT_EQ(attr_type_name(AttrType::kFloats), "floats");
}

TEST(AttributeMap, TypedGetters) {
  const AttributeMap m = sample();
  EXPECT_EQ(*m.get_int("axis"), 1);
  EXPECT_DOUBLE_EQ(*m.get_float("epsilon"), 1e-5);
  EXPECT_DOUBLE_EQ(*m.get_float("axis"), 1.0);  // int converts
  EXPECT_EQ(*m.get_string("mode"), "tanh");
  EXPECT_TRUE(*m.get_bool("keepdims"));
  EXPECT_TRUE(*m.get_bool("axis"));  // int 1 converts
  EXPECT_FALSE(*m.get_bool("flag01"));
  EXPECT_EQ(*m.get_ints("pads"), (std::vector<int64_t>{1, 1, 2, 2}));
  EXPECT_EQ(*m.get_floats("scales"), (std::vector<double>{0.5, 2.0}));
  EXPECT_EQ(*m.get_strings("names"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(m.get_tensor("table")->shape, (Shape{2, 3}));
  EXPECT_EQ(m.size(), 9u);
}

TEST(AttributeMap, ErrorsNameAttributeAndTypes) {
  const AttributeMap m = sample();
  Status missing = m.get_int("nope").status();
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_NE(missing.message().find("'nope'"), std::string_view::npos);

  AttributeMap s;
  s.set("axis", "x");
  Status mistyped = s.get_int("axis").status();
  EXPECT_EQ(mistyped.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(mistyped.message(), "attribute 'axis' is a string, expected int");

  EXPECT_EQ(m.get_int("epsilon").status().code(), StatusCode::kInvalidArgument);  // no float -> int
  EXPECT_EQ(m.get_string("axis").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.get_ints("axis").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.get_floats("pads").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.get_strings("mode").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.get_tensor("pads").status().code(), StatusCode::kInvalidArgument);

  AttributeMap two;
  two.set("b", 2);
  Status not_bool = two.get_bool("b").status();
  EXPECT_EQ(not_bool.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(not_bool.message().find("'b'"), std::string_view::npos);
  EXPECT_EQ(two.get_float("b", 0.0).value(), 2.0);
}

TEST(AttributeMap, Fallbacks) {
  const AttributeMap m = sample();
  EXPECT_EQ(*m.get_int("missing", 7), 7);
  EXPECT_EQ(*m.get_int("axis", 7), 1);
  EXPECT_DOUBLE_EQ(*m.get_float("missing", 0.25), 0.25);
  EXPECT_EQ(*m.get_string("missing", "gelu"), "gelu");
  EXPECT_FALSE(*m.get_bool("missing", false));
  EXPECT_EQ(*m.get_ints("missing", {3}), (std::vector<int64_t>{3}));
  // Present but mistyped is still an error.
  EXPECT_EQ(m.get_int("mode", 7).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m.get_string("axis", "x").status().code(), StatusCode::kInvalidArgument);
}

TEST(AttributeMap, SetEraseAndToString) {
  AttributeMap m;
  m.set("epsilon", 1e-5);
  m.set("axis", 1);
  EXPECT_EQ(m.to_string(), "{axis=1, epsilon=1e-05}");
  m.set("axis", 2);
  EXPECT_EQ(*m.get_int("axis"), 2);
  EXPECT_TRUE(m.erase("axis"));
  EXPECT_FALSE(m.erase("axis"));
  EXPECT_FALSE(m.has("axis"));
  EXPECT_EQ(m.find("axis"), nullptr);
  EXPECT_EQ(AttributeMap().to_string(), "{}");
  EXPECT_EQ(sample(), sample());
}

}  // namespace
}  // namespace hxrt::graph
