// Tokens → Program, by recursive descent in jinja2's own precedence order (jinja2/parser.py): conditional
// expression < or < and < not < comparisons and `in` < + - < ~ < * / // % < ** < unary - + < postfix (attribute,
// subscript, call), filters and tests.
#include <charconv>
#include <set>

#include "llm/jinja/ast.h"
#include "llm/jinja/lexer.h"

namespace hxrt::llm::jinja {
namespace {

constexpr int kMaxNesting = 200;  // brackets, unary operators and blocks: deep enough for any real template

std::unique_ptr<Expr> make_expr(ExprKind kind, Position where) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->where = where;
  return e;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Result<std::unique_ptr<Program>> run() {
    auto program = std::make_unique<Program>();
    std::string ended_by;
    HXRT_RETURN_IF_ERROR(parse_body({}, &program->body, &ended_by));
    return program;
  }

 private:
  // --- tokens ---
  const Token& peek(size_t ahead = 0) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  const Token& next() { return tokens_[std::min(pos_++, tokens_.size() - 1)]; }
  bool at_operator(std::string_view op, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kOperator && peek(ahead).text == op;
  }
  bool at_name(std::string_view name, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kName && peek(ahead).text == name;
  }
  bool accept_operator(std::string_view op) {
    if (!at_operator(op)) return false;
    ++pos_;
    return true;
  }
  bool accept_name(std::string_view name) {
    if (!at_name(name)) return false;
    ++pos_;
    return true;
  }

  Status error(const Token& at, std::string_view what) const {
    return invalid_argument("line {}, column {}: {}", at.where.line, at.where.column, what);
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case TokenKind::kText: return "text";
      case TokenKind::kVarBegin: return "'{{'";
      case TokenKind::kVarEnd: return "'}}'";
      case TokenKind::kBlockBegin: return "'{%'";
      case TokenKind::kBlockEnd: return "'%}'";
      case TokenKind::kName: return fmt::format("'{}'", t.text);
      case TokenKind::kString: return "a string";
      case TokenKind::kInt:
      case TokenKind::kFloat: return fmt::format("number {}", t.text);
      case TokenKind::kOperator: return fmt::format("'{}'", t.text);
      case TokenKind::kEnd: return "the end of the template";
    }
    return "?";
  }
  Status expect_operator(std::string_view op) {
    if (accept_operator(op)) return ok_status();
    return error(peek(), fmt::format("expected '{}', found {}", op, describe(peek())));
  }
  Status expect_block_end(std::string_view tag) {
    if (peek().kind == TokenKind::kBlockEnd) {
      ++pos_;
      return ok_status();
    }
    return error(peek(), fmt::format("expected '%}}' to end '{}', found {}", tag, describe(peek())));
  }
  Result<std::string> expect_name(std::string_view what) {
    if (peek().kind != TokenKind::kName) {
      return error(peek(), fmt::format("expected {}, found {}", what, describe(peek())));
    }
    return next().text;
  }

  struct DepthGuard {
    explicit DepthGuard(int* depth) : depth_(depth) { ++*depth_; }
    ~DepthGuard() { --*depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;
    int* depth_;
  };
  Status check_depth() const {
    if (depth_ > kMaxNesting) return error(peek(), fmt::format("nested more than {} levels deep", kMaxNesting));
    return ok_status();
  }

  // --- statements ---

  // Parses until a block tag named in `ends` (consumed up to its name; the caller reads the rest of that tag), or
  // the end of the template when `ends` is empty.
  Status parse_body(const std::set<std::string_view>& ends, Body* body, std::string* ended_by) {
    DepthGuard guard(&depth_);
    HXRT_RETURN_IF_ERROR(check_depth());
    while (true) {
      const Token& t = peek();
      switch (t.kind) {
        case TokenKind::kEnd:
          if (ends.empty()) return ok_status();
          return error(t, fmt::format("unexpected end of template: expected '{}'", *ends.rbegin()));
        case TokenKind::kText: {
          auto s = std::make_unique<Stmt>();
          s->kind = StmtKind::kText;
          s->where = t.where;
          s->text = next().text;
          body->push_back(std::move(s));
          break;
        }
        case TokenKind::kVarBegin: {
          ++pos_;
          auto s = std::make_unique<Stmt>();
          s->kind = StmtKind::kOutput;
          s->where = t.where;
          HXRT_ASSIGN_OR_RETURN(s->expr, parse_tuple(true));
          if (peek().kind != TokenKind::kVarEnd) {
            return error(peek(), fmt::format("expected '}}}}', found {}", describe(peek())));
          }
          ++pos_;
          body->push_back(std::move(s));
          break;
        }
        case TokenKind::kBlockBegin: {
          const Token& keyword = peek(1);
          if (keyword.kind != TokenKind::kName) return error(keyword, "expected a tag name after '{%'");
          if (ends.count(keyword.text) != 0) {
            pos_ += 2;
            *ended_by = keyword.text;
            return ok_status();
          }
          pos_ += 2;
          HXRT_RETURN_IF_ERROR(parse_tag(keyword, body));
          break;
        }
        default:
          return error(t, fmt::format("unexpected {}", describe(t)));
      }
    }
  }

  std::unique_ptr<Stmt> make_stmt(StmtKind kind, const Token& at) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->where = at.where;
    return s;
  }

  Status parse_tag(const Token& keyword, Body* body) {
    const std::string& tag = keyword.text;
    if (tag == "if") return parse_if(keyword, body);
    if (tag == "for") return parse_for(keyword, body);
    if (tag == "set") return parse_set(keyword, body);
    if (tag == "macro") return parse_macro(keyword, body);
    if (tag == "call") return parse_call_block(keyword, body);
    if (tag == "filter") return parse_filter_block(keyword, body);
    if (tag == "break" || tag == "continue") {
      HXRT_RETURN_IF_ERROR(expect_block_end(tag));
      body->push_back(make_stmt(tag == "break" ? StmtKind::kBreak : StmtKind::kContinue, keyword));
      return ok_status();
    }
    if (tag == "generation") {  // transformers' assistant-mask marker: renders its body
      HXRT_RETURN_IF_ERROR(expect_block_end(tag));
      std::string ended_by;
      HXRT_RETURN_IF_ERROR(parse_body({"endgeneration"}, body, &ended_by));
      return expect_block_end("endgeneration");
    }
    static const std::set<std::string_view> kEnds = {"endif", "elif", "else", "endfor", "endset", "endmacro",
                                                     "endcall", "endfilter", "endgeneration"};
    if (kEnds.count(tag) != 0) return error(keyword, fmt::format("unexpected '{}' with no open block", tag));
    return error(keyword, fmt::format("unknown tag '{}'", tag));
  }

  Status parse_if(const Token& keyword, Body* body) {
    auto s = make_stmt(StmtKind::kIf, keyword);
    while (true) {
      HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Expr> condition, parse_tuple(true));
      HXRT_RETURN_IF_ERROR(expect_block_end("if"));
      Body branch;
      std::string ended_by;
      HXRT_RETURN_IF_ERROR(parse_body({"elif", "else", "endif"}, &branch, &ended_by));
      s->branches.emplace_back(std::move(condition), std::move(branch));
      if (ended_by == "elif") continue;
      if (ended_by == "else") {
        HXRT_RETURN_IF_ERROR(expect_block_end("else"));
        HXRT_RETURN_IF_ERROR(parse_body({"endif"}, &s->else_body, &ended_by));
      }
      HXRT_RETURN_IF_ERROR(expect_block_end("endif"));
      break;
    }
    body->push_back(std::move(s));
    return ok_status();
  }

  Result<std::vector<std::string>> parse_targets(std::string_view tag) {
    std::vector<std::string> targets;
    const bool parenthesized = accept_operator("(");
    do {
      HXRT_ASSIGN_OR_RETURN(std::string name, expect_name(fmt::format("a variable name in '{}'", tag)));
      if (accept_operator(".")) {  // set ns.attr = ...
        HXRT_ASSIGN_OR_RETURN(std::string attr, expect_name("an attribute name"));
        name += "." + attr;
      }
      targets.push_back(std::move(name));
    } while (accept_operator(","));
    if (parenthesized) HXRT_RETURN_IF_ERROR(expect_operator(")"));
    return targets;
  }

  Status parse_for(const Token& keyword, Body* body) {
    auto s = make_stmt(StmtKind::kFor, keyword);
    HXRT_ASSIGN_OR_RETURN(s->targets, parse_targets("for"));
    if (!accept_name("in")) return error(peek(), fmt::format("expected 'in' in 'for', found {}", describe(peek())));
    HXRT_ASSIGN_OR_RETURN(s->expr, parse_tuple(false));
    if (accept_name("if")) {
      HXRT_ASSIGN_OR_RETURN(s->condition, parse_expression(true));
    }
    if (at_name("recursive")) return error(peek(), "recursive loops are not supported");
    HXRT_RETURN_IF_ERROR(expect_block_end("for"));
    std::string ended_by;
    HXRT_RETURN_IF_ERROR(parse_body({"else", "endfor"}, &s->body, &ended_by));
    if (ended_by == "else") {
      HXRT_RETURN_IF_ERROR(expect_block_end("else"));
      HXRT_RETURN_IF_ERROR(parse_body({"endfor"}, &s->else_body, &ended_by));
    }
    HXRT_RETURN_IF_ERROR(expect_block_end("endfor"));
    body->push_back(std::move(s));
    return ok_status();
  }

  // A chain of `| filter(args)` applied to an empty-named kName placeholder (the block's rendered text).
  Result<std::unique_ptr<Expr>> parse_filter_chain(const Token& at, bool required) {
    auto chain = make_expr(ExprKind::kName, at.where);
    if (required && peek().kind != TokenKind::kName) return error(peek(), "expected a filter name");
    bool first = true;
    while ((first && required) || accept_operator("|")) {
      first = false;
      HXRT_ASSIGN_OR_RETURN(chain, parse_filter(std::move(chain)));
    }
    return chain;
  }

  Status parse_set(const Token& keyword, Body* body) {
    auto s = make_stmt(StmtKind::kSet, keyword);
    HXRT_ASSIGN_OR_RETURN(s->targets, parse_targets("set"));
    if (accept_operator("=")) {
      HXRT_ASSIGN_OR_RETURN(s->expr, parse_tuple(true));
      HXRT_RETURN_IF_ERROR(expect_block_end("set"));
      body->push_back(std::move(s));
      return ok_status();
    }
    if (s->targets.size() != 1 || s->targets[0].find('.') != std::string::npos) {
      return error(peek(), "a block 'set' assigns one plain name");
    }
    s->kind = StmtKind::kSetBlock;
    HXRT_ASSIGN_OR_RETURN(s->expr, parse_filter_chain(keyword, false));
    HXRT_RETURN_IF_ERROR(expect_block_end("set"));
    std::string ended_by;
    HXRT_RETURN_IF_ERROR(parse_body({"endset"}, &s->body, &ended_by));
    HXRT_RETURN_IF_ERROR(expect_block_end("endset"));
    body->push_back(std::move(s));
    return ok_status();
  }

  Result<std::vector<Param>> parse_params() {
    std::vector<Param> params;
    HXRT_RETURN_IF_ERROR(expect_operator("("));
    while (!accept_operator(")")) {
      if (!params.empty()) HXRT_RETURN_IF_ERROR(expect_operator(","));
      if (accept_operator(")")) break;  // trailing comma
      Param p;
      HXRT_ASSIGN_OR_RETURN(p.name, expect_name("a parameter name"));
      if (accept_operator("=")) {
        HXRT_ASSIGN_OR_RETURN(p.default_value, parse_expression(true));
      } else if (!params.empty() && params.back().default_value != nullptr) {
        return error(peek(), fmt::format("parameter '{}' without a default follows one with a default", p.name));
      }
      params.push_back(std::move(p));
    }
    return params;
  }

  Status parse_macro(const Token& keyword, Body* body) {
    auto s = make_stmt(StmtKind::kMacro, keyword);
    HXRT_ASSIGN_OR_RETURN(s->name, expect_name("a macro name"));
    HXRT_ASSIGN_OR_RETURN(s->params, parse_params());
    HXRT_RETURN_IF_ERROR(expect_block_end("macro"));
    std::string ended_by;
    HXRT_RETURN_IF_ERROR(parse_body({"endmacro"}, &s->body, &ended_by));
    if (peek().kind == TokenKind::kName) ++pos_;  // {% endmacro name %}
    HXRT_RETURN_IF_ERROR(expect_block_end("endmacro"));
    body->push_back(std::move(s));
    return ok_status();
  }

  Status parse_call_block(const Token& keyword, Body* body) {
    auto s = make_stmt(StmtKind::kCall, keyword);
    if (at_operator("(")) {
      HXRT_ASSIGN_OR_RETURN(s->params, parse_params());
    }
    HXRT_ASSIGN_OR_RETURN(s->expr, parse_expression(true));
    if (s->expr->kind != ExprKind::kCall) return error(keyword, "'call' expects a macro call");
    HXRT_RETURN_IF_ERROR(expect_block_end("call"));
    std::string ended_by;
    HXRT_RETURN_IF_ERROR(parse_body({"endcall"}, &s->body, &ended_by));
    HXRT_RETURN_IF_ERROR(expect_block_end("endcall"));
    body->push_back(std::move(s));
    return ok_status();
  }

  Status parse_filter_block(const Token& keyword, Body* body) {
    auto s = make_stmt(StmtKind::kFilterBlock, keyword);
    HXRT_ASSIGN_OR_RETURN(s->expr, parse_filter_chain(keyword, true));
    HXRT_RETURN_IF_ERROR(expect_block_end("filter"));
    std::string ended_by;
    HXRT_RETURN_IF_ERROR(parse_body({"endfilter"}, &s->body, &ended_by));
    HXRT_RETURN_IF_ERROR(expect_block_end("endfilter"));
    body->push_back(std::move(s));
    return ok_status();
  }

  // --- expressions ---

  // `a, b` (a tuple) or one expression; an empty tuple is not allowed here.
  Result<std::unique_ptr<Expr>> parse_tuple(bool with_condexpr) {
    const Position where = peek().where;
    HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Expr> first, parse_expression(with_condexpr));
    if (!at_operator(",")) return first;
    auto tuple = make_expr(ExprKind::kTuple, where);
    tuple->children.push_back(std::move(first));
    while (accept_operator(",")) {
      if (!starts_expression()) break;
      HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Expr> item, parse_expression(with_condexpr));
      tuple->children.push_back(std::move(item));
    }
    return tuple;
  }

  bool starts_expression() const {
    const Token& t = peek();
    switch (t.kind) {
      case TokenKind::kName: return t.text != "in" && t.text != "if" && t.text != "else";
      case TokenKind::kString:
      case TokenKind::kInt:
      case TokenKind::kFloat: return true;
      case TokenKind::kOperator: return t.text == "(" || t.text == "[" || t.text == "{" || t.text == "-" ||
                                        t.text == "+";
      default: return false;
    }
  }

  Result<std::unique_ptr<Expr>> parse_expression(bool with_condexpr) {
    DepthGuard guard(&depth_);
    HXRT_RETURN_IF_ERROR(check_depth());
    HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Expr> expr, parse_or());
    if (!with_condexpr) return expr;
    while (at_name("if")) {
      const Position where = next().where;
      auto cond = make_expr(ExprKind::kConditional, where);
      HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Expr> test, parse_or());
      std::unique_ptr<Expr> otherwise;
      if (accept_name("else")) {
        HXRT_ASSIGN_OR_RETURN(otherwise, parse_expression(true));
      }
      cond->children.push_back(std::move(test));
      cond->children.push_back(std::move(expr));
      cond->children.push_back(std::move(otherwise));
      expr = std::move(cond);
    }
    return expr;
  }

  std::unique_ptr<Expr> binary(std::string op, std::unique_ptr<Expr> left, std::unique_ptr<Expr> right) {
    auto e = make_expr(ExprKind::kBinary, left->where);
    e->name = std::move(op);
    e->children.push_back(std::move(left));
    e->children.push_back(std::move(right));
    return e;
  }

  Result<std::unique_ptr<Expr>> parse_or() {
    HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Expr> left, parse_and());
    while (accept_name("or")) {
      HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Expr> right, parse_and());
      left = binary("or", std::move(left), std::move(right));
    }
    return left;
  }

  Result<std::unique_ptr<Expr>> parse_and() {
    HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Expr> left, parse_not());
    while (accept_name("and")) {
      HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Expr> right, parse_not());
      left = binary("and", std::move(left), std::move(right));
    }
    return left;
  }

  Result<std::unique_ptr<Expr>> parse_not() {
    if (at_name("not")) {
      const Position where = next().where;
      DepthGuard guard(&depth_);
      HXRT_RETURN_IF_ERROR(check_depth());
      auto e = make_expr(ExprKind::kUnary, where);
      e->name = "not";
      HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Expr> operand, parse_not());
      e->children.push_back(std::move(operand));
      return e;
    }
    return parse_compare();
  }

  Result<std::unique_ptr<Expr>> parse_compare() {
    HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Expr> first, parse_math1());
    std::unique_ptr<Expr> compare;
    while (true) {
      std::string op;
      const Token& t = peek();
      if (t.kind == TokenKind::kOperator &&
          (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == "<=" || t.text == ">" || t.text == ">=")) {
        op = t.text;
        ++pos_;
      } else if (at_name("in")) {
        op = "in";
        ++pos_;
      } else if (at_name("not") && at_name("in", 1)) {
        op = "not in";
        pos_ += 2;
      } else {
        break;
      }
      if (compare == nullptr) {
        compare = make_expr(ExprKind::kCompare, first->where);
        compare->children.push_back(std::move(first));
      }
      HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Expr> right, parse_math1());
      compare->ops.push_back(std::move(op));
      compare->children.push_back(std::move(right));
    }
    return compare != nullptr ? std::move(compare) : std::move(first);
  }

  Result<std::unique_ptr<Expr>> parse_math1() {
    HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Expr> left, parse_concat());
    while (at_operator("+") || at_operator("-")) {
      std::string op = next().text;
      HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Expr> right, parse_concat());
      left = binary(std::move(op), std::move(left), std::move(right));
    }
    return left;
  }

  Result<std::unique_ptr<Expr>> parse_concat() {
    HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Expr> left, parse_math2());
    while (accept_operator("~")) {
      HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Expr> right, parse_math2());
      left = binary("~", std::move(left), std::move(right));
    }
    return left;
  }

  Result<std::unique_ptr<Expr>> parse_math2() {
    HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Expr> left, parse_pow());
    while (at_operator("*") || at_operator("/") || at_operator("//") || at_operator("%")) {
      std::string op = next().text;
      HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Expr> right, parse_pow());
      left = binary(std::move(op), std::move(left), std::move(right));
    }
    return left;
  }

  Result<std::unique_ptr<Expr>> parse_pow() {
    HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Expr> left, parse_unary(true));
    while (accept_operator("**")) {
      HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Expr> right, parse_unary(true));
      left = binary("**", std::move(left), std::move(right));
    }
    return left;
  }

  Result<std::unique_ptr<Expr>> parse_unary(bool with_filter) {
    DepthGuard guard(&depth_);
    HXRT_RETURN_IF_ERROR(check_depth());
    std::unique_ptr<Expr> node;
    if (at_operator("-") || at_operator("+")) {
      const Token& t = next();
      node = make_expr(ExprKind::kUnary, t.where);
      node->name = t.text;
      HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Expr> operand, parse_unary(false));
      node->children.push_back(std::move(operand));
    } else {
      HXRT_ASSIGN_OR_RETURN(node, parse_primary());
    }
    HXRT_ASSIGN_OR_RETURN(node, parse_postfix(std::move(node)));
    if (with_filter) {
      HXRT_ASSIGN_OR_RETURN(node, parse_filter_expr(std::move(node)));
    }
    return node;
  }

  Result<std::unique_ptr<Expr>> parse_primary() {
    DepthGuard guard(&depth_);
    HXRT_RETURN_IF_ERROR(check_depth());
    const Token& t = peek();
    switch (t.kind) {
      case TokenKind::kName: {
        ++pos_;
        auto e = make_expr(ExprKind::kLiteral, t.where);
        if (t.text == "true" || t.text == "True") {
          e->value = Value(true);
        } else if (t.text == "false" || t.text == "False") {
          e->value = Value(false);
        } else if (t.text == "none" || t.text == "None") {
          e->value = Value::none();
        } else {
          e->kind = ExprKind::kName;
          e->name = t.text;
        }
        return e;
      }
      case TokenKind::kString: {
        auto e = make_expr(ExprKind::kLiteral, t.where);
        std::string text;
        while (peek().kind == TokenKind::kString) text += next().text;  // adjacent literals concatenate
        e->value = Value(std::move(text));
        return e;
      }
      case TokenKind::kInt: {
        ++pos_;
        int64_t v = 0;
        const auto [end, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
        if (ec != std::errc()) return error(t, fmt::format("integer {} is out of range", t.text));
        auto e = make_expr(ExprKind::kLiteral, t.where);
        e->value = Value(v);
        return e;
      }
      case TokenKind::kFloat: {
        ++pos_;
        double v = 0;
        std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
        auto e = make_expr(ExprKind::kLiteral, t.where);
        e->value = Value(v);
        return e;
      }
      case TokenKind::kOperator:
        if (t.text == "(") return parse_parenthesized();
        if (t.text == "[") return parse_list();
        if (t.text == "{") return parse_dict();
        break;
      default:
        break;
    }
    return error(t, fmt::format("expected an expression, found {}", describe(t)));
  }

  Result<std::unique_ptr<Expr>> parse_parenthesized() {
    const Position where = next().where;
    if (accept_operator(")")) return make_expr(ExprKind::kTuple, where);
    HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Expr> inner, parse_expression(true));
    if (at_operator(",")) {
      auto tuple = make_expr(ExprKind::kTuple, where);
      tuple->children.push_back(std::move(inner));
      while (accept_operator(",")) {
        if (at_operator(")")) break;
        HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Expr> item, parse_expression(true));
        tuple->children.push_back(std::move(item));
      }
      inner = std::move(tuple);
    }
    HXRT_RETURN_IF_ERROR(expect_operator(")"));
    return inner;
  }

  Result<std::unique_ptr<Expr>> parse_list() {
    auto list = make_expr(ExprKind::kList, next().where);
    while (!accept_operator("]")) {
      if (!list->children.empty()) HXRT_RETURN_IF_ERROR(expect_operator(","));
      if (accept_operator("]")) break;
      HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Expr> item, parse_expression(true));
      list->children.push_back(std::move(item));
    }
    return list;
  }

  Result<std::unique_ptr<Expr>> parse_dict() {
    auto dict = make_expr(ExprKind::kDict, next().where);
    while (!accept_operator("}")) {
      if (!dict->children.empty()) HXRT_RETURN_IF_ERROR(expect_operator(","));
      if (accept_operator("}")) break;
      HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Expr> key, parse_expression(true));
      HXRT_RETURN_IF_ERROR(expect_operator(":"));
      HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Expr> value, parse_expression(true));
      dict->children.push_back(std::move(key));
      dict->children.push_back(std::move(value));
    }
    return dict;
  }

  Result<std::unique_ptr<Expr>> parse_postfix(std::unique_ptr<Expr> node) {
    while (true) {
      if (at_operator(".")) {
        const Position where = next().where;
        const Token& t = next();
        if (t.kind == TokenKind::kName) {
          auto e = make_expr(ExprKind::kAttribute, where);
          e->name = t.text;
          e->children.push_back(std::move(node));
          node = std::move(e);
        } else if (t.kind == TokenKind::kInt) {
          int64_t v = 0;
          const auto [end, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
          if (ec != std::errc()) return error(t, fmt::format("integer {} is out of range", t.text));
          auto e = make_expr(ExprKind::kSubscript, where);
          auto index = make_expr(ExprKind::kLiteral, t.where);
          index->value = Value(v);
          e->children.push_back(std::move(node));
          e->children.push_back(std::move(index));
          node = std::move(e);
        } else {
          return error(t, fmt::format("expected an attribute name after '.', found {}", describe(t)));
        }
      } else if (at_operator("[")) {
        HXRT_ASSIGN_OR_RETURN(node, parse_subscript(std::move(node)));
      } else if (at_operator("(")) {
        HXRT_ASSIGN_OR_RETURN(node, parse_call(std::move(node)));
      } else {
        return node;
      }
    }
  }

  Result<std::unique_ptr<Expr>> parse_subscript(std::unique_ptr<Expr> node) {
    const Position where = next().where;  // [
    std::unique_ptr<Expr> parts[3];
    int colons = 0;
    while (!at_operator("]")) {
      if (accept_operator(":")) {
        if (++colons > 2) return error(peek(), "a slice has at most two ':'");
        continue;
      }
      if (parts[colons] != nullptr) return error(peek(), fmt::format("expected ']', found {}", describe(peek())));
      HXRT_ASSIGN_OR_RETURN(parts[colons], parse_expression(true));
    }
    ++pos_;
    if (colons == 0) {
      if (parts[0] == nullptr) return error(peek(), "empty subscript '[]'");
      auto e = make_expr(ExprKind::kSubscript, where);
      e->children.push_back(std::move(node));
      e->children.push_back(std::move(parts[0]));
      return e;
    }
    auto e = make_expr(ExprKind::kSlice, where);
    e->children.push_back(std::move(node));
    for (auto& part : parts) e->children.push_back(std::move(part));
    return e;
  }

  // Appends `( args )` to `e`: positional children, then keyword ones (their names in e->keywords).
  Status parse_call_args(Expr* e) {
    HXRT_RETURN_IF_ERROR(expect_operator("("));
    bool first = true;
    while (!accept_operator(")")) {
      if (!first) HXRT_RETURN_IF_ERROR(expect_operator(","));
      first = false;
      if (accept_operator(")")) break;
      if (peek().kind == TokenKind::kName && at_operator("=", 1)) {
        e->keywords.push_back(next().text);
        ++pos_;
        HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Expr> value, parse_expression(true));
        e->children.push_back(std::move(value));
        continue;
      }
      if (!e->keywords.empty()) return error(peek(), "a positional argument follows a keyword argument");
      if (at_operator("*") || at_operator("**")) return error(peek(), "'*args' and '**kwargs' are not supported");
      HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Expr> value, parse_expression(true));
      e->children.push_back(std::move(value));
    }
    return ok_status();
  }

  Result<std::unique_ptr<Expr>> parse_call(std::unique_ptr<Expr> callee) {
    auto e = make_expr(ExprKind::kCall, callee->where);
    e->children.push_back(std::move(callee));
    HXRT_RETURN_IF_ERROR(parse_call_args(e.get()));
    return e;
  }

  Result<std::string> parse_dotted_name(std::string_view what) {
    HXRT_ASSIGN_OR_RETURN(std::string name, expect_name(what));
    while (at_operator(".") && peek(1).kind == TokenKind::kName) {
      ++pos_;
      name += "." + next().text;
    }
    return name;
  }

  Result<std::unique_ptr<Expr>> parse_filter(std::unique_ptr<Expr> operand) {
    auto e = make_expr(ExprKind::kFilter, peek().where);
    HXRT_ASSIGN_OR_RETURN(e->name, parse_dotted_name("a filter name after '|'"));
    e->children.push_back(std::move(operand));
    if (at_operator("(")) HXRT_RETURN_IF_ERROR(parse_call_args(e.get()));
    return e;
  }

  Result<std::unique_ptr<Expr>> parse_test(std::unique_ptr<Expr> operand) {
    auto e = make_expr(ExprKind::kTest, peek().where);
    e->negated = accept_name("not");
    HXRT_ASSIGN_OR_RETURN(e->name, parse_dotted_name("a test name after 'is'"));
    e->children.push_back(std::move(operand));
    const Token& t = peek();
    if (at_operator("(")) {
      HXRT_RETURN_IF_ERROR(parse_call_args(e.get()));
    } else if ((t.kind == TokenKind::kName || t.kind == TokenKind::kString || t.kind == TokenKind::kInt ||
                t.kind == TokenKind::kFloat || at_operator("[") || at_operator("{")) &&
               !at_name("else") && !at_name("or") && !at_name("and")) {
      if (at_name("is")) return error(t, "tests cannot be chained with 'is'");
      HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Expr> arg, parse_primary());
      HXRT_ASSIGN_OR_RETURN(arg, parse_postfix(std::move(arg)));
      e->children.push_back(std::move(arg));
    }
    return e;
  }

  Result<std::unique_ptr<Expr>> parse_filter_expr(std::unique_ptr<Expr> node) {
    while (true) {
      if (accept_operator("|")) {
        HXRT_ASSIGN_OR_RETURN(node, parse_filter(std::move(node)));
      } else if (accept_name("is")) {
        HXRT_ASSIGN_OR_RETURN(node, parse_test(std::move(node)));
      } else if (at_operator("(")) {
        HXRT_ASSIGN_OR_RETURN(node, parse_call(std::move(node)));
      } else {
        return node;
      }
    }
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

Result<std::unique_ptr<Program>> parse_program(std::string_view source) {
  HXRT_ASSIGN_OR_RETURN(std::vector<Token> tokens, tokenize(source));
  return Parser(std::move(tokens)).run();
}

}  // namespace hxrt::llm::jinja
