#include "hxrt/graph/dim.h"

#include <algorithm>
#include <cctype>
#include <set>

#include <fmt/ranges.h>

#include "hxrt/base/check.h"

namespace hxrt::graph {

// Note [Canonical Dim expressions]
// Operators fold and simplify as they build, so every symbolic Dim is in a canonical form and structural equality
// is meaningful: constants are folded; x+0, x-0, x*1, x/1 become x and x*0 becomes 0; a constant operand of + or *
// is moved to the right; and (x + c1) + c2, (x * c1) * c2 fold their constants. Each rule's result is a fixpoint of
// the rules, so re-applying an operator to the children of a canonical node rebuilds the same node — which is what
// makes `Dim::parse(d.to_string()) == d` hold. A fold that would overflow, divide by zero or go negative is not done;
// the expression stays symbolic (with no symbols) and `evaluate` reports the error.
struct Dim::Expr {
  enum class Kind : uint8_t { kSymbol, kConstant, kAdd, kSub, kMul, kDiv };
  Kind kind = Kind::kConstant;
  int64_t constant = 0;
  std::string symbol;
  std::shared_ptr<const Expr> lhs;
  std::shared_ptr<const Expr> rhs;
};

namespace {

using Expr = std::shared_ptr<const Dim::Expr>;
using Kind = Dim::Expr::Kind;

// Longest text Dim::parse accepts and deepest parenthesis nesting: bounds recursion on untrusted input.
constexpr size_t kMaxParseLength = 4096;
constexpr int kMaxParseNesting = 64;

char op_char(Kind kind) {
  switch (kind) {
    case Kind::kAdd: return '+';
    case Kind::kSub: return '-';
    case Kind::kMul: return '*';
    case Kind::kDiv: return '/';
    case Kind::kSymbol:
    case Kind::kConstant: break;
  }
  return '?';
}

// Applies `kind` to two integers; false on overflow, division by zero or a negative result.
bool apply_checked(Kind kind, int64_t a, int64_t b, int64_t* out) {
  switch (kind) {
    case Kind::kAdd:
      if (__builtin_add_overflow(a, b, out)) return false;
      break;
    case Kind::kSub:
      if (__builtin_sub_overflow(a, b, out)) return false;
      break;
    case Kind::kMul:
      if (__builtin_mul_overflow(a, b, out)) return false;
      break;
    case Kind::kDiv:
      if (b == 0 || a < 0 || b < 0) return false;
      *out = a / b;
      break;
    case Kind::kSymbol:
    case Kind::kConstant: return false;
  }
  return *out >= 0;
}

bool expr_equal(const Dim::Expr& a, const Dim::Expr& b) {
  if (&a == &b) return true;
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::kConstant: return a.constant == b.constant;
    case Kind::kSymbol: return a.symbol == b.symbol;
    default: return expr_equal(*a.lhs, *b.lhs) && expr_equal(*a.rhs, *b.rhs);
  }
}

void expr_to_string(const Dim::Expr& e, std::string* out) {
  switch (e.kind) {
    case Kind::kConstant: out->append(fmt::format("{}", e.constant)); return;
    case Kind::kSymbol: out->append(e.symbol); return;
    default:
      out->push_back('(');
      expr_to_string(*e.lhs, out);
      out->push_back(' ');
      out->push_back(op_char(e.kind));
      out->push_back(' ');
      expr_to_string(*e.rhs, out);
      out->push_back(')');
      return;
  }
}

void collect_symbols(const Dim::Expr& e, std::set<std::string>* out) {
  if (e.kind == Kind::kSymbol) {
    out->insert(e.symbol);
  } else if (e.lhs != nullptr) {
    collect_symbols(*e.lhs, out);
    collect_symbols(*e.rhs, out);
  }
}

Result<int64_t> evaluate_expr(const Dim::Expr& e, const SymbolBindings& bindings) {
  switch (e.kind) {
    case Kind::kConstant:
      if (e.constant < 0) return invalid_argument("dim constant {} is negative", e.constant);
      return e.constant;
    case Kind::kSymbol: {
      auto it = bindings.find(e.symbol);
      if (it == bindings.end()) return not_found("symbol '{}' is not bound", e.symbol);
      if (it->second < 0)
        return invalid_argument("symbol '{}' is bound to a negative value ({})", e.symbol, it->second);
      return it->second;
    }
    default: break;
  }
  HXRT_ASSIGN_OR_RETURN(const int64_t a, evaluate_expr(*e.lhs, bindings));
  HXRT_ASSIGN_OR_RETURN(const int64_t b, evaluate_expr(*e.rhs, bindings));
  int64_t result = 0;
  bool overflow = false;
  switch (e.kind) {
    case Kind::kAdd: overflow = __builtin_add_overflow(a, b, &result); break;
    case Kind::kSub: overflow = __builtin_sub_overflow(a, b, &result); break;
    case Kind::kMul: overflow = __builtin_mul_overflow(a, b, &result); break;
    case Kind::kDiv:
      if (b == 0) {
        std::string text;
        expr_to_string(e, &text);
        return invalid_argument("division by zero in {}", text);
      }
      result = a / b;
      break;
    default: break;
  }
  if (overflow || result < 0) {
    std::string text;
    expr_to_string(e, &text);
    if (overflow) return out_of_range("{} overflows int64 ({} {} {})", text, a, op_char(e.kind), b);
    return invalid_argument("{} is negative ({} {} {} = {})", text, a, op_char(e.kind), b, result);
  }
  return result;
}

}  // namespace

// The expression of a Dim as a tree node (constants become leaves).
static Expr as_expr(int64_t value, const Expr& expr) {
  if (expr != nullptr) return expr;
  return std::make_shared<const Dim::Expr>(Dim::Expr{.kind = Kind::kConstant, .constant = value});
}

Dim Dim::symbol(std::string_view name) {
  HXRT_CHECK(!name.empty(), "a Dim symbol needs a name");
  return Dim(std::make_shared<const Expr>(Expr{.kind = Expr::Kind::kSymbol, .symbol = std::string(name)}));
}

int64_t Dim::value() const {
  HXRT_CHECK(is_static(), "Dim::value() on symbolic dim {}", to_string());
  return value_;
}

std::vector<std::string> Dim::symbols() const {
  if (expr_ == nullptr) return {};
  std::set<std::string> names;
  collect_symbols(*expr_, &names);
  return {names.begin(), names.end()};
}

Result<int64_t> Dim::evaluate(const SymbolBindings& bindings) const {
  if (expr_ == nullptr) {
    if (value_ < 0) return invalid_argument("dim {} is negative", value_);
    return value_;
  }
  return evaluate_expr(*expr_, bindings);
}

std::string Dim::to_string() const {
  if (expr_ == nullptr) return fmt::format("{}", value_);
  std::string out;
  expr_to_string(*expr_, &out);
  return out;
}

bool Dim::operator==(const Dim& other) const {
  if (is_static() != other.is_static()) return false;
  if (is_static()) return value_ == other.value_;
  return expr_equal(*expr_, *other.expr_);
}

// Builds `a kind b` in canonical form (Note [Canonical Dim expressions]).
static Dim make_binary(Kind kind, const Dim& a, const Dim& b);

Dim operator+(const Dim& a, const Dim& b) {
  return make_binary(Kind::kAdd, a, b);
}
Dim operator-(const Dim& a, const Dim& b) {
  return make_binary(Kind::kSub, a, b);
}
Dim operator*(const Dim& a, const Dim& b) {
  return make_binary(Kind::kMul, a, b);
}
Dim operator/(const Dim& a, const Dim& b) {
  return make_binary(Kind::kDiv, a, b);
}

// Dim's private constructor and members are reached through this helper, which the operators (friends) call.
struct DimBuilder {
  static Dim build(Kind kind, const Dim& a, const Dim& b) {
    if (a.is_static() && b.is_static()) {
      int64_t folded = 0;
      if (apply_checked(kind, a.value_, b.value_, &folded)) return Dim(folded);
    }
    const bool commutative = kind == Kind::kAdd || kind == Kind::kMul;
    if (commutative && a.is_static() && !b.is_static()) return build(kind, b, a);  // constant to the right
    if (b.is_static()) {
      const int64_t c = b.value_;
      if ((kind == Kind::kAdd || kind == Kind::kSub) && c == 0) return a;
      if ((kind == Kind::kMul || kind == Kind::kDiv) && c == 1) return a;
      if (kind == Kind::kMul && c == 0) return Dim(0);
      // (x + c1) + c2 -> x + (c1 + c2); (x * c1) * c2 -> x * (c1 * c2).
      if (commutative && !a.is_static() && a.expr_->kind == kind && a.expr_->rhs->kind == Kind::kConstant) {
        int64_t combined = 0;
        if (apply_checked(kind, a.expr_->rhs->constant, c, &combined)) {
          return build(kind, wrap(a.expr_->lhs), Dim(combined));
        }
      }
    }
    return Dim(std::make_shared<const Dim::Expr>(
        Dim::Expr{.kind = kind, .lhs = as_expr(a.value_, a.expr_), .rhs = as_expr(b.value_, b.expr_)}));
  }
  static Dim wrap(Expr e) {
    if (e->kind == Kind::kConstant) return Dim(e->constant);
    return Dim(std::move(e));
  }
};

static Dim make_binary(Kind kind, const Dim& a, const Dim& b) {
  return DimBuilder::build(kind, a, b);
}

namespace {

// Recursive-descent parser:
//   expr   := term (('+' | '-') term)*
//   term   := factor (('*' | '/') factor)*
//   factor := integer | '-' integer | '-' factor | identifier | '(' expr ')'
class DimParser {
 public:
  explicit DimParser(std::string_view text) : text_(text) {}

  Result<Dim> parse_all() {
    if (text_.size() > kMaxParseLength) {
      return invalid_argument("dim text of {} characters exceeds the limit of {}", text_.size(), kMaxParseLength);
    }
    HXRT_ASSIGN_OR_RETURN(Dim dim, parse_expr());
    skip_space();
    if (pos_ != text_.size()) return error("unexpected '{}'", text_[pos_]);
    return dim;
  }

 private:
  template <typename... Args>
  Status error(fmt::format_string<Args...> format, Args&&... args) const {
    return invalid_argument("bad dim '{}' at position {}: {}", text_, pos_,
                            fmt::format(format, std::forward<Args>(args)...));
  }

  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_])) != 0) ++pos_;
  }
  bool eat(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  Result<Dim> parse_expr() {
    HXRT_ASSIGN_OR_RETURN(Dim lhs, parse_term());
    while (true) {
      if (eat('+')) {
        HXRT_ASSIGN_OR_RETURN(Dim rhs, parse_term());
        lhs = lhs + rhs;
      } else if (eat('-')) {
        HXRT_ASSIGN_OR_RETURN(Dim rhs, parse_term());
        lhs = lhs - rhs;
      } else {
        return lhs;
      }
    }
  }

  Result<Dim> parse_term() {
    HXRT_ASSIGN_OR_RETURN(Dim lhs, parse_factor());
    while (true) {
      if (eat('*')) {
        HXRT_ASSIGN_OR_RETURN(Dim rhs, parse_factor());
        lhs = lhs * rhs;
      } else if (eat('/')) {
        HXRT_ASSIGN_OR_RETURN(Dim rhs, parse_factor());
        lhs = lhs / rhs;
      } else {
        return lhs;
      }
    }
  }

  Result<Dim> parse_factor() {
    skip_space();
    if (pos_ >= text_.size()) return error("expected a number, a symbol or '('; found the end");
    const char c = text_[pos_];
    if (c == '(') {
      if (++depth_ > kMaxParseNesting) return error("parentheses nested deeper than {}", kMaxParseNesting);
      ++pos_;
      HXRT_ASSIGN_OR_RETURN(Dim inner, parse_expr());
      if (!eat(')')) {
        return pos_ < text_.size() ? error("expected ')', found '{}'", text_[pos_]) : error("expected ')'");
      }
      --depth_;
      return inner;
    }
    if (c == '-') {
      ++pos_;
      skip_space();
      if (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_])) != 0) {
        return parse_integer(/*negative=*/true);
      }
      if (++depth_ > kMaxParseNesting) return error("unary minus nested deeper than {}", kMaxParseNesting);
      HXRT_ASSIGN_OR_RETURN(Dim operand, parse_factor());
      --depth_;
      return Dim(0) - operand;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) != 0) return parse_integer(/*negative=*/false);
    if (std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_') {
      const size_t start = pos_;
      while (pos_ < text_.size() &&
             (std::isalnum(static_cast<unsigned char>(text_[pos_])) != 0 || text_[pos_] == '_')) {
        ++pos_;
      }
      return Dim::symbol(text_.substr(start, pos_ - start));
    }
    return error("unexpected '{}'", c);
  }

  // Parses the digits at pos_ as a constant leaf (kept as a leaf so "-3" round-trips inside expressions).
  Result<Dim> parse_integer(bool negative) {
    const size_t start = pos_;
    uint64_t magnitude = 0;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_])) != 0) {
      const auto digit = static_cast<uint64_t>(text_[pos_] - '0');
      if (__builtin_mul_overflow(magnitude, uint64_t{10}, &magnitude) ||
          __builtin_add_overflow(magnitude, digit, &magnitude)) {
        pos_ = start;
        return error("integer does not fit in int64");
      }
      ++pos_;
    }
    const uint64_t limit = negative ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
    if (magnitude > limit) {
      pos_ = start;
      return error("integer does not fit in int64");
    }
    if (!negative) return Dim(static_cast<int64_t>(magnitude));
    if (magnitude == uint64_t{1} << 63) return Dim(INT64_MIN);
    return Dim(-static_cast<int64_t>(magnitude));
  }

  std::string_view text_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

Result<Dim> Dim::parse(std::string_view text) {
  return DimParser(text).parse_all();
}

// ---- SymShape -------------------------------------------------------------------------------------------------

SymShape SymShape::from(const Shape& shape) {
  std::vector<Dim> dims;
  dims.reserve(static_cast<size_t>(shape.rank()));
  for (int64_t d : shape.dims()) dims.emplace_back(d);
  return SymShape(std::move(dims));
}

const Dim& SymShape::dim(int axis) const {
  const int resolved = axis < 0 ? axis + rank() : axis;
  HXRT_CHECK(resolved >= 0 && resolved < rank(), "axis {} out of range for rank {}", axis, rank());
  return dims_[static_cast<size_t>(resolved)];
}

bool SymShape::is_static() const {
  return std::all_of(dims_.begin(), dims_.end(), [](const Dim& d) { return d.is_static(); });
}

Dim SymShape::num_elements() const {
  Dim n(1);
  for (const Dim& d : dims_) n = n * d;
  return n;
}

Result<Shape> SymShape::resolve(const SymbolBindings& bindings) const {
  std::vector<int64_t> dims;
  dims.reserve(dims_.size());
  for (size_t i = 0; i < dims_.size(); ++i) {
    Result<int64_t> d = dims_[i].evaluate(bindings);
    if (!d.ok()) {
      return std::move(d).take_status().with_context(fmt::format("resolving axis {} of shape {}", i, to_string()));
    }
    dims.push_back(*d);
  }
  Result<Shape> shape = Shape::make(dims);
  if (!shape.ok()) return std::move(shape).take_status().with_context(fmt::format("resolving shape {}", to_string()));
  return shape;
}

std::string SymShape::to_string() const {
  std::string out = "[";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i > 0) out += ", ";
    out += dims_[i].to_string();
  }
  out += "]";
  return out;
}

std::string TensorDesc::to_string() const {
  return fmt::format("{}{}", dtype_name(dtype), shape.to_string());
}

}  // namespace hxrt::graph
