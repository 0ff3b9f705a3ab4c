// Template::parse: the parse, then jinja2's compile-time checks (filter and test names exist, `break` and
// `continue` sit inside a loop), so a template that could fail later fails when it is loaded.
#include "hxrt/llm/jinja.h"
#include "llm/jinja/ast.h"
#include "llm/jinja/builtins.h"

namespace hxrt::llm::jinja {
namespace {

Status error_at(Position where, std::string_view what) {
  return invalid_argument("line {}, column {}: {}", where.line, where.column, what);
}

Status check_expr(const Expr* e) {
  if (e == nullptr) return ok_status();
  if (e->kind == ExprKind::kFilter && !is_filter(e->name)) {
    return error_at(e->where, fmt::format("unknown filter '{}'", e->name));
  }
  if (e->kind == ExprKind::kTest && !is_test(e->name)) {
    return error_at(e->where, fmt::format("unknown test '{}'", e->name));
  }
  for (const auto& child : e->children) HXRT_RETURN_IF_ERROR(check_expr(child.get()));
  return ok_status();
}

Status check_body(const Body& body, bool in_loop) {
  for (const auto& s : body) {
    if ((s->kind == StmtKind::kBreak || s->kind == StmtKind::kContinue) && !in_loop) {
      return error_at(s->where, fmt::format("'{}' outside of a loop", s->kind == StmtKind::kBreak ? "break" : "continue"));
    }
    HXRT_RETURN_IF_ERROR(check_expr(s->expr.get()));
    HXRT_RETURN_IF_ERROR(check_expr(s->condition.get()));
    for (const auto& [condition, branch] : s->branches) {
      HXRT_RETURN_IF_ERROR(check_expr(condition.get()));
      HXRT_RETURN_IF_ERROR(check_body(branch, in_loop));
    }
    for (const Param& p : s->params) HXRT_RETURN_IF_ERROR(check_expr(p.default_value.get()));
    const bool body_in_loop = s->kind == StmtKind::kFor || (in_loop && s->kind != StmtKind::kMacro &&
                                                            s->kind != StmtKind::kCall);
    HXRT_RETURN_IF_ERROR(check_body(s->body, body_in_loop));
    HXRT_RETURN_IF_ERROR(check_body(s->else_body, in_loop));
  }
  return ok_status();
}

}  // namespace

Result<Template> Template::parse(std::string_view source) {
  HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Program> program, parse_program(source));
  HXRT_RETURN_IF_ERROR(check_body(program->body, false));
  return Template(std::shared_ptr<const Program>(std::move(program)));
}

}  // namespace hxrt::llm::jinja
