// Dim and SymShape: tensor dimensions that are either known integers or symbolic expressions.
//
// A graph's inputs may have symbolic dims (`batch`, `n_tokens`); shape inference propagates them through
// arithmetic (`n_tokens * 9`, `past + n_tokens`) with constant folding, so every value of a planned graph has a
// shape that is a function of the input symbols. At run time the caller binds the symbols to integers and each
// shape is evaluated — no re-planning per shape.
//
// Thread-safety: immutable values; safe to share.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hxrt/base/dtype.h"
#include "hxrt/base/shape.h"
#include "hxrt/base/status.h"

namespace hxrt::graph {

// Concrete values of the symbols, e.g. {"batch": 1, "n_tokens": 17}.
using SymbolBindings = std::map<std::string, int64_t, std::less<>>;

class Dim {
 public:
  Dim() = default;                      // the static dim 0
  Dim(int64_t value) : value_(value) {}  // NOLINT(google-explicit-constructor): a static dim
  // A symbolic dim. `name` must be non-empty, and an identifier ([A-Za-z_][A-Za-z0-9_]*) for to_string() to parse
  // back; readers of foreign formats sanitise their dim names.
  static Dim symbol(std::string_view name);
  // Parses "7", "n_tokens", "past + n_tokens", "(a * 3) / 2"; InvalidArgument naming the position on bad text.
  static Result<Dim> parse(std::string_view text);

  bool is_static() const { return expr_ == nullptr; }
  // The value of a static dim (aborts on a symbolic one).
  int64_t value() const;
  // Symbols this dim depends on.
  std::vector<std::string> symbols() const;
  // Evaluates with `bindings`; NotFound names an unbound symbol, InvalidArgument a negative result or a division
  // by zero, OutOfRange an overflow.
  Result<int64_t> evaluate(const SymbolBindings& bindings) const;
  // "7", "n_tokens", "(past + n_tokens)". Parses back with Dim::parse.
  std::string to_string() const;

  // Arithmetic with constant folding and identities (x*1, x+0, x/1). Division is floor division of
  // non-negative values.
  friend Dim operator+(const Dim& a, const Dim& b);
  friend Dim operator-(const Dim& a, const Dim& b);
  friend Dim operator*(const Dim& a, const Dim& b);
  friend Dim operator/(const Dim& a, const Dim& b);
  // Structural equality: equal constants, or identical expressions. Two different expressions may still be
  // equal for some bindings; planners treat them as "check at bind time".
  bool operator==(const Dim& other) const;

  // The expression tree node of a symbolic dim (opaque; defined in dim.cc).
  struct Expr;

 private:
  friend struct DimBuilder;  // dim.cc: canonicalising construction of expressions
  explicit Dim(std::shared_ptr<const Expr> expr) : expr_(std::move(expr)) {}
  int64_t value_ = 0;
  std::shared_ptr<const Expr> expr_;  // null for a static dim
};

// A shape whose dims may be symbolic.
class SymShape {
 public:
  SymShape() = default;  // rank 0
  SymShape(std::initializer_list<Dim> dims) : dims_(dims) {}
  explicit SymShape(std::vector<Dim> dims) : dims_(std::move(dims)) {}
  static SymShape from(const Shape& shape);

  int rank() const { return static_cast<int>(dims_.size()); }
  const Dim& dim(int axis) const;  // negative axes count from the end
  const std::vector<Dim>& dims() const { return dims_; }
  std::vector<Dim>& mutable_dims() { return dims_; }
  bool is_static() const;
  // Product of dims (symbolic when any dim is).
  Dim num_elements() const;
  // Evaluates every dim; errors name the axis.
  Result<Shape> resolve(const SymbolBindings& bindings) const;
  std::string to_string() const;  // "[n_tokens, 576]"
  bool operator==(const SymShape& other) const { return dims_ == other.dims_; }

 private:
  std::vector<Dim> dims_;
};

// The static description of a tensor value: element type and (symbolic) shape.
struct TensorDesc {
  DType dtype = DType::kF32;
  SymShape shape;
  std::string to_string() const;  // "f32[n_tokens, 576]"
  bool operator==(const TensorDesc& other) const { return dtype == other.dtype && shape == other.shape; }
};

}  // namespace hxrt::graph

template <>
struct fmt::formatter<hxrt::graph::Dim> : fmt::formatter<std::string> {
  auto format(const hxrt::graph::Dim& d, format_context& ctx) const {
    return fmt::formatter<std::string>::format(d.to_string(), ctx);
  }
};

template <>
struct fmt::formatter<hxrt::graph::SymShape> : fmt::formatter<std::string> {
  auto format(const hxrt::graph::SymShape& s, format_context& ctx) const {
    return fmt::formatter<std::string>::format(s.to_string(), ctx);
  }
};
