#include "hxrt/graph/dim.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hxrt::graph {
namespace {

const Dim kN = Dim::symbol("n");
const Dim kPast = Dim::symbol("past");

TEST(Dim, StaticArithmeticFolds) {
  EXPECT_TRUE((Dim(3) + Dim(4)).is_static());
  EXPECT_EQ((Dim(3) + Dim(4)).value(), 7);
  EXPECT_EQ((Dim(10) - Dim(4)).value(), 6);
  EXPECT_EQ((Dim(6) * Dim(7)).value(), 42);
  EXPECT_EQ((Dim(7) / Dim(2)).value(), 3);
  EXPECT_EQ(Dim().value(), 0);
  EXPECT_EQ(Dim(5).to_string(), "5");
}

TEST(Dim, Identities) {
  EXPECT_EQ(kN + Dim(0), kN);
  EXPECT_EQ(Dim(0) + kN, kN);
  EXPECT_EQ(kN - Dim(0), kN);
  EXPECT_EQ(kN * Dim(1), kN);
  EXPECT_EQ(Dim(1) * kN, kN);
  EXPECT_EQ(kN / Dim(1), kN);
  EXPECT_TRUE((kN * Dim(0)).is_static());
  EXPECT_EQ((Dim(0) * kN).value(), 0);
}

TEST(Dim, CanonicalFormFoldsConstants) {
  EXPECT_EQ((Dim(2) + kN).to_string(), "(n + 2)");
  EXPECT_EQ(((kN + Dim(2)) + Dim(3)).to_string(), "(n + 5)");
  EXPECT_EQ(((kN * Dim(3)) * Dim(4)).to_string(), "(n * 12)");
  EXPECT_EQ(Dim(3) * kN, kN * Dim(3));
  EXPECT_EQ((kPast + kN).to_string(), "(past + n)");
  EXPECT_FALSE(kPast + kN == kN + kPast);  // structural, not algebraic
}

TEST(Dim, FoldsThatWouldFailStaySymbolic) {
  const Dim overflow = Dim(INT64_MAX) + Dim(1);
  EXPECT_FALSE(overflow.is_static());
  EXPECT_EQ(overflow.evaluate({}).status().code(), StatusCode::kOutOfRange);
  const Dim by_zero = Dim(4) / Dim(0);
  EXPECT_FALSE(by_zero.is_static());
  EXPECT_EQ(by_zero.evaluate({}).status().code(), StatusCode::kInvalidArgument);
  const Dim negative = Dim(3) - Dim(5);
  EXPECT_EQ(negative.evaluate({}).status().code(), StatusCode::kInvalidArgument);
}

TEST(Dim, Evaluate) {
  const Dim d = (kPast + kN) * Dim(2) / Dim(3);
  Result<int64_t> v = d.evaluate({{"past", 10}, {"n", 5}});
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_EQ(*v, 10);
  EXPECT_EQ(*Dim(7).evaluate({}), 7);
}

TEST(Dim, EvaluateErrors) {
  Status unbound = (kPast + kN).evaluate({{"past", 1}}).status();
  EXPECT_EQ(unbound.code(), StatusCode::kNotFound);
  EXPECT_NE(unbound.message().find("'n'"), std::string_view::npos) << unbound.to_string();

  Status zero = (kN / kPast).evaluate({{"n", 4}, {"past", 0}}).status();
  EXPECT_EQ(zero.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(zero.message().find("division by zero"), std::string_view::npos) << zero.to_string();

  Status negative = (kN - kPast).evaluate({{"n", 1}, {"past", 2}}).status();
  EXPECT_EQ(negative.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(negative.message().find("negative"), std::string_view::npos) << negative.to_string();

  EXPECT_EQ((kN * kPast).evaluate({{"n", int64_t{1} << 40}, {"past", int64_t{1} << 40}}).status().code(),
            StatusCode::kOutOfRange);
  EXPECT_EQ((kN + kPast).evaluate({{"n", INT64_MAX}, {"past", 1}}).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(kN.evaluate({{"n", -1}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Dim(-1).evaluate({}).status().code(), StatusCode::kInvalidArgument);
}

TEST(Dim, Symbols) {
  const Dim d = (kPast + kN) * kN + Dim::symbol("batch");
  EXPECT_EQ(d.symbols(), (std::vector<std::string>{"batch", "n", "past"}));
  EXPECT_TRUE(Dim(3).symbols().empty());
}

TEST(Dim, ParseBasics) {
  EXPECT_EQ(*Dim::parse("7"), Dim(7));
  EXPECT_EQ(*Dim::parse("  n_tokens "), Dim::symbol("n_tokens"));
  EXPECT_EQ(*Dim::parse("past + n"), kPast + kN);
  EXPECT_EQ(*Dim::parse("(a * 3) / 2"), Dim::symbol("a") * Dim(3) / Dim(2));
  EXPECT_EQ(*Dim::parse("a - b - c"), (Dim::symbol("a") - Dim::symbol("b")) - Dim::symbol("c"));
  EXPECT_EQ(*Dim::parse("a + b * c"), Dim::symbol("a") + Dim::symbol("b") * Dim::symbol("c"));
  EXPECT_EQ(*Dim::parse("2 * 3 + 4"), Dim(10));
  EXPECT_EQ(*Dim::parse("-5"), Dim(-5));
  EXPECT_EQ(*Dim::parse("9223372036854775807"), Dim(INT64_MAX));
  EXPECT_EQ(*Dim::parse("-9223372036854775808"), Dim(INT64_MIN));
}

TEST(Dim, ParseErrorsNamePosition) {
  for (const char* bad : {"", "n +", "(n", "n)", "3 $ 4", "9223372036854775808", "* n", "n n", "((((", "1a"}) {
    Result<Dim> d = Dim::parse(bad);
    EXPECT_FALSE(d.ok()) << bad;
    EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(d.status().message().find("position"), std::string_view::npos) << d.status().to_string();
  }
  Status s = Dim::parse("n + $").status();
  EXPECT_NE(s.message().find("position 4"), std::string_view::npos) << s.to_string();
  EXPECT_FALSE(Dim::parse(std::string(200, '(') + "n" + std::string(200, ')')).ok());
  EXPECT_FALSE(Dim::parse(std::string(10000, ' ')).ok());
}

TEST(Dim, ToStringRoundTrips) {
  const Dim a = Dim::symbol("a");
  const std::vector<Dim> dims = {
      Dim(0),
      Dim(42),
      Dim(-3),
      a,
      a + Dim(1),
      (a + kN) * Dim(3),
      (a - kN) / (kPast + Dim(2)),
      Dim(0) - a,
      a * Dim(-3),
      a - Dim(-3),
      Dim(4) / Dim(0),
      Dim(INT64_MAX) + Dim(1),
      (a * a) / (a - Dim(1)) * kN,
  };
  for (const Dim& d : dims) {
    Result<Dim> parsed = Dim::parse(d.to_string());
    ASSERT_TRUE(parsed.ok()) << d.to_string() << ": " << parsed.status().to_string();
    EXPECT_EQ(*parsed, d) << d.to_string() << " came back as " << parsed->to_string();
    EXPECT_EQ(parsed->to_string(), d.to_string());
  }
}

TEST(SymShape, BasicsAndResolve) {
  const SymShape s{Dim::symbol("n_tokens"), Dim(576)};
  EXPECT_EQ(s.to_string(), "[n_tokens, 576]");
  EXPECT_EQ(fmt::format("{}", s), "[n_tokens, 576]");
  EXPECT_EQ(s.rank(), 2);
  EXPECT_EQ(s.dim(-1), Dim(576));
  EXPECT_FALSE(s.is_static());
  EXPECT_EQ(s.num_elements(), Dim::symbol("n_tokens") * Dim(576));
  Result<Shape> shape = s.resolve({{"n_tokens", 17}});
  ASSERT_TRUE(shape.ok()) << shape.status().to_string();
  EXPECT_EQ(*shape, (Shape{17, 576}));

  Status unbound = s.resolve({}).status();
  EXPECT_EQ(unbound.code(), StatusCode::kNotFound);
  EXPECT_NE(unbound.to_string().find("axis 0"), std::string::npos) << unbound.to_string();

  const SymShape fixed = SymShape::from(Shape{2, 3});
  EXPECT_TRUE(fixed.is_static());
  EXPECT_EQ(fixed.num_elements().value(), 6);
  EXPECT_EQ(SymShape().num_elements().value(), 1);
  EXPECT_EQ(SymShape(std::vector<Dim>(9, Dim(1))).resolve({}).status().code(), StatusCode::kInvalidArgument);
}

TEST(TensorDesc, ToString) {
  const TensorDesc desc{DType::kF32, SymShape{Dim::symbol("n_tokens"), Dim(576)}};
  EXPECT_EQ(desc.to_string(), "f32[n_tokens, 576]");
  EXPECT_EQ((TensorDesc{DType::kQ4_1, SymShape{}}).to_string(), "q4_1[]");
}

TEST(DimDeathTest, ValueOfSymbolicAborts) {
  EXPECT_DEATH((void)kN.value(), "symbolic dim n");
}

}  // namespace
}  // namespace hxrt::graph
