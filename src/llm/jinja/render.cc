// The renderer: walks the parsed template with jinja2's scoping. A for loop gives every iteration a scope of its
// own (a `set` inside does not outlive the iteration: namespace() is how templates carry values out), a macro
// call gets a scope whose parent is the scope the macro was defined in, and `if` adds none. Names resolve through
// the scopes, then the render context, then the globals.
//
// Note [Macro scopes]: a macro's Function points at its defining scope without owning it (owning it would be a
// reference cycle: scope → macro → scope). Every scope owns its parent, and the renderer keeps every scope that
// defined a macro alive until the render ends; macros cannot outlive the render, as templates cannot store values
// into the caller's context.
#include <ctime>

#include "hxrt/llm/jinja.h"
#include "llm/jinja/ast.h"
#include "llm/jinja/builtins.h"

namespace hxrt::llm::jinja {
namespace {

struct Scope : std::enable_shared_from_this<Scope> {
  std::vector<std::pair<std::string, Value>> vars;
  std::shared_ptr<Scope> parent;
  const Value::Dict* context = nullptr;  // the root scope: the caller's variables, then the globals
  const Value::Dict* globals = nullptr;

  const Value* find(std::string_view name) const {
    for (const Scope* s = this; s != nullptr; s = s->parent.get()) {
      for (const auto& [k, v] : s->vars) {
        if (k == name) return &v;
      }
      if (s->context != nullptr) {
        if (const Value* v = s->context->find_key(name)) return v;
      }
      if (s->globals != nullptr) {
        if (const Value* v = s->globals->find_key(name)) return v;
      }
    }
    return nullptr;
  }

  void set(std::string_view name, Value value) {
    for (auto& [k, v] : vars) {
      if (k == name) {
        v = std::move(value);
        return;
      }
    }
    vars.emplace_back(std::string(name), std::move(value));
  }
};

enum class Flow { kNormal, kBreak, kContinue };

class Renderer {
 public:
  Renderer(const RenderOptions& options, const Value& context) : options_(options) {
    root_ = std::make_shared<Scope>();
    if (context.is_dict()) root_->context = &context.as_dict();
    globals_ = builtin_globals();
    globals_.set(Value("raise_exception"), Value(Function([this](Arguments& args) -> Result<Value> {
      std::string message = args.positional.empty() ? std::string("raise_exception() called")
                                                    : args.positional[0].str();
      positioned_ = true;  // the template's own words, without a position
      return invalid_argument("{}", message);
    })));
    globals_.set(Value("strftime_now"), Value(Function([this](Arguments& args) -> Result<Value> {
      ArgReader r(args, "strftime_now");
      const Value format = r.get(0, "format");
      HXRT_RETURN_IF_ERROR(r.finish());
      if (!format.is_string()) return invalid_argument("strftime_now() needs a format string");
      return Value(strftime_now(format.as_string()));
    })));
    root_->globals = &globals_;
  }

  Result<std::string> render(const Program& program) {
    std::string out;
    Flow flow = Flow::kNormal;
    HXRT_RETURN_IF_ERROR(exec(program.body, *root_, &out, &flow));
    return out;
  }

 private:
  std::string strftime_now(const std::string& format) const {
    const auto now = options_.now.value_or(std::chrono::system_clock::now());
    const std::time_t t = std::chrono::system_clock::to_time_t(now);
    std::tm tm{};
    localtime_r(&t, &tm);
    std::string buf(64 + format.size() * 4, '\0');
    const size_t n = std::strftime(buf.data(), buf.size(), format.c_str(), &tm);
    buf.resize(n);
    return buf;
  }

  Status positioned(Status status, Position where) {
    if (positioned_) return status;
    positioned_ = true;
    return Status(status.code(), fmt::format("line {}, column {}: {}", where.line, where.column, status.message()));
  }

  Status step(Position where) {
    if (++steps_ > options_.max_steps) {
      return positioned(out_of_range("the template ran more than {} steps", options_.max_steps), where);
    }
    return ok_status();
  }

  Status emit(std::string_view text, std::string* out, Position where) {
    produced_ += text.size();
    if (produced_ > options_.max_output_bytes) {
      return positioned(out_of_range("the template wrote more than {} bytes", options_.max_output_bytes), where);
    }
    out->append(text);
    return ok_status();
  }

  struct DepthGuard {
    explicit DepthGuard(int* depth) : depth_(depth) { ++*depth_; }
    ~DepthGuard() { --*depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;
    int* depth_;
  };

  // --- statements ---

  Status exec(const Body& body, Scope& scope, std::string* out, Flow* flow) {
    for (const auto& stmt : body) {
      HXRT_RETURN_IF_ERROR(step(stmt->where));
      HXRT_RETURN_IF_ERROR(exec_one(*stmt, scope, out, flow));
      if (*flow != Flow::kNormal) return ok_status();
    }
    return ok_status();
  }

  Status exec_one(const Stmt& s, Scope& scope, std::string* out, Flow* flow) {
    switch (s.kind) {
      case StmtKind::kText: return emit(s.text, out, s.where);
      case StmtKind::kOutput: {
        HXRT_ASSIGN_OR_RETURN(Value v, eval(*s.expr, scope));
        return emit(v.str(), out, s.where);
      }
      case StmtKind::kIf:
        for (const auto& [condition, branch] : s.branches) {
          HXRT_ASSIGN_OR_RETURN(Value c, eval(*condition, scope));
          if (c.truthy()) return exec(branch, scope, out, flow);
        }
        return exec(s.else_body, scope, out, flow);
      case StmtKind::kFor: return exec_for(s, scope, out);
      case StmtKind::kSet: {
        HXRT_ASSIGN_OR_RETURN(Value v, eval(*s.expr, scope));
        return assign(s.targets, std::move(v), scope, s.where);
      }
      case StmtKind::kSetBlock:
      case StmtKind::kFilterBlock: {
        std::string text;
        Flow inner = Flow::kNormal;
        HXRT_RETURN_IF_ERROR(exec(s.body, scope, &text, &inner));
        const std::shared_ptr<Scope> block = child_of(scope);
        block->set("", Value(std::move(text)));  // the filter chain's operand (parser.cc: parse_filter_chain)
        HXRT_ASSIGN_OR_RETURN(Value v, eval(*s.expr, *block));
        if (s.kind == StmtKind::kFilterBlock) return emit(v.str(), out, s.where);
        return assign(s.targets, std::move(v), scope, s.where);
      }
      case StmtKind::kMacro: scope.set(s.name, make_macro(s, scope)); return ok_status();
      case StmtKind::kCall: {
        HXRT_ASSIGN_OR_RETURN(Value v, eval_call(*s.expr, scope, make_caller(s, scope)));
        return emit(v.str(), out, s.where);
      }
      case StmtKind::kBreak: *flow = Flow::kBreak; return ok_status();
      case StmtKind::kContinue: *flow = Flow::kContinue; return ok_status();
    }
    return ok_status();
  }

  Status assign(const std::vector<std::string>& targets, Value value, Scope& scope, Position where) {
    if (targets.size() == 1) return assign_one(targets[0], std::move(value), scope, where);
    if (!value.is_list() || value.as_list().size() != targets.size()) {
      return positioned(invalid_argument("cannot unpack {} into {} names", value.kind_name(), targets.size()), where);
    }
    for (size_t i = 0; i < targets.size(); ++i) {
      HXRT_RETURN_IF_ERROR(assign_one(targets[i], value.as_list()[i], scope, where));
    }
    return ok_status();
  }

  Status assign_one(const std::string& target, Value value, Scope& scope, Position where) {
    const size_t dot = target.find('.');
    if (dot == std::string::npos) {
      scope.set(target, std::move(value));
      return ok_status();
    }
    const std::string name = target.substr(0, dot);
    const Value* ns = scope.find(name);
    if (ns == nullptr || !ns->is_dict() || !ns->as_dict().is_namespace) {
      return positioned(invalid_argument("cannot assign attribute on non-namespace object '{}'", name), where);
    }
    ns->as_dict().set(Value(target.substr(dot + 1)), std::move(value));
    return ok_status();
  }

  Status exec_for(const Stmt& s, Scope& scope, std::string* out) {
    DepthGuard guard(&depth_);
    if (depth_ > options_.max_depth) return positioned(out_of_range("loops nested too deeply"), s.where);
    HXRT_ASSIGN_OR_RETURN(Value iterable, eval(*s.expr, scope));
    Result<Value::List> listed = iterate(iterable);
    if (!listed.ok()) return positioned(listed.status(), s.expr->where);
    Value::List items = std::move(*listed);
    if (s.condition != nullptr) {  // `for x in xs if cond`: filtered before `loop` counts
      Value::List kept;
      for (Value& item : items) {
        const std::shared_ptr<Scope> probe = child_of(scope);
        HXRT_RETURN_IF_ERROR(bind_targets(s, item, *probe));
        HXRT_ASSIGN_OR_RETURN(Value c, eval(*s.condition, *probe));
        if (c.truthy()) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    const auto n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      HXRT_RETURN_IF_ERROR(step(s.where));  // an empty body still costs a step per iteration
      const std::shared_ptr<Scope> iteration = child_of(scope);
      HXRT_RETURN_IF_ERROR(bind_targets(s, items[static_cast<size_t>(i)], *iteration));
      iteration->set("loop", loop_object(items, i));
      Flow flow = Flow::kNormal;
      HXRT_RETURN_IF_ERROR(exec(s.body, *iteration, out, &flow));
      if (flow == Flow::kBreak) break;
    }
    if (n == 0) {
      Flow flow = Flow::kNormal;
      return exec(s.else_body, scope, out, &flow);
    }
    return ok_status();
  }

  Status bind_targets(const Stmt& s, const Value& item, Scope& scope) {
    return assign(s.targets, item, scope, s.where);
  }

  static Value loop_object(const Value::List& items, int64_t i) {
    const auto n = static_cast<int64_t>(items.size());
    Value::Dict loop;
    loop.set(Value("index"), Value(i + 1));
    loop.set(Value("index0"), Value(i));
    loop.set(Value("revindex"), Value(n - i));
    loop.set(Value("revindex0"), Value(n - i - 1));
    loop.set(Value("first"), Value(i == 0));
    loop.set(Value("last"), Value(i == n - 1));
    loop.set(Value("length"), Value(n));
    loop.set(Value("depth"), Value(1));
    loop.set(Value("depth0"), Value(0));
    loop.set(Value("previtem"), i > 0 ? items[static_cast<size_t>(i - 1)] : Value::undefined("there is no previous item"));
    loop.set(Value("nextitem"), i + 1 < n ? items[static_cast<size_t>(i + 1)] : Value::undefined("there is no next item"));
    loop.set(Value("cycle"), Value(Function([i](Arguments& args) -> Result<Value> {
      if (args.positional.empty()) return invalid_argument("loop.cycle() needs at least one value");
      return args.positional[static_cast<size_t>(i) % args.positional.size()];
    })));
    loop.is_namespace = true;  // attribute access reads the fields; `loop.items` is not a dict method here
    return Value(std::move(loop));
  }

  // Binds a call's arguments to `params` in `scope` as jinja2 binds macro arguments: extra positional arguments go
  // to `varargs`, unknown keywords to `kwargs`, missing ones take their default or are undefined.
  Status bind_params(const std::vector<Param>& params, std::string_view callee, Arguments& args, Scope& scope,
                     Position where) {
    Value::List varargs;
    for (size_t i = 0; i < args.positional.size(); ++i) {
      if (i < params.size()) {
        scope.set(params[i].name, args.positional[i]);
      } else {
        varargs.push_back(args.positional[i]);
      }
    }
    Value::Dict kwargs;
    for (auto& [k, v] : args.keyword) {
      const std::string& name = k;  // clang 14 cannot capture a structured binding
      const auto it = std::find_if(params.begin(), params.end(), [&](const Param& p) { return p.name == name; });
      if (it == params.end()) {
        if (k == "caller") {
          scope.set("caller", v);
        } else {
          kwargs.set(Value(k), v);
        }
        continue;
      }
      if (static_cast<size_t>(it - params.begin()) < args.positional.size()) {
        return positioned(invalid_argument("macro '{}' got multiple values for argument '{}'", callee, k), where);
      }
      scope.set(k, v);
    }
    for (size_t i = args.positional.size(); i < params.size(); ++i) {
      const Param& p = params[i];
      bool given = false;
      for (const auto& [k, v] : args.keyword) given = given || k == p.name;
      if (given) continue;
      if (p.default_value != nullptr) {
        HXRT_ASSIGN_OR_RETURN(Value d, eval(*p.default_value, scope));
        scope.set(p.name, std::move(d));
      } else {
        scope.set(p.name, Value::undefined(fmt::format("parameter '{}' was not provided", p.name)));
      }
    }
    scope.set("varargs", Value(std::move(varargs)));
    scope.set("kwargs", Value(std::move(kwargs)));
    return ok_status();
  }

  // Calls `body` with `params` bound in a new scope under `closure`; returns what it rendered.
  Result<Value> call_body(const Body& body, const std::vector<Param>& params, std::string_view callee,
                          Scope* closure, Arguments& args, Position where) {
    DepthGuard guard(&depth_);
    if (depth_ > options_.max_depth) {
      return positioned(out_of_range("macro calls nested more than {} deep", options_.max_depth), where);
    }
    const std::shared_ptr<Scope> scope = child_of(*closure);
    HXRT_RETURN_IF_ERROR(bind_params(params, callee, args, *scope, where));
    std::string out;
    Flow flow = Flow::kNormal;
    HXRT_RETURN_IF_ERROR(exec(body, *scope, &out, &flow));
    return Value(std::move(out));
  }

  Value make_macro(const Stmt& s, Scope& scope) {
    Scope* closure = keep_alive(scope);
    return Value(Function([this, &s, closure](Arguments& args) -> Result<Value> {
      return call_body(s.body, s.params, s.name, closure, args, s.where);
    }));
  }

  Value make_caller(const Stmt& s, Scope& scope) {
    Scope* closure = keep_alive(scope);
    return Value(Function([this, &s, closure](Arguments& args) -> Result<Value> {
      return call_body(s.body, s.params, "caller", closure, args, s.where);
    }));
  }

  // See Note [Macro scopes].
  Scope* keep_alive(Scope& scope) {
    kept_.push_back(scope.shared_from_this());
    return &scope;
  }

  static std::shared_ptr<Scope> child_of(Scope& scope) {
    auto child = std::make_shared<Scope>();
    child->parent = scope.shared_from_this();
    return child;
  }

  // --- expressions ---

  Result<Value> eval(const Expr& e, Scope& scope) {
    HXRT_RETURN_IF_ERROR(step(e.where));
    Result<Value> v = eval_inner(e, scope);
    if (!v.ok()) return positioned(v.status(), e.where);
    return v;
  }

  Result<Arguments> eval_args(const Expr& e, size_t first, Scope& scope) {
    Arguments args;
    const size_t n_keywords = e.keywords.size();
    const size_t n_positional = e.children.size() - first - n_keywords;
    for (size_t i = 0; i < n_positional; ++i) {
      HXRT_ASSIGN_OR_RETURN(Value v, eval(*e.children[first + i], scope));
      args.positional.push_back(std::move(v));
    }
    for (size_t i = 0; i < n_keywords; ++i) {
      HXRT_ASSIGN_OR_RETURN(Value v, eval(*e.children[first + n_positional + i], scope));
      args.keyword.emplace_back(e.keywords[i], std::move(v));
    }
    return args;
  }

  Result<Value> eval_call(const Expr& e, Scope& scope, Value caller = Value()) {
    HXRT_ASSIGN_OR_RETURN(Value callee, eval(*e.children[0], scope));
    HXRT_ASSIGN_OR_RETURN(Arguments args, eval_args(e, 1, scope));
    if (!caller.is_undefined()) args.keyword.emplace_back("caller", std::move(caller));
    if (callee.is_undefined()) {
      return invalid_argument("{}", callee.undefined_why().empty() ? "called an undefined value" : callee.undefined_why());
    }
    if (!callee.is_function()) return invalid_argument("'{}' object is not callable", callee.kind_name());
    return callee.as_function()(args);
  }

  Result<Value> eval_inner(const Expr& e, Scope& scope) {
    switch (e.kind) {
      case ExprKind::kLiteral: return e.value;
      case ExprKind::kName: {
        if (const Value* v = scope.find(e.name)) return *v;
        return Value::undefined(fmt::format("'{}' is undefined", e.name));
      }
      case ExprKind::kList:
      case ExprKind::kTuple: {
        Value::List items;
        for (const auto& child : e.children) {
          HXRT_ASSIGN_OR_RETURN(Value v, eval(*child, scope));
          items.push_back(std::move(v));
        }
        return Value(std::move(items));
      }
      case ExprKind::kDict: {
        Value::Dict dict;
        for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
          HXRT_ASSIGN_OR_RETURN(Value k, eval(*e.children[i], scope));
          HXRT_ASSIGN_OR_RETURN(Value v, eval(*e.children[i + 1], scope));
          dict.set(std::move(k), std::move(v));
        }
        return Value(std::move(dict));
      }
      case ExprKind::kAttribute: {
        HXRT_ASSIGN_OR_RETURN(Value obj, eval(*e.children[0], scope));
        return get_attribute(obj, e.name);
      }
      case ExprKind::kSubscript: {
        HXRT_ASSIGN_OR_RETURN(Value obj, eval(*e.children[0], scope));
        HXRT_ASSIGN_OR_RETURN(Value key, eval(*e.children[1], scope));
        return get_item(obj, key);
      }
      case ExprKind::kSlice: {
        HXRT_ASSIGN_OR_RETURN(Value obj, eval(*e.children[0], scope));
        Value bounds[3];
        for (int i = 0; i < 3; ++i) {
          if (e.children[1 + i] != nullptr) {
            HXRT_ASSIGN_OR_RETURN(bounds[i], eval(*e.children[1 + i], scope));
          }
        }
        return get_slice(obj, bounds[0], bounds[1], bounds[2]);
      }
      case ExprKind::kCall: return eval_call(e, scope);
      case ExprKind::kFilter: {
        HXRT_ASSIGN_OR_RETURN(Value input, eval(*e.children[0], scope));
        HXRT_ASSIGN_OR_RETURN(Arguments args, eval_args(e, 1, scope));
        return apply_filter(e.name, input, args);
      }
      case ExprKind::kTest: {
        HXRT_ASSIGN_OR_RETURN(Value input, eval(*e.children[0], scope));
        HXRT_ASSIGN_OR_RETURN(Arguments args, eval_args(e, 1, scope));
        HXRT_ASSIGN_OR_RETURN(const bool pass, apply_test(e.name, input, args));
        return Value(pass != e.negated);
      }
      case ExprKind::kUnary: {
        HXRT_ASSIGN_OR_RETURN(Value v, eval(*e.children[0], scope));
        if (e.name == "not") return Value(!v.truthy());
        if (v.is_undefined()) return invalid_argument("{}", v.undefined_why());
        if (!v.is_number()) return invalid_argument("bad operand type for unary {}: '{}'", e.name, v.kind_name());
        if (e.name == "+") return v.is_bool() ? Value(v.as_int()) : v;
        if (v.is_float()) return Value(-v.as_double());
        return Value(-v.as_int());
      }
      case ExprKind::kBinary: {
        HXRT_ASSIGN_OR_RETURN(Value a, eval(*e.children[0], scope));
        if (e.name == "and") return a.truthy() ? eval(*e.children[1], scope) : a;
        if (e.name == "or") return a.truthy() ? a : eval(*e.children[1], scope);
        HXRT_ASSIGN_OR_RETURN(Value b, eval(*e.children[1], scope));
        return binary_operator(e.name, a, b);
      }
      case ExprKind::kCompare: {
        HXRT_ASSIGN_OR_RETURN(Value left, eval(*e.children[0], scope));
        for (size_t i = 0; i < e.ops.size(); ++i) {
          HXRT_ASSIGN_OR_RETURN(Value right, eval(*e.children[i + 1], scope));
          HXRT_ASSIGN_OR_RETURN(const bool holds, compare(e.ops[i], left, right));
          if (!holds) return Value(false);
          left = std::move(right);
        }
        return Value(true);
      }
      case ExprKind::kConditional: {
        HXRT_ASSIGN_OR_RETURN(Value c, eval(*e.children[0], scope));
        if (c.truthy()) return eval(*e.children[1], scope);
        if (e.children[2] == nullptr) return Value::undefined("the conditional expression had no else branch");
        return eval(*e.children[2], scope);
      }
    }
    return internal_error("unknown expression kind");
  }

  const RenderOptions& options_;
  std::shared_ptr<Scope> root_;
  Value::Dict globals_;
  std::vector<std::shared_ptr<Scope>> kept_;
  int64_t steps_ = 0;
  size_t produced_ = 0;
  int depth_ = 0;
  bool positioned_ = false;  // the failing error already carries its position (or is the template's own message)
};

}  // namespace

Result<std::string> Template::render(const Value& context, const RenderOptions& options) const {
  if (!context.is_undefined() && !context.is_dict()) {
    return invalid_argument("the render context must be a dict, not {}", context.kind_name());
  }
  Renderer renderer(options, context);
  return renderer.render(*program_);
}

}  // namespace hxrt::llm::jinja
