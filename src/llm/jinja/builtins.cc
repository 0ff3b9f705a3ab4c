// Operators, attribute/item access and iteration with Python's semantics; jinja2's built-in filters and tests;
// the str and dict methods templates call. Behaviour follows jinja2 3.1 (filters.py, tests.py) and CPython.
#include "llm/jinja/builtins.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "llm/jinja/strings.h"

namespace hxrt::llm::jinja {

// --- arguments ---

Value ArgReader::get(size_t index, std::string_view name, Value fallback) {
  for (const auto& [k, v] : args_.keyword) {
    if (k == name) {
      keywords_used_.push_back(name);
      return v;
    }
  }
  if (index < args_.positional.size()) {
    positional_used_ = std::max(positional_used_, index + 1);
    return args_.positional[index];
  }
  return fallback;
}

Status ArgReader::finish() const {
  if (args_.positional.size() > positional_used_) {
    return invalid_argument("{}() takes at most {} positional arguments ({} given)", callee_, positional_used_,
                            args_.positional.size());
  }
  for (const auto& [k, v] : args_.keyword) {
    if (std::find(keywords_used_.begin(), keywords_used_.end(), k) == keywords_used_.end()) {
      return invalid_argument("{}() got an unexpected keyword argument '{}'", callee_, k);
    }
  }
  return ok_status();
}

namespace {

std::string_view type_name(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "Undefined";
    case Value::Kind::kNone: return "NoneType";
    case Value::Kind::kBool: return "bool";
    case Value::Kind::kInt: return "int";
    case Value::Kind::kFloat: return "float";
    case Value::Kind::kString: return "str";
    case Value::Kind::kList: return "list";
    case Value::Kind::kDict: return v.as_dict().is_namespace ? "Namespace" : "dict";
    case Value::Kind::kFunction: return "function";
  }
  return "?";
}

Status undefined_error(const Value& v) {
  return invalid_argument("{}", v.undefined_why().empty() ? "value is undefined" : v.undefined_why());
}

Status type_error(std::string_view op, const Value& a, const Value& b) {
  if (a.is_undefined()) return undefined_error(a);
  if (b.is_undefined()) return undefined_error(b);
  return invalid_argument("unsupported operand type(s) for {}: '{}' and '{}'", op, type_name(a), type_name(b));
}

bool is_integral(const Value& v) { return v.is_int() || v.is_bool(); }

Status overflow(std::string_view op) {
  return invalid_argument("integer overflow in '{}' (hxrt's template integers are 64-bit)", op);
}

Result<Value> repeat(const Value& seq, int64_t n) {
  constexpr int64_t kMaxRepeat = 1 << 24;
  if (n > kMaxRepeat) return invalid_argument("sequence repeated {} times (at most {})", n, kMaxRepeat);
  if (seq.is_string()) {
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += seq.as_string();
    return Value(std::move(out));
  }
  Value::List out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.as_list().begin(), seq.as_list().end());
  return Value(std::move(out));
}

Result<Value> number_operator(std::string_view op, const Value& a, const Value& b) {
  if (is_integral(a) && is_integral(b)) {
    const int64_t x = a.as_int();
    const int64_t y = b.as_int();
    int64_t r = 0;
    if (op == "+") {
      if (__builtin_add_overflow(x, y, &r)) return overflow(op);
      return Value(r);
    }
    if (op == "-") {
      if (__builtin_sub_overflow(x, y, &r)) return overflow(op);
      return Value(r);
    }
    if (op == "*") {
      if (__builtin_mul_overflow(x, y, &r)) return overflow(op);
      return Value(r);
    }
    if (op == "/") {
      if (y == 0) return invalid_argument("division by zero");
      return Value(static_cast<double>(x) / static_cast<double>(y));
    }
    if (op == "//" || op == "%") {
      if (y == 0) return invalid_argument("integer division or modulo by zero");
      int64_t q = x / y;
      int64_t m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {
        --q;
        m += y;
      }
      return Value(op == "//" ? q : m);
    }
    if (op == "**") {
      if (y < 0) return Value(std::pow(static_cast<double>(x), static_cast<double>(y)));
      int64_t result = 1;
      for (int64_t i = 0; i < y; ++i) {
        if (__builtin_mul_overflow(result, x, &result)) return overflow(op);
      }
      return Value(result);
    }
  }
  const double x = a.as_double();
  const double y = b.as_double();
  if (op == "+") return Value(x + y);
  if (op == "-") return Value(x - y);
  if (op == "*") return Value(x * y);
  if (op == "/") {
    if (y == 0) return invalid_argument("float division by zero");
    return Value(x / y);
  }
  if (op == "//" || op == "%") {
    if (y == 0) return invalid_argument("float modulo by zero");
    double m = std::fmod(x, y);
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    if (op == "%") return Value(m);
    return Value(std::floor((x - m) / y + 0.5));
  }
  if (op == "**") return Value(std::pow(x, y));
  return invalid_argument("unknown operator '{}'", op);
}

}  // namespace

Result<Value> binary_operator(std::string_view op, const Value& a, const Value& b) {
  if (op == "~") return Value(a.str() + b.str());
  if (a.is_number() && b.is_number()) return number_operator(op, a, b);
  if (op == "+") {
    if (a.is_string() && b.is_string()) return Value(a.as_string() + b.as_string());
    if (a.is_list() && b.is_list()) {
      Value::List out = a.as_list();
      out.insert(out.end(), b.as_list().begin(), b.as_list().end());
      return Value(std::move(out));
    }
  }
  if (op == "*") {
    if ((a.is_string() || a.is_list()) && is_integral(b)) return repeat(a, b.as_int());
    if ((b.is_string() || b.is_list()) && is_integral(a)) return repeat(b, a.as_int());
  }
  if (op == "%" && a.is_string()) return invalid_argument("printf-style '%' string formatting is not supported");
  return type_error(op, a, b);
}

namespace {

// Python's ordering: <0, 0, >0; InvalidArgument for values Python cannot order.
Result<int> order(const Value& a, const Value& b, std::string_view op) {
  if (a.is_number() && b.is_number()) {
    if (is_integral(a) && is_integral(b)) return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
    const double x = a.as_double();
    const double y = b.as_double();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_list() && b.is_list()) {
    const Value::List& x = a.as_list();
    const Value::List& y = b.as_list();
    for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) {
      if (x[i].equals(y[i])) continue;
      return order(x[i], y[i], op);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  if (a.is_undefined()) return undefined_error(a);
  if (b.is_undefined()) return undefined_error(b);
  return invalid_argument("'{}' not supported between instances of '{}' and '{}'", op, type_name(a), type_name(b));
}

Result<bool> contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kString:
      if (!item.is_string()) {
        return invalid_argument("'in <string>' requires string as left operand, not {}", type_name(item));
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::kList:
      for (const Value& v : container.as_list()) {
        if (v.equals(item)) return true;
      }
      return false;
    case Value::Kind::kDict: return container.as_dict().find(item) != nullptr;
    case Value::Kind::kUndefined: return false;
    default: return invalid_argument("argument of type '{}' is not iterable", type_name(container));
  }
}

}  // namespace

Result<bool> compare(std::string_view op, const Value& a, const Value& b) {
  if (op == "==") return a.equals(b);
  if (op == "!=") return !a.equals(b);
  if (op == "in") return contains(b, a);
  if (op == "not in") {
    HXRT_ASSIGN_OR_RETURN(const bool in, contains(b, a));
    return !in;
  }
  HXRT_ASSIGN_OR_RETURN(const int c, order(a, b, op));
  if (op == "<") return c < 0;
  if (op == "<=") return c <= 0;
  if (op == ">") return c > 0;
  if (op == ">=") return c >= 0;
  return invalid_argument("unknown comparison '{}'", op);
}

Result<Value::List> iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kList: return v.as_list();
    case Value::Kind::kDict: {
      Value::List keys;
      for (const auto& [k, value] : v.as_dict().entries) keys.push_back(k);
      return keys;
    }
    case Value::Kind::kString: {
      Value::List chars;
      const std::string& s = v.as_string();
      const std::vector<size_t> offsets = code_point_offsets(s);
      for (size_t k = 0; k + 1 < offsets.size(); ++k) {
        chars.emplace_back(std::string_view(s).substr(offsets[k], offsets[k + 1] - offsets[k]));
      }
      return chars;
    }
    case Value::Kind::kUndefined: return Value::List{};
    default: return invalid_argument("'{}' object is not iterable", type_name(v));
  }
}

// --- methods ---

namespace {

Value bound(Function f) { return Value(std::move(f)); }

Value mutating_method(std::string_view type, std::string_view name) {
  return bound([type = std::string(type), name = std::string(name)](Arguments&) -> Result<Value> {
    return invalid_argument("{}.{}() would change a value: templates are rendered in an immutable sandbox", type,
                            name);
  });
}

Result<std::string> string_arg(const Value& v, std::string_view what) {
  if (!v.is_string()) return invalid_argument("{} must be a string, not {}", what, type_name(v));
  return v.as_string();
}

Result<bool> affix_match(const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const Value& a) -> Result<bool> {
    HXRT_ASSIGN_OR_RETURN(std::string t, string_arg(a, prefix ? "startswith()'s argument" : "endswith()'s argument"));
    return prefix ? s.starts_with(t) : s.ends_with(t);
  };
  if (!affix.is_list()) return one(affix);
  for (const Value& a : affix.as_list()) {
    HXRT_ASSIGN_OR_RETURN(const bool m, one(a));
    if (m) return true;
  }
  return false;
}

Value split_result(std::vector<std::string> parts) {
  Value::List list;
  for (std::string& p : parts) list.emplace_back(std::move(p));
  return Value(std::move(list));
}

bool all_code_points(const std::string& s, bool (*pred)(unsigned char)) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [&](char c) { return pred(static_cast<unsigned char>(c)); });
}

Value string_method(const std::string& s, std::string_view name) {
  const std::string self = s;
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool left = name != "rstrip";
    const bool right = name != "lstrip";
    return bound([self, left, right, name = std::string(name)](Arguments& args) -> Result<Value> {
      ArgReader r(args, name);
      const Value chars = r.get(0, "chars", Value::none());
      HXRT_RETURN_IF_ERROR(r.finish());
      if (chars.is_none()) return Value(strip(self, left, right));
      HXRT_ASSIGN_OR_RETURN(std::string set, string_arg(chars, "strip()'s argument"));
      return Value(strip_chars(self, set, left, right));
    });
  }
  if (name == "split") {
    return bound([self](Arguments& args) -> Result<Value> {
      ArgReader r(args, "split");
      const Value sep = r.get(0, "sep", Value::none());
      const Value maxsplit = r.get(1, "maxsplit", Value(-1));
      HXRT_RETURN_IF_ERROR(r.finish());
      if (!is_integral(maxsplit)) return invalid_argument("split()'s maxsplit must be an integer");
      if (sep.is_none()) return split_result(split_whitespace(self, maxsplit.as_int()));
      HXRT_ASSIGN_OR_RETURN(std::string separator, string_arg(sep, "split()'s separator"));
      if (separator.empty()) return invalid_argument("split(): empty separator");
      return split_result(split_on(self, separator, maxsplit.as_int()));
    });
  }
  if (name == "splitlines") {
    return bound([self](Arguments& args) -> Result<Value> {
      HXRT_RETURN_IF_ERROR(ArgReader(args, "splitlines").finish());
      std::vector<std::string> parts = split_on(self, "\n", -1);
      if (!parts.empty() && parts.back().empty()) parts.pop_back();
      for (std::string& p : parts) {
        if (!p.empty() && p.back() == '\r') p.pop_back();
      }
      return split_result(std::move(parts));
    });
  }
  if (name == "startswith" || name == "endswith") {
    const bool prefix = name == "startswith";
    return bound([self, prefix](Arguments& args) -> Result<Value> {
      ArgReader r(args, prefix ? "startswith" : "endswith");
      const Value affix = r.get(0, "prefix");
      HXRT_RETURN_IF_ERROR(r.finish());
      HXRT_ASSIGN_OR_RETURN(const bool m, affix_match(self, affix, prefix));
      return Value(m);
    });
  }
  if (name == "replace") {
    return bound([self](Arguments& args) -> Result<Value> {
      ArgReader r(args, "replace");
      const Value from = r.get(0, "old");
      const Value to = r.get(1, "new");
      const Value count = r.get(2, "count", Value(-1));
      HXRT_RETURN_IF_ERROR(r.finish());
      HXRT_ASSIGN_OR_RETURN(std::string f, string_arg(from, "replace()'s old"));
      HXRT_ASSIGN_OR_RETURN(std::string t, string_arg(to, "replace()'s new"));
      if (!is_integral(count)) return invalid_argument("replace()'s count must be an integer");
      return Value(replace_all(self, f, t, count.as_int()));
    });
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    return bound([self, name = std::string(name)](Arguments& args) -> Result<Value> {
      HXRT_RETURN_IF_ERROR(ArgReader(args, name).finish());
      if (name == "upper") return Value(to_upper(self));
      if (name == "lower") return Value(to_lower(self));
      if (name == "title") return Value(to_title(self));
      return Value(capitalize(self));
    });
  }
  if (name == "find" || name == "rfind" || name == "count") {
    return bound([self, name = std::string(name)](Arguments& args) -> Result<Value> {
      ArgReader r(args, name);
      const Value sub = r.get(0, "sub");
      HXRT_RETURN_IF_ERROR(r.finish());
      HXRT_ASSIGN_OR_RETURN(std::string t, string_arg(sub, name + "()'s argument"));
      if (name == "count") {
        if (t.empty()) return Value(static_cast<int64_t>(code_point_count(self) + 1));
        int64_t n = 0;
        for (size_t at = self.find(t); at != std::string::npos; at = self.find(t, at + t.size())) ++n;
        return Value(n);
      }
      const size_t at = name == "find" ? self.find(t) : self.rfind(t);
      if (at == std::string::npos) return Value(-1);
      return Value(static_cast<int64_t>(code_point_count(std::string_view(self).substr(0, at))));
    });
  }
  if (name == "join") {
    return bound([self](Arguments& args) -> Result<Value> {
      ArgReader r(args, "join");
      const Value items = r.get(0, "iterable");
      HXRT_RETURN_IF_ERROR(r.finish());
      HXRT_ASSIGN_OR_RETURN(Value::List list, iterate(items));
      std::string out;
      for (size_t i = 0; i < list.size(); ++i) {
        if (!list[i].is_string()) return invalid_argument("join(): item {} is {}, not a string", i, type_name(list[i]));
        if (i > 0) out += self;
        out += list[i].as_string();
      }
      return Value(std::move(out));
    });
  }
  if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" || name == "islower" ||
      name == "isupper") {
    return bound([self, name = std::string(name)](Arguments& args) -> Result<Value> {
      HXRT_RETURN_IF_ERROR(ArgReader(args, name).finish());
      if (name == "isdigit") return Value(all_code_points(self, [](unsigned char c) { return c >= '0' && c <= '9'; }));
      if (name == "isalpha") return Value(all_code_points(self, [](unsigned char c) { return std::isalpha(c) != 0; }));
      if (name == "isalnum") return Value(all_code_points(self, [](unsigned char c) { return std::isalnum(c) != 0; }));
      if (name == "isspace") return Value(!self.empty() && strip(self, true, true).empty());
      const bool upper = name == "isupper";
      bool cased = false;
      for (const char c : self) {
        if (std::isalpha(static_cast<unsigned char>(c)) == 0) continue;
        cased = true;
        if ((std::isupper(static_cast<unsigned char>(c)) != 0) != upper) return Value(false);
      }
      return Value(cased);
    });
  }
  return Value::undefined(fmt::format("'str object' has no attribute '{}'", name));
}

Value dict_method(const Value& obj, std::string_view name) {
  if (name == "items" || name == "keys" || name == "values") {
    return bound([obj, name = std::string(name)](Arguments& args) -> Result<Value> {
      HXRT_RETURN_IF_ERROR(ArgReader(args, name).finish());
      Value::List out;
      for (const auto& [k, v] : obj.as_dict().entries) {
        if (name == "items") {
          out.emplace_back(Value::List{k, v});
        } else {
          out.push_back(name == "keys" ? k : v);
        }
      }
      return Value(std::move(out));
    });
  }
  if (name == "get") {
    return bound([obj](Arguments& args) -> Result<Value> {
      ArgReader r(args, "get");
      const Value key = r.get(0, "key");
      const Value fallback = r.get(1, "default", Value::none());
      HXRT_RETURN_IF_ERROR(r.finish());
      const Value* v = obj.as_dict().find(key);
      return v != nullptr ? *v : fallback;
    });
  }
  if (name == "update" || name == "pop" || name == "setdefault" || name == "clear" || name == "popitem") {
    return mutating_method("dict", name);
  }
  return Value();
}

}  // namespace

Result<Value> get_attribute(const Value& obj, std::string_view name) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined: return undefined_error(obj);
    case Value::Kind::kString: return string_method(obj.as_string(), name);
    case Value::Kind::kDict: {
      const Value::Dict& d = obj.as_dict();
      if (!d.is_namespace) {
        Value method = dict_method(obj, name);
        if (!method.is_undefined()) return method;
      }
      if (const Value* v = d.find_key(name)) return *v;
      return Value::undefined(fmt::format("'{} object' has no attribute '{}'", type_name(obj), name));
    }
    case Value::Kind::kList:
      if (name == "append" || name == "extend" || name == "insert" || name == "pop" || name == "remove" ||
          name == "clear" || name == "sort" || name == "reverse") {
        return mutating_method("list", name);
      }
      [[fallthrough]];
    default:
      return Value::undefined(fmt::format("'{} object' has no attribute '{}'", type_name(obj), name));
  }
}

Result<Value> get_item(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined: return undefined_error(obj);
    case Value::Kind::kDict:
      if (const Value* v = obj.as_dict().find(key)) return *v;
      break;
    case Value::Kind::kList:
    case Value::Kind::kString:
      if (is_integral(key)) {
        int64_t i = key.as_int();
        if (obj.is_list()) {
          const auto n = static_cast<int64_t>(obj.as_list().size());
          if (i < 0) i += n;
          if (i >= 0 && i < n) return obj.as_list()[static_cast<size_t>(i)];
        } else {
          const std::string& s = obj.as_string();
          const std::vector<size_t> offsets = code_point_offsets(s);
          const auto n = static_cast<int64_t>(offsets.size()) - 1;
          if (i < 0) i += n;
          if (i >= 0 && i < n) {
            const auto k = static_cast<size_t>(i);
            return Value(std::string_view(s).substr(offsets[k], offsets[k + 1] - offsets[k]));
          }
        }
        return Value::undefined(fmt::format("{} object has no element {}", type_name(obj), key.as_int()));
      }
      break;
    default: break;
  }
  if (key.is_string()) return get_attribute(obj, key.as_string());
  return Value::undefined(fmt::format("{} object has no element {}", type_name(obj), key.repr()));
}

Result<Value> get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) return undefined_error(obj);
  if (!obj.is_list() && !obj.is_string()) return invalid_argument("'{}' object is not subscriptable", type_name(obj));
  auto bound_of = [](const Value& v, std::string_view what) -> Result<std::optional<int64_t>> {
    if (v.is_undefined() || v.is_none()) return std::optional<int64_t>();
    if (!is_integral(v)) return invalid_argument("slice {} must be an integer or None, not {}", what, type_name(v));
    return std::optional<int64_t>(v.as_int());
  };
  HXRT_ASSIGN_OR_RETURN(const std::optional<int64_t> a, bound_of(start, "start"));
  HXRT_ASSIGN_OR_RETURN(const std::optional<int64_t> b, bound_of(stop, "stop"));
  HXRT_ASSIGN_OR_RETURN(const std::optional<int64_t> c, bound_of(step, "step"));
  const int64_t st = c.value_or(1);
  if (st == 0) return invalid_argument("slice step cannot be zero");
  std::vector<size_t> offsets;
  int64_t n = 0;
  if (obj.is_list()) {
    n = static_cast<int64_t>(obj.as_list().size());
  } else {
    offsets = code_point_offsets(obj.as_string());
    n = static_cast<int64_t>(offsets.size()) - 1;
  }
  // CPython's PySlice_AdjustIndices.
  auto adjust = [&](std::optional<int64_t> v, int64_t fallback) {
    if (!v.has_value()) return fallback;
    int64_t x = *v;
    if (x < 0) {
      x += n;
      if (x < 0) x = st < 0 ? -1 : 0;
    } else if (x >= n) {
      x = st < 0 ? n - 1 : n;
    }
    return x;
  };
  const int64_t from = adjust(a, st < 0 ? n - 1 : 0);
  const int64_t to = adjust(b, st < 0 ? -1 : n);
  std::vector<int64_t> picked;
  for (int64_t i = from; st > 0 ? i < to : i > to; i += st) picked.push_back(i);
  if (obj.is_list()) {
    Value::List out;
    for (const int64_t i : picked) out.push_back(obj.as_list()[static_cast<size_t>(i)]);
    return Value(std::move(out));
  }
  std::string out;
  const std::string& s = obj.as_string();
  for (const int64_t i : picked) {
    const auto k = static_cast<size_t>(i);
    out.append(s, offsets[k], offsets[k + 1] - offsets[k]);
  }
  return Value(std::move(out));
}

// --- filters ---

namespace {

using FilterFn = Result<Value> (*)(const Value& input, Arguments& args);
using TestFn = Result<bool> (*)(const Value& input, Arguments& args);

// jinja2's make_attrgetter: "a.b.0" looks up a, then b, then item 0.
Result<Value> attribute_path(const Value& item, const Value& path) {
  if (is_integral(path)) return get_item(item, path);
  if (!path.is_string()) return invalid_argument("attribute must be a string or an integer");
  Value v = item;
  for (const std::string& part : split_on(path.as_string(), ".", -1)) {
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    int64_t index = 0;
    if (numeric && std::from_chars(part.data(), part.data() + part.size(), index).ec != std::errc()) {
      return invalid_argument("attribute path index {} is out of range", part);
    }
    HXRT_ASSIGN_OR_RETURN(v, get_item(v, numeric ? Value(index) : Value(part)));
  }
  return v;
}

Value case_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(to_lower(v.as_string()));
  return v;
}

Result<Value> filter_default(const Value& input, Arguments& args) {
  ArgReader r(args, "default");
  const Value fallback = r.get(0, "default_value", Value(""));
  const Value boolean = r.get(1, "boolean", Value(false));
  HXRT_RETURN_IF_ERROR(r.finish());
  if (input.is_undefined() || (boolean.truthy() && !input.truthy())) return fallback;
  return input;
}

Result<Value> filter_length(const Value& input, Arguments& args) {
  HXRT_RETURN_IF_ERROR(ArgReader(args, "length").finish());
  switch (input.kind()) {
    case Value::Kind::kString: return Value(static_cast<int64_t>(code_point_count(input.as_string())));
    case Value::Kind::kList: return Value(static_cast<int64_t>(input.as_list().size()));
    case Value::Kind::kDict: return Value(static_cast<int64_t>(input.as_dict().entries.size()));
    case Value::Kind::kUndefined: return Value(0);
    default: return invalid_argument("object of type '{}' has no len()", type_name(input));
  }
}

Result<Value> filter_string_case(const Value& input, std::string_view name, Arguments& args) {
  HXRT_RETURN_IF_ERROR(ArgReader(args, name).finish());
  const std::string s = input.str();
  if (name == "upper") return Value(to_upper(s));
  if (name == "lower") return Value(to_lower(s));
  if (name == "capitalize") return Value(capitalize(s));
  return Value(jinja_title(s));
}
Result<Value> filter_upper(const Value& v, Arguments& a) { return filter_string_case(v, "upper", a); }
Result<Value> filter_lower(const Value& v, Arguments& a) { return filter_string_case(v, "lower", a); }
Result<Value> filter_capitalize(const Value& v, Arguments& a) { return filter_string_case(v, "capitalize", a); }
Result<Value> filter_title(const Value& v, Arguments& a) { return filter_string_case(v, "title", a); }

Result<Value> filter_trim(const Value& input, Arguments& args) {
  ArgReader r(args, "trim");
  const Value chars = r.get(0, "chars", Value::none());
  HXRT_RETURN_IF_ERROR(r.finish());
  const std::string s = input.str();
  if (chars.is_none()) return Value(strip(s, true, true));
  return Value(strip_chars(s, chars.str(), true, true));
}

Result<Value> filter_tojson(const Value& input, Arguments& args) {
  ArgReader r(args, "tojson");
  const Value ensure_ascii = r.get(0, "ensure_ascii", Value(false));
  const Value indent = r.get(1, "indent", Value::none());
  const Value separators = r.get(2, "separators", Value::none());
  const Value sort_keys = r.get(3, "sort_keys", Value(false));
  HXRT_RETURN_IF_ERROR(r.finish());
  JsonStyle style;
  style.ensure_ascii = ensure_ascii.truthy();
  style.sort_keys = sort_keys.truthy();
  if (is_integral(indent)) {
    style.indent = static_cast<int>(std::clamp<int64_t>(indent.as_int(), 0, 64));
  } else if (!indent.is_none()) {
    return invalid_argument("tojson(): indent must be an integer");
  }
  if (!separators.is_none()) {
    if (!separators.is_list() || separators.as_list().size() != 2 || !separators.as_list()[0].is_string() ||
        !separators.as_list()[1].is_string()) {
      return invalid_argument("tojson(): separators must be a pair of strings");
    }
    style.separators.emplace(separators.as_list()[0].as_string(), separators.as_list()[1].as_string());
  }
  HXRT_ASSIGN_OR_RETURN(std::string json, to_json(input, style));
  return Value(std::move(json));
}

Result<Value> filter_join(const Value& input, Arguments& args) {
  ArgReader r(args, "join");
  const Value separator = r.get(0, "d", Value(""));
  const Value attribute = r.get(1, "attribute", Value::none());
  HXRT_RETURN_IF_ERROR(r.finish());
  HXRT_ASSIGN_OR_RETURN(Value::List items, iterate(input));
  std::string out;
  const std::string sep = separator.str();
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += sep;
    if (!attribute.is_none()) {
      HXRT_ASSIGN_OR_RETURN(Value v, attribute_path(items[i], attribute));
      out += v.str();
    } else {
      out += items[i].str();
    }
  }
  return Value(std::move(out));
}

Result<Value> filter_items(const Value& input, Arguments& args) {
  HXRT_RETURN_IF_ERROR(ArgReader(args, "items").finish());
  if (input.is_undefined()) return Value(Value::List{});
  if (!input.is_dict()) return invalid_argument("items(): can only be applied to a mapping, not {}", type_name(input));
  Value::List out;
  for (const auto& [k, v] : input.as_dict().entries) out.emplace_back(Value::List{k, v});
  return Value(std::move(out));
}

Result<Value> filter_list(const Value& input, Arguments& args) {
  HXRT_RETURN_IF_ERROR(ArgReader(args, "list").finish());
  HXRT_ASSIGN_OR_RETURN(Value::List items, iterate(input));
  return Value(std::move(items));
}

Result<Value> filter_first_last(const Value& input, Arguments& args, bool first) {
  HXRT_RETURN_IF_ERROR(ArgReader(args, first ? "first" : "last").finish());
  HXRT_ASSIGN_OR_RETURN(Value::List items, iterate(input));
  if (items.empty()) return Value::undefined(fmt::format("No {} item, sequence was empty.", first ? "first" : "last"));
  return first ? items.front() : items.back();
}
Result<Value> filter_first(const Value& v, Arguments& a) { return filter_first_last(v, a, true); }
Result<Value> filter_last(const Value& v, Arguments& a) { return filter_first_last(v, a, false); }

Result<Value> filter_string(const Value& input, Arguments& args) {
  HXRT_RETURN_IF_ERROR(ArgReader(args, "string").finish());
  return Value(input.str());
}

Result<Value> filter_safe(const Value& input, Arguments& args) {
  HXRT_RETURN_IF_ERROR(ArgReader(args, "safe").finish());
  return input;
}

Result<Value> filter_int(const Value& input, Arguments& args) {
  ArgReader r(args, "int");
  const Value fallback = r.get(0, "default", Value(0));
  const Value base = r.get(1, "base", Value(10));
  HXRT_RETURN_IF_ERROR(r.finish());
  if (is_integral(input)) return Value(input.as_int());
  if (input.is_float()) {
    const double d = input.as_double();
    if (!std::isfinite(d) || std::fabs(d) > 9.2e18) return fallback;
    return Value(static_cast<int64_t>(d));
  }
  if (input.is_string()) {
    const std::string s(strip(input.as_string(), true, true));
    std::string digits;
    for (const char c : s) {
      if (c != '_') digits.push_back(c);
    }
    size_t used = 0;
    try {
      const long long v = std::stoll(digits, &used, static_cast<int>(is_integral(base) ? base.as_int() : 10));
      if (used == digits.size()) return Value(static_cast<int64_t>(v));
    } catch (...) {  // NOLINT(bugprone-empty-catch): not a number; jinja2 falls back to float() then the default
    }
    try {
      const double d = std::stod(s, &used);
      if (used == s.size() && std::isfinite(d)) return Value(static_cast<int64_t>(d));
    } catch (...) {  // NOLINT(bugprone-empty-catch)
    }
  }
  return fallback;
}

Result<Value> filter_float(const Value& input, Arguments& args) {
  ArgReader r(args, "float");
  const Value fallback = r.get(0, "default", Value(0.0));
  HXRT_RETURN_IF_ERROR(r.finish());
  if (input.is_number()) return Value(input.as_double());
  if (input.is_string()) {
    const std::string s(strip(input.as_string(), true, true));
    size_t used = 0;
    try {
      const double d = std::stod(s, &used);
      if (used == s.size()) return Value(d);
    } catch (...) {  // NOLINT(bugprone-empty-catch): not a number: the default
    }
  }
  return fallback;
}

Result<Value> filter_abs(const Value& input, Arguments& args) {
  HXRT_RETURN_IF_ERROR(ArgReader(args, "abs").finish());
  if (is_integral(input)) return Value(input.as_int() < 0 ? -input.as_int() : input.as_int());
  if (input.is_float()) return Value(std::fabs(input.as_double()));
  return invalid_argument("bad operand type for abs(): '{}'", type_name(input));
}

Result<Value> filter_round(const Value& input, Arguments& args) {
  ArgReader r(args, "round");
  const Value precision = r.get(0, "precision", Value(0));
  const Value method = r.get(1, "method", Value("common"));
  HXRT_RETURN_IF_ERROR(r.finish());
  if (!input.is_number()) return invalid_argument("round(): '{}' is not a number", type_name(input));
  if (!is_integral(precision)) return invalid_argument("round(): precision must be an integer");
  const int64_t digits = precision.as_int();
  const std::string how = method.str();
  if (how == "common") {
    if (is_integral(input) && digits >= 0) return Value(input.as_int());  // Python's round(int, n) is the int
    const double x = input.as_double();
    if (digits >= 0 && digits <= 300 && std::isfinite(x)) {
      // Python rounds the exact binary value to `digits` decimals, ties to even; so does printf.
      std::vector<char> text(static_cast<size_t>(digits) + 320);
      std::snprintf(text.data(), text.size(), "%.*f", static_cast<int>(digits), x);
      return Value(std::strtod(text.data(), nullptr));
    }
    const double scale = std::pow(10.0, static_cast<double>(digits));
    return Value(std::nearbyint(x * scale) / scale);
  }
  const double scale = std::pow(10.0, static_cast<double>(digits));
  const double x = input.as_double() * scale;
  if (how == "ceil") return Value(std::ceil(x) / scale);
  if (how == "floor") return Value(std::floor(x) / scale);
  return invalid_argument("round(): method must be 'common', 'ceil' or 'floor'");
}

Result<Value> filter_replace(const Value& input, Arguments& args) {
  ArgReader r(args, "replace");
  const Value from = r.get(0, "old");
  const Value to = r.get(1, "new");
  const Value count = r.get(2, "count", Value::none());
  HXRT_RETURN_IF_ERROR(r.finish());
  return Value(replace_all(input.str(), from.str(), to.str(), is_integral(count) ? count.as_int() : -1));
}

Result<Value> filter_reverse(const Value& input, Arguments& args) {
  HXRT_RETURN_IF_ERROR(ArgReader(args, "reverse").finish());
  if (input.is_string()) return get_slice(input, Value(), Value(), Value(-1));
  HXRT_ASSIGN_OR_RETURN(Value::List items, iterate(input));
  std::reverse(items.begin(), items.end());
  return Value(std::move(items));
}

Result<Value> filter_indent(const Value& input, Arguments& args) {
  ArgReader r(args, "indent");
  const Value width = r.get(0, "width", Value(4));
  const Value first = r.get(1, "first", Value(false));
  const Value blank = r.get(2, "blank", Value(false));
  HXRT_RETURN_IF_ERROR(r.finish());
  const std::string indention =
      width.is_string() ? width.as_string() : std::string(static_cast<size_t>(std::max<int64_t>(0, width.as_int())), ' ');
  // jinja2 appends a newline, then splits into lines (so a trailing newline is kept as it was).
  std::vector<std::string> lines = split_on(input.str() + "\n", "\n", -1);
  lines.pop_back();
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      out += '\n';
      if (blank.truthy() || !lines[i].empty()) out += indention;
    }
    out += lines[i];
  }
  if (first.truthy()) out = indention + out;
  return Value(std::move(out));
}

Result<Value> filter_center(const Value& input, Arguments& args) {
  ArgReader r(args, "center");
  const Value width = r.get(0, "width", Value(80));
  HXRT_RETURN_IF_ERROR(r.finish());
  const std::string s = input.str();
  const auto n = static_cast<int64_t>(code_point_count(s));
  const int64_t w = is_integral(width) ? std::min<int64_t>(width.as_int(), 1 << 20) : 80;
  if (w <= n) return Value(s);
  const int64_t pad = w - n;
  const int64_t left = pad / 2 + (pad & w & 1);  // CPython's str.center
  return Value(std::string(static_cast<size_t>(left), ' ') + s + std::string(static_cast<size_t>(pad - left), ' '));
}

Result<Value> filter_escape(const Value& input, Arguments& args) {
  HXRT_RETURN_IF_ERROR(ArgReader(args, "escape").finish());
  std::string out;
  for (const char c : input.str()) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return Value(std::move(out));
}

Result<Value> filter_wordcount(const Value& input, Arguments& args) {
  HXRT_RETURN_IF_ERROR(ArgReader(args, "wordcount").finish());
  return Value(static_cast<int64_t>(split_whitespace(input.str(), -1).size()));
}

Result<Value> filter_attr(const Value& input, Arguments& args) {
  ArgReader r(args, "attr");
  const Value name = r.get(0, "name");
  HXRT_RETURN_IF_ERROR(r.finish());
  return get_attribute(input, name.str());
}

Result<Value::List> sorted(Value::List items, bool reverse, bool case_sensitive, const Value& attribute) {
  std::vector<std::pair<Value, Value>> keyed;
  for (Value& item : items) {
    Value key = item;
    if (!attribute.is_none()) {
      HXRT_ASSIGN_OR_RETURN(key, attribute_path(item, attribute));
    }
    keyed.emplace_back(case_key(key, case_sensitive), std::move(item));
  }
  Status failure;
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    Result<int> c = order(reverse ? b.first : a.first, reverse ? a.first : b.first, "<");
    if (!c.ok()) {
      if (failure.ok()) failure = c.status();
      return false;
    }
    return *c < 0;
  });
  HXRT_RETURN_IF_ERROR(failure);
  Value::List out;
  for (auto& [k, v] : keyed) out.push_back(std::move(v));
  return out;
}

Result<Value> filter_sort(const Value& input, Arguments& args) {
  ArgReader r(args, "sort");
  const Value reverse = r.get(0, "reverse", Value(false));
  const Value case_sensitive = r.get(1, "case_sensitive", Value(false));
  const Value attribute = r.get(2, "attribute", Value::none());
  HXRT_RETURN_IF_ERROR(r.finish());
  HXRT_ASSIGN_OR_RETURN(Value::List items, iterate(input));
  HXRT_ASSIGN_OR_RETURN(Value::List out, sorted(std::move(items), reverse.truthy(), case_sensitive.truthy(), attribute));
  return Value(std::move(out));
}

Result<Value> filter_dictsort(const Value& input, Arguments& args) {
  ArgReader r(args, "dictsort");
  const Value case_sensitive = r.get(0, "case_sensitive", Value(false));
  const Value by = r.get(1, "by", Value("key"));
  const Value reverse = r.get(2, "reverse", Value(false));
  HXRT_RETURN_IF_ERROR(r.finish());
  Arguments no_arguments;
  HXRT_ASSIGN_OR_RETURN(Value pairs, filter_items(input, no_arguments));
  const Value attribute(by.str() == "value" ? int64_t{1} : int64_t{0});
  HXRT_ASSIGN_OR_RETURN(Value::List out,
                        sorted(pairs.as_list(), reverse.truthy(), case_sensitive.truthy(), attribute));
  return Value(std::move(out));
}

Result<Value> filter_unique(const Value& input, Arguments& args) {
  ArgReader r(args, "unique");
  const Value case_sensitive = r.get(0, "case_sensitive", Value(false));
  const Value attribute = r.get(1, "attribute", Value::none());
  HXRT_RETURN_IF_ERROR(r.finish());
  HXRT_ASSIGN_OR_RETURN(Value::List items, iterate(input));
  Value::List out;
  Value::List seen;
  for (const Value& item : items) {
    Value key = item;
    if (!attribute.is_none()) {
      HXRT_ASSIGN_OR_RETURN(key, attribute_path(item, attribute));
    }
    key = case_key(key, case_sensitive.truthy());
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return s.equals(key); })) continue;
    seen.push_back(key);
    out.push_back(item);
  }
  return Value(std::move(out));
}

Result<Value> filter_min_max(const Value& input, Arguments& args, bool max) {
  ArgReader r(args, max ? "max" : "min");
  const Value case_sensitive = r.get(0, "case_sensitive", Value(false));
  const Value attribute = r.get(1, "attribute", Value::none());
  HXRT_RETURN_IF_ERROR(r.finish());
  HXRT_ASSIGN_OR_RETURN(Value::List items, iterate(input));
  if (items.empty()) return Value::undefined(fmt::format("No aggregated item, sequence was empty."));
  HXRT_ASSIGN_OR_RETURN(Value::List out, sorted(std::move(items), false, case_sensitive.truthy(), attribute));
  return max ? out.back() : out.front();
}
Result<Value> filter_min(const Value& v, Arguments& a) { return filter_min_max(v, a, false); }
Result<Value> filter_max(const Value& v, Arguments& a) { return filter_min_max(v, a, true); }

Result<Value> filter_sum(const Value& input, Arguments& args) {
  ArgReader r(args, "sum");
  const Value attribute = r.get(0, "attribute", Value::none());
  Value total = r.get(1, "start", Value(0));
  HXRT_RETURN_IF_ERROR(r.finish());
  HXRT_ASSIGN_OR_RETURN(Value::List items, iterate(input));
  for (const Value& item : items) {
    Value v = item;
    if (!attribute.is_none()) {
      HXRT_ASSIGN_OR_RETURN(v, attribute_path(item, attribute));
    }
    HXRT_ASSIGN_OR_RETURN(total, binary_operator("+", total, v));
  }
  return total;
}

// select / reject / selectattr / rejectattr: `attr` true for the *attr forms.
Result<Value> select_items(const Value& input, Arguments& args, bool keep, bool attr) {
  HXRT_ASSIGN_OR_RETURN(Value::List items, iterate(input));
  size_t next = 0;
  Value attribute;
  if (attr) {
    if (args.positional.empty()) return invalid_argument("selectattr/rejectattr need an attribute name");
    attribute = args.positional[next++];
  }
  std::string test;
  if (next < args.positional.size()) test = args.positional[next++].str();
  Arguments test_args;
  test_args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(next), args.positional.end());
  test_args.keyword = args.keyword;
  Value::List out;
  for (const Value& item : items) {
    Value v = item;
    if (attr) {
      HXRT_ASSIGN_OR_RETURN(v, attribute_path(item, attribute));
    }
    bool pass = false;
    if (test.empty()) {
      pass = v.truthy();
    } else {
      Arguments a = test_args;
      HXRT_ASSIGN_OR_RETURN(pass, apply_test(test, v, a));
    }
    if (pass == keep) out.push_back(item);
  }
  return Value(std::move(out));
}
Result<Value> filter_select(const Value& v, Arguments& a) { return select_items(v, a, true, false); }
Result<Value> filter_reject(const Value& v, Arguments& a) { return select_items(v, a, false, false); }
Result<Value> filter_selectattr(const Value& v, Arguments& a) { return select_items(v, a, true, true); }
Result<Value> filter_rejectattr(const Value& v, Arguments& a) { return select_items(v, a, false, true); }

Result<Value> filter_map(const Value& input, Arguments& args) {
  HXRT_ASSIGN_OR_RETURN(Value::List items, iterate(input));
  Value::List out;
  Value attribute;
  Value fallback;
  for (const auto& [k, v] : args.keyword) {
    if (k == "attribute") attribute = v;
    if (k == "default") fallback = v;
  }
  if (!attribute.is_undefined()) {
    for (const Value& item : items) {
      HXRT_ASSIGN_OR_RETURN(Value v, attribute_path(item, attribute));
      out.push_back(v.is_undefined() && !fallback.is_undefined() ? fallback : v);
    }
    return Value(std::move(out));
  }
  if (args.positional.empty()) return invalid_argument("map() needs a filter name or attribute=");
  const std::string filter = args.positional[0].str();
  Arguments rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& item : items) {
    Arguments a = rest;
    HXRT_ASSIGN_OR_RETURN(Value v, apply_filter(filter, item, a));
    out.push_back(std::move(v));
  }
  return Value(std::move(out));
}

const std::map<std::string_view, FilterFn>& filters() {
  static const auto* table = new std::map<std::string_view, FilterFn>{
      {"abs", filter_abs},
      {"attr", filter_attr},
      {"capitalize", filter_capitalize},
      {"center", filter_center},
      {"count", filter_length},
      {"d", filter_default},
      {"default", filter_default},
      {"dictsort", filter_dictsort},
      {"e", filter_escape},
      {"escape", filter_escape},
      {"first", filter_first},
      {"float", filter_float},
      {"indent", filter_indent},
      {"int", filter_int},
      {"items", filter_items},
      {"join", filter_join},
      {"last", filter_last},
      {"length", filter_length},
      {"list", filter_list},
      {"lower", filter_lower},
      {"map", filter_map},
      {"max", filter_max},
      {"min", filter_min},
      {"reject", filter_reject},
      {"rejectattr", filter_rejectattr},
      {"replace", filter_replace},
      {"reverse", filter_reverse},
      {"round", filter_round},
      {"safe", filter_safe},
      {"select", filter_select},
      {"selectattr", filter_selectattr},
      {"sort", filter_sort},
      {"string", filter_string},
      {"sum", filter_sum},
      {"title", filter_title},
      {"tojson", filter_tojson},
      {"trim", filter_trim},
      {"unique", filter_unique},
      {"upper", filter_upper},
      {"wordcount", filter_wordcount},
  };
  return *table;
}

// --- tests ---

Result<bool> no_args(Arguments& args, std::string_view name) {
  HXRT_RETURN_IF_ERROR(ArgReader(args, name).finish());
  return true;
}

Result<bool> test_defined(const Value& v, Arguments& a) {
  HXRT_RETURN_IF_ERROR(no_args(a, "defined").status());
  return !v.is_undefined();
}
Result<bool> test_undefined(const Value& v, Arguments& a) {
  HXRT_RETURN_IF_ERROR(no_args(a, "undefined").status());
  return v.is_undefined();
}
Result<bool> test_none(const Value& v, Arguments& a) {
  HXRT_RETURN_IF_ERROR(no_args(a, "none").status());
  return v.is_none();
}
Result<bool> test_boolean(const Value& v, Arguments& a) {
  HXRT_RETURN_IF_ERROR(no_args(a, "boolean").status());
  return v.is_bool();
}
Result<bool> test_true(const Value& v, Arguments& a) {
  HXRT_RETURN_IF_ERROR(no_args(a, "true").status());
  return v.is_bool() && v.as_bool();
}
Result<bool> test_false(const Value& v, Arguments& a) {
  HXRT_RETURN_IF_ERROR(no_args(a, "false").status());
  return v.is_bool() && !v.as_bool();
}
Result<bool> test_string(const Value& v, Arguments& a) {
  HXRT_RETURN_IF_ERROR(no_args(a, "string").status());
  return v.is_string();
}
Result<bool> test_mapping(const Value& v, Arguments& a) {
  HXRT_RETURN_IF_ERROR(no_args(a, "mapping").status());
  return v.is_dict() && !v.as_dict().is_namespace;
}
Result<bool> test_number(const Value& v, Arguments& a) {
  HXRT_RETURN_IF_ERROR(no_args(a, "number").status());
  return v.is_number();
}
Result<bool> test_integer(const Value& v, Arguments& a) {
  HXRT_RETURN_IF_ERROR(no_args(a, "integer").status());
  return v.is_int();
}
Result<bool> test_float(const Value& v, Arguments& a) {
  HXRT_RETURN_IF_ERROR(no_args(a, "float").status());
  return v.is_float();
}
Result<bool> test_iterable(const Value& v, Arguments& a) {
  HXRT_RETURN_IF_ERROR(no_args(a, "iterable").status());
  return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
}
Result<bool> test_sequence(const Value& v, Arguments& a) {
  HXRT_RETURN_IF_ERROR(no_args(a, "sequence").status());
  return v.is_list() || (v.is_dict() && !v.as_dict().is_namespace) || v.is_string();
}
Result<bool> test_callable(const Value& v, Arguments& a) {
  HXRT_RETURN_IF_ERROR(no_args(a, "callable").status());
  return v.is_function();
}
Result<bool> test_odd_even(const Value& v, Arguments& a, bool odd) {
  HXRT_RETURN_IF_ERROR(no_args(a, odd ? "odd" : "even").status());
  if (!is_integral(v)) return invalid_argument("{} test: '{}' is not an integer", odd ? "odd" : "even", type_name(v));
  return (v.as_int() % 2 != 0) == odd;
}
Result<bool> test_odd(const Value& v, Arguments& a) { return test_odd_even(v, a, true); }
Result<bool> test_even(const Value& v, Arguments& a) { return test_odd_even(v, a, false); }
Result<bool> test_divisibleby(const Value& v, Arguments& a) {
  ArgReader r(a, "divisibleby");
  const Value n = r.get(0, "num");
  HXRT_RETURN_IF_ERROR(r.finish());
  if (!is_integral(v) || !is_integral(n)) return invalid_argument("divisibleby test needs integers");
  if (n.as_int() == 0) return invalid_argument("divisibleby 0");
  return v.as_int() % n.as_int() == 0;
}
Result<bool> test_compare(const Value& v, Arguments& a, std::string_view op) {
  ArgReader r(a, op);
  const Value other = r.get(0, "b");
  HXRT_RETURN_IF_ERROR(r.finish());
  return compare(op, v, other);
}
Result<bool> test_eq(const Value& v, Arguments& a) { return test_compare(v, a, "=="); }
Result<bool> test_ne(const Value& v, Arguments& a) { return test_compare(v, a, "!="); }
Result<bool> test_lt(const Value& v, Arguments& a) { return test_compare(v, a, "<"); }
Result<bool> test_le(const Value& v, Arguments& a) { return test_compare(v, a, "<="); }
Result<bool> test_gt(const Value& v, Arguments& a) { return test_compare(v, a, ">"); }
Result<bool> test_ge(const Value& v, Arguments& a) { return test_compare(v, a, ">="); }
Result<bool> test_in(const Value& v, Arguments& a) { return test_compare(v, a, "in"); }
Result<bool> test_sameas(const Value& v, Arguments& a) {
  ArgReader r(a, "sameas");
  const Value other = r.get(0, "other");
  HXRT_RETURN_IF_ERROR(r.finish());
  if (v.kind() != other.kind()) return false;
  switch (v.kind()) {
    case Value::Kind::kList: return &v.as_list() == &other.as_list();
    case Value::Kind::kDict: return &v.as_dict() == &other.as_dict();
    default: return v.equals(other);
  }
}
Result<bool> test_case(const Value& v, Arguments& a, bool upper) {
  HXRT_RETURN_IF_ERROR(no_args(a, upper ? "upper" : "lower").status());
  if (!v.is_string()) return false;
  const std::string& s = v.as_string();
  return (upper ? to_upper(s) : to_lower(s)) == s && (upper ? to_lower(s) : to_upper(s)) != s;
}
Result<bool> test_lower(const Value& v, Arguments& a) { return test_case(v, a, false); }
Result<bool> test_upper(const Value& v, Arguments& a) { return test_case(v, a, true); }
Result<bool> test_filter(const Value& v, Arguments& a) {
  HXRT_RETURN_IF_ERROR(no_args(a, "filter").status());
  return v.is_string() && filters().count(v.as_string()) != 0;
}

const std::map<std::string_view, TestFn>& tests() {
  static const auto* table = new std::map<std::string_view, TestFn>{
      {"!=", test_ne},           {"<", test_lt},
      {"<=", test_le},           {"==", test_eq},
      {">", test_gt},            {">=", test_ge},
      {"boolean", test_boolean}, {"callable", test_callable},
      {"defined", test_defined}, {"divisibleby", test_divisibleby},
      {"eq", test_eq},           {"equalto", test_eq},
      {"even", test_even},       {"false", test_false},
      {"filter", test_filter},   {"float", test_float},
      {"ge", test_ge},           {"greaterthan", test_gt},
      {"gt", test_gt},           {"in", test_in},
      {"integer", test_integer}, {"iterable", test_iterable},
      {"le", test_le},           {"lessthan", test_lt},
      {"lower", test_lower},     {"lt", test_lt},
      {"mapping", test_mapping}, {"ne", test_ne},
      {"none", test_none},       {"number", test_number},
      {"odd", test_odd},         {"sameas", test_sameas},
      {"sequence", test_sequence}, {"string", test_string},
      {"true", test_true},       {"undefined", test_undefined},
      {"upper", test_upper},
  };
  return *table;
}

}  // namespace

Result<Value> apply_filter(std::string_view name, const Value& input, Arguments& args) {
  const auto it = filters().find(name);
  if (it == filters().end()) return invalid_argument("unknown filter '{}'", name);
  return it->second(input, args);
}

Result<bool> apply_test(std::string_view name, const Value& input, Arguments& args) {
  const auto it = tests().find(name);
  if (it == tests().end()) return invalid_argument("unknown test '{}'", name);
  return it->second(input, args);
}

bool is_filter(std::string_view name) { return filters().count(name) != 0; }
bool is_test(std::string_view name) { return tests().count(name) != 0; }

Value::Dict builtin_globals() {
  Value::Dict globals;
  globals.set(Value("range"), Value(Function([](Arguments& args) -> Result<Value> {
    if (!args.keyword.empty()) return invalid_argument("range() takes no keyword arguments");
    const auto& p = args.positional;
    if (p.empty() || p.size() > 3) return invalid_argument("range() takes 1 to 3 arguments ({} given)", p.size());
    for (const Value& v : p) {
      if (!is_integral(v)) return invalid_argument("range(): '{}' object cannot be interpreted as an integer", type_name(v));
    }
    const int64_t start = p.size() == 1 ? 0 : p[0].as_int();
    const int64_t stop = p.size() == 1 ? p[0].as_int() : p[1].as_int();
    const int64_t step = p.size() == 3 ? p[2].as_int() : 1;
    if (step == 0) return invalid_argument("range() arg 3 must not be zero");
    constexpr int64_t kMaxRange = 1 << 20;  // the sandbox's MAX_RANGE is 100000; a little more room here
    Value::List out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (static_cast<int64_t>(out.size()) >= kMaxRange) {
        return invalid_argument("range() is too big (more than {} items)", kMaxRange);
      }
      out.emplace_back(i);
    }
    return Value(std::move(out));
  })));
  auto make_dict = [](bool is_namespace) {
    return Function([is_namespace](Arguments& args) -> Result<Value> {
      Value::Dict d;
      d.is_namespace = is_namespace;
      for (const Value& p : args.positional) {
        if (!p.is_dict()) return invalid_argument("{}(): positional arguments must be mappings", is_namespace ? "namespace" : "dict");
        for (const auto& [k, v] : p.as_dict().entries) d.set(k, v);
      }
      for (const auto& [k, v] : args.keyword) d.set(Value(k), v);
      return Value(std::move(d));
    });
  };
  globals.set(Value("namespace"), Value(make_dict(true)));
  globals.set(Value("dict"), Value(make_dict(false)));
  return globals;
}

}  // namespace hxrt::llm::jinja
